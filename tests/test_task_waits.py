"""Recursive OpenMP tasks (kalign's guide tree): the runtime runs queued tasks inside a taskwait
and in the barrier that closes a region, and the tracer cuts the wait there, with GCC's libgomp
(gomp.c) and LLVM's libomp (ompt.c). Before, a taskwait's wait spanned every task run inside it,
a thread's waits nested in each other, and kalign's thread 0 waited 776 % of its run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from hbtool.io import read_heartbeats

from conftest import assert_tasks_are_not_inside_waits, hbtool_here, run_hbtool
from test_blame import diagnose

PROGRAMS = Path(__file__).parent / "programs"
COMPILERS = ["gcc", pytest.param("clang", marks=pytest.mark.skipif(
    shutil.which("clang") is None, reason="clang is not installed (scripts/install.sh installs it)"))]


def _builder(d: Path, program: str):
    def build(cc: str) -> Path:
        exe = d / f"{program}_{cc}"
        if not exe.exists():
            subprocess.run([cc, "-O2", "-fopenmp", f"-I{PROGRAMS}", str(PROGRAMS / f"{program}.c"), "-o",
                            str(exe)], check=True)
        return exe
    return build


@pytest.fixture(scope="module")
def tree(tmp_path_factory, tracer_built):
    return _builder(tmp_path_factory.mktemp("tree"), "omp_task_tree")


@pytest.fixture(scope="module")
def long_tasks(tmp_path_factory, tracer_built):
    return _builder(tmp_path_factory.mktemp("long_tasks"), "omp_long_tasks")


MONITORED = {"OMP_NUM_THREADS": "2", "OMP_MAX_ACTIVE_LEVELS": "1", "HBTRACE_MONITOR": "central",
             "HBTRACE_MONITOR_BEATS": "openmp"}


@pytest.mark.parametrize("cc", COMPILERS)
def test_a_thread_running_recursive_tasks_waits_less_than_its_run(tmp_path, tree, cc):
    out = tmp_path / "t"
    depth, rounds = 7, 2
    r = run_hbtool("record", "-q", "-o", out, "--", tree(cc), depth, 2, 40, rounds,
                   env=dict(os.environ, OMP_NUM_THREADS="2", OMP_MAX_ACTIVE_LEVELS="1"))
    assert r.returncode == 0 and r.stdout == f"done {rounds * 2 ** depth}\n", r.stderr
    trace = read_heartbeats(out)
    tasks = trace.beats[trace.beats["construct"].str.startswith("task ")]
    assert len(tasks) == rounds * (2 ** (depth + 1) - 2)   # every node but the root is a task
    assert_tasks_are_not_inside_waits(trace)
    span = trace.beats.groupby("thread")["t_ns"].agg(lambda t: t.max() - t.min())
    waited = trace.waits.groupby("thread")["wait_ns"].sum()
    assert (waited < span).all(), (waited, span)


@pytest.mark.parametrize("cc", COMPILERS)
def test_a_thread_waiting_while_its_teammate_runs_tasks_it_made_did_not_stop(tmp_path, tree, cc):
    """After the tree, the walking thread makes 600 tasks in a nested region, a team of one
    (kalign's last merges), half of them if(0), and runs them while its teammate waits in the
    region's closing barrier: no task was there for it to take. The tracer marks a task its
    maker ran unshared, and it is no share of the team's work: before, the waiting thread's
    share of the units fell 20x and more, and it was called shutdown ("it stopped working while
    its team went on"). In the tree, too, each thread runs most of the tasks it made (depth
    first, in its taskwaits) and takes a few of its teammate's."""
    out = tmp_path / "t"
    r = run_hbtool("record", "-q", "-o", out, "--", tree(cc), 7, 2, 0, 1, 600,
                   env=dict(os.environ, OMP_NUM_THREADS="2", OMP_MAX_ACTIVE_LEVELS="1"))
    assert r.returncode == 0 and r.stdout == f"done {2 ** 7 + 600}\n", r.stderr
    beats = read_heartbeats(out).beats
    tasks = beats[beats["construct"].str.startswith("task ")]
    assert len(tasks) == 2 ** 8 - 2 + 600, (beats.groupby(["thread", "construct"], observed=True).size(),
                                           r.stderr)
    unshared = tasks[tasks["construct"].str.endswith(" unshared")]
    walker = unshared["thread"].value_counts().idxmax()
    assert (unshared["thread"] == walker).sum() >= 600 and len(tasks) - len(unshared) < 64
    d = diagnose(out)
    assert [t["status"] for t in d.values()] == ["normal", "normal"], d


@pytest.mark.parametrize("cc", COMPILERS)
def test_a_thread_that_waits_in_the_last_regions_closing_barrier_did_not_end_early(tmp_path, tree, cc):
    """The run ends with the walking thread's 600 tasks in a team of one (LAST 0: no region
    after the walk), and its teammate waits in the walk's closing barrier for the last 90 % of
    the run: its beats end early, it did not. libgomp's worker beats when its part of the
    region ends, before that barrier, and writes its wait there only when it opens its next
    region, so the last region's is never written: its GTR read 0.10 and it was called
    shutdown. Its run ends where the master left the region (diagnosis.presence_ends)."""
    out = tmp_path / "t"
    r = run_hbtool("record", "-q", "-o", out, "--", tree(cc), 7, 2, 0, 1, 600, -1, 0,
                   env=dict(os.environ, OMP_NUM_THREADS="2", OMP_MAX_ACTIVE_LEVELS="1"))
    assert r.returncode == 0 and r.stdout == f"done {2 ** 7 + 600}\n", r.stderr
    trace = read_heartbeats(out)
    ends = trace.beats[~trace.beats["construct"].str.startswith("parallel main")].groupby("thread")["t"].max()
    assert ends.min() < 0.5 * ends.max(), ends   # one thread's last task long before the other's
    d = diagnose(out)
    assert [t["status"] for t in d.values()] == ["normal", "normal"], d
    assert all(0.9 < t["GTR"] < 1.1 for t in d.values()), d
    # the master's leaving read from the file a piece at a time, or from the whole trace: alike
    import pandas as pd

    from hbtool.analyzers.diagnosis import features_table
    pd.testing.assert_frame_equal(features_table(trace), features_table(read_heartbeats(out, stream=True)))


@pytest.mark.parametrize("cc", COMPILERS)
def test_the_monitor_reports_a_thread_waiting_in_the_runtime_at_exit_alive_until_then(tmp_path, tree, cc):
    """The same run under the online monitor: at the exit, a thread that waits in the runtime
    (the walk's closing barrier, the pool, the master's serial part) is reported exited from
    the exit, not from its last beat (before: the idle thread "exited from 0.15 s", 1.2 s
    before it did, which the offline timeline contradicts). Nothing else is reported."""
    from test_monitor import BEAT, COND, BUSY, EXITED, behaviors, read_trace

    out = tmp_path / "t"
    r = run_hbtool("record", "-q", "-o", out, "--", tree(cc), 7, 2, 0, 1, 600, -1, 0,
                   env=dict(os.environ, OMP_NUM_THREADS="2", OMP_MAX_ACTIVE_LEVELS="1",
                            HBTRACE_MONITOR="central", HBTRACE_MONITOR_BEATS="openmp"))
    assert r.returncode == 0, r.stderr
    tr = read_trace(next(out.glob("*.hbt")))
    beats = tr["rec"][tr["rec"]["kind"] == BEAT]
    end = int(beats["t_ns"].max())
    by_thread = {int(th): int(beats["t_ns"][beats["thread"] == th].max()) for th in set(beats["thread"].tolist())}
    if cc == "gcc":   # one thread's beats end a second early (libomp's worker beats again at the region's end)
        assert min(by_thread.values()) < end - 500e6, by_thread
    got = behaviors(tr)
    assert not [d for d in got if d["bhv"] in (BUSY, COND)], got
    exited = {d["thread"]: d for d in got if d["bhv"] == EXITED}
    assert set(exited) == {0, 1}, got
    assert all(d["onset"] >= end - 5e6 for d in exited.values()), (exited, end)


@pytest.mark.parametrize("cc", COMPILERS)
def test_a_thread_slowed_while_it_ran_tasks_alone_is_found_against_normal_runs(tmp_path, tree, cc):
    """Thread 0 walks a tree of 126 tasks with its teammate, then runs 400 tasks of a team of
    one alone, slowed 3x from its 100th beat on (kalign's slowed victims: its threads share too
    few windows of any construct for the work shift, and its task units range over orders of
    magnitude, so neither its teammate nor its own earlier units say what its units should
    take). Against a model of three normal runs its units took 3x the same constructs' (UR),
    its teammate's 1x: slowed down (memoryleak); before, normal."""
    env = dict(os.environ, OMP_NUM_THREADS="2", OMP_MAX_ACTIVE_LEVELS="1")
    args = [6, 1, 0, 1, 400, 0]
    normal = []
    for i in range(3):
        normal.append(tmp_path / f"normal{i}")
        r = run_hbtool("record", "-q", "-o", normal[-1], "--", tree(cc), *args, env=env)
        assert r.returncode == 0, r.stderr
    model = tmp_path / "model.json"
    r = hbtool_here("train", "--normal", *normal, "-o", model)
    assert r.returncode == 0, r.stderr
    assert json.loads(model.read_text())["units"], "no units per construct in the model"
    slow = tmp_path / "slow"
    r = run_hbtool("record", "-q", "-o", slow, "--inject", "slow", "--thread", 0, "--beat", 100, "--",
                   tree(cc), *args, env=env)
    assert r.returncode == 0, r.stderr
    truth = json.loads((slow / "inject-truth.json").read_text())
    assert truth["fired"] and truth["thread"] == 0
    r = hbtool_here("diagnose", slow, "--model", model, "--format", "json")
    assert r.returncode == 0, r.stderr
    got = {t["thread"]: t for t in json.loads(r.stdout)["threads"]}
    assert got[0]["status"] == "memoryleak" and "unit ratio" in got[0]["reason"], got[0]
    assert got[1]["status"] == "normal", got[1]
    assert got[0]["UR"] > 2 * got[0]["UR_team"] and got[0]["UR_against"] == "the model's normal runs"
    # ... and against one normal run given as the reference
    r = hbtool_here("diagnose", slow, "--reference", normal[0], "--format", "json")
    got = {t["thread"]: t for t in json.loads(r.stdout)["threads"]}
    assert got[0]["status"] == "memoryleak" and got[0]["UR_against"] == "the reference run", got[0]
    for i in range(3):   # and its normal runs, judged by the same model, are normal
        r = hbtool_here("diagnose", normal[i], "--model", model, "--format", "json")
        assert [t["status"] for t in json.loads(r.stdout)["threads"]] == ["normal", "normal"], r.stdout


@pytest.mark.parametrize("cc", COMPILERS)
def test_every_task_of_thousands_made_at_once_is_named_by_its_construct(tmp_path, long_tasks, cc):
    """One thread makes 4000 short tasks with no throttling (libomp's deques grow), so
    thousands are made and not yet run at once; each task's beat is named by its task
    construct. libomp gives a tool no place of its own in a task (ompt.c keeps a table from
    the task's address to its construct): with one slot per address, 1650 of the 4000 beats
    had no construct, and in CI a run of omp_task_tree lost 42 of its 854 tasks' names."""
    out = tmp_path / "t"
    r = run_hbtool("record", "-q", "-o", out, "--", long_tasks(cc), 4000, 0.05, 1, 1,
                   env=dict(os.environ, OMP_NUM_THREADS="2", KMP_ENABLE_TASK_THROTTLING="0"))
    assert r.returncode == 0 and r.stdout == "done 4001\n", r.stderr
    beats = read_heartbeats(out).beats
    named = beats["construct"].str.startswith("task ")
    assert named.sum() == 4001, beats.groupby("construct", observed=True).size()
    assert (beats["construct"] != "").all(), beats.groupby("construct", observed=True).size()


@pytest.mark.parametrize("cc", COMPILERS)
def test_the_monitor_lets_the_first_long_tasks_of_a_construct_run(tmp_path, long_tasks, cc):
    """400 tasks of 0.5 ms, then ten tasks of 150 ms one at a time, each while the teammate
    waits for it (in its taskwait, or in the region's closing barrier): the first long tasks
    are longer than any unit either thread did before, and nothing says yet what a task of
    that construct takes. The monitor now judges a thread in a task by its construct's tasks
    and, before it has measured HBT_TASK_WARM of them, calls nothing in it
    busy-waiting; before, every run had the first long task's thread busy-waiting 3 ms in
    (kalign: 4 false reports in 1 of 3 normal runs). Offline, the task its maker ran
    ("unshared") and the tasks its teammate took are units of one construct: before, the
    one long task thread 0 took was compared with no other, and called busy-waiting."""
    from test_monitor import BUSY, COND, behaviors, read_trace

    out = tmp_path / "t"
    r = run_hbtool("record", "-q", "-o", out, "--", long_tasks(cc), 400, 0.5, 10, 150,
                   env=dict(os.environ, **MONITORED))
    assert r.returncode == 0 and r.stdout == "done 410\n", r.stderr
    got = behaviors(read_trace(next(out.glob("*.hbt"))))
    assert not [d for d in got if d["bhv"] in (BUSY, COND)], got
    r = hbtool_here("behavior", out, "--format", "json")
    assert r.returncode == 0, r.stderr
    found = [(t["thread"], i["behavior"], i["detail"]) for t in json.loads(r.stdout)["threads"]
             for i in t["intervals"] if i["behavior"] in ("busy-waiting", "conditional-waiting")]
    assert not found, found


@pytest.mark.parametrize("cc", COMPILERS)
def test_the_monitor_finds_a_spin_at_a_tasks_end_against_its_constructs_tasks(tmp_path, tree, cc):
    """Thread 0 walks a tree of 510 tasks (leaves of 2 ms), running its children in its
    taskwaits, and spins 300 ms at its 200th beat, the end of a task: it is back in the task
    whose taskwait ran that one, a task of a construct whose tasks took at most a few
    milliseconds, and is reported busy-waiting once that task is overdue (8x the second
    longest). Before, the thread was in no unit the monitor knew, its teammate took tasks
    meanwhile, and nothing was reported (kalign: 2 of 3 busy faults, 1 of 3 cond faults
    missed)."""
    from test_monitor import BUSY, COND, behaviors, read_trace

    out = tmp_path / "t"
    r = run_hbtool("record", "-q", "-o", out, "--inject", "busy", "--thread", 0, "--beat", 200,
                   "--inject-wait-ms", 300, "--", tree(cc), 8, 2, 0, 1, 0, 0, env=dict(os.environ, **MONITORED))
    assert r.returncode == 0 and r.stdout == "done 256\n", r.stderr
    truth = json.loads((out / "inject-truth.json").read_text())
    assert truth["fired"] and truth["thread"] == 0, truth
    t0 = truth["fired_at"]["mono_ns"]
    got = behaviors(read_trace(next(out.glob("*.hbt"))))
    busy = [d for d in got if d["bhv"] == BUSY and d["thread"] == 0]
    assert busy, got
    assert t0 - 1e6 <= busy[0]["onset"] <= t0 + 1e6 and busy[0]["at"] < t0 + 200e6, (busy[0], t0)
    assert not [d for d in got if d["bhv"] in (BUSY, COND) and d["thread"] != 0], got


@pytest.mark.parametrize("cc", COMPILERS)
def test_behavior_finds_a_spin_at_a_tasks_end_against_the_few_tasks_of_its_construct_before_it(tmp_path, tree, cc):
    """Thread 0 walks a tree of 510 tasks and spins 300 ms at its 24th beat, a task's end, while
    its teammate goes on with the tasks of its own subtree: nobody waits for it. Offline, the
    silence is measured against the 13-16 tasks of its construct that ended before it (a task
    construct's are never halved, and 8 are enough, as the monitor keeps them; before, 32
    were needed, and the spin was `running`: kalign's 1 s spin at thread 1's first tasks of a
    construct, the one busy fault of 4 missed)."""
    out = tmp_path / "t"
    r = run_hbtool("record", "-q", "-o", out, "--inject", "busy", "--thread", 0, "--beat", 24,
                   "--inject-wait-ms", 300, "--", tree(cc), 8, 2, 0, 1, 0, 0,
                   env=dict(os.environ, OMP_NUM_THREADS="2", OMP_MAX_ACTIVE_LEVELS="1"))
    assert r.returncode == 0 and r.stdout == "done 256\n", r.stderr
    truth = json.loads((out / "inject-truth.json").read_text())
    assert truth["fired"] and truth["thread"] == 0, truth
    r = hbtool_here("behavior", out, "--format", "json")
    assert r.returncode == 0, r.stderr
    threads = {t["thread"]: t for t in json.loads(r.stdout)["threads"]}
    busy = [i for i in threads[0]["intervals"] if i["behavior"] == "busy-waiting"]
    assert busy and abs(busy[0]["start_s"] - truth["fired_at"]["trace_s"]) < 0.005, threads[0]["intervals"]
    assert "while its teammates beat on" in busy[0]["detail"], busy[0]
    assert not [i for i in threads[1]["intervals"] if i["behavior"] in ("busy-waiting", "conditional-waiting")]
