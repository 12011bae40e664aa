"""Distances between heart-rate sequences (SPEC 3): DTW, LB_Keogh, mean pooling.

Public wrappers: they validate and convert, then call the numba kernels of
``kernels.py``. Import this module explicitly (``hbtool.analyzers.distance``);
it loads numba, which the CLI must not pay for in commands that do not use it.

Conventions shared by every function here:

- Sequences are 1-D, converted to contiguous float64. A 2-D array, an empty
  sequence or an infinite value raises ``ValueError``.
- NaN (a gap) is never skipped: a sequence holding a NaN gives a NaN distance.
- ``window`` / ``r`` are Sakoe-Chiba half-widths in points: non-negative ints
  (``TypeError`` for floats and bools, ``ValueError`` when negative).
"""

from __future__ import annotations

import operator

import numpy as np

from .. import config
from .. import kernels

__all__ = ["dtw", "dtw_many", "lb_keogh", "lb_keogh_l1", "pool"]


def _series(x, name: str) -> np.ndarray:
    """x as a contiguous float64 1-D array of at least one point (infinities are checked later)."""
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 1:
        raise ValueError(f"{name} must be a 1-D sequence, not {a.ndim}-D (shape {a.shape})")
    if a.size == 0:
        raise ValueError(f"{name} is empty")
    return np.ascontiguousarray(a)


def _infinite(name: str) -> ValueError:
    return ValueError(f"{name} holds an infinite value (NaN marks a gap; inf is not allowed)")


def _width(w, name: str, allow_none: bool) -> int:
    """A half-width as an int >= 0 (None -> -1, meaning no band, where allowed)."""
    if w is None and allow_none:
        return -1
    if isinstance(w, (bool, np.bool_)):
        raise TypeError(f"{name} must be an int, not a bool")
    try:
        w = operator.index(w)
    except TypeError:
        raise TypeError(f"{name} must be an int{' or None' if allow_none else ''}, "
                        f"not {type(w).__name__}") from None
    if w < 0:
        raise ValueError(f"{name} must be >= 0, not {w}")
    return w


def dtw(q, c, window: int | None = None) -> float:
    """Dynamic time warping distance of q (n points) and c (m points).

    Cost ``|q_i - c_j|``; ``D(i,j) = cost + min(D(i-1,j), D(i,j-1), D(i-1,j-1))``;
    the distance is the last cell ``D(n-1, m-1)``.

    ``window``: Sakoe-Chiba half-width, cell (i, j) is allowed iff
    ``|i - j| <= window``; None means no band, 0 with equal lengths is the L1
    distance. With unequal lengths the band is widened to ``max(window, |n - m|)``
    (symmetric) so that a warping path exists. For equal lengths this is
    dtaidistance's ``window=window + 1`` with ``inner_dist='euclidean'``; for
    unequal lengths dtaidistance instead widens by ``|n - m|`` on one side only.

    Sequences are not pooled here: apply :func:`pool` first where SPEC 3 asks
    for it (longer than ``config.DTW_MAX_POINTS``).
    """
    d = kernels._dtw_pair(_series(q, "q"), _series(c, "c"), _width(window, "window", True))
    if d == kernels.INFINITE_INPUT:
        raise _infinite("q or c")
    return float(d)


def _pack(seqs, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Sequences (a 2-D array's rows, or a list of 1-D array-likes) -> flat float64 + offsets."""
    if isinstance(seqs, np.ndarray) and seqs.dtype != object:
        if seqs.ndim != 2:
            raise ValueError(f"{name} must be a list of 1-D sequences or a 2-D array, not {seqs.ndim}-D")
        rows, cols = seqs.shape
        if rows and not cols:
            raise ValueError(f"{name}[0] is empty")
        flat = np.ascontiguousarray(seqs, dtype=np.float64).reshape(-1)
        return flat, np.arange(rows + 1, dtype=np.int64) * cols
    try:
        seqs = list(seqs)
    except TypeError:
        raise ValueError(f"{name} must be a list of 1-D sequences or a 2-D array, "
                         f"not {type(seqs).__name__}") from None
    parts = []
    offsets = np.empty(len(seqs) + 1, dtype=np.int64)
    offsets[0] = end = 0
    for k, s in enumerate(seqs):
        a = np.asarray(s, dtype=np.float64)
        if a.ndim != 1 or a.size == 0:
            _series(a, f"{name}[{k}]")  # raises the message
        parts.append(a)
        end += a.size
        offsets[k + 1] = end
    flat = np.concatenate(parts) if parts else np.empty(0)
    return flat, offsets


def dtw_many(pairs_q, pairs_c, window: int | None = None) -> np.ndarray:
    """DTW distances of many pairs ``(pairs_q[k], pairs_c[k])`` in one parallel call.

    ``pairs_q`` and ``pairs_c``: 2-D arrays (one sequence per row) or lists of
    1-D sequences of any lengths, with the same number of sequences. Returns a
    float64 array with one :func:`dtw` distance (same ``window`` rules) per pair;
    a pair holding a NaN gets NaN. Runs on numba's thread pool
    (``NUMBA_NUM_THREADS`` / ``numba.set_num_threads``).
    """
    w = _width(window, "window", True)
    qflat, qoff = _pack(pairs_q, "pairs_q")
    cflat, coff = _pack(pairs_c, "pairs_c")
    if qoff.size != coff.size:
        raise ValueError(f"pairs_q holds {qoff.size - 1} sequences but pairs_c holds {coff.size - 1}")
    if qoff.size == 1:
        return np.empty(0)
    out = kernels._dtw_many(qflat, qoff, cflat, coff, w)
    bad = np.flatnonzero(out == kernels.INFINITE_INPUT)
    if bad.size:
        raise _infinite(f"pair {bad[0]}")
    return out


def _resample(x: np.ndarray, length: int) -> np.ndarray:
    """Linear interpolation of x onto `length` evenly spaced points spanning its first..last."""
    if x.size == length:
        return x
    return np.interp(np.linspace(0.0, x.size - 1, length), np.arange(x.size, dtype=np.float64), x)


def _lb(q, c, r, squared: bool) -> float:
    q = _series(q, "q")
    c = _series(c, "c")
    r = _width(r, "r", False)
    status = max(kernels._scan(q), kernels._scan(c))
    if status == 2:
        raise _infinite("q or c")
    if status == 1:
        return float("nan")
    length = max(q.size, c.size)
    return float(kernels._lb_keogh(_resample(q, length), _resample(c, length), r, squared))


def lb_keogh(q, c, r: int) -> float:
    """LB_Keogh of c against the envelope of q with window r (SPEC 3), squared form.

    ``u_i = max(q[i-r .. i+r])``, ``l_i = min(...)``, clipped at the ends; the
    bound is the sum of ``(c_i - u_i)^2`` where ``c_i > u_i`` and
    ``(c_i - l_i)^2`` where ``c_i < l_i``. When the lengths differ, the shorter
    sequence is first resampled by linear interpolation to the longer one's
    length (first and last points kept).
    """
    return _lb(q, c, r, True)


def lb_keogh_l1(q, c, r: int) -> float:
    """LB_Keogh in L1 form: the sum of ``|excess|`` outside the envelope of q.

    For equal lengths this is a lower bound of ``dtw(q, c, window=r)`` (the
    absolute-cost DTW with the same band); use it, not :func:`lb_keogh`, to
    prune DTW searches. Resampling as in :func:`lb_keogh` (then it bounds the
    DTW of the resampled sequences, not of the originals).
    """
    return _lb(q, c, r, False)


def pool(x, cap: int = config.DTW_MAX_POINTS) -> np.ndarray:
    """Mean-pool x down to exactly ``cap`` points when it is longer (SPEC 3).

    Point k is the mean of ``x[floor(k n / cap) : floor((k+1) n / cap)]``:
    contiguous bins whose sizes differ by at most one (all equal when cap
    divides n). A sequence of at most ``cap`` points comes back unchanged
    (as a float64 copy). A NaN makes its bin's mean NaN.
    """
    x = np.array(x, dtype=np.float64)  # a copy
    if x.ndim != 1:
        raise ValueError(f"x must be a 1-D sequence, not {x.ndim}-D (shape {x.shape})")
    cap = _width(cap, "cap", False)
    if cap < 1:
        raise ValueError("cap must be >= 1")
    n = x.size
    if n <= cap:
        return x
    edges = np.arange(cap + 1, dtype=np.int64) * n // cap
    return np.add.reduceat(x, edges[:-1]) / np.diff(edges)
