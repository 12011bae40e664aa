"""hbtool diagnose: which thread misbehaved, and how (seed 000 HSA)."""

from __future__ import annotations

import time

import click

from .output import emit, output_options

COLUMNS = ["run", "thread", "status", "beats", "GTR", "GHR", "DTW", "progress", "reason"]


@click.command()
@click.argument("paths", nargs=-1, required=True, metavar="TRACE...")
@click.option("--reference", "ref", metavar="REF", help="Compare against this trace's threads (same number, else its median thread).")
@click.option("--model", "model_path", metavar="MODEL", type=click.Path(dir_okay=False),
              help="Normal ranges learned by 'hbtool train'.")
@click.option("--timings", is_flag=True, help="Print the time spent in each stage on stderr.")
@output_options
def diagnose(paths, ref, model_path, timings, fmt):
    """The status of every thread: normal, memoryleak, shutdown (or unknown, and why).

    Each thread is compared with a reference: REF's thread of the same number, or, with
    no --reference, the run's own median thread. Its features are checked against the
    normal ranges of MODEL (or built-in default ranges, docs/methods.md), and the report
    says which ranges a thread falls outside of. Exit status 0 whatever is found.

    \b
    Examples:
      hbtool diagnose sample_traces/jacobi-leak
      hbtool diagnose trace.xlsx --model model.json --format json | jq '.threads[] | select(.status != "normal")'
    """
    if ref and model_path:
        raise click.UsageError("give --reference or --model, not both")
    stages = {}
    t0 = time.perf_counter()
    from ..analyzers.hsa import default_model, diagnose as diagnose_trace
    from ..io.hsa_model import read_model
    from .hsa_common import read_all

    stages["start-up (imports)"] = time.perf_counter() - t0
    t = time.perf_counter()
    model = read_model(model_path) if model_path else default_model()
    trace = read_all(paths)
    reference = read_all([ref], "reference") if ref else None
    stages["read"] = time.perf_counter() - t
    result = diagnose_trace(trace, model, reference=reference)
    stages.update(result.stages)
    t = time.perf_counter()
    src = (f"model {model_path} (level {model.level:g})" if model_path else "built-in default ranges (no --model)")
    ref_text = f"reference trace {ref}" if ref else "each run's own median thread"
    counts = result.counts()
    preamble = [f"ranges: {src}; compared with {ref_text}",
                "found: " + (", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no threads"), ""]
    extra = {"ranges": {"source": model_path or "default", "level": model.level,
                        "values": {k: list(v) for k, v in model.ranges.items()},
                        "expected_beats": model.expected_beats},
             "reference": ref or "team-median", "references": result.references}
    emit(fmt, result.threads(), COLUMNS if fmt != "csv" else COLUMNS[:1] + ["process"] + COLUMNS[1:] + ["outside"],
         key="threads", extra=extra, preamble=preamble)
    stages["report"] = time.perf_counter() - t
    if timings:
        total = sum(stages.values())
        click.echo("hbtool: timings: " + ", ".join(f"{k} {v:.3f} s ({100 * v / total:.0f} %)" for k, v in stages.items())
                   + f"; total {total:.3f} s", err=True)
