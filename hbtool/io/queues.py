"""Queue samples (seed 002): from the tracer's files, or from a table any framework can write.

A sample table (csv or parquet) has one row per sample of one queue end:

    queue     name of the queue (text)
    t         end of the sampling period, in seconds (any origin; non-decreasing per queue and end)
    count     non-blocking transactions in the period (integer >= 0)
    blocked   1/0 or true/false: this end blocked at least once in the period

and optionally

    end        "consumer" (the head: pops; the default) or "producer" (the tail: pushes)
    item_size  bytes per item (else --item-size, else unknown)
    period     the period's realized length in seconds (else the time since the previous
               sample; the first sample of a queue end then uses --period, or the median)
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from .. import config
from ..errors import TraceFormatError
from ..model import QUEUE_ENDS, QUEUE_SAMPLE_COLUMNS, QueueSamples, conform
from .registry import ReadOptions
from .tables import read_capped_table

REQUIRED = ("queue", "t", "count", "blocked")
_TRUE = {"1", "true", "yes", "t", "y"}
_FALSE = {"0", "false", "no", "f", "n"}


def read_sample_table(path: Path, options: ReadOptions) -> QueueSamples:
    """The registry's reader of a sample table (csv or parquet)."""
    df = read_capped_table(path, config.MAX_QUEUE_SAMPLE_ROWS, "sample table")
    return samples_from_frame(df, os.fspath(path), path.stem, item_size=options.item_size, period=options.period)


def _numeric(df: pd.DataFrame, col: str, path: str, integer: bool) -> np.ndarray:
    s = df[col]
    v = pd.to_numeric(s, errors="coerce")
    bad = v.isna() | ~np.isfinite(v.to_numpy(dtype=float, na_value=np.nan))
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise TraceFormatError(f"{path}: column '{col}' holds '{s.iloc[row]}' in row {row + 2}: expected "
                               f"{'an integer' if integer else 'a number'}")
    a = v.to_numpy(dtype=float)
    if integer:
        frac = a != np.round(a)
        if frac.any():
            row = int(np.flatnonzero(frac)[0])
            raise TraceFormatError(f"{path}: column '{col}' holds '{s.iloc[row]}' in row {row + 2}: expected an integer")
        if (np.abs(a) > 2.0**62).any():
            row = int(np.flatnonzero(np.abs(a) > 2.0**62)[0])
            raise TraceFormatError(f"{path}: column '{col}' holds '{s.iloc[row]}' in row {row + 2}: too large")
        return a.astype(np.int64)
    return a


def _bool(df: pd.DataFrame, col: str, path: str) -> np.ndarray:
    s = df[col]
    if pd.api.types.is_bool_dtype(s):
        return s.to_numpy(dtype=bool)
    text = s.astype(str).str.strip().str.lower()
    # numbers written as 1.0/0.0 by some writers
    text = text.replace({"1.0": "1", "0.0": "0"})
    ok = text.isin(_TRUE | _FALSE)
    if not ok.all():
        row = int(np.flatnonzero(~ok.to_numpy())[0])
        raise TraceFormatError(f"{path}: column '{col}' holds '{s.iloc[row]}' in row {row + 2}: expected 1/0 or "
                               f"true/false")
    return text.isin(_TRUE).to_numpy()


def samples_from_frame(df: pd.DataFrame, path: str, run: str, item_size: int | None = None,
                       period: float | None = None) -> QueueSamples:
    df = df.rename(columns={c: str(c).strip().lower() for c in df.columns})
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise TraceFormatError(f"{path}: no column {', '.join(repr(m) for m in missing)}: a sample table needs "
                               f"queue, t, count, blocked (docs/formats.md)")
    if not len(df):
        raise TraceFormatError(f"{path}: no samples (the table has a header but no rows)")
    queue = df["queue"].astype(str).to_numpy()
    t = _numeric(df, "t", path, integer=False)
    count = _numeric(df, "count", path, integer=True)
    if (count < 0).any():
        row = int(np.flatnonzero(count < 0)[0])
        raise TraceFormatError(f"{path}: negative count {count[row]} in row {row + 2}: counts are transactions "
                               f"in a period, 0 or more")
    blocked = _bool(df, "blocked", path)
    if "end" in df.columns:
        end = df["end"].astype(str).str.strip().str.lower().to_numpy()
        bad = ~np.isin(end, QUEUE_ENDS)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise TraceFormatError(f"{path}: column 'end' holds '{df['end'].iloc[row]}' in row {row + 2}: expected "
                                   f"consumer or producer")
    else:
        end = np.full(len(df), "consumer", dtype=object)
    if item_size is not None:
        size = np.full(len(df), item_size, dtype=np.int64)
    elif "item_size" in df.columns:
        size = _numeric(df, "item_size", path, integer=True)
        if (size <= 0).any():
            row = int(np.flatnonzero(size <= 0)[0])
            raise TraceFormatError(f"{path}: item_size {size[row]} in row {row + 2}: expected a positive number of bytes")
    else:
        size = np.full(len(df), -1, dtype=np.int64)
    given = _numeric(df, "period", path, integer=False) if "period" in df.columns else None
    if given is not None and (given <= 0).any():
        row = int(np.flatnonzero(given <= 0)[0])
        raise TraceFormatError(f"{path}: period {given[row]} in row {row + 2}: expected seconds above 0")
    frames = []
    key = pd.DataFrame({"queue": queue, "end": end})
    for (q, e), idx in key.groupby(["queue", "end"], sort=True).indices.items():
        tt = t[idx]
        d = np.diff(tt)
        if (d < 0).any():
            k = int(np.flatnonzero(d < 0)[0])
            raise TraceFormatError(f"{path}: samples of queue '{q}' ({e}) are out of time order at row {idx[k + 1] + 2} "
                                   f"(t = {tt[k + 1]} after {tt[k]}): sort the table by t")
        if given is not None:
            per = given[idx]
        else:
            per = np.r_[np.nan, d]
            first = period if period is not None else (float(np.median(d[d > 0])) if (d > 0).any() else np.nan)
            per[0] = first
            if np.isnan(per[0]):
                raise TraceFormatError(f"{path}: queue '{q}' ({e}) has one sample and no 'period' column: give "
                                       f"--period SECONDS")
        frames.append(pd.DataFrame({"run": run, "process": 0, "queue": q, "end": e, "t": tt, "period_s": per,
                                    "target_period_s": np.nan, "count": count[idx], "blocked": blocked[idx],
                                    "item_size": size[idx]}))
    samples = conform(pd.concat(frames, ignore_index=True), QUEUE_SAMPLE_COLUMNS)
    queues = samples.groupby("queue", sort=True).agg(item_size=("item_size", "first")).reset_index()
    queues.insert(1, "process", 0)
    queues.insert(2, "queue_id", np.arange(len(queues)))
    queues.insert(3, "capacity", -1)
    queues["opened_t"] = np.nan
    return QueueSamples(samples=samples, queues=queues, meta={"run": run, "source": path, "format": "table"})
