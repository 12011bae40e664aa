"""Alignment by polynomial regression (SPEC 2, seed 000 3.1).

Fit hr(t) by least squares with numpy's Polynomial.fit (which scales the domain),
raising the degree from 1 until R^2 >= the target or the maximum degree; keep the
best fit. Two sequences are compared "at the same timestamp" by evaluating both fits
on one common grid over the overlap of their time spans.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.polynomial import Polynomial


@dataclass(frozen=True)
class PolyFit:
    poly: Polynomial | None
    degree: int
    r2: float

    def __call__(self, t):
        if self.poly is None:
            return np.full(np.shape(t), np.nan)
        return self.poly(t)


def fit_poly(t, y, r2_target: float = 0.9, max_degree: int = 12) -> PolyFit:
    """Best polynomial fit of y(t): the lowest degree reaching r2_target, else the best R^2.

    NaN samples are ignored. Fewer than 2 usable points: an empty fit (evaluates to NaN).
    A constant y has R^2 = 1 by convention (the fit is exact).
    """
    t = np.asarray(t, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    ok = np.isfinite(t) & np.isfinite(y)
    t, y = t[ok], y[ok]
    if t.size < 2 or np.ptp(t) == 0:
        return PolyFit(None, 0, float("nan"))
    sst = float(np.sum((y - y.mean()) ** 2))
    best = PolyFit(None, 0, -np.inf)
    for deg in range(1, min(max_degree, t.size - 1) + 1):
        p = Polynomial.fit(t, y, deg)
        sse = float(np.sum((p(t) - y) ** 2))
        r2 = 1.0 if sst == 0 else 1.0 - sse / sst
        if r2 > best.r2:
            best = PolyFit(p, deg, r2)
        if r2 >= r2_target:
            break
    return best


def common_grid(tq, tc, points: int) -> np.ndarray:
    """`points` evenly spaced times over the overlap of two time spans (empty if none)."""
    lo = max(np.nanmin(tq), np.nanmin(tc))
    hi = min(np.nanmax(tq), np.nanmax(tc))
    if not np.isfinite(lo) or not np.isfinite(hi) or hi <= lo:
        return np.empty(0)
    return np.linspace(lo, hi, points)
