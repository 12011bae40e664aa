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


def service_rate_scan(x, window, gauss, z, combined, conv_window, tol, min_values):
    """SPEC 7 literally: per sample, filter the window (np.convolve 'valid'), q = mean + z * sd,
    q-bar and the running sd from all q since the restart (no Welford), convergence from the
    filtered sd series, restart."""
    x = np.asarray(x, dtype=float)
    n = x.size
    qbar = np.full(n, np.nan)
    qsd = np.full(n, np.nan)
    conv = np.zeros(n, dtype=np.uint8)
    qs, sds = [], []
    for i in range(window - 1, n):
        f = np.convolve(x[i - window + 1 : i + 1], np.asarray(gauss)[::-1], mode="valid")
        sd = float(np.std(f, ddof=1)) if f.size > 1 else 0.0
        qs.append(float(np.mean(f)) + z * sd)
        mean = float(np.mean(qs))
        s = float(np.std(qs, ddof=1)) if len(qs) > 1 else 0.0
        sds.append(s)
        qbar[i], qsd[i] = mean, s
        c = len(combined)
        if len(qs) >= min_values and len(qs) >= conv_window + c - 1:
            tail = np.asarray(sds[-(conv_window + c - 1):])
            filt = np.convolve(tail, np.asarray(combined)[::-1], mode="valid")
            if np.all(np.abs(filt) <= tol * abs(mean)):
                conv[i] = 1
                qs, sds = [], []
    return qbar, qsd, conv
