"""Reader of the seed paper's tracer output (the shape of its published data set).

One file per thread: whitespace-separated text with the header
``Beat    ThreadNum   iter    Timestamp    Heartbeat Rate`` (Timestamp in ns
since the thread's first beat), usually named ``2020-00``, ``2020-01``, ...;
or the same columns in one ``.xlsx`` workbook per thread (column names may
carry leading spaces). A directory of such files is one run.

In the raw text the beat counter restarts at 1 after beat 999 and Timestamp
then counts from the time of the last beat before the restart; the reader
rebuilds one continuous sequence. Threads of a legacy run have no common time
origin (each starts at 0), and no lifecycle records.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from .. import config
from ..errors import TraceFormatError, reason
from ..model import HeartbeatTrace
from .registry import ReadOptions, first_hole, head, refuse_holes
from .tables import check_workbook

LEGACY_COLUMNS = ["beat", "threadnum", "iter", "timestamp", "rate"]
_NAME_RE = re.compile(r"(\d+)$")


def looks_like_legacy_text(head: bytes) -> bool:
    try:
        first = head.decode("utf-8", errors="strict").lstrip().splitlines()[0]
    except (UnicodeDecodeError, IndexError):
        return False
    tokens = first.lower().split()
    return len(tokens) >= 4 and tokens[0] == "beat" and "timestamp" in tokens


def looks_like_legacy_columns(columns) -> bool:
    cols = {str(c).strip().lower() for c in columns}
    return {"beat", "timestamp"} <= cols and ("threadnum" in cols or "iter" in cols)


def _thread_from_name(path: Path) -> int | None:
    m = _NAME_RE.search(path.stem if path.suffix.lower() == ".xlsx" else path.name)
    return int(m.group(1)) if m else None


def _rebuild(beat: np.ndarray, ts: np.ndarray, path) -> np.ndarray:
    """Continuous ns from per-block timestamps: a block restarts when Beat goes down."""
    t = np.empty(len(ts), dtype=np.int64)
    base = 0
    for i in range(len(ts)):
        if i and beat[i] <= beat[i - 1]:
            base = int(t[i - 1])
        if base + int(ts[i]) > config.MAX_TRACE_SPAN_NS:  # restarts that add up past int64's ns
            raise TraceFormatError(f"{path}: time stamps add up to more than 100 years: not a trace of one run")
        t[i] = base + ts[i]
    return t


def _parse_text(path: Path, warnings: list[str]) -> pd.DataFrame:
    rows = []
    bad = []
    refuse_holes(path, "a legacy heartbeat file")
    with open(path, "rb") as fh:
        header_seen = False
        for lineno, raw in enumerate(fh, 1):
            line = raw.decode("utf-8", errors="replace").strip()
            if not line:
                continue
            if not header_seen:
                header_seen = True
                if line.split()[0].lower() == "beat":
                    continue
            tokens = line.split()
            if len(line) > config.MAX_LEGACY_LINE or len(tokens) != 5:
                bad.append(lineno)
                continue
            try:
                b, th, it = int(tokens[0]), int(tokens[1]), int(tokens[2])
                ts = int(float(tokens[3]))
                float(tokens[4])
            except (ValueError, OverflowError):  # not a number, or an infinite time stamp
                bad.append(lineno)
                continue
            if b < 0 or not 0 <= ts <= config.MAX_TRACE_SPAN_NS or max(abs(b), abs(th), abs(it)) >= 2**63:
                bad.append(lineno)
                continue
            rows.append((b, th, it, ts))
    for lineno in bad[: config.MAX_WARNINGS_SHOWN]:
        warnings.append(f"{path}:{lineno}: malformed record skipped")
    if len(bad) > config.MAX_WARNINGS_SHOWN:
        warnings.append(f"{path}: {len(bad) - config.MAX_WARNINGS_SHOWN} more malformed records skipped")
    arr = np.array(rows, dtype=np.int64).reshape(-1, 4)
    return pd.DataFrame(arr, columns=["beat", "threadnum", "iter", "timestamp"])


def _parse_xlsx(path: Path) -> pd.DataFrame:
    refuse_holes(path, "a legacy workbook")
    check_workbook(path, "a legacy workbook")
    try:
        df = pd.read_excel(path, engine="calamine", sheet_name=0)
    except Exception as exc:  # calamine raises its own error types for corrupt files
        raise TraceFormatError(f"{path}: cannot read workbook ({reason(exc)})") from exc
    df.columns = [str(c).strip().lower() for c in df.columns]
    if not looks_like_legacy_columns(df.columns):
        raise TraceFormatError(f"{path}: no Beat/ThreadNum/iter/Timestamp columns")
    df = df.rename(columns={"heartbeat rate": "rate"})
    keep = [c for c in ("beat", "threadnum", "iter", "timestamp") if c in df.columns]
    df = df[keep].apply(pd.to_numeric, errors="coerce").dropna(subset=["beat", "timestamp"])
    # what no int64 nanosecond holds (inf, 1e30, fractions of a beat number) is not a record
    v = df.to_numpy(dtype=float, na_value=0.0)
    ok = np.isfinite(v).all(axis=1) & (np.abs(v) < 2.0**62).all(axis=1)
    ts = df["timestamp"].to_numpy(dtype=float)
    ok &= (ts >= 0) & (ts <= config.MAX_TRACE_SPAN_NS)
    return df[ok].fillna(-1).astype(np.int64)


def is_legacy_xlsx(path: Path) -> bool:
    """True when the workbook's first sheet has the legacy per-thread columns."""
    import pandas as pd

    hole, size = first_hole(path)
    if hole < size:  # no workbook: let the long-format reader say why
        return False
    try:
        check_workbook(path)
    except TraceFormatError:
        return False
    try:
        cols = pd.read_excel(path, engine="calamine", sheet_name=0, nrows=0).columns
    except Exception:  # not a readable workbook: let the long-format reader say why
        return False
    return looks_like_legacy_columns(cols)


def legacy_files(d: Path) -> list[Path]:
    """The legacy per-thread files of a run directory (text or xlsx)."""
    out = []
    for f in sorted(d.iterdir()):
        if not f.is_file() or f.name.startswith("."):
            continue
        if f.suffix.lower() == ".xlsx":
            if is_legacy_xlsx(f):
                out.append(f)
        elif looks_like_legacy_text(head(f, 512)):
            out.append(f)
    return out


def read_legacy_path(path: Path, options: ReadOptions) -> HeartbeatTrace:
    """The registry's reader: one legacy file, or a run directory of them."""
    if path.is_dir():
        return read_legacy(legacy_files(path), run=path.resolve().name)
    return read_legacy([path], run=path.name)


def read_legacy(paths: list[Path], run: str) -> HeartbeatTrace:
    """Read the per-thread files of one legacy run."""
    warnings: list[str] = []
    frames = []
    for i, path in enumerate(sorted(paths, key=lambda p: (_thread_from_name(p) is None, _thread_from_name(p) or 0, p.name))):
        df = _parse_xlsx(path) if path.suffix.lower() == ".xlsx" else _parse_text(path, warnings)
        if not len(df):
            warnings.append(f"{path}: no heartbeat records")
            continue
        named = _thread_from_name(path)
        if "threadnum" in df.columns and df["threadnum"].nunique() == 1:
            thread = int(df["threadnum"].iloc[0])
        else:
            thread = named if named is not None else i
        t_ns = _rebuild(df["beat"].to_numpy(np.int64), df["timestamp"].to_numpy(np.int64), path)
        frames.append(
            pd.DataFrame(
                {
                    "run": run,
                    "process": 0,
                    "thread": thread,
                    "seq": np.arange(len(df), dtype=np.int64),
                    "t_ns": t_ns,
                    "t": t_ns / 1e9,
                    "loop": -1,
                    "iteration": df["iter"].to_numpy(np.int64) if "iter" in df.columns else -1,
                }
            )
        )
    if not frames:
        raise TraceFormatError(f"{run}: no heartbeat records in any legacy file")
    beats = pd.concat(frames, ignore_index=True)
    if beats.groupby("thread")["seq"].apply(lambda s: s.duplicated().any()).any():
        # two files claim one thread number: keep them apart by file order
        warnings.append(f"{run}: several files carry the same thread number; threads renumbered by file")
        beats["thread"] = np.repeat(np.arange(len(frames)), [len(f) for f in frames])
    common = str(Path(paths[0]).parent) if paths else run
    return HeartbeatTrace(
        beats=beats,
        runs={run: {"format": "legacy", "source": common, "lifecycle": False,
                    "note": "legacy traces time each thread from its own first beat"}},
        warnings=warnings,
    )
