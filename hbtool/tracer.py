"""Where the native tracer lives: its headers, libhbtrace.so and the MPI profiler.

In order: $HBTOOL_TRACER_DIR; the copy a wheel ships inside the package
(hbtool/native/, built by setup.py); native_tracer/ of a source checkout (an
editable install, built with make).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .errors import TracerNotBuiltError

PACKAGED = Path(__file__).resolve().parent / "native"
CHECKOUT = Path(__file__).resolve().parent.parent / "native_tracer"


@dataclass(frozen=True)
class TracerPaths:
    root: Path
    include: Path
    libdir: Path
    library: Path
    profiler: Path
    source: str   # how it was found: "HBTOOL_TRACER_DIR", "installed with hbtool", "source checkout"


def _locate() -> tuple[Path, str]:
    env = os.environ.get("HBTOOL_TRACER_DIR")
    if env:
        return Path(env), "HBTOOL_TRACER_DIR"
    if PACKAGED.is_dir():
        return PACKAGED, "installed with hbtool"
    return CHECKOUT, "source checkout"


def _how_to_build(root: Path, source: str) -> str:
    if source == "HBTOOL_TRACER_DIR":
        return f"HBTOOL_TRACER_DIR={root} holds no built tracer: point it at a native_tracer folder built with make"
    if source == "installed with hbtool":
        return "reinstall hbtool on a machine with gcc and make (pip install hbtool builds the tracer)"
    return f"build it with 'make -C {root}' (or set HBTOOL_TRACER_DIR)"


def tracer_paths(check: bool = True) -> TracerPaths:
    """The tracer's paths; with `check`, raise TracerNotBuiltError unless the library exists."""
    root, source = _locate()
    paths = TracerPaths(root, root / "include", root / "lib", root / "lib" / "libhbtrace.so",
                        root / "mpi" / "lib" / "libhbprof.so", source)
    if check and not paths.library.is_file():
        raise TracerNotBuiltError(f"tracer library not found at {paths.library}: {_how_to_build(root, source)}")
    return paths


def profiler_library(check: bool = True) -> Path:
    """The PMPI segment profiler, libhbprof.so (raises TracerNotBuiltError when absent)."""
    p = tracer_paths(check=False)
    if check and not p.profiler.is_file():
        if p.source == "installed with hbtool":
            how = "no mpicc was found when hbtool was installed: install an MPI (Debian: apt-get install " \
                  "libopenmpi-dev openmpi-bin) and reinstall hbtool"
        else:
            how = f"build it with 'make -C {p.root / 'mpi'}' (needs mpicc)"
        raise TracerNotBuiltError(f"MPI profiler not found at {p.profiler}: {how}")
    return p.profiler
