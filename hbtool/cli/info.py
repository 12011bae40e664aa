"""hbtool info: per run and thread, what the trace holds."""

from __future__ import annotations

import click

from .hsa_common import beats_option, threads_phrase
from .output import emit, output_options, warn

COLUMNS = ["run", "process", "thread", "beats", "first_s", "last_s", "duration_s", "mean_rate", "ended"]
HEADERS = {"mean_rate": "beats/s", "first_s": "first_s", "duration_s": "duration_s", "wait_pct": "waiting %",
           "kept_MiB": "kept MiB", "cpu_pct": "cpu %", "queued_pct": "queued %"}
#: one number format per column (times to 0.1 ms)
DECIMALS = {"first_s": 4, "last_s": 4, "duration_s": 4, "mean_rate": 1, "wait_s": 4, "wait_pct": 1, "kept_MiB": 1,
            "cpu_pct": 1, "queued_pct": 1}


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

    from ..analyzers.summary import cpu_shares, memory_retained, summarize_threads, wait_times
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
    kept = memory_retained(trace)
    if len(kept):   # the tracer's memory signal: what each thread allocated and did not free
        by_key = {(str(r), int(p), int(t)): v for r, p, t, v in
                  zip(kept["run"], kept["process"], kept["thread"], kept["retained"])}
        s["kept_MiB"] = [by_key.get((str(r), int(p), int(t)), np.nan) / 2**20
                         for r, p, t in zip(s["run"], s["process"], s["thread"])]
    shares = cpu_shares(trace)
    if len(shares):   # the tracer's sched records: how much of its time each thread ran, and waited for a CPU
        by_key = {(str(r), int(p), int(t)): (c, q) for r, p, t, c, q in
                  zip(shares["run"], shares["process"], shares["thread"], shares["cpu_pct"], shares["queued_pct"])}
        got = [by_key.get((str(r), int(p), int(t)), (np.nan, np.nan))
               for r, p, t in zip(s["run"], s["process"], s["thread"])]
        s["cpu_pct"] = [c for c, _ in got]
        s["queued_pct"] = [q for _, q in got]
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
        mem_line = _memory_line(trace, name, sub)
        if mem_line:
            preamble.append(mem_line)
        mpi = _mpi_ranks(meta)
        if mpi:
            line, pid_rank, ends, failure = mpi
            preamble.append(line)
            run["mpi"] = {"ranks": ends, "failure": failure}
            by_proc = {p["process"]: pid_rank.get(p["pid"]) for p in procs}
            how = {e["rank"]: e["ended"] for e in ends}
            for r in rows:
                if r["run"] == name:
                    rank = by_proc.get(r["process"])
                    r["rank"] = -1 if rank is None else rank
                    if rank is not None and str(r.get("ended", "")).startswith("no end record") and \
                            rank in how and how[rank] != "reached MPI_Finalize":
                        r["ended"] = f"MPI profile: {how[rank]}"
    preamble.append("")
    multi = (s["process"].nunique() > 1) if len(s) else False
    cols = COLUMNS if multi else [c for c in COLUMNS if c != "process"]
    has_rank = any("rank" in r for r in rows)
    if has_rank:
        for r in rows:
            r.setdefault("rank", -1)
        cols = [c for c in cols if c != "process"][:1] + (["process"] if multi else []) + ["rank"] + \
            [c for c in cols if c not in ("run", "process")]
    if len(waits):  # the time each thread waited in barriers, critical sections, ... (tracer wait records)
        cols = cols[:-1] + ["wait_s", "wait_pct"] + cols[-1:]
    if len(kept):
        cols = cols[:-1] + ["kept_MiB"] + cols[-1:]
    if len(shares):
        cols = cols[:-1] + ["cpu_pct", "queued_pct"] + cols[-1:]
    if fmt == "csv":
        cols = COLUMNS + ["ending", "os_tids"] + (["wait_s", "wait_pct"] if len(waits) else []) + \
            (["kept_MiB"] if len(kept) else []) + (["cpu_pct", "queued_pct"] if len(shares) else []) + \
            (["rank"] if has_rank else [])
    emit(fmt, rows, cols, key="threads", extra={"runs": runs}, preamble=preamble, headers=HEADERS,
         decimals=DECIMALS)


def _memory_line(trace, run: str, sub) -> str:
    """'  memory: ...' for a run whose trace has the tracer's memory signal, else ''."""
    m = trace.memory
    if not len(m):
        return ""
    m = m[m["run"].astype(str) == str(run)]
    res = m.loc[m["scope"] == "process", "resident"]
    res = res[res >= 0]
    parts = []
    if len(res):
        parts.append(f"resident up to {res.max() / 2**20:.1f} MiB")
    if "kept_MiB" in sub and sub["kept_MiB"].notna().any():
        top = sub.loc[sub["kept_MiB"].idxmax()]
        parts.append(f"the threads kept {sub['kept_MiB'].clip(lower=0).sum():.1f} MiB of what they allocated "
                     f"(most: thread {int(top['thread'])}, {top['kept_MiB']:.1f} MiB)")
    return "  memory: " + "; ".join(parts) if parts else ""


def _mpi_ranks(meta: dict):
    """An MPI run recorded with 'hbtool record --mpi': its profile (run file or per-rank files,
    beside the trace) gives each rank's pid and how it ended. Returns (one line for the
    preamble, {pid: rank}, the ranks' ends, how the run failed or None), or None when
    there is no profile there."""
    from pathlib import Path

    from ..errors import HbtoolError
    from ..io import read_profile

    src = meta.get("source")
    if not src:
        return None
    d = Path(src)
    if not d.exists():   # standard input, a table's run: nothing beside it
        return None
    d = d if d.is_dir() else d.parent
    if not list(d.glob("*.hbp")):
        return None
    try:
        prof = read_profile(d)
    except HbtoolError as exc:
        return f"  MPI profile beside it cannot be read: {exc}", {}, [], None
    ends = prof.meta.get("rank_ends") or []
    pid_rank = {e["pid"]: e["rank"] for e in ends if e.get("pid")}
    n = len(ends)
    failure = prof.meta.get("failure")
    line = f"  MPI: {n} rank{'s' if n != 1 else ''} (the 'rank' column; -1: not a rank, e.g. mpirun); " + \
        (f"the run failed: {failure}" if failure else "every rank reached MPI_Finalize")
    return line, pid_rank, ends, failure
