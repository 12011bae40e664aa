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
from .align import fit_poly
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

    #: where the thread is known to have been in its team's parallel region until later than
    #: its last beat (presence_ends), that time (s); NaN otherwise
    present_until = float("nan")

    def last_t(self) -> float:
        """The last beat's time (the sequence has beats)."""
        return self.t[-1]

    def end_t(self) -> float:
        """When the thread's run ended for GTR: its last beat, or later where it is known to
        have waited in its team's region until then (present_until)."""
        last = self.last_t()
        p = self.present_until
        return p if p == p and p > last else last

    def mean_hr(self, w: int) -> float:
        """The mean of the defined heart rates after the first `w` beats (NaN: none)."""
        return np.nanmean(self.hr[w:])

    def rate_defined(self, w: int) -> bool:
        """Whether any heart rate after the first `w` beats is defined."""
        return not np.all(np.isnan(self.hr[w:]))

    def times_every(self, step: int, count: int):
        """The times of beats 0, step, 2 step, ... (the first `count` of them), in
        consecutive arrays."""
        yield self.t[::step][:count]

    def times_at(self, idx: np.ndarray) -> np.ndarray:
        """The times of the beats at the (ascending) indices idx."""
        return self.t[idx]

    def time_span(self, w: int) -> tuple[float, float]:
        """The earliest and latest time of the beats after the first `w` (NaN, NaN: none)."""
        t = self.t[w:]
        t = t[np.isfinite(t)]
        return (float(t.min()), float(t.max())) if t.size else (float("nan"), float("nan"))

    def rate_profile(self, w: int, cap: int, scale: float) -> np.ndarray:
        """The defined heart rates after the first `w` beats, divided by `scale`,
        mean-pooled to at most `cap` points (what DTW and LB compare)."""
        from .distance import pool

        h = self.hr[w:]
        return pool(h[np.isfinite(h)] / scale, cap)


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


#: a PiecewiseSeries keeps the times LTR compares (every ltr_window-th beat's) up to this many
#: (32 MiB); a longer thread reads them again for each comparison
EVERY_HELD = 1 << 22


class PiecewiseSeries(Series):
    """A thread too long to hold (a StreamedTrace's, over config.WHOLE_THREAD_BEATS beats):
    what the features ask of it is gathered from its beat times read in consecutive pieces
    (`pieces()`: arrays of times, s, in order), so memory follows the pieces, not the
    thread. A first pass gives its last time, time span, mean heart rate and the times of
    every settings.ltr_window-th beat (8 bytes per that many beats); a second its pooled
    heart rates (at most settings.dtw_max_points points, for DTW, LB and the fit) and the
    times LTRmax asks of its own beat count; other beat indices take a pass of their own.
    The values are those of Series up to the order of floating-point sums."""

    def __init__(self, pieces, beats: int, settings: FeatureSettings):
        self._pieces, self._n, self._s = pieces, int(beats), settings
        self._fits = {}
        self._first = None    # pass 1
        self._second = None   # pass 2
        self._at: dict = {}   # indices (bytes) -> times

    def __repr__(self) -> str:
        return f"PiecewiseSeries(beats={self._n})"

    @property
    def beats(self) -> int:
        return self._n

    @property
    def t(self):
        raise AttributeError("a piecewise series holds no beat times: use its methods")

    @property
    def hr(self):
        raise AttributeError("a piecewise series holds no heart rates: use its methods")

    def _rates(self):
        """(global index of the piece's first beat, times, heart rates) of each piece."""
        from .heartrate import heart_rate_pieces

        at = 0
        for t, hr in heart_rate_pieces(self._pieces(), self._s.window):
            yield at, t, hr
            at += t.size

    def _pass1(self) -> dict:
        if self._first is None:
            w, step = self._s.window, self._s.ltr_window
            last, lo, hi, total, count, every, n = np.nan, np.inf, -np.inf, 0.0, 0, [], 0
            held = -(-self._n // step) <= EVERY_HELD
            for at, t, hr in self._rates():
                if held:
                    every.append(t[(-at) % step::step].copy())   # not a view: it would hold the piece
                last = t[-1]
                tail = t[max(0, w - at):]
                tail = tail[np.isfinite(tail)]
                if tail.size:
                    lo, hi = min(lo, float(tail.min())), max(hi, float(tail.max()))
                ok = np.isfinite(hr)
                count += int(ok.sum())
                total += float(hr[ok].sum())
                n = at + t.size
            if n != self._n:   # the file changed under us (a live trace): say so, do not guess
                from ..errors import TraceFormatError

                raise TraceFormatError(f"a thread's beats changed while they were read ({self._n} beats, then {n}): "
                                       f"the trace is being written; read it again when the program ends")
            self._first = {"last": float(last), "span": (lo, hi) if np.isfinite(lo) else (np.nan, np.nan),
                           "count": count, "mean": total / count if count else np.nan,
                           "every": (np.concatenate(every) if every else np.empty(0)) if held else None}
        return self._first

    def _pass2(self) -> dict:
        if self._second is None:
            cap, count = self._s.dtw_max_points, self._pass1()["count"]
            own = _peak_indices(self._n, self._s.peak_windows) if self._n >= 2 * self._s.peak_windows else None
            if count > cap:
                edges = np.arange(cap + 1, dtype=np.int64) * count // cap
                sum_t, sum_hr = np.zeros(cap), np.zeros(cap)
            else:
                kept_t, kept_hr = [], []
            seen, at_times = 0, []
            for at, t, hr in self._rates():
                if own is not None:
                    mine = own[(own >= at) & (own < at + t.size)]
                    at_times.append(t[mine - at])
                ok = np.isfinite(hr)
                tt, hh = t[ok], hr[ok]
                if seen + hh.size > count:   # not the rates the first pass counted
                    from ..errors import TraceFormatError

                    raise TraceFormatError("a thread's beats changed while they were read: the trace is being "
                                           "written; read it again when the program ends")
                if count > cap:
                    b = np.searchsorted(edges, np.arange(seen, seen + hh.size), side="right") - 1
                    sum_t += np.bincount(b, tt, minlength=cap)
                    sum_hr += np.bincount(b, hh, minlength=cap)
                else:
                    kept_t.append(tt)
                    kept_hr.append(hh)
                seen += hh.size
            if count > cap:
                size = np.diff(edges)
                x, y = sum_t / size, sum_hr / size
            else:
                x = np.concatenate(kept_t) if kept_t else np.empty(0)
                y = np.concatenate(kept_hr) if kept_hr else np.empty(0)
            self._second = {"x": x, "y": y}
            if own is not None:
                self._at[own.tobytes()] = np.concatenate(at_times)
        return self._second

    def last_t(self) -> float:
        return self._pass1()["last"]

    def mean_hr(self, w: int) -> float:
        self._check(w)
        return self._pass1()["mean"]

    def rate_defined(self, w: int) -> bool:
        self._check(w)
        return self._pass1()["count"] > 0

    def time_span(self, w: int) -> tuple[float, float]:
        self._check(w)
        return self._pass1()["span"]

    def times_every(self, step: int, count: int):
        every = self._pass1()["every"] if step == self._s.ltr_window else None
        if every is not None:
            yield every[:count]
            return
        for at, t, _ in self._rates():   # a pass of its own: a thread of more than EVERY_HELD of them
            if count <= 0:
                return
            got = t[(-at) % step::step][:count]
            count -= got.size
            yield got

    def times_at(self, idx: np.ndarray) -> np.ndarray:
        idx = np.asarray(idx, dtype=np.int64)
        self._pass2()   # its own LTRmax indices come with the pooled rates
        key = idx.tobytes()
        if key not in self._at:
            out = np.full(idx.size, np.nan)
            for at, t, _ in self._rates():
                sel = (idx >= at) & (idx < at + t.size)
                out[sel] = t[idx[sel] - at]
            self._at[key] = out
        return self._at[key]

    def rate_profile(self, w: int, cap: int, scale: float) -> np.ndarray:
        self._check(w)
        if cap != self._s.dtw_max_points:
            raise ValueError(f"this series pools to {self._s.dtw_max_points} points, not {cap}")
        return self._pass2()["y"] / scale

    def fit(self, s: "FeatureSettings"):
        key = (s.window, s.dtw_max_points, s.r2_target, s.max_degree)
        if key not in self._fits:
            self._check(s.window)
            p = self._pass2()
            self._fits[key] = fit_poly(p["x"], p["y"], s.r2_target, s.max_degree)
        return self._fits[key]

    def _check(self, w: int) -> None:
        if w != self._s.window:
            raise ValueError(f"this series has heart rates over {self._s.window} beats, not {w}")


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


def _ltr(q: Series, c: Series, w: int) -> float:
    k = (min(q.beats, c.beats) - 1) // w
    if k < 1:
        return float("nan")
    total, count, before = 0.0, 0, None
    pairs = ((x, x) for x in q.times_every(w, k + 1)) if q is c else _aligned(q.times_every(w, k + 1),
                                                                                 c.times_every(w, k + 1))
    for tq, tc in pairs:
        if before is not None:   # the window that spans two arrays
            tq, tc = np.r_[before[0], tq], np.r_[before[1], tc]
        if tq.size:
            before = (tq[-1], tc[-1])
        dq, dc = np.diff(tq), np.diff(tc)
        ok = dq > 0
        total += float(np.sum(dc[ok] / dq[ok]))
        count += int(ok.sum())
    return total / count if count else float("nan")


def _aligned(a, b):
    """Two streams of arrays as pairs of arrays of equal lengths, in order."""
    ia, ib = iter(a), iter(b)
    xa, xb = np.empty(0), np.empty(0)
    while True:
        while not xa.size:
            xa = next(ia, None)
            if xa is None:
                return
        while not xb.size:
            xb = next(ib, None)
            if xb is None:
                return
        m = min(xa.size, xb.size)
        yield xa[:m], xb[:m]
        xa, xb = xa[m:], xb[m:]


def _peak_indices(n: int, k: int) -> np.ndarray:
    """The beats that cut n beats into k equal windows (LTRmax)."""
    return np.linspace(0, n - 1, k + 1).astype(np.int64)


def _ltr_max(q: Series, c: Series, k: int) -> float:
    """The largest ratio of durations over `k` equal windows of the beats both sequences
    have: how much slower C was than Q at its slowest stretch."""
    n = min(q.beats, c.beats)
    if n < 2 * k or k < 1:
        return float("nan")
    idx = _peak_indices(n, k)
    dq, dc = np.diff(q.times_at(idx)), np.diff(c.times_at(idx))
    ok = dq > 0
    return float(np.max(dc[ok] / dq[ok])) if ok.any() else float("nan")


LHR_FLOOR = 0.1


def _lhr(q: Series, c: Series, s: FeatureSettings) -> float:
    """Mean over windows of the ratio of windowed means of the aligned fitted curves."""
    w = s.window
    (lq, hq), (lc, hc) = q.time_span(w), c.time_span(w)
    lo, hi = max(lq, lc), min(hq, hc)
    # the overlap of the two spans (align.common_grid's, from each thread's span)
    ok = np.isfinite([lq, hq, lc, hc]).all() and hi > lo
    grid = np.linspace(lo, hi, s.lhr_points) if ok else np.empty(0)
    if grid.size < s.lhr_window:
        return float("nan")
    # fitted on at most dtw_max_points pooled points: same curve, bounded cost
    yq, yc = q.fit(s)(grid), c.fit(s)(grid)
    k = grid.size // s.lhr_window
    mq = yq[: k * s.lhr_window].reshape(k, -1).mean(axis=1)
    mc = yc[: k * s.lhr_window].reshape(k, -1).mean(axis=1)
    # a window where the reference's fitted rate is under LHR_FLOOR of its measured mean rate
    # is not compared: there the polynomial swings through zero (a fit of degree 12 to a rate
    # that scheduling made ragged went to -10 times its mean), not the thread, and the ratio
    # turned a 1e-12 change of the fit into LHR 1152 instead of about 1
    mean = q.mean_hr(w) if q.rate_defined(w) else float("nan")
    ok = mq > LHR_FLOOR * mean if np.isfinite(mean) and mean > 0 else mq > 0
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
    scale = q.mean_hr(s.window) if q.rate_defined(s.window) else float("nan")
    if not np.isfinite(scale) or scale <= 0:
        return np.empty(0), np.empty(0)
    return q.rate_profile(s.window, s.dtw_max_points, scale), c.rate_profile(s.window, s.dtw_max_points, scale)


def compute_features(q: Series, c: Series, s: FeatureSettings, expected_beats: float | None = None) -> dict:
    """The features of C against Q. Undefined values are NaN.

    `expected_beats`: the number of beats a complete sequence has (from a model or the
    reference); default: the reference's number of beats.
    """
    from .distance import dtw, lb_keogh

    out = dict.fromkeys(FEATURES, float("nan"))
    exp = float(expected_beats) if expected_beats else float(q.beats)
    out["progress"] = c.beats / exp if exp > 0 else float("nan")
    if q.beats and c.beats and q.end_t() > 0:
        out["GTR"] = float(c.end_t() / q.end_t())
    out["LTR"] = _ltr(q, c, s.ltr_window)
    out["LTRmax"] = _ltr_max(q, c, s.peak_windows)
    w = s.window
    mq = q.mean_hr(w) if q.rate_defined(w) else np.nan
    mc = c.mean_hr(w) if c.rate_defined(w) else np.nan
    if np.isfinite(mq) and mq > 0:
        out["GHR"] = float(mc / mq)
    out["LHR"] = _lhr(q, c, s)
    pq, pc = rate_profiles(q, c, s)
    if pq.size and pc.size:
        out["DTW"] = dtw(pq, pc, window=s.band)
        out["LB"] = lb_keogh(pq, pc, s.lb_radius)
    return out
