"""hbtool probes: calls and time of every timing probe (seed 003)."""

from __future__ import annotations

import click

from .output import emit, output_options, render_table, warn

HEADERS = {"count": "calls", "total_s": "total", "mean_ns": "mean", "min_ns": "min", "max_ns": "max",
           "share": "of top"}


@click.command()
@click.argument("path", metavar="TRACE")
@click.option("--per-thread", is_flag=True, help="One row per probe and thread instead of merged per probe.")
@output_options
def probes(path, per_thread, fmt):
    """Calls, total, mean, min and max time of every timing probe (HBT_PROBE_BEGIN/END).

    TRACE is a trace file or run directory written by the tracer. Each thread's
    statistics are written when it ends (and at exit for the threads still alive);
    merged, counts and totals add, and min and max are taken over threads. Rows come
    largest total first; 'of top' is the total over the largest probe's total (nested
    probes overlap, so their totals do not add up). A thread killed with its process
    loses the statistics it had not merged.

    \b
    Examples:
      hbtool probes trace/
      hbtool probes trace/ --per-thread --format csv > probes.csv
    """
    from ..analyzers.timers import probe_summary
    from ..errors import HbtoolError
    from ..io import read_probes

    ps = read_probes(path)
    if not len(ps.per_thread):
        raise HbtoolError(f"{path}: no probe statistics in this trace (no HBT_PROBE_BEGIN/END ran, or no thread "
                          f"lived to merge its statistics)")
    warn(ps.warnings)
    df = probe_summary(ps, per_thread=per_thread)
    cols = list(df.columns)
    rows = df.to_dict("records")
    clocks = sorted({p["clock"] or "unknown" for p in ps.meta["processes"]})
    if fmt == "json":
        emit(fmt, rows, cols, key="probes",
             extra={"run": ps.meta["run"], "source": ps.meta["source"], "per_thread": per_thread,
                    "clocks": [{"pid": p["pid"], "clock": p["clock"], "tsc_hz": p["tsc_hz"]}
                               for p in ps.meta["processes"]]})
    elif fmt == "csv":
        emit(fmt, rows, cols, key="probes")
    else:
        multi = len({r["process"] for r in rows}) > 1
        show = [c for c in cols if c not in ("share",) and (multi or c != "process")] + ["share"]
        click.echo(f"{ps.meta['run']}: {len(rows)} {'probe-thread pairs' if per_thread else 'probes'}; clock "
                   f"{', '.join(clocks)}")
        for r in rows:
            r["share"] = f"{r['share'] * 100:.0f} %" if r["share"] == r["share"] else "n/a"
            r["total_s"] = _dur(r["total_s"] * 1e9)
            for c in ("mean_ns", "min_ns", "max_ns"):
                r[c] = _dur(r[c])
        click.echo(render_table(rows, show, HEADERS))


def _dur(ns) -> str:
    """A duration in nanoseconds for people: 812 ns, 3.41 us, 2.11 ms, 1.000 s."""
    if ns is None or ns != ns:
        return "n/a"
    for div, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "us")):
        if abs(ns) >= div:
            return f"{ns / div:.4g} {unit}"
    return f"{ns:.0f} ns"
