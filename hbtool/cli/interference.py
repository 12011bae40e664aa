"""hbtool interference: how much of one run's time was lost to outside interference (seed 004)."""

from __future__ import annotations

import click

from .output import emit, output_options, warn

CSV_COLUMNS = ["run", "interference_percent", "class", "probability_high", "decided_by", "seed_percent",
               "best_percent", "reference_percent", "reference_coverage", "run_time_s", "segments", "processes",
               "clusters", "groups", "groups_judged", "segments_judged", "segments_interfered", "impact_s",
               "computation_source", "collective_rate_hz", "measured_percent", "accuracy"]
#: a low verdict is trusted only when a reference covered at least this share of the judged time
MIN_REFERENCE_COVERAGE = 0.5
LOW_UNCHECKED = ("no sign of interference within the run, but a slowdown of the whole run cannot be seen "
                 "without a reference: give --reference CLEAN_PROFILE or other runs of the program")
ADVICE = {"low": "trust this run for performance analysis",
          "medium": "usable to gauge performance; consider measuring again",
          "high": "measure again: this run is heavily perturbed"}
FAILED_ADVICE = "no verdict: the run failed, its profile holds partial data"


@click.command()
@click.argument("paths", nargs=-1, required=True, metavar="PROFILE...")
@click.option("--top", type=click.IntRange(0, 1000), default=5, show_default=True,
              help="List this many of the most interfered segments per run.")
@click.option("--reference", "references", multiple=True, metavar="PROFILE",
              help="A clean run of the same program (repeatable): each segment is also judged against the "
                   "same group's time per unit of work there (the fastest reference per group).")
@output_options
def interference(paths, top, references, fmt):
    """How much of each run's time was lost to outside interference, and whether to trust it.

    PROFILE is a profile written by the tracer's PMPI profiler (libhbprof), or a segment
    table (csv or parquet: rank, segment, duration_ns, computation, then integer
    communication and I/O feature columns). Segments with the same computation and the
    same communication and I/O should take the same time; the excess of those that take
    longer than median + 4 MAD of their group is interference (seed 004). Beyond the seed,
    so that a slowdown of most segments is not absorbed by the median: each segment's time
    per unit of work against the run's own best segments of its group, and against the
    same group in --reference runs or, given several runs, the fastest of them. The
    verdict is the largest figure, and says which evidence decided (docs/methods.md).
    Classes: low below 7.5 %, medium up to 15 %, high above.

    Given several runs of one program, it also reports each run's measured interference
    (its time against the fastest run's) and the accuracy 1 - |p(measured) -
    p(estimated)|. Exit status 0 whatever is found.

    \b
    Examples:
      hbtool interference profile.hbp
      hbtool interference run*/hbprof-*.hbp --format json | jq '.runs[] | {run, class}'
      hbtool interference busy.hbp --reference quiet.hbp
    """
    from ..analyzers.interference import assess, classify
    from ..io import read_profile

    ests, cmp = assess([read_profile(p) for p in paths], top=top, references=[read_profile(p) for p in references])
    for e in ests:
        warn(e.warnings)
    by_run = {c["run"]: c for c in cmp}
    rows = []
    for e in ests:
        c = by_run.get(e.name, {})
        partial = e.failure is not None   # no figure from a failed run's partial data
        rows.append({"run": e.name, "interference_percent": None if partial else e.interference_percent,
                     "class": e.klass, "probability_high": None if partial else e.probability_high,
                     "advice": _advice(e), "decided_by": None if partial else e.decided_by,
                     **{f"{k}_percent": None if partial else v for k, v in e.evidence.items()},
                     "seed_class": None if partial else classify(e.evidence["seed"]),
                     "reference_coverage": e.reference_coverage, "reference_basis": e.reference_basis,
                     "run_time_s": e.run_time_s,
                     "failure": e.failure,
                     "segments": e.segments, "processes": e.processes, "clusters": e.clusters, "groups": e.groups,
                     "groups_judged": e.groups_judged, "segments_judged": e.segments_judged,
                     "segments_interfered": e.segments_interfered, "impact_s": e.impact_s,
                     "computation_source": e.computation_source, "collective_rate_hz": e.collective_rate_hz,
                     "judged": e.judged, "most_interfered": e.top, "warnings": e.warnings,
                     "measured_percent": c.get("measured_percent"), "accuracy": c.get("accuracy")})
    if fmt == "json":
        first = rows[0]
        extra = {k: first[k] for k in ("interference_percent", "class", "probability_high", "decided_by", "segments",
                                        "clusters", "groups", "segments_judged", "segments_interfered", "judged",
                                        "failure")}
        extra["run"] = first["run"]
        if cmp:
            import numpy as np

            acc = [c["accuracy"] for c in cmp]
            extra["comparison"] = cmp
            extra["accuracy"] = {"median": float(np.median(acc)), "min": float(np.min(acc)), "runs": len(acc)}
            seed = [c["seed_accuracy"] for c in cmp]
            extra["seed_accuracy"] = {"median": float(np.median(seed)), "min": float(np.min(seed)), "runs": len(seed)}
        emit(fmt, rows, [], key="runs", extra=extra)
    elif fmt == "csv":
        emit(fmt, rows, CSV_COLUMNS, key="runs")
    else:
        click.echo(_text(rows, cmp), nl=False)


def _advice(e) -> str:
    if e.failure:
        return FAILED_ADVICE
    if not e.judged:
        return "nothing can be judged: no group of 5 or more alike segments"
    if e.klass == "low" and (e.reference_coverage or 0.0) < MIN_REFERENCE_COVERAGE:
        return LOW_UNCHECKED
    return ADVICE[e.klass]


def _text(rows, cmp) -> str:
    from ..analyzers.interference import EVIDENCE, EVIDENCE_SAYS

    out = []
    for r in rows:
        if r["failure"]:
            out.append(f"{r['run']}: the run failed: {r['failure']}; no verdict ({r['segments']} segments "
                       f"recorded)")
            continue
        if not r["judged"]:
            out.append(f"{r['run']}: nothing can be judged: no group of 5 or more alike segments "
                       f"({r['segments']} segments in {r['groups']} groups)")
        else:
            out.append(f"{r['run']}: {r['interference_percent']:.1f} % of the run's time lost to interference: "
                       f"{r['class'].upper()} (probability of a highly interfered run {r['probability_high']:.2f}); "
                       f"{r['advice']}")
            how = r["decided_by"] + (f" {r['reference_basis']}" if r["decided_by"] == "reference"
                                     and r["reference_basis"] in ("run", "time") else "")
            out.append(f"  decided by {EVIDENCE_SAYS[how]}; " + ", ".join(
                f"{k} {r[f'{k}_percent']:.1f} %" if r[f"{k}_percent"] is not None else f"{k} -" for k in EVIDENCE)
                + (f" (the reference judged {100 * r['reference_coverage']:.0f} % of the time)"
                   if r["reference_coverage"] is not None else ""))
        out.append(f"  run time {r['run_time_s']:.3f} s; {r['segments']} segments on {r['processes']} processes "
                   f"({r['collective_rate_hz']:.1f} per second); computation from {r['computation_source']}")
        out.append(f"  {r['clusters']} clusters by computation, {r['groups']} groups by communication and I/O, "
                   f"{r['groups_judged']} judged ({r['segments_judged']} segments); {r['segments_interfered']} "
                   f"segments interfered, {r['impact_s']:.3f} s lost")
        if r["most_interfered"]:
            out.append("  most interfered segments:")
            out.append(f"    {'segment':>8} {'duration':>11} {'threshold':>11} {'lost':>11}")
            for t in r["most_interfered"]:
                out.append(f"    {t['segment']:>8} {t['duration_s'] * 1e3:>9.3f}ms {t['threshold_s'] * 1e3:>9.3f}ms "
                           f"{t['impact_s'] * 1e3:>9.3f}ms")
    if cmp:
        out.append("")
        out.append("several runs of one program: measured (the run's time against the fastest run's)")
        out.append(f"  {'run':<30} {'time':>9} {'measured':>9} {'estimated':>10} {'accuracy':>9} {'seed':>7}")
        for c in cmp:
            out.append(f"  {c['run'][:30]:<30} {c['run_time_s']:>8.3f}s {c['measured_percent']:>8.1f}% "
                       f"{c['estimated_percent']:>9.1f}% {c['accuracy']:>9.3f} {c['seed_percent']:>6.1f}%"
                       + ("  (fastest)" if c["fastest"] else ""))
        import numpy as np

        acc, seed = [c["accuracy"] for c in cmp], [c["seed_accuracy"] for c in cmp]
        out.append(f"  accuracy: median {np.median(acc):.3f}, min {np.min(acc):.3f} over {len(acc)} runs "
                   f"(seed 004's figure alone: median {np.median(seed):.3f}, min {np.min(seed):.3f})")
    return "\n".join(out) + "\n"
