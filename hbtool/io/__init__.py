"""Readers and writers of heartbeat traces.

``read_heartbeats(path)`` sniffs the format (magic bytes first, then suffix)
and returns one :class:`HeartbeatTrace`; ``write_heartbeats(trace, out)``
picks a writer by the output's suffix.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import HbtoolError, InputNotFoundError, TraceFormatError, UnknownFormatError
from ..model import BEAT_COLUMNS, EVENT_COLUMNS, HeartbeatTrace

__all__ = ["read_heartbeats", "write_heartbeats", "sniff", "HeartbeatTrace", "BEAT_COLUMNS",
           "EVENT_COLUMNS", "WRITERS"]

_ZIP = b"PK\x03\x04"
_PARQUET = b"PAR1"


def _head(path: Path, n: int = 4096) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(n)
    except OSError as exc:
        raise HbtoolError(f"{path}: cannot read ({exc.strerror})") from exc


def sniff(path: str | os.PathLike) -> str:
    """Name the format of a file: hbt, parquet, xlsx, legacy, csv (raises UnknownFormatError)."""
    from .hbt import is_hbt
    from .legacy import looks_like_legacy_text

    p = Path(path)
    head = _head(p)
    suffix = p.suffix.lower()
    if is_hbt(head):
        return "hbt"
    if head[:4] == _PARQUET or suffix in (".parquet", ".pq"):
        return "parquet"
    if head[:4] == _ZIP or suffix in (".xlsx", ".xlsm"):
        return "xlsx"
    if looks_like_legacy_text(head):
        return "legacy"
    if suffix in (".csv", ".txt", ".tsv") or (b"," in head.split(b"\n", 1)[0] and b"\0" not in head):
        return "csv"
    if suffix == ".hbt":
        return "hbt"  # the reader says what is wrong with it
    raise UnknownFormatError(
        f"{p}: unknown trace format (not an hbtrace file, csv, xlsx, parquet or legacy heartbeat "
        f"text): see docs/formats.md"
    )


_TABLE_SUFFIXES = (".csv", ".xlsx", ".parquet", ".pq", ".hbt")
_MAX_DEPTH = 4


def _read_dir(d: Path, depth: int = 0) -> HeartbeatTrace:
    """A run directory (tracer files or legacy per-thread files), or a directory of runs."""
    from .hbt import SUFFIX, is_hbt, read_hbt
    from .legacy import looks_like_legacy_text, read_legacy

    files = sorted(f for f in d.iterdir() if f.is_file() and not f.name.startswith("."))
    hbts = [f for f in files if f.suffix == SUFFIX and is_hbt(_head(f, 8))]
    if hbts:
        return read_hbt([str(f) for f in hbts], run=d.resolve().name)
    legacy = []
    for f in files:
        if f.suffix.lower() == ".xlsx":
            if _is_legacy_xlsx(f):
                legacy.append(f)
        elif looks_like_legacy_text(_head(f, 512)):
            legacy.append(f)
    if legacy:
        return read_legacy(legacy, run=d.resolve().name)
    # a directory of runs: every run directory and table file below it
    parts = []
    if depth < _MAX_DEPTH:
        for entry in sorted(d.iterdir()):
            if entry.name.startswith("."):
                continue
            if entry.is_dir():
                try:
                    parts.append(_read_dir(entry, depth + 1))
                except UnknownFormatError:
                    continue
            elif entry.suffix.lower() in _TABLE_SUFFIXES:
                parts.append(_read_one(str(entry)))
    if parts:
        return parts[0] if len(parts) == 1 else HeartbeatTrace.concat(parts)
    raise UnknownFormatError(
        f"{d}: directory holds no trace files (*.hbt from the tracer, legacy per-thread heartbeat "
        f"files, or csv/xlsx/parquet tables), nor any run directory below it"
    )


def _is_legacy_xlsx(path: Path) -> bool:
    import pandas as pd

    from .legacy import looks_like_legacy_columns

    try:
        cols = pd.read_excel(path, engine="calamine", sheet_name=0, nrows=0).columns
    except Exception:  # not a readable workbook: let the long-format reader say why
        return False
    return looks_like_legacy_columns(cols)


def _read_one(path: str) -> HeartbeatTrace:
    if path == "-":
        from .tabular import read_csv

        return read_csv("-")
    p = Path(path)
    if not p.exists():
        raise InputNotFoundError(f"{path}: no such file or directory")
    if p.is_dir():
        return _read_dir(p)
    fmt = sniff(p)
    if fmt == "hbt":
        from .hbt import read_hbt

        return read_hbt([str(p)], run=p.stem)
    if fmt == "legacy":
        from .legacy import read_legacy

        return read_legacy([p], run=p.name)
    if fmt == "parquet":
        from .tabular import read_parquet

        return read_parquet(str(p))
    if fmt == "xlsx":
        from .legacy import looks_like_legacy_columns, read_legacy
        from .tabular import read_workbook, read_xlsx_long

        sheets = read_workbook(str(p))
        first = next(iter(sheets.values()), None)
        if first is not None and looks_like_legacy_columns(first.columns):
            return read_legacy([p], run=p.stem)
        return read_xlsx_long(str(p), sheets)
    from .tabular import read_csv

    return read_csv(str(p))


def read_heartbeats(paths: str | os.PathLike | list) -> HeartbeatTrace:
    """Read heartbeats from one or more paths (files, run directories, or '-' for csv on stdin)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    if not paths:
        raise HbtoolError("no trace given")
    traces = []
    for p in paths:
        try:
            traces.append(_read_one(str(p)))
        except (UnicodeDecodeError, ValueError, KeyError, IndexError) as exc:
            # a format-specific parser choked on malformed content
            raise TraceFormatError(f"{p}: unreadable trace ({exc})") from exc
        except OSError as exc:
            raise HbtoolError(f"{p}: cannot read ({exc.strerror or exc})") from exc
    return traces[0] if len(traces) == 1 else HeartbeatTrace.concat(traces)


def _writer(fmt: str):
    from . import hbt, tabular

    return {"csv": tabular.write_csv, "xlsx": tabular.write_xlsx, "parquet": tabular.write_parquet,
            "hbt": hbt.write_hbt}[fmt]


WRITERS = {".csv": "csv", ".xlsx": "xlsx", ".parquet": "parquet", ".pq": "parquet", ".hbt": "hbt"}


def write_heartbeats(trace: HeartbeatTrace, out: str, fmt: str | None = None) -> list[str]:
    """Write `trace` to `out` in `fmt` (default: from the suffix). Returns the paths written."""
    if fmt is None:
        fmt = WRITERS.get(Path(out).suffix.lower()) if out != "-" else "csv"
        if fmt is None:
            raise HbtoolError(
                f"{out}: cannot tell the output format from the name: use a .csv, .xlsx, .parquet "
                f"or .hbt suffix, or --to"
            )
    return _writer(fmt)(trace, out)
