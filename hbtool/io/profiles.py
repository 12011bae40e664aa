"""Open a segment profile of any supported kind (tables now; the PMPI profiler's binary files)."""

from __future__ import annotations

import os
from pathlib import Path

from ..analyzers.interference import SegmentProfile
from ..errors import InputNotFoundError, UnknownFormatError


def read_profile(path: str) -> SegmentProfile:
    p = Path(path)
    if not p.exists():
        raise InputNotFoundError(f"{path}: No such file or directory")
    if p.is_dir():
        raise UnknownFormatError(f"{path}: a directory: give the profile file itself")
    suffix = p.suffix.lower()
    if suffix in (".csv", ".parquet") or suffix == ".txt":
        from .profile import read_segment_table

        return read_segment_table(os.fspath(p))
    raise UnknownFormatError(
        f"{path}: not a segment profile hbtool knows (expected a segment table .csv or .parquet)")
