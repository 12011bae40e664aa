"""hbtool info: per run and thread, what the trace holds."""

from __future__ import annotations

import click

from .output import emit, output_options, warn

COLUMNS = ["run", "process", "thread", "beats", "first_s", "last_s", "duration_s", "mean_rate", "ended"]
HEADERS = {"mean_rate": "beats/s", "first_s": "first_s", "duration_s": "duration_s"}


@click.command()
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@output_options
def info(paths, fmt):
    """Beats, time span, mean heart rate and ending of every thread.

    PATH is a tracer file (.hbt), a run directory (tracer files, or legacy
    per-thread files), a csv/xlsx/parquet table, or - for standard input (any
    of these formats but a run directory).

    \b
    Examples:
      hbtool info sample_traces/jacobi-normal
      hbtool info --format json run.xlsx | jq '.threads[] | select(.ending != "returned")'
    """
    from ..analyzers.summary import summarize_threads
    from ..io import read_heartbeats

    trace = read_heartbeats(list(paths))
    warn(trace.warnings)
    if not len(trace.beats) and not len(trace.events):
        raise click.UsageError(f"{', '.join(paths)}: the trace holds no heartbeats and no lifecycle records")
    s = summarize_threads(trace)
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
        }
        runs.append(run)
        where = f"{len(procs)} process{'es' if len(procs) != 1 else ''}, " if procs else ""
        clock = f", clock {procs[0]['clock']}" if procs else ""
        preamble.append(
            f"run {name}: {run['format']} ({run['source']}), {where}{run['threads']} threads, "
            f"{run['beats']} beats{clock}"
        )
        if meta.get("note"):
            preamble.append(f"  note: {meta['note']}")
    preamble.append("")
    multi = (s["process"].nunique() > 1) if len(s) else False
    cols = COLUMNS if multi else [c for c in COLUMNS if c != "process"]
    if fmt == "csv":
        cols = COLUMNS + ["ending", "os_tids"]
    emit(fmt, rows, cols, key="threads", extra={"runs": runs}, preamble=preamble, headers=HEADERS)
