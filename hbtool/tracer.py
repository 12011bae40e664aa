"""Where the native tracer lives (include dir, libhbtrace.so)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .errors import TracerNotBuiltError


@dataclass(frozen=True)
class TracerPaths:
    root: Path
    include: Path
    libdir: Path
    library: Path


def tracer_paths(check: bool = True) -> TracerPaths:
    """Locate the tracer: $HBTOOL_TRACER_DIR, else native_tracer/ beside the package."""
    env = os.environ.get("HBTOOL_TRACER_DIR")
    root = Path(env) if env else Path(__file__).resolve().parent.parent / "native_tracer"
    paths = TracerPaths(root, root / "include", root / "lib", root / "lib" / "libhbtrace.so")
    if check and not paths.library.is_file():
        raise TracerNotBuiltError(
            f"tracer library not found at {paths.library}: build it with 'make -C {root}' "
            f"(or set HBTOOL_TRACER_DIR)"
        )
    return paths


def profiler_library(check: bool = True) -> Path:
    """The PMPI segment profiler, native_tracer/mpi/lib/libhbprof.so."""
    root = tracer_paths(check=False).root
    lib = root / "mpi" / "lib" / "libhbprof.so"
    if check and not lib.is_file():
        raise TracerNotBuiltError(
            f"MPI profiler not found at {lib}: build it with 'make -C {root / 'mpi'}' (needs mpicc)")
    return lib
