"""Open a segment profile of any supported kind (tables now; the PMPI profiler's binary files)."""

from __future__ import annotations

import os
from pathlib import Path

from ..model.segments import SegmentProfile
from ..errors import InputNotFoundError, UnknownFormatError


def read_profile(path: str) -> SegmentProfile:
    p = Path(path)
    if not p.exists():
        raise InputNotFoundError(f"{path}: No such file or directory")
    if p.is_dir():
        from .hbprof import read_profile_dir

        return read_profile_dir(os.fspath(p))
    suffix = p.suffix.lower()
    with open(p, "rb") as f:
        head = f.read(8)
    if head == b"HBPROF\0\0" or suffix == ".hbp":
        from .hbprof import read_hbprof

        return read_hbprof(os.fspath(p))
    if suffix in (".csv", ".parquet") or suffix == ".txt":
        from .profile import read_segment_table

        return read_segment_table(os.fspath(p))
    raise UnknownFormatError(
        f"{path}: not a segment profile hbtool knows (expected an .hbp profile from the tracer's PMPI profiler, "
        f"or a segment table .csv or .parquet)")
