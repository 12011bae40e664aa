"""Probe summaries and status figures (SPEC 8) on hand-made samples with known answers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hbtool.analyzers.timers import counter_deltas, probe_summary, status_report
from hbtool.model import PROBE_COLUMNS, STATUS_METRICS, ProbeStats, StatusSamples, conform


def test_counter_deltas_wrap_and_reset():
    d = counter_deltas(np.array([10, 20, 2**32 - 6, 4, 2**40, 5]))
    assert d[0] == 10 and d[1] == 2**32 - 26
    assert d[2] == 10  # wrapped at 2^32
    assert d[3] == 2**40 - 4
    assert np.isnan(d[4])  # went down from above 2^32: a reset, unknown


def test_probe_merge_over_threads():
    rows = [
        dict(process=0, probe=0, label="solve", site="a.c:10", thread=0, thread_slot=1, count=3, total_ns=300,
             min_ns=50, max_ns=200),
        dict(process=0, probe=0, label="solve", site="a.c:10", thread=1, thread_slot=2, count=1, total_ns=40,
             min_ns=40, max_ns=40),
        dict(process=0, probe=1, label="io", site="a.c:20", thread=0, thread_slot=1, count=2, total_ns=1000,
             min_ns=100, max_ns=900),
        dict(process=0, probe=2, label="never", site="a.c:30", thread=0, thread_slot=1, count=0, total_ns=0,
             min_ns=0, max_ns=0),
    ]
    ps = ProbeStats(per_thread=conform(pd.DataFrame(rows), PROBE_COLUMNS))
    s = probe_summary(ps)
    assert s["label"].tolist() == ["io", "solve", "never"]  # largest total first
    solve = s[s["label"] == "solve"].iloc[0]
    assert (solve["count"], solve["threads"], solve["min_ns"], solve["max_ns"]) == (4, 2, 40, 200)
    assert solve["mean_ns"] == pytest.approx(85.0)
    assert solve["share"] == pytest.approx(0.34)
    never = s[s["label"] == "never"].iloc[0]
    assert np.isnan(never["mean_ns"]) and np.isnan(never["min_ns"])
    per = probe_summary(ps, per_thread=True)
    assert len(per) == 4 and set(per["thread"]) == {0, 1}


def _status(n=5, dt=1.0):
    t = np.arange(n) * dt
    d = {"process": 0, "sample": np.arange(n), "t": t}
    # 4 CPUs at 100 ticks/s: per second 400 ticks = 100 user, 50 system, 200 idle, 40 iowait, 10 steal
    for name, per in (("cpu_user", 100), ("cpu_system", 50), ("cpu_idle", 200), ("cpu_iowait", 40),
                      ("cpu_steal", 10)):
        d[name] = 1000 + per * np.arange(n)
    d.update(mem_total_kb=1000, mem_available_kb=250, swap_total_kb=500, swap_free_kb=400,
             net_rx_bytes=np.arange(n) * 2000, net_tx_bytes=np.arange(n) * 500,
             proc_user_us=np.arange(n) * 300_000, proc_system_us=np.arange(n) * 200_000, proc_rss_kb=4096)
    df = pd.DataFrame(d)
    return StatusSamples(samples=df[["process", "sample", "t"] + STATUS_METRICS].astype({"t": float}),
                         machine=[{"process": 0, "cores": 4, "model": "x", "mem_kb": 1000, "period_s": 1.0,
                                   "clk_tck": 100, "host": "h"}])


def test_status_figures_exact():
    rep = status_report(_status())
    iv = rep.intervals
    assert len(iv) == 4
    assert iv["cpu_user_pct"].tolist() == pytest.approx([25.0] * 4)
    assert iv["cpu_idle_pct"].tolist() == pytest.approx([50.0] * 4)
    assert iv["cpu_steal_pct"].tolist() == pytest.approx([2.5] * 4)
    assert iv["mem_used_pct"].tolist() == pytest.approx([75.0] * 4)
    assert iv["swap_used_kb"].tolist() == [100] * 4
    assert iv["net_rx_bytes_per_s"].tolist() == pytest.approx([2000.0] * 4)
    assert iv["proc_cpu_pct"].tolist() == pytest.approx([50.0] * 4)
    mean = {s["series"]: s["mean"] for s in rep.summary}
    assert mean["net_tx_bytes_per_s"] == pytest.approx(500.0)


def test_status_one_sample_warns():
    rep = status_report(_status(n=1))
    assert not len(rep.intervals) and "one status sample only" in rep.warnings[0]
