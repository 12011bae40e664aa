"""Features of a target heartbeat sequence C against a reference Q (SPEC 3, seed 000 3.2).

The six features of the paper, GTR, LTR, GHR, LHR, DTW and LB, plus `progress` (the
beats C completed against the beats expected), which hbtool adds because run-to-run
timing noise on a shared machine is large enough to hide a shutdown in the time
features alone (docs/methods.md says why and how each is computed).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import numpy as np

from .. import config
from .align import common_grid, fit_poly
from .heartrate import heart_rate
from ..model.hsa import FEATURES, PAPER_FEATURES, FeatureSettings

@dataclass
class Series:
    """One thread's beats: times (s since program start) and heart rates."""

    t: np.ndarray
    hr: np.ndarray = field(repr=False)
    _fits: dict = field(default_factory=dict, repr=False, compare=False)

    def fit(self, s: "FeatureSettings"):
        """The polynomial fit of hr(t) (SPEC 2), computed once per settings: a reference
        is compared with every thread of its team."""
        key = (s.window, s.dtw_max_points, s.r2_target, s.max_degree)
        if key not in self._fits:
            w = s.window
            self._fits[key] = fit_poly(*_pool_xy(self.t[w:], self.hr[w:], s.dtw_max_points), s.r2_target, s.max_degree)
        return self._fits[key]

    @property
    def beats(self) -> int:
        return int(self.t.size)

    def last_t(self) -> float:
        """The last beat's time (the sequence has beats)."""
        return self.t[-1]

    def mean_hr(self, w: int) -> float:
        """The mean of the defined heart rates after the first `w` beats (NaN: none)."""
        return np.nanmean(self.hr[w:])

    def rate_defined(self, w: int) -> bool:
        """Whether any heart rate after the first `w` beats is defined."""
        return not np.all(np.isnan(self.hr[w:]))


class LazySeries(Series):
    """A thread's beats that stay in the trace file until needed (a StreamedTrace's):
    `load()` reads its beat times, which are kept in a cache of config.SERIES_CACHE_BYTES
    and read again after being dropped. What choosing a reference needs (last time, mean
    heart rate) is kept after the first read."""

    def __init__(self, load, beats: int, window: int):
        self._load, self._n, self._w = load, int(beats), window
        self._arrays = None
        self._fits = {}
        self._facts: dict = {}

    def __repr__(self) -> str:
        return f"LazySeries(beats={self._n})"

    @property
    def t(self) -> np.ndarray:
        return self._get()[0]

    @property
    def hr(self) -> np.ndarray:
        return self._get()[1]

    @property
    def beats(self) -> int:
        return self._n

    def _get(self):
        if self._arrays is None:
            _CACHE.make_room(16 * self._n, keep=1)  # before reading: only the series used last is in use
            t = np.asarray(self._load(), dtype=np.float64)
            self._arrays = (t, heart_rate(t, self._w))
            if t.size:  # what choosing a reference asks of every thread, kept past a drop
                self.last_t()
                if self.rate_defined(self._w):
                    self.mean_hr(self._w)
            _CACHE.admit(self, 2 * t.nbytes)
        else:
            _CACHE.touch(self)
        return self._arrays

    def _fact(self, name: str, w: int, f):
        key = (name, w)
        if key not in self._facts:
            self._facts[key] = f()
        return self._facts[key]

    def last_t(self) -> float:
        return self._fact("last", 0, lambda: Series.last_t(self))

    def mean_hr(self, w: int) -> float:
        return self._fact("mean", w, lambda: Series.mean_hr(self, w))

    def rate_defined(self, w: int) -> bool:
        return self._fact("rate", w, lambda: Series.rate_defined(self, w))

    def drop(self) -> None:
        self._arrays = None


class _SeriesCache:
    """The loaded arrays of lazy series, within a byte budget. Over budget, the series used
    most recently is dropped first, but never the two used last (a thread and the reference
    it is compared with): threads are visited in turn, twice, and keeping the first ones
    read serves the second visit better than keeping the last ones. Series are held
    weakly: a series no longer used elsewhere frees its arrays with it."""

    def __init__(self):
        self.used: dict[int, tuple] = {}   # id -> (weak reference, bytes), in order of use

    def touch(self, s) -> None:
        item = self.used.pop(id(s), None)
        if item is not None:
            self.used[id(s)] = item

    def admit(self, s, nbytes: int) -> None:
        self.used[id(s)] = (weakref.ref(s), nbytes)
        self.make_room(0)

    def make_room(self, nbytes: int, keep: int = 2) -> None:
        """Drop series until `nbytes` more fit in the budget (never the `keep` used last)."""
        for key in [k for k, (ref, _) in self.used.items() if ref() is None]:
            del self.used[key]
        total = sum(n for _, n in self.used.values()) + nbytes
        victims = list(self.used)[:-keep]
        while total > config.SERIES_CACHE_BYTES and victims:
            ref, n = self.used.pop(victims.pop())
            old = ref()
            if old is not None:
                old.drop()
            total -= n


_CACHE = _SeriesCache()


def make_series(t, window: int) -> Series:
    t = np.asarray(t, dtype=np.float64)
    return Series(t=t, hr=heart_rate(t, window))


def too_few_beats(s: Series, settings: FeatureSettings) -> str | None:
    """Why a sequence has no features, or None when it has them."""
    need = settings.window + 2
    if s.beats < need:
        return f"{s.beats} beats: too few for heart rates (window {settings.window} needs at least {need})"
    if not s.rate_defined(settings.window):
        return "no elapsed time between beats: heart rate undefined"
    return None


def _ltr(tq: np.ndarray, tc: np.ndarray, w: int) -> float:
    k = (min(tq.size, tc.size) - 1) // w
    if k < 1:
        return float("nan")
    idx = np.arange(k + 1) * w
    dq = np.diff(tq[idx])
    dc = np.diff(tc[idx])
    ok = dq > 0
    if not ok.any():
        return float("nan")
    return float(np.mean(dc[ok] / dq[ok]))


def _ltr_max(tq: np.ndarray, tc: np.ndarray, k: int) -> float:
    """The largest ratio of durations over `k` equal windows of the beats both sequences
    have: how much slower C was than Q at its slowest stretch."""
    n = min(tq.size, tc.size)
    if n < 2 * k or k < 1:
        return float("nan")
    idx = np.linspace(0, n - 1, k + 1).astype(np.int64)
    dq, dc = np.diff(tq[idx]), np.diff(tc[idx])
    ok = dq > 0
    return float(np.max(dc[ok] / dq[ok])) if ok.any() else float("nan")


def _lhr(q: Series, c: Series, s: FeatureSettings) -> float:
    """Mean over windows of the ratio of windowed means of the aligned fitted curves."""
    w = s.window
    grid = common_grid(q.t[w:], c.t[w:], s.lhr_points)
    if grid.size < s.lhr_window:
        return float("nan")
    # fitted on at most dtw_max_points pooled points: same curve, bounded cost
    yq, yc = q.fit(s)(grid), c.fit(s)(grid)
    k = grid.size // s.lhr_window
    mq = yq[: k * s.lhr_window].reshape(k, -1).mean(axis=1)
    mc = yc[: k * s.lhr_window].reshape(k, -1).mean(axis=1)
    ok = mq > 0
    if not ok.any():
        return float("nan")
    return float(np.mean(np.maximum(mc[ok], 0.0) / mq[ok]))


def _pool_xy(x: np.ndarray, y: np.ndarray, cap: int) -> tuple[np.ndarray, np.ndarray]:
    ok = np.isfinite(y)
    x, y = x[ok], y[ok]
    if x.size <= cap:
        return x, y
    from .distance import pool

    return pool(x, cap), pool(y, cap)


def rate_profiles(q: Series, c: Series, s: FeatureSettings) -> tuple[np.ndarray, np.ndarray]:
    """The two heart-rate sequences DTW and LB compare: defined rates, divided by the
    reference's mean rate (dimensionless), mean-pooled to at most dtw_max_points."""
    from .distance import pool

    qh = q.hr[s.window:]
    ch = c.hr[s.window:]
    qh, ch = qh[np.isfinite(qh)], ch[np.isfinite(ch)]
    scale = float(np.mean(qh)) if qh.size else float("nan")
    if not np.isfinite(scale) or scale <= 0:
        return np.empty(0), np.empty(0)
    return pool(qh / scale, s.dtw_max_points), pool(ch / scale, s.dtw_max_points)


def compute_features(q: Series, c: Series, s: FeatureSettings, expected_beats: float | None = None) -> dict:
    """The features of C against Q. Undefined values are NaN.

    `expected_beats`: the number of beats a complete sequence has (from a model or the
    reference); default: the reference's number of beats.
    """
    from .distance import dtw, lb_keogh

    out = dict.fromkeys(FEATURES, float("nan"))
    exp = float(expected_beats) if expected_beats else float(q.beats)
    out["progress"] = c.beats / exp if exp > 0 else float("nan")
    if q.t.size and c.t.size and q.t[-1] > 0:
        out["GTR"] = float(c.t[-1] / q.t[-1])
    out["LTR"] = _ltr(q.t, c.t, s.ltr_window)
    out["LTRmax"] = _ltr_max(q.t, c.t, s.peak_windows)
    w = s.window
    qh, ch = q.hr[w:], c.hr[w:]
    mq, mc = np.nanmean(qh) if np.isfinite(qh).any() else np.nan, np.nanmean(ch) if np.isfinite(ch).any() else np.nan
    if np.isfinite(mq) and mq > 0:
        out["GHR"] = float(mc / mq)
    out["LHR"] = _lhr(q, c, s)
    pq, pc = rate_profiles(q, c, s)
    if pq.size and pc.size:
        out["DTW"] = dtw(pq, pc, window=s.band)
        out["LB"] = lb_keogh(pq, pc, s.lb_radius)
    return out
