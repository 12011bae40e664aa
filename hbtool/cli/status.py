"""hbtool status: the machine's CPU, memory, swap and network over a run (seed 003)."""

from __future__ import annotations

import click

from .output import emit, output_options, render_table, warn

LABELS = {"cpu_user_pct": "CPU user", "cpu_system_pct": "CPU system", "cpu_idle_pct": "CPU idle",
          "cpu_iowait_pct": "CPU iowait", "cpu_steal_pct": "CPU steal", "mem_used_pct": "memory used",
          "mem_used_kb": "memory used", "swap_used_kb": "swap used", "net_rx_bytes_per_s": "network received",
          "net_tx_bytes_per_s": "network sent", "proc_cpu_pct": "process CPU", "proc_rss_kb": "process resident"}


@click.command()
@click.argument("path", metavar="TRACE")
@click.option("--samples", "show_samples", is_flag=True, help="Text: list every interval, not only the summary.")
@output_options
def status(path, show_samples, fmt):
    """The machine's status over a run: CPU split, memory, swap, network, and the process itself.

    TRACE is a trace file or run directory of a run recorded with the status sampler
    on (HBTRACE_STATUS=1, or 'hbtool record --status'). Figures are per interval
    between consecutive samples: CPU time in percent of all CPUs (user, system, idle,
    iowait, steal), memory and swap in use, network bytes per second (all interfaces
    but lo; counter wrap handled), the traced process's CPU (percent of one CPU) and
    resident memory. The machine's cores, model and memory are recorded once.

    \b
    Examples:
      hbtool status trace/
      hbtool status trace/ --format csv > status.csv
      hbtool plot --status trace/ -o status.png
    """
    from ..analyzers.timers import STATUS_SERIES, status_report
    from ..errors import HbtoolError
    from ..io import read_status

    samples = read_status(path)
    if not len(samples.samples):
        raise HbtoolError(f"{path}: no status samples in this trace (record them with 'hbtool record --status' "
                          f"or HBTRACE_STATUS=1)")
    rep = status_report(samples)
    warn(rep.warnings)
    run = path
    rows = rep.intervals.to_dict("records")
    if fmt == "json":
        emit(fmt, rows, [], key="intervals", extra={"source": run, "machine": rep.machine, "summary": rep.summary,
                                                     "units": STATUS_SERIES})
    elif fmt == "csv":
        emit(fmt, rows, list(rep.intervals.columns), key="intervals")
    else:
        out = []
        for m in rep.machine:
            mem = f"{m['mem_kb'] / 1048576:.1f} GiB" if m["mem_kb"] else "memory unknown"
            out.append(f"process {m['process']}: {m['cores'] or '?'} cores, {m['model'] or 'model unknown'}, {mem}"
                       + (f"; sampled every {m['period_s']:g} s" if m["period_s"] else ""))
        if not rows:   # one sample per process: the warnings said so
            click.echo("\n".join(out))
            return
        table = []
        for s in rep.summary:
            table.append({"process": s["process"], "what": LABELS[s["series"]], "mean": _fmt(s["mean"], s["unit"]),
                          "min": _fmt(s["min"], s["unit"]), "max": _fmt(s["max"], s["unit"]),
                          "unit": s["unit"]})
        out.append(render_table(table, ["process", "what", "mean", "min", "max", "unit"]))
        if show_samples:
            out.append("")
            cols = ["process", "t", "cpu_user_pct", "cpu_system_pct", "cpu_idle_pct", "cpu_iowait_pct",
                    "mem_used_pct", "net_rx_bytes_per_s", "net_tx_bytes_per_s", "proc_cpu_pct"]
            out.append(render_table(rows, cols))
        click.echo("\n".join(out))


def _fmt(v, unit: str) -> str:
    if v is None:
        return "n/a"
    if unit.startswith("%"):
        return f"{v:.1f}"
    if unit == "KiB":
        return f"{v:.0f}"
    return f"{v:.4g}"
