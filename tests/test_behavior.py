"""hbtool behavior: offline timelines on synthetic traces with known answers, the
sample traces the real tracer wrote, the command's outputs and its bad input."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from hbtool.analyzers.behavior import BehaviorSettings, behavior_timelines
from hbtool.analyzers.behavior_eval import score_run, truth_episodes
from hbtool.io import read_heartbeats
from hbtool.model import HeartbeatTrace

from conftest import SAMPLES, run_cli

RNG = np.random.default_rng(5)


def _beats(intervals_by_thread: dict[int, np.ndarray], run="r", start=0.01) -> pd.DataFrame:
    rows = []
    for th, d in intervals_by_thread.items():
        t = start + np.r_[0.0, np.cumsum(d)]
        t_ns = np.round(t * 1e9).astype(np.int64)
        rows.append(pd.DataFrame({"run": run, "process": 0, "thread": th, "seq": np.arange(len(t)),
                                  "t_ns": t_ns, "t": t_ns / 1e9, "loop": 1, "iteration": np.arange(len(t)),
                                  "tag": 0, "os_tid": 5000 + th}))
    return pd.concat(rows, ignore_index=True)


def _events(rows: list[tuple], run="r") -> pd.DataFrame:
    return pd.DataFrame([{"run": run, "process": 0, "os_tid": tid, "thread": -1, "t_ns": int(t * 1e9), "t": t,
                          "kind": kind, "detail": detail, "flags": flags} for tid, t, kind, detail, flags in rows])


def _trace(d, events=None, lifecycle=True) -> HeartbeatTrace:
    b = _beats(d)
    kw = {"events": _events(events)} if events else {}
    return HeartbeatTrace(beats=b, runs={"r": {"lifecycle": lifecycle}}, **kw)


def _noisy(n, period=0.002, cv=0.05):
    return period * (1 + cv * RNG.standard_normal(n)).clip(0.5)


def _end_events(d, how=None, status=0):
    """Thread end records for every thread at its last beat, and a process exit."""
    ev = []
    for th, iv in d.items():
        t_end = 0.01 + iv.sum() + 1e-4
        if how is not None:
            ev.append((5000 + th, t_end, "thread_end", how, 0))
    last = 0.01 + max(iv.sum() for iv in d.values()) + 1e-3
    ev.append((4999, last, "process_exit", status, 0))
    return ev


def _labels(row):
    return [iv["behavior"] for iv in row["intervals"]]


def test_normal_threads_run_then_exit():
    d = {0: _noisy(800), 1: _noisy(800)}
    rows = behavior_timelines(_trace(d, _end_events(d, how=0)))
    for r in rows:
        assert _labels(r) == ["running", "exited"]
        assert r["intervals"][-1]["detail"] == "the thread returned from its start routine"
        assert r["usual_interval_s"] == pytest.approx(0.002, rel=0.1)


def test_busy_waiting_found_with_its_start_and_end():
    a = _noisy(300)
    busy = _noisy(150, period=0.008)  # 4x slower, steady
    d = {0: np.r_[a, busy, _noisy(300)], 1: _noisy(1200), 2: _noisy(1200)}
    rows = behavior_timelines(_trace(d, _end_events(d, how=0)))
    r0 = rows[0]
    assert _labels(r0) == ["running", "busy-waiting", "running", "exited"]
    bw = r0["intervals"][1]
    t_start = 0.01 + a.sum()
    t_end = t_start + busy.sum()
    assert bw["start_ns"] / 1e9 == pytest.approx(t_start, abs=3 * 0.002)
    assert bw["end_ns"] / 1e9 == pytest.approx(t_end, abs=3 * 0.008)
    assert "4.0x slower" in bw["detail"] or "3.9x" in bw["detail"] or "4.1x" in bw["detail"]
    for r in rows[1:]:
        assert _labels(r) == ["running", "exited"]


def test_a_lone_threads_gradual_drift_to_2x_is_the_machine_but_a_step_to_2x_is_busy_waiting():
    """NPB EP (clang, 2 threads, source beats; eval_npb's busy3): the teammate had finished, and
    the thread's beats drifted from 2.4 ms to 4-7 ms and back over half a second (the host ran
    the VM's CPU slower; its CPU time per beat rose alike, no teammate beat beside it). A
    0.15 s stretch of that crossed 2x and was called busy-waiting, "2.1x slower": the beats
    on both sides were already 1.6x slower, no step. A thread that steps to 2.2x and back is
    still busy-waiting."""
    rng = np.random.default_rng(11)
    usual = 0.0024

    def noisy(n, factor, cv=0.08):
        return usual * factor * (1 + cv * rng.standard_normal(n)).clip(0.5)

    ramp_up = usual * np.linspace(1.0, 1.7, 80) * (1 + 0.08 * rng.standard_normal(80))
    drift = np.r_[noisy(300, 1.0, 0.04), ramp_up, noisy(30, 1.7), noisy(50, 2.15), noisy(40, 1.65),
                  noisy(120, 1.0, 0.04)]
    step = np.r_[noisy(300, 1.0, 0.04), noisy(80, 2.2, 0.04), noisy(200, 1.0, 0.04)]
    for d, want in (({0: drift}, None), ({0: step}, "busy-waiting")):
        row = behavior_timelines(_trace(d, _end_events(d, how=0)))[0]
        if want is None:
            assert "busy-waiting" not in _labels(row), row["intervals"]
            assert any("a drift (the machine)" in n for n in row["notes"]), row["notes"]
        else:
            assert _labels(row) == ["running", "busy-waiting", "running", "exited"]
            bw = row["intervals"][1]
            assert bw["start_ns"] / 1e9 == pytest.approx(0.01 + step[:300].sum(), abs=3 * usual)


def test_team_wide_slowdown_is_the_machine_not_busy_waiting():
    slow = lambda: np.r_[_noisy(300), _noisy(150, period=0.008), _noisy(300)]  # noqa: E731
    d = {0: slow(), 1: slow(), 2: slow()}
    rows = behavior_timelines(_trace(d, _end_events(d, how=0)))
    for r in rows:
        assert "busy-waiting" not in _labels(r)
        assert any("not this thread" in n for n in r["notes"])


def test_conditional_wait_found_and_short_stalls_ignored():
    a = _noisy(400)
    d0 = np.r_[a, [0.5], _noisy(400)]                     # a 0.5 s wait
    d1 = np.r_[_noisy(400), [0.02], _noisy(400)]          # a 20 ms scheduler stall: not a wait
    d = {0: d0, 1: d1}
    rows = behavior_timelines(_trace(d, _end_events(d, how=0)))
    assert _labels(rows[0]) == ["running", "conditional-waiting", "running", "exited"]
    cw = rows[0]["intervals"][1]
    assert cw["start_ns"] / 1e9 == pytest.approx(0.01 + a.sum(), abs=1e-6)
    assert (cw["end_ns"] - cw["start_ns"]) / 1e9 == pytest.approx(0.5 - 0.002, abs=0.002)
    assert _labels(rows[1]) == ["running", "exited"]
    # a lower --min-wait makes the 20 ms stall a wait
    rows = behavior_timelines(_trace(d, _end_events(d, how=0)), BehaviorSettings(min_wait_s=0.01))
    assert "conditional-waiting" in _labels(rows[1])


def test_a_block_right_after_a_slow_stretch_is_conditional_waiting_not_busy_waiting():
    """NPB EP (clang, 2 threads, source beats), a thread blocked 1 s on a condition by the
    injector: its first 26 beats came 2.7x slower than its usual (the machine sharing its CPU),
    then the block. The slow stretch's edges, refined to where the intervals step, took in the
    block, and the whole second was called busy-waiting ("beats 1.0x slower than usual" there).
    A stretch of slow beats ends at a gap; the gap is judged by itself."""
    early = np.tile([0.0024, 0.0065, 0.0065], 9)[:26]
    d = {0: np.r_[np.tile([0.0024, 0.0024, 0.0065], 9)[:26], _noisy(230, 0.0024)],
         1: np.r_[early, [1.0028], _noisy(230, 0.0024)]}
    rows = behavior_timelines(_trace(d, _end_events(d, how=0)))
    r1 = rows[1]
    t_block = 0.01 + early.sum()
    cw = [iv for iv in r1["intervals"] if iv["behavior"] == "conditional-waiting"]
    assert len(cw) == 1 and cw[0]["start_ns"] / 1e9 == pytest.approx(t_block, abs=0.005), r1["intervals"]
    for iv in r1["intervals"]:
        if iv["behavior"] == "busy-waiting":
            assert iv["end_ns"] / 1e9 <= t_block + 0.005, iv   # none over the block


def test_cancelled_thread_failed_pthread_exit_exited():
    d = {0: _noisy(300), 1: _noisy(800), 2: _noisy(500)}
    ev = [(5000, 0.01 + d[0].sum() + 1e-4, "thread_end", 2, 0),
          (5001, 0.01 + d[1].sum() + 1e-4, "thread_end", 0, 0),
          (5002, 0.01 + d[2].sum() + 1e-4, "thread_end", 1, 0),
          (4999, 0.01 + d[1].sum() + 1e-3, "process_exit", 0, 0)]
    rows = {r["thread"]: r for r in behavior_timelines(_trace(d, ev))}
    assert _labels(rows[0])[-1] == "failed" and "cancelled" in rows[0]["intervals"][-1]["detail"]
    assert _labels(rows[1])[-1] == "exited"
    assert _labels(rows[2])[-1] == "exited" and "pthread_exit" in rows[2]["intervals"][-1]["detail"]
    assert rows[0]["intervals"][-1]["start_ns"] / 1e9 == pytest.approx(0.01 + d[0].sum(), abs=1e-6)


def test_process_death_blames_the_thread_it_came_from():
    d = {0: _noisy(500), 1: _noisy(100)}   # thread 1 stopped beating long before the death
    death = 0.01 + d[0].sum() + 5e-4
    ev = [(5000, death, "signal", 11, 0)]   # the fatal signal was recorded by thread 0 (os_tid 5000)
    rows = {r["thread"]: r for r in behavior_timelines(_trace(d, ev))}
    assert _labels(rows[0]) == ["running", "failed"]
    assert rows[0]["intervals"][-1]["start_ns"] / 1e9 == pytest.approx(death, abs=1e-6)
    assert "SIGSEGV" in rows[0]["intervals"][-1]["detail"] and rows[0]["intervals"][-1]["ended_process"]
    # thread 1 did not fail: it ended with the process, and its quiet time before is not its own behaviour
    assert _labels(rows[1]) == ["running", "ended"]
    assert "thread 0 received SIGSEGV" in rows[1]["intervals"][-1]["detail"]
    # a signal in a thread that made no beats: no beating thread is blamed
    rows = {r["thread"]: r for r in behavior_timelines(_trace(d, [(4999, death, "signal", 11, 0)]))}
    assert _labels(rows[0])[-1] == _labels(rows[1])[-1] == "ended"
    assert "another thread received SIGSEGV" in rows[0]["intervals"][-1]["detail"]
    # a non-zero exit status: the thread that called exit exited with it; status 0 is a normal end
    for status in (3, 0):
        rows = {r["thread"]: r for r in behavior_timelines(_trace(d, [(5001, death, "process_exit", status, 0)]))}
        assert _labels(rows[1])[-1] == "exited" and rows[1]["intervals"][-1]["exit_status"] == status
        assert rows[1]["intervals"][-1]["ended_process"]
        assert _labels(rows[0])[-1] == ("ended" if status else "exited")


def test_no_lifecycle_records_gives_ended_and_says_why():
    d = {0: _noisy(200)}
    rows = behavior_timelines(_trace(d, lifecycle=False))
    assert _labels(rows[0]) == ["running", "ended"]
    assert "cannot be told apart" in rows[0]["intervals"][-1]["detail"]
    # lifecycle records exist but the process end is missing (SIGKILL): ended, with a note
    rows = behavior_timelines(_trace(d, [(5000, 0.0, "thread_start", 0, 0)]))
    assert _labels(rows[0]) == ["running", "ended"]
    assert any("not in the trace" in n for n in rows[0]["notes"])


def test_adjusted_beat_rate_is_not_busy_waiting():
    """Heartbeat_HeartRate_Adjust making every 4th call a beat is not a slowdown."""
    d = {0: np.r_[_noisy(300), _noisy(300, period=0.008)]}
    tr = _trace(d, _end_events(d, how=0))
    t_adj = int((0.01 + d[0][:300].sum() - 1e-4) * 1e9)
    tr.monitor = pd.DataFrame([{"run": "r", "process": 0, "os_tid": 5000, "t_ns": t_adj, "t": t_adj / 1e9,
                                "kind": "adjust", "mode": "", "every": 4, "previous_every": 1}])
    tr.__post_init__()
    assert _labels(behavior_timelines(tr)[0]) == ["running", "exited"]
    tr.monitor = tr.monitor.iloc[:0]
    assert "busy-waiting" in _labels(behavior_timelines(tr)[0])


def test_online_reports_attached_with_latency():
    d = {0: np.r_[_noisy(400), [0.5], _noisy(400)]}
    tr = _trace(d, _end_events(d, how=0))
    onset = int((0.01 + d[0][:400].sum()) * 1e9)
    det = onset + 3_000_000
    tr.monitor = pd.DataFrame([
        {"run": "r", "process": 0, "os_tid": 1, "t_ns": det, "t": det / 1e9, "kind": "behavior", "mode": "ring",
         "thread": 0, "behavior": "conditional-waiting", "onset_ns": onset, "onset_seq": 400},
        {"run": "r", "process": 0, "os_tid": 1, "t_ns": det + 10**8, "t": det / 1e9 + 0.1, "kind": "behavior",
         "mode": "ring", "thread": 0, "behavior": "busy-waiting", "onset_ns": det, "onset_seq": 400},
    ])
    tr.__post_init__()
    row = behavior_timelines(tr)[0]
    cw = row["intervals"][1]
    assert cw["online"]["mode"] == "ring"
    assert cw["online"]["latency_s"] == pytest.approx(0.003, abs=1e-6)
    assert [o["matched"] for o in row["online"]] == [True, False]


def test_a_thread_alive_without_beats_until_it_ends_is_idle_then_exits():
    d = {0: _noisy(400), 1: _noisy(400)}
    ev = _end_events(d, how=0)
    t_late = 0.01 + d[1].sum() + 0.5  # thread 1 returns 0.5 s after its last beat (it waited on a join)
    ev = [e if e[0] != 5001 else (5001, t_late, "thread_end", 0, 0) for e in ev]
    ev = [e if e[2] != "process_exit" else (4999, t_late + 0.01, "process_exit", 0, 0) for e in ev]
    rows = behavior_timelines(_trace(d, ev))
    assert _labels(rows[0]) == ["running", "exited"]
    assert _labels(rows[1]) == ["running", "idle", "exited"]
    idle, end = rows[1]["intervals"][1:]
    assert idle["end_ns"] == end["start_ns"] == int(t_late * 1e9)
    assert "no beats for 0.500 s, alive until it ended" in idle["detail"]


def test_online_conditional_wait_report_matches_an_idle_tail():
    d = {0: _noisy(400), 1: _noisy(400)}
    ev = _end_events(d)  # no thread end records: the process's exit ends both
    t_exit = 0.01 + d[1].sum() + 0.5
    ev = [(4999, t_exit, "process_exit", 0, 0)]
    tr = _trace(d, ev)
    onset = int((0.01 + d[1].sum()) * 1e9)
    tr.monitor = pd.DataFrame([{"run": "r", "process": 0, "os_tid": 1, "t_ns": onset + 5_000_000,
                                "t": onset / 1e9 + 0.005, "kind": "behavior", "mode": "ring", "thread": 1,
                                "behavior": "conditional-waiting", "onset_ns": onset, "onset_seq": 400}])
    tr.__post_init__()
    row = behavior_timelines(tr)[1]
    assert _labels(row) == ["running", "idle", "exited"]
    assert row["intervals"][1]["online"]["behavior"] == "conditional-waiting"
    assert [o["matched"] for o in row["online"]] == [True]


def test_an_exit_after_idle_is_scored_from_where_the_thread_stopped():
    from hbtool.analyzers.behavior_eval import scored_intervals

    ivs = [{"behavior": "running", "start_ns": 0}, {"behavior": "idle", "start_ns": 5},
           {"behavior": "exited", "start_ns": 9}]
    assert scored_intervals(ivs) == [{"behavior": "exited", "start_ns": 5}]


# ---------------------------------------------------------------- real traces


@pytest.mark.parametrize("name,thread,behavior", [
    ("pi-condwait", 0, "conditional-waiting"),
    ("jacobi-busywait", 2, "busy-waiting"),
    ("pi-shutdown", 3, "exited"),
    ("matmul-earlyexit", 0, "exited"),
])
def test_sample_traces_injected_behavior_found_at_the_injection(name, thread, behavior):
    tr = read_heartbeats(str(SAMPLES / name))
    truth = json.loads((SAMPLES / name / "truth.json").read_text())
    rows = behavior_timelines(tr)
    sc = score_run(tr, rows, truth, tr.run_names[0])
    assert sc.tp[behavior] >= 1 and sum(sc.fn.values()) == 0, sc.missed
    assert sc.start_errors[behavior] and abs(sc.start_errors[behavior][0]) < 0.01
    hit = [iv for r in rows if r["thread"] == thread for iv in r["intervals"] if iv["behavior"] == behavior]
    assert hit


@pytest.mark.parametrize("name,label", [("pi-segv", "failed"), ("matmul-exit1", "exited")])
def test_sample_traces_process_death_blames_the_thread_it_came_from(name, label):
    tr = read_heartbeats(str(SAMPLES / name))
    truth = json.loads((SAMPLES / name / "truth.json").read_text())
    rows = {r["thread"]: r for r in behavior_timelines(tr)}
    sc = score_run(tr, list(rows.values()), truth, tr.run_names[0])
    assert sc.tp[label] == 1 and sc.fp["failed"] == 0 and sc.fn[label] == 0
    assert max(abs(e) for e in sc.start_errors[label]) < 0.05
    assert rows[truth["thread"]]["intervals"][-1]["ended_process"]
    others = [r for th, r in rows.items() if th != truth["thread"]]
    assert others and all(r["intervals"][-1]["behavior"] == "ended" for r in others)
    assert all(f"thread {truth['thread']} " in r["intervals"][-1]["detail"] for r in others)


def test_truth_episodes_of_each_injection():
    base = {"threads": 2, "beats": 100, "thread": 1, "injected": True, "inject_mono_ns": 2_000_000_000,
            "beats_done": [100, 40]}
    eps = truth_episodes({**base, "inject": "busywait"}, 1_000_000_000)
    assert {"thread": 1, "behavior": "busy-waiting", "start_ns": 1_000_000_000} in eps
    # a fatal end is the victim's alone; its teammates end with the process, unscored
    eps = truth_episodes({**base, "inject": "shutdown", "shutdown_mode": "segv", "beats_done": [60, 40]}, 0)
    assert eps == [{"thread": 1, "behavior": "failed", "start_ns": 2_000_000_000}]
    eps = truth_episodes({**base, "inject": "shutdown", "shutdown_mode": "exit"}, 0)
    assert eps == [{"thread": 1, "behavior": "exited", "start_ns": 2_000_000_000}]
    eps = truth_episodes({**base, "inject": "shutdown", "shutdown_mode": "vanish"}, 0)
    assert eps[1]["behavior"] == "failed" and eps[0] == {"thread": 0, "behavior": "exited", "start_ns": None}


# ---------------------------------------------------------------- the command


def test_cli_text_json_csv(capsys):
    code, out, err = run_cli(capsys, "behavior", SAMPLES / "pi-condwait")
    assert code == 0
    assert "conditional-waiting" in out and "no beats for" in out
    code, out, _ = run_cli(capsys, "behavior", SAMPLES / "pi-condwait", "--format", "json")
    doc = json.loads(out)
    th = {t["thread"]: t for t in doc["threads"]}
    assert set(th) == {0, 1, 2, 3, 4}  # 4: the main thread, which made no beats
    assert th[4]["beats"] == 0 and [iv["behavior"] for iv in th[4]["intervals"]] == ["exited"]
    for t in doc["threads"]:
        assert t["run"] == "pi-condwait"
        for iv in t["intervals"]:
            assert set(iv) >= {"behavior", "start_s", "end_s"} and iv["end_s"] >= iv["start_s"]
    assert [iv["behavior"] for iv in th[0]["intervals"]] == ["running", "conditional-waiting", "running", "exited"]
    code, out, _ = run_cli(capsys, "behavior", SAMPLES / "pi-condwait", "--format", "csv")
    lines = out.strip().splitlines()
    assert lines[0].startswith("run,process,thread,behavior,start_s,end_s")
    assert sum("conditional-waiting" in ln for ln in lines) == 1


def test_cli_openmp_threads_at_the_region_end_are_idle_and_ends_are_not_findings(capsys):
    code, out, _ = run_cli(capsys, "behavior", SAMPLES / "jacobi-busywait")
    lines = out.splitlines()
    assert code == 0
    assert lines[0] == "4 threads; found: 1 busy-waiting; 4 exited normally"
    code, out, _ = run_cli(capsys, "behavior", SAMPLES / "jacobi-busywait", "--format", "json")
    th = {t["thread"]: [iv["behavior"] for iv in t["intervals"]] for t in json.loads(out)["threads"]}
    # the three others wait at the closing barrier for the spinning thread 2: alive, not exited
    assert th == {0: ["running", "idle", "exited"], 1: ["running", "idle", "exited"],
                  2: ["running", "busy-waiting", "running", "exited"], 3: ["running", "idle", "exited"]}
    code, out, _ = run_cli(capsys, "behavior", SAMPLES / "jacobi-normal")
    assert out.splitlines()[0] == "4 threads; found: nothing unusual; 4 exited normally"


def test_cli_legacy_and_table_traces_end_as_ended(capsys):
    code, out, _ = run_cli(capsys, "behavior", SAMPLES / "pi-shutdown.csv", "--format", "json")
    assert code == 0
    ends = [t["intervals"][-1] for t in json.loads(out)["threads"]]
    assert {e["behavior"] for e in ends} == {"ended"}
    assert all("lifecycle" in e["detail"] for e in ends)


def test_cli_options_change_the_labels(capsys):
    code, out, _ = run_cli(capsys, "behavior", SAMPLES / "pi-condwait", "--min-wait", "1", "--format", "json")
    th0 = json.loads(out)["threads"][0]
    assert "conditional-waiting" not in [iv["behavior"] for iv in th0["intervals"]]


@pytest.mark.parametrize("args,msg", [
    (["/nonexistent/trace.hbt"], "No such file"),
    (["--slow-factor", "0.5", "x"], "slow-factor"),
])
def test_cli_bad_input_one_line_exit_2(capsys, args, msg):
    code, out, err = run_cli(capsys, "behavior", *args)
    assert code == 2
    assert msg.lower() in err.lower() or msg.lower() in out.lower()
    assert "Traceback" not in err


def test_plot_behavior_writes_a_png(tmp_path, capsys):
    out = tmp_path / "b.png"
    code, _, err = run_cli(capsys, "plot", "--behavior", SAMPLES / "pi-condwait", SAMPLES / "pi-segv", "-o", out)
    assert code == 0, err
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20000


def test_slowdown_the_online_monitor_did_not_see_as_spinning_is_not_busy_waiting():
    a = _noisy(300)
    d = {0: np.r_[a, _noisy(150, period=0.008), _noisy(300)], 1: _noisy(1200)}
    tr = _trace(d, _end_events(d, how=0))
    onset = int((0.01 + a.sum()) * 1e9)
    stats = {"run": "r", "process": 0, "os_tid": 1, "t_ns": 10**9, "t": 1.0, "kind": "monitor", "mode": "central",
             "messages": 100, "passes": 50, "monitored": 2, "period_us": 1000}
    tr.monitor = pd.DataFrame([stats])
    tr.__post_init__()
    row = behavior_timelines(tr)[0]
    assert _labels(row) == ["running", "exited"]
    assert any("did not see it spinning" in n for n in row["notes"])
    busy = {"run": "r", "process": 0, "os_tid": 1, "t_ns": onset + 5_000_000, "t": onset / 1e9 + 0.005,
            "kind": "behavior", "mode": "central", "thread": 0, "behavior": "busy-waiting", "onset_ns": onset,
            "onset_seq": 300}
    tr.monitor = pd.DataFrame([stats, busy])
    tr.__post_init__()
    row = behavior_timelines(tr)[0]
    assert "busy-waiting" in _labels(row)
    bw = row["intervals"][_labels(row).index("busy-waiting")]
    assert bw["online"] and bw["online"]["latency_s"] == pytest.approx(0.005, abs=0.003)


def test_cli_says_which_view_to_believe_when_an_online_monitor_ran(tracer_built, tmp_path):
    import os

    from conftest import EXAMPLES, hbtool_here, run_hbtool

    env = dict(os.environ, HBTRACE_MONITOR="ring")
    r = run_hbtool("record", "-o", tmp_path / "t", "--", EXAMPLES / "jacobi_omp", "--threads", "2",
                   "--beats", "200", "--size", "64", env=env)
    assert r.returncode == 0, r.stderr
    out = hbtool_here("behavior", tmp_path / "t").stdout.splitlines()
    assert out[1] == "beats: api (the program's own)"
    assert out[2:4] == [
        "online: what the monitor reported during the run, from the beats so far; the timeline is judged",
        "on the whole trace. Where they differ, believe the timeline; the online report says when it was noticed.",
    ]
    assert "online monitor: ring" in out[5]
    out = hbtool_here("behavior", SAMPLES / "jacobi-normal").stdout
    assert "believe the timeline" not in out


def test_a_crash_during_another_threads_exit_blames_the_exit_and_names_the_crash(tracer_built, tmp_path):
    """Thread 1 calls exit(1) while thread 0 still works; the program's exit handler unmaps
    what thread 0 reads, and thread 0 dies of SIGSEGV (tests/programs/exit_teardown.c; a
    cd-hit worker's exit(1) did this in 3 of 4 runs). Thread 1 began the end: exited with
    status 1; thread 0 failed during that exit; main, beatless, ended with the process. Before,
    thread 1 only `ended` with the process, the exit went unreported, and main `failed`."""
    import os
    import subprocess

    from conftest import ROOT, build_traced, hbtool_here

    exe = build_traced(ROOT / "tests" / "programs" / "exit_teardown.c", tmp_path / "exit_teardown")
    env = dict(os.environ, HBTRACE_DIR=str(tmp_path / "t"))
    env.pop("LD_PRELOAD", None)
    r = subprocess.run([str(exe)], env=env, capture_output=True, timeout=60)
    assert r.returncode == -11, r   # SIGSEGV
    out = json.loads(hbtool_here("behavior", tmp_path / "t", "--format", "json").stdout)
    last = {t["thread"]: t["intervals"][-1] for t in out["threads"]}
    assert last[1]["behavior"] == "exited" and last[1]["ended_process"] and last[1]["exit_status"] == 1, last[1]
    assert "thread 0 then received SIGSEGV" in last[1]["detail"], last[1]
    assert last[0]["behavior"] == "failed" and last[0]["during_exit"] and last[0]["ended_process"], last[0]
    assert "during the exit(1) thread 1 called at" in last[0]["detail"], last[0]
    assert last[0]["start_s"] >= last[1]["start_s"]
    assert last[2]["behavior"] == "ended", last[2]   # main, beatless in pthread_join: ended with the process
    info = json.loads(hbtool_here("info", tmp_path / "t", "--format", "json").stdout)
    ended = {t["thread"]: t["ended"] for t in info["threads"]}
    assert ended[1].startswith("called exit(1); the process was then killed by SIGSEGV"), ended
    assert ended[0].startswith("killed by SIGSEGV during the exit(1) another thread called"), ended


def _omp_intervals(tmp_path, cc: str, program: str, *args: str) -> list[dict]:
    """tests/programs/PROGRAM.c built with cc -fopenmp, run by `hbtool record` with 2 threads:
    every interval of `hbtool behavior`'s timelines, none of them busy-waiting or
    conditional-waiting (asserted)."""
    import os
    import subprocess

    from conftest import ROOT, hbtool_here, run_hbtool

    exe = tmp_path / program
    programs = ROOT / "tests" / "programs"
    subprocess.run([cc, "-O2", "-fopenmp", f"-I{programs}", str(programs / f"{program}.c"), "-o", str(exe)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HBTRACE_", "OMP_"))}
    env["OMP_NUM_THREADS"] = "2"
    r = run_hbtool("record", "-o", tmp_path / "t", "--", exe, *args, env=env)
    assert r.returncode == 0 and "done" in r.stdout, r.stderr
    out = json.loads(hbtool_here("behavior", tmp_path / "t", "--format", "json").stdout)
    ivs = [iv for t in out["threads"] for iv in t["intervals"]]
    assert not [iv for iv in ivs if iv["behavior"] in ("busy-waiting", "conditional-waiting")], ivs
    return ivs


@pytest.mark.parametrize("cc", ["gcc", pytest.param("clang", marks=pytest.mark.skipif(
    __import__("shutil").which("clang") is None, reason="clang is not installed (scripts/install.sh installs it)"))])
def test_a_team_waiting_for_long_real_chunks_is_not_busy_waiting(tracer_built, tmp_path, cc):
    """A dynamic loop whose last iteration takes 250 ms of CPU work, four times: each time the
    thread that took it works alone while its teammate waits at the loop's barrier
    (tests/programs/omp_long_chunks.c; cd-hit's loops did this when a teammate skipped its
    share). That is work, as long as the loop's other long units: not busy-waiting (before:
    every such chunk was, 9 reports in 4 cd-hit runs)."""
    ivs = _omp_intervals(tmp_path, cc, "omp_long_chunks", "4", "400", "250")
    long_units = [iv for iv in ivs if "one long unit of work" in iv["detail"]]
    assert len(long_units) >= 3 and all(iv["behavior"] == "running" for iv in long_units), ivs
    assert all(0.2 <= iv["duration_s"] < 1.0 for iv in long_units), long_units


def test_a_long_chunk_full_of_critical_sections_is_work_not_conditional_waiting(tracer_built, tmp_path):
    """One chunk of 300 ms of CPU work per thread that enters a critical section every 0.1 ms
    (tests/programs/omp_critical_chunks.c, as Clustal Omega's loop): no beat for the whole
    chunk, and no CPU time for it either (the tracer writes it with a record that ends 2 ms or
    more without one). A thread that made recorded waits all through was at work, not blocked
    (before: conditional-waiting, 111 reports in 28 clustalo runs)."""
    ivs = _omp_intervals(tmp_path, "gcc", "omp_critical_chunks", "3", "300", "0.1")
    work = [iv for iv in ivs if "recorded waits through it" in iv["detail"]]
    assert len(work) >= 4 and all(iv["behavior"] == "running" and iv["duration_s"] >= 0.25 for iv in work), ivs


def test_a_long_chunk_is_not_judged_against_the_few_units_a_busy_machine_stretched():
    """A dynamic loop of 20 us chunks and one real chunk of 0.2 s in thread 0, its teammate
    beating on meanwhile. The tracer has the CPU time of units of 2 ms or more only: here 60
    of thread 1's chunks that a busy machine stretched to 3 ms while they used 20 us. Their 99th
    percentile is no measure of the loop's units (60 of 16,000), so the long chunk is work,
    not a spin 9,500 times a usual unit (cd-hit on a loaded machine: 20 busy-waiting reports
    in 8 normal runs). As in cd-hit's runs, its loop's long chunks come in a series: thread 1
    took one of 0.05 s that ended before it began, so the chunk is not overdue either (under 8
    times the longest chunk before it, halved for each second since: _overdue_unit)."""
    n1 = 13_000
    d0 = np.r_[np.full(3000, 20e-6), [0.2], np.full(3000, 20e-6)]
    d1 = np.full(n1, 20e-6)
    stretched = np.arange(100, n1, 200)[:60]
    d1[stretched] = 3e-3
    d1[10] = 0.05   # cd-hit's real long chunks (0.05-0.15 s) come a few at a time
    tr = _trace({0: d0, 1: d1}, _end_events({0: d0, 1: d1}, how=0))
    tr.beats["construct"] = "loop cd-hit+0x10d95"
    ends0 = np.round((0.01 + np.cumsum(d0)) * 1e9).astype(np.int64)
    ends1 = np.round((0.01 + np.cumsum(d1)) * 1e9).astype(np.int64)
    tr.cpu = pd.DataFrame({"run": "r", "process": 0, "thread": [0] + [1] * 60, "os_tid": [5000] + [5001] * 60,
                           "t_ns": np.r_[ends0[3000], ends1[stretched]],
                           "gap_ns": np.r_[200_000_000, np.full(60, 3_000_000)],
                           "cpu_ns": np.r_[190_000_000, np.full(60, 20_000)], "queued_ns": -1})
    tr.__post_init__()
    rows = {r["thread"]: r for r in behavior_timelines(tr)}
    assert "busy-waiting" not in _labels(rows[0]), rows[0]["intervals"]


def test_a_gap_spent_waiting_at_a_barrier_is_idle_not_conditional_waiting():
    # both threads stop beating for 0.5 s at the same point; the tracer saw thread 0 wait at
    # a barrier most of that time (for thread 1, which waited on something of its own)
    d = {0: np.r_[_noisy(300), [0.5], _noisy(300)], 1: np.r_[_noisy(300), [0.5], _noisy(300)]}
    tr = _trace(d, _end_events(d, how=0))
    gap_end = [int((0.01 + d[k][:301].sum()) * 1e9) for k in (0, 1)]
    tr.waits = pd.DataFrame({"run": "r", "process": 0, "thread": [0], "os_tid": [5000], "t_ns": [gap_end[0] - 1_000_000],
                             "wait_ns": [450_000_000], "sync": "barrier", "source": "openmp", "construct": ""})
    tr.__post_init__()
    rows = {r["thread"]: r for r in behavior_timelines(tr)}
    assert _labels(rows[0]) == ["running", "idle", "running", "exited"]
    assert "it waited 0.450 s in a barrier, for its team" in rows[0]["intervals"][1]["detail"]
    assert _labels(rows[1]) == ["running", "conditional-waiting", "running", "exited"]


def test_level_of_a_thread_too_long_for_one_pass_is_the_same_curve():
    """The smoothed level of a long thread: a block at a time (exactly the values of one
    pass), and for a window of more beats than WINDOW_BEATS_EXACT, the median of block
    medians (within a few per cent of the exact median, the slowdown at the same place)."""
    from hbtool.analyzers import behavior

    s = BehaviorSettings()
    rng = np.random.default_rng(7)
    # 400,000 intervals of about 1 us: 50 ms windows hold ~50,000 of them; 4x slower in the middle
    d = rng.exponential(0.5e-6, 400_000) + 0.5e-6
    d[150_000:250_000] *= 4
    t = np.r_[0, np.cumsum(np.rint(d * 1e9).astype(np.int64))]
    exact = np.log(pd.Series(d, index=pd.to_timedelta(np.r_[0.0, np.cumsum(d)[:-1]] + d / 2, unit="s"))
                   .rolling(pd.Timedelta(seconds=max(s.window_s, s.smooth * np.median(d))), center=True,
                            min_periods=1).median().to_numpy())
    approx = behavior._window_level(t, d, s)
    err = np.abs(approx - exact)
    assert np.median(err) < 0.01 and np.percentile(err, 90) < 0.05, np.percentile(err, [50, 90])
    # the slowdown: 4x, and its level steps where the exact one does, within 2 % of a window
    assert abs(np.median(approx[170_000:230_000]) - np.median(approx[:100_000]) - np.log(4)) < 0.1
    half = (np.median(exact[:100_000]) + np.median(exact[170_000:230_000])) / 2
    up, exact_up = np.flatnonzero(approx > half), np.flatnonzero(exact > half)
    assert abs(up[0] - exact_up[0]) < 1000 and abs(up[-1] - exact_up[-1]) < 1000, (up[[0, -1]], exact_up[[0, -1]])
    # fewer beats per window: exact, and the same a block at a time
    few = rng.exponential(1e-3, 50_000) + 1e-4
    tf = np.r_[0, np.cumsum(np.rint(few * 1e9).astype(np.int64))]
    whole = behavior._window_level(tf, few, s)
    x = np.log(few)
    whole_med = behavior._running_median(x, 2 * s.smooth + 1)
    old = behavior.ROLLING_BLOCK
    try:
        behavior.ROLLING_BLOCK = 7_000
        np.testing.assert_array_equal(behavior._window_level(tf, few, s), whole)
        np.testing.assert_array_equal(behavior._running_median(x, 2 * s.smooth + 1), whole_med)
    finally:
        behavior.ROLLING_BLOCK = old


def test_waits_found_by_search_are_the_waits_summed_over_all():
    """_waited_in looks only at the waits that can overlap the span (sorted by end, the longest
    bounding how early one may start): the same seconds and kind as summing over every wait,
    overlapping waits included."""
    import numpy as np

    from hbtool.analyzers.behavior import SYNC_WORDS, ThreadWaits, _waited_in

    rng = np.random.default_rng(7)
    start = np.sort(rng.integers(0, 10**9, 5000))
    end = start + rng.integers(1, 3 * 10**6, 5000)       # some overlap the next
    names = np.array(["barrier", "critical", "outside"], dtype=object)
    sync = rng.integers(0, 3, 5000)
    o = np.argsort(end, kind="stable")
    w = ThreadWaits(start[o], end[o], sync[o], names, int((end - start).max()))
    for _ in range(300):
        t0, t1 = np.sort(rng.integers(-10**7, 11 * 10**8, 2))
        over = np.clip(np.minimum(end, t1) - np.maximum(start, t0), 0, None)
        got = _waited_in(w, int(t0), int(t1))
        assert got[0] == pytest.approx(over.sum() / 1e9, rel=1e-12, abs=0)
        if over.any():
            by = np.bincount(sync, weights=over, minlength=3)
            assert got[1] == SYNC_WORDS[str(names[int(np.argmax(by))])]
        else:
            assert got == (0.0, "")


def test_a_teammate_kept_as_a_view_counts_its_beats_to_within_a_block():
    """A thread kept as TeammateView (bounded memory) still tells how many beats it made in a
    span (a thread silent through a gap while a teammate beat on waited for it): within one
    block of TEAMMATE_BLOCK beats of the exact count."""
    import numpy as np

    from hbtool.analyzers.behavior import TEAMMATE_BLOCK, TeammateView, _prepared

    from conftest import make_trace

    rng = np.random.default_rng(3)
    t = np.cumsum(rng.exponential(1e5, 20000) * rng.choice([1, 1, 1, 30], 20000)).astype(np.int64)
    tb = _prepared(make_trace(1, 3), BehaviorSettings(), ("r", 0, 0), t, [], np.full(t.size, "", dtype=object))
    v = TeammateView.of(tb)
    for _ in range(2000):
        a, b = np.sort(rng.integers(int(t[0]) - 10**6, int(t[-1]) + 10**6, 2))
        assert abs(v.beats_between(int(a), int(b)) - tb.beats_between(int(a), int(b))) <= TEAMMATE_BLOCK
