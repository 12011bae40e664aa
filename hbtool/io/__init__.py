"""Readers and writers of every file hbtool takes in or gives out.

One entry function per data model picks a reader from the registry
(:mod:`hbtool.io.registry`) by magic bytes, content or suffix; each takes ``-``
for standard input:

* :func:`read_heartbeats` -> :class:`~hbtool.model.HeartbeatTrace`
* :func:`read_profile` -> :class:`~hbtool.model.SegmentProfile`
* :func:`read_queue_samples` -> :class:`~hbtool.model.QueueSamples`
* :func:`read_probes` -> :class:`~hbtool.model.ProbeStats`
* :func:`read_status` -> :class:`~hbtool.model.StatusSamples`

``write_heartbeats(trace, out)`` picks a registered writer by the output's suffix; the HSA
model has its own small reader and writer in :mod:`hbtool.io.hsa_model`.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import HbtoolError, UnknownFormatError
from ..model import BEAT_COLUMNS, EVENT_COLUMNS, HeartbeatTrace
from .registry import STDIN, ReadOptions, detect, read, writer

__all__ = ["read_heartbeats", "read_profile", "read_queue_samples", "read_probes", "read_status", "write_heartbeats",
           "heartbeat_writer", "detect", "read", "ReadOptions", "HeartbeatTrace", "BEAT_COLUMNS", "EVENT_COLUMNS"]

#: file suffixes a directory of runs is searched for (besides run directories)
_TABLE_SUFFIXES = (".csv", ".xlsx", ".parquet", ".pq", ".hbt")
_MAX_DEPTH = 4


def _read_runs_below(d: Path, depth: int = 0, stream: bool = False) -> HeartbeatTrace:
    """A directory of runs: every run directory and table file below it."""
    from .tabular import is_waits_table_name

    parts = []
    if depth < _MAX_DEPTH:
        for entry in sorted(d.iterdir()):
            if entry.name.startswith("."):
                continue
            if entry.is_dir():
                try:
                    parts.append(_read_one(entry, depth + 1, stream=False))
                except UnknownFormatError:
                    continue
            elif entry.suffix.lower() in _TABLE_SUFFIXES and not is_waits_table_name(entry):
                # (a parquet table's waits table beside it is read with it)
                parts.append(_read_one(entry, depth + 1, stream=False))
    if parts:
        return parts[0] if len(parts) == 1 else HeartbeatTrace.concat(parts)
    raise UnknownFormatError(
        f"{d}: directory holds no trace files (*.hbt from the tracer, legacy per-thread heartbeat "
        f"files, or csv/xlsx/parquet tables), nor any run directory below it"
    )


def _read_one(path: str | os.PathLike, depth: int = 0, stream: bool = False) -> HeartbeatTrace:
    options = ReadOptions(stream=stream)
    if isinstance(path, str) and path == STDIN:
        return read(STDIN, "heartbeats", options)
    p = Path(path)
    if p.is_dir():
        try:
            detect(p, "heartbeats")
        except UnknownFormatError:
            return _read_runs_below(p, depth)
    return read(p, "heartbeats", options)


def read_heartbeats(paths: str | os.PathLike | list, stream: bool = False) -> HeartbeatTrace:
    """Read heartbeats from one or more paths (files, run directories, directories of runs,
    or '-' for standard input in any format known by its content).

    stream: tracer traces (files or run directories) are read in bounded memory, their
    beats left in the files (a :class:`~hbtool.model.heartbeats.StreamedTrace`, which reads
    them only when asked); other inputs are read whole as always (and with them, all)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    if not paths:
        raise HbtoolError("no trace given")
    traces = [_read_one(p, stream=stream) for p in paths]
    return traces[0] if len(traces) == 1 else HeartbeatTrace.concat(traces)


def read_profile(path: str | os.PathLike):
    """A segment profile: an .hbp file or directory of the PMPI profiler, or a segment table."""
    return read(path, "profile")


def read_queue_samples(path: str | os.PathLike, item_size: int | None = None, period: float | None = None):
    """Queue samples of one run: a trace file or run directory of the tracer, or a sample table."""
    return read(path, "queues", ReadOptions(item_size=item_size, period=period))


def read_probes(path: str | os.PathLike):
    """Timing-probe statistics of one run (a trace file or run directory of the tracer)."""
    return read(path, "probes")


def read_status(path: str | os.PathLike):
    """Machine-status samples of one run (a trace file or run directory of the tracer)."""
    return read(path, "status")


def heartbeat_writer(out: str, fmt: str | None = None):
    """The registered format that writes heartbeats to `out` in `fmt` (csv, xlsx, parquet, hbt;
    default: from the suffix, csv for '-'); an HbtoolError when there is none."""
    if fmt is None and out == STDIN:
        fmt = "csv"
    f = writer("heartbeats", name=fmt) if fmt else writer("heartbeats", suffix=Path(out).suffix)
    if f is None:
        raise HbtoolError(
            f"{out}: cannot tell the output format from the name: use a .csv, .xlsx, .parquet "
            f"or .hbt suffix, or --to"
        )
    return f


def write_heartbeats(trace: HeartbeatTrace, out: str, fmt: str | None = None) -> list[str]:
    """Write `trace` to `out` in `fmt` (csv, xlsx, parquet, hbt; default: from the suffix,
    csv for '-'). Returns the paths written."""
    return heartbeat_writer(out, fmt).write(trace, out)
