"""Recursive OpenMP tasks (kalign's guide tree): the runtime runs queued tasks inside a taskwait
and in the barrier that closes a region, and the tracer cuts the wait there, with GCC's libgomp
(gomp.c) and LLVM's libomp (ompt.c). Before, a taskwait's wait spanned every task run inside it,
a thread's waits nested in each other, and kalign's thread 0 waited 776 % of its run."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from hbtool.io import read_heartbeats

from conftest import assert_tasks_are_not_inside_waits, run_hbtool
from test_blame import diagnose

PROGRAMS = Path(__file__).parent / "programs"
COMPILERS = ["gcc", pytest.param("clang", marks=pytest.mark.skipif(
    shutil.which("clang") is None, reason="clang is not installed (scripts/install.sh installs it)"))]


@pytest.fixture(scope="module")
def tree(tmp_path_factory, tracer_built):
    d = tmp_path_factory.mktemp("tree")

    def build(cc: str) -> Path:
        exe = d / f"omp_task_tree_{cc}"
        if not exe.exists():
            subprocess.run([cc, "-O2", "-fopenmp", f"-I{PROGRAMS}", str(PROGRAMS / "omp_task_tree.c"), "-o",
                            str(exe)], check=True)
        return exe
    return build


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
    assert len(tasks) == 2 ** 8 - 2 + 600
    unshared = tasks[tasks["construct"].str.endswith(" unshared")]
    walker = unshared["thread"].value_counts().idxmax()
    assert (unshared["thread"] == walker).sum() >= 600 and len(tasks) - len(unshared) < 64
    d = diagnose(out)
    assert [t["status"] for t in d.values()] == ["normal", "normal"], d
