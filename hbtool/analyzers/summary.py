"""Per-thread summaries: beats, time span, mean heart rate, and how the thread ended."""

from __future__ import annotations

import signal as _signal
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import config
from ..model import THREAD_END_REASONS, HeartbeatTrace
from ..model.heartbeats import StreamedTrace


#: every value of a thread's `ending`, and what it means
ENDINGS = {
    "returned": "its start routine returned",
    "pthread_exit": "it called pthread_exit",
    "cancelled": "pthread_cancel ended it",
    "exit": "it called exit or _exit (or returned from main), ending the process",
    "signal": "a fatal signal in this thread killed the process",
    "process_exit": "another thread's exit or _exit ended the process around it",
    "process_signal": "a fatal signal in another thread killed the process around it",
    "no_end_record": "the trace stops with no end: SIGKILL, or the trace was cut short",
    "running": "no end yet: the trace is live (its program still runs)",
    "unknown": "the trace has no lifecycle records",
}


def signal_name(signo: int) -> str:
    try:
        return _signal.Signals(signo).name
    except ValueError:
        return f"signal {signo}"


@dataclass(frozen=True)
class ProcessEnd:
    """How a process ended, from its lifecycle records."""

    kind: str     # "signal" (killed by a fatal signal) or "process_exit" (exit or _exit)
    code: int     # the signal number, or the exit status
    t_ns: int     # when, on the run's clock
    os_tid: int   # the thread that recorded it
    call: str = ""  # process_exit: "exit" or "_exit"

    @property
    def abnormal(self) -> bool:
        return self.kind == "signal" or self.code != 0

    @property
    def text(self) -> str:
        """'killed by SIGSEGV' or 'exit(1)'."""
        return f"killed by {signal_name(self.code)}" if self.kind == "signal" else f"{self.call}({self.code})"


def process_end(events: pd.DataFrame) -> ProcessEnd | None:
    """The end of one process from its events (run and process already selected), or None.

    A fatal signal decides when there is one (the first, which began the death);
    otherwise the last exit record."""
    sig = events[events["kind"] == "signal"]
    if len(sig):
        r = sig.sort_values("t_ns", kind="stable").iloc[0]
        return ProcessEnd("signal", int(r["detail"]), int(r["t_ns"]), int(r["os_tid"]))
    ex = events[events["kind"] == "process_exit"]
    if len(ex):
        r = ex.sort_values("t_ns", kind="stable").iloc[-1]
        return ProcessEnd("process_exit", int(r["detail"]), int(r["t_ns"]), int(r["os_tid"]),
                          "_exit" if int(r["flags"]) & 1 else "exit")
    return None


def thread_endings(trace: HeartbeatTrace) -> pd.DataFrame:
    """How each OS thread of each process ended, from the lifecycle records.

    Columns: run, process, os_tid, ending, ended, end_t, abnormal. ``ending`` is one of
    returned, pthread_exit, cancelled (the thread ended itself); exit (it called exit()
    or _exit(), ending the process), signal (a fatal signal in this thread killed the
    process); process_exit, process_signal (another thread's exit or fatal signal ended
    the process around it); no_end_record (the trace stops with no end: SIGKILL, power
    loss, or a trace cut short). Runs whose format has
    no lifecycle records get no rows. ``abnormal`` is True when the thread did not end
    itself and the process died: a fatal signal, a non-zero exit status, or no end record.
    """
    rows = []
    ev_all = trace.events
    for (run, process), ev in ev_all.groupby(["run", "process"], sort=False, observed=True):
        live = any(p.get("live") and p.get("process") == process
                   for p in trace.runs.get(run, {}).get("processes", []))
        pend = process_end(ev)
        bad_end = pend is None or pend.abnormal
        pend_t = float(ev[ev["kind"].isin(["signal", "process_exit"])]["t"].max()) if pend else np.nan
        tids = set(ev["os_tid"].tolist())
        tids |= _beat_tids(trace, run, process)
        te = ev[ev["kind"] == "thread_end"]
        last_end = {}  # OS thread -> (detail, t) of its last thread_end record
        for tid, detail, t in zip(te["os_tid"].tolist(), te["detail"].tolist(), te["t"].tolist()):
            last_end[tid] = (detail, t)
        for tid in sorted(t for t in tids if t >= 0):
            if tid in last_end:
                detail, t = last_end[tid]
                why = THREAD_END_REASONS.get(int(detail), f"ended ({int(detail)})")
                rows.append((run, process, tid, why, why, float(t), False))
            elif pend is not None:
                kind, text = pend.kind, pend.text
                if pend.os_tid == tid:  # this thread ended the process
                    if kind == "process_exit":
                        kind, text = "exit", f"called {text}"
                elif kind == "process_exit":
                    text = f"ended by {text} in another thread"
                else:
                    kind, text = "process_signal", f"{text} (in another thread)"
                rows.append((run, process, tid, kind, text, pend_t, bool(bad_end)))
            elif live:
                rows.append((run, process, tid, "running", "still running (live trace)", np.nan, False))
            else:
                rows.append((run, process, tid, "no_end_record",
                             "no end record (killed by SIGKILL, or the trace was cut short)", np.nan, True))
    return pd.DataFrame(rows, columns=["run", "process", "os_tid", "ending", "ended", "end_t", "abnormal"])


SUMMARY_COLUMNS = ["run", "process", "thread", "beats", "first_s", "last_s", "duration_s", "mean_rate",
                   "ending", "ended", "os_tids", "abnormal"]


def summarize_threads(trace: HeartbeatTrace, beatless: bool = False) -> pd.DataFrame:
    """One row per (run, process, thread): beats, first_s, last_s, duration_s,
    mean_rate (beats/s over the thread's span), ending and ended (how it ended,
    when the trace knows), os_tids.

    beatless: also one row per OS thread that made no beats but left lifecycle records
    (beats 0; first_s, last_s: its first and last record), numbered after the process's
    beating threads in the order they started."""
    ends = thread_endings(trace)
    s = _beating(trace, ends)
    if beatless:
        extra = _beatless(trace, s, ends)
        if len(extra):
            s = pd.concat([s, extra], ignore_index=True) if len(s) else extra
            order = {r: k for k, r in enumerate(trace.runs)}
            s = s.assign(_run=s["run"].astype(str).map(order)).sort_values(
                ["_run", "process", "thread"], kind="stable").drop(columns="_run").reset_index(drop=True)
    return s


def _beatless(trace: HeartbeatTrace, beating: pd.DataFrame, ends: pd.DataFrame) -> pd.DataFrame:
    ev = trace.events
    if not len(ev):
        return pd.DataFrame(columns=SUMMARY_COLUMNS)
    b = _beats_or_stats(trace)
    seen = set(zip(b["run"].astype(str), b["process"], b["os_tid"])) if len(b) else set()
    end_by_tid = {(r.run, r.process, r.os_tid): r for r in ends.itertuples()}
    rows = []
    for (run, process), g in ev[ev["os_tid"] >= 0].groupby(["run", "process"], sort=False, observed=True):
        top = beating.loc[(beating["run"] == run) & (beating["process"] == process), "thread"] if len(beating) else []
        nxt = int(max(top)) + 1 if len(top) else 0
        span = g.groupby("os_tid", sort=False)["t"].agg(["min", "max"]).sort_values("min", kind="stable")
        for tid, (t0, t1) in span.iterrows():
            if (str(run), process, tid) in seen:
                continue
            end = end_by_tid.get((run, process, tid))
            if end is not None and np.isfinite(end.end_t):
                t1 = max(t1, float(end.end_t))
            rows.append({"run": run, "process": process, "thread": nxt, "beats": 0, "first_s": t0, "last_s": t1,
                         "duration_s": t1 - t0, "mean_rate": np.nan,
                         "ending": end.ending if end is not None else "unknown",
                         "ended": end.ended if end is not None else "unknown",
                         "os_tids": [int(tid)], "abnormal": bool(end.abnormal) if end is not None else False})
            nxt += 1
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def _beats_or_stats(trace: HeartbeatTrace) -> pd.DataFrame:
    """The beats table, or for a trace whose beats stay in the file its per-thread stats
    (both have run, process, thread, os_tid)."""
    stats = getattr(trace, "stats", None)
    return stats if stats is not None else trace.beats


def _beat_tids(trace: HeartbeatTrace, run, process) -> set:
    """OS threads of one process that made beats."""
    b = _beats_or_stats(trace)
    return set(b.loc[(b["run"] == run) & (b["process"] == process), "os_tid"].tolist())


def _beating(trace: HeartbeatTrace, ends: pd.DataFrame) -> pd.DataFrame:
    stats = getattr(trace, "stats", None)
    b = stats if stats is not None else trace.beats
    cols = SUMMARY_COLUMNS
    if not len(b):
        return pd.DataFrame(columns=cols)
    g = b.groupby(["run", "process", "thread"], sort=False, observed=True)
    if stats is not None:  # beats summarised per OS thread and source by the reader
        s = g.agg(beats=("beats", "sum"), first_s=("first_s", "min"), last_s=("last_s", "max")).reset_index()
    else:
        s = g.agg(beats=("t", "size"), first_s=("t", "min"), last_s=("t", "max")).reset_index()
    s["duration_s"] = s["last_s"] - s["first_s"]
    with np.errstate(divide="ignore", invalid="ignore"):
        s["mean_rate"] = np.where(s["duration_s"] > 0, (s["beats"] - 1) / s["duration_s"], np.nan)
    pairs = b.loc[b["os_tid"] >= 0, ["run", "process", "thread", "os_tid"]].drop_duplicates()
    by_thread: dict[tuple, list[int]] = {}
    for r, p, t, tid in pairs.itertuples(index=False, name=None):
        by_thread.setdefault((r, p, t), []).append(int(tid))
    s["os_tids"] = [sorted(by_thread.get((r, p, t), [])) for r, p, t in zip(s["run"], s["process"], s["thread"])]
    end_by_tid = {(r.run, r.process, r.os_tid): (r.ending, r.ended, r.abnormal) for r in ends.itertuples()}
    endings, texts, abnormal = [], [], []
    for row in s.itertuples():
        meta = trace.runs.get(row.run, {})
        if not meta.get("lifecycle"):
            endings.append("unknown")
            texts.append("unknown (the trace has no lifecycle records)")
            abnormal.append(False)
            continue
        found = [end_by_tid[(row.run, row.process, t)] for t in row.os_tids if (row.run, row.process, t) in end_by_tid]
        if found:
            endings.append(found[-1][0])
            texts.append(found[-1][1])
            abnormal.append(bool(found[-1][2]))
        else:
            endings.append("no_end_record")
            texts.append("no end record")
            abnormal.append(True)
    s["ending"] = endings
    s["ended"] = texts
    s["abnormal"] = abnormal
    return s[cols]


def split_waits(waits: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(idle, serial): a trace's wait records split into the time threads waited, and the
    time the master thread (OpenMP thread 0) spent outside the parallel regions, in the
    program's serial part: its own work, although recorded like the others' time there
    (sync "outside"), which the workers spend waiting in the runtime's pool."""
    if not len(waits):
        return waits, waits
    serial = ((waits["sync"] == "outside") & (waits["thread"] == 0)).to_numpy()
    return waits[~serial], waits[serial]


def wait_times(trace: HeartbeatTrace) -> pd.DataFrame:
    """Per (run, process, thread) with wait records: waits (how many), wait_s (their total,
    seconds) and, per synchronisation kind, its seconds (columns wait_<sync>_s; a worker's
    time outside the parallel regions is wait_outside_s), and serial_s: the master's time
    outside the regions (split_waits), not counted as waiting."""
    stats = getattr(trace, "wait_stats", None)  # a trace whose waits stay in the file: their sums
    w, serial = split_waits(stats if stats is not None else trace.waits)
    if not len(w):
        return pd.DataFrame(columns=["run", "process", "thread", "waits", "wait_s"])
    key = ["run", "process", "thread"]
    g = w.groupby(key, observed=True, sort=True)
    count = ("waits", "sum") if stats is not None else ("wait_ns", "size")
    out = g.agg(waits=count, wait_s=("wait_ns", "sum")).reset_index()
    out["wait_s"] = out["wait_s"] / 1e9
    by_sync = w.pivot_table(index=key, columns="sync", values="wait_ns", aggfunc="sum", observed=True, fill_value=0)
    by_sync = (by_sync / 1e9).add_prefix("wait_").add_suffix("_s").reset_index()
    by_sync.columns.name = None
    out = out.merge(by_sync, on=key, how="left")
    if "wait_outside_s" in out:
        out = out.drop(columns=[c for c in out if c.startswith("wait_") and c != "wait_s" and not out[c].any()])
    if len(serial):
        ser = serial.groupby(key, observed=True)["wait_ns"].sum().div(1e9).rename("serial_s").reset_index()
        out = out.merge(ser, on=key, how="left")
    return out


def region_work(trace: HeartbeatTrace) -> pd.DataFrame:
    """Per (run, process, thread) with beats, in a process with wait records: work_s, the
    thread's own work between its first and last beat: that time less its recorded waits
    and, for the master, its time outside the parallel regions (split_waits). NaN where the
    process has no wait records (its beats say nothing of its waits). A trace whose beats
    and waits stay in the file (StreamedTrace) gives the same from its per-thread summaries."""
    key = ["run", "process", "thread"]
    stats = getattr(trace, "stats", None)
    if stats is not None:
        if not len(stats):
            return pd.DataFrame(columns=key + ["work_s"])
        span = stats.groupby(key, observed=True, sort=False).agg(first=("first_ns", "min"),
                                                                 last=("last_ns", "max")).reset_index()
        w = trace.wait_stats
    else:
        b = trace.beats
        if not len(b):
            return pd.DataFrame(columns=key + ["work_s"])
        span = b.groupby(key, observed=True, sort=False)["t_ns"].agg(first="min", last="max").reset_index()
        w = trace.waits
    span["work_s"] = (span["last"] - span["first"]) / 1e9
    if not len(w):
        span["work_s"] = np.nan
        return span[key + ["work_s"]]
    with_waits = set(map(tuple, w[["run", "process"]].drop_duplicates().astype({"run": str}).to_numpy().tolist()))
    if stats is not None:
        off = trace.wait_overlap(span[key + ["first", "last"]])
    else:
        m = w[key + ["t_ns", "wait_ns"]].merge(span[key + ["first", "last"]], on=key, how="inner")
        lo = np.maximum((m["t_ns"] - m["wait_ns"]).to_numpy(), m["first"].to_numpy())
        hi = np.minimum(m["t_ns"].to_numpy(), m["last"].to_numpy())
        m["off_ns"] = np.clip(hi - lo, 0, None)
        off = m.groupby(key, observed=True)["off_ns"].sum().reset_index()
    off = off.assign(off_s=off["off_ns"] / 1e9)[key + ["off_s"]]
    span = span.merge(off.astype({"run": span["run"].dtype}) if len(off) else off, on=key, how="left")
    span["work_s"] = span["work_s"] - span["off_s"].fillna(0.0)
    has = [(str(r), int(p)) in with_waits for r, p in zip(span["run"], span["process"])]
    span.loc[~np.asarray(has, dtype=bool), "work_s"] = np.nan
    return span[key + ["work_s"]]


def memory_retained(trace: HeartbeatTrace) -> pd.DataFrame:
    """Per (run, process, thread) with memory records (the tracer's memory signal):
    ``retained``, the bytes the thread allocated and did not free between its first and its
    last memory record (its balance, allocated - freed, then less its balance at first);
    ``rises``, how many of its records found the balance higher than the one before (a
    leak rises record after record; one large buffer, once); ``process_growth``, how much
    its process's heap in use grew between its first and last process record (resident
    bytes where the heap is unknown; NaN without two process records): what the threads
    retained only counts when the process kept it too (a block freed by another thread
    leaves its allocator's balance up, not the process's); ``peak_resident``, the
    process's largest resident size (NaN unknown)."""
    key = ["run", "process", "thread"]
    cols = key + ["retained", "rises", "process_growth", "peak_resident"]
    m = getattr(trace, "memory", None)
    if m is None or not len(m):
        return pd.DataFrame(columns=cols)
    th = m[m["scope"] == "thread"].sort_values(["run", "process", "os_tid", "t_ns"], kind="stable")
    if not len(th):
        return pd.DataFrame(columns=cols)
    th = th.assign(balance=th["allocated"] - th["freed"])
    g = th.groupby(["run", "process", "os_tid"], observed=True, sort=False)
    th = th.assign(up=(g["balance"].diff() > 0).astype(np.int64))
    per_tid = g.agg(thread=("thread", "last"), first=("balance", "first"), last=("balance", "last"))
    per_tid["rises"] = th.groupby(["run", "process", "os_tid"], observed=True, sort=False)["up"].sum()
    per_tid["retained"] = per_tid["last"] - per_tid["first"]
    out = per_tid.reset_index().groupby(key, observed=True, sort=False).agg(
        retained=("retained", "sum"), rises=("rises", "sum")).reset_index()
    pr = m[m["scope"] == "process"].sort_values(["run", "process", "t_ns"], kind="stable")
    growth, peak = {}, {}
    for (run, process), p in pr.groupby(["run", "process"], observed=True, sort=False):
        heap = p["heap"].to_numpy()
        res = p["resident"].to_numpy()
        use = heap if (heap >= 0).all() else res if (res >= 0).all() else None
        if use is not None and use.size >= 2:
            growth[(str(run), int(process))] = float(use[-1] - use[0])
        known = res[res >= 0]
        if known.size:
            peak[(str(run), int(process))] = float(known.max())
    keys = list(zip(out["run"].astype(str), out["process"].astype(int)))
    out["process_growth"] = [growth.get(k, np.nan) for k in keys]
    out["peak_resident"] = [peak.get(k, np.nan) for k in keys]
    return out[cols]


def _waits_by_thread(team: list[tuple], grouped: dict) -> dict[tuple, tuple]:
    """(start_ns, end_ns) of the recorded waits of each thread of `team`, sorted by end, from
    `grouped` (the waits table's rows per thread, _grouped)."""
    out = {}
    for key in team:
        w = grouped.get(key)
        if w is None or not len(w):
            out[key] = (np.empty(0, np.int64), np.empty(0, np.int64))
            continue
        end = w["t_ns"].to_numpy(np.int64)
        o = np.argsort(end, kind="stable")
        out[key] = ((end - w["wait_ns"].to_numpy(np.int64))[o], end[o])
    return out


def _grouped(table: pd.DataFrame) -> dict[tuple, pd.DataFrame]:
    """The rows of a beats or waits table per (run, process, thread), once."""
    if not len(table):
        return {}
    return {(str(r), int(p), int(t)): g for (r, p, t), g in
            table.groupby(["run", "process", "thread"], sort=False, observed=True)}


def work_clock(t_ns: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """At each time of t_ns: the time so far that the thread spent not in its recorded waits
    (waits [start, end), one thread's, not overlapping, sorted by end): its work clock."""
    if not len(end):
        return t_ns.astype(np.int64)
    waited = np.r_[0, np.cumsum(end - start)]
    j = np.searchsorted(end, t_ns, side="right")      # waits over by then
    part = np.clip(t_ns - start[np.minimum(j, len(end) - 1)], 0, None)
    part = np.where(j < len(end), np.minimum(part, (end - start)[np.minimum(j, len(end) - 1)]), 0)
    return t_ns - waited[j] - part


def _window_edges(n: int) -> np.ndarray | None:
    """Beat indices that split n beats into config.SHIFT_WINDOWS windows of at least
    config.SHIFT_MIN_BEATS beats (fewer windows for fewer beats; None under six)."""
    w = min(config.SHIFT_WINDOWS, (n - 1) // config.SHIFT_MIN_BEATS)
    if w < 6:
        return None
    return np.linspace(0, n - 1, w + 1).round().astype(np.int64)


def _window_work(beats: dict[tuple, np.ndarray], waits: dict) -> tuple[dict, dict]:
    """Each thread's work (ns, work_clock) in each window of its beats, and the index of each
    window's first beat; the windows are equal shares of each thread's own beats, so the k-th
    window of every thread holds the same units of work: only when the team's threads made as
    many beats each, as OpenMP's static loops and constructs make them (beat i of every
    thread ends the same unit of work), or nearly (config.SHIFT_SAME_BEATS: a static loop whose
    iterations do not divide evenly among the threads). Otherwise nothing: a dynamic loop's chunks go to
    whoever is free (a slow thread takes fewer), and windows of wall time would make a
    teammate's one long stall, which the others wait through, look like a shift of theirs."""
    counts = [len(t) for t in beats.values()]
    if max(counts) > config.SHIFT_SAME_BEATS * min(counts) or _window_edges(min(counts)) is None:
        return {}, {}
    edges = {k: _window_edges(len(t)) for k, t in beats.items()}
    if len({len(e) for e in edges.values()}) != 1:
        return {}, {}
    return ({k: np.diff(work_clock(t[edges[k]], *waits[k]).astype(np.float64)) for k, t in beats.items()}, edges)


def _window_work_streamed(trace: StreamedTrace, counts: dict[tuple, int]) -> tuple[dict, dict]:
    """_window_work of a streamed trace's team (`counts`: each thread's beats), holding no
    thread whole: the beat times at the window edges, read in pieces, and the time each
    thread had waited by each, summed over its waits read in pieces (a wait [start, end)
    counts up to the edge: the same work clock for waits that do not overlap)."""
    if len(counts) < 2:
        return {}, {}
    n = list(counts.values())
    if max(n) > config.SHIFT_SAME_BEATS * min(n) or _window_edges(min(n)) is None:
        return {}, {}
    edges = {k: _window_edges(c) for k, c in counts.items()}
    if len({len(e) for e in edges.values()}) != 1:
        return {}, {}
    work = {}
    for k in counts:
        at = trace.thread_times_at(k, edges[k])
        waited = np.zeros(at.size, dtype=np.int64)
        for end, length, _ in trace.thread_wait_pieces(k):
            o = np.argsort(end, kind="stable")
            waited += at - work_clock(at, (end - length)[o], end[o])
        work[k] = np.diff((at - waited).astype(np.float64))
    return work, edges


def work_shifts(trace: HeartbeatTrace) -> pd.DataFrame:
    """Per thread of a team with wait records: how many times longer its own work took,
    against its team's, after some beat than before it (docs/methods.md, "Work shift").

    The team's run is cut into windows (_window_work: equal shares of each thread's own beats,
    for a team whose threads beat alike); in each, the thread's work (the time not in its
    recorded waits, work_clock) over the median of its teammates' in theirs. These
    ratios are split where they change most (the split into an earlier and a later part, of
    two windows or more each, whose values lie closest to their part's median: least
    absolute deviation), and the shift is the later part's median over the earlier's: a thread that
    became slower in its own work from some beat on (a slow or leaking thread) shifts by
    that factor; its teammates, which wait for it at the barriers, do not (theirs falls);
    the team's phases and the machine's load move every thread alike. Columns: run, process,
    thread, work_shift (NaN: too few beats, no teammate, no waits or a team whose threads
    made different numbers of beats), shift_beat (the
    first beat of the later part)."""
    key = ["run", "process", "thread"]
    cols = key + ["work_shift", "shift_beat"]
    if not trace.beat_count():
        return pd.DataFrame(columns=cols)
    if isinstance(trace, StreamedTrace):
        with_waits = {(str(r), int(p)) for r, p in zip(trace.wait_stats["run"].astype(str), trace.wait_stats["process"])}
        keys = [(str(r), int(p), int(t)) for r, p, t in trace.thread_keys()]
    else:
        w = trace.waits
        with_waits = {(str(r), int(p)) for r, p in zip(w["run"].astype(str), w["process"])} if len(w) else set()
        keys = [(str(k[0]), int(k[1]), int(k[2])) for k, _ in trace.threads()]
    teams: dict[tuple, list[tuple]] = {}
    for k in keys:
        if k[:2] in with_waits:
            teams.setdefault(k[:2], []).append(k)
    rows = []
    streamed = isinstance(trace, StreamedTrace)
    eager = not streamed and any(len(team) > 1 for team in teams.values())
    beats_of = _grouped(trace.beats) if eager else None
    waits_of = _grouped(trace.waits) if eager else None
    counts = {(str(k[0]), int(k[1]), int(k[2])): n for k, n, _ in trace.thread_loaders()} if streamed else None
    for (run, process), team in teams.items():
        if len(team) < 2:
            continue
        if streamed:   # a few beats of each thread, its waits summed: none held whole
            work, at_beat = _window_work_streamed(trace, {k: counts[k] for k in team if counts.get(k)})
        else:
            waits = _waits_by_thread(team, waits_of)
            beats = {k: t for k, t in _beat_times(team, beats_of).items() if len(t)}
            if len(beats) < 2:
                continue
            work, at_beat = _window_work(beats, waits)
        if not work:
            continue
        m = len(next(iter(work.values())))
        stack = np.array(list(work.values()))
        # a big team: the median of every thread, which one of them barely moves (and costs
        # one median, not one per thread)
        whole = np.median(stack, axis=0) if len(work) > config.SHIFT_WHOLE_TEAM else None
        for i, (k, v) in enumerate(work.items()):
            others = whole if whole is not None else np.median(np.delete(stack, i, axis=0), axis=0)
            q = np.log(np.maximum(v, config.SHIFT_FLOOR_NS) / np.maximum(others, config.SHIFT_FLOOR_NS))
            # the split with the least absolute deviation from each part's median (one change point)
            cost, at = np.inf, 0
            for s in range(2, m - 1):
                c = float(np.abs(q[:s] - np.median(q[:s])).sum() + np.abs(q[s:] - np.median(q[s:])).sum())
                if c < cost:
                    cost, at = c, s
            shift = float(np.exp(np.median(q[at:]) - np.median(q[:at])))
            rows.append((run, process, k[2], shift, int(at_beat[k][at]) + 1))
    return pd.DataFrame(rows, columns=cols)


def _beat_times(team: list[tuple], grouped: dict) -> dict[tuple, np.ndarray]:
    """Each thread of `team`'s beat times (ns, sorted), from `grouped` (_grouped; a streamed
    trace's team goes through _window_work_streamed)."""
    return {k: np.sort(grouped[k]["t_ns"].to_numpy(np.int64), kind="stable") if k in grouped else np.empty(0, np.int64)
            for k in team}
