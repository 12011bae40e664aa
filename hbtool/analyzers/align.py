"""Alignment by polynomial regression (SPEC 2, seed 000 3.1).

Fit hr(t) by least squares with numpy's Polynomial.fit (which scales the domain),
raising the degree from 1 until R^2 >= the target or the maximum degree; keep the
best fit. Two sequences are compared "at the same timestamp" by evaluating both fits
on one common grid over the overlap of their time spans.
"""

from __future__ import annotations

import warnings
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
    Equivalent to fitting degrees 1, 2, ... in turn (tests/test_hsa.py checks it against
    that loop), at the cost of one fit.
    """
    t = np.asarray(t, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    ok = np.isfinite(t) & np.isfinite(y)
    t, y = t[ok], y[ok]
    if t.size < 2 or np.ptp(t) == 0:
        return PolyFit(None, 0, float("nan"))
    sst = float(np.sum((y - y.mean()) ** 2))
    top = min(max_degree, t.size - 1)
    if sst == 0:
        return PolyFit(Polynomial.fit(t, y, 1), 1, 1.0)
    # One QR of the Legendre Vandermonde matrix on the scaled domain gives the residual of
    # every degree at once: the fit of degree d is the projection of y on the first d + 1
    # orthonormal columns, so SSE_d = |y|^2 - sum of the first d + 1 squared projections.
    # Only the chosen degree is then fitted for real (as Polynomial.fit does it).
    lo, hi = t.min(), t.max()
    x = (2 * t - (lo + hi)) / (hi - lo)
    q, r = np.linalg.qr(np.polynomial.legendre.legvander(x, top))
    ok = np.abs(np.diag(r)) > 1e-10 * np.abs(r[0, 0])  # columns that add a direction
    proj = q.T @ y
    sse = float(y @ y) - np.cumsum(np.where(ok, proj, 0.0) ** 2)
    r2 = 1.0 - np.maximum(sse[1:], 0.0) / sst  # degrees 1..top
    reach = np.flatnonzero(r2 >= r2_target)
    deg = int(reach[0]) + 1 if reach.size else int(np.argmax(r2)) + 1
    with warnings.catch_warnings():
        # a degree the QR above found to add a direction; lstsq may still call the fit poorly
        # conditioned (a damaged trace's beats in a few clusters): the fit is what the QR chose
        warnings.simplefilter("ignore", np.exceptions.RankWarning)
        p = Polynomial.fit(t, y, deg)
    r2_deg = 1.0 - float(np.sum((p(t) - y) ** 2)) / sst
    return PolyFit(p, deg, r2_deg)


def common_grid(tq, tc, points: int) -> np.ndarray:
    """`points` evenly spaced times over the overlap of two time spans (empty if none)."""
    if np.size(tq) == 0 or np.size(tc) == 0:
        return np.empty(0)
    lo = max(np.nanmin(tq), np.nanmin(tc))
    hi = min(np.nanmax(tq), np.nanmax(tc))
    if not np.isfinite(lo) or not np.isfinite(hi) or hi <= lo:
        return np.empty(0)
    return np.linspace(lo, hi, points)
