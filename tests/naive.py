"""Slow, obvious references for the numba kernels (stumpy's naive.py habit).

Each follows the definition in SPEC 3 literally: full matrices, explicit loops,
no clever bookkeeping. tests/test_kernels.py compares every kernel with these.
"""

from __future__ import annotations

import math

import numpy as np


def dtw(q, c, window=None) -> float:
    """Full (n x m) cumulative matrix; cells with |i - j| > band stay inf."""
    q = [float(v) for v in q]
    c = [float(v) for v in c]
    n, m = len(q), len(c)
    band = math.inf if window is None else max(window, abs(n - m))
    D = np.full((n, m), math.inf)
    for i in range(n):
        for j in range(m):
            if abs(i - j) > band:
                continue
            cost = abs(q[i] - c[j])
            if i == 0 and j == 0:
                D[i, j] = cost
                continue
            prior = []
            if i > 0:
                prior.append(D[i - 1, j])
            if j > 0:
                prior.append(D[i, j - 1])
            if i > 0 and j > 0:
                prior.append(D[i - 1, j - 1])
            D[i, j] = cost + min(prior)
    return float(D[n - 1, m - 1])


def envelope(q, r):
    """u_i = max(q[i-r .. i+r]), l_i = min(...), clipped at the ends."""
    n = len(q)
    upper = [max(q[max(0, i - r): min(n, i + r + 1)]) for i in range(n)]
    lower = [min(q[max(0, i - r): min(n, i + r + 1)]) for i in range(n)]
    return upper, lower


def resample(x, length):
    """Linear interpolation of x onto `length` evenly spaced points over its index span."""
    x = [float(v) for v in x]
    k = len(x)
    if k == length:
        return x
    out = []
    for p in range(length):
        pos = p * (k - 1) / (length - 1) if length > 1 else 0.0
        lo = min(int(math.floor(pos)), k - 1)
        hi = min(lo + 1, k - 1)
        frac = pos - lo
        out.append(x[lo] + (x[hi] - x[lo]) * frac)
    return out


def lb_keogh(q, c, r, squared=True) -> float:
    length = max(len(q), len(c))
    q = resample(q, length)
    c = resample(c, length)
    upper, lower = envelope(q, r)
    total = 0.0
    for ci, u, lo in zip(c, upper, lower):
        if ci > u:
            e = ci - u
        elif ci < lo:
            e = lo - ci
        else:
            e = 0.0
        total += e * e if squared else e
    return total


def pool(x, cap):
    """Bin k = x[floor(k n / cap) : floor((k+1) n / cap)], averaged with a plain loop."""
    x = [float(v) for v in x]
    n = len(x)
    if n <= cap:
        return np.array(x)
    out = []
    for k in range(cap):
        lo, hi = k * n // cap, (k + 1) * n // cap
        s = 0.0
        for v in x[lo:hi]:
            s += v
        out.append(s / (hi - lo))
    return np.array(out)
