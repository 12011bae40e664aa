"""hbtool plot: heart rate of every thread over time, one panel per run."""

from __future__ import annotations

import click

from .output import warn

MAX_PANELS = 16


@click.command()
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("-o", "--output", "out", required=True, type=click.Path(dir_okay=False),
              help="PNG file to write.")
@click.option("--window", type=click.IntRange(1, 100000), default=None,
              help="Heart-rate window in beats (default 10).")
@click.option("--behavior", "behavior", is_flag=True,
              help="Colour each thread's behavior intervals (as 'hbtool behavior' finds them) below the plot.")
@click.option("--status", "status", is_flag=True,
              help="Draw the machine's status over the run instead (CPU split, memory and swap, network, the "
                   "process's CPU and memory); needs a run recorded with the status sampler.")
def plot(paths, out, window, behavior, status):
    """Draw the heart rate of every thread over time to a PNG.

    Each run gets a panel; each thread a line; a thread's end is marked: a
    dot where it ended itself, a red cross where it died or its trace stops
    without an end record.

    With --behavior, a strip under each panel shows every thread's behavior
    timeline (running, busy-waiting, conditional waiting, exited, failed), with
    a tick where the online monitor reported it.

    With --status, draw instead the machine's status over one run, as 'hbtool status'
    reports it.

    \b
    Examples:
      hbtool plot sample_traces/jacobi-leak -o leak.png
      hbtool plot --status trace/ -o status.png
      hbtool plot --behavior sample_traces/pi-condwait -o condwait.png
    """
    from .. import config
    from ..io import read_heartbeats

    if not out.lower().endswith((".png", ".svg", ".pdf")):
        raise click.UsageError(f"{out}: name the picture .png, .svg or .pdf")
    if status:
        if len(paths) != 1 or behavior:
            raise click.UsageError("--status draws one run: give one trace, without --behavior")
        from ..analyzers.timers import status_report
        from ..io import read_status
        from .plotting import plot_status

        rep = status_report(read_status(paths[0]))
        warn(rep.warnings)
        if not len(rep.intervals):
            raise click.UsageError(f"{paths[0]}: no status samples to plot (record with HBTRACE_STATUS=1 or "
                                   f"'hbtool record --status')")
        plot_status(rep, out, title=str(paths[0]))
        click.echo(f"hbtool: wrote {out}", err=True)
        return
    trace = read_heartbeats(list(paths))
    warn(trace.warnings)
    if not len(trace.beats):
        raise click.UsageError("the trace holds no heartbeats: nothing to plot")
    if len(trace.runs) > MAX_PANELS:
        raise click.UsageError(f"{len(trace.runs)} runs: plot at most {MAX_PANELS} at once")
    from ..analyzers.heartrate import heart_rate_curves
    from ..analyzers.summary import summarize_threads
    from .plotting import plot_heart_rates

    window = window or config.HEART_RATE_WINDOW
    timelines = None
    if behavior:
        from ..analyzers.behavior import behavior_timelines

        timelines = behavior_timelines(trace)
    plot_heart_rates(heart_rate_curves(trace, window), summarize_threads(trace), out, window, timelines)
    click.echo(f"hbtool: wrote {out}", err=True)
