"""Pictures of results (matplotlib, Agg backend; imported only by `hbtool plot`).

These functions draw what the analyzers computed (heart-rate curves, thread
summaries, behavior timelines, status intervals); they compute nothing but what
drawing needs (decimation, a rolling median for the bold line, gaps to break).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import config

#: a gap between beats is drawn as a break when it is longer than this many median
#: intervals and than GAP_SHARE of the thread's span (a scheduler's time slice is not a gap)
GAP_FACTOR = 50
GAP_SHARE = 0.02
#: the bold line: rolling median over this share of a thread's beats (at least 5 beats)
SMOOTH_SHARE = 0.02


def _decimate(x: np.ndarray, y: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    if len(x) <= n:
        return x, y
    k = int(np.ceil(len(x) / n))
    m = len(x) // k * k
    with warnings.catch_warnings():   # a block of undefined rates (the first w beats) is NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        return x[:m].reshape(-1, k).mean(axis=1), np.nanmean(y[:m].reshape(-1, k), axis=1)


def _break_gaps(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Insert a NaN where no beat came for GAP_FACTOR median intervals: no line across it."""
    if len(x) < 3:
        return x, y
    dx = np.diff(x)
    med = np.median(dx)
    limit = max(GAP_FACTOR * med, GAP_SHARE * (x[-1] - x[0]))
    gaps = np.flatnonzero(dx > limit) if med > 0 else np.empty(0, int)
    if not gaps.size:
        return x, y
    return np.insert(x, gaps + 1, np.nan), np.insert(y, gaps + 1, np.nan)


def _smooth(y: np.ndarray, k: int | None = None) -> np.ndarray:
    """Rolling median over SMOOTH_SHARE of the points, or over k of them (NaN where undefined)."""
    import pandas as pd

    k = k or max(5, int(len(y) * SMOOTH_SHARE))
    return pd.Series(y).rolling(k, center=True, min_periods=max(1, k // 2)).median().to_numpy()


@dataclass
class ThreadCurve:
    """What the figure draws of one thread's heart rate: the faint line (x, y), the bold
    rolling median (xs, ys), at most PLOT_MAX_POINTS points each, gaps broken; the end
    marker's place (last_t, last_hr); the bold line's highest value (top, NaN if none)."""

    x: np.ndarray
    y: np.ndarray
    xs: np.ndarray
    ys: np.ndarray
    last_t: float
    last_hr: float
    top: float


def thread_curve(t: np.ndarray, hr: np.ndarray, points: int | None = None) -> ThreadCurve:
    """One thread's curve for the figure from its beat times and heart rates (heartrate.heart_rate).

    At most `points` beats (config.PLOT_MAX_POINTS): drawn as they are, with the rolling
    median over SMOOTH_SHARE of them. More: blocks of k consecutive beats, each drawn at
    its mean time with its mean heart rate, and the bold line the rolling median over
    SMOOTH_SHARE of the beats taken of the blocks' medians (that many beats' worth of
    blocks) -- what the eye sees of a rolling median over millions of beats, in time
    linear in the beats."""
    points = points or config.PLOT_MAX_POINTS
    n = len(t)
    finite = ~np.isnan(hr)
    last_hr = float(hr[finite][-1]) if finite.any() else 0.0
    if n <= points:
        sm = _smooth(hr)
        x, y, xs, ys = t, hr, t, sm
    else:
        k = int(np.ceil(n / points))
        m = n // k * k
        x, y = _decimate(t, hr, points)
        med = _block_medians(hr[:m].reshape(-1, k))
        sm = _smooth(med, max(1, round(max(5, int(n * SMOOTH_SHARE)) / k)))
        xs, ys = x, sm
    x, y = _break_gaps(x, y)
    xs, ys = _break_gaps(xs, ys)
    top = float(np.nanmax(sm)) if np.isfinite(sm).any() else float("nan")
    return ThreadCurve(x, y, xs, ys, float(t[-1]) if n else float("nan"), last_hr, top)


def thread_curve_pieces(n: int, pieces, points: int | None = None) -> ThreadCurve:
    """thread_curve of a thread of n beats given as consecutive pieces (beat times s,
    ascending; their heart rates, heartrate.heart_rate_pieces): the same curve, holding one
    piece and the blocks' values rather than the thread (a thread of 100 M beats is drawn
    in the memory of a piece)."""
    points = points or config.PLOT_MAX_POINTS
    if n <= points:
        parts = list(pieces)
        t = np.concatenate([p[0] for p in parts] or [np.empty(0)])
        hr = np.concatenate([p[1] for p in parts] or [np.empty(0)])
        return thread_curve(t, hr, points)
    k = int(np.ceil(n / points))
    m = n // k * k
    xb, yb, mb = [], [], []
    carry_t, carry_h = np.empty(0), np.empty(0)   # a block begun in the piece before
    seen, last_t, last_hr = 0, float("nan"), 0.0
    for t, hr in pieces:
        if not len(t):
            continue
        finite = np.flatnonzero(~np.isnan(hr))
        if finite.size:
            last_hr = float(hr[finite[-1]])
        last_t = float(t[-1])
        take = max(0, min(len(t), m - seen))      # the blocks cover the first m beats
        bt, bh = np.concatenate([carry_t, t[:take]]), np.concatenate([carry_h, hr[:take]])
        full = bt.size // k * k
        if full:
            x, y = _decimate(bt[:full], bh[:full], full // k)
            xb.append(x)
            yb.append(y)
            mb.append(_block_medians(bh[:full].reshape(-1, k)))
        carry_t, carry_h = bt[full:], bh[full:]
        seen += len(t)
    x = np.concatenate(xb) if xb else np.empty(0)
    y = np.concatenate(yb) if yb else np.empty(0)
    med = np.concatenate(mb) if mb else np.empty(0)
    sm = _smooth(med, max(1, round(max(5, int(n * SMOOTH_SHARE)) / k)))
    xs, ys = _break_gaps(x, sm)
    x, y = _break_gaps(x, y)
    top = float(np.nanmax(sm)) if np.isfinite(sm).any() else float("nan")
    return ThreadCurve(x, y, xs, ys, last_t, last_hr, top)


def _block_medians(blocks: np.ndarray) -> np.ndarray:
    """Each row's median; of a row with undefined rates (the first w beats), the median of
    the others."""
    med = np.median(blocks, axis=1)
    holes = np.flatnonzero(np.isnan(med))
    if holes.size:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            med[holes] = np.nanmedian(blocks[holes], axis=1)
    return med


#: colours of `hbtool plot --behavior` (running is left plain)
BEHAVIOR_COLORS = {"busy-waiting": "#ff9f1c", "conditional-waiting": "#2ec4b6", "idle": "#e9ecef",
                   "exited": "#8d99ae", "failed": "#e63946", "ended": "#adb5bd", "running": "#d8f3dc"}

#: how a thread ended (summary.summarize_threads' `ending`) -> (marker, what the key says);
#: a value not listed here is drawn with ENDING_OTHER's marker and named as it is
ENDING_MARKERS = {
    "returned": ("o", "returned: its function returned"),
    "pthread_exit": ("s", "pthread_exit: it called pthread_exit"),
    "cancelled": ("D", "cancelled: pthread_cancel ended it"),
    "exit": ("v", "exit: it called exit or _exit, ending the process"),
    "signal": ("X", "signal: a fatal signal in this thread killed the process"),
    "process_exit": ("^", "process_exit: another thread's exit ended the process"),
    "process_signal": ("P", "process_signal: a fatal signal in another thread killed the process"),
    "no_end_record": ("x", "no end record: SIGKILL, or the trace was cut short"),
    "running": (">", "running: no end yet, the trace is live"),
    "unknown": ("$?$", "ending unknown: the trace has no lifecycle records"),
}
ENDING_OTHER = "$?$"
#: the per-thread legend's short words for the endings whose `ended` text is long
ENDING_SHORT = {"no_end_record": "no end record", "unknown": "ending unknown"}
#: the colour of an end marker where the process died (summary's `abnormal`); no thread
#: line has it (tab10 and tab20 have no black)
DIED_COLOR = "black"

#: each thread's diagnose status (hsa.diagnose) -> the line style of its bold line;
#: a status not listed gets STATUS_OTHER
STATUS_STYLES = {"normal": "-", "memoryleak": "--", "shutdown": ":", "unknown": "-."}
STATUS_OTHER = "-."
#: the line style of a thread no diagnosis was made for
NOT_DIAGNOSED = "-"


def _ending(ending: str, ended: str) -> tuple[str, str, str]:
    """(marker, the thread's legend words, the key's words) for one thread's ending."""
    if ending in ENDING_MARKERS:
        marker, key = ENDING_MARKERS[ending]
        return marker, ENDING_SHORT.get(ending, ended or ending), key
    return ENDING_OTHER, ended or ending, f"{ending}: as the trace records it"


def _behavior_strip(ax, timelines: list[dict], groups: list, multi: bool) -> None:
    """One row per thread, its behavior intervals as coloured bars (a Gantt chart)."""
    order = {(p, t): i for i, ((p, t), _) in enumerate(groups)}
    for row in timelines:
        y = order.get((row["process"], row["thread"]))
        if y is None:
            continue
        for iv in row["intervals"]:
            a, b = iv["start_ns"] / 1e9, iv["end_ns"] / 1e9
            ax.broken_barh([(a, max(b - a, 1e-9))], (y - 0.4, 0.8), color=BEHAVIOR_COLORS[iv["behavior"]],
                           edgecolor="none")
            if iv["online"]:
                ax.plot([iv["online"]["detected_s"]], [y], marker="|", color="black", ms=10, mew=1.5)
    ax.set_yticks(range(len(groups)))
    ax.set_yticklabels([f"p{p} t{t}" if multi else f"t{t}" for (p, t), _ in groups], fontsize=7)
    ax.set_ylim(-0.6, len(groups) - 0.4)
    ax.invert_yaxis()
    ax.grid(axis="x", alpha=0.3)


def heart_rate_figure(curves: dict[tuple, ThreadCurve], summary: pd.DataFrame, window: int,
                      timelines: list[dict] | None = None, statuses: dict[tuple, str] | None = None,
                      notes: dict[str, str] | None = None):
    """Heart rate over time, one panel per run, one line per thread; how each thread
    ended (a marker, and in its legend entry); its diagnose status (line style, and in
    its legend entry); with `timelines`, each run's behavior strip under its panel.
    Returns the matplotlib Figure.

    `curves`: (run, process, thread) -> its ThreadCurve (thread_curve);
    `summary`: summary.summarize_threads; `timelines`: behavior.behavior_timelines;
    `statuses`: (run, process, thread) -> diagnose status, for the threads diagnosed;
    `notes`: run -> one line on its diagnosis (or why none was made), under its title."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    statuses = statuses or {}
    notes = notes or {}
    runs = list(dict.fromkeys(k[0] for k in curves))
    ends = {(r.run, r.process, r.thread): (r.ending, r.ended, bool(r.abnormal)) for r in summary.itertuples()}
    behavior = timelines is not None
    if behavior:
        nthreads = [sum(1 for k in curves if k[0] == r) for r in runs]
        ratios = []
        for n in nthreads:
            ratios += [3.2, 0.35 + 0.18 * n]
        fig, grid = plt.subplots(2 * len(runs), 1, figsize=(11, sum(ratios) + 1.4), squeeze=False,
                                 gridspec_kw={"height_ratios": ratios}, layout="constrained")
        axes, strips = grid[0::2], grid[1::2]
    else:
        fig, axes = plt.subplots(len(runs), 1, figsize=(11, 3.4 * len(runs) + 1.0), squeeze=False,
                                 layout="constrained")
        strips = None
    endings_seen: dict[str, str] = {}  # the key's words -> marker, in order of appearance
    statuses_seen: dict[str, str] = {}
    died = undiagnosed = False
    for k, (ax, run) in enumerate(zip(axes[:, 0], runs)):
        groups = sorted((((k[1], k[2]), v) for k, v in curves.items() if k[0] == run), key=lambda kv: kv[0])
        cmap = plt.get_cmap("tab10" if len(groups) <= 10 else "tab20")
        multi = len({p for (p, _), _ in groups}) > 1
        tops = []
        for i, ((proc, thr), curve) in enumerate(groups):
            color = cmap(i % cmap.N)
            ending, ended, abnormal = ends.get((run, proc, thr), ("unknown", "", False))
            marker, words, key = _ending(ending, ended)
            endings_seen.setdefault(key, marker)
            status = statuses.get((run, proc, thr))
            if status is None:
                style, undiagnosed = NOT_DIAGNOSED, True
                said = "not diagnosed"
            else:
                style = STATUS_STYLES.get(status, STATUS_OTHER)
                statuses_seen.setdefault(status, style)
                said = status
            label = f"{f'p{proc} t{thr}' if multi else f'thread {thr}'} · {words} · {said}"
            ax.plot(curve.x, curve.y, lw=0.6, color=color, alpha=0.25)
            ax.plot(curve.xs, curve.ys, lw=1.8, color=color, ls=style, label=label)
            if np.isfinite(curve.top):
                tops.append(curve.top)
            died |= abnormal
            ax.plot([curve.last_t], [curve.last_hr], marker=marker, ls="", color=DIED_COLOR if abnormal else color,
                    ms=9 if marker in ("x", "X", ENDING_OTHER) else 6, mew=2 if marker == "x" else 1)
        title = (f"{run}  ({len(groups)} thread{'s' if len(groups) != 1 else ''}; heart rate over {window} beats, faint; "
                 f"its rolling median, bold)")
        if notes.get(run):
            title += "\n" + notes[run]
        ax.set_title(title, fontsize=10, loc="left")
        ax.set_ylabel("heart rate (beats/s)")
        # spikes of a few beats (time slicing) must not squash the band every thread lives in
        ax.set_ylim(0, 1.3 * max(tops) if tops else None)
        ax.grid(alpha=0.3)
        if len(groups) <= 16:
            ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0,
                      title="thread · how it ended · diagnose", title_fontsize=8)
        if strips is not None:
            mine = [r for r in timelines if r["run"] == run]
            for r in mine:  # shade the heart-rate panel where a thread misbehaved
                for iv in r["intervals"]:
                    if iv["behavior"] in ("busy-waiting", "conditional-waiting"):
                        ax.axvspan(iv["start_ns"] / 1e9, iv["end_ns"] / 1e9, color=BEHAVIOR_COLORS[iv["behavior"]],
                                   alpha=0.18, lw=0)
            sax = strips[k, 0]
            sax.sharex(ax)
            _behavior_strip(sax, mine, groups, multi)
    # one key for the whole figure, under it: markers, line styles, behavior colours
    handles = [Line2D([], [], marker=m, ls="", color="dimgray", ms=7, label=key) for key, m in endings_seen.items()]
    if died:
        handles.append(Line2D([], [], marker="o", ls="", color=DIED_COLOR, ms=7,
                              label="black marker: the process died (signal, error exit, no end record)"))
    handles += [Line2D([], [], ls=style, lw=1.8, color="dimgray", label=f"diagnose: {status}")
                for status, style in statuses_seen.items()]
    if undiagnosed:
        handles.append(Line2D([], [], ls=NOT_DIAGNOSED, lw=1.8, color="dimgray", label="not diagnosed (see the title)"))
    if behavior:
        handles += [Patch(color=c, label=f"behavior: {b}") for b, c in BEHAVIOR_COLORS.items()]
        handles.append(Line2D([], [], marker="|", color="black", ls="", ms=10, label="online monitor report"))
    fig.legend(handles=handles, loc="outside lower center", ncol=3, fontsize=7.5, frameon=False)
    (strips if strips is not None else axes)[-1, 0].set_xlabel("time since start (s)")
    return fig


def save(fig, out: str) -> None:
    """Write a figure to `out` (the format from its suffix) and free it."""
    import matplotlib.pyplot as plt

    fig.savefig(out, dpi=110)
    plt.close(fig)


def _legend_above(ax, *axes, ncol: int = 5) -> None:
    """One legend for the lines of `ax` and its twins, in rows of `ncol` above the panel."""
    handles, labels = [], []
    for a in (ax, *axes):
        h, lab = a.get_legend_handles_labels()
        handles += h
        labels += lab
    ax.legend(handles, labels, fontsize=8, ncol=min(len(handles), ncol), loc="lower left", bbox_to_anchor=(0, 1.01),
              borderaxespad=0, frameon=False)


def status_figure(report, title: str):
    """The machine's status over a run: CPU split, memory and swap, network, the process.
    Every panel has a legend naming its lines with their units. Returns the Figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    iv = report.intervals
    procs = sorted(iv["process"].unique().tolist())
    fig, axes = plt.subplots(4, 1, figsize=(10, 10.5), sharex=True, squeeze=False, layout="constrained")
    ax_cpu, ax_mem, ax_net, ax_proc = axes[:, 0]
    first = iv[iv["process"] == procs[0]]
    t0, t1 = first["t_start"].to_numpy(), first["t"].to_numpy()
    # step plots: each interval's value holds from its start to its end
    x = np.r_[t0[:1], t1]

    def steps(v):
        return np.r_[v[:1], v]

    parts = [("cpu_user_pct", "user", "#1f77b4"), ("cpu_system_pct", "system", "#d62728"),
             ("cpu_iowait_pct", "iowait", "#ff7f0e"), ("cpu_steal_pct", "steal", "#9467bd"),
             ("cpu_idle_pct", "idle", "#dddddd")]
    ys = [np.nan_to_num(steps(first[c].to_numpy(dtype=float))) for c, _, _ in parts]
    ax_cpu.stackplot(x, *ys, labels=[f"CPU {lab} (%)" for _, lab, _ in parts],
                     colors=[c for _, _, c in parts], step="pre")
    ax_cpu.set_ylim(0, 100)
    ax_cpu.set_ylabel("CPU (% of all CPUs)")
    _legend_above(ax_cpu)
    ax_mem.step(x, steps(first["mem_used_pct"].to_numpy(dtype=float)), where="pre", color="#1f77b4",
                label="memory used (% of RAM, left)")
    ax_mem.set_ylabel("memory used (%)")
    ax_mem.set_ylim(0, 100)
    ax_swap = ax_mem.twinx()
    ax_swap.step(x, steps(first["swap_used_kb"].to_numpy(dtype=float)) / 1024, where="pre", color="#8c564b",
                 ls="--", label="swap used (MiB, right)")
    ax_swap.set_ylabel("swap used (MiB)")
    _legend_above(ax_mem, ax_swap)
    ax_net.step(x, steps(first["net_rx_bytes_per_s"].to_numpy(dtype=float)), where="pre",
                label="network received (bytes/s)")
    ax_net.step(x, steps(first["net_tx_bytes_per_s"].to_numpy(dtype=float)), where="pre",
                label="network sent (bytes/s)")
    ax_net.set_ylabel("network (bytes/s)")
    _legend_above(ax_net)
    cmap = plt.get_cmap("tab10")
    ax_rss = ax_proc.twinx()
    for i, p in enumerate(procs):
        sub = iv[iv["process"] == p]
        xp = np.r_[sub["t_start"].to_numpy()[:1], sub["t"].to_numpy()]
        ax_proc.step(xp, steps(sub["proc_cpu_pct"].to_numpy(dtype=float)), where="pre", color=cmap(2 * i % 10),
                     label=f"process {p} CPU (% of one CPU, left)")
        ax_rss.step(xp, steps(sub["proc_rss_kb"].to_numpy(dtype=float)) / 1024, where="pre", ls="--",
                    color=cmap((2 * i + 1) % 10), label=f"process {p} resident memory (MiB, right)")
    ax_proc.set_ylabel("process CPU (% of one CPU)")
    ax_rss.set_ylabel("resident memory (MiB)")
    _legend_above(ax_proc, ax_rss, ncol=2)  # CPU in one column, memory in the other
    ax_proc.set_xlabel("seconds since the run started")
    for ax in (ax_swap, ax_net, ax_proc, ax_rss):
        top = ax.get_ylim()[1]
        ax.set_ylim(0, top if top > 0 else 1)
    m = report.machine[0] if report.machine else {}
    mem = f", {m['mem_kb'] / 1048576:.1f} GiB" if m.get("mem_kb") else ""
    fig.suptitle(f"{title}: {m.get('cores') or '?'} cores, {m.get('model') or 'model unknown'}{mem}",
                 fontsize=10, x=0.01, ha="left")
    for ax in axes[:, 0]:
        ax.grid(alpha=0.3)
    return fig
