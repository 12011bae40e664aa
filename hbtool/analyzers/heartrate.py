"""Heart rate (SPEC 1): hr_i = w / (t_i - t_{i-w}) beats/s, defined for i >= w."""

from __future__ import annotations

import numpy as np

from .. import config


def heart_rate_curves(trace, w: int = config.HEART_RATE_WINDOW) -> dict[tuple, tuple[np.ndarray, np.ndarray]]:
    """Every thread's heart rate: (run, process, thread) -> (beat times s, heart rates)."""
    return {key: (t, hr) for key, t, hr in heart_rate_series(trace, w)}


def heart_rate_series(trace, w: int = config.HEART_RATE_WINDOW):
    """Every thread's heart rate, one thread at a time: ((run, process, thread), beat times s,
    heart rates). A trace whose beats stay in their files (StreamedTrace) has each thread's
    beat times read when its turn comes, so that only one thread's are in memory."""
    loaders = getattr(trace, "thread_loaders", None)
    if loaders is not None:
        for key, _, load in loaders():
            t = load()
            yield key, t, heart_rate(t, w)
        return
    for key, g in trace.threads():
        t = g["t"].to_numpy()
        yield key, t, heart_rate(t, w)


def heart_rate_pieces(pieces, w: int = config.HEART_RATE_WINDOW):
    """(times, heart rates) of each of a thread's consecutive pieces of beat times (s,
    ascending): the rates heart_rate gives the whole thread, holding a piece and the w
    times before it."""
    before = np.empty(0)
    for piece in pieces:
        t = np.asarray(piece, dtype=np.float64)
        if not t.size:
            continue
        ext = np.concatenate([before, t])
        yield t, heart_rate(ext, w)[before.size:]   # NaN for the thread's first w beats, as whole
        before = ext[max(0, ext.size - w):] if w > 0 else np.empty(0)


def heart_rate(t, w: int = config.HEART_RATE_WINDOW) -> np.ndarray:
    """Windowed heart rate of one thread's beat times `t` (seconds, ascending).

    Returns an array of len(t): NaN for the first `w` beats (undefined), and
    NaN where `w` beats share one timestamp (no time elapsed: rate undefined,
    never inf). A thread with fewer than w + 1 beats gets all NaN.
    """
    t = np.asarray(t, dtype=np.float64)
    if w < 1:
        raise ValueError(f"heart-rate window must be at least 1 beat, not {w}")
    out = np.full(t.shape, np.nan)
    if t.size > w:
        dt = t[w:] - t[:-w]
        with np.errstate(divide="ignore", invalid="ignore"):
            out[w:] = np.where(dt > 0, w / dt, np.nan)
    return out
