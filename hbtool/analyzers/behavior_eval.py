"""Scoring behavior timelines against the ground truth the example programs write.

Used by benchmarks/eval_behavior.py. A run's truth.json (native_tracer/examples/
common.c) says which thread was injected with what, and when; from it come the
behavior episodes that must be found:

* busywait: the thread is busy-waiting from the injection on;
* condwait: the thread is conditional-waiting from the injection on;
* earlyexit, shutdown/thread: the thread exited at the injection;
* shutdown/cancel, shutdown/vanish: the thread failed at the injection;
* shutdown/abort, segv: the thread failed at the injection (the fatal signal was its own);
* shutdown/exit: the thread exited at the injection (it called exit, ending the process);
  the others ended with the process (`ended`, not scored);
* every other thread, and the injected one after a busywait or condwait: exited when
  its beats end (no time to check: the program does not know it in advance).

An episode is found when the timeline has an interval of the same behavior on the
same thread that starts within `tolerance_s` (or `tolerance_beats` usual intervals, if
longer) of the injection. Intervals found that match no episode are false positives.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..model import HeartbeatTrace

SCORED = ["busy-waiting", "conditional-waiting", "exited", "failed"]
FATAL = ("exit", "abort", "segv")


@dataclass
class Score:
    tp: dict = field(default_factory=lambda: {b: 0 for b in SCORED})
    fp: dict = field(default_factory=lambda: {b: 0 for b in SCORED})
    fn: dict = field(default_factory=lambda: {b: 0 for b in SCORED})
    start_errors: dict = field(default_factory=lambda: {b: [] for b in SCORED})
    missed: list = field(default_factory=list)     # (run, thread, behavior, what was found instead)
    spurious: list = field(default_factory=list)   # (run, thread, behavior, start_s)
    online_tp: dict = field(default_factory=lambda: {b: 0 for b in SCORED})
    online_fn: dict = field(default_factory=lambda: {b: 0 for b in SCORED})
    online_latency: dict = field(default_factory=lambda: {b: [] for b in SCORED})  # s after the injection
    online_lag: dict = field(default_factory=lambda: {b: [] for b in SCORED})      # s after its own onset
    online_false: int = 0

    def add(self, other: "Score") -> None:
        for name in ("tp", "fp", "fn", "online_tp", "online_fn"):
            for b in SCORED:
                getattr(self, name)[b] += getattr(other, name)[b]
        for name in ("start_errors", "online_latency", "online_lag"):
            for b in SCORED:
                getattr(self, name)[b].extend(getattr(other, name)[b])
        self.missed += other.missed
        self.spurious += other.spurious
        self.online_false += other.online_false

    def precision(self, b: str) -> float:
        d = self.tp[b] + self.fp[b]
        return self.tp[b] / d if d else float("nan")

    def recall(self, b: str) -> float:
        d = self.tp[b] + self.fn[b]
        return self.tp[b] / d if d else float("nan")


def truth_episodes(truth: dict, zero_mono_ns: int | None) -> list[dict]:
    """[{thread, behavior, start_ns (trace time) or None}] from a run's truth.json."""
    n = int(truth["threads"])
    inject = truth.get("inject", "none")
    mode = truth.get("shutdown_mode")
    target = truth.get("thread")
    fired = bool(truth.get("injected"))
    t0 = None
    if fired and truth.get("inject_mono_ns") is not None and zero_mono_ns is not None:
        t0 = int(truth["inject_mono_ns"]) - int(zero_mono_ns)
    out = []
    for th in range(n):
        hit = fired and th == target
        if hit and inject == "busywait":
            out.append({"thread": th, "behavior": "busy-waiting", "start_ns": t0})
        if hit and inject == "condwait":
            out.append({"thread": th, "behavior": "conditional-waiting", "start_ns": t0})
        if fired and inject == "shutdown" and mode in FATAL:
            # the victim ended the process: it failed (a fatal signal in it) or exited (it called
            # exit with a failure status); its teammates ended with the process, not their doing
            if hit:
                out.append({"thread": th, "behavior": "exited" if mode == "exit" else "failed", "start_ns": t0})
        elif hit and (inject == "earlyexit" or (inject == "shutdown" and mode == "thread")):
            out.append({"thread": th, "behavior": "exited", "start_ns": t0})
        elif hit and inject == "shutdown" and mode in ("cancel", "vanish"):
            out.append({"thread": th, "behavior": "failed", "start_ns": t0})
        else:
            out.append({"thread": th, "behavior": "exited", "start_ns": None})
    return out


def scored_intervals(intervals: list[dict]) -> list[dict]:
    """The intervals that are scored; an exit after an idle stretch starts where the idle
    does: the thread stopped working there (an OpenMP worker that leaves its loop early
    waits, alive, at the region's end, as one that finished does)."""
    out = []
    for i, iv in enumerate(intervals):
        if iv["behavior"] not in SCORED:
            continue
        if iv["behavior"] in ("exited", "failed") and i and intervals[i - 1]["behavior"] == "idle":
            iv = {**iv, "start_ns": intervals[i - 1]["start_ns"]}
        out.append(iv)
    return out


def score_run(trace: HeartbeatTrace, timelines: list[dict], truth: dict, run: str,
              tolerance_s: float = 0.05, tolerance_beats: float = 5.0) -> Score:
    """Match one run's timelines (behavior_timelines) against its truth."""
    sc = Score()
    zero = trace.runs.get(run, {}).get("zero_mono_ns")
    episodes = truth_episodes(truth, zero)
    rows = {r["thread"]: r for r in timelines if r["run"] == run}
    found = {th: scored_intervals(r["intervals"]) for th, r in rows.items()}
    used = {th: set() for th in found}
    # episodes with a known start first, so that an end-of-run exit does not take their match
    for ep in sorted(episodes, key=lambda e: e["start_ns"] is None):
        th, b, t0 = ep["thread"], ep["behavior"], ep["start_ns"]
        row = rows.get(th)
        if row is None:
            sc.fn[b] += 1
            sc.missed.append((run, th, b, "no beats"))
            continue
        usual = row["usual_interval_s"] if np.isfinite(row["usual_interval_s"]) else 0.0
        tol = max(tolerance_s, tolerance_beats * usual)
        best, best_d = None, None
        for k, iv in enumerate(found[th]):
            if k in used[th] or iv["behavior"] != b:
                continue
            d = 0.0 if t0 is None else abs(iv["start_ns"] - t0) / 1e9
            if d <= tol and (best is None or d < best_d):
                best, best_d = k, d
        if best is None:
            sc.fn[b] += 1
            instead = "nothing"
            if t0 is not None:
                cover = [iv["behavior"] for iv in row["intervals"] if iv["start_ns"] <= t0 + tol * 1e9
                         and iv["end_ns"] >= t0]
                instead = "/".join(dict.fromkeys(cover)) or "nothing"
            sc.missed.append((run, th, b, instead))
        else:
            used[th].add(best)
            sc.tp[b] += 1
            iv = found[th][best]
            if t0 is not None:
                sc.start_errors[b].append((iv["start_ns"] - t0) / 1e9)
                on = iv.get("online")
                if on:
                    sc.online_tp[b] += 1
                    sc.online_latency[b].append(on["detected_s"] - t0 / 1e9)
                    sc.online_lag[b].append(on["lag_s"])
                elif len(trace.monitor):
                    sc.online_fn[b] += 1
    for th, ivs in found.items():
        for k, iv in enumerate(ivs):
            if k not in used[th]:
                sc.fp[iv["behavior"]] += 1
                sc.spurious.append((run, th, iv["behavior"], iv["start_ns"] / 1e9))
    for r in rows.values():
        sc.online_false += sum(1 for o in r["online"] if not o["matched"] and o["behavior"] != "running")
    return sc
