"""Segment tables (SPEC 6): the segment profiles other tools can write (csv, parquet).

A segment table has one row per process and segment, with the columns

    rank, segment, duration_ns, computation, <feature>...

where every further column is an integer communication or I/O feature (counts or
bytes). The binary profiles of the tracer's PMPI profiler are read by
hbtool.io.hbprof; both give a hbtool.model.SegmentProfile.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .. import config
from ..errors import TraceFormatError
from ..model import SegmentProfile
from .registry import ReadOptions
from .tables import read_capped_table

REQUIRED = ("rank", "segment", "duration_ns", "computation")
#: optional columns that are not features
META_COLUMNS = ("run", "run_time_ns")


def read_segment_table(path: Path, options: ReadOptions) -> SegmentProfile:
    """The registry's reader of a segment table (csv or parquet)."""
    df = read_capped_table(path, config.MAX_PROFILE_ROWS, "segment table")
    return profile_from_frame(df, str(path), path.stem)


def _int_column(df: pd.DataFrame, col: str, path: str) -> np.ndarray:
    s = df[col]
    if s.isna().any():
        row = int(np.flatnonzero(s.isna().to_numpy())[0])
        raise TraceFormatError(f"{path}: column '{col}' is empty in row {row + 2}")
    if not pd.api.types.is_numeric_dtype(s):
        bad = pd.to_numeric(s, errors="coerce").isna()
        row = int(np.flatnonzero(bad.to_numpy())[0]) if bad.any() else 0
        raise TraceFormatError(f"{path}: column '{col}' holds '{s.iloc[row]}' in row {row + 2}: expected an integer")
    v = s.to_numpy()
    if v.dtype.kind == "f":
        if not np.isfinite(v).all() or (v != np.round(v)).any():
            raise TraceFormatError(f"{path}: column '{col}' must hold integers")
        if np.abs(v).max(initial=0) >= 2.0**63:
            raise TraceFormatError(f"{path}: column '{col}' holds a value too large for an integer")
    elif v.dtype.kind == "u" and len(v) and v.max() >= 2**63:
        raise TraceFormatError(f"{path}: column '{col}' holds a value too large for an integer")
    elif v.dtype.kind not in "iub":
        raise TraceFormatError(f"{path}: column '{col}' must hold integers")
    return v.astype(np.int64)


def profile_from_frame(df: pd.DataFrame, path: str, name: str) -> SegmentProfile:
    cols = {c.strip().lower(): c for c in map(str, df.columns)}
    missing = [c for c in REQUIRED if c not in cols]
    if missing:
        raise TraceFormatError(
            f"{path}: a segment table needs the columns {', '.join(REQUIRED)}; missing: {', '.join(missing)}")
    df = df.rename(columns={v: k for k, v in cols.items()})
    if not len(df):
        raise TraceFormatError(f"{path}: the segment table has no rows")
    rank = _int_column(df, "rank", path)
    seg = _int_column(df, "segment", path)
    dur = _int_column(df, "duration_ns", path)
    if (rank < 0).any() or (seg < 0).any():
        raise TraceFormatError(f"{path}: rank and segment must not be negative")
    if (dur < 0).any():
        row = int(np.flatnonzero(dur < 0)[0])
        raise TraceFormatError(f"{path}: negative duration_ns in row {row + 2}")
    comp = pd.to_numeric(df["computation"], errors="coerce").to_numpy(dtype=np.float64)
    if not np.isfinite(comp).all() or (comp < 0).any():
        row = int(np.flatnonzero(~np.isfinite(comp) | (comp < 0))[0])
        raise TraceFormatError(f"{path}: computation in row {row + 2} is not a number >= 0")
    fnames = [c for c in df.columns if c not in REQUIRED and c not in META_COLUMNS]
    feats = np.column_stack([_int_column(df, c, path) for c in fnames]).astype(np.float64) if fnames else \
        np.zeros((len(df), 0))
    key = seg * (int(rank.max()) + 1) + rank
    if len(np.unique(key)) != len(key):
        raise TraceFormatError(f"{path}: the same (rank, segment) appears twice")
    run_time = None
    if "run_time_ns" in df.columns:
        rt = pd.to_numeric(df["run_time_ns"], errors="coerce").dropna()
        if len(rt) and (rt > 0).all():
            run_time = int(rt.max())
    return SegmentProfile(name=name, rank=rank, segment=seg, duration_ns=dur, computation=comp, features=feats,
                          feature_names=fnames, run_time_ns=run_time, computation_source="table",
                          meta={"format": "table", "source": path})
