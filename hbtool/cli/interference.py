"""hbtool interference: how much of one run's time was lost to outside interference (seed 004)."""

from __future__ import annotations

import click

from .output import emit, output_options, warn

CSV_COLUMNS = ["run", "interference_percent", "class", "probability_high", "run_time_s", "segments", "processes",
               "clusters", "groups", "groups_judged", "segments_judged", "segments_interfered", "impact_s",
               "computation_source", "collective_rate_hz", "measured_percent", "accuracy"]
ADVICE = {"low": "trust this run for performance analysis",
          "medium": "usable to gauge performance; consider measuring again",
          "high": "measure again: this run is heavily perturbed"}
FAILED_ADVICE = "no verdict: the run failed, its profile holds partial data"


@click.command()
@click.argument("paths", nargs=-1, required=True, metavar="PROFILE...")
@click.option("--top", type=click.IntRange(0, 1000), default=5, show_default=True,
              help="List this many of the most interfered segments per run.")
@output_options
def interference(paths, top, fmt):
    """How much of each run's time was lost to outside interference, and whether to trust it.

    PROFILE is a profile written by the tracer's PMPI profiler (libhbprof), or a segment
    table (csv or parquet: rank, segment, duration_ns, computation, then integer
    communication and I/O feature columns). Segments with the same computation and the
    same communication and I/O should take the same time; the excess of those that take
    longer than median + 4 MAD of their group is interference (docs/methods.md). Classes:
    low below 7.5 %, medium up to 15 %, high above.

    Given several runs of one program, it also reports each run's measured interference
    (its time against the fastest run's, less the displacement of its group medians) and
    the accuracy 1 - |p(measured) - p(estimated)|. Exit status 0 whatever is found.

    \b
    Examples:
      hbtool interference profile.hbp
      hbtool interference run*/hbprof-*.hbp --format json | jq '.runs[] | {run, class}'
    """
    from ..analyzers.interference import assess
    from ..io import read_profile

    ests, cmp = assess((read_profile(p) for p in paths), top=top)
    for e in ests:
        warn(e.warnings)
    by_run = {c["run"]: c for c in cmp}
    rows = []
    for e in ests:
        c = by_run.get(e.name, {})
        partial = e.failure is not None   # no figure from a failed run's partial data
        rows.append({"run": e.name, "interference_percent": None if partial else e.interference_percent,
                     "class": e.klass, "probability_high": None if partial else e.probability_high,
                     "advice": FAILED_ADVICE if e.failure else ADVICE[e.klass] if e.judged else
                     "nothing can be judged: no group of 5 or more alike segments", "run_time_s": e.run_time_s,
                     "failure": e.failure,
                     "segments": e.segments, "processes": e.processes, "clusters": e.clusters, "groups": e.groups,
                     "groups_judged": e.groups_judged, "segments_judged": e.segments_judged,
                     "segments_interfered": e.segments_interfered, "impact_s": e.impact_s,
                     "computation_source": e.computation_source, "collective_rate_hz": e.collective_rate_hz,
                     "judged": e.judged, "most_interfered": e.top, "warnings": e.warnings,
                     "measured_percent": c.get("measured_percent"), "accuracy": c.get("accuracy")})
    if fmt == "json":
        first = rows[0]
        extra = {k: first[k] for k in ("interference_percent", "class", "probability_high", "segments", "clusters",
                                        "groups", "segments_judged", "segments_interfered", "judged", "failure")}
        extra["run"] = first["run"]
        if cmp:
            import numpy as np

            acc = [c["accuracy"] for c in cmp]
            extra["comparison"] = cmp
            extra["accuracy"] = {"median": float(np.median(acc)), "min": float(np.min(acc)), "runs": len(acc)}
        emit(fmt, rows, [], key="runs", extra=extra)
    elif fmt == "csv":
        emit(fmt, rows, CSV_COLUMNS, key="runs")
    else:
        click.echo(_text(rows, cmp), nl=False)


def _text(rows, cmp) -> str:
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
        out.append("several runs of one program: measured (against the fastest run, less the median displacement)")
        out.append(f"  {'run':<30} {'time':>9} {'measured':>9} {'estimated':>10} {'accuracy':>9}")
        for c in cmp:
            out.append(f"  {c['run'][:30]:<30} {c['run_time_s']:>8.3f}s {c['measured_percent']:>8.1f}% "
                       f"{c['estimated_percent']:>9.1f}% {c['accuracy']:>9.3f}" + ("  (fastest)" if c["fastest"] else ""))
        import numpy as np

        acc = [c["accuracy"] for c in cmp]
        out.append(f"  accuracy: median {np.median(acc):.3f}, min {np.min(acc):.3f} over {len(acc)} runs")
    return "\n".join(out) + "\n"
