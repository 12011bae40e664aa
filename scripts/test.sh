#!/usr/bin/env bash
# Set-up command 2: install everything, then run the whole test suite.
#
# With no arguments: first the tests that read, write and check files (and build and run
# programs without timing them) two at a time (pytest-xdist, a test file per worker), then
# the tests that judge real programs by their timing one at a time, with the machine to
# themselves (the `alone` marker, tests/conftest.py). Both parts always run; the status is
# the first failing part's. With arguments: one pytest run with them, e.g.
#   bash scripts/test.sh -m slow          the long evaluations
#   bash scripts/test.sh tests/test_cli.py
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh || exit
if [ $# -gt 0 ]; then
  exec .venv/bin/python -m pytest -q "$@"
fi
# what the timing tests depend on, for reading a failure later: CPUs, hypervisor, steal so far
machine() {
  echo "machine: $(nproc) CPUs, $(grep -qw hypervisor /proc/cpuinfo 2>/dev/null && echo 'virtual' || echo 'no hypervisor flag'), \
steal $(awk '/^cpu /{print $9; exit}' /proc/stat 2>/dev/null) ticks in $(cut -d' ' -f1 /proc/uptime 2>/dev/null) s up"
}
machine
.venv/bin/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder -m "not slow and not alone" tests
first=$?
machine
.venv/bin/python -m pytest -q -m "not slow and alone" tests
second=$?
if [ "$first" -ne 0 ]; then exit "$first"; fi
exit "$second"
