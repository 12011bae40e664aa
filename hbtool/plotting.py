"""Pictures of traces (matplotlib, Agg backend; imported only by `hbtool plot`)."""

from __future__ import annotations

import numpy as np

from . import config
from .analyzers.heartrate import heart_rate
from .analyzers.summary import summarize_threads
from .io.model import HeartbeatTrace

_DIED = {"signal", "no_end_record", "process_exit"}


def _decimate(x: np.ndarray, y: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    if len(x) <= n:
        return x, y
    k = int(np.ceil(len(x) / n))
    m = len(x) // k * k
    return x[:m].reshape(-1, k).mean(axis=1), np.nanmean(y[:m].reshape(-1, k), axis=1)


def plot_heart_rates(trace: HeartbeatTrace, out: str, window: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = list(trace.runs)
    summary = summarize_threads(trace)
    ends = {(r.run, r.process, r.thread): r.ending for r in summary.itertuples()}
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
            color = cmap(i % cmap.N)
            label = f"p{proc} t{thr}" if multi else f"thread {thr}"
            ax.plot(x, y, lw=1.1, color=color, label=label)
            ending = ends.get((run, proc, thr), "unknown")
            last = hr[~np.isnan(hr)][-1] if np.any(~np.isnan(hr)) else 0.0
            if ending in _DIED:
                ax.plot([t[-1]], [last], marker="x", color="red", ms=9, mew=2)
            elif ending != "unknown":
                ax.plot([t[-1]], [last], marker="o", color=color, ms=5)
        ax.set_title(f"{run}  ({len(groups)} threads, window {window} beats)", fontsize=10, loc="left")
        ax.set_ylabel("heart rate (beats/s)")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        if len(groups) <= 16:
            ax.legend(fontsize=8, ncol=min(len(groups), 8), loc="lower left")
    axes[-1, 0].set_xlabel("time since start (s)   o: thread ended itself   x: died or no end record")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
