"""Timing probes and machine status (SPEC 8, seed 003): where the time goes.

Probes: per-thread statistics merged per call site (counts and totals add, min of
minimums, max of maximums). Status: the sampler's cumulative counters turned into
per-interval figures (CPU split in percent of all CPUs, memory and swap in use,
network bytes per second, the traced process's CPU and resident memory).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..model import ProbeStats, StatusSamples

PROBE_SUMMARY_COLUMNS = ["process", "probe", "label", "site", "threads", "count", "total_s", "mean_ns", "min_ns",
                         "max_ns", "share"]


def probe_summary(ps: ProbeStats, per_thread: bool = False) -> pd.DataFrame:
    """One row per probe (merged over threads), or per probe and thread; by total time, largest first.

    share: the probe's total time over the largest probe total of its process (nested
    probes overlap, so shares of a sum would mislead).
    """
    df = ps.per_thread
    if not len(df):
        return pd.DataFrame(columns=PROBE_SUMMARY_COLUMNS + (["thread", "thread_slot"] if per_thread else []))
    if per_thread:
        out = df.copy()
        out["threads"] = 1
    else:
        g = df.groupby(["process", "probe"], sort=False)
        out = g.agg(label=("label", "first"), site=("site", "first"), threads=("thread_slot", "nunique"),
                    count=("count", "sum"), total_ns=("total_ns", "sum"), min_ns=("min_ns", "min"),
                    max_ns=("max_ns", "max")).reset_index()
    used = out["count"] > 0
    out["min_ns"] = out["min_ns"].where(used)
    out["max_ns"] = out["max_ns"].where(used)
    out["total_s"] = out["total_ns"] / 1e9
    out["mean_ns"] = np.where(used, out["total_ns"] / out["count"].where(used, 1), np.nan)
    top = out.groupby("process")["total_ns"].transform("max")
    out["share"] = np.where(top > 0, out["total_ns"] / top.where(top > 0, 1), np.nan)
    out = out.sort_values(["process", "total_ns", "probe"], ascending=[True, False, True], kind="stable")
    cols = PROBE_SUMMARY_COLUMNS + (["thread", "thread_slot"] if per_thread else [])
    return out[cols].reset_index(drop=True)


#: derived status columns, in order, with their units
STATUS_SERIES = {
    "cpu_user_pct": "% of all CPUs", "cpu_system_pct": "% of all CPUs", "cpu_idle_pct": "% of all CPUs",
    "cpu_iowait_pct": "% of all CPUs", "cpu_steal_pct": "% of all CPUs", "mem_used_pct": "% of memory",
    "mem_used_kb": "KiB", "swap_used_kb": "KiB", "net_rx_bytes_per_s": "B/s", "net_tx_bytes_per_s": "B/s",
    "proc_cpu_pct": "% of one CPU", "proc_rss_kb": "KiB",
}


def counter_deltas(v: np.ndarray) -> np.ndarray:
    """Increments of a cumulative counter between samples, with wrap handled.

    A counter that went down wrapped at 2^32 when both values fit in 32 bits
    (kernels with 32-bit interface counters); otherwise it was reset, and that
    interval's increment is unknown (NaN).
    """
    v = np.asarray(v, dtype=float)
    d = np.diff(v)
    down = d < 0
    if down.any():
        prev, cur = v[:-1], v[1:]
        wrap32 = down & (prev < 2.0**32) & (cur < 2.0**32)
        d = np.where(wrap32, d + 2.0**32, d)
        d = np.where(down & ~wrap32, np.nan, d)
    return d


@dataclass
class StatusReport:
    intervals: pd.DataFrame            # one row per interval between consecutive samples of a process
    summary: list[dict]                # per process and series: mean, min, max, last
    machine: list[dict]
    warnings: list[str] = field(default_factory=list)


def status_report(ss: StatusSamples) -> StatusReport:
    warnings = list(ss.warnings)
    frames, summary = [], []
    for proc, s in ss.samples.groupby("process", sort=True):
        s = s.sort_values("t", kind="stable")
        if len(s) < 2:
            warnings.append(f"process {proc}: one status sample only; rates need two")
            continue
        t = s["t"].to_numpy()
        dt = np.diff(t)
        cpu = {k: counter_deltas(s[f"cpu_{k}"].to_numpy()) for k in ("user", "system", "idle", "iowait", "steal")}
        ticks = np.nansum(np.vstack(list(cpu.values())), axis=0)
        ticks = np.where(ticks > 0, ticks, np.nan)
        iv = {"process": proc, "t_start": t[:-1], "t": t[1:], "seconds": dt}
        for k, d in cpu.items():
            iv[f"cpu_{k}_pct"] = 100.0 * d / ticks
        total, avail = s["mem_total_kb"].to_numpy()[1:], s["mem_available_kb"].to_numpy()[1:]
        iv["mem_used_kb"] = total - avail
        iv["mem_used_pct"] = np.where(total > 0, 100.0 * (total - avail) / np.where(total > 0, total, 1), np.nan)
        iv["swap_used_kb"] = s["swap_total_kb"].to_numpy()[1:] - s["swap_free_kb"].to_numpy()[1:]
        pos = np.where(dt > 0, dt, np.nan)
        iv["net_rx_bytes_per_s"] = counter_deltas(s["net_rx_bytes"].to_numpy()) / pos
        iv["net_tx_bytes_per_s"] = counter_deltas(s["net_tx_bytes"].to_numpy()) / pos
        pcpu = counter_deltas(s["proc_user_us"].to_numpy()) + counter_deltas(s["proc_system_us"].to_numpy())
        iv["proc_cpu_pct"] = 100.0 * pcpu / 1e6 / pos
        iv["proc_rss_kb"] = s["proc_rss_kb"].to_numpy()[1:]
        df = pd.DataFrame(iv)
        frames.append(df)
        for name, unit in STATUS_SERIES.items():
            v = df[name].to_numpy(dtype=float)
            ok = np.isfinite(v)
            summary.append({"process": int(proc), "series": name, "unit": unit,
                            "mean": float(np.average(v[ok], weights=dt[ok])) if ok.any() and dt[ok].sum() > 0
                            else (float(v[ok].mean()) if ok.any() else None),
                            "min": float(v[ok].min()) if ok.any() else None,
                            "max": float(v[ok].max()) if ok.any() else None,
                            "last": float(v[ok][-1]) if ok.any() else None})
    cols = ["process", "t_start", "t", "seconds"] + list(STATUS_SERIES)
    intervals = pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols)
    return StatusReport(intervals=intervals, summary=summary, machine=ss.machine, warnings=warnings)
