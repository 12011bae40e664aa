"""hbtool plot: heart rate of every thread over time, one panel per run."""

from __future__ import annotations

import click

from .hsa_common import beats_option, read_all
from .output import warn

MAX_PANELS = 16
#: threads with beats a run needs for its threads to be diagnosed (each is compared with the run's median)
MIN_DIAGNOSED = 2


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
@beats_option
def plot(paths, out, window, behavior, status, beats):
    """Draw the heart rate of every thread over time to a PNG.

    Each run gets a panel; each thread a line. A marker at its end says how the
    thread ended, as 'hbtool info' names it (returned, pthread_exit, cancelled,
    process_exit, signal, no end record; black where the process died), and the line
    style its status as 'hbtool diagnose' finds it with its defaults (normal,
    memoryleak, shutdown, unknown); both are in its legend entry. A run with fewer
    than two threads with beats is not diagnosed, and its title says so.

    With --behavior, a strip under each panel shows every thread's behavior
    timeline (running, busy-waiting, conditional waiting, exited, failed), with
    a tick where the online monitor reported it.

    With --status, draw instead the machine's status over one run, as 'hbtool status'
    reports it, each panel with a legend naming its lines and their units.

    \b
    Examples:
      hbtool plot sample_traces/jacobi-leak -o leak.png
      hbtool plot --status trace/ -o status.png
      hbtool plot --behavior sample_traces/pi-condwait -o condwait.png
    """
    from .. import config

    if not out.lower().endswith((".png", ".svg", ".pdf")):
        raise click.UsageError(f"{out}: name the picture .png, .svg or .pdf")
    if status:
        if len(paths) != 1 or behavior:
            raise click.UsageError("--status draws one run: give one trace, without --behavior")
        from ..analyzers.timers import status_report
        from ..io import read_status
        from .plotting import save, status_figure

        rep = status_report(read_status(paths[0]))
        warn(rep.warnings)
        if not len(rep.intervals):
            raise click.UsageError(f"{paths[0]}: no status samples to plot (record with HBTRACE_STATUS=1 or "
                                   f"'hbtool record --status')")
        save(status_figure(rep, title=str(paths[0])), out)
        click.echo(f"hbtool: wrote {out}", err=True)
        return
    trace = read_all(paths, beats=beats, stream=True)
    if len(trace.runs) > MAX_PANELS:
        raise click.UsageError(f"{len(trace.runs)} runs: plot at most {MAX_PANELS} at once")
    from ..analyzers.heartrate import heart_rate_pieces, heart_rate_series
    from ..analyzers.summary import summarize_threads
    from ..model.heartbeats import StreamedTrace
    from .plotting import heart_rate_figure, save, thread_curve, thread_curve_pieces

    window = window or config.HEART_RATE_WINDOW
    summary = summarize_threads(trace)
    statuses, notes = _diagnosis(trace, summary)
    for run, meta in trace.runs.items():  # which beats each panel draws
        used = "/".join(sorted(set((meta.get("beats") or {}).values()))) or "none"
        notes[run] = f"{used} beats" + (f"; {notes[run]}" if notes.get(run) else "")
    timelines = None
    if behavior:
        from ..analyzers.behavior import behavior_timelines

        timelines = behavior_timelines(trace)
    # one thread's beats in memory at a time, kept as at most config.PLOT_MAX_POINTS points;
    # a trace whose beats stay in its files: a piece of a thread at a time
    if isinstance(trace, StreamedTrace):
        curves = {key: thread_curve_pieces(n, heart_rate_pieces(trace.thread_time_pieces(key), window))
                  for key, n, _ in trace.thread_loaders()}
    else:
        curves = {key: thread_curve(t, hr) for key, t, hr in heart_rate_series(trace, window)}
    save(heart_rate_figure(curves, summary, window, timelines, statuses, notes), out)
    click.echo(f"hbtool: wrote {out}", err=True)


def _diagnosis(trace, summary) -> tuple[dict[tuple, str], dict[str, str]]:
    """Each thread's status as `hbtool diagnose` finds it with its defaults, in the runs
    that allow a diagnosis (at least MIN_DIAGNOSED threads with beats), and one line per
    run saying what was found or why nothing was diagnosed."""
    threads = summary.groupby("run", sort=False, observed=True).size()
    ok = {run for run, n in threads.items() if n >= MIN_DIAGNOSED}
    notes = {run: f"not diagnosed: 'hbtool diagnose' needs at least {MIN_DIAGNOSED} threads with beats "
                  f"(it compares each with the run's median thread); this run has {n}"
             for run, n in threads.items() if run not in ok}
    if not ok:
        return {}, notes
    from ..analyzers.hsa import diagnose

    statuses = {(r["run"], r["process"], r["thread"]): r["status"] for r in diagnose(trace).threads()
                if r["run"] in ok}
    for run in ok:
        found = _counts([s for (r, _, _), s in statuses.items() if r == run])
        notes[run] = f"hbtool diagnose (built-in ranges, each thread vs the run's median thread): {found}"
    return statuses, notes


def _counts(values: list[str]) -> str:
    """'3 normal, 1 shutdown'."""
    counts: dict[str, int] = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no threads"
