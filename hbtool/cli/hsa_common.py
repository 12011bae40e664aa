"""Shared by the commands that analyse heartbeats: read traces, pick the beats to use,
say which; feature tables for output."""

from __future__ import annotations

import click
import pandas as pd

from ..model import BEAT_CHOICES
from .output import warn
from .progress import progress


def beats_option(f):
    """Add --beats auto|api|openmp|mpi to a command (passed as `beats`)."""
    return click.option(
        "--beats", "beats", type=click.Choice(BEAT_CHOICES), default="auto", show_default=True,
        help="Which beats to analyse: the program's own (api), or those the tracer recorded with no change "
             "to it (openmp: loop chunks and worksharing constructs; mpi: blocking collectives); auto: per "
             "process, api where it has any, else openmp, else mpi.",
    )(f)


def read_all(paths, label="reading", beats="auto", need_beats=True, stream=False):
    """The traces at `paths` as one, with only the beats `beats` picks (HeartbeatTrace.with_beats).
    stream: tracer traces are read in bounded memory, their beats left in the files (for
    commands that need per-thread summaries and one thread's beats at a time)."""
    from ..errors import HbtoolError
    from ..io import read_heartbeats
    from ..model import HeartbeatTrace

    traces = []
    with progress(paths, label) as bar:
        for p in bar:
            traces.append(read_heartbeats(p, stream=stream))
    trace = traces[0] if len(traces) == 1 else HeartbeatTrace.concat(traces)
    warn(trace.warnings)
    had = trace.sources()
    trace = trace.with_beats(beats)
    if need_beats and not trace.beat_count():
        where = ", ".join(map(str, paths))
        if had:
            have = sorted({s for counts in had.values() for s in counts})
            raise HbtoolError(f"{where}: no {beats} beats in this trace (it has {', '.join(have)} beats: "
                              f"pick one with --beats)")
        raise HbtoolError(f"{where}: the trace holds no heartbeats: nothing to analyse")
    return trace


def beats_line(trace) -> str:
    """'beats: api' -- which beats were analysed, per process when they differ."""
    used: dict[str, list[str]] = {}
    for run, meta in trace.runs.items():
        for process, src in sorted((meta.get("beats") or {}).items()):
            used.setdefault(src, []).append(f"{run} process {process}" if len(trace.runs) > 1 else f"process {process}")
    if not used:
        return "beats: none"
    why = {"api": "the program's own", "openmp": "recorded by the tracer at OpenMP loop chunks and constructs",
           "mpi": "recorded by the tracer at blocking MPI collectives"}
    if len(used) == 1:
        (src,) = used
        return f"beats: {src} ({why.get(src, src)})"
    return "beats: " + "; ".join(f"{src} ({', '.join(who)})" for src, who in used.items())


def feature_rows(table: pd.DataFrame, text: bool = False) -> list[dict]:
    """Rows for output: NaN features as None, the reason a thread has none."""
    from ..analyzers.features import FEATURES

    rows = []
    for r in table.to_dict(orient="records"):
        out = {k: r[k] for k in ("run", "process", "thread", "beats", "reference")}
        for f in FEATURES:
            out[f] = r[f]
        out["na_reason"] = r["na_reason"] or ("" if text else None)
        out["ended"] = r.get("ended", "")
        rows.append(out)
    return rows


def threads_phrase(summary) -> str:
    """'5 threads (4 with beats)' of a summarize_threads(..., beatless=True) table."""
    n = len(summary)
    beating = int((summary["beats"] > 0).sum()) if n else 0
    return f"{n} thread{'s' if n != 1 else ''}" + (f" ({beating} with beats)" if beating != n else "")


def beats_used(trace) -> dict[str, dict[str, str]]:
    """For json: run -> {process: the source of the beats analysed}."""
    return {run: {str(p): src for p, src in sorted((meta.get("beats") or {}).items())}
            for run, meta in trace.runs.items()}
