"""Thread behavior timelines (SPEC 5, seed 001 HBTM), computed offline.

Per thread, a list of intervals labelled ``running``, ``busy-waiting``,
``conditional-waiting``, ``idle`` (alive after its last beat, e.g. an OpenMP worker
waiting at the end of its region), ``exited``, ``failed`` (or ``ended`` when the trace
cannot tell exit from failure), from the beats and the lifecycle records; beside
it, what the tracer's online monitor reported and how late.

The method (docs/methods.md, "Thread behavior"):

* intervals between beats, divided by the calls-per-beat in force (the ADJUST
  records of Heartbeat_HeartRate_Adjust), on a log scale;
* conditional waiting: one interval at least BEHAVIOR_GAP_FACTOR times the local
  usual interval (running median around it) and at least BEHAVIOR_MIN_WAIT_S
  long, with the beats on both sides back at the usual rate: no beats for a
  while, then beats resume;
* busy-waiting: the running median of the intervals at least
  BEHAVIOR_SLOW_FACTOR times the thread's usual level (a low quantile of that
  median) for BEHAVIOR_MIN_SLOW_BEATS intervals or more, unless the rest of the
  team slowed down as much over the same time (then it is the machine);
* idle: no beats from the last one to the thread's (or, with no end record of its
  own, its process's) normal end, for longer than a conditional-waiting gap;
* the end, from the lifecycle records: the thread's own end record (returned or
  pthread_exit: exited; cancelled: failed), else the process's end (a fatal
  signal or a non-zero exit status with the thread still at work: failed; a
  normal exit: exited), else the online monitor's word that the thread
  vanished (failed); with no lifecycle records at all: ended.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .. import config
from ..model import THREAD_END_REASONS, HeartbeatTrace
from ..model.heartbeats import StreamedTrace, task_construct
from .summary import cpu_record_arrays, process_end, signal_name, unit_cpu, work_clock


OFFLINE_BEHAVIORS = ["running", "busy-waiting", "conditional-waiting", "idle", "exited", "failed", "ended"]
#: what a person is shown as found: the anomalies, not a thread's ordinary rest and end
FINDINGS = ("busy-waiting", "conditional-waiting", "failed")


@dataclass
class BehaviorSettings:
    smooth: int = config.BEHAVIOR_SMOOTH
    ref_quantile: float = config.BEHAVIOR_REF_QUANTILE
    slow_factor: float = config.BEHAVIOR_SLOW_FACTOR
    window_s: float = config.BEHAVIOR_WINDOW_S
    min_slow_beats: int = config.BEHAVIOR_MIN_SLOW_BEATS
    min_busy_s: float = config.BEHAVIOR_MIN_BUSY_S
    team_share: float = config.BEHAVIOR_TEAM_SHARE
    gap_factor: float = config.BEHAVIOR_GAP_FACTOR
    min_wait_s: float = config.BEHAVIOR_MIN_WAIT_S
    match_beats: float = config.BEHAVIOR_MATCH_BEATS
    match_share: float = config.BEHAVIOR_MATCH_SHARE
    window_beats: int = config.BEHAVIOR_WINDOW_BEATS
    explained_share: float = config.BEHAVIOR_EXPLAINED_SHARE
    spin_share: float = config.BEHAVIOR_SPIN_SHARE
    blocked_share: float = config.BEHAVIOR_BLOCKED_SHARE


@dataclass
class ThreadBeats:
    """One thread's beats, prepared: times, normalised log intervals, smoothed level."""

    run: str
    process: int
    thread: int
    os_tids: list[int]
    t_ns: np.ndarray          # beat times
    x: np.ndarray             # log of normalised intervals (len n-1)
    construct: object = field(default=None)  # per beat, its construct ("" for API beats): array or Categorical
    gap: np.ndarray = field(default=None)      # conditional-waiting intervals (bool, n-1)
    level: np.ndarray = field(default=None)    # running median of x, gaps left out (n-1)
    ref: float = float("nan")                  # usual level (log seconds)
    cpu: np.ndarray = field(default=None)      # per interval, the CPU time of its unit (-1 unknown): _unit_cpu
    longest: dict = field(default=None)        # per construct, its two longest units: _longest_units
    units: dict = field(default=None)          # per construct, its units' ends and work: _construct_units

    @property
    def n(self) -> int:
        return len(self.t_ns)

    def level_between(self, t0: int, t1: int) -> float:
        """Median smoothed level of the intervals that end inside [t0, t1] (nan if none)."""
        if self.level is None or not len(self.level):
            return float("nan")
        ends = self.t_ns[1:]
        sel = (ends >= t0) & (ends <= t1) & ~self.gap
        return float(np.median(self.level[sel])) if sel.any() else float("nan")

    def beats_between(self, t0: int, t1: int) -> int:
        """Its beats after t0 and before t1."""
        return int(np.searchsorted(self.t_ns, t1) - np.searchsorted(self.t_ns, t0, side="right"))


#: intervals per block of the rolling medians (each block with its window's margin on both
#: sides): pandas' rolling median keeps several times its input in temporaries, so a thread
#: of millions of beats is smoothed a block at a time, with the same values
ROLLING_BLOCK = 1 << 20


#: a level window of more intervals than this is the median of block medians, about
#: WINDOW_BLOCKS blocks per window (_window_level)
WINDOW_BEATS_EXACT = 1 << 15
WINDOW_BLOCKS = 2048


def _running_median(x: np.ndarray, w: int) -> np.ndarray:
    n = len(x)
    if n == 0:
        return x
    if n <= ROLLING_BLOCK:
        return pd.Series(x).rolling(w, center=True, min_periods=1).median().to_numpy()
    out = np.empty(n)
    h = w // 2 + 1
    for a in range(0, n, ROLLING_BLOCK):
        b = min(a + ROLLING_BLOCK, n)
        lo, hi = max(0, a - h), min(n, b + h)
        out[a:b] = pd.Series(x[lo:hi]).rolling(w, center=True, min_periods=1).median().to_numpy()[a - lo:b - lo]
    return out


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) index pairs of the True runs of a boolean array."""
    if not mask.any():
        return []
    d = np.diff(np.r_[0, mask.astype(np.int8), 0])
    return list(zip(np.flatnonzero(d == 1).tolist(), np.flatnonzero(d == -1).tolist()))


def _calls_per_beat(trace: HeartbeatTrace, run: str, process: int, t_ns: np.ndarray) -> np.ndarray | None:
    """Calls per recorded beat in force at each time (ADJUST records), or None if never changed."""
    m = trace.monitor
    if not len(m):
        return None
    a = m[(m["kind"] == "adjust") & (m["run"] == run) & (m["process"] == process)].sort_values("t_ns")
    if not len(a):
        return None
    at = a["t_ns"].to_numpy()
    every = np.r_[max(int(a["previous_every"].iloc[0]), 1), np.maximum(a["every"].to_numpy(), 1)]
    return every[np.searchsorted(at, t_ns, side="right")].astype(np.float64)


def _thread_beats(trace: HeartbeatTrace):
    """Per thread with beats: (key, beats, OS threads, load) where load() gives its beat times
    in ns and constructs. A trace whose beats stay in the file (StreamedTrace) is read one
    thread at a time."""
    if isinstance(trace, StreamedTrace):
        st = trace.stats
        tids: dict[tuple, list[int]] = {}
        for r, p, th, tid in zip(st["run"].astype(str), st["process"], st["thread"], st["os_tid"]):
            if tid > 0 and int(tid) not in tids.setdefault((r, int(p), int(th)), []):
                tids[(r, int(p), int(th))].append(int(tid))
        for key, n, _ in trace.thread_loaders():
            yield key, n, tids.get((str(key[0]), int(key[1]), int(key[2])), []), lambda k=key: trace.thread_beats(k)
        return
    for key, g in trace.threads():
        yield (key, len(g), [int(v) for v in pd.unique(g["os_tid"]) if v > 0],
               lambda g=g: (g["t_ns"].to_numpy().astype(np.int64), g["construct"].astype(str).to_numpy()))


def _prepared(trace: HeartbeatTrace, s: BehaviorSettings, key: tuple, t: np.ndarray, tids: list[int],
              construct: np.ndarray) -> ThreadBeats:
    run, process, thread = key
    if len(t) > 1 and not (t[1:] >= t[:-1]).all():   # (sorted already: no copy)
        order = np.argsort(t, kind="stable")
        t, construct = t[order], construct[order]
    d = np.diff(t).astype(np.float64)
    k = _calls_per_beat(trace, run, process, t[1:]) if len(d) else None
    if k is not None:
        d = d / k
    x = np.log(np.maximum(d, 1.0, out=d) * 1e-9, out=d)
    del d
    tb = ThreadBeats(str(run), int(process), int(thread), tids, t, x, construct)
    _find_gaps(tb, s)
    return tb


def prepare(trace: HeartbeatTrace, s: BehaviorSettings, budget: int | None = None) -> list:
    """Every thread's beats, prepared (ThreadBeats). budget: once the prepared beats held
    pass this many, the next threads are kept as TeammateView (what their teammates'
    timelines ask of them) and read again when their own timeline is made, so that memory
    follows the largest thread, not the trace (a trace whose beats stay in the file only)."""
    out, held = [], 0
    for key, n, tids, load in _thread_beats(trace):
        if isinstance(trace, StreamedTrace) and n > config.WHOLE_THREAD_BEATS:
            view = _long_view(trace, s, key, n, tids)
            if view is not None:   # (None: its beats are not in time order in the file: read whole)
                out.append(view)
                continue
        t, construct = load()
        tb = _prepared(trace, s, key, t, tids, construct)
        del t, construct
        if budget is not None and held + tb.n > budget:
            out.append(TeammateView.of(tb))
        else:
            out.append(tb)
            held += tb.n
    return out


@dataclass
class TeammateView:
    """What a thread's teammates' timelines need of it (_busy_runs, thread_timeline), without
    its beats: its identity, beat count, usual level, first and last beat, and its smoothed
    level as the medians of blocks of TEAMMATE_BLOCK intervals (gaps left out)."""

    run: str
    process: int
    thread: int
    os_tids: list[int]
    n: int
    ref: float
    t_ns: np.ndarray          # its first and last beat
    block_end: np.ndarray     # each block's last interval's end
    block_level: np.ndarray   # each block's median level (NaN: all gaps)
    long: bool = False        # made a window at a time (_long_view), never held whole

    @classmethod
    def of(cls, tb: ThreadBeats) -> "TeammateView":
        ends, level = tb.t_ns[1:], tb.level if tb.level is not None else np.empty(0)
        keep = np.where(~tb.gap, level, np.nan) if len(level) else level
        b = TEAMMATE_BLOCK
        starts = np.arange(0, len(keep), b)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)   # a block of nothing but gaps: NaN
            med = np.array([np.nanmedian(keep[i:i + b]) for i in starts]) if len(keep) else np.empty(0)
        last = np.minimum(starts + b, len(keep)) - 1
        return cls(tb.run, tb.process, tb.thread, tb.os_tids, tb.n, tb.ref, tb.t_ns[[0, -1]] if tb.n else tb.t_ns,
                   ends[last] if len(keep) else np.empty(0, np.int64), med)

    def level_between(self, t0: int, t1: int) -> float:
        sel = (self.block_end >= t0) & (self.block_end <= t1) & np.isfinite(self.block_level)
        return float(np.median(self.block_level[sel])) if sel.any() else float("nan")

    def beats_between(self, t0: int, t1: int) -> int:
        """Its beats after t0 and before t1, to within a block (TEAMMATE_BLOCK beats): the beat
        count at a time interpolated between the block ends around it."""
        if self.n < 2 or not len(self.block_end):
            return 0
        at = np.r_[self.t_ns[0], self.block_end]
        count = np.r_[0, np.minimum((np.arange(len(self.block_end)) + 1) * TEAMMATE_BLOCK, self.n - 1)]
        lo, hi = np.interp([t0, t1], at, count, left=0, right=self.n - 1)
        return max(int(hi - lo), 0) if t1 > t0 else 0


#: intervals per block of a TeammateView's level curve
TEAMMATE_BLOCK = 256
#: behavior_timelines keeps this many prepared beats of a streamed trace (about 40 bytes
#: each); past it, threads are read again for their own timeline (bounded memory)
PREPARED_BEATS_HELD = 4_000_000


#: beats of a long thread judged per segment, and the beats read on each side of it (the
#: running medians' and a stretch's edges' context); both multiples of TEAMMATE_BLOCK
SEGMENT_BEATS = 1 << 21
SEGMENT_MARGIN = 1 << 16
#: the usual level (BEHAVIOR_REF_QUANTILE of the smoothed level) of a long thread is taken
#: from a histogram of its levels (log seconds) in bins of this width
LEVEL_BIN = 1e-4
LEVEL_RANGE = (-40.0, 15.0)


class _NotInOrder(Exception):
    """A thread's beats in the file are not in time order (several OS threads or sources)."""


def _segments(trace: StreamedTrace, key: tuple, core: int | None = None, margin: int | None = None):
    """A long thread's beats a segment at a time: (index of its first core beat, beat times
    ns, constructs, lo, hi) where beats [lo, hi) of the arrays are the core and the rest the
    margins read on each side. Raises _NotInOrder when the pieces are not in time order."""
    core, margin = core or SEGMENT_BEATS, margin or SEGMENT_MARGIN
    buf_t, buf_c = np.empty(0, np.int64), np.empty(0, np.int64)
    base, start, last = 0, 0, None   # base: index of buf[0]; start: the next core's first beat

    def cut(end):
        lo = max(start - margin, 0) - base
        t, c = buf_t[lo:end - base], buf_c[lo:end - base]
        return start, t, trace.construct_labels(key, c), start - (lo + base), min(start + core, end) - (lo + base)

    for t, ids in trace.thread_beat_pieces(key):
        if not t.size:
            continue
        if (last is not None and t[0] < last) or (t.size > 1 and (np.diff(t) < 0).any()):
            raise _NotInOrder
        last = t[-1]
        buf_t = np.concatenate([buf_t, t])
        buf_c = np.concatenate([buf_c, ids])
        while base + buf_t.size >= start + core + margin:
            yield cut(start + core + margin)
            start += core
            drop = max(start - margin, 0) - base
            buf_t, buf_c, base = buf_t[drop:], buf_c[drop:], base + drop
    end = base + buf_t.size
    while start < end:
        yield cut(end)
        start += core


def _level_quantile(hist: np.ndarray, q: float) -> float:
    """The q-quantile of the values a histogram (LEVEL_BIN wide bins over LEVEL_RANGE) counts."""
    total = int(hist.sum())
    if not total:
        return float("nan")
    k = q * (total - 1)
    i = int(np.searchsorted(np.cumsum(hist), np.floor(k) + 1))
    return LEVEL_RANGE[0] + (i + 0.5) * LEVEL_BIN


def _core_intervals(t: np.ndarray, lo: int, hi: int) -> slice:
    """The intervals of a segment that its core's beats begin (interval i: beats i to i + 1)."""
    return slice(lo, min(hi, t.size - 1))


def _long_view(trace: StreamedTrace, s: BehaviorSettings, key: tuple, n: int, tids: list[int]):
    """A long thread read a segment at a time (each prepared with its margins): its
    TeammateView, with its usual level from all of them; None when its beats are not in time
    order in the file (it is then read whole)."""
    nbins = int(round((LEVEL_RANGE[1] - LEVEL_RANGE[0]) / LEVEL_BIN))
    hist = np.zeros(nbins, dtype=np.int64)
    ends, levels, first, last = [], [], None, None
    try:
        for start, t, construct, lo, hi in _segments(trace, key):
            tb = _prepared(trace, s, key, t, tids, construct)
            first = int(t[lo]) if first is None else first
            last = int(t[hi - 1])
            ci = _core_intervals(t, lo, hi)
            lev, gap = tb.level[ci], tb.gap[ci]
            bins = np.clip(((lev[~gap] - LEVEL_RANGE[0]) / LEVEL_BIN).astype(np.int64), 0, nbins - 1)
            hist += np.bincount(bins, minlength=nbins)
            keep = np.where(~gap, lev, np.nan)
            b = TEAMMATE_BLOCK
            at = np.arange(0, keep.size, b)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)   # a block of nothing but gaps: NaN
                levels.append(np.array([np.nanmedian(keep[i:i + b]) for i in at]))
            ends.append(t[1:][ci][np.minimum(at + b, keep.size) - 1])
    except _NotInOrder:
        return None
    run, process, thread = key
    return TeammateView(str(run), int(process), int(thread), tids, int(n), _level_quantile(hist, s.ref_quantile),
                        np.array([first, last], dtype=np.int64), np.concatenate(ends) if ends else np.empty(0, np.int64),
                        np.concatenate(levels) if levels else np.empty(0), long=True)


def _long_timeline(view: TeammateView, trace: StreamedTrace, team: list, s: BehaviorSettings, lifecycle: bool,
                   reports: pd.DataFrame, monitored: bool, run_end: int, pend: dict) -> dict:
    """A long thread's timeline, a segment at a time (the view's usual level for all): the
    episodes that begin in each segment's core, then its intervals and end as a whole
    thread's."""
    key = (view.run, view.process, view.thread)
    notes, episodes, team_slow = [], [], []
    for start, t, construct, lo, hi in _segments(trace, key):
        tb = _prepared(trace, s, key, t, view.os_tids, construct)
        tb.ref = view.ref
        tb.span = (int(t[0]), int(t[-1]))
        seg_notes, seg_slow = [], []
        eps, seg_slow = thread_episodes(tb, trace, team, s, reports, monitored, {}, seg_notes)
        shift = start - lo
        for a, b, name, detail, t0, t1 in sorted(eps, key=lambda e: e[0]):
            if lo <= a < hi:
                episodes.append((a + shift, b + shift, name, detail, t0, t1))
            elif a < lo < b and name == "busy-waiting":
                # a stretch that began in the margin before this core and runs into it: the
                # rest of one the segment before cut at its end, or one it did not see whole
                prev = episodes[-1] if episodes and episodes[-1][2] == "busy-waiting" else None
                if prev is not None and prev[1] >= a + shift:
                    episodes[-1] = (prev[0], max(prev[1], b + shift), name, prev[3], prev[4], max(prev[5], t1))
                else:
                    episodes.append((a + shift, b + shift, name, detail, t0, t1))
        c0, c1 = int(t[lo]), int(t[hi - 1])
        team_slow += [x for x in seg_slow if c0 <= x[0] <= c1]
        notes += [n for n in seg_notes if n not in notes]
    _team_slow_note(team_slow, notes)
    return _timeline_of(view, int(view.t_ns[0]), int(view.t_ns[-1]), episodes, notes, trace, team, s, lifecycle,
                        reports, run_end, pend)


def _find_gaps(tb: ThreadBeats, s: BehaviorSettings) -> None:
    x = tb.x
    n = len(x)
    tb.gap = np.zeros(n, dtype=bool)
    if n == 0:
        tb.level = x
        return
    local = _running_median(x, 2 * s.smooth + 1)
    cand = (x - local > np.log(s.gap_factor)) & (np.exp(x) >= s.min_wait_s)
    if cand.any():
        # a stall, not a plateau: the beats on both sides are back near the local level
        tol = np.log(s.gap_factor) / 2
        prev_ok = np.r_[True, x[:-1] - local[:-1] < tol]
        next_ok = np.r_[x[1:] - local[1:] < tol, True]
        # or it stands out from both neighbours as much (automatic beats mix units of unlike
        # sizes: a region's end next to a loop's chunks)
        around = np.maximum(np.r_[-np.inf, x[:-1]], np.r_[x[1:], -np.inf])
        tb.gap = cand & (prev_ok | next_ok | (x - around > np.log(s.gap_factor)))
    del cand
    d = np.exp(x)
    if tb.gap.any():
        d[tb.gap] = np.exp(local[tb.gap])  # the stall does not count in the rate
    del local
    tb.level = _window_level(tb.t_ns, d, s)
    del d
    keep = tb.level[~tb.gap] if tb.gap.any() else tb.level
    tb.ref = float(np.quantile(keep, s.ref_quantile))


def _window_level(t_ns: np.ndarray, d: np.ndarray, s: BehaviorSettings) -> np.ndarray:
    """log of the median interval in a window around each interval.

    The window spans `window_s` seconds or `smooth` usual intervals, whichever is
    longer. A median, not a mean: a thread that shares a core with another runs most
    beats at its usual pace and loses whole time slices now and then (a few long
    intervals), which moves the median little; a thread that spins between beats
    stretches every interval, which moves it all the way.
    """
    n = len(d)
    if n == 0:
        return d
    pos = np.empty(n)  # interval centres on the stall-free clock
    pos[0] = 0.0
    np.cumsum(d[:-1], out=pos[1:])
    pos += d / 2
    usual = float(np.median(d))
    width = max(s.window_s, s.smooth * usual)
    window = pd.Timedelta(seconds=width)

    def level(lo: int, hi: int, values=d, at=pos) -> np.ndarray:
        idx = pd.to_timedelta(at[lo:hi], unit="s")
        return pd.Series(values[lo:hi], index=idx).rolling(window, center=True, min_periods=1).median().to_numpy()

    per_window = width / usual if usual > 0 else 0.0
    if per_window > WINDOW_BEATS_EXACT and n > WINDOW_BEATS_EXACT:
        # a window of more beats than this: pandas' rolling median keeps every value of
        # its window in a skip list (about 100 bytes each: 160 MB for the 1.6 M beats of
        # 50 ms of a thread beating every 30 ns). Its median is taken of medians of
        # blocks of k consecutive intervals instead (about WINDOW_BLOCKS of them per
        # window): the same curve within a block's spread, in memory of n / k
        k = int(np.ceil(per_window / WINDOW_BLOCKS))
        full = n // k
        med = np.empty(full + (n % k > 0))
        med[:full] = np.median(d[:full * k].reshape(full, k), axis=1)
        if n % k:
            med[full] = np.median(d[full * k:])
        centre = pos[np.minimum(np.arange(len(med)) * k + k // 2, n - 1)]
        return np.log(np.repeat(level(0, len(med), med, centre), k)[:n])
    if n <= ROLLING_BLOCK:
        return np.log(level(0, n))
    out = np.empty(n)
    for a in range(0, n, ROLLING_BLOCK):   # a block at a time, with a window's width of margin
        b = min(a + ROLLING_BLOCK, n)
        lo = int(np.searchsorted(pos, pos[a] - width, side="left"))
        hi = int(np.searchsorted(pos, pos[b - 1] + width, side="right"))
        out[a:b] = level(lo, hi)[a - lo:b - lo]
    return np.log(out, out=out)


def _near(tb: ThreadBeats, i: int, s: BehaviorSettings, lo: int, hi: int) -> tuple[int, int]:
    """Intervals within one smoothing window of interval i (at least `smooth` each side), in [lo, hi]."""
    t = tb.t_ns[min(i, len(tb.t_ns) - 1)]
    w = int(s.window_s * 1e9)
    a = min(int(np.searchsorted(tb.t_ns, t - w)), i - s.smooth)
    b = max(int(np.searchsorted(tb.t_ns, t + w)), i + s.smooth)
    return max(a, lo), min(b, hi)


def _refine_step(x: np.ndarray, a: int, lo: int, hi: int, up: bool) -> int:
    """The best single change point of x in [lo, hi] (least squares), near the rough one a."""
    lo, hi = max(lo, 0), min(hi, len(x))
    if hi - lo < 3:
        return a
    seg = x[lo:hi]
    cs = np.cumsum(seg)
    m = len(seg)
    k = np.arange(1, m)
    left = cs[:-1] / k
    right = (cs[-1] - cs[:-1]) / (m - k)
    gain = k * (m - k) / m * (right - left) ** 2
    gain = np.where((right > left) if up else (right < left), gain, -1.0)
    return lo + int(np.argmax(gain)) + 1 if gain.max() > 0 else a


# --------------------------------------------------------------------------- endings


def _process_fate(trace: HeartbeatTrace, run: str, process: int) -> dict:
    """How and when a process ended (summary.process_end), as the timeline words it:
    how "died" or "normal" (None: no end record), t_ns, detail, and when it called Finished."""
    ev = trace.events
    ev = ev[(ev["run"] == run) & (ev["process"] == process)]
    out = {"how": None, "t_ns": None, "began_ns": None, "detail": "", "finished_ns": None, "end": None}
    fin = ev[ev["kind"] == "finished"]
    if len(fin):
        out["finished_ns"] = int(fin["t_ns"].min())
    end = process_end(ev)
    if end is not None:
        how = "the process was " if end.kind == "signal" else "the process ended by "
        out.update(how="died" if end.abnormal else "normal", t_ns=end.t_ns, detail=how + end.text, end=end,
                   began_ns=end.began_ns)
    return out


def _run_end(trace: HeartbeatTrace, run: str, process: int, last_beat: int) -> int:
    e = trace.events
    m = trace.monitor
    ends = [last_beat]
    ends.append(e.loc[(e["run"] == run) & (e["process"] == process), "t_ns"].max() if len(e) else np.nan)
    ends.append(m.loc[(m["run"] == run) & (m["process"] == process), "t_ns"].max() if len(m) else np.nan)
    return int(np.nanmax([float(v) for v in ends]))


def _thread_end_record(trace: HeartbeatTrace, run: str, process: int, tids: list[int]):
    if not tids:
        return None
    e = trace.events
    te = e[(e["run"] == run) & (e["process"] == process) & (e["kind"] == "thread_end") & e["os_tid"].isin(tids)]
    if not len(te):
        return None
    return te.sort_values("t_ns").iloc[-1]


# --------------------------------------------------------------------------- the timeline


def _interval(behavior, start, end, first_beat=None, last_beat=None, detail=""):
    return {"behavior": behavior, "start_ns": int(start), "end_ns": int(max(end, start)),
            "first_beat": first_beat, "last_beat": last_beat, "detail": detail}


def _busy_runs(tb: ThreadBeats, team: list[ThreadBeats], s: BehaviorSettings, notes: list[str],
               watched=None, trace: HeartbeatTrace | None = None, team_slow: list | None = None):
    """Busy-waiting stretches as (first interval, last interval + 1, slowdown factor).

    `watched`: the online monitor's reports for this thread when a monitor ran in its
    process (None otherwise): a slowdown it did not see as busy-waiting is not one.
    `trace`: its `cpu` records, where they cover the stretch and the thread's whole run: a
    thread that spins uses more CPU time per beat than usual (about the slowdown's factor);
    one that the machine took the CPU from uses as much as usual, and is not busy-waiting."""
    if tb.n < 3 or not np.isfinite(tb.ref):
        return []
    if tb.construct is not None and len(tb.construct) and np.mean(np.asarray(tb.construct != "")) > 0.5:
        # automatic beats mark units of unlike kinds (a loop chunk, a region's end): their rate
        # is no measure of progress, so a slower stretch says nothing; busy-waiting in such a
        # thread is a gap it spun through (its CPU time, thread_timeline)
        return []
    slow = (tb.level - tb.ref >= np.log(s.slow_factor)) & ~tb.gap
    out = []
    own_note = team_slow is None   # else the caller words the stretches its team shared
    team_slow = [] if team_slow is None else team_slow
    for a0, b0 in _runs(slow):
        # the window blurs the edges: put each where the intervals themselves step
        a = _refine_step(tb.x, a0, *_near(tb, a0, s, 0, b0), up=True)
        b = _refine_step(tb.x, b0, *_near(tb, b0, s, a + 1, len(tb.x)), up=False)
        # ... but not over a gap, which is judged by its own CPU time (thread_episodes): a
        # stretch of slow beats next to a long block does not make the block busy-waiting
        # (NPB EP, a thread blocked 1 s on a condition right after a slower start)
        before, after = np.flatnonzero(tb.gap[a:a0]), np.flatnonzero(tb.gap[b0:b])
        if before.size:
            a = a + int(before[-1]) + 1
        if after.size:
            b = b0 + int(after[0])
        if b - a < s.min_slow_beats or (tb.t_ns[b] - tb.t_ns[a]) / 1e9 < max(s.window_s, s.min_busy_s):
            continue
        excess = float(np.median(tb.level[a:b]) - tb.ref)
        if excess < np.log(s.slow_factor):
            continue   # (edges that took in more usual beats than slow ones: not slow)
        t0, t1 = int(tb.t_ns[a]), int(tb.t_ns[b])
        drift = _drift(tb, a, b, excess, s)
        if drift is not None:
            notes.append(
                f"slower by {np.exp(excess):.1f}x from {t0 / 1e9:.3f} s to {t1 / 1e9:.3f} s, but its beats just "
                f"before and after were already {drift:.1f}x slower than usual: a drift (the machine), not a "
                f"change in what the thread did (not labelled busy-waiting)")
            continue
        others = []
        for o in team:
            if o.thread == tb.thread or o.n < 3 or not np.isfinite(o.ref):
                continue
            cover = min(t1, o.t_ns[-1]) - max(t0, o.t_ns[0])
            if cover < 0.5 * (t1 - t0):
                continue
            lv = o.level_between(t0, t1)
            if np.isfinite(lv):
                others.append(lv - o.ref)
        if others and np.median(others) >= s.team_share * excess:
            team_slow.append((t0, t1, float(np.exp(excess))))
            continue
        per_beat = _cpu_per_beat(trace, tb, t0, t1, excess, a, b, s) if trace is not None and watched is None else None
        if per_beat is not None and per_beat < np.sqrt(np.exp(excess)):
            notes.append(
                f"slower by {np.exp(excess):.1f}x from {t0 / 1e9:.3f} s to {t1 / 1e9:.3f} s, but its CPU time per "
                f"beat was {per_beat:.1f}x its usual (the tracer's cpu records): it lost CPU time (another "
                f"process, the hypervisor), it did not busy-wait (not labelled busy-waiting)")
            continue
        if watched is not None and not _online_saw(watched, t0, t1, tb, s):
            notes.append(
                f"slower by {np.exp(excess):.1f}x from {t0 / 1e9:.3f} s to {t1 / 1e9:.3f} s, but the online monitor, "
                f"which reads the thread's CPU time, did not see it spinning: it lost CPU time (another process, "
                f"the hypervisor), it did not busy-wait (not labelled busy-waiting)")
            continue
        out.append((a, b, float(np.exp(excess))))
    if own_note:
        _team_slow_note(team_slow, notes)
    return out


def _drift(tb: ThreadBeats, a: int, b: int, excess: float, s: BehaviorSettings) -> float | None:
    """A slow stretch (intervals a..b-1, `excess` over the usual level) that does not stand
    out from its neighbours: busy-waiting begins and ends where the thread's code changes
    what it does, a step in its intervals; a machine that runs the thread slower (a busy
    host, the sibling of a shared core: no witness inside this guest when no teammate runs
    beside it) drifts there and back. The neighbours are up to `smooth` intervals on each
    side, gaps left out; the stretch must rise over each side that has `min_slow_beats` of
    them and is not itself slow_factor slower than usual (there the stretch goes on past an
    edge the smoothing drew) by half the slowdown bound (sqrt(slow_factor)). Returns the
    neighbours' slowdown, the larger side's, when it does not, else None. (Only the 4 x
    `smooth` intervals on each side are looked at: a thread of millions of beats may have
    many stretches.)"""
    x, span = tb.x, 4 * s.smooth
    sides = []
    lo = max(0, a - span)
    before = lo + np.flatnonzero(~tb.gap[lo:a])[-s.smooth:]
    after = b + np.flatnonzero(~tb.gap[b:b + span])[:s.smooth]
    for idx in (before, after):
        lv = float(np.median(x[idx])) if idx.size >= s.min_slow_beats else np.inf
        if lv - tb.ref < np.log(s.slow_factor):   # (a side as slow: the stretch goes on there)
            sides.append(lv)
    if not sides:
        return None
    rise = np.log(s.slow_factor) / 2
    if all(excess - (lv - tb.ref) >= rise for lv in sides):
        return None
    return float(np.exp(max(sides) - tb.ref))


def _team_slow_note(team_slow: list, notes: list[str]) -> None:
    """The note on a thread's stretches slower than usual that its team shared (_busy_runs)."""
    if len(team_slow) == 1:
        t0, t1, f = team_slow[0]
        notes.append(f"slower by {f:.1f}x from {t0 / 1e9:.3f} s to {t1 / 1e9:.3f} s, but so was the rest "
                     f"of the team: the machine or the program, not this thread (not labelled busy-waiting)")
    elif team_slow:
        notes.append(f"{len(team_slow)} stretches slower than usual (up to {max(f for *_, f in team_slow):.1f}x, "
                     f"{sum(t1 - t0 for t0, t1, _ in team_slow) / 1e9:.3f} s in all), but so was the rest of the "
                     f"team each time: the machine or the program, not this thread (not labelled busy-waiting)")


def _outlier_unit(tb: ThreadBeats, i: int, team: list, trace: HeartbeatTrace, s: BehaviorSettings,
                  used: float) -> float | None:
    """A gap (interval i) through which the thread used `used` ns of CPU time with no beat and
    no teammate waited for it: how many times the 99th percentile of its construct's units'
    CPU time (the thread's other units and its teammates', from the tracer's cpu records) it
    took, when that is at least the gap factor, the construct has units enough to say
    (config.BEHAVIOR_OUTLIER_UNITS) and a teammate beat on through the gap; else None (one
    long unit of work like others of its construct, or nothing to compare it with)."""
    t0, t1 = int(tb.t_ns[i]), int(tb.t_ns[i + 1])
    if not any(o.thread != tb.thread and o.beats_between(t0, t1) >= 2 for o in team):
        return None
    top = _construct_top(tb, i, team, trace)
    return used / top if top is not None and used >= s.gap_factor * top else None


def _and_itself(tb: ThreadBeats, team: list) -> list:
    """The team with the thread in it (a team passed without it gets it added)."""
    return team if any(o is tb for o in team) else team + [tb]


def _construct_top(tb: ThreadBeats, i: int, team: list, trace: HeartbeatTrace) -> float | None:
    """The 99th percentile of the CPU time (ns, 1 at least) of the units of work of the
    construct that interval i of the thread ends in, its other units and its teammates' (the
    tracer's cpu records), or None when the construct has too few such units to say
    (config.BEHAVIOR_OUTLIER_UNITS), or when the records miss half its units or more: the
    tracer records units of 2 ms or more, and where most are shorter the recorded ones are
    the few a busy machine stretched, mostly waiting for a CPU (cd-hit's loop of 15 us
    chunks on a loaded machine: a 99th percentile of 0.1 ms of CPU time, and its real chunks
    of 0.1-0.3 s read as 100-1600x outliers, 20 busy-waiting reports in 8 normal runs)."""
    mine = task_construct(str(tb.construct[i + 1])) if tb.construct is not None and len(tb.construct) > i + 1 else ""
    units, total = [], 0
    for o in _and_itself(tb, team):
        if not isinstance(o, ThreadBeats) or o.n < 2:
            continue
        same = np.ones(o.n - 1, dtype=bool)
        if o.construct is not None and len(o.construct) == o.n:
            names, codes = _construct_codes(o.construct[1:])
            same = names[codes] == mine
        if o is tb:
            same[i] = False
        total += int(same.sum())
        u = _unit_cpu(trace, o)
        if u.size:
            units.append(u[same & (u >= 0)])
    units = np.concatenate(units) if units else np.empty(0)
    if units.size < config.BEHAVIOR_OUTLIER_UNITS or units.size < 0.5 * total:
        return None
    return max(float(np.quantile(units, 0.99)), 1.0)


def _longest_units(tb: ThreadBeats, waits: ThreadWaits) -> dict:
    """Per construct name, the thread's two longest units of work in it (ns of its intervals
    less its recorded waits in them, `waits`: a teammate's wait for it is no work of its own;
    and the interval's index), longest first; computed once per thread."""
    if tb.longest is None:
        tb.longest = {}
        if tb.construct is not None and len(tb.construct) == tb.n and tb.n > 1:
            names, codes = _construct_codes(tb.construct[1:])
            d = np.diff(work_clock(tb.t_ns, waits.start, waits.end))
            o = np.lexsort((-d, codes))   # by construct, the longest first within each
            first = np.flatnonzero(np.r_[True, codes[o][1:] != codes[o][:-1]])
            for k in first.tolist():
                top = o[k:k + 2]
                top = top[codes[top] == codes[o[k]]]
                tb.longest[str(names[codes[o[k]]])] = [(int(d[j]), int(j)) for j in top]
    return tb.longest


def _construct_units(tb: ThreadBeats, waits: ThreadWaits) -> dict:
    """Per construct name, the thread's units of work in it: their ends (ns) and their work (ns
    of the interval less its recorded waits: _longest_units), by end; computed once per thread."""
    if tb.units is None:
        tb.units = {}
        if tb.construct is not None and len(tb.construct) == tb.n and tb.n > 1:
            names, codes = _construct_codes(tb.construct)   # (codes, not a string per beat)
            d = np.diff(work_clock(tb.t_ns, waits.start, waits.end))
            ends = tb.t_ns[1:]
            # by the construct that ends each unit, and the units begun at a lock's beat by
            # that lock (the monitor's lock units)
            for key, by in ((None, codes[1:]), ("from", codes[:-1])):
                o = np.argsort(by, kind="stable")   # (each construct's units stay by end)
                cuts = np.flatnonzero(np.diff(by[o])) + 1
                for part in np.split(o, cuts):
                    name = str(names[by[part[0]]]) if part.size else ""
                    if key is None:
                        tb.units[name] = (ends[part], d[part])
                    elif name.startswith("lock "):
                        tb.units[(key, name)] = (ends[part], d[part])
    return tb.units


def _construct_codes(c) -> tuple[np.ndarray, np.ndarray]:
    """A thread's constructs per beat (array or Categorical) as names and a code per beat; a
    task's units under its construct's name whether a teammate took it or not
    (task_construct: a long task run by the thread that made it and one a teammate took are
    units of one construct)."""
    if isinstance(c, pd.Categorical):
        names = np.array([task_construct(str(v)) for v in c.categories] + [""], dtype=object)
        codes = c.codes.astype(np.int64)
        codes = np.where(codes < 0, len(names) - 1, codes)
    else:
        names, codes = np.unique(np.asarray(c, dtype=object).astype(str), return_inverse=True)
        names = np.array([task_construct(str(v)) for v in names], dtype=object)
    merged, remap = np.unique(names.astype(str), return_inverse=True)
    return merged.astype(object), remap[codes]


def _overdue_unit(tb: ThreadBeats, i: int, team: list, trace: HeartbeatTrace, waits_cache: dict,
                  span) -> tuple[float, int] | None:
    """Interval i of the thread as the online monitor judges a loop's chunk in progress
    (HBT_UNIT_OVER): its work over the longest unit of its construct that ended before it
    began (its own or a teammate's, halved for each config.BEHAVIOR_OVERDUE_HALF_S since it
    ended: one a stall held up does not set the bar for the rest of the run), and how many
    units ended before it; None when fewer than config.BEHAVIOR_OVERDUE_WARM did (nothing
    says yet what the construct's units take: a loop's first long chunk) or it has no name.
    An interval begun at a lock's beat whose ending construct says nothing is measured, as the
    monitor measures it, against the units begun at that lock (a nest lock taken after one
    item in five ended the interval of a spin begun at the lock that stores an item's result:
    too few units to say)."""
    mine = task_construct(str(tb.construct[i + 1])) if tb.construct is not None and len(tb.construct) > i + 1 else ""
    if not mine:
        return None
    got = _overdue_against(tb, i, team, trace, waits_cache, span, mine)
    begun = str(tb.construct[i])
    if got is None and begun.startswith("lock "):
        got = _overdue_against(tb, i, team, trace, waits_cache, span, ("from", begun))
    return got


def _overdue_against(tb: ThreadBeats, i: int, team: list, trace: HeartbeatTrace, waits_cache: dict, span,
                     key) -> tuple[float, int] | None:
    """_overdue_unit against the units of one key of _construct_units."""
    t0 = int(tb.t_ns[i])
    bar, n = 0.0, 0
    # a task construct's units as the monitor keeps them: never halved (a leaf's and the
    # root's differ by orders of magnitude, and its long ones may come seconds apart), and
    # judged from fewer (HBT_TASK_WARM in native_tracer/src/autobeat.h)
    task = isinstance(key, str) and key.startswith("task ")
    for o in _and_itself(tb, team):
        if not isinstance(o, ThreadBeats):
            continue
        ends, d = _construct_units(o, _thread_waits(trace, o, waits_cache, span)).get(key, (None, None))
        if ends is None:
            continue
        k = int(np.searchsorted(ends, t0))   # the units that ended before it began
        if k:
            n += k
            age = 0.0 if task else (t0 - ends[:k]) / (config.BEHAVIOR_OVERDUE_HALF_S * 1e9)
            bar = max(bar, float(np.max(d[:k] * np.exp2(-age))))
    if n < (config.BEHAVIOR_OVERDUE_TASK_WARM if task else config.BEHAVIOR_OVERDUE_WARM) or bar <= 0:
        return None
    waits = _thread_waits(trace, tb, waits_cache, span)
    work = float(np.diff(work_clock(tb.t_ns[i:i + 2], waits.start, waits.end))[0])
    return work / bar, n


def _longest_other(tb: ThreadBeats, i: int, team: list, trace: HeartbeatTrace, waits_cache: dict,
                   span) -> int | None:
    """The longest unit of work (_longest_units) of the construct that interval i of the
    thread ends in, among its other units and its teammates', or None when it has none."""
    mine = task_construct(str(tb.construct[i + 1])) if tb.construct is not None and len(tb.construct) > i + 1 else None
    if mine is None:
        return None
    best = None
    for o in _and_itself(tb, team):
        if not isinstance(o, ThreadBeats):
            continue
        for d, j in _longest_units(o, _thread_waits(trace, o, waits_cache, span)).get(mine, []):
            if o is tb and j == i:
                continue
            best = d if best is None else max(best, d)
            break
    return best


def _unit_cpu(trace: HeartbeatTrace, tb: ThreadBeats) -> np.ndarray:
    """Per interval of the thread's beats, the CPU time of its unit of work where the tracer's
    cpu records have it (summary.unit_cpu), else -1; computed once per thread."""
    if tb.cpu is None:
        c = trace.cpu
        if len(c):
            c = c[(c["run"] == tb.run) & (c["process"] == tb.process) & c["os_tid"].isin(tb.os_tids)]
        # (none: an empty array, not one of -1 per beat)
        tb.cpu = unit_cpu(tb.t_ns, None, cpu_record_arrays(c))[1:] if tb.n > 1 and len(c) else np.empty(0, np.int64)
    return tb.cpu


def _cpu_per_beat(trace: HeartbeatTrace, tb: ThreadBeats, t0: int, t1: int, excess: float,
                  a: int | None = None, b: int | None = None, s: BehaviorSettings | None = None) -> float | None:
    """The thread's CPU time per beat over [t0, t1] (its intervals a..b-1) against its usual.
    Where the cpu records give the CPU time of most units of the stretch and of the thread's run
    (units of 2 ms or more): the median unit's there over its usual unit's, a low quantile of
    its run's, as its usual interval is of its intervals (the CPU time of the work it usually
    does between two beats; its usual rate may be one it had with a CPU to itself, while its
    units took more CPU time). Else from its CPU
    shares (_cpu_share) there and over its whole run and the stretch's slowdown (exp(excess)),
    which takes its usual share for the share it had at its usual rate; None where the cpu
    records do not cover both."""
    if a is not None and s is not None and tb.t_ns is not None:
        u = _unit_cpu(trace, tb)
        here = u[a:b]
        if u.size and (here >= 0).sum() >= max(2, 0.5 * here.size) and (u >= 0).sum() >= max(2, 0.5 * u.size):
            usual = float(np.quantile(u[u >= 0], s.ref_quantile))
            return float(np.median(here[here >= 0]) / max(usual, 1.0))
    here = _cpu_share(trace, tb, t0, t1)
    usual = _cpu_share(trace, tb, int(tb.t_ns[0]), int(tb.t_ns[-1])) if here is not None else None
    if here is None or not usual:
        return None
    return float(here * np.exp(excess) / usual)


def _online_saw(reports, t0: int, t1: int, tb: ThreadBeats, s: BehaviorSettings) -> bool:
    """Did the monitor report busy-waiting for this thread with an onset in (about) [t0, t1]?"""
    usual = float(np.exp(tb.ref)) if np.isfinite(tb.ref) else 0.0
    slack = int(max(s.match_beats * usual, s.window_s) * 1e9)
    on = reports[reports["behavior"] == "busy-waiting"]["onset_ns"].to_numpy()
    return bool(((on >= t0 - slack) & (on <= t1)).any())


@dataclass
class ThreadWaits:
    """A thread's recorded waits (tracer `wait` records), sorted by end: start and end (ns),
    the kind of each as a code into `names` (sorted)."""

    start: np.ndarray
    end: np.ndarray
    sync: np.ndarray
    names: np.ndarray
    longest: int = 0

    def __len__(self) -> int:
        return int(self.end.size)


def _thread_waits(trace: HeartbeatTrace, tb, cache: dict | None = None, span: tuple | None = None) -> ThreadWaits:
    """The thread's recorded waits (ThreadWaits), kept in `cache` (at most WAITS_HELD of them
    in all, the oldest dropped first) for the next time they are asked for. span: only those
    that overlap (t0, t1) ns, read a window at a time (a segment of a long thread's timeline)."""
    key = (tb.run, tb.process, tb.thread, span)
    if cache is not None and key in cache:
        cache[key] = cache.pop(key)   # used last
        return cache[key]
    if span is not None and isinstance(trace, StreamedTrace):
        out = _span_waits(trace, tb, span)
    else:
        out = _all_waits(trace, tb)
    if cache is not None:
        cache[key] = out
        while sum(len(v) for v in cache.values()) > WAITS_HELD and len(cache) > 1:
            del cache[next(iter(cache))]
    return out


def _span_waits(trace: StreamedTrace, tb, span: tuple) -> ThreadWaits:
    """The thread's waits that overlap span, from its waits read a window at a time."""
    ws = trace.wait_stats
    mine = (ws["run"].astype(str) == tb.run) & (ws["process"] == tb.process) & (ws["thread"] == tb.thread)
    ends, starts, kinds = [], [], []
    seen: dict[str, int] = {}   # kind name -> its number here (codes, not strings: a span holds millions)
    if mine.any():
        for end, length, sync in trace.thread_wait_pieces((tb.run, tb.process, tb.thread), span):
            keep = (end > span[0]) & (end - length < span[1])
            ends.append(end[keep])
            starts.append(end[keep] - length[keep])
            cat = sync if isinstance(sync, pd.Categorical) else pd.Categorical(np.asarray(sync, dtype=object))
            number = np.array([seen.setdefault(str(n), len(seen)) for n in [*cat.categories, ""]], dtype=np.int64)
            kinds.append(number[np.asarray(cat.codes, dtype=np.int64)[keep]])   # (code -1: "")
    end = np.concatenate(ends) if ends else np.empty(0, np.int64)
    if not end.size:
        return ThreadWaits(*(np.empty(0, np.int64),) * 3, np.empty(0, dtype=object))
    start, kind = np.concatenate(starts), np.concatenate(kinds)
    names = np.array(list(seen), dtype=object)
    if tb.thread == 0:   # the master's time outside the regions: the serial part (as _all_waits)
        names = np.where(names == "outside", "serial", names).astype(object)
    used = np.bincount(kind, minlength=names.size) > 0   # the kinds of the span's waits, by name, sorted
    names, again = np.unique(names[used].astype(str), return_inverse=True)
    number = np.zeros(used.size, dtype=np.int64)
    number[used] = again
    o = np.argsort(end, kind="stable")
    return ThreadWaits(start[o], end[o], number[kind[o]], names.astype(object), int((end - start).max()))


def _all_waits(trace: HeartbeatTrace, tb) -> ThreadWaits:
    """All the thread's recorded waits."""
    if isinstance(trace, StreamedTrace):
        ws = trace.wait_stats
        mine = (ws["run"].astype(str) == tb.run) & (ws["process"] == tb.process) & (ws["thread"] == tb.thread)
        w = (trace.thread_waits((tb.run, tb.process, tb.thread)) if mine.any()
             else pd.DataFrame(columns=["t_ns", "wait_ns", "sync"]))
    else:
        w = trace.waits
        if len(w):
            w = w[(w["run"] == tb.run) & (w["process"] == tb.process) & (w["thread"] == tb.thread)]
    if not len(w):
        out = ThreadWaits(*(np.empty(0, np.int64),) * 3, np.empty(0, dtype=object))
    else:
        end = w["t_ns"].to_numpy(np.int64)
        start = end - w["wait_ns"].to_numpy(np.int64)
        sync = w["sync"]
        if isinstance(sync.dtype, pd.CategoricalDtype):   # its codes, not a string per wait
            names = np.array([str(c) for c in sync.cat.categories] + ["nan"], dtype=object)
            code = sync.cat.codes.to_numpy().astype(np.int64)
            code[code < 0] = len(names) - 1
        else:
            names, code = np.unique(np.asarray(sync.astype(str), dtype=object), return_inverse=True)
        if tb.thread == 0:   # the master's time outside the regions: the serial part, its work (split_waits)
            names = np.array(["serial" if n == "outside" else n for n in names], dtype=object)
        names, again = np.unique(names, return_inverse=True)   # in name order (ties go to the first)
        code = again[code]
        o = np.argsort(end, kind="stable")
        out = ThreadWaits(start[o], end[o], code.astype(np.int64)[o], names, int((end - start).max()))
    return out


#: behavior: recorded waits of threads kept at once for the timelines (about 24 bytes each)
WAITS_HELD = 8_000_000

SYNC_WORDS = {"barrier": "a barrier", "critical": "a critical section or a lock", "taskwait": "a taskwait",
              "ordered": "an ordered region", "collective": "an MPI collective",
              "flag": "a spin on a flag in its own code (omp flush)",
              "outside": "the runtime's pool, outside any parallel region", "serial": "the program's serial part"}


def _serial_from(waits: ThreadWaits, t0: int, t1: int) -> tuple[int, int] | None:
    """The master's serial part in a gap [t0, t1] that does not cover all of it (its latest
    `serial` wait there, begun in the gap): (start, end) ns; None when there is none."""
    if not len(waits):
        return None
    serial = np.flatnonzero(waits.names == "serial")
    if not serial.size:
        return None
    j0 = int(np.searchsorted(waits.end, t0, side="right"))
    j1 = int(np.searchsorted(waits.end, t1 + waits.longest, side="right"))
    hit = np.flatnonzero((waits.sync[j0:j1] == serial[0]) & (waits.start[j0:j1] < t1))
    if not hit.size:
        return None
    k = j0 + int(hit[-1])
    start = int(waits.start[k])
    return (start, int(waits.end[k])) if t0 < start < t1 else None


def _waited_in(waits: ThreadWaits, t0: int, t1: int) -> tuple[float, str]:
    """Seconds of [t0, t1] the thread spent in recorded waits, and the kind that took most."""
    if not len(waits):
        return 0.0, ""
    # the waits that may overlap [t0, t1]: ending after t0, and not starting after t1
    j0 = int(np.searchsorted(waits.end, t0, side="right"))
    j1 = int(np.searchsorted(waits.end, t1 + waits.longest, side="right"))
    over = np.clip(np.minimum(waits.end[j0:j1], t1) - np.maximum(waits.start[j0:j1], t0), 0, None)
    if not over.any():
        return 0.0, ""
    by = np.bincount(waits.sync[j0:j1], weights=over, minlength=len(waits.names))
    sync = str(waits.names[int(np.argmax(by))])
    return float(over.sum()) / 1e9, SYNC_WORDS.get(sync, sync)


def _longest_quiet(waits: ThreadWaits, t0: int, t1: int) -> tuple[int, int]:
    """The longest stretch (ns) of [t0, t1] in which the thread made no recorded wait (the
    stretches between the gap's ends and its waits' starts and ends), and how many waits it
    made in it."""
    if not len(waits):
        return t1 - t0, 0
    j0 = int(np.searchsorted(waits.end, t0, side="right"))
    j1 = int(np.searchsorted(waits.end, t1 + waits.longest, side="right"))
    st, en = waits.start[j0:j1], waits.end[j0:j1]
    inside = (en > t0) & (st < t1)
    st, en = np.clip(st[inside], t0, t1), np.clip(en[inside], t0, t1)
    if not st.size:
        return t1 - t0, 0
    o = np.argsort(st, kind="stable")
    st, en = st[o], en[o]
    reach = np.maximum.accumulate(en)   # the latest a wait so far ended
    quiet = np.r_[st[0] - t0, st[1:] - reach[:-1], t1 - reach[-1]]
    return int(max(quiet.max(), 0)), int(st.size)


def _gap_share(trace: HeartbeatTrace, tb: ThreadBeats, t0: int, t1: int, column: str) -> float | None:
    """The share of [t0, t1] that `column` of the tracer's `cpu` records of the thread's gaps
    gives (each record spread evenly over its gap; records where it is unknown, -1, left
    out), or None when the records do not cover half of the span (a trace without them, or
    a gap the thread never ended)."""
    c = trace.cpu
    if not len(c) or column not in c:
        return None
    c = c[(c["run"] == tb.run) & (c["process"] == tb.process) & c["os_tid"].isin(tb.os_tids) & (c[column] >= 0)]
    if not len(c):
        return None
    end = c["t_ns"].to_numpy()
    gap = c["gap_ns"].to_numpy().clip(1)
    over = np.clip(np.minimum(end, t1) - np.maximum(end - gap, t0), 0, None).astype(np.float64)
    if over.sum() < 0.5 * (t1 - t0):
        return None
    # in floating point: ns times ns overflows 64 bits past 3 s (a 3.1 s gap queued 96 % of
    # it read as -96 %)
    return float((c[column].to_numpy(np.float64) * over / gap).sum() / over.sum())


def _cpu_split_at(trace: HeartbeatTrace, tb: ThreadBeats, t: int) -> bool:
    """Whether one of the thread's `cpu` records ends at `t` (within 0.1 ms): its CPU time
    before `t` is known apart from its CPU time after."""
    c = trace.cpu
    if not len(c):
        return False
    c = c[(c["run"] == tb.run) & (c["process"] == tb.process) & c["os_tid"].isin(tb.os_tids)]
    return bool((np.abs(c["t_ns"].to_numpy(np.int64) - t) <= 100_000).any())


def _cpu_share(trace: HeartbeatTrace, tb: ThreadBeats, t0: int, t1: int) -> float | None:
    """The share of [t0, t1] the thread spent on a CPU (_gap_share)."""
    return _gap_share(trace, tb, t0, t1, "cpu_ns")


def _queued_share(trace: HeartbeatTrace, tb: ThreadBeats, t0: int, t1: int) -> float | None:
    """The share of [t0, t1] the thread was runnable and waited for a CPU: its run-queue
    delay, in the tracer's `cpu` records since 2026-11-28 (_gap_share)."""
    return _gap_share(trace, tb, t0, t1, "queued_ns")


def _where(tb: ThreadBeats, a: int, b: int) -> str:
    """' in loop resid._omp_fn.3': the construct most of beats a..b-1 belong to (automatic
    beats), or ""."""
    c = tb.construct
    if c is None:
        return ""
    if isinstance(c, pd.Categorical):   # counted by code; a tie goes to the first name, as np.unique's
        codes = c.codes[a:b]
        codes = codes[codes >= 0]
        if not codes.size:
            return ""
        counts = np.bincount(codes, minlength=len(c.categories))
        top = min(str(c.categories[i]) for i in np.flatnonzero(counts == counts.max()))
        return f" (in {top})" if top else ""
    names, counts = np.unique(c[a:b], return_counts=True)
    top = names[np.argmax(counts)] if len(names) else ""
    return f" (in {top})" if top else ""


def thread_timeline(tb: ThreadBeats, trace: HeartbeatTrace, team: list[ThreadBeats], s: BehaviorSettings,
                    lifecycle: bool, reports: pd.DataFrame, monitored: bool, run_end: int, pend: dict,
                    waits_cache: dict | None = None) -> dict:
    """One thread's intervals. `reports`: the online monitor's reports for it; `monitored`:
    its process ran the monitor; `run_end`, `pend`: its process's end (_run_end, _process_fate);
    `waits_cache`: threads' waits read already (_thread_waits)."""
    notes: list[str] = []
    episodes, team_slow = thread_episodes(tb, trace, team, s, reports, monitored, waits_cache, notes)
    _team_slow_note(team_slow, notes)
    return _timeline_of(tb, int(tb.t_ns[0]), int(tb.t_ns[-1]), episodes, notes, trace, team, s, lifecycle, reports,
                        run_end, pend)


def thread_episodes(tb: ThreadBeats, trace: HeartbeatTrace, team: list, s: BehaviorSettings, reports: pd.DataFrame,
                    monitored: bool, waits_cache: dict | None, notes: list[str]) -> tuple[list, list]:
    """What happened inside a thread's beats: episodes (first interval index, end index,
    behavior, detail, start ns, end ns), and its stretches slower than usual that its team
    shared (_busy_runs)."""
    waits_cache = {} if waits_cache is None else waits_cache
    t = tb.t_ns
    team_slow: list = []
    episodes = []
    for a, b, f in _busy_runs(tb, team, s, notes, reports if monitored else None, trace, team_slow):
        episodes.append((a, b, "busy-waiting", f"beats {f:.1f}x slower than usual{_where(tb, a, b + 1)}",
                         int(t[a]), int(t[b])))
    span = getattr(tb, "span", None)   # a segment of a long thread: the waits of its time only
    waits = _thread_waits(trace, tb, waits_cache, span)
    for i in np.flatnonzero(tb.gap).tolist():
        local = float(np.exp(tb.level[i])) if len(tb.level) else 0.0
        t0, t1 = int(t[i]), int(t[i + 1])
        end = int(t1 - local * 1e9)
        gap_s = (t1 - t0) / 1e9
        part = _serial_from(waits, t0, t1) if tb.thread == 0 else None
        short = max(s.min_wait_s, s.gap_factor * local) * 1e9
        if part is not None and t1 - part[1] <= short and _cpu_split_at(trace, tb, part[0]):
            # the master's serial part ends the gap, with the next region's first unit: it
            # ran the serial code between two parallel regions, and what came before it is
            # judged alone (a fault that held it at a region's end: GraphicsMagick's master
            # blocked 1 s, then ran 0.5 s of serial code, read as 33 % of a CPU over the
            # whole: busy-waiting; a longer serial part hid it as running). Only where a cpu
            # record ends as the serial part begins (libgomp: the master's closing-barrier
            # wait is recorded there): else one record spans both, and what came before the
            # serial part has no CPU time of its own (libomp: the gap stays whole)
            if part[0] - t0 <= short:
                continue
            t1 = end = part[0]
            gap_s = (t1 - t0) / 1e9
        def gap_is(behavior: str, detail: str, i=i, t0=t0, end=end) -> None:
            episodes.append((i, i + 1, behavior, detail, t0, max(end, t0)))

        waited, sync = _waited_in(waits, t0, t1)
        if waited >= s.explained_share * gap_s and sync == "the program's serial part":
            continue   # the master ran the serial code between two parallel regions: running
        cpu_share = _cpu_share(trace, tb, t0, t1)
        if waited < s.explained_share * gap_s and cpu_share is not None and cpu_share >= s.spin_share:
            # it used a CPU all through the gap, with no beat: spinning, or one long unit of work.
            # It spun if its team waited for it meanwhile; otherwise they all worked (a long
            # static loop, say): running
            team_waited = max((_waited_in(_thread_waits(trace, o, waits_cache, span), t0, t1)[0]
                               for o in team if o.thread != tb.thread), default=0.0)
            used = cpu_share * (t1 - t0)
            spun = f"no beats for {gap_s:.3f} s while it used {100 * cpu_share:.0f} % of a CPU"
            if team_waited >= s.explained_share * gap_s:
                # one unit of work no more than the gap factor times its construct's longest
                # (the 99th percentile of their CPU time where the tracer has enough of them,
                # else the longest other unit's wall time): the team waited for real work (a
                # dynamic loop's last long chunk, a teammate that skipped its share), not for a
                # spin (cd-hit, whose teammate skipped its chunks: 9 such reports in 4 runs)
                top = _construct_top(tb, i, team, trace)
                longest = _longest_other(tb, i, team, trace, waits_cache, span) if top is None else None
                like = (f"{used / 1e9:.3f} s of CPU time, where its construct's units took up to "
                        f"{top / 1e9:.3f} s (their 99th percentile)" if top is not None and used < s.gap_factor * top
                        else f"where its construct's longest other unit took {longest / 1e9:.3f} s of work"
                        if longest is not None and t1 - t0 - waited * 1e9 < s.gap_factor * longest else "")
                if like:
                    gap_is("running", f"no beats for {gap_s:.3f} s while its team waited {team_waited:.3f} s for it: "
                                      f"one long unit of work, {like}{_where(tb, i + 1, i + 2)}")
                    continue
            if team_waited >= s.explained_share * gap_s:
                why = f" and its team waited {team_waited:.3f} s for it"
            elif (over := _outlier_unit(tb, i, team, trace, s, used)) is not None:
                # its team had work of its own meanwhile (a static loop's shares): it spun all
                # the same if that one unit took many times the CPU time of the longest units of
                # its construct, its own and its teammates', while they beat on (_outlier_unit)
                why = (f": {over:.0f}x the CPU time of its construct's longest units (the 99th percentile of its "
                       "team's), while its teammates beat on")
            else:
                # or its work took many times the longest unit of its construct that ended
                # before it, whose units were mostly too short for the cpu records (a dynamic
                # loop of 1 ms chunks whose thread spun 1 s in one while its teammate took the
                # others: mmseqs2, never looked at before): the online monitor's overdue chunk,
                # after the fact. A loop's first long chunk has no earlier units to be measured
                # against (mmseqs2's first chunk of one loop, 25-50x its others, in every normal run)
                overdue = _overdue_unit(tb, i, team, trace, waits_cache, span)
                why = (f": {overdue[0]:.0f}x the longest of the {overdue[1]} units of its construct before it, "
                       "while its teammates beat on" if overdue is not None and overdue[0] >= config.BEHAVIOR_OVERDUE
                       and any(o.thread != tb.thread and o.beats_between(t0, t1) >= 2 for o in team) else None)
            if why is not None:
                gap_is("busy-waiting", f"{spun}{why}{_where(tb, i + 1, i + 2)}")
            continue
        if waited >= s.explained_share * gap_s:
            # the tracer saw it wait in a synchronisation (a barrier) most of the gap: it
            # waited for its team, which is the team's slow member's doing, not its own
            gap_is("idle", f"no beats for {gap_s:.3f} s: it waited {waited:.3f} s in {sync}, for its team, "
                           f"then beats resumed{_where(tb, i + 1, i + 2)}")
            continue
        # the time it was runnable and waited for a CPU (the tracer's run-queue delay, where the
        # trace has it) tells blocked from starved, whatever the CPU time it used
        queued = _queued_share(trace, tb, t0, t1) if cpu_share is not None else None
        if queued is not None and 1.0 - cpu_share - queued - waited / gap_s >= s.explained_share:
            # neither on a CPU, nor waiting for one, nor in a recorded wait most of the gap: it
            # blocked by itself (the few % of a CPU it used were its unit's work before or after)
            gap_is("conditional-waiting", f"no beats for {gap_s:.3f} s, blocked (it used {100 * cpu_share:.0f} % of a "
                                          f"CPU and waited for one {100 * queued:.0f} % of the time), then beats resumed"
                                          f"{_where(tb, i + 1, i + 2)}")
            continue
        if cpu_share is not None and (cpu_share >= s.blocked_share or queued is not None):
            # on a CPU now and then, too little to call spinning, too much to call blocked:
            # starved by the machine, or spinning for a teammate (where the trace has no
            # run-queue delay to say which). Its teammates' shares of the
            # same span tell (those silent through most of it, not in a recorded wait): a
            # teammate with less than half its share was blocked, and this one waited for it
            team_waited = {o.thread: _waited_in(_thread_waits(trace, o, waits_cache, span), t0, t1)[0]
                           for o in team if o.thread != tb.thread}
            if team_waited and max(team_waited.values()) >= s.explained_share * gap_s:
                # its team waited for it in the runtime: it held them up, on a CPU it got a
                # little of (a thread that spins or works with a CPU of its own gets more)
                gap_is("running", f"no beats for {gap_s:.3f} s while its team waited "
                                  f"{max(team_waited.values()):.3f} s for it: it got {100 * cpu_share:.0f} % of a "
                                  f"CPU (the machine ran other work){_where(tb, i + 1, i + 2)}")
                continue
            shares = [(o.thread, _cpu_share(trace, o, t0, t1)) for o in team
                      if o.thread != tb.thread and team_waited[o.thread] < s.explained_share * gap_s]
            shares = [(k, v) for k, v in shares if v is not None]
            # a teammate that beat on through the span made progress: this one, on a CPU now
            # and then with no beat, waited for the team in the program's own code (LU's
            # pipeline flags) on a starved CPU; a blocked thread uses next to none
            worked = [(o.thread, n) for o in team if o.thread != tb.thread
                      and (n := o.beats_between(t0, t1)) >= 2]
            if not shares and worked:
                k, n = max(worked, key=lambda kn: kn[1])
                gap_is("idle", f"no beats for {gap_s:.3f} s while it used {100 * cpu_share:.0f} % of a CPU and "
                               f"thread {k} beat {n} times: it waited for its team in the program's own "
                               f"code{_where(tb, i + 1, i + 2)}")
                continue
            if shares:
                k, v = min(shares, key=lambda kv: kv[1])
                if v < cpu_share / 2:
                    gap_is("idle", f"no beats for {gap_s:.3f} s while it used {100 * cpu_share:.0f} % of a CPU "
                                   f"and thread {k} {100 * v:.0f} %: it waited for thread {k}, blocked, in the "
                                   f"program's own code{_where(tb, i + 1, i + 2)}")
                    continue
                # the team, silent too, got as little or more: the machine ran other work (a
                # thread blocked for part of the span and starved for the rest cannot be told
                # from one starved a little more than its teammate; one blocked for most of it
                # is under the blocked share)
                top = max(v for _, v in shares)
                gap_is("running", f"no beats for {gap_s:.3f} s: it got {100 * cpu_share:.0f} % of a CPU, its team "
                                  f"{100 * top:.0f} % at most (the machine ran other work)")
                continue
        if cpu_share is None:
            # no CPU time for the gap: the thread made other records through it (the tracer
            # writes its CPU time only with a record that ends 2 ms or more without one). A
            # thread that entered critical sections all through its gap was at work: one long
            # unit (clustalo's loop of 6 chunks of 0.2-0.3 s, thousands of critical sections
            # in each: 111 conditional-waiting reports in 28 runs), not blocked
            quiet, n = _longest_quiet(waits, t0, t1)
            if n and quiet / 1e9 < min(s.min_wait_s, 0.5 * gap_s):
                gap_is("running", f"no beats for {gap_s:.3f} s, but it made {n} recorded waits through it, at most "
                                  f"{quiet / 1e9:.3f} s apart: one long unit of work{_where(tb, i + 1, i + 2)}")
                continue
        cpu_text = "" if cpu_share is None else f", blocked (it used {100 * cpu_share:.0f} % of a CPU)"
        gap_is("conditional-waiting", f"no beats for {gap_s:.3f} s{cpu_text}, then beats resumed"
                                      f"{_where(tb, i + 1, i + 2)}")
    return episodes, team_slow


def _timeline_of(tb, first: int, last: int, episodes: list, notes: list[str], trace: HeartbeatTrace, team: list,
                 s: BehaviorSettings, lifecycle: bool, reports: pd.DataFrame, run_end: int, pend: dict) -> dict:
    """A thread's timeline from its episodes (thread_episodes) and how it ended; `first`,
    `last`: its first and last beat's time."""
    usual_s = float(np.exp(tb.ref)) if np.isfinite(tb.ref) else float("nan")
    episodes.sort(key=lambda e: e[4])
    intervals = []
    cursor, cursor_beat = first, 0
    for a, b, name, detail, start, end in episodes:
        if start < cursor:  # overlaps the previous episode: keep the earlier one
            continue
        if start > cursor:
            intervals.append(_interval("running", cursor, start, cursor_beat, a, ""))
        intervals.append(_interval(name, start, end, a, b, detail))
        cursor, cursor_beat = end, b
    if last > cursor or not intervals:
        intervals.append(_interval("running", cursor, last, cursor_beat, tb.n - 1, ""))

    # the end
    end_rec = _thread_end_record(trace, tb.run, tb.process, tb.os_tids)
    vanished = reports[reports["behavior"] == "failed"]
    gap_s = max(s.gap_factor * usual_s, s.min_wait_s) if np.isfinite(usual_s) else s.min_wait_s
    if not lifecycle:
        intervals.append(_interval("ended", last, run_end, tb.n - 1, None,
                                   "beats end here; the trace has no lifecycle records (legacy or table "
                                   "format), so exit and failure cannot be told apart"))
    elif end_rec is not None and (pend["t_ns"] is None or int(end_rec["t_ns"]) <= pend["t_ns"] and (
            int(end_rec["t_ns"]) <= pend["began_ns"] or (pend["end"].kind != "process_exit"
                                                          and pend["end"].exit_tid is None)
            or pend["end"].began_tid in tb.os_tids)):
        # (a thread that ended after another called exit() was ended by that exit's handlers)
        how = THREAD_END_REASONS.get(int(end_rec["detail"]), f"end reason {int(end_rec['detail'])}")
        if int(end_rec["detail"]) == 2:
            intervals.append(_interval("failed", last, run_end, tb.n - 1, None, "the thread was cancelled"))
        else:
            text = "returned from its start routine" if how == "returned" else "called pthread_exit"
            start = _idle_until(intervals, last, int(end_rec["t_ns"]), gap_s, tb.n - 1, "until it ended")
            intervals.append(_interval("exited", start, run_end, tb.n - 1, None, f"the thread {text}"))
    elif len(vanished):
        onset = int(vanished["onset_ns"].iloc[0])
        intervals.append(_interval("failed", max(min(onset, run_end), last), run_end, tb.n - 1, None,
                                   "the thread vanished without an end record (seen by the online monitor)"))
    elif pend["how"] == "died":
        death = pend["began_ns"]
        end = pend["end"]
        # a fatal signal during an exit() call: the thread that called exit() began the end
        # (exited), the one the signal hit crashed in the exit's handlers (failed)
        began_here = end is not None and end.began_tid in tb.os_tids
        crashed_here = end is not None and end.kind == "signal" and end.os_tid in tb.os_tids
        def who(tid: int) -> str:
            return next((f"thread {o.thread}" for o in team if tid in o.os_tids), "another thread")
        if began_here or crashed_here:
            start = death if began_here else end.t_ns
            # beats recorded while exit() ran its handlers still count as running
            if intervals[-1]["behavior"] == "running":
                intervals[-1]["end_ns"] = max(intervals[-1]["end_ns"], start)
            start = max(start, intervals[-1]["end_ns"])
            sig = signal_name(end.code) if end.kind == "signal" else ""
            if end.exit_tid is not None and began_here:
                then = (f"{sig} in this thread then killed the process in the exit's handlers" if crashed_here else
                        f"{who(end.os_tid)} then received {sig}, which killed the process during the exit")
                iv = _interval("exited", start, max(run_end, start), tb.n - 1, None,
                               f"it called {end.exit_text}, ending the process with a failure status; {then}")
                iv["exit_status"] = end.exit_code
            elif end.exit_tid is not None:
                iv = _interval("failed", start, max(run_end, start), tb.n - 1, None,
                               f"{sig} in this thread killed the process during the {end.exit_text} "
                               f"{who(end.exit_tid)} called at {end.called_ns / 1e9:.3f} s (a crash in the "
                               f"exit's handlers, while this thread still ran)")
                iv["during_exit"] = True
            elif end.kind == "signal":
                iv = _interval("failed", start, max(run_end, start), tb.n - 1, None,
                               f"{sig} in this thread killed the process")
            else:
                iv = _interval("exited", start, max(run_end, start), tb.n - 1, None,
                               f"it called {end.text}, ending the process with a failure status")
                iv["exit_status"] = end.code
            iv["ended_process"] = True
            intervals.append(iv)
        else:
            # another thread's fatal signal or failing exit ended it: it is not the one to blame,
            # and a gap before that death (e.g. at a barrier, waiting for the thread that died,
            # a wait that never ended and so was never recorded) is not its behaviour either
            start = max(last, intervals[-1]["end_ns"])
            quiet = (death - last) / 1e9
            if end is None:
                did = "another thread ended"
            elif end.exit_tid is not None:
                did = (f"{who(end.exit_tid)} called {end.exit_text}, and {who(end.os_tid)} received "
                       f"{signal_name(end.code)} during the exit, which killed")
            elif end.kind == "signal":
                did = f"{who(end.os_tid)} received {signal_name(end.code)}, which killed"
            else:
                did = f"{who(end.os_tid)} called {end.text}, which ended"
            intervals.append(_interval("ended", start, max(run_end, start), tb.n - 1, None,
                                       f"{did} the process and this thread with it"
                                       + (f"; this thread had made no beat for {quiet:.3f} s"
                                          if quiet > gap_s else "")))
    elif pend["how"] == "normal" or pend["finished_ns"] is not None:
        what = pend["detail"] or "the program called Finished"
        start = last
        serial = _serial_tail(trace, tb, last, pend["began_ns"]) if pend["t_ns"] is not None else None
        if serial is not None:
            # the master's serial part after its last parallel region, to the exit it called
            # (or its return from main): its work (writing the output, say), not idleness
            begun = _idle_until(intervals, last, serial, gap_s, tb.n - 1,
                                "at its last parallel region's closing barrier, waiting for its team")
            intervals.append(_interval("running", begun, pend["began_ns"], tb.n - 1, None,
                                       "the program's serial part, after its last parallel region"))
            start = pend["began_ns"]
        elif pend["t_ns"] is not None:
            start = _idle_until(intervals, last, pend["began_ns"], gap_s, tb.n - 1,
                                "until the process ended (e.g. an OpenMP worker at its region's closing "
                                "barrier or in the pool)")
        iv = _interval("exited", start, run_end, tb.n - 1, None,
                       f"{'beats end here; ' if start == last else ''}no end record of its own, "
                       f"and {what}")
        if pend["end"] is not None and pend["end"].os_tid in tb.os_tids:
            iv.update(detail=f"{'beats end here; ' if start == last else ''}it called {pend['end'].text}, "
                             "ending the process", ended_process=True, exit_status=pend["end"].code)
        intervals.append(iv)
    else:
        intervals.append(_interval("ended", last, run_end, tb.n - 1, None,
                                   "beats end here; the trace does not record how the process ended "
                                   "(killed by SIGKILL, or still running when it was read)"))
        notes.append("the process's end is not in the trace: exit and failure cannot be told apart")
    return {"run": tb.run, "process": tb.process, "thread": tb.thread,
            "os_tid": tb.os_tids[-1] if tb.os_tids else -1, "beats": tb.n,
            "usual_interval_s": usual_s, "intervals": intervals, "notes": notes}


def _serial_tail(trace: HeartbeatTrace, tb, last: int, end: int) -> int | None:
    """Where a team's master began the program's serial part that lasted from its last beat
    (`last`) to the process's end (`end`), ns: the tracer records that part at the exit, as
    it records one between two regions at the next one's start; None if it has none."""
    if tb.thread != 0 or end <= last:
        return None
    part = _serial_from(_thread_waits(trace, tb, None, (last, end)), last - 1, end)
    return part[0] if part is not None and part[1] <= end else None


def _idle_until(intervals: list, last: int, end: int, gap_s: float, last_beat: int, why: str) -> int:
    """A thread alive with no beats from its last beat to `end` for longer than a waiting
    gap: an ``idle`` interval, not yet an exit. Returns where the end's interval starts."""
    if (end - last) / 1e9 <= gap_s:
        return last
    intervals.append(_interval("idle", last, end, last_beat, None,
                               f"no beats for {(end - last) / 1e9:.3f} s, alive {why}"))
    return end


# --------------------------------------------------------------------------- the online monitor


def _monitor_ran(trace: HeartbeatTrace, tb: ThreadBeats) -> bool:
    """The process ran the online monitor: its metadata says so (monitor=central|ring), or
    its statistics records are in the trace."""
    for p in trace.runs.get(tb.run, {}).get("processes") or []:
        if p.get("process") == tb.process and (p.get("meta") or {}).get("monitor") in ("central", "ring"):
            return True
    m = trace.monitor
    if not len(m):
        return False
    return bool(((m["kind"] == "monitor") & (m["run"] == tb.run) & (m["process"] == tb.process)).any())


def _monitor_reports(trace: HeartbeatTrace, tb: ThreadBeats) -> pd.DataFrame:
    m = trace.monitor
    if not len(m):
        return m
    return m[(m["kind"] == "behavior") & (m["run"] == tb.run) & (m["process"] == tb.process)
             & (m["thread"] == tb.thread)].sort_values("t_ns")


#: the online report that an offline interval matches when the names differ: while the run
#: goes on, a thread that stopped beating for good looks like one waiting on a condition
ONLINE_NAME = {"idle": "conditional-waiting"}


def _attach_online(row: dict, reports: pd.DataFrame, s: BehaviorSettings) -> None:
    """Beside each offline interval, the online report that matches it (same behavior, near onset)."""
    usual = row["usual_interval_s"] if np.isfinite(row["usual_interval_s"]) else 0.0
    used = set()
    rep = reports.to_dict(orient="records")
    ivs = row["intervals"]
    for i, iv in enumerate(ivs):
        iv["online"] = None
        if iv["behavior"] in ("running", "ended"):
            continue
        tol = max(s.match_beats * usual, s.match_share * (iv["end_ns"] - iv["start_ns"]) / 1e9, 1e-3)
        # an end after an idle stretch: the monitor may have seen it from the last beat on
        since = ivs[i - 1]["start_ns"] if i and ivs[i - 1]["behavior"] == "idle" else iv["start_ns"]
        best = None
        for k, r in enumerate(rep):
            if k in used or r["behavior"] != ONLINE_NAME.get(iv["behavior"], iv["behavior"]):
                continue
            if abs(r["onset_ns"] - iv["start_ns"]) / 1e9 <= tol or (
                    since <= r["onset_ns"] <= iv["end_ns"] and iv["behavior"] in ("exited", "failed")):
                if best is None or r["t_ns"] < rep[best]["t_ns"]:
                    best = k
        if best is not None:
            used.add(best)
            r = rep[best]
            iv["online"] = {"mode": r["mode"], "behavior": r["behavior"], "detected_s": r["t_ns"] / 1e9,
                            "onset_s": r["onset_ns"] / 1e9, "lag_s": (r["t_ns"] - r["onset_ns"]) / 1e9,
                            "latency_s": (r["t_ns"] - since) / 1e9}
    row["online"] = [{"behavior": r["behavior"], "mode": r["mode"], "onset_s": r["onset_ns"] / 1e9,
                      "detected_s": r["t_ns"] / 1e9, "lag_s": (r["t_ns"] - r["onset_ns"]) / 1e9,
                      "matched": k in used} for k, r in enumerate(rep)]


def monitor_summary(trace: HeartbeatTrace, s: BehaviorSettings) -> list[dict]:
    """Per process with a monitor: its mode, messages and passes, and messages per window."""
    m = trace.monitor
    out = []
    if not len(m):
        return out
    st = m[m["kind"] == "monitor"]
    for (run, process), g in st.groupby(["run", "process"], observed=True, sort=True):
        last = g.sort_values("t_ns").iloc[-1]
        b = trace.stats if isinstance(trace, StreamedTrace) else trace.beats
        mine = (b["run"] == run) & (b["process"] == process)
        beats = int(b.loc[mine, "beats"].sum()) if isinstance(trace, StreamedTrace) else int(mine.sum())
        threads = int(b.loc[mine, "thread"].nunique())
        windows = beats / (s.window_beats * max(threads, 1)) if beats else float("nan")
        rep = m[(m["kind"] == "behavior") & (m["run"] == run) & (m["process"] == process)]
        out.append({"run": str(run), "process": int(process), "mode": last["mode"],
                    "messages": int(last["messages"]), "passes": int(last["passes"]),
                    "monitored": int(last["monitored"]), "period_us": int(last["period_us"]),
                    "beats": beats, "window_beats": s.window_beats,
                    "messages_per_window": float(last["messages"]) / windows if windows else float("nan"),
                    "reports": int(len(rep))})
    return out


# --------------------------------------------------------------------------- entry point


def behavior_timelines(trace: HeartbeatTrace, settings: BehaviorSettings | None = None,
                       beatless: bool = False) -> list[dict]:
    """Every thread's behavior timeline (dicts; times in ns, see hbtool.cli.behavior for output);
    beatless: also the threads that made no beats, with only their end."""
    s = settings or BehaviorSettings()
    prepared = prepare(trace, s, PREPARED_BEATS_HELD if isinstance(trace, StreamedTrace) else None)
    teams: dict[tuple, list] = {}
    for tb in prepared:
        teams.setdefault((tb.run, tb.process), []).append(tb)
    # per process, once: how it ended, and whether it ran the monitor
    ends = {key: (_run_end(trace, *key, max(int(tb.t_ns[-1]) for tb in team)), _process_fate(trace, *key),
                  _monitor_ran(trace, team[0]))
            for key, team in teams.items()}
    rows, waits_cache = [], {}
    for tb in prepared:
        key = (tb.run, tb.process)
        lifecycle = bool(trace.runs.get(tb.run, {}).get("lifecycle"))
        run_end, pend, monitored = ends[key]
        reports = _monitor_reports(trace, tb)
        if isinstance(tb, TeammateView) and tb.long:   # made a segment at a time, never whole
            row = _long_timeline(tb, trace, teams[key], s, lifecycle, reports, monitored, run_end, pend)
            _attach_online(row, reports, s)
            rows.append(row)
            continue
        if isinstance(tb, TeammateView):   # read again, for its own timeline only
            k = (tb.run, tb.process, tb.thread)
            t, construct = trace.thread_beats(k)
            tb = _prepared(trace, s, k, t, tb.os_tids, construct)
        row = thread_timeline(tb, trace, teams[key], s, lifecycle, reports, monitored, run_end, pend, waits_cache)
        _attach_online(row, reports, s)
        rows.append(row)
    if beatless:
        rows += beatless_timelines(trace)
    order = {r: k for k, r in enumerate(trace.runs)}
    return sorted(rows, key=lambda r: (order.get(r["run"], len(order)), r["process"], r["thread"]))


def beatless_timelines(trace: HeartbeatTrace) -> list[dict]:
    """Threads that made no beats but left lifecycle records: only their end is known."""
    from .summary import summarize_threads

    summary = summarize_threads(trace, beatless=True)
    if not len(summary):
        return []
    rows = []
    for r in summary[summary["beats"] == 0].itertuples():
        start, end = int(round(r.first_s * 1e9)), int(round(r.last_s * 1e9))
        if r.ending in ("no_end_record", "unknown", "process_signal", "process_exit"):
            what = "ended"   # (another thread's fatal signal or exit ended it, as a beating thread)
        else:
            what = "failed" if r.ending in ("signal", "cancelled") else "exited"
        rows.append({"run": r.run, "process": int(r.process), "thread": int(r.thread),
                     "os_tid": r.os_tids[-1] if r.os_tids else -1, "beats": 0, "usual_interval_s": float("nan"),
                     "intervals": [_interval(what, end, end, None, None, r.ended) | {"online": None}],
                     "online": [], "notes": [f"no beats: alive from {start / 1e9:.3f} s to {end / 1e9:.3f} s, "
                                             f"what it did meanwhile is not known"]})
    return rows


@dataclass
class BehaviorReport:
    """What :func:`timeline` found: every thread's timeline (behavior_timelines), each
    monitored process's online-monitor summary (monitor_summary), and the settings."""

    threads: list[dict]
    monitors: list[dict]
    settings: BehaviorSettings


def timeline(trace: HeartbeatTrace, settings: BehaviorSettings | None = None) -> BehaviorReport:
    """The whole offline method in one call: timelines beside the online monitor's reports,
    every thread the trace knows (those that made no beats with only their end)."""
    s = settings or BehaviorSettings()
    return BehaviorReport(behavior_timelines(trace, s, beatless=True), monitor_summary(trace, s), s)
