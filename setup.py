"""Build hook: the native tracer is built with its own Makefiles and shipped inside the package.

setuptools stays the build backend (metadata in setup.cfg). Its build_py step also
runs `make` on a copy of native_tracer/ and puts the libraries, headers and name
tables under hbtool/native/ in the wheel, where hbtool.tracer finds them:

    hbtool/native/include/   hbtrace.h, hbtrace_*.h, hbtrace_env.def
    hbtool/native/lib/       libhbtrace.so
    hbtool/native/mpi/       include/, lib/libhbprof.so (only where mpicc was found)

The Makefiles are the tracer's one build (the tests, the examples and scripts/install.sh
use them too), so no second build system has to be kept in step with them. The wheel
holds a shared library, so it is tagged for the platform it was built on.

An editable install (`pip install -e .`, what scripts/install.sh does) builds nothing
here: hbtool then uses native_tracer/ of the checkout, built by `make`.
HBTOOL_BUILD_TRACER=0 installs the analyzer alone (hbtool config then says the tracer
is absent).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "native_tracer"
#: what goes into the wheel: (folder in the built copy, file patterns), under hbtool/native/
SHIPPED = [("include", ("*.h", "*.def")), ("lib", ("libhbtrace.so",)),
           ("mpi/include", ("*.h", "*.def")), ("mpi/lib", ("libhbprof.so",))]


def _make(args: list[str], what: str) -> None:
    r = subprocess.run(["make", "-s", *args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stdout[-4000:] + r.stderr[-4000:])
        raise SystemExit(f"hbtool: building {what} failed (see above); it needs gcc and make "
                         f"(Debian: apt-get install gcc make libc6-dev), or set HBTOOL_BUILD_TRACER=0 "
                         f"to install the analyzer without the tracer")


class BuildWithTracer(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False) or os.environ.get("HBTOOL_BUILD_TRACER", "1") == "0":
            return
        work = Path(os.path.abspath(self.get_finalized_command("build").build_temp)) / "native_tracer"
        if work.exists():
            shutil.rmtree(work)
        shutil.copytree(SOURCE, work, ignore=shutil.ignore_patterns("build", "lib", "bin", "*.o"))
        jobs = f"-j{min(os.cpu_count() or 1, 8)}"
        _make(["-C", str(work), jobs, "lib/libhbtrace.so"], "the tracer (libhbtrace.so)")
        mpicc = os.environ.get("MPICC", "mpicc")
        if shutil.which(mpicc):
            _make(["-C", str(work / "mpi"), jobs, "lib/libhbprof.so"], "the MPI profiler (libhbprof.so)")
        else:
            print(f"hbtool: {mpicc} not found: the MPI profiler (libhbprof.so) is not built; "
                  f"hbtool config says so", file=sys.stderr)
        dest = Path(self.build_lib) / "hbtool" / "native"
        if dest.exists():
            shutil.rmtree(dest)
        for folder, patterns in SHIPPED:
            for pattern in patterns:
                for f in sorted((work / folder).glob(pattern)):
                    (dest / folder).mkdir(parents=True, exist_ok=True)
                    shutil.copy2(f, dest / folder / f.name)


class BinaryDistribution(Distribution):
    """The wheel carries shared libraries: tag it for its platform, not as pure Python."""

    def has_ext_modules(self):
        return os.environ.get("HBTOOL_BUILD_TRACER", "1") != "0"


setup(cmdclass={"build_py": BuildWithTracer}, distclass=BinaryDistribution)
