"""hbtool info: per run and thread, what the trace holds."""

from __future__ import annotations

import click

from .hsa_common import beats_option, threads_phrase
from .output import emit, output_options, warn

COLUMNS = ["run", "process", "thread", "beats", "first_s", "last_s", "duration_s", "mean_rate", "ended"]
HEADERS = {"mean_rate": "beats/s", "first_s": "first_s", "duration_s": "duration_s", "wait_pct": "waiting %"}
#: one number format per column (times to 0.1 ms)
DECIMALS = {"first_s": 4, "last_s": 4, "duration_s": 4, "mean_rate": 1, "wait_s": 4, "wait_pct": 1}


@click.command()
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@beats_option
@output_options
def info(paths, beats, fmt):
    """Beats, time span, mean heart rate and ending of every thread.

    PATH is a tracer file (.hbt), a run directory (tracer files, or legacy
    per-thread files), a csv/xlsx/parquet table, or - for standard input (any
    of these formats but a run directory).

    \b
    Examples:
      hbtool info sample_traces/jacobi-normal
      hbtool info --format json run.xlsx | jq '.threads[] | select(.ending != "returned")'
    """
    import numpy as np

    from ..analyzers.summary import summarize_threads, wait_times
    from .hsa_common import read_all

    trace = read_all(paths, beats=beats, need_beats=False, stream=True)
    if not trace.beat_count() and not len(trace.events):
        raise click.UsageError(f"{', '.join(paths)}: the trace holds no heartbeats and no lifecycle records")
    s = summarize_threads(trace, beatless=True)
    waits = wait_times(trace)
    if len(waits):
        s = s.merge(waits[["run", "process", "thread", "wait_s"]], on=["run", "process", "thread"], how="left")
        with np.errstate(divide="ignore", invalid="ignore"):
            s["wait_pct"] = 100 * s["wait_s"] / s["duration_s"].where(s["duration_s"] > 0)
    rows = s.to_dict(orient="records")
    runs = []
    preamble = []
    for name, meta in trace.runs.items():
        sub = s[s["run"] == name]
        procs = meta.get("processes", [])
        run = {
            "run": name,
            "format": meta.get("format"),
            "source": meta.get("source"),
            "threads": int(len(sub)),
            "beats": int(sub["beats"].sum()),
            "processes": [
                {k: p[k] for k in ("process", "pid", "rank", "host", "clock", "preload", "lost_records", "file")}
                for p in procs
            ],
            "lifecycle": bool(meta.get("lifecycle")),
            "live": bool(meta.get("live")),
        }
        runs.append(run)
        where = f"{len(procs)} process{'es' if len(procs) != 1 else ''}, " if procs else ""
        clock = f", clock {procs[0]['clock']}" if procs else ""
        threads = threads_phrase(sub)
        chosen = meta.get("beats") or {}
        used = sorted(set(chosen.values()))
        have: dict[str, int] = {}
        unused: dict[str, int] = {}
        for process, counts in (meta.get("beats_available") or {}).items():
            for src, n in counts.items():
                have[src] = have.get(src, 0) + n
                if src != chosen.get(process):
                    unused[src] = unused.get(src, 0) + n
        run["beats_source"] = used
        run["beats_available"] = have
        other = [f"{n} {src}" for src, n in sorted(unused.items())]
        preamble.append(
            f"run {name}: {run['format']} ({run['source']}), {where}{threads}, "
            f"{run['beats']} {'/'.join(used) + ' ' if used else ''}beats{clock}"
            + (f"; also {', '.join(other)} beats (--beats picks)" if other else "")
        )
        if meta.get("live"):
            who = ", ".join(str(p["pid"]) for p in procs if p.get("live"))
            preamble.append(f"  live: the traced program (pid {who}) is still running: a snapshot of the records "
                            f"written so far")
        if meta.get("note"):
            preamble.append(f"  note: {meta['note']}")
    preamble.append("")
    multi = (s["process"].nunique() > 1) if len(s) else False
    cols = COLUMNS if multi else [c for c in COLUMNS if c != "process"]
    if len(waits):  # the time each thread waited in barriers, critical sections, ... (tracer wait records)
        cols = cols[:-1] + ["wait_s", "wait_pct"] + cols[-1:]
    if fmt == "csv":
        cols = COLUMNS + ["ending", "os_tids"] + (["wait_s", "wait_pct"] if len(waits) else [])
    emit(fmt, rows, cols, key="threads", extra={"runs": runs}, preamble=preamble, headers=HEADERS,
         decimals=DECIMALS)
