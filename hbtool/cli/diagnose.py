"""hbtool diagnose: which thread misbehaved, and how (seed 000 HSA)."""

from __future__ import annotations

import time

import click
import numpy as np

from .hsa_common import beats_line, beats_option, beats_used
from .output import emit, output_options, warn

#: the text table's columns (process only when a run has several); csv has every field json has
COLUMNS = ["run", "process", "thread", "status", "beats", "GTR", "GHR", "DTW", "progress", "compared_with", "reason"]
HEADERS = {"compared_with": "compared with", "kept_MiB": "kept MiB"}
#: what the text table's words mean, under it
LEGEND = [
    "GTR: the time the thread took for its beats / the reference's (1 = as fast, 2 = twice as slow);",
    "GHR: its mean heart rate / the reference's; DTW: distance between its heart-rate curve and the",
    "reference's (0 = the same shape); progress: its beats / the reference's (or the model's count).",
]
#: under the table when it shows WR
WR_LEGEND = ("WR: its own work in the parallel regions (time there less its waits) / that of the team's other "
             "workers\n  (median), or of the same thread of the reference run; the master (thread 0) only "
             "against a reference.")
#: under the table when it shows WS
WS_LEGEND = ("WS: work shift: its own work against its team's (the median of the others), construct by "
             "construct,\n  later in its beats over earlier, split where it changed most (1 = unchanged; a thread "
             "that slowed\n  down in its own work shifts up, the teammates that wait for it down); with a "
             "model, also this\n  run over the model's normal runs, for a thread slow from its first beats; "
             "where the trace\n  has a loop chunk's iterations, also its time per iteration against its "
             "teammates' of the same\n  loops over its whole run (IR).")
SS_LEGEND = ("SS: share shift (teams whose work is dealt out: a dynamic loop's chunks, tasks, sections): "
             "its units of\n  the team's work per window against its team's, later over earlier (1 = "
             "unchanged;\n  under 0.05: it stopped working while its team went on); with a model, also "
             "this run's share\n  over the model's normal runs', for a thread stopped from its first beats.")
UR_LEGEND = ("UR: unit ratio: its units of work against the same constructs' in the model's normal runs (or "
             "the\n  reference run), construct by construct (1 = as long; above 2, and 2x its teammates': it "
             "slowed\n  down in its own work).")
#: under the table when it shows what threads kept
KEPT_LEGEND = ("kept MiB: what the thread allocated and did not free over its run (the tracer's memory "
               "signal; a leak\n  is kept step after step, by its process too; below 0: it freed more "
               "than it allocated,\n  blocks another thread allocated).")
STATUS_LEGEND = {
    "memoryleak": "memoryleak: slowed down over the run (seed 000's name for it: a leak, contention and a "
                  "busy-waiting\n  neighbour look alike here; 'hbtool behavior' tells them apart), or kept "
                  "memory step after step\n  (the reason says which).",
    "shutdown": "shutdown: stopped early, or its process died around it.",
    "unknown": "unknown: it could not be judged (the reason says why).",
}


@click.command()
@click.argument("paths", nargs=-1, required=True, metavar="TRACE...")
@click.option("--reference", "ref", metavar="REF",
              help="Compare against this trace's threads (same number, else its median thread); with --model too.")
@click.option("--model", "model_path", metavar="MODEL", type=click.Path(dir_okay=False),
              help="Normal ranges learned by 'hbtool train'.")
@click.option("--timings", is_flag=True, help="Print the time spent in each stage on stderr.")
@beats_option
@output_options
def diagnose(paths, ref, model_path, timings, beats, fmt):
    """The status of every thread: normal, memoryleak, shutdown (or unknown, and why).

    Each thread is compared with a reference: REF's thread of the same number; else the
    reference MODEL was trained against (train --reference), which it keeps; else the
    run's own median thread. Its features are checked against the
    normal ranges of MODEL (or built-in default ranges, docs/methods.md), and the report
    says which ranges a thread falls outside of. Exit status 0 whatever is found.

    \b
    Examples:
      hbtool diagnose sample_traces/jacobi-leak
      hbtool diagnose trace.xlsx --model model.json --format json | jq '.threads[] | select(.status != "normal")'
    """
    stages = {}
    t0 = time.perf_counter()
    from ..analyzers.hsa import DECIMALS, default_model, diagnose as diagnose_trace
    from ..io.hsa_model import read_model
    from .hsa_common import read_all

    stages["start-up (imports)"] = time.perf_counter() - t0
    t = time.perf_counter()
    model = read_model(model_path) if model_path else default_model()
    trained_ref = model.training.get("reference", "")
    if not ref and model.reference is None and str(trained_ref).startswith("trace "):
        from ..errors import HbtoolError

        raise HbtoolError(f"{model_path}: the model was trained against the reference {trained_ref}, too large to "
                          f"keep in it: give that trace with --reference")
    trace = read_all(paths, beats=beats, stream=True)
    reference = read_all([ref], "reference", beats=beats, stream=True) if ref else None
    stages["read"] = time.perf_counter() - t
    result = diagnose_trace(trace, model, reference=reference)
    stages.update(result.stages)
    t = time.perf_counter()
    src = (f"model {model_path} (level {model.level:g})" if model_path else "built-in default ranges (no --model)")
    ref_text = (f"reference trace {ref}" if ref else
                f"the reference stored in the model ({trained_ref})" if model.reference else
                "each run's own median thread")
    counts = result.counts()
    if not ref and not model.reference:
        # a team of two whose work shift is unknown (no wait records): each judged against the other only
        tb = result.table
        unshifted = tb[~np.isfinite(tb["WS"].to_numpy(dtype=float))] if "WS" in tb else tb
        pairs = sorted({(r, p) for (r, p), n in tb.groupby(["run", "process"], observed=True).size().items()
                        if n == 2 and ((unshifted["run"] == r) & (unshifted["process"] == p)).any()})
        if pairs:
            where = ", ".join(f"{r}" + (f" process {p}" if p else "") for r, p in pairs[:3]) + (", ..." if len(pairs) > 3 else "")
            warn([f"{where}: 2 threads, each compared with the other: the median of two is one of them, so a sick "
                  f"thread can be the reference; give --reference (a normal run) or a model trained with one"])
    preamble = [beats_line(trace), f"ranges: {src}; compared with {ref_text}",
                "found: " + (", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no threads"), ""]
    extra = {"ranges": {"source": model_path or "default", "level": model.level,
                        "values": {k: list(v) for k, v in model.ranges.items()},
                        "expected_beats": model.expected_beats},
             "reference": ref or ("model" if model.reference else "team-median"), "references": result.references,
             "beats": beats_used(trace)}
    rows = result.threads()
    for r in rows:
        r["compared_with"] = compared_with(r)
        kept = r.get("retained")
        r["kept_MiB"] = kept / 2**20 if kept is not None and kept == kept else None
    if fmt == "csv":
        columns = list(rows[0]) if rows else list(COLUMNS)
    else:
        several = len({(r["run"], r["process"]) for r in rows}) > len({r["run"] for r in rows})
        columns = [c for c in COLUMNS if c != "process" or several]
        if any(r["WR"] is not None and r["WR"] == r["WR"] for r in rows):   # a number, not NaN
            columns.insert(columns.index("progress") + 1, "WR")
        if any(r["WS"] is not None and r["WS"] == r["WS"] for r in rows):
            columns.insert(columns.index("WR") + 1 if "WR" in columns else columns.index("progress") + 1, "WS")
        if any(r["SS"] is not None and r["SS"] == r["SS"] for r in rows):
            columns.insert(columns.index("WS") + 1 if "WS" in columns else columns.index("progress") + 1, "SS")
        if any(r["UR"] is not None and r["UR"] == r["UR"] for r in rows):
            columns.insert(max(columns.index(c) for c in ("progress", "WR", "WS", "SS") if c in columns) + 1, "UR")
        if any(r["kept_MiB"] is not None for r in rows):
            columns.insert(columns.index("compared_with"), "kept_MiB")
    footer = ["", *LEGEND, *([WR_LEGEND] if "WR" in columns and fmt != "csv" else []),
              *([WS_LEGEND] if "WS" in columns and fmt != "csv" else []),
              *([SS_LEGEND] if "SS" in columns and fmt != "csv" else []),
              *([UR_LEGEND] if "UR" in columns and fmt != "csv" else []),
              *([KEPT_LEGEND] if "kept_MiB" in columns and fmt != "csv" else []),
              *(STATUS_LEGEND[s] for s in ("memoryleak", "shutdown", "unknown") if s in counts)]
    emit(fmt, rows, columns, key="threads", extra=extra, preamble=preamble, headers=HEADERS,
         decimals={**DECIMALS, "WS": 2, "SS": 3, "UR": 2, "kept_MiB": 1}, footer=footer)
    stages["report"] = time.perf_counter() - t
    if timings:
        total = sum(stages.values())
        click.echo("hbtool: timings: " + ", ".join(f"{k} {v:.3f} s ({100 * v / total:.0f} %)" for k, v in stages.items())
                   + f"; total {total:.3f} s", err=True)


def compared_with(row: dict) -> str:
    """Which thread a thread was compared with, in a few words."""
    kind = row.get("reference_kind")
    if row.get("reference_thread") is None or kind not in ("team-median", "reference-trace"):
        return "none"
    ref = (row["reference_run"], row["reference_process"], row["reference_thread"])
    if kind == "team-median":
        ws = row.get("WS")
        if ws is not None and ws == ws:   # judged against its team's work, earlier and later (WS)
            if row.get("WS_against") == "iterations":
                return "its team, per iteration"
            return ("its team, in the model's normal runs" if row.get("WS_against") == "model"
                    or row.get("SS_against") == "model" else "its team, over time")
        if ref == (row["run"], row["process"], row["thread"]):
            return "itself (median)"
        where = "" if ref[1] == row["process"] else f" of process {ref[1]}"
        where += "" if ref[0] == row["run"] else f" of {ref[0]}"
        return f"thread {ref[2]}{where} (median)"
    proc = f" process {ref[1]}" if ref[1] else ""
    return f"{ref[0]}{proc} thread {ref[2]}"
