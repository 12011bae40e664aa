"""Per-thread summaries: beats, time span, mean heart rate, and how the thread ended."""

from __future__ import annotations

import signal as _signal

import numpy as np
import pandas as pd

from ..model import THREAD_END_REASONS, HeartbeatTrace


def signal_name(signo: int) -> str:
    try:
        return _signal.Signals(signo).name
    except ValueError:
        return f"signal {signo}"


def _process_end(ev: pd.DataFrame) -> tuple[str, str, int] | None:
    """(ending, text, os_tid) of a process from its events, or None."""
    sig = ev[ev["kind"] == "signal"]
    if len(sig):
        s = sig.iloc[-1]
        name = signal_name(int(s["detail"]))
        return "signal", f"killed by {name}", int(s["os_tid"])
    ex = ev[ev["kind"] == "process_exit"]
    if len(ex):
        s = ex.iloc[-1]
        how = "_exit" if int(s["flags"]) & 1 else "exit"
        return "process_exit", f"{how}({int(s['detail'])})", int(s["os_tid"])
    return None


def thread_endings(trace: HeartbeatTrace) -> pd.DataFrame:
    """How each OS thread of each process ended, from the lifecycle records.

    Columns: run, process, os_tid, ending, ended, end_t, abnormal. ``ending`` is one of
    returned, pthread_exit, cancelled (the thread ended itself), process_exit,
    signal (the process ended around it), no_end_record (the trace stops with
    no end: SIGKILL, power loss, or a trace cut short). Runs whose format has
    no lifecycle records get no rows. ``abnormal`` is True when the thread did not end
    itself and the process died: a fatal signal, a non-zero exit status, or no end record.
    """
    rows = []
    ev_all = trace.events
    for (run, process), ev in ev_all.groupby(["run", "process"], sort=False, observed=True):
        pend = _process_end(ev)
        ex = ev[ev["kind"] == "process_exit"]
        bad_end = pend is None or pend[0] == "signal" or (len(ex) and int(ex.iloc[-1]["detail"]) != 0)
        pend_t = float(ev[ev["kind"].isin(["signal", "process_exit"])]["t"].max()) if pend else np.nan
        tids = set(ev["os_tid"].tolist())
        tids |= set(trace.beats.loc[(trace.beats["run"] == run) & (trace.beats["process"] == process), "os_tid"].tolist())
        for tid in sorted(t for t in tids if t >= 0):
            te = ev[(ev["os_tid"] == tid) & (ev["kind"] == "thread_end")]
            if len(te):
                s = te.iloc[-1]
                why = THREAD_END_REASONS.get(int(s["detail"]), f"ended ({int(s['detail'])})")
                rows.append((run, process, tid, why, why, float(s["t"]), False))
            elif pend is not None:
                kind, text, by = pend
                if kind == "process_exit" and by != tid:
                    text = f"ended by {text} in another thread"
                elif kind == "signal" and by != tid:
                    text = f"{text} (in another thread)"
                rows.append((run, process, tid, kind, text, pend_t, bool(bad_end)))
            else:
                rows.append((run, process, tid, "no_end_record",
                             "no end record (killed by SIGKILL, or the trace was cut short)", np.nan, True))
    return pd.DataFrame(rows, columns=["run", "process", "os_tid", "ending", "ended", "end_t", "abnormal"])


def summarize_threads(trace: HeartbeatTrace) -> pd.DataFrame:
    """One row per (run, process, thread): beats, first_s, last_s, duration_s,
    mean_rate (beats/s over the thread's span), ending and ended (how it ended,
    when the trace knows), os_tids."""
    b = trace.beats
    cols = ["run", "process", "thread", "beats", "first_s", "last_s", "duration_s", "mean_rate",
            "ending", "ended", "os_tids", "abnormal"]
    if not len(b):
        return pd.DataFrame(columns=cols)
    g = b.groupby(["run", "process", "thread"], sort=False, observed=True)
    s = g.agg(beats=("t", "size"), first_s=("t", "min"), last_s=("t", "max")).reset_index()
    s["duration_s"] = s["last_s"] - s["first_s"]
    with np.errstate(divide="ignore", invalid="ignore"):
        s["mean_rate"] = np.where(s["duration_s"] > 0, (s["beats"] - 1) / s["duration_s"], np.nan)
    pairs = b.loc[b["os_tid"] >= 0, ["run", "process", "thread", "os_tid"]].drop_duplicates()
    by_thread: dict[tuple, list[int]] = {}
    for r, p, t, tid in pairs.itertuples(index=False, name=None):
        by_thread.setdefault((r, p, t), []).append(int(tid))
    s["os_tids"] = [sorted(by_thread.get((r, p, t), [])) for r, p, t in zip(s["run"], s["process"], s["thread"])]
    ends = thread_endings(trace)
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
