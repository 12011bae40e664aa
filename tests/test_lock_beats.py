"""A team that shares its work out by hand under an OpenMP lock (MUSCLE 5: one parallel region,
its threads taking the next pair of sequences under a lock) has no worksharing construct the
tracer could beat at: before lock beats, 3 automatic beats a thread in a run of seconds, and
`diagnose` and `behavior` had nothing to judge. Each omp_set_lock and omp_set_nest_lock is now a
LOCK beat (construct kind `lock`, the call site) followed by a critical wait for the lock, with
GCC's libgomp (the tracer's wrappers) and LLVM's libomp (its OMPT tool).
tests/programs/omp_lock_queue.c prints the calls each thread made."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from hbtool.io.hbt import read_hbt_file

from conftest import ROOT, TRACER, hbtool_here, run_hbtool
from test_ompt_beats import REASON as CLANG_REASON
from test_openmp_beats import names

PROGRAMS = ROOT / "tests" / "programs"
BEAT, WAIT = 1, 17
SRC_OPENMP, EV_LOCK, SYNC_CRITICAL = 1, 5, 3
ITEMS, US = 400, 2000
COMPILERS = ["gcc", pytest.param("clang", marks=pytest.mark.skipif(CLANG_REASON is not None,
                                                                    reason=CLANG_REASON or ""))]


@pytest.fixture(scope="module")
def queue(tracer_built, tmp_path_factory):
    d = tmp_path_factory.mktemp("lockq")
    out = {}
    for cc in ("gcc", "clang"):
        if cc == "clang" and CLANG_REASON is not None:
            continue
        exe = d / f"omp_lock_queue_{cc}"
        subprocess.run([cc, "-O2", "-fopenmp", "-Wall", "-Wextra", "-Werror", str(PROGRAMS / "omp_lock_queue.c"),
                        "-o", str(exe)], check=True)
        out[cc] = exe
    return out


def _env(**kw) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HBTRACE_", "OMP_", "KMP_"))}
    env.pop("LD_PRELOAD", None)
    env["OMP_NUM_THREADS"] = "2"
    env.update({k: str(v) for k, v in kw.items()})
    return env


def calls(stdout: str) -> dict[int, tuple[int, int]]:
    """Per OpenMP thread: (omp_set_lock calls, omp_set_nest_lock calls), as the program counted."""
    out = {}
    for line in stdout.splitlines():
        w = line.split()
        if w[0] == "locks":
            out[int(w[1])] = (int(w[2]), int(w[3]))
    return out


@pytest.mark.parametrize("cc", COMPILERS)
def test_every_lock_a_thread_asks_for_is_a_beat_then_a_wait(tmp_path, queue, cc):
    """Per thread, one LOCK beat and one critical wait of a lock construct per call the program
    made in the parallel region (a nest lock taken again by its owner too: libomp reports that
    apart, and the wait its request opened must end there), none for the lock the master takes
    in the serial part (a thread of no team has no OpenMP number: every pthread would be
    thread 0); two lock constructs at least (the plain lock's call sites, the nest lock's)."""
    plain = subprocess.run([str(queue[cc]), "queue", "40", "200"], env=_env(), capture_output=True, text=True, timeout=60)
    out = tmp_path / "t"
    r = run_hbtool("record", "-q", "-o", out, "--", queue[cc], "queue", "40", "200", env=_env())
    assert r.returncode == plain.returncode == 0 and r.stderr == plain.stderr == "", (r.stderr, plain.stderr)
    want = calls(r.stdout)
    # (which thread takes which item is the machine's doing; the totals are the program's)
    for run in (r.stdout, plain.stdout):
        assert run.splitlines()[-1] == "sum ok" and sum(n for n, _ in calls(run).values()) == 2 * 40 + 2, run
    (f,) = sorted(out.glob("*.hbt"))
    rec = read_hbt_file(f)["records"]
    nm = names(rec)
    lock_ids = {k for k, v in nm.items() if v.split("\t")[0] == "lock"}
    assert len(lock_ids) >= 2, nm
    src, ev = rec["flags"] & 15, rec["flags"] >> 4
    beats = (rec["kind"] == BEAT) & (src == SRC_OPENMP) & (ev == EV_LOCK)
    waits = (rec["kind"] == WAIT) & (src == SRC_OPENMP) & (ev == SYNC_CRITICAL) & np.isin(rec["loop"], list(lock_ids))
    assert set(rec["loop"][beats].tolist()) <= lock_ids
    for t, (n, nest) in want.items():
        assert int((beats & (rec["thread"] == t)).sum()) == n + nest, (t, n, nest)
        assert int((waits & (rec["thread"] == t)).sum()) == n + nest, (t, n, nest)


def behavior(out: Path) -> dict[int, list[dict]]:
    r = hbtool_here("behavior", out, "--format", "json")
    assert r.returncode == 0, r.stderr
    return {t["thread"]: t["intervals"] for t in json.loads(r.stdout)["threads"]}


def findings(ivs: list[dict]) -> list[str]:
    return [iv["behavior"] for iv in ivs if iv["behavior"] in ("busy-waiting", "conditional-waiting", "failed")]


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("kind,label", [("normal", None), ("busy", "busy-waiting"), ("cond", "conditional-waiting")])
def test_a_fault_in_a_lock_queue_is_found_on_its_thread(tmp_path, queue, cc, kind, label):
    """The injector's busy and cond faults (400 ms) at thread 1's 150th beat, a lock it asks
    for (before it has it: the teammate goes on taking items): `behavior` names that thread
    with that behaviour, from the injection, and nothing else; a normal run has no finding.
    Before lock beats the team made 2 beats a thread here, and nothing was found."""
    out = tmp_path / kind
    fault = [] if kind == "normal" else ["--inject", kind, "--inject-wait-ms", "400", "--thread", "1",
                                         "--beat", "150"]
    r = run_hbtool("record", "-q", "-o", out, *fault, "--", queue[cc], "queue", str(ITEMS), str(US), env=_env())
    assert r.returncode == 0 and "sum ok" in r.stdout, r.stderr
    tl = behavior(out)
    if label is None:
        assert findings(tl[0]) == [] and findings(tl[1]) == [], tl
        return
    truth = json.loads((out / "inject-truth.json").read_text())
    assert truth["fired"] and truth["thread"] == 1, truth
    t0 = truth["fired_at"]["trace_s"]
    got = [iv for iv in tl[1] if iv["behavior"] == label]
    assert len(got) == 1 and abs(got[0]["start_s"] - t0) < 0.05 and got[0]["duration_s"] > 0.3, tl[1]
    assert findings(tl[1]) == [label] and findings(tl[0]) == [], tl


def diagnose(out: Path) -> dict[int, dict]:
    r = hbtool_here("diagnose", out, "--format", "json")
    assert r.returncode == 0, r.stderr
    return {t["thread"]: t for t in json.loads(r.stdout)["threads"]}


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("kind", ["normal", "slow"])
def test_a_thread_slowed_early_in_a_light_phase_after_a_heavy_one_is_found(tmp_path, queue, cc, kind):
    """Items dealt to the threads in turn under a lock (every thread makes as many beats), as
    MUSCLE 5 does: a heavy phase (200 items of 10 ms: 240 beats a thread) then a light one (600
    items of 0.1 ms: 600 beats), whose beats fill most windows of the run's work shift but hold
    3 % of its work. The injector slows thread 1 3x from its beat 300, early in the light phase:
    `diagnose` calls it memoryleak by its work shift (over 2) from about that beat, its teammate
    normal; a normal run's threads are normal. The light construct, most of whose windows came
    after the slowdown, hid it when measured against its own usual ratio; its raw ratio, which
    shifts across the split, does not. (Its units are wall time, too short for the CPU records:
    the module runs with the machine to itself, tests/conftest.py.)"""
    out = tmp_path / kind
    fault = [] if kind == "normal" else ["--inject", "slow", "--thread", "1", "--beat", "300"]
    r = run_hbtool("record", "-q", "-o", out, *fault, "--", queue[cc], "dealt", "200", "10000", "600", "100",
                   env=_env())
    assert r.returncode == 0 and "sum ok" in r.stdout, r.stderr
    d = diagnose(out)
    assert d[0]["beats"] == d[1]["beats"], d
    if kind == "normal":
        assert d[0]["status"] == d[1]["status"] == "normal", d
        return
    assert d[1]["status"] == "memoryleak" and d[1]["WS"] > 2 and "work shift" in d[1]["reason"], d[1]
    assert abs(d[1]["WS_beat"] - 300) < 60 and d[0]["status"] == "normal", d
