"""hbtool service-rate: how fast each pipeline stage could go if nothing blocked it (seed 002)."""

from __future__ import annotations

import click

from .. import config
from .output import emit, output_options, warn

CSV_COLUMNS = ["queue", "end", "process", "status", "phase", "t_s", "since_s", "items_per_s", "bytes_per_s",
               "converged"]


def _si(v: float | None, unit: str) -> str:
    if v is None:
        return "n/a"
    for div, p in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:.3g} {p}{unit}"
    return f"{v:.3g} {unit}"


@click.command("service-rate")
@click.argument("path", metavar="TRACE")
@click.option("--item-size", type=click.IntRange(1, 1 << 40), default=None,
              help="Bytes per item (overrides the trace or table; needed for bytes/s from a table without it).")
@click.option("--period", type=click.FloatRange(0, min_open=True), default=None,
              help="Seconds of the first sample's period in a table without a 'period' column (else the median).")
@click.option("--end", "which", type=click.Choice(["both", "consumer", "producer"]), default="both",
              show_default=True, help="Which queue ends to report: consumer (head: the reading stage), producer "
                                      "(tail: the writing stage).")
@click.option("--window", type=click.IntRange(7, 100_000), default=config.SERVICE_WINDOW, show_default=True,
              help="Non-blocked samples in the sliding window.")
@click.option("--z", "z", type=click.FloatRange(0, 10), default=config.SERVICE_Z, show_default=True,
              help="Quantile of the filtered window: mean + z * sd.")
@click.option("--tolerance", type=click.FloatRange(0, 1, min_open=True), default=config.SERVICE_TOLERANCE,
              show_default=True, help="Convergence tolerance, relative to the rate.")
@click.option("--phase-change", type=click.FloatRange(0, 10, min_open=True), default=config.SERVICE_PHASE_CHANGE,
              show_default=True, help="Relative change of rate that starts a new phase.")
@click.option("--estimates/--no-estimates", "show_estimates", default=False,
              help="Text: list every estimate, not only the phases.")
@output_options
def service_rate(path, item_size, period, which, window, z, tolerance, phase_change, show_estimates, fmt):
    """Service rate of every instrumented queue end: the rate its stage could sustain unblocked.

    TRACE is a trace file or run directory written by the tracer (queues of
    hbtrace_queue.h), or a sample table (csv or parquet) with columns queue, t (seconds),
    count (non-blocking transactions in the period), blocked (1/0), and optionally end,
    item_size, period (docs/formats.md). Only periods in which the stage at the end did
    not block (on any of its queues, for the tracer's) count. Per queue end: the converged estimates over time (items/s and bytes/s, and
    when each converged), the phases where the rate changed, or why nothing can be
    said (not converged, no non-blocking samples). Method: docs/methods.md.

    \b
    Examples:
      hbtool service-rate trace/
      hbtool service-rate samples.csv --item-size 64 --format json | jq '.queues[].phases'
    """
    from ..analyzers.service_rate import Params, service_rates
    from ..io import read_queue_samples

    params = Params(window=window, z=z, tolerance=tolerance, phase_change=phase_change)
    res = service_rates(read_queue_samples(path, item_size=item_size, period=period), params)
    warn(res.warnings)
    if not res.ends:
        from ..errors import HbtoolError

        raise HbtoolError(f"{path}: no instrumented queues in this trace (instrument them with hbtrace_queue.h, "
                          f"or give a sample table)")
    ends = [e for e in res.ends if which == "both" or e.end == which]
    if fmt == "json":
        emit(fmt, [e.as_dict() for e in ends], [], key="queues",
             extra={"run": res.meta.get("run"), "source": res.meta.get("source"),
                    "params": {"window": params.window, "z": params.z, "filter_radius": params.radius,
                               "filter_sigma": params.sigma, "conv_window": params.conv_window,
                               "tolerance": params.tolerance, "min_values": params.min_values,
                               "phase_change": params.phase_change}})
    elif fmt == "csv":
        rows = []
        for e in ends:
            if not e.estimates:
                rows.append({"queue": e.queue, "end": e.end, "process": e.process, "status": e.status})
            for est in e.estimates:
                ph = next((k + 1 for k, p in enumerate(e.phases) if p["start_s"] <= est["t_s"] <= p["end_s"]), None)
                rows.append({"queue": e.queue, "end": e.end, "process": e.process, "status": e.status,
                             "phase": ph if est["converged"] else None, **est})
        emit(fmt, rows, CSV_COLUMNS, key="queues")
    else:
        click.echo(_text(res, ends, show_estimates), nl=False)


def _text(res, ends, show_estimates: bool) -> str:
    out = [f"{res.meta.get('run')}: {len(res.queues)} queues, {len(ends)} queue ends"]
    if not ends:
        out.append("  no queue end of that kind in this trace")
    for e in ends:
        size = f"{e.item_size} B items" if e.item_size else "item size unknown"
        per = f"period {e.period_s * 1e3:.3g} ms" if e.period_s else "no period"
        out.append("")
        role = "pops: the stage reading from it" if e.end == "consumer" else "pushes: the stage writing into it"
        out.append(f"queue {e.queue}, {e.end} end ({role}): {size}; {e.samples} samples, "
                   f"{e.blocked_share * 100:.0f} % blocked, {per}")
        if e.status in ("no non-blocking samples", "cannot estimate"):
            out.append(f"  {e.status}: {e.reason}")
            continue
        if e.status == "not converged":
            last = e.estimates[-1]
            out.append(f"  not converged: {e.reason}: {_si(last['items_per_s'], 'items/s')} "
                       f"({_si(last['bytes_per_s'], 'B/s')}) over {last['since_s']:.3f}-{last['t_s']:.3f} s")
            continue
        out.append(f"  {len(e.phases)} phase{'s' if len(e.phases) != 1 else ''} "
                   f"({sum(p['estimates'] for p in e.phases)} converged estimates):")
        if e.caution:
            out.append(f"  caution: {e.caution}")
        for k, p in enumerate(e.phases, 1):
            out.append(f"    phase {k}: {p['start_s']:8.3f} - {p['end_s']:8.3f} s  {_si(p['items_per_s'], 'items/s'):>14}"
                       f"  {_si(p['bytes_per_s'], 'B/s'):>11}  ({p['estimates']} estimates, spread "
                       f"{p['spread'] * 100:.1f} %)")
        if show_estimates:
            out.append(f"    {'converged at':>12}  {'since':>8}  {'items/s':>12}  {'bytes/s':>12}")
            for est in e.estimates:
                out.append(f"    {est['t_s']:>10.3f} s  {est['since_s']:>6.3f} s  {est['items_per_s']:>12.1f}  "
                           f"{(est['bytes_per_s'] or float('nan')):>12.1f}" + ("" if est["converged"] else
                                                                              "  (not converged)"))
    return "\n".join(out) + "\n"
