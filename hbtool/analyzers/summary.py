"""Per-thread summaries: beats, time span, mean heart rate, and how the thread ended."""

from __future__ import annotations

import signal as _signal
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import config
from ..model import THREAD_END_REASONS, HeartbeatTrace
from ..model.heartbeats import PER_ITERATION, UNSHARED, StreamedTrace, chunk_iterations_of, sections_named


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
    called_ns: int | None = None  # exit(): when it was called, before its handlers ran (to t_ns)
    # a fatal signal during an exit: the thread that called exit() first, and its status
    # (a thread that calls exit() while others still work can make one of them crash in the
    # exit handlers: cd-hit's did, in 3 of 4 runs)
    exit_tid: int | None = None
    exit_code: int | None = None

    @property
    def began_tid(self) -> int:
        """The thread that began the end: the one that called exit() when a fatal signal
        came during that exit, else the one that recorded the end."""
        return self.os_tid if self.exit_tid is None else self.exit_tid

    @property
    def began_ns(self) -> int:
        """When the process's end began: the exit() call when the trace has it, else t_ns.
        Threads that end between the two (an OpenMP runtime's exit handler ends its
        workers) were ended by the process's exit, not by themselves."""
        return self.t_ns if self.called_ns is None else min(self.called_ns, self.t_ns)

    @property
    def abnormal(self) -> bool:
        return self.kind == "signal" or self.code != 0

    @property
    def text(self) -> str:
        """'killed by SIGSEGV' or 'exit(1)'."""
        return f"killed by {signal_name(self.code)}" if self.kind == "signal" else f"{self.call}({self.code})"

    @property
    def exit_text(self) -> str:
        """The exit() a fatal signal came during: 'exit(1)' ('' when none did)."""
        return "" if self.exit_tid is None else f"exit({self.exit_code})"


def process_end(events: pd.DataFrame) -> ProcessEnd | None:
    """The end of one process from its events (run and process already selected), or None.

    A fatal signal decides when there is one (the first, which began the death; with the
    exit() call before it, if one came first: the signal came during that exit);
    otherwise the last exit record."""
    sig = events[events["kind"] == "signal"]
    ex = events[events["kind"] == "process_exit"]
    if len(sig):
        r = sig.sort_values("t_ns", kind="stable").iloc[0]
        called = ex[((ex["flags"].to_numpy().astype(np.int64) & 2) != 0) & (ex["t_ns"] <= r["t_ns"])]
        if len(called):
            c = called.sort_values("t_ns", kind="stable").iloc[0]
            return ProcessEnd("signal", int(r["detail"]), int(r["t_ns"]), int(r["os_tid"]), called_ns=int(c["t_ns"]),
                              exit_tid=int(c["os_tid"]), exit_code=int(c["detail"]))
        return ProcessEnd("signal", int(r["detail"]), int(r["t_ns"]), int(r["os_tid"]))
    if len(ex):
        # flag 2: exit() was called here (its handlers then ran); the record without it is the end
        called = (ex["flags"].to_numpy().astype(np.int64) & 2) != 0
        ends = ex[~called] if (~called).any() else ex
        r = ends.sort_values("t_ns", kind="stable").iloc[-1]
        at = ex[called]
        at = at[at["os_tid"] == r["os_tid"]] if (~called).any() else at
        return ProcessEnd("process_exit", int(r["detail"]), int(r["t_ns"]), int(r["os_tid"]),
                          "_exit" if int(r["flags"]) & 1 else "exit",
                          int(at["t_ns"].min()) if len(at) else None)
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
        # an end record after the process's exit began, in a thread other than the one that
        # called exit(): its runtime ended it in an exit handler (libomp's workers)
        ended_by_exit = {tid for tid, t in zip(te["os_tid"].tolist(), te["t_ns"].tolist())
                         if pend is not None and (pend.kind == "process_exit" or pend.exit_tid is not None)
                         and pend.began_tid != tid and t > pend.began_ns}
        for tid in sorted(t for t in tids if t >= 0):
            if tid in last_end and tid not in ended_by_exit:
                detail, t = last_end[tid]
                why = THREAD_END_REASONS.get(int(detail), f"ended ({int(detail)})")
                rows.append((run, process, tid, why, why, float(t), False))
            elif pend is not None:
                kind, text = pend.kind, pend.text
                if pend.exit_tid is not None:   # a fatal signal during an exit() call
                    during = f"during the {pend.exit_text} " + ("it called" if pend.exit_tid == tid else
                                                                "another thread called")
                    if pend.exit_tid == tid:
                        kind = "exit"
                        text = (f"called {pend.exit_text}, and was {text} during it" if pend.os_tid == tid
                                else f"called {pend.exit_text}; the process was then {text} (in another thread)")
                    elif pend.os_tid == tid:
                        text = f"{text} {during}"
                    else:
                        kind, text = "process_signal", f"{text} (in another thread) {during}"
                elif pend.os_tid == tid:  # this thread ended the process
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


def cpu_shares(trace: HeartbeatTrace) -> pd.DataFrame:
    """Per (run, process, thread) with sched records (the tracer's): ``cpu_pct``, the share of
    the time its records cover that it ran on a CPU, and ``queued_pct``, the share it was
    runnable but waited for one (its run-queue delay: the machine's other work, or more
    threads than CPUs), in percent; ``sched_s``, the time covered."""
    sc = trace.sched
    if not len(sc):
        return pd.DataFrame(columns=["run", "process", "thread", "cpu_pct", "queued_pct", "sched_s"])
    g = sc.assign(run=sc["run"].astype(str)).groupby(["run", "process", "thread"], sort=True)
    out = g[["span_ns", "cpu_ns", "queued_ns"]].sum().reset_index()
    span = out["span_ns"].to_numpy(np.float64)
    out["cpu_pct"] = 100 * out["cpu_ns"] / span
    out["queued_pct"] = 100 * out["queued_ns"] / span
    out["sched_s"] = span / 1e9
    return out[["run", "process", "thread", "cpu_pct", "queued_pct", "sched_s"]]


def memory_retained(trace: HeartbeatTrace) -> pd.DataFrame:
    """Per (run, process, thread) with memory records (the tracer's memory signal):
    ``retained``, the bytes the thread allocated and did not free between its first and its
    last memory record (its balance, allocated - freed, then less its balance at first);
    ``rises``, how many of its records found the balance higher than the one before (a
    leak rises record after record; one large buffer, once); ``process_growth``, how much
    its process's heap in use grew between its first and last process record (resident
    bytes where the heap is unknown; NaN without two process records), plus what its other
    threads freed of the balances they had at their first records: what the threads
    retained only counts when the process kept it too (a block freed by another thread
    leaves its allocator's balance up, not the process's); ``peak_resident``, the
    process's largest resident size (NaN unknown)."""
    key = ["run", "process", "thread"]
    cols = key + ["retained", "rises", "process_growth", "peak_resident"]
    m = getattr(trace, "memory", None)
    if m is None or not len(m):
        return pd.DataFrame(columns=cols)
    th = m[m["scope"] == "thread"]
    owned = m[m["scope"] == "owned"]
    if len(th) and len(owned):
        # a thread's counts at the process's exit, with the bytes of its blocks others freed
        # after its last record, written by the exiting thread: the thread's own row, where
        # one OS thread of the process has that thread number
        tids = th.groupby(["run", "process", "thread"], observed=True)["os_tid"].agg(["nunique", "first"])
        tids = tids[tids["nunique"] == 1]["first"]
        at = owned.join(tids.rename("owner"), on=["run", "process", "thread"], how="inner")
        if len(at):
            th = pd.concat([th, at.assign(os_tid=at["owner"]).drop(columns="owner")], ignore_index=True)
    th = th.sort_values(["run", "process", "os_tid", "t_ns"], kind="stable")
    if not len(th):
        return pd.DataFrame(columns=cols)
    th = th.assign(balance=th["allocated"] - th["freed"])
    g = th.groupby(["run", "process", "os_tid"], observed=True, sort=False)
    th = th.assign(up=(g["balance"].diff() > 0).astype(np.int64))
    per_tid = g.agg(thread=("thread", "last"), first=("balance", "first"), last=("balance", "last"))
    per_tid["rises"] = th.groupby(["run", "process", "os_tid"], observed=True, sort=False)["up"].sum()
    per_tid["retained"] = per_tid["last"] - per_tid["first"]
    # what a thread freed of the balance it had at its first record (blocks it took before it
    # recorded): the process's heap falls by it, whoever leaks meanwhile
    per_tid["released"] = np.maximum(0, np.minimum(per_tid["first"], -per_tid["retained"]))
    out = per_tid.reset_index().groupby(key, observed=True, sort=False).agg(
        retained=("retained", "sum"), rises=("rises", "sum"), released=("released", "sum")).reset_index()
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
    # the process's growth, less what its other threads freed of their own first balances
    # (GraphicsMagick's master freed 25 MiB it took before its first record while a worker
    # leaked 45 MiB: the heap grew 22.6 MiB, under half the leak, and the leak was called
    # normal); a thread that frees others' blocks (a pipeline's consumer) frees none of its own
    released = out.groupby(["run", "process"], observed=True)["released"].transform("sum") - out["released"]
    out["process_growth"] = [growth.get(k, np.nan) for k in keys] + released.to_numpy(np.float64)
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


#: unit-work histogram keys: window, construct, bin (bins: log2 of the ns, 1/16 octave)
_BIN_BITS, _LABEL_BITS = 10, 20

#: kinds of construct whose every instance each thread of the team ends with a beat of its
#: own, whatever its share of the work: the end of its part of a region, of a single, of a
#: barrier, of a sections construct it took no section of (docs/formats.md)
_EVERY_THREAD = ("parallel ", "single ", "barrier ")


def share_weight(label: str) -> int:
    """How many units of the team's shared work a unit of this construct holds, for the share
    shift: a dynamic loop's chunk or a task 1 (each goes to one thread), a sections beat the
    sections its thread was given ("sections f+0x10 #1,3": 2), the program's own or an MPI
    beat 1; 0 for the beats every thread makes once per instance of their construct (a
    region's end, a single's, a barrier's, and a sections construct's where the tracer did
    not say which sections the thread took): their count is the team's, not the thread's;
    0 for an unshared task: its maker ran it, no teammate took it, and a teammate idle beside
    it had nothing to take (kalign's recursion down a chain of its guide tree, thread 0 alone
    at work while its teammate waits in the region's closing barrier)."""
    if label.startswith(_EVERY_THREAD) or label.endswith(UNSHARED):
        return 0
    if label.startswith("sections "):
        return sections_named(label)[1]
    return 1


class _UnitHistograms:
    """One thread's units of work (the time from one beat to the next, less its recorded waits:
    the work clock's step), per window of its beats and construct (the one the unit's closing
    beat names; the program's own beats are one construct), as histograms of log-spaced bins
    (config.SHIFT_BINS_PER_OCTAVE): what the medians need, in memory that does not grow with
    the thread's beats. Fed in consecutive pieces of its beats, in time order."""

    def __init__(self, edges: np.ndarray, by_time: bool = False):
        self.edges = edges
        # by_time: the edges are times (ns), the same for the whole team, and a unit belongs to
        # the window its end falls in (a team whose threads made different numbers of beats)
        self.by_time = by_time
        self.edge_beat = np.zeros(edges.size, dtype=np.int64)   # by time: the beats before each edge
        self.labels: dict[str, int] = {}
        self.counts: dict[int, int] = {}
        self.shares = np.zeros(edges.size - 1, dtype=np.float64)   # share_weight of its units per window
        self.work: dict[int, float] = {}       # per construct: the sum of its units (ns)
        self.shared_work = np.zeros(edges.size - 1, dtype=np.float64)   # its units of shared work, ns
        # by time: the same two in config.SHARE_FINE_BINS parts of each window (_share_groups)
        fine = (edges.size - 1) * config.SHARE_FINE_BINS
        self.fine_edges = np.linspace(edges[0], edges[-1], fine + 1) if by_time and edges.size > 1 else None
        self.fine_shares = np.zeros(fine if self.fine_edges is not None else 0, dtype=np.float64)
        self.fine_work = np.zeros_like(self.fine_shares)
        self.edge_t = np.zeros(edges.size, dtype=np.int64)   # windows of beats: the time at each edge
        self.cpu_counts: dict[int, int] = {}   # the same of the units whose CPU time is known, in it
        # every unit less the time its thread was away at its end (tail_away); None while no
        # unit had any (then the same as counts)
        self.own_counts: dict[int, int] | None = None
        self.cover: dict[int, list] = {}       # per construct: [units, units with their CPU time]
        # per (window, construct) of the units measured per iteration: their time (ns), which
        # their bins (per iteration) do not give
        self.iter_work: dict[int, float] = {}
        self.iterations: dict[int, int] = {}   # per construct measured per iteration: its iterations
        self.first_span: dict[int, tuple] = {}   # per loop measured per iteration: its chunks' lowest
        #                                          and highest first iteration
        # the units of chunks measured per iteration that show the thread's own pace (_pace,
        # pace_bins)
        self.pace_counts: dict[int, int] = {}
        self.pace_chunks: dict[int, int] = {}   # ... and how many they are, per loop
        self.pace_iterations: dict[int, int] = {}   # ... and their iterations per window and loop
        self.at = 0            # beats seen
        self.clock = None      # the work clock at the last beat seen
        self.last = (-1, 0, None)   # the last beat seen: its construct code, iterations, time
        self.edge_clock = np.zeros(edges.size, dtype=np.int64)   # the work clock at each window edge

    def add(self, clock: np.ndarray, labels, cpu: np.ndarray | None = None, t: np.ndarray | None = None,
            away: np.ndarray | None = None, iterations: np.ndarray | None = None,
            firsts: np.ndarray | None = None) -> None:
        """clock: the work clock (ns) at each beat of the next piece; labels: each one's construct;
        cpu: the CPU time (ns) of the unit each one closes, -1 where the trace has none; t: the
        beats' times (windows by time); away: the time the thread was away (off a CPU, not
        waiting for one) at the end of the unit each one closes, 0 where unknown (tail_away);
        iterations: the loop chunk each one closes, its count of iterations (0: not a chunk, or
        not known); firsts: that chunk's first iteration. A unit of a chunk whose iterations are
        known is measured per iteration (PER_ITERATION): a guided loop's first chunk holds half
        the loop, its last one iteration, and which thread took which is the runtime's choice;
        the lowest and highest first iteration of each such loop are kept (first_span)."""
        n = clock.size
        if not n:
            return
        if self.by_time:
            self.edge_beat += np.searchsorted(t, self.edges, side="left")
        else:
            at = (self.edges >= self.at) & (self.edges < self.at + n)
            self.edge_clock[at] = clock[self.edges[at] - self.at]
            if t is not None:
                self.edge_t[at] = t[self.edges[at] - self.at]
        first = 0 if self.clock is not None else 1   # the thread's first beat closes no unit
        steps = np.diff(clock) if self.clock is None else np.diff(np.r_[self.clock, clock])
        ending = self.at + np.arange(first, n)      # the beat index closing each unit
        self.at += n
        self.clock = clock[-1]
        if self.by_time:
            window = np.clip(np.searchsorted(self.edges, t[first:], side="right") - 1, 0, self.edges.size - 2)
        else:
            window = np.searchsorted(self.edges, ending, side="left") - 1
        cat = labels if isinstance(labels, pd.Categorical) else pd.Categorical(np.asarray(labels, dtype=object))
        # (a missing label, code -1, is the program's own: "")
        idx = np.array([self.labels.setdefault(str(x), len(self.labels)) for x in [*cat.categories, ""]],
                       dtype=np.int64)
        of = np.asarray(cat.codes[first:], dtype=np.int64)
        code = np.minimum(idx[of], (1 << _LABEL_BITS) - 1)
        known = np.zeros(steps.size, dtype=bool) if cpu is None else np.asarray(cpu, dtype=np.int64)[first:] >= 0
        gone = np.zeros(steps.size, dtype=np.int64) if away is None else np.asarray(away, dtype=np.int64)[first:]
        # the units of chunks of known iterations: per iteration, under a construct of their own
        every = np.zeros(n, dtype=np.int64) if iterations is None else np.asarray(iterations, dtype=np.int64)
        per = every[first:]
        raw = steps
        paced = self._pace(np.minimum(idx[np.asarray(cat.codes, dtype=np.int64)], (1 << _LABEL_BITS) - 1),
                           every, first, steps, t)
        if not steps.size:   # (a first piece of one beat: the thread's last beat kept, no unit)
            return
        if (per > 0).any():
            cpu = None if cpu is None else np.asarray(cpu, dtype=np.int64).copy()
            code, steps, gone = code.copy(), steps.astype(np.int64), gone.copy()
            m = per > 0
            names = {i: name for name, i in self.labels.items()}
            f = None if firsts is None else np.asarray(firsts, dtype=np.int64)[first:]
            for c in np.unique(code[m]).tolist():
                at = m & (code == c)
                c2 = min(self.labels.setdefault(names.get(c, "") + PER_ITERATION, len(self.labels)),
                         (1 << _LABEL_BITS) - 1)
                code[at] = c2
                if f is not None:   # the lowest and highest first iteration of the loop's chunks
                    lo, hi = int(f[at].min()), int(f[at].max())
                    was = self.first_span.get(c2, (lo, hi))
                    self.first_span[c2] = (min(was[0], lo), max(was[1], hi))
            steps[m] = _per_iteration(steps[m], per[m])
            u, inv = np.unique(code[m], return_inverse=True)
            for c, n in zip(u.tolist(), np.bincount(inv, weights=per[m].astype(np.float64)).tolist()):
                self.iterations[c] = self.iterations.get(c, 0) + int(n)
            g, inv = np.unique((window[m].astype(np.int64) << _LABEL_BITS) | code[m], return_inverse=True)
            for k, w in zip(g.tolist(), np.bincount(inv, weights=raw[m].astype(np.float64)).tolist()):
                self.iter_work[k] = self.iter_work.get(k, 0.0) + w
            gone[m] = _per_iteration(gone[m], per[m])
            if paced.any():
                # a chunk counts in every window it ran in (by time: from its end less its
                # work), beside the chunks its teammates ran there
                end = window[paced].astype(np.int64)
                start = end if not self.by_time else np.clip(
                    np.searchsorted(self.edges, np.asarray(t, dtype=np.int64)[first:][paced] - raw[paced],
                                    side="right") - 1, 0, end)
                span = end - start + 1
                each = np.arange(int(span.sum())) - np.repeat(np.cumsum(span) - span, span)
                _count(self.pace_counts, np.repeat(start, span) + each, np.repeat(code[paced], span),
                       np.repeat(steps[paced], span))
                g, inv = np.unique(((np.repeat(start, span) + each) << _LABEL_BITS) | np.repeat(code[paced], span),
                                   return_inverse=True)
                for k, i in zip(g.tolist(), np.bincount(inv, weights=np.repeat(per[paced], span)).tolist()):
                    self.pace_iterations[k] = self.pace_iterations.get(k, 0) + int(i)
                for c, k in zip(*np.unique(code[paced], return_counts=True)):
                    self.pace_chunks[int(c)] = self.pace_chunks.get(int(c), 0) + int(k)
            if cpu is not None:
                c = cpu[first:]
                c[m & (c >= 0)] = _per_iteration(c[m & (c >= 0)], per[m & (c >= 0)])
        ended = gone > 0
        if ended.any() and self.own_counts is None:
            self.own_counts = dict(self.counts)
        _count(self.counts, window, code, steps)
        weight = np.array([share_weight(str(x)) for x in [*cat.categories, ""]], dtype=np.float64)
        self.shares += np.bincount(window, weights=weight[of], minlength=self.shares.size)[:self.shares.size]
        self.shared_work += np.bincount(window, weights=np.where(weight[of] > 0, raw, 0).astype(np.float64),
                                        minlength=self.shares.size)[:self.shares.size]
        if self.fine_edges is not None:
            fine = np.clip(np.searchsorted(self.fine_edges, t[first:], side="right") - 1, 0, self.fine_shares.size - 1)
            self.fine_shares += np.bincount(fine, weights=weight[of], minlength=self.fine_shares.size)
            self.fine_work += np.bincount(fine, weights=np.where(weight[of] > 0, raw, 0).astype(np.float64),
                                          minlength=self.fine_shares.size)
        if known.any():
            _count(self.cpu_counts, window[known], code[known], np.asarray(cpu, dtype=np.int64)[first:][known])
        if ended.any():
            # the unit's wall time (less its waits) but the time it was away at its end
            _count(self.own_counts, window, code, np.maximum(steps - gone, 0))
        elif self.own_counts is not None:
            _count(self.own_counts, window, code, steps)
        u, inv = np.unique(code, return_inverse=True)
        for c, n, m, w in zip(u.tolist(), np.bincount(inv).tolist(), np.bincount(inv, weights=known).tolist(),
                              np.bincount(inv, weights=raw.astype(np.float64)).tolist()):
            e = self.cover.setdefault(c, [0, 0])
            e[0] += n
            e[1] += int(m)
            self.work[c] = self.work.get(c, 0.0) + w

    def _pace(self, code: np.ndarray, iterations: np.ndarray, first: int, steps: np.ndarray,
              t: np.ndarray | None) -> np.ndarray:
        """Of the units a piece's beats close (code, iterations: of every beat of the piece;
        `first`: 1 where its first beat is the thread's first; steps: the units), those of loop
        chunks that show the thread's own pace: the chunks that went on from its chunk before of
        the same loop with no wait between, and the others that took
        config.ITERATION_RATIO_FIRST_CHUNK_NS at least. A thread's first chunk of a loop's
        instance starts as it comes back from a wait, or from other work: it also holds the
        thread's waking and the runtime's hand-over (a thread stopped early in a run of short
        chunks has no other chunks than those)."""
        c0, i0, t0 = self.last
        if first:
            prev_code, prev_iter = code[:-1], iterations[:-1]
        else:
            prev_code, prev_iter = np.r_[c0, code[:-1]], np.r_[i0, iterations[:-1]]
        onward = (prev_iter > 0) & (prev_code == code[first:])
        if t is not None:
            t = np.asarray(t, dtype=np.int64)
            wall = np.diff(t) if first or t0 is None else np.diff(np.r_[t0, t])
            onward &= wall <= steps   # no wait taken out of the unit
        self.last = (int(code[-1]), int(iterations[-1]), None if t is None else int(t[-1]))
        return (iterations[first:] > 0) & (onward | (steps >= config.ITERATION_RATIO_FIRST_CHUNK_NS))

    def construct_medians(self) -> dict[str, tuple]:
        """Per construct: the median of the thread's units of it over its whole run (ns, a
        bin's middle, on the log scale: within 2 %) and how many units it had; for a loop
        measured per iteration (ps per iteration) also its mean iterations per chunk."""
        if not self.counts:
            return {}
        keys = np.fromiter(self.counts.keys(), dtype=np.int64, count=len(self.counts))
        counts = np.fromiter(self.counts.values(), dtype=np.int64, count=len(self.counts))
        code = (keys >> _BIN_BITS) & ((1 << _LABEL_BITS) - 1)
        pooled = (code << _BIN_BITS) | (keys & ((1 << _BIN_BITS) - 1))   # windows pooled
        u, inv = np.unique(pooled, return_inverse=True)
        n = np.bincount(inv, weights=counts).astype(np.int64)
        group = u >> _BIN_BITS
        starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
        total = np.add.reduceat(n, starts)
        cum = np.cumsum(n)
        before = np.r_[0, cum[:-1]][starts]
        pos = np.searchsorted(cum, before + (total + 1) // 2, side="left")
        names = {i: name for name, i in self.labels.items()}
        mid = _bin_middle(u)
        # a loop measured per iteration: also its iterations per chunk, what its work is
        return {names.get(int(g), ""): (float(mid[p]), int(t)) + ((self.iterations[int(g)] / int(t),)
                                                                  if int(g) in self.iterations else ())
                for g, p, t in zip(group[starts], pos, total)}

    def pace_bins(self) -> dict[str, tuple]:
        """Per loop measured per iteration: its chunks that show the thread's own pace (_pace)
        as (window, key, count) arrays, each chunk in every window it ran in (keys of _count:
        the bin in the low bits), how many chunks they are, and their iterations per window."""
        if not self.pace_counts:
            return {}
        keys = np.fromiter(self.pace_counts.keys(), dtype=np.int64, count=len(self.pace_counts))
        counts = np.fromiter(self.pace_counts.values(), dtype=np.int64, count=len(self.pace_counts))
        code = (keys >> _BIN_BITS) & ((1 << _LABEL_BITS) - 1)
        names = {i: n for n, i in self.labels.items()}
        iterations: dict[int, dict] = {}
        for k, n in self.pace_iterations.items():
            iterations.setdefault(k & ((1 << _LABEL_BITS) - 1), {})[k >> _LABEL_BITS] = n
        return {names.get(int(c), ""): (keys[code == c] >> (_LABEL_BITS + _BIN_BITS), keys[code == c],
                                        counts[code == c], self.pace_chunks[int(c)], iterations.get(int(c), {}))
                for c in np.unique(code).tolist()}

    def first_spans(self) -> dict[str, tuple[int, int]]:
        """Per loop measured per iteration: the lowest and highest first iteration of the
        thread's chunks of it."""
        names = {i: n for n, i in self.labels.items()}
        return {names.get(c, ""): v for c, v in self.first_span.items()}

    def cpu_share(self) -> dict[str, float]:
        """Per construct: the share of its units whose CPU time the trace has."""
        names = {i: n for n, i in self.labels.items()}
        return {names.get(c, ""): m / n for c, (n, m) in self.cover.items() if n}

    def construct_work(self) -> dict[str, float]:
        """Per construct: the sum of the thread's units of it (ns)."""
        names = {i: n for n, i in self.labels.items()}
        return {names.get(c, ""): w for c, w in self.work.items()}

    def window_shares(self) -> np.ndarray:
        """The thread's units of the team's shared work in each window (share_weight)."""
        return self.shares

    def window_busy(self) -> np.ndarray:
        """The share of each window the thread spent in units of shared work (share_weight)."""
        span = np.diff(self.edges if self.by_time else self.edge_t).astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(span > 0, self.shared_work / span, np.nan)

    def window_counts(self) -> np.ndarray:
        """The thread's units of work in each window."""
        out = np.zeros(self.edges.size - 1, dtype=np.int64)
        for key, n in self.counts.items():
            out[key >> (_LABEL_BITS + _BIN_BITS)] += n
        return out

    def window_work(self) -> np.ndarray:
        """The thread's work (ns) in each window: the work clock's step from edge to edge."""
        return np.diff(self.edge_clock).astype(np.float64)

    def _index(self, group: np.ndarray) -> pd.MultiIndex:
        """The (window, construct) index of histogram groups (keys without their bin)."""
        names = {i: n for n, i in self.labels.items()}
        return pd.MultiIndex.from_arrays([group >> _LABEL_BITS,
                                          [names.get(int(c), "") for c in (group & ((1 << _LABEL_BITS) - 1))]],
                                         names=["window", "construct"])

    def window_construct_work(self) -> pd.Series:
        """The sum of the thread's units (ns) per (window, construct), from the bins (a bin's
        middle, on the log scale: within 2 %), or, for the units measured per iteration, their
        own time."""
        if not self.counts:
            return pd.Series(dtype=np.float64, index=pd.MultiIndex.from_arrays([[], []], names=["window", "construct"]))
        keys = np.fromiter(self.counts.keys(), dtype=np.int64, count=len(self.counts))
        counts = np.fromiter(self.counts.values(), dtype=np.float64, count=len(self.counts))
        group, inv = np.unique(keys >> _BIN_BITS, return_inverse=True)
        work = np.bincount(inv, weights=counts * _bin_middle(keys))
        if self.iter_work:   # the units measured per iteration: their own time
            work = np.array([self.iter_work.get(int(g), w) for g, w in zip(group.tolist(), work.tolist())])
        return pd.Series(work, index=self._index(group))

    def medians(self, cpu: bool | None = False) -> pd.Series:
        """The unit (ns) per (window, construct) that holds the thread's work there: the median of
        its units weighted by their length, each weighing at most the group's unit at the
        config.SHIFT_UNIT_CAP quantile (docs/methods.md, "A construct's unit"), from the bins (a
        bin's middle, on the log scale); `cpu`: of the units whose CPU time is known, in CPU
        time; `cpu=None`: every unit less the time its thread was away at its end (tail_away).
        Windows by time: only
        where the thread has config.SHIFT_MIN_BEATS units of the construct at least (a window of
        beats holds that many by its making)."""
        table = (self.counts if self.own_counts is None else self.own_counts) if cpu is None \
            else self.cpu_counts if cpu else self.counts
        if not table:
            return pd.Series(dtype=np.float64, index=pd.MultiIndex.from_arrays([[], []], names=["window", "construct"]))
        keys = np.fromiter(table.keys(), dtype=np.int64, count=len(table))
        counts = np.fromiter(table.values(), dtype=np.int64, count=len(table))
        o = np.argsort(keys, kind="stable")
        keys, counts = keys[o], counts[o]
        group = keys >> _BIN_BITS
        starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
        cum = np.cumsum(counts)
        before = np.r_[0, cum[:-1]][starts]
        total = np.add.reduceat(counts, starts)
        mid = _bin_middle(keys)
        # a unit weighs its length, at most the group's unit at config.SHIFT_UNIT_CAP
        cap = np.searchsorted(cum, before + np.ceil(config.SHIFT_UNIT_CAP * total).astype(np.int64), side="left")
        weight = counts * np.minimum(mid, np.repeat(mid[cap], np.diff(np.r_[starts, keys.size])))
        cw = np.cumsum(weight)
        # the first bin of each group whose weight so far reaches half the group's
        pos = np.searchsorted(cw, np.r_[0.0, cw[:-1]][starts] + 0.5 * np.add.reduceat(weight, starts), side="left")
        pos = np.minimum(pos, np.r_[starts[1:], keys.size] - 1)
        value = mid[pos]
        g = group[starts]
        if self.by_time:
            enough = total >= config.SHIFT_MIN_BEATS
            g, value = g[enough], value[enough]
        return pd.Series(value, index=self._index(g))


def _per_iteration(ns: np.ndarray, iterations: np.ndarray) -> np.ndarray:
    """Units (ns) of chunks of so many iterations, per iteration, in picoseconds."""
    return np.rint(ns.astype(np.float64) * 1000.0 / iterations).astype(np.int64)


def _bin_middle(keys: np.ndarray) -> np.ndarray:
    """The unit (ns) in the middle of each key's bin, on the log scale (_count's bins)."""
    return 2.0 ** (((keys & ((1 << _BIN_BITS) - 1)) + 0.5) / config.SHIFT_BINS_PER_OCTAVE)


def _count(table: dict, window: np.ndarray, code: np.ndarray, values: np.ndarray) -> None:
    """Add units (ns) to a histogram table of _UnitHistograms, by window and construct code."""
    bins = np.floor(np.log2(np.maximum(values, 1).astype(np.float64)) * config.SHIFT_BINS_PER_OCTAVE)
    bins = np.clip(bins, 0, (1 << _BIN_BITS) - 1).astype(np.int64)
    keys, counts = np.unique((window.astype(np.int64) << (_LABEL_BITS + _BIN_BITS)) | (code << _BIN_BITS) | bins,
                             return_counts=True)
    for k, c in zip(keys.tolist(), counts.tolist()):
        table[k] = table.get(k, 0) + c


def cpu_record_arrays(table: pd.DataFrame | None) -> tuple:
    """One thread's cpu records (t_ns, gap_ns, cpu_ns, queued_ns: -1 unknown), sorted by time."""
    if table is None or not len(table):
        return tuple(np.empty(0, np.int64) for _ in range(4))
    t = table["t_ns"].to_numpy(np.int64)
    o = np.argsort(t, kind="stable")
    queued = table["queued_ns"].to_numpy(np.int64)[o] if "queued_ns" in table else np.full(t.size, -1, np.int64)
    return t[o], table["gap_ns"].to_numpy(np.int64)[o], table["cpu_ns"].to_numpy(np.int64)[o], queued


def unit_cpu(t_ns: np.ndarray, before: int | None, cpu: tuple) -> np.ndarray:
    """Per beat (times sorted; `before`: the thread's beat before them, None for its first): the
    CPU time (ns) the thread used in the unit of work the beat closes, -1 where the trace does not
    have it. The tracer writes a cpu record with the record that ends a gap of 2 ms or more
    since the thread's last record (HBT_REC_CPU): a unit's when it was written with the beat and
    its gap is the whole unit (no wait or other record inside)."""
    out = np.full(t_ns.size, -1, dtype=np.int64)
    ct, gap, used = cpu[:3]
    if not ct.size or not t_ns.size:
        return out
    i = np.minimum(np.searchsorted(ct, t_ns), ct.size - 1)
    interval = np.diff(np.r_[t_ns[0] if before is None else before, t_ns])
    ok = (ct[i] == t_ns) & (np.abs(gap[i] - interval) <= config.SHIFT_CPU_SLACK_NS)
    if before is None:
        ok[0] = False
    out[ok] = used[i[ok]]
    return out


def tail_away(t_ns: np.ndarray, before: int | None, cpu: tuple, wait_end: np.ndarray) -> np.ndarray:
    """Per beat (times sorted; `before`: the thread's beat before them, None for its first;
    `wait_end`: the ends of the thread's recorded waits, sorted, at least those since `before`):
    the time (ns) the thread was away -- neither on a CPU nor waiting for one -- at the end of
    the unit of work the beat closes, from the cpu record written with it (a gap of 2 ms or
    more since the thread's last record, the tracer's HBT_REC_CPU, with its run-queue delay)
    where that gap starts after the unit's last wait; 0 where the trace does not say. Such a
    stretch is no work of the thread's: it blocked where the tracer saw no wait, or the host
    took the VM's CPU (NPB LU at 4 threads: 4 ms of a unit of 9 us, 7 us of CPU time, none
    queued). Time waiting for a CPU is the team's sharing of the machine, as in a unit too
    short for a cpu record, and stays (NPB FT at 4 threads on 2 CPUs: a slowed victim's units
    of 2 ms, half of it queued, against its teammates' of 0.8 ms in wall time)."""
    away = np.zeros(t_ns.size, dtype=np.int64)
    ct, gap, spent, queued = cpu
    if not ct.size or not t_ns.size:
        return away
    i = np.minimum(np.searchsorted(ct, t_ns), ct.size - 1)
    start = np.r_[t_ns[0] if before is None else before, t_ns[:-1]]
    if wait_end.size:
        j = np.searchsorted(wait_end, t_ns, side="right") - 1   # the last wait ended by the beat
        start = np.maximum(start, np.where(j >= 0, wait_end[np.maximum(j, 0)], start))
    ok = (ct[i] == t_ns) & (t_ns - gap[i] >= start - config.SHIFT_CPU_SLACK_NS) & (gap[i] > 0) & (queued[i] >= 0)
    if before is None:
        ok[0] = False
    j = i[ok]
    away[ok] = np.clip(gap[j] - spent[j] - queued[j], 0, gap[j])
    return away


def _units_eager(t_ns: np.ndarray, labels, waits: tuple, edges: np.ndarray, cpu: tuple | None = None,
                 by_time: bool = False, iterations: np.ndarray | None = None,
                 firsts: np.ndarray | None = None) -> _UnitHistograms:
    """_UnitHistograms of one thread held whole (beat times sorted, their constructs, its
    waits sorted by end, its cpu records: cpu_record_arrays; each beat's loop chunk
    iterations, 0 for none, and first iteration)."""
    h = _UnitHistograms(edges, by_time)
    h.add(work_clock(t_ns, *waits), labels, None if cpu is None else unit_cpu(t_ns, None, cpu), t_ns,
          None if cpu is None else tail_away(t_ns, None, cpu, waits[1]), iterations, firsts)
    return h


def _units_streamed(trace: StreamedTrace, key: tuple, edges: np.ndarray, cpu: tuple,
                    by_time: bool = False) -> _UnitHistograms:
    """_UnitHistograms of one thread of a streamed trace, its beats and waits read in
    pieces, neither held whole: the waits are taken in as the beats reach them (a thread's
    waits come in time order, as its beats do; when either does not, the thread is read
    whole and sorted)."""
    h = _UnitHistograms(edges, by_time)
    waits = iter(trace.thread_wait_pieces(key))
    s_buf, e_buf = np.empty(0, np.int64), np.empty(0, np.int64)
    base, last_wait, last_beat, more = 0, None, None, True
    for t, ids, iterations, firsts in trace.thread_beat_pieces(key, iterations=True):
        if not t.size:
            continue
        if (last_beat is not None and t[0] < last_beat) or (t.size > 1 and (np.diff(t) < 0).any()):
            return _units_whole(trace, key, edges, cpu, by_time)
        while more and (not e_buf.size or e_buf[-1] <= t[-1]):
            try:
                end, length, _ = next(waits)
            except StopIteration:
                more = False
                break
            end = np.asarray(end, dtype=np.int64)
            if not end.size:
                continue
            o = np.argsort(end, kind="stable")
            end, start = end[o], (end - np.asarray(length, dtype=np.int64))[o]
            if last_wait is not None and end[0] < last_wait:
                return _units_whole(trace, key, edges, cpu, by_time)
            last_wait = end[-1]
            s_buf, e_buf = np.r_[s_buf, start], np.r_[e_buf, end]
        away = tail_away(t, last_beat, cpu, e_buf)
        done = np.searchsorted(e_buf, t[0], side="right")   # waits over before this piece: summed
        base += int((e_buf[:done] - s_buf[:done]).sum())
        s_buf, e_buf = s_buf[done:], e_buf[done:]
        h.add(work_clock(t, s_buf, e_buf) - base, trace.construct_labels(key, ids), unit_cpu(t, last_beat, cpu), t,
              away, iterations, firsts)
        last_beat = t[-1]
    return h



def _units_whole(trace: StreamedTrace, key: tuple, edges: np.ndarray, cpu: tuple, by_time: bool = False) -> _UnitHistograms:
    """_units_streamed of a thread whose beats or waits are not in time order: read whole."""
    t, labels = trace.thread_beats(key)
    o = np.argsort(t, kind="stable")
    w = trace.thread_waits(key)
    end = w["t_ns"].to_numpy(np.int64)
    ow = np.argsort(end, kind="stable")
    iterations, firsts = trace.thread_iterations(key)
    return _units_eager(t[o], labels[o], ((end - w["wait_ns"].to_numpy(np.int64))[ow], end[ow]), edges, cpu, by_time,
                        iterations[o], firsts[o])


def _same_units(counts: dict[tuple, int]) -> dict[tuple, np.ndarray] | None:
    """Each thread's window edges when the team's threads made as many beats each, as OpenMP's
    static loops and constructs make them (beat i of every thread ends the same unit of work),
    or nearly (config.SHIFT_SAME_BEATS: a static loop whose iterations do not divide evenly
    among the threads): the k-th window of every thread then holds the same units. Else None:
    a dynamic loop's chunks go to whoever is free (a slow thread takes fewer); work_shifts
    then cuts the team's time into windows instead (docs/methods.md, "WS")."""
    n = list(counts.values())
    if len(n) < 2 or max(n) > config.SHIFT_SAME_BEATS * min(n) or _window_edges(min(n)) is None:
        return None
    edges = {k: _window_edges(c) for k, c in counts.items()}
    if len({len(e) for e in edges.values()}) != 1:
        return None
    return edges


def _shift_series(mine: pd.Series, others: pd.Series, by_time: bool = False, main: frozenset = frozenset(),
                  raw_out: list | None = None) -> pd.Series:
    """Per window: the median over constructs of how much longer the thread's units took than
    its teammates' (log of the ratio of medians), each construct's ratio taken relative to its
    own usual ratio over the run (a construct that is always lopsided, such as a loop whose
    iterations do not divide evenly, or one the master does alone, is not a shift), among the
    constructs whose units are work (config.SHIFT_UNIT_FLOOR_NS) and that the run keeps
    coming back to (config.SHIFT_CONSTRUCT_SHARE: not its set-up's, whose one window would
    hold its own usual ratio). `by_time` (windows of the team's time, threads of different
    numbers of beats: a dynamic loop's chunks, drawn from one pool): the raw ratio, of the
    constructs in two windows at least (a construct runs in its phase of the run, and its
    usual ratio would be the slowed one where the phase is mostly after a fault). `main`: the
    constructs that hold most of the team's work (config.SHIFT_MAIN_WORK), compared however
    few windows their beats fill. `raw_out`: a list the raw ratios of those constructs, by
    window and construct, are appended to (_raw_shift)."""
    both = pd.concat([mine.rename("mine"), others.rename("others")], axis=1, join="inner")
    if not len(both):
        return pd.Series(dtype=np.float64)
    floor = config.SHIFT_UNIT_FLOOR_NS
    both["r"] = np.log(np.maximum(both["mine"], floor) / np.maximum(both["others"], floor))
    by = both.groupby(level="construct", sort=False)
    windows = both.index.get_level_values("window").nunique()
    common = by["r"].transform("size") >= (2 if by_time else config.SHIFT_CONSTRUCT_SHARE * windows)
    if main:
        common |= both.index.get_level_values("construct").isin(main)
    # work for the thread and for its teammates alike: a slowed thread's sub-floor units grown
    # past the floor are not work that its teammates do too
    work = (np.minimum(by["mine"].transform("median"), by["others"].transform("median")) >= floor) & common
    d = (both["r"] if by_time else both["r"] - by["r"].transform("median"))[work]
    if raw_out is not None:
        raw_out.append(both["r"][work])
    return d.groupby(level="window").median().sort_index()


def _raw_shift(raw: pd.Series) -> tuple[float, int] | None:
    """The work shift of a thread's raw ratios (log, by window and construct: _shift_series),
    each construct's not taken against its usual one: shift_segment of their median per window,
    when a construct the split cuts through shifts across it by half that much or more, its
    windows after against its windows before: (shift, the later part's first window), else None. A construct a phase of the run holds
    alone is measured raw: against its own usual ratio it hides a slowdown from before the
    phase (MUSCLE 5: a light phase of 1 % of the work, its beats 13 windows of 20, all after a
    thread was slowed; against its usual ratio, 0). One that is lopsided by design (the master
    alone in a late phase) shifts the raw series too, but no construct of both sides does."""
    if raw is None or not len(raw):
        return None
    v = raw.groupby(level="window").median().sort_index()
    if v.size < 6:
        return None
    shift, at, end = shift_segment(v.to_numpy())
    step = np.log(shift)
    if abs(step) < 1e-9:
        return None
    split = int(v.index[at])
    stop = int(v.index[end]) if end < v.size else np.inf
    for _, r in raw.groupby(level="construct"):
        ww = r.index.get_level_values("window").to_numpy()
        inside = (ww >= split) & (ww < stop)
        before, after = r.to_numpy()[~inside], r.to_numpy()[inside]
        if before.size and after.size and (np.median(after) - np.median(before)) * np.sign(step) >= 0.5 * abs(step):
            return shift, split
    return None


def _others(table: pd.DataFrame | np.ndarray, i: int, whole):
    """The median of a team's other threads (columns of table but the i-th), or of the whole
    team in a big one (`whole`: one thread barely moves it, and it costs one median, not one
    per thread)."""
    if whole is not None:
        return whole
    if isinstance(table, pd.DataFrame):
        return table.drop(columns=table.columns[i]).median(axis=1)
    return np.median(np.delete(table, i, axis=0), axis=0)


def _team_medians(units: dict) -> dict:
    """Each thread's medians per window and construct: in CPU time for the constructs whose
    units' CPU time the trace has (config.SHIFT_CPU_COVER of them, in every thread that runs
    them), in wall time less the recorded waits and the time the thread was away at the unit's
    end (tail_away) for the others. A unit's CPU time is the
    thread's own work, whatever share of a CPU the machine gave it (more threads than cores,
    other programs): a slowed thread's units grow by its slowdown, its teammates' not at all,
    where their wall time mixes in how the machine shared its CPUs among them."""
    share: dict[str, float] = {}
    for u in units.values():
        for c, v in u.cpu_share().items():
            share[c] = min(share.get(c, 1.0), v)
    in_cpu = {c for c, v in share.items() if v >= config.SHIFT_CPU_COVER}
    out = {}
    for k, u in units.items():
        m = u.medians(cpu=None)
        if in_cpu:
            keep = ~m.index.get_level_values("construct").isin(in_cpu)
            c = u.medians(cpu=True)
            c = c[c.index.get_level_values("construct").isin(in_cpu)]
            m = pd.concat([m[keep], c]).sort_index()
        out[k] = m
    return _sections_as_one(out)


def _sections_as_one(med: dict) -> dict:
    """Each thread's medians with the units of a sections construct taken as one construct,
    whatever sections they held: a unit named with its sections ("sections f+0x10 #1,3", the
    tracer says which a thread ran) is measured against the usual length of units of those
    sections over the team and the run (the median of every thread's medians of that name),
    scaled back to the construct's (the median of its names' usual lengths), and a thread's
    window holds the median of its units of the construct so measured. Sections differ in
    length and go to whichever thread asks first: a slowed thread comes late and takes the
    short ones, so that no teammate ran the same sections after its fault. A beat where the
    thread ran none of the sections closes no unit of the construct's work: left out."""
    names = set()
    for m in med.values():
        names.update(m.index.get_level_values("construct").unique().tolist())
    held = {x: sections_named(x)[0] for x in names if sections_named(x)[1]}
    if not held:
        return med
    pooled = pd.concat(list(med.values()))
    usual = pooled[pooled.index.get_level_values("construct").isin(list(held))].groupby(level="construct").median()
    scale = usual.groupby(by=lambda x: held[x]).median()
    out = {}
    for k, m in med.items():
        name = m.index.get_level_values("construct")
        mine = name.isin(list(held))
        none = name.isin(list(scale.index))   # the construct's name alone: no section ran
        if not (mine.any() or none.any()):
            out[k] = m
            continue
        v = m[mine]
        base = [held[x] for x in name[mine]]
        value = v.to_numpy() / usual.reindex(name[mine]).to_numpy() * scale.reindex(base).to_numpy()
        one = pd.Series(value, index=pd.MultiIndex.from_arrays([v.index.get_level_values("window"), base],
                                                               names=["window", "construct"]))
        out[k] = pd.concat([m[~mine & ~none], one.groupby(level=["window", "construct"]).median()]).sort_index()
    return out


def sched_shares(sched: pd.DataFrame, team: list[tuple], edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per thread of `team` (rows) and window between `edges` (ns; columns): the share of the
    window the thread was runnable, waiting for a CPU (its run-queue delay), and the share it
    ran, from the tracer's sched records (each span's figures spread evenly over it); NaN
    where its spans cover less than half the window (no records: another tracer, or a thread
    that did not record)."""
    out = np.full((len(team), edges.size - 1), np.nan)
    ran = out.copy()
    if not len(sched):
        return out, ran
    width = np.diff(edges).astype(np.float64)
    of = dict(iter(sched.assign(run=sched["run"].astype(str)).groupby(["run", "process", "thread"], sort=False)))
    for i, key in enumerate(team):
        g = of.get(key)
        if g is None:
            continue
        queued, covered, cpu = np.zeros(edges.size - 1), np.zeros(edges.size - 1), np.zeros(edges.size - 1)
        for _, h in g.groupby("os_tid", sort=False):
            h = h.sort_values("t_ns", kind="stable")
            end = h["t_ns"].to_numpy(np.int64)
            span = h["span_ns"].to_numpy(np.int64)
            # one OS thread's spans follow each other: the cumulative delay and covered time are
            # piecewise linear between the spans' ends, from the first span's start
            at = np.r_[end[0] - span[0], end].astype(np.float64)
            if (np.diff(at) <= 0).any():
                continue   # spans out of order (a damaged file): not used
            q = np.r_[0, np.cumsum(h["queued_ns"].to_numpy(np.float64))]
            c = np.r_[0, np.cumsum(span.astype(np.float64))]
            u = np.r_[0, np.cumsum(h["cpu_ns"].to_numpy(np.float64))]
            e = edges.astype(np.float64)
            queued += np.diff(np.interp(e, at, q))
            covered += np.diff(np.interp(e, at, c))
            cpu += np.diff(np.interp(e, at, u))
        known = covered >= 0.5 * width
        out[i, known] = queued[known] / covered[known]
        ran[i, known] = cpu[known] / covered[known]
    return out, ran


def _crowded(sched: pd.DataFrame, team: list[tuple], edges: np.ndarray) -> np.ndarray:
    """Per thread of `team` and window: True where the machine kept the thread off a CPU
    more than its teammates (its run-queue delay over the window exceeds the least of its
    team's by config.SHIFT_CROWDED_SHARE of the window): it could not take its share of a
    dynamic loop's chunks then, and its units stretched in wall time. heat_omp at 3 threads
    on 2 CPUs: the master, preempted by the teammates it had just woken, waited 26-40 % of
    each window for a CPU from some moment on, its teammates 0-7 %, and took no chunk after."""
    share, _ = sched_shares(sched, team, edges)
    least = np.nanmin(np.where(np.isnan(share), np.inf, share), axis=0)
    with np.errstate(invalid="ignore"):
        return np.isfinite(share) & np.isfinite(least) & (share - least > config.SHIFT_CROWDED_SHARE)


def _construct_series(units: dict, crowded: np.ndarray | None = None, raw_out: dict | None = None,
                      own_out: dict | None = None) -> dict:
    """Per thread of a team, _shift_series against its teammates' medians; {} when a thread has
    fewer than six windows of common constructs (a run too short to come back to them). With
    windows by time, such a thread alone goes without (a thread that stopped working has no
    units in the windows after), and leaves out the windows where a thread of the team was
    crowded off its CPU (`crowded`, _crowded) and took fewer than config.SHIFT_CROWDED_UNITS
    units: the few chunks a crowded thread takes are the ones the machine stretched, and its
    teammates' ratios move with them. `raw_out`: each thread's raw ratios (_shift_series) go
    in it, for a team cut by beats; `own_out`: each thread's own work per window, each construct
    against its own usual (_shift_series against a constant), for a team cut by beats or by
    time (IQ-TREE's victim leaking until the injector's cap, then at work as before: its
    teammate's step at that recovery read 54x, memoryleak)."""
    med = _team_medians(units)
    # the constructs that hold next to none of the team's work are not compared
    # (config.SHIFT_CONSTRUCT_WORK), a sections construct's units of any sections as one
    work: dict[str, float] = {}
    for u in units.values():
        for c, w in u.construct_work().items():
            c = sections_named(c)[0]
            work[c] = work.get(c, 0.0) + w
    total = sum(work.values())
    main = frozenset(c for c, w in work.items() if total > 0 and w >= config.SHIFT_MAIN_WORK * total)
    if total > 0:
        keep = [c for c, w in work.items() if w >= config.SHIFT_CONSTRUCT_WORK * total]
        med = {k: m[m.index.get_level_values("construct").isin(keep)] for k, m in med.items()}
    by_time = any(u.by_time for u in units.values())
    # ... nor in a window where they hold next to none of the work of the constructs compared
    # there: a region's end holds the runtime's few microseconds in most windows, and real work
    # in a phase that runs more in that region (FastTree: 12 us beside sections of 1.7 ms, two
    # constructs whose median was halfway between a slowed victim's sections and the
    # runtime's). The constructs compared: those the run comes back to (_shift_series), not a
    # set-up loop that holds all of its one window's work (Clustal Omega's first window)
    pooled = pd.concat(med.values())
    if len(pooled):
        seen = pooled.index.to_frame(index=False).drop_duplicates().groupby("construct")["window"].size()
        windows = pooled.index.get_level_values("window").nunique()
        compared = seen.index[(seen >= (2 if by_time else config.SHIFT_CONSTRUCT_SHARE * windows))
                              | seen.index.isin(main)]
        held = _window_work_shares(units, set(compared))
        if held is not None:
            # (the others stay for _shift_series, which leaves them out: their windows count in
            # how many windows the run has, and a construct must come back in half of them)
            med = {k: m[~m.index.get_level_values("construct").isin(compared)
                        | (held.reindex(m.index).fillna(0.0).to_numpy() >= config.SHIFT_CONSTRUCT_WORK)]
                   for k, m in med.items()}
    if crowded is not None:
        # a window where a crowded thread took few units: preemptions stretched a good part
        # of them, and its median with them (a median of many units holds: the few the
        # machine preempted are the slow tail)
        counts = np.array([u.window_counts() for u in units.values()])
        stretched = (crowded & (counts < config.SHIFT_CROWDED_UNITS)).any(axis=0)
    table = pd.concat(med, axis=1)
    whole = table.median(axis=1) if len(units) > config.SHIFT_WHOLE_TEAM else None
    out = {}
    for i, k in enumerate(units):
        raw: list = []
        q = _shift_series(med[k], _others(table, i, whole).dropna(), by_time, main,
                          raw if raw_out is not None and not by_time else None)
        if raw:
            raw_out[k] = raw[0]
        if own_out is not None:   # (each construct against its own usual, by beats or by time)
            own_out[k] = _shift_series(med[k], pd.Series(float(config.SHIFT_UNIT_FLOOR_NS), index=med[k].index),
                                       False, main)
        if by_time and crowded is not None and len(q):
            q = q[~stretched[q.index.to_numpy(dtype=np.int64)]]
        if len(q) < 6:
            if by_time:
                continue
            return {}
        out[k] = q
    return out


def _window_work_shares(units: dict, compared: set) -> pd.Series | None:
    """Per (window, construct) of the `compared` constructs: its share of the team's work in
    them in that window (the sum of every thread's units; a sections construct's units of any
    sections as one); None where the team did no such work."""
    parts = []
    for u in units.values():
        w = u.window_construct_work()
        if len(w):
            c = [sections_named(x)[0] for x in w.index.get_level_values("construct")]
            parts.append(pd.Series(w.to_numpy(), index=pd.MultiIndex.from_arrays(
                [w.index.get_level_values("window"), c], names=["window", "construct"])))
    if not parts:
        return None
    work = pd.concat(parts).groupby(level=["window", "construct"]).sum()
    work = work[work.index.get_level_values("construct").isin(compared)]
    if not len(work):
        return None
    whole = work.groupby(level="window").transform("sum")
    return (work / whole.where(whole > 0)).fillna(0.0)


def _window_series(units: dict) -> dict:
    """Per thread of a team, its whole work in each window over its teammates' median in
    theirs (log): for a run too short for _construct_series (a window of a few beats holds a
    few constructs once each). Windows of less work than config.SHIFT_WINDOW_FLOOR_NS are
    noise, not work."""
    work = np.array([u.window_work() for u in units.values()])
    floor = config.SHIFT_WINDOW_FLOOR_NS
    whole = np.median(work, axis=0) if len(units) > config.SHIFT_WHOLE_TEAM else None
    return {k: pd.Series(np.log(np.maximum(work[i], floor) / np.maximum(_others(work, i, whole), floor)))
            for i, k in enumerate(units)}


def _middle_toward(v: np.ndarray, other: float) -> float:
    """The median of v, or for an even count the one of its two middle values nearer to
    `other`."""
    s = np.sort(v)
    lo, hi = s[(s.size - 1) // 2], s[s.size // 2]
    return float(lo if abs(lo - other) <= abs(hi - other) else hi)


def split_shift(v: np.ndarray, early: int = 2, ceiling: float | None = None) -> tuple[float, int]:
    """The work shift of one thread's per-window values v (logarithms of its ratio to its
    team, at least 4): split once where they change most (an earlier part of `early` windows
    or more and a later part of two or more, whose values lie closest to their part's median:
    least absolute deviation), and the later part's median over the earlier's, where of a
    part's two middle values the one nearer the other part counts: a part of two windows of
    which one is slow (a thread that stalled once late in the run; NPB FT's last phase, 4 beats
    a window) did not shift. `ceiling`: the earlier part counts at most this. (shift, index of
    the later part's first window)."""
    cost, at = np.inf, early
    for s in range(early, v.size - 1):
        c = float(np.abs(v[:s] - np.median(v[:s])).sum() + np.abs(v[s:] - np.median(v[s:])).sum())
        if c < cost:
            cost, at = c, s
    early, late = v[:at], v[at:]
    before = _middle_toward(early, np.median(late))
    if ceiling is not None:
        before = min(before, ceiling)
    return float(np.exp(_middle_toward(late, np.median(early)) - before)), at


def shift_segment(v: np.ndarray) -> tuple[float, int, int]:
    """The work shift of one thread's per-window values v (as split_shift), where the change
    may also be an excursion that ended: windows [a, b) at one level, with two windows or more
    before a and from b on at another (a thread slowed for a while, then at work as before).
    The excursion counts when it leaves at most SHIFT_EXCURSION_FIT of the absolute deviation
    of split_shift's step; its shift is its median against the median of the windows around
    it, with the same choice of middle values. (shift, first window, window after the later
    part: v.size for a step)."""
    shift, at = split_shift(v)
    n = v.size
    if n < 6:
        return shift, at, n
    step = float(np.abs(v[:at] - np.median(v[:at])).sum() + np.abs(v[at:] - np.median(v[at:])).sum())
    cost, best = np.inf, None
    for a in range(2, n - 1 - config.SHIFT_EXCURSION_WINDOWS):
        for b in range(a + config.SHIFT_EXCURSION_WINDOWS, n - 1):
            mid, out = v[a:b], np.concatenate((v[:a], v[b:]))
            c = float(np.abs(mid - np.median(mid)).sum() + np.abs(out - np.median(out)).sum())
            if c < cost:
                cost, best = c, (a, b)
    if best is None or cost > config.SHIFT_EXCURSION_FIT * step:
        return shift, at, n
    a, b = best
    mid, out = v[a:b], np.concatenate((v[:a], v[b:]))
    return float(np.exp(_middle_toward(mid, np.median(out)) - _middle_toward(out, np.median(mid)))), a, b


def _share_shifts(units: dict, crowded: np.ndarray | None = None) -> dict:
    """Per thread of a team cut into windows: the share shift (its units of the team's shared
    work -- share_weight: chunks, tasks, sections, not the ends of constructs that every
    thread beats -- per window against its teammates', later in the run against earlier:
    split_shift of the log of (its units + 1) over (its teammates' median + 1), in the windows
    where they did 8 units at least and, where it did fewer than they, its team went on
    working: its teammates, the lower median of them, spent config.SHARE_TEAM_BUSY of the
    window at least in units of shared work), the window its later part starts at, and its share
    over the whole run (the exp of the median of those logs); none with fewer than 6 such
    windows. A thread that stopped working while its team went on (it
    skips its chunks of a dynamic loop, or hangs outside the loop while the others take them)
    falls by 100x and more; one that slowed down takes fewer chunks, by its slow-down. Where the team waited for one long
    unit (heat_omp's leaking thread at 3 threads on 2 CPUs), a thread that took none of the
    few short units around it, which a teammate awake took in 4 % of its time, did not stop."""
    counts = np.array([u.window_shares() for u in units.values()], dtype=np.float64)
    busy = np.nan_to_num(np.array([u.window_busy() for u in units.values()], dtype=np.float64), nan=0.0)
    out = _share_shifts_in(units, counts, busy, crowded, np.arange(counts.shape[1]))
    if len(out) < len(units) or any(v[3] for v in out.values()):
        # a team whose shared units are few or come in bursts (GraphicsMagick: 100 beats a
        # thread, most of its chunks in 4 of 20 windows): windows of the team's units instead
        # (_share_groups), for a thread that had too few windows, or whose windows held too
        # few units for a thread that took none of them to read under SHARE_SHIFT_MIN
        grouped = _share_groups(units, crowded)
        if grouped is not None:
            # (few units a window: a guided loop's first chunk gives one thread most of a
            # window's units, its teammate a tenth of them, so that a thread's middle window
            # before says little of its share; its best one says it was taking the team's
            # units, and the later part then says whether it went on)
            more = _share_shifts_in(units, *grouped, add=0.5, best=True)
            out.update({k: v for k, v in more.items() if (k not in out or out[k][3]) and not v[3]})
    return {k: v[:3] for k, v in out.items()}


def _share_groups(units: dict, crowded: np.ndarray | None):
    """A team cut by time, in windows of its shared units instead: each window's
    config.SHARE_FINE_BINS parts (_UnitHistograms.fine_shares) joined in time order until the
    team holds config.SHIFT_MIN_BEATS units a thread and a config.SHARE_GROUPS-th of its
    shared units (6 groups at least); (counts, busy, crowded, window) of those
    groups as _share_shifts_in takes them, window the time window each group begins in. None
    where the histograms have no parts."""
    us = list(units.values())
    if any(u.fine_edges is None for u in us):
        return None
    fine = np.array([u.fine_shares for u in us], dtype=np.float64)
    work = np.array([u.fine_work for u in us], dtype=np.float64)
    edges = us[0].fine_edges
    total = np.cumsum(fine.sum(axis=0))
    need = max(config.SHIFT_MIN_BEATS * len(us), total[-1] / config.SHARE_GROUPS if total.size else 0.0)
    ends, last = [], 0.0
    for j, c in enumerate(total.tolist()):
        if c - last >= need:
            ends.append(j + 1)
            last = c
    if len(ends) < 6:
        return None
    ends[-1] = fine.shape[1]   # (the last group holds what is left after it)
    starts = np.r_[0, ends[:-1]].astype(np.int64)
    ends = np.asarray(ends)
    counts = np.add.reduceat(fine, starts, axis=1)[:, :len(ends)]
    span = (edges[ends] - edges[starts]).astype(np.float64)
    busy = np.add.reduceat(work, starts, axis=1)[:, :len(ends)] / np.maximum(span, 1.0)
    window = starts // config.SHARE_FINE_BINS
    held = None
    if crowded is not None:
        last_window = (ends - 1) // config.SHARE_FINE_BINS
        c = np.cumsum(np.c_[np.zeros((crowded.shape[0], 1)), crowded.astype(np.int64)], axis=1)
        held = (c[:, last_window + 1] - c[:, window]) > 0
    return counts, busy, held, window


def _share_shifts_in(units: dict, counts: np.ndarray, busy: np.ndarray, crowded: np.ndarray | None,
                     window: np.ndarray, add: float = 1.0, best: bool = False) -> dict:
    """_share_shifts over windows of counts and busy (threads x windows), window: the time
    window each begins in; add: what each count gets before the ratio is taken; best: the
    earlier part counts as its best window (at most its teammates'), not its middle. Per thread:
    (shift, window, share, thin), thin where a thread that took none of its median window's
    units would read SHARE_SHIFT_MIN or more (too few units a window to tell a stop)."""
    whole = np.median(counts, axis=0) if len(units) > config.SHIFT_WHOLE_TEAM else None
    out = {}
    for i, k in enumerate(units):
        others = _others(counts, i, whole)
        team = np.sort(np.delete(busy, i, axis=0), axis=0)
        # a window where it did less than half of its teammates' counts when they went on
        # working (a thread that did as much as they is at work whatever they did: FastTree's
        # victim, stopped at 0.02 s, did 213 units to its teammate's 271 in the run's first
        # window, where the team spent 7 % of its time in shared work; without that window,
        # nothing was left from before its fault)
        ok = (counts[i] + others >= 2 * config.SHIFT_MIN_BEATS) & \
            ((team[(team.shape[0] - 1) // 2] >= config.SHARE_TEAM_BUSY) | (2 * counts[i] >= others))
        if crowded is not None:
            ok &= ~crowded[i]
        if ok.sum() < 6:
            continue
        v = np.log((counts[i][ok] + add) / (others[ok] + add))
        # a thread that stopped in the first window it shared work in (FastTree's stopped
        # victim at 0.02 s): one window before is enough, its share falling 20x and more; a
        # share above its teammates' counts as theirs (one window before can be one where it
        # alone took the units: FastTree's slowed victim, 225x its teammate's in the run's
        # first twentieth and as many as it after, did not stop)
        shift, at = split_shift(v, early=1, ceiling=0.0)
        if best:
            shift = float(np.exp(_middle_toward(v[at:], np.median(v[:at])) - min(float(v[:at].max()), 0.0)))
        # and its share over the whole run (the median window's), which the same program's
        # normal runs give each thread number a usual level of: a thread that stopped before
        # the run's first window ended has no earlier self (diagnosis.features_table)
        thin = add / (float(np.median(others[ok])) + add) >= config.SHARE_SHIFT_MIN
        out[k] = (shift, int(window[np.flatnonzero(ok)[at]]), float(np.exp(np.median(v))), thin)
    return out


def _team_work(raw: pd.Series | None) -> float:
    """How many times longer a thread's units took than its teammates' over its run: of its raw
    ratios (log, by window and construct: _shift_series), the median per window, and of those
    the median (a stall in one window, or one phase, does not move it); NaN with fewer than 6
    windows. The same program's normal runs give each thread its usual level (a master with
    work of its own in the regions, a loop that splits unevenly): the model keeps it, and a
    thread slowed from its first beats, which has no earlier self, is measured against it
    (diagnosis.features_table)."""
    if raw is None or not len(raw):
        return float("nan")
    v = raw.groupby(level="window").median()
    return float(np.exp(np.median(v.to_numpy()))) if v.size >= 6 else float("nan")


def _iteration_ratios(units: dict, stops: dict | None = None) -> dict:
    """Per thread of a team: _iteration_ratio, the team's chunks (pace_bins, per thread),
    time per loop and window and spread of first iterations gathered once. `stops`: the
    threads that stopped taking their share (SS under config.SHARE_SHIFT_MIN), each with the
    window its later part begins in: such a thread's pace from the window after it on, not
    the one of the chunks it ran before (GraphicsMagick's victims stopped early read 3-7x over
    their teammates' there, and were called slowed: their last chunks, of its dearest calls,
    shared windows with their teammates' cheap ones), and its teammates compared with its
    chunks of the windows before the one before it only (a teammate of GraphicsMagick's
    victim read 2.48x from the window it stopped in: its chunks there, of a cheap call, beside
    the teammate's of a dear one, which it no longer shared)."""
    stops = stops or {}
    paced = {k: u.pace_bins() for k, u in units.items()}
    compared = {k: _bins_before(b, stops[k] - 1) if k in stops else b for k, b in paced.items()}
    work = pd.concat([u.window_construct_work() for u in units.values()]).groupby(level=[0, 1]).sum()
    spans: dict[str, tuple] = {}
    for u in units.values():
        for c, (lo, hi) in u.first_spans().items():
            spans[c] = (min(lo, spans.get(c, (lo, hi))[0]), max(hi, spans.get(c, (lo, hi))[1]))
    # a loop of a few iterations a thread hands each thread the same ones (GROMACS: 2
    # iterations, 0 to thread 0 and 1 to thread 1, every time), whose costs differ: its chunks
    # are not alike
    wide = {c for c, (lo, hi) in spans.items() if hi - lo >= config.ITERATION_RATIO_MIN_SPAN * len(units)}
    # ... nor does a loop that holds next to none of the team's work (config.SHIFT_CONSTRUCT_WORK:
    # FastTree has a loop of 4 ms in a run of 6 s, 2 chunks of one thread beside 104 of the
    # other, that read IR 3-10 in 3 of 4 normal runs)
    total = sum(sum(u.construct_work().values()) for u in units.values())
    loops = work.groupby(level="construct").sum()
    wide = {c for c in wide if c in loops.index and loops[c] >= config.SHIFT_CONSTRUCT_WORK * total}
    work = {c: w.droplevel("construct") for c, w in work.groupby(level="construct") if c in wide}
    return {k: _iteration_ratio(paced[k], [compared[j] for j in units if j != k],
                                {c: w[w.index >= stops[k] + 1] for c, w in work.items()} if k in stops else work)
            for k in units}


def _bins_before(paced: dict, window: int) -> dict:
    """pace_bins of a thread, its windows before `window` only (the count of its chunks as
    it was)."""
    out = {}
    for c, (w, keys, counts, chunks, iterations) in paced.items():
        at = w < window
        out[c] = (w[at], keys[at], counts[at], chunks, {x: n for x, n in iterations.items() if x < window})
    return out


def _iteration_ratio(mine: dict, others: list[dict], work: dict) -> float:
    """How many times longer a thread's loop chunks took per iteration than its teammates' of
    the same loops, over its whole run (the chunks whose iterations the trace has:
    PER_ITERATION): of each such loop and window where it and a teammate ran chunks (each
    chunk in every window it ran in: a guided loop's first chunk runs beside its teammates'
    later ones; each side's chunks there of config.ITERATION_RATIO_MIN_ITERATIONS iterations
    at least), the log of its median over its teammates' median (their median, or the one teammate's), and of
    those the median weighted by the team's time in that loop and window (the loops that hold
    the work decide). Every thread takes its chunks of a loop from one pool and runs the same
    code on them: a thread slowed in its own work takes as long per iteration as its
    slow-down, its teammates, which wait for it at the loop's end, do not (a guided loop hands
    half the loop to the first thread that asks: the share of iterations a slowed thread took
    does not fall, nor does its count of chunks mean anything). Only the chunks that show the
    thread's own pace count (pace_bins: a short first chunk after a wait also holds its
    waking), and a loop's window by window: the same code costs more per iteration in some of
    its calls than in others (GraphicsMagick's blur of 10 pixels and sharpening of 3 run one
    loop; a thread stopped early in the run ran only the first). `mine`, `others`: pace_bins
    of it and of each teammate; `work`: per loop compared (those whose chunks' first
    iterations spread widely enough: _iteration_ratios), the team's time in it per window
    (the window a chunk ended in). NaN with fewer than config.ITERATION_RATIO_MIN_CHUNKS
    chunks in the loops compared."""
    logs, weights, chunks = [], [], 0
    for c, b in mine.items():
        theirs = [o[c] for o in others if c in o]
        if c not in work or not theirs:
            continue
        compared = False
        for w in np.intersect1d(b[0], np.concatenate([o[0] for o in theirs])).tolist():
            m = [_binned_median(o, w)[0] for o in theirs if o[4].get(w, 0) >= config.ITERATION_RATIO_MIN_ITERATIONS]
            if work[c].get(w, 0.0) > 0 and m and b[4].get(w, 0) >= config.ITERATION_RATIO_MIN_ITERATIONS:
                logs.append(np.log(_binned_median(b, w)[0] / float(np.median(m))))
                weights.append(work[c][w])
                compared = True
        chunks += b[3] if compared else 0
    if chunks < config.ITERATION_RATIO_MIN_CHUNKS:
        return float("nan")
    o = np.argsort(logs)
    cw = np.cumsum(np.asarray(weights, dtype=float)[o])
    return float(np.exp(np.asarray(logs)[o][np.searchsorted(cw, 0.5 * cw[-1])]))


def _binned_median(bins: tuple, window: int) -> tuple[float, int]:
    """The median (a bin's middle) of the units of (window, key, count) arrays (pace_bins)
    in one window, and how many they are."""
    at = bins[0] == window
    keys, counts = bins[1][at], bins[2][at]
    o = np.argsort(keys & ((1 << _BIN_BITS) - 1), kind="stable")
    keys, counts = keys[o], counts[o]
    cum = np.cumsum(counts)
    if not cum.size:
        return float("nan"), 0
    return float(_bin_middle(keys[np.searchsorted(cum, (cum[-1] + 1) // 2)])), int(cum[-1])


def _own_part(shift: float, owns: dict, k: tuple, span: tuple) -> float:
    """A thread's work shift up (`shift`, its ratio to its teammates, over the windows of `span`
    against the others), where its own work (`owns`: _construct_series's own_out) rose less
    than its teammates' fell: theirs is the change, not its own (a teammate slowed from the
    run's start that recovered later -- GROMACS's leaking thread at its injector's cap -- is
    its later work over its slow earlier: the other thread's ratio rises by as much), and the
    shift is its own work's, at least 1. Theirs fell by config.SHIFT_OWN_FALL of the shift at
    least: two flat medians (a thread slowed beside a teammate whose own work did not move)
    leave the shift as it is."""
    others = [s for j, s in owns.items() if j != k and len(s)]
    if not others or not len(owns[k]):
        return shift

    def change(s: pd.Series) -> float | None:
        w = s.index.to_numpy()
        inside = (w >= span[0]) & (w < span[1])
        if not inside.any() or inside.all():
            return None
        v = s.to_numpy()
        return float(np.median(v[inside]) - np.median(v[~inside]))

    mine, team = change(owns[k]), change(pd.concat(others, axis=1).median(axis=1))
    if mine is None or team is None or mine >= -team or -team < config.SHIFT_OWN_FALL * np.log(shift):
        return shift
    return float(min(shift, np.exp(max(mine, 0.0))))


def _team_span(trace: HeartbeatTrace, team: list[tuple], beats_of: dict | None) -> tuple[int, int]:
    """The time (ns) from the team's first beat to its last."""
    if beats_of is None:
        st = trace.stats
        keys = {(str(k[0]), int(k[1]), int(k[2])) for k in team}
        mine = np.array([(str(r), int(p), int(th)) in keys
                         for r, p, th in zip(st["run"].astype(str), st["process"], st["thread"])], dtype=bool)
        if not mine.any():
            return 0, 0
        return int(st["first_ns"][mine].min()), int(st["last_ns"][mine].max())
    t = [beats_of[k]["t_ns"].to_numpy(np.int64) for k in team if k in beats_of]
    return min(int(v.min()) for v in t if v.size), max(int(v.max()) for v in t if v.size)


def work_shifts(trace: HeartbeatTrace) -> pd.DataFrame:
    """work_shifts_and_units's work shifts."""
    return work_shifts_and_units(trace)[0]


def work_shifts_and_units(trace: HeartbeatTrace) -> tuple[pd.DataFrame, dict]:
    """Per thread of a team with wait records: how many times longer its own work took,
    against its team's, after some beat than before it (docs/methods.md, "Work shift").

    The team's run is cut into windows (equal shares of each thread's own beats, for a team
    whose threads beat alike: _same_units). In each window and for each construct, the median
    of the thread's units of work (the time from one beat to the next less its recorded
    waits) over the median of its teammates'; per window, the median over constructs of
    these ratios, each against its construct's usual ratio (_shift_series). A thread that
    became slower in its own work is slower in every construct it runs; a teammate that waits
    for it where the tracer sees no wait (a flag the program spins on) only in the constructs
    where it waits. These per-window values are split where they change most (the split into
    an earlier and a later part, of two windows or more each, whose values lie closest to
    their part's median: least absolute deviation; a team whose threads made different
    numbers of beats: windows of the team's time, and the ratios taken raw, _shift_series),
    and the shift is the later part's median
    over the earlier's (split_shift): a thread that became slower from some beat on (a slow
    or leaking thread) shifts by that factor; its teammates, which wait for it, do not (theirs falls);
    the team's phases and the machine's load move every thread alike. Columns: run,
    process, thread, work_shift (NaN: too few beats, no teammate, no waits, or too few windows
    with units of its own: a thread that stopped working), shift_beat (about the first beat of the later
    part), share_shift and share_beat (_share_shifts, for a team cut by time; NaN and 0 else),
    by_time (the team was cut into windows of its time), crowded (of its windows, how many the
    machine crowded one of its team's threads in: _crowded; 0 for teams not cut by time),
    team_work (its units against its teammates' over the whole run: _team_work; NaN for a team
    cut by time), team_share (its share of the team's shared units over the whole run against
    its teammates', the median window's: _share_shifts; NaN where there is no share shift),
    iteration_ratio (its loop chunks' time per iteration against its teammates', over its
    whole run: _iteration_ratio; NaN where the trace has no chunk's iterations). And per thread of those teams, (run, process, thread): its units' median per
    construct over its whole run and how many it had (_UnitHistograms.construct_medians)."""
    key = ["run", "process", "thread"]
    cols = key + ["work_shift", "shift_beat", "share_shift", "share_beat", "by_time", "crowded", "team_work",
                  "team_share", "iteration_ratio"]
    medians: dict[tuple, dict] = {}
    if not trace.beat_count():
        return pd.DataFrame(columns=cols), medians
    streamed = isinstance(trace, StreamedTrace)
    if streamed:
        with_waits = {(str(r), int(p)) for r, p in zip(trace.wait_stats["run"].astype(str), trace.wait_stats["process"])}
        counts = {(str(k[0]), int(k[1]), int(k[2])): n for k, n, _ in trace.thread_loaders()}
    else:
        w = trace.waits
        with_waits = {(str(r), int(p)) for r, p in zip(w["run"].astype(str), w["process"])} if len(w) else set()
        counts = {(str(k[0]), int(k[1]), int(k[2])): len(g) for k, g in trace.threads()}
    teams: dict[tuple, list[tuple]] = {}
    for k, n in counts.items():
        if k[:2] in with_waits and n:
            teams.setdefault(k[:2], []).append(k)
    eager = not streamed and any(len(team) > 1 for team in teams.values())
    beats_of = _grouped(trace.beats) if eager else None
    waits_of = _grouped(trace.waits) if eager else None
    cpu_of = _grouped(trace.cpu)   # (one record per gap of 2 ms or more: held whole, streamed or not)
    rows = []
    for (run, process), team in teams.items():
        edges = _same_units({k: counts[k] for k in team})
        by_time = edges is None
        # a team cut by time one of whose threads made too few beats for windows: its loop
        # chunks per iteration alone (_iteration_ratio; a slowed thread takes few of a
        # guided loop's chunks)
        few = False
        if by_time:   # threads of different numbers of beats (dynamic loops): windows of the team's time
            if len(team) < 2:
                continue
            few = min(counts[k] for k in team) < config.SHIFT_MIN_BEATS * 6
            lo, hi = _team_span(trace, team, beats_of)
            if not hi > lo:
                continue
            common = np.linspace(lo, hi, config.SHIFT_WINDOWS + 1).round().astype(np.int64)
            edges = {k: common for k in team}
        if streamed:   # each thread's units read in pieces, as histograms: none held whole
            units = {k: _units_streamed(trace, k, edges[k], cpu_record_arrays(cpu_of.get(k)), by_time) for k in team}
        else:
            waits = _waits_by_thread(team, waits_of)
            units = {}
            for k in team:
                g = beats_of[k]
                t = g["t_ns"].to_numpy(np.int64)
                o = np.argsort(t, kind="stable")
                labels = pd.Categorical(g["construct"])[o] if "construct" in g else np.full(t.size, "", dtype=object)
                units[k] = _units_eager(t[o], labels, waits[k], edges[k], cpu_record_arrays(cpu_of.get(k)), by_time,
                                        chunk_iterations_of(g)[o], g["iteration"].to_numpy(np.int64)[o])
        for k in team:
            medians[k] = units[k].construct_medians()
        # a team cut by time: the windows where the machine kept a thread off its CPU more
        # than its teammates are left out of its share shift, and of every work shift
        crowded = _crowded(trace.sched, team, edges[team[0]]) if by_time and not few else None
        raws: dict = {}
        owns: dict = {}
        series = {} if few else _construct_series(units, crowded, raws, owns)
        if not series and not few and not by_time:
            # no construct in enough windows to be compared there (NPB FT: five loops, each in
            # 8 of its 20 windows): each window's whole work, whose ratios are also the
            # thread's work against its team's over the run (_team_work), which the model keeps
            # (a thread slowed at its 8th beat of 83 read WS 1.64 from the run's first two
            # windows, one of them half slowed, and had no team_work for the model to judge)
            series = _window_series(units)
            raws = {}
        whole = raws if raws else {k: q.rename_axis("window") for k, q in series.items()}
        # a team of as many beats each whose work is still dealt out (sections: each to the
        # thread that asks first): its shares per window of beats; none where every thread's
        # are the same (static loops and constructs: every thread beats once for each)
        shared = by_time or len({u.window_shares().tobytes() for u in units.values()}) > 1
        shares = _share_shifts(units, crowded) if shared and not few else {}
        # windows the machine crowded one of the team's threads in
        left_out = int(crowded.any(axis=0).sum()) if crowded is not None else 0
        ratios = _iteration_ratios(units, {k: v[1] for k, v in shares.items() if v[0] < config.SHARE_SHIFT_MIN})
        for k in team:
            if k not in series and k not in shares and not left_out and not np.isfinite(ratios[k]):
                continue
            shift, beat = np.nan, 0
            if k in series:
                q = series[k]
                shift, at, end = shift_segment(q.to_numpy())
                window = int(q.index[at])
                span = (window, int(q.index[end]) if end < q.size else np.inf)
                alt = _raw_shift(raws.get(k))
                if alt is not None and abs(np.log(alt[0])) > abs(np.log(shift)):
                    shift, window = alt
                    span = (window, np.inf)
                if shift > 1 and k in owns:
                    shift = _own_part(shift, owns, k, span)
                beat = int((units[k].edge_beat if by_time else edges[k])[window]) + 1
            share, share_beat, team_share = shares.get(k, (np.nan, -1, np.nan))
            share_beat = int((units[k].edge_beat if by_time else edges[k])[share_beat]) + 1 if share_beat >= 0 else 0
            rows.append((run, process, k[2], shift, beat, share, share_beat, by_time, left_out,
                         _team_work(whole.get(k)), team_share, ratios[k]))
    return pd.DataFrame(rows, columns=cols), medians
