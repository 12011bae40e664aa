"""Pictures of traces (matplotlib, Agg backend; imported only by `hbtool plot`)."""

from __future__ import annotations

import numpy as np

from . import config
from .analyzers.heartrate import heart_rate
from .analyzers.summary import summarize_threads
from .io.model import HeartbeatTrace

#: a gap between beats longer than this many median intervals is drawn as a break
GAP_FACTOR = 20


def _decimate(x: np.ndarray, y: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    if len(x) <= n:
        return x, y
    k = int(np.ceil(len(x) / n))
    m = len(x) // k * k
    return x[:m].reshape(-1, k).mean(axis=1), np.nanmean(y[:m].reshape(-1, k), axis=1)


def _break_gaps(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Insert a NaN where no beat came for GAP_FACTOR median intervals: no line across it."""
    if len(x) < 3:
        return x, y
    dx = np.diff(x)
    med = np.median(dx)
    gaps = np.flatnonzero(dx > GAP_FACTOR * med) if med > 0 else np.empty(0, int)
    if not gaps.size:
        return x, y
    return np.insert(x, gaps + 1, np.nan), np.insert(y, gaps + 1, np.nan)


def plot_heart_rates(trace: HeartbeatTrace, out: str, window: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = list(trace.runs)
    summary = summarize_threads(trace)
    ends = {(r.run, r.process, r.thread): (r.ending, r.abnormal) for r in summary.itertuples()}
    fig, axes = plt.subplots(len(runs), 1, figsize=(10, 3.2 * len(runs) + 0.6), squeeze=False)
    for ax, run in zip(axes[:, 0], runs):
        sub = trace.beats[trace.beats["run"] == run]
        groups = list(sub.groupby(["process", "thread"], sort=True))
        cmap = plt.get_cmap("tab10" if len(groups) <= 10 else "tab20")
        multi = sub["process"].nunique() > 1
        for i, ((proc, thr), g) in enumerate(groups):
            t = g["t"].to_numpy()
            hr = heart_rate(t, window)
            x, y = _decimate(t, hr, config.PLOT_MAX_POINTS)
            x, y = _break_gaps(x, y)
            color = cmap(i % cmap.N)
            label = f"p{proc} t{thr}" if multi else f"thread {thr}"
            ax.plot(x, y, lw=1.1, color=color, label=label)
            ending, abnormal = ends.get((run, proc, thr), ("unknown", False))
            last = hr[~np.isnan(hr)][-1] if np.any(~np.isnan(hr)) else 0.0
            if abnormal:
                ax.plot([t[-1]], [last], marker="x", color="red", ms=9, mew=2)
            elif ending != "unknown":
                ax.plot([t[-1]], [last], marker="o", color=color, ms=5)
        ax.set_title(f"{run}  ({len(groups)} threads, window {window} beats)", fontsize=10, loc="left")
        ax.set_ylabel("heart rate (beats/s)")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        if len(groups) <= 16:
            ax.legend(fontsize=8, ncol=min(len(groups), 8), loc="lower left")
    axes[-1, 0].set_xlabel("time since start (s)   o: ended normally   x: died (signal, error exit, no end record)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
