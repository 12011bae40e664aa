#!/usr/bin/env bash
# Install everything hbtool needs on a fresh Debian machine that has Python 3.11+ and gcc:
# Debian packages (compiler, make, Open MPI, clang with LLVM's OpenMP runtime libomp), a virtual environment .venv with hbtool and
# its Python dependencies, and the native tracer (native_tracer/lib/libhbtrace.so).
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

need=()
# gfortran: mpifort, for the MPI profiler's Fortran example and tests
for pkg in gcc make libc6-dev libopenmpi-dev openmpi-bin clang libomp-dev gfortran; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
  need+=("python3-venv")
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "install: Debian packages: ${need[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  # reuse packages the machine already has; pip adds what is missing
  python3 -m venv --system-site-packages .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'

make -s -C native_tracer -j2
make -s -C native_tracer/mpi -j2   # the PMPI segment profiler (needs mpicc)
echo "install: done (hbtool is .venv/bin/hbtool; tracer in native_tracer/lib)" >&2
