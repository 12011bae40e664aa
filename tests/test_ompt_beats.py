"""Automatic beats and waits of programs on LLVM's OpenMP runtime (libomp, clang -fopenmp):
the tracer's OMPT tool (native_tracer/src/ompt.c; issue 15).

tests/programs/ompt_schedules.c prints, per case, what the tracer must record as the program
itself saw it (which thread ran which iteration, construct and task); the records are read raw
(kind 1 with source openmp, kind 17) with hbtool.io.hbt.read_hbt_file.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from hbtool.io import read_heartbeats
from hbtool.io.hbt import read_hbt_file

from conftest import ROOT, TRACER, assert_tasks_are_not_inside_waits, run_hbtool
from test_openmp_beats import names

PROGRAMS = ROOT / "tests" / "programs"
LIB = TRACER / "lib" / "libhbtrace.so"
NPB = ROOT.parent / "shared" / "workloads" / "npb-omp"
BEAT, WAIT = 1, 17
SRC_OPENMP = 1
EVENTS = {"chunk": 1, "ws": 2, "task": 3, "implicit": 4}
SYNC_BARRIER, SYNC_TASKWAIT, SYNC_CRITICAL, SYNC_ORDERED = 1, 2, 3, 4
CASES = ["static", "static_chunked", "dynamic", "guided", "runtime", "nonmonotonic", "ull", "ordered",
         "ordered_static", "collapse", "nowait", "sections", "single", "tasks", "nested", "teamsize",
         "critical", "barrier"]


def _clang_reason() -> str | None:
    if not shutil.which("clang"):
        return "clang is not installed (scripts/install.sh installs clang and libomp-dev)"
    r = subprocess.run(["clang", "-fopenmp", "-x", "c", "-", "-o", os.devnull], input="#include <omp.h>\n"
                       "#include <omp-tools.h>\nint main(void){return omp_get_max_threads() < 1;}\n",
                       capture_output=True, text=True)
    if r.returncode != 0:
        return f"clang -fopenmp cannot build with LLVM's OpenMP runtime (install libomp-dev): {r.stderr[-300:]}"
    return None


REASON = _clang_reason()
pytestmark = [pytest.mark.skipif(REASON is not None, reason=REASON or ""),
              pytest.mark.usefixtures("tracer_built")]


def clang(tmp: Path, out: str, *srcs_and_flags: str) -> Path:
    exe = tmp / out
    subprocess.run(["clang", "-O1", "-fopenmp", *map(str, srcs_and_flags), "-o", str(exe)], check=True,
                   capture_output=True, text=True)
    return exe


@pytest.fixture(scope="module")
def progs(tracer_built, tmp_path_factory):
    d = tmp_path_factory.mktemp("ompt")
    return {
        "cases": clang(d, "ompt_schedules", PROGRAMS / "ompt_schedules.c"),
        "tool": clang(d, "ompt_tool.so", "-shared", "-fPIC", PROGRAMS / "ompt_tool.c"),
        "own": clang(d, "ompt_own_tool", PROGRAMS / "ompt_schedules.c", PROGRAMS / "ompt_tool.c"),
    }


def env_for(tmp_path: Path, preload: bool = True, **kw) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HBTRACE_", "OMP_", "KMP_"))}
    env.pop("LD_PRELOAD", None)
    env["HBTRACE_DIR"] = str(tmp_path / "trace")
    if preload:
        env["LD_PRELOAD"] = str(LIB)
    env.update({k: str(v) for k, v in kw.items()})
    return env


def run(exe: Path, case: str, env: dict) -> subprocess.CompletedProcess:
    r = subprocess.run([str(exe), case], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def records(tmp_path: Path) -> dict | None:
    files = sorted((tmp_path / "trace").glob("*.hbt"))
    assert len(files) <= 1, files
    return read_hbt_file(files[0])["records"] if files else None


def omp_beats(rec: dict) -> np.ndarray:
    return (rec["kind"] == BEAT) & ((rec["flags"] & 0xF) == SRC_OPENMP)


def waits(rec: dict, sync: int) -> np.ndarray:
    return (rec["kind"] == WAIT) & ((rec["flags"] & 0xF) == SRC_OPENMP) & ((rec["flags"] >> 4) == sync)


def wait_ns(rec: dict, sel: np.ndarray) -> np.ndarray:
    return (rec["iter"][sel].astype(np.int64) << 32) | rec["aux"][sel].astype(np.int64)


def truth(stdout: str) -> tuple[dict, dict, tuple | None]:
    expect: dict = {e: Counter() for e in EVENTS}
    barriers: Counter = Counter()
    owners = None
    for line in stdout.splitlines():
        w = line.split()
        if w[0] == "expect":
            expect[w[1]][int(w[2])] = int(w[3])
        elif w[0] == "barriers":
            barriers[int(w[1])] = int(w[2])
        elif w[0] == "owners":
            owners = (int(w[1]), [int(x) for x in w[2:]])
    return expect, barriers, owners


def check_chunks(rec: dict, chunk: int, owners: list[int]) -> Counter:
    """The chunk beats partition the loop's iterations, each chunk run by the thread that beat
    for it; with a fixed chunk size, they are exactly the chunks the program saw. The truth
    per thread, from the program's owners."""
    sel = omp_beats(rec) & ((rec["flags"] >> 4) == EVENTS["chunk"])
    starts = sorted(zip(rec["iter"][sel].tolist(), rec["thread"][sel].tolist()))
    firsts = [s for s, _ in starts]
    assert firsts and firsts[0] == 0 and len(set(firsts)) == len(firsts), firsts
    bounds = firsts[1:] + [len(owners)]
    count = dict(zip(rec["iter"][sel].tolist(), rec["aux"][sel].tolist()))   # each chunk's iterations
    for (s, t), e in zip(starts, bounds):
        assert set(owners[s:e]) == {t}, (s, e, t, owners[s:e])
        assert count[s] == e - s, (s, e, count[s])
    runs = [i for i in range(1, len(owners)) if owners[i] != owners[i - 1]]
    assert set(runs) <= set(firsts)
    if chunk:
        assert firsts == list(range(0, len(owners), chunk))
        return Counter(owners[k] for k in range(0, len(owners), chunk))
    return Counter(t for _, t in starts)


@pytest.mark.parametrize("case", CASES)
def test_beats_per_thread_equal_the_programs_truth(progs, tmp_path, case):
    plain = subprocess.run([str(progs["cases"]), case], env=env_for(tmp_path, preload=False, HBTRACE_DISABLE=1),
                           capture_output=True, text=True, timeout=60)
    r = run(progs["cases"], case, env_for(tmp_path))
    assert r.stderr == "" and plain.returncode == 0
    expect, barriers, owners = truth(r.stdout)
    rec = records(tmp_path)
    b = omp_beats(rec)
    ev = rec["flags"] >> 4
    if owners:
        expect["chunk"] = check_chunks(rec, *owners)
    for name, code in EVENTS.items():
        got = Counter(rec["thread"][b & (ev == code)].tolist())
        assert got == expect[name], (name, got, expect[name])
    # every beat names its construct: the kind it is of, and where
    nm = names(rec)
    kinds = {"chunk": ("loop",), "ws": ("loop", "sections", "single"), "task": ("task",),
             "implicit": ("parallel",)}
    for name, code in EVENTS.items():
        for cid in set(rec["loop"][b & (ev == code)].tolist()):
            assert cid in nm and nm[cid].split("\t")[0] in kinds[name], (name, cid, nm.get(cid))
            assert "ompt_schedules+0x" in nm[cid]
    # iter of the other events: the thread's count of that construct's beats, from 1 (counted
    # per OS thread: a nested team's threads share the number of the outer thread)
    for code in (2, 3, 4):
        sel = b & (ev == code)
        for key in set(zip(rec["thread_slot"][sel].tolist(), rec["loop"][sel].tolist())):
            m = sel & (rec["thread_slot"] == key[0]) & (rec["loop"] == key[1])
            assert rec["iter"][m].tolist() == list(range(1, int(m.sum()) + 1))
    if barriers:
        got = Counter(rec["thread"][waits(rec, SYNC_BARRIER)].tolist())
        assert got == barriers
    ns = wait_ns(rec, rec["kind"] == WAIT)
    assert (ns >= 0).all() and (ns < 10_000_000_000).all()


def test_waits_have_plausible_durations(progs, tmp_path):
    # thread t reaches the explicit barrier 30*t ms late: thread 0 waits for thread 3, ~90 ms
    run(progs["cases"], "barrier", env_for(tmp_path))
    rec = records(tmp_path)
    sel = waits(rec, SYNC_BARRIER)
    by = {}
    for t, ns in zip(rec["thread"][sel].tolist(), wait_ns(rec, sel).tolist()):
        by[t] = max(by.get(t, 0), ns)
    assert 60e6 <= by[0] < 5e9, by
    assert by[3] < by[0] - 30e6, by
    nm = names(rec)
    assert {nm[c].split("\t")[0] for c in set(rec["loop"][sel].tolist())} == {"barrier"}


def test_critical_ordered_and_taskwait_waits(progs, tmp_path):
    run(progs["cases"], "critical", env_for(tmp_path / "c"))
    rec = records(tmp_path / "c")
    sel = waits(rec, SYNC_CRITICAL)
    assert Counter(rec["thread"][sel].tolist()) == {0: 5, 1: 5, 2: 5, 3: 5}
    assert wait_ns(rec, sel).sum() > 1e6   # 20 holders of 1 ms each: someone waited
    run(progs["cases"], "ordered", env_for(tmp_path / "o"))
    rec = records(tmp_path / "o")
    assert waits(rec, SYNC_ORDERED).sum() == 100
    run(progs["cases"], "tasks", env_for(tmp_path / "t"))
    rec = records(tmp_path / "t")
    sel = waits(rec, SYNC_TASKWAIT)
    # the taskwait and the taskgroup's end, on the single's thread, each cut where a task ran in it
    assert len(set(rec["loop"][sel].tolist())) == 2 and len(set(rec["thread"][sel].tolist())) == 1
    assert_tasks_are_not_inside_waits(read_heartbeats(tmp_path / "t" / "trace"))


def test_hbtrace_beats_api_turns_them_off(progs, tmp_path):
    r = run(progs["cases"], "dynamic", env_for(tmp_path, HBTRACE_BEATS="api"))
    assert r.stderr == ""
    rec = records(tmp_path)
    if rec is not None:
        assert not omp_beats(rec).any() and not (rec["kind"] == WAIT).any()


def test_loaded_through_omp_tool_libraries_alone(progs, tmp_path):
    # no preload: libomp dlopens the tracer as its tool; static constructs and regions are beaten
    r = run(progs["cases"], "static", env_for(tmp_path, preload=False, OMP_TOOL_LIBRARIES=LIB))
    expect, _, _ = truth(r.stdout)
    rec = records(tmp_path)
    ev = rec["flags"] >> 4
    for name in ("ws", "implicit"):
        assert Counter(rec["thread"][omp_beats(rec) & (ev == EVENTS[name])].tolist()) == expect[name]


@pytest.mark.parametrize("how", ["omp_tool_libraries", "preload_after_ours"])
def test_another_tool_is_chained(progs, tmp_path, how):
    tool = str(progs["tool"])
    env = env_for(tmp_path, OMP_TOOL_LIBRARIES=tool) if how == "omp_tool_libraries" else \
        env_for(tmp_path, LD_PRELOAD=f"{LIB}:{tool}")
    r = run(progs["cases"], "nested", env)
    # 1 outer region of 4 threads, 4 inner regions of 2; its own data slots untouched by ours
    assert "own-tool: parallel=5 implicit=12 bad=0" in r.stderr, r.stderr
    expect, _, _ = truth(r.stdout)
    rec = records(tmp_path)
    imp = omp_beats(rec) & ((rec["flags"] >> 4) == EVENTS["implicit"])
    assert Counter(rec["thread"][imp].tolist()) == expect["implicit"]


def test_a_program_with_its_own_tool_is_told_ours_is_off(progs, tmp_path):
    r = run(progs["own"], "static", env_for(tmp_path))
    assert "own-tool: parallel=1 implicit=4 bad=0" in r.stderr
    assert r.stderr.count("has its own OMPT tool") == 1, r.stderr
    plain = subprocess.run([str(progs["own"]), "static"], env=env_for(tmp_path, preload=False),
                           capture_output=True, text=True, timeout=60)
    assert plain.stdout == r.stdout and plain.returncode == 0
    rec = records(tmp_path)
    assert rec is None or not omp_beats(rec).any()


@pytest.mark.parametrize("preload", [True, False])
def test_omp_tool_libraries_naming_a_missing_library(progs, tmp_path, preload):
    env = env_for(tmp_path, preload=preload, OMP_TOOL_LIBRARIES="/nonexistent.so")
    r = run(progs["cases"], "dynamic", env)
    assert r.stderr == ""
    expect, _, owners = truth(r.stdout)
    if preload:
        rec = records(tmp_path)
        sel = omp_beats(rec) & ((rec["flags"] >> 4) == EVENTS["chunk"])
        assert Counter(rec["thread"][sel].tolist()) == check_chunks(rec, *owners)


@pytest.fixture(scope="module")
def npb_mg(tracer_built, tmp_path_factory):
    if not (NPB / "MG").is_dir():
        pytest.skip(f"NPB is not at {NPB}")
    d = tmp_path_factory.mktemp("npb") / "npb"
    shutil.copytree(NPB, d)
    (d / "config" / "make.def").write_text(
        "CC = clang\nCLINK = clang\nC_LIB = -lm\nC_INC = -I../common\nCFLAGS = -O2 -fopenmp\n"
        "CLINKFLAGS = -fopenmp\nUCC = clang -O\nBINDIR = ../bin\nRAND = randdp\nWTIME = wtime.c\n")
    (d / "bin").mkdir(exist_ok=True)
    subprocess.run(["make", "MG", "CLASS=W"], cwd=d, check=True, capture_output=True, timeout=300)
    return d / "bin" / "mg.W"


@pytest.mark.parametrize("threads", [2, 4])
def test_npb_mg_under_the_tracer(npb_mg, tmp_path, threads):
    env = env_for(tmp_path, preload=False, OMP_NUM_THREADS=threads)
    plain = subprocess.run([str(npb_mg)], env=env, capture_output=True, text=True, timeout=300)
    r = run_hbtool("record", "-q", "-o", tmp_path / "t", "--", npb_mg, env=env, cwd=tmp_path)
    assert r.returncode == plain.returncode == 0, r.stderr
    assert "Verification    =               SUCCESSFUL" in r.stdout
    files = sorted((tmp_path / "t").glob("*.hbt"))
    assert len(files) == 1
    rec = read_hbt_file(files[0])["records"]
    b = omp_beats(rec)
    assert set(rec["thread"][b].tolist()) == set(range(threads))
    per = Counter(rec["thread"][b].tolist())
    assert min(per.values()) > 100


def test_the_tracers_ompt_declarations_match_omp_tools_h(tmp_path):
    # ompt.c builds without omp-tools.h; its own declarations (src/ompt_abi.h) are the runtime's
    r = subprocess.run(["clang", "-Wall", "-Wextra", "-Werror", f"-I{TRACER / 'src'}",
                        str(PROGRAMS / "ompt_abi_check.c"), "-o", str(tmp_path / "abi")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr

