"""Automatic beats and waits (issue 15): the shared infrastructure (native_tracer/src/autobeat.c)
and the libgomp wrappers (native_tracer/src/gomp.c).

The records are read raw (kind, flags, thread, loop, iter, aux) with hbtool.io.hbt.read_hbt_file,
so that these tests do not depend on how hbtool decodes the new flags.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from hbtool.io import read_heartbeats
from hbtool.io.hbt import read_hbt_file

from conftest import ROOT, TRACER

PROGRAMS = ROOT / "tests" / "programs"
BEAT, NAME, WAIT = 1, 14, 17
SRC_OPENMP, SRC_MPI = 1, 2
EV_CHUNK, EV_WORKSHARE, EV_TASK, EV_IMPLICIT = 1, 2, 3, 4
SYNC_BARRIER, SYNC_TASKWAIT, SYNC_CRITICAL, SYNC_ORDERED, SYNC_COLLECTIVE = 1, 2, 3, 4, 5
NAME_CONSTRUCT = 3


def records(path: Path) -> dict:
    """Every record of one trace file as numpy arrays, in each thread's order."""
    return read_hbt_file(path)["records"]


def names(rec: dict, space: int = NAME_CONSTRUCT) -> dict:
    """id -> text of the NAME records of one name space."""
    out: dict = {}
    sel = np.flatnonzero((rec["kind"] == NAME) & ((rec["aux"] >> 24) == space))
    for i in sel.tolist():
        raw = struct.pack("<QIiii", *(int(rec[c][i]) for c in ("t_ns", "seq", "thread", "loop", "iter")))
        out.setdefault(int(rec["aux"][i]) & 0xFFFFFF, []).append((int(rec["flags"][i]) & 0x7FFF, raw))
    return {k: b"".join(r for _, r in sorted(v)).rstrip(b"\0").decode() for k, v in out.items()}


def trace_files(d: Path) -> list[Path]:
    return sorted(d.glob("*.hbt"))


# ----------------------------------------------------------------------------------------------
# the infrastructure, through a C test linked with the tracer's objects


@pytest.fixture(scope="module")
def infra(tracer_built, tmp_path_factory):
    d = tmp_path_factory.mktemp("autobeat")
    objs = [str(p) for p in sorted((TRACER / "build").glob("*.o")) if p.name != "hbt_layout.o"]
    exe = d / "autobeat_infra"
    subprocess.run(["gcc", "-O1", "-Wall", "-Wextra", "-Werror", "-pthread", f"-I{TRACER / 'include'}",
                    f"-I{TRACER / 'src'}", "-rdynamic", str(PROGRAMS / "autobeat_infra.c"), *objs, "-ldl",
                    "-o", str(exe)], check=True)
    return exe


def _env(tmp_path, **kw):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HBTRACE_", "OMP_"))}
    env.pop("LD_PRELOAD", None)
    env["HBTRACE_DIR"] = str(tmp_path / "trace")
    env.update({k: str(v) for k, v in kw.items()})
    return env


@pytest.mark.parametrize("value,expected,warns", [
    (None, "1 1 1", False),
    ("", "1 1 1", False),
    ("api", "1 0 0", False),
    ("openmp, mpi", "0 1 1", False),
    ("api,bogus,mpi,other", "1 0 1", True),
    ("none", "0 0 0", False),
])
def test_hbtrace_beats_parses_a_list_and_warns_once(infra, tmp_path, value, expected, warns):
    env = _env(tmp_path) if value is None else _env(tmp_path, HBTRACE_BEATS=value)
    r = subprocess.run([str(infra), "enabled"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.split() == expected.split()
    assert r.stderr.count("hbtrace: HBTRACE_BEATS=") == (1 if warns else 0), r.stderr
    if warns:
        assert "'bogus'" in r.stderr


def test_disable_turns_automatic_beats_off(infra, tmp_path):
    r = subprocess.run([str(infra), "enabled"], env=_env(tmp_path, HBTRACE_DISABLE=1),
                       capture_output=True, text=True, timeout=60)
    assert r.stdout.split() == ["0", "0", "0"]


def test_infrastructure_records_ids_names_and_fork(infra, tmp_path):
    r = subprocess.run([str(infra), "records"], env=_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    par, loop, loop_a = map(int, r.stdout.split()[1:4])
    files = trace_files(tmp_path / "trace")
    assert len(files) == 2
    recs = [records(f) for f in files]
    # the parent's file is the one with the MPI beat
    recs.sort(key=lambda r: not ((r["kind"] == BEAT) & ((r["flags"] & 0xF) == SRC_MPI)).any())
    parent, child = recs
    nm = names(parent)
    assert nm[par].startswith("parallel\t\t") and "autobeat_infra+0x" in nm[par]
    assert nm[loop].startswith("loop\t") and nm[loop_a].startswith("loop\t")
    mpi_id = [k for k, v in nm.items() if v.startswith("collective\tMPI_Allreduce\t")]
    assert len(mpi_id) == 1
    k, f = parent["kind"], parent["flags"]
    omp = (k == BEAT) & ((f & 0xF) == SRC_OPENMP)
    assert Counter(parent["thread"][omp].tolist()) == {0: 3, 1: 3, 2: 3, 3: 3}
    chunks = omp & ((f >> 4) == EV_CHUNK)
    assert sorted(parent["iter"][chunks].tolist()) == sorted([100 * t + d for t in range(4) for d in (0, 10)])
    assert set(parent["loop"][chunks].tolist()) == {loop}
    waits = k == WAIT
    assert set(((f[waits] & 0xF) | ((f[waits] >> 4) << 8)).tolist()) == {SRC_OPENMP | SYNC_BARRIER << 8,
                                                                          SRC_MPI | SYNC_COLLECTIVE << 8}
    w = waits & ((f & 0xF) == SRC_OPENMP)
    ns = (parent["iter"][w].astype(np.int64) << 32) | parent["aux"][w].astype(np.int64)
    assert sorted(ns.tolist()) == [5_000_000_000 + t for t in range(4)]
    assert (parent["seq"][w] == 3).all()  # the thread's automatic beats so far
    # every construct is named before its first beat or wait, in file order of its thread
    for i in np.flatnonzero((k == BEAT) & (f != 0) | waits).tolist():
        assert int(parent["loop"][i]) in nm
    # the fork child names the construct again in its own file
    cb = (child["kind"] == BEAT) & (child["flags"] == SRC_OPENMP | EV_WORKSHARE << 4)
    assert cb.sum() == 1
    assert names(child)[int(child["loop"][cb][0])] == nm[par]


# ----------------------------------------------------------------------------------------------
# libgomp: a program with a known number of chunks and constructs per thread


@pytest.fixture(scope="module")
def omp_prog(tracer_built, tmp_path_factory):
    d = tmp_path_factory.mktemp("omp")
    exe = d / "omp_beats"
    subprocess.run(["gcc", "-fopenmp", "-O2", "-Wall", "-Wextra", "-Werror", str(PROGRAMS / "omp_beats.c"),
                    "-o", str(exe)], check=True)
    return exe


def run_traced(exe, tmp_path, *args, preload=True, timeout=120, **env):
    e = _env(tmp_path, OMP_SCHEDULE="dynamic,3", OMP_WAIT_POLICY="passive", **env)
    if preload:
        e["LD_PRELOAD"] = str(TRACER / "lib" / "libhbtrace.so")
    return subprocess.run([str(exe), *map(str, args)], env=e, capture_output=True, text=True, timeout=timeout)


def truth_of(stdout: str):
    loops, counts, sleep = [], {}, None
    for line in stdout.splitlines():
        w = line.split()
        if w[0] == "loop":
            loops.append((int(w[1]), int(w[2]), int(w[3]), w[4]))
        elif w[0] == "count":
            counts[int(w[1])] = tuple(map(int, w[2:5]))
        elif w[0] == "sleep":
            sleep = (int(w[1]), int(w[2]))
    return loops, counts, sleep


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_a_chunks_beat_counts_its_iterations_whatever_the_loops_step(tracer_built, tmp_path, cc):
    """A chunk's beat carries its count of iterations (aux), for loops that step by other than
    1, up and down, of long and unsigned long long, dynamic and guided, in a region and a
    combined parallel loop: the chunks of each loop count its trips, and lie end to end (libgomp
    gives the loop's own values, libomp its iterations numbered from 0)."""
    exe = tmp_path / f"omp_beats_{cc}"
    subprocess.run([cc, "-fopenmp", "-O2", str(PROGRAMS / "omp_beats.c"), "-o", str(exe)], check=True)
    r = run_traced(exe, tmp_path, "steps")
    assert r.returncode == 0, r.stderr
    loops = [tuple(map(int, line.split()[1:])) for line in r.stdout.splitlines() if line.startswith("steps ")]
    (f,) = trace_files(tmp_path / "trace")
    rec = records(f)
    chunk = (rec["kind"] == BEAT) & ((rec["flags"] & 0xF) == SRC_OPENMP) & ((rec["flags"] >> 4) == EV_CHUNK)
    ids = sorted(set(rec["loop"][chunk].tolist()))   # construct ids, in the order the loops ran
    assert len(ids) == len(loops), (ids, loops)
    for cid, (first, step, trips) in zip(ids, loops):
        m = chunk & (rec["loop"] == cid)
        it, n = rec["iter"][m].astype(np.int64), rec["aux"][m].astype(np.int64)
        assert (n > 0).all() and n.sum() == trips, (cc, first, step, n.tolist())
        own = cc == "gcc"   # libgomp: the loop's values; libomp: 0, 1, 2, ...
        o = np.argsort(it * np.sign(step) if own else it)
        it, n = it[o], n[o]
        assert it[0] == (first if own else 0), (cc, first, it[:3].tolist())
        assert (np.diff(it) == n[:-1] * (step if own else 1)).all(), (cc, first, step, it.tolist(), n.tolist())
    # hbtool reads the count as the beat's tag, whole or streamed, and keeps it through a conversion
    total = sum(t for _, _, t in loops)
    beats = read_heartbeats(f).beats
    assert beats.loc[beats["construct"].astype(str).str.startswith("loop "), "tag"].sum() == total
    streamed = read_heartbeats(f, stream=True)
    assert sum(int(streamed.thread_rows(k)["tag"].sum()) for k, _, _ in streamed.thread_loaders()) == total
    out = tmp_path / "again.hbt"
    subprocess.run([sys.executable, "-m", "hbtool", "convert", str(f), "-o", str(out)], check=True, capture_output=True)
    again = read_heartbeats(out).beats
    assert again["tag"].tolist() == beats["tag"].tolist()
    assert again["construct"].astype(str).tolist() == beats["construct"].astype(str).tolist()


def test_beats_per_thread_equal_the_truth_for_every_schedule_and_construct(omp_prog, tmp_path):
    r = run_traced(omp_prog, tmp_path, "all")
    assert r.returncode == 3, r.stderr
    loops, counts, _ = truth_of(r.stdout)
    (f,) = trace_files(tmp_path / "trace")
    rec = records(f)
    k, fl = rec["kind"], rec["flags"]
    omp = (k == BEAT) & ((fl & 0xF) == SRC_OPENMP)
    ev = fl >> 4
    # chunks: every recorded chunk start belongs to one loop; the starts partition each loop's
    # iterations into ranges each run entirely by the thread that beat for it
    chunk = omp & (ev == EV_CHUNK)
    it, th = rec["iter"][chunk].astype(np.int64), rec["thread"][chunk].astype(np.int64)
    count = dict(zip(it.tolist(), rec["aux"][chunk].tolist()))   # each chunk's iterations
    expected = Counter()
    got = Counter()
    seen = np.zeros(it.size, dtype=bool)
    for base, n, size, owner in loops:
        sel = (it >= base) & (it < base + n)
        assert not (sel & seen).any(), f"loop {base}: beats counted twice"
        seen |= sel
        starts = sorted(zip((it[sel] - base).tolist(), th[sel].tolist()))
        assert starts and starts[0][0] == 0, (base, starts[:3])
        bounds = [s for s, _ in starts] + [n]
        assert len(set(bounds)) == len(bounds), f"loop {base}: a chunk beat twice"
        for (s, t), e in zip(starts, bounds[1:]):
            assert set(owner[s:e]) == {str(t)}, f"loop {base}: chunk [{s},{e}) beat by {t}, run by {set(owner[s:e])}"
            assert count[base + s] == e - s, f"loop {base}: chunk [{s},{e}) said {count[base + s]} iterations"
        if size > 0:
            assert [s for s, _ in starts] == list(range(0, n, size)), f"loop {base}"
            expected.update(int(owner[s]) for s in range(0, n, size))
        else:
            expected.update(t for _, t in starts)
        got.update(t for _, t in starts)
    assert seen.all(), "chunk beats outside every loop"
    assert got == expected
    for t, (implicit, ws, tasks) in counts.items():
        sel = omp & (rec["thread"] == t)
        assert int((sel & (ev == EV_IMPLICIT)).sum()) == implicit, f"thread {t} implicit"
        assert int((sel & (ev == EV_WORKSHARE)).sum()) == ws, f"thread {t} workshare"
        assert int((sel & (ev == EV_TASK)).sum()) == tasks, f"thread {t} tasks"
    assert set(rec["thread"][omp].tolist()) == set(counts)
    # every construct named; the regions by the outlined function's object
    nm = names(rec)
    assert set(rec["loop"][omp].tolist()) <= set(nm)
    kinds = Counter(v.split("\t")[0] for v in nm.values())
    assert kinds["parallel"] >= 5 and kinds["loop"] >= 12 and kinds["task"] >= 1
    assert all("omp_beats+0x" in v for v in nm.values())


def test_a_sections_beat_names_the_sections_its_thread_ran(tracer_built, tmp_path):
    """libgomp deals a construct's sections to whichever thread asks first: each thread's
    beat at the construct's end carries the sections it ran (aux, a bit each; 0 for none, as
    a thread of three gets none of two sections), and hbtool names its unit with them, both
    readers alike."""
    from hbtool.io import read_heartbeats

    exe = tmp_path / "omp_sections"
    subprocess.run(["gcc", "-fopenmp", "-O2", "-Wall", "-Wextra", "-Werror", str(PROGRAMS / "omp_sections.c"),
                    "-o", str(exe)], check=True)
    r = run_traced(exe, tmp_path, 40, 0.2, OMP_NUM_THREADS=3)
    assert r.returncode == 0 and r.stdout.endswith("done\n"), r.stderr
    truth: dict = {}   # (construct, round, thread) -> the sections it ran, a bit each
    for line in r.stdout.splitlines()[:-1]:
        c, rnd, sec, th = map(int, line.split()[1:])
        key = (c, rnd, th)
        truth[key] = truth.get(key, 0) | 1 << (sec - 1)
    (f,) = trace_files(tmp_path / "trace")
    rec = records(f)
    nm = names(rec)
    ev = rec["flags"] >> 4
    sel = (rec["kind"] == BEAT) & ((rec["flags"] & 0xF) == SRC_OPENMP) & (ev == EV_WORKSHARE)
    sel &= np.isin(rec["loop"], [c for c, v in nm.items() if v.startswith("sections\t")])
    ids = sorted(set(rec["loop"][sel].tolist()))
    assert len(ids) == 2, nm
    got = {}
    for cid in ids:
        m = sel & (rec["loop"] == cid)
        # iter: the thread's count of the construct's beats, so round iter - 1
        got[cid] = {(int(i) - 1, int(t)): int(a) for i, t, a in zip(rec["iter"][m], rec["thread"][m], rec["aux"][m])}
        assert len(got[cid]) == 40 * 3, cid   # every thread beats at every instance's end
    # which construct is which: the one whose beats match the program's truth
    for c in (0, 1):
        match = [cid for cid in ids if got[cid] == {(rnd, th): truth.get((c, rnd, th), 0)
                                                    for rnd in range(40) for th in range(3)}]
        assert len(match) == 1, (c, {cid: sorted(got[cid].items())[:6] for cid in ids})
    assert 0 in set(got[ids[0]].values()) | set(got[ids[1]].values())   # a thread that ran none
    eager = read_heartbeats(tmp_path / "trace")
    streamed = read_heartbeats(tmp_path / "trace", stream=True)
    run = str(eager.beats["run"].iloc[0])
    for th in range(3):
        one = eager.beats[eager.beats["thread"] == th]["construct"].astype(str).tolist()
        _, other = streamed.thread_beats((run, 0, th))
        assert one == list(other.astype(str)), th
        assert any(x.startswith("sections ") and " #" in x for x in one), one


def test_waits_at_barriers_critical_ordered_taskwait(omp_prog, tmp_path):
    r = run_traced(omp_prog, tmp_path, "all")
    assert r.returncode == 3
    _, counts, (sleep_start, sleep_ns) = truth_of(r.stdout)
    rec = records(trace_files(tmp_path / "trace")[0])
    k, fl = rec["kind"], rec["flags"]
    w = k == WAIT
    assert ((fl[w] & 0xF) == SRC_OPENMP).all()
    syncs = Counter((fl[w] >> 4).tolist())
    assert syncs[SYNC_BARRIER] > 0 and syncs[SYNC_CRITICAL] >= 3 and syncs[SYNC_ORDERED] >= 2 * 240
    assert syncs[SYNC_TASKWAIT] >= 1
    ns = (rec["iter"].astype(np.int64) << 32) | rec["aux"].astype(np.int64)
    assert (ns[w] >= 0).all() and (ns[w] < 60e9).all()
    # the barrier thread 0 reached after sleeping: every other thread of that team left it
    # after thread 0 arrived, and waited from its own arrival (its workshare beat) until then
    t0_arrival = None
    for i in np.flatnonzero(w & ((fl >> 4) == SYNC_BARRIER) & (rec["thread"] == 0)).tolist():
        start = int(rec["t_ns"][i]) - int(ns[i])
        if start >= sleep_start + sleep_ns:
            t0_arrival = start
            break
    assert t0_arrival is not None
    for t in (1, 2):
        sel = np.flatnonzero(w & ((fl >> 4) == SYNC_BARRIER) & (rec["thread"] == t)
                             & (rec["t_ns"] >= t0_arrival)).tolist()
        i = sel[0]
        start = int(rec["t_ns"][i]) - int(ns[i])
        assert start <= sleep_start + sleep_ns  # it was there before thread 0 woke
        assert int(ns[i]) >= t0_arrival - start >= 0
        # its arrival is its workshare beat
        b = np.flatnonzero((k == BEAT) & (rec["thread"] == t) & (rec["t_ns"] == start))
        assert b.size == 1 and int(fl[b[0]]) == SRC_OPENMP | EV_WORKSHARE << 4


def test_both_sides_of_a_copyprivate_single_wait_at_its_barrier(tracer_built, tmp_path):
    """`single copyprivate`: every thread calls GOMP_single_copy_start, where those that did
    not get the single wait; the one that got it waits in GOMP_single_copy_end. Both are
    waits of the single (two call sites, two constructs): one a thread and step at the first,
    one a step at the second (the tracer before recorded none there), so that every thread
    counts the same team barriers; the program's result is unchanged."""
    exe = tmp_path / "omp_copyprivate"
    subprocess.run(["gcc", "-fopenmp", "-O2", "-Wall", "-Wextra", "-Werror", str(PROGRAMS / "omp_copyprivate.c"),
                    "-o", str(exe)], check=True)
    steps = 50
    r = run_traced(exe, tmp_path, steps, OMP_NUM_THREADS=2, HBTRACE_MONITOR="central",
                   HBTRACE_MONITOR_BEATS="openmp")
    assert r.returncode == 0 and r.stdout.split() == ["done", str(3 * steps * (steps + 1))], r.stderr
    rec = records(trace_files(tmp_path / "trace")[0])
    nm = names(rec)
    single = [k for k, v in nm.items() if v.split("\t")[0] == "single"]
    w = (rec["kind"] == WAIT) & ((rec["flags"] >> 4) == SYNC_BARRIER)
    per = sorted(((rec["loop"][w] == k).sum(), k) for k in single)
    assert len(single) == 2 and [n for n, _ in per] == [steps, 2 * steps], (nm, per)
    end = w & (rec["loop"] == per[0][1])
    assert set(rec["thread"][end].tolist()) <= {0, 1}


def test_hbtrace_beats_api_turns_openmp_beats_off(omp_prog, tmp_path):
    r = run_traced(omp_prog, tmp_path, "all", HBTRACE_BEATS="api")
    assert r.returncode == 3
    for f in trace_files(tmp_path / "trace"):
        rec = records(f)
        assert not ((rec["kind"] == BEAT) | (rec["kind"] == WAIT) | (rec["kind"] == NAME)).any()


def test_output_and_exit_status_unchanged(omp_prog, tmp_path):
    plain = run_traced(omp_prog, tmp_path / "a", "all", preload=False)
    traced = run_traced(omp_prog, tmp_path / "b", "all")
    assert plain.returncode == traced.returncode == 3
    keep = lambda out: [ln for ln in out.splitlines() if ln.startswith("result")]  # noqa: E731
    assert keep(plain.stdout) == keep(traced.stdout) and keep(plain.stdout)
    assert traced.stderr == plain.stderr == ""


def test_a_program_that_forks(omp_prog, tmp_path):
    r = run_traced(omp_prog, tmp_path, "fork")
    assert r.returncode == 5, r.stderr
    assert "child 9900" in r.stdout and "parent 9900" in r.stdout
    files = trace_files(tmp_path / "trace")
    assert len(files) == 2
    for f in files:
        rec = records(f)
        omp = (rec["kind"] == BEAT) & ((rec["flags"] & 0xF) == SRC_OPENMP)
        chunks = omp & ((rec["flags"] >> 4) == EV_CHUNK)
        nm = names(rec)
        assert set(rec["loop"][omp].tolist()) <= set(nm)  # each file names its constructs
        n = int(chunks.sum())
        assert n in (100, 200), n  # child: one loop of 100 chunks; parent: two


def test_a_team_of_1000_threads(omp_prog, tmp_path):
    r = run_traced(omp_prog, tmp_path, "big", 1000, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == f"result {sum(range(2000))}"
    rec = records(trace_files(tmp_path / "trace")[0])
    omp = (rec["kind"] == BEAT) & ((rec["flags"] & 0xF) == SRC_OPENMP)
    implicit = omp & ((rec["flags"] >> 4) == EV_IMPLICIT)
    assert sorted(rec["thread"][implicit].tolist()) == list(range(1000))
    assert int((omp & ((rec["flags"] >> 4) == EV_CHUNK)).sum()) == 2000


def test_a_program_without_openmp_is_untouched(infra, tmp_path):
    # the infrastructure test links no libgomp: nothing calls the wrappers; the preload adds
    # no automatic record of its own
    e = _env(tmp_path)
    e["LD_PRELOAD"] = str(TRACER / "lib" / "libhbtrace.so")
    r = subprocess.run(["/bin/sh", "-c", "echo hi; exit 7"], env=e, capture_output=True, text=True, timeout=60)
    assert r.returncode == 7 and r.stdout == "hi\n" and r.stderr == ""
    for f in trace_files(tmp_path / "trace"):
        rec = records(f)
        assert not ((rec["kind"] == WAIT) | ((rec["kind"] == BEAT) & (rec["flags"] != 0))).any()


# ----------------------------------------------------------------------------------------------
# a libgomp with entry points the tracer does not know: warn once, record what we can


def test_unknown_entry_points_are_those_neither_wrapped_nor_known(infra):
    # the wrapped ones are the GOMP_ functions the program exports (the tracer's objects,
    # -rdynamic); known-harmless ones and the plugin interface are not reported; each name once
    names = ["GOMP_parallel", "GOMP_loop_dynamic_next", "GOMP_atomic_start", "GOMP_single_start",
             "GOMP_target_ext", "GOMP_PLUGIN_malloc", "GOMP_future_b", "GOMP_future_a", "GOMP_future_b",
             "omp_get_thread_num", "GOMP_taskloop"]
    r = subprocess.run([str(infra), "gomp_known", *names], capture_output=True, text=True, timeout=60)
    w = r.stdout.split()
    assert r.returncode == 0 and w[0] == "ours" and int(w[1]) >= 90, r.stdout
    assert w[2:] == ["unknown", "2", "GOMP_future_a", "GOMP_future_b"]


def _libgomp_path() -> str:
    return subprocess.run(["gcc", "-print-file-name=libgomp.so.1"], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_every_entry_point_of_the_installed_libgomp_is_known(infra):
    r = subprocess.run([str(infra), "gomp_check", _libgomp_path()], capture_output=True, text=True, timeout=60)
    w = r.stdout.split()
    assert r.returncode == 0 and w[0] == "object" and w[1].startswith("libgomp.so"), r.stdout
    assert int(w[3]) > 100  # its dynamic symbol table was read
    assert w[4:] == ["unknown", "0"], r.stdout


@pytest.fixture(scope="module")
def fake_libgomp(tracer_built, tmp_path_factory):
    d = tmp_path_factory.mktemp("fakegomp")
    lib = d / "libgomp.so.1"
    subprocess.run(["gcc", "-O1", "-shared", "-fPIC", "-fvisibility=hidden", "-Wl,-soname,libgomp.so.1",
                    str(PROGRAMS / "fake_libgomp.c"), "-o", str(lib)], check=True)
    (d / "libgomp.so").symlink_to("libgomp.so.1")
    obj = d / "user.o"
    subprocess.run(["gcc", "-O1", "-fopenmp", "-c", str(PROGRAMS / "fake_libgomp_user.c"), "-o", str(obj)], check=True)
    exe = d / "user"
    subprocess.run(["gcc", str(obj), f"-L{d}", "-lgomp", f"-Wl,-rpath,{d}", "-o", str(exe)], check=True)
    return lib, exe


def test_a_library_with_unknown_entry_points_is_listed(infra, fake_libgomp):
    lib, _ = fake_libgomp
    r = subprocess.run([str(infra), "gomp_check", str(lib)], capture_output=True, text=True, timeout=60)
    # 7 exported functions (not the hidden one, not the data object); 2 unknown
    assert r.stdout.split() == ["object", "libgomp.so.1", "exports", "7", "unknown", "2", "GOMP_future_region",
                                "GOMP_future_wait"], r.stdout


def test_an_unknown_libgomp_warns_once_and_records_what_it_can(fake_libgomp, tmp_path):
    _, exe = fake_libgomp
    plain = run_traced(exe, tmp_path / "a", preload=False)
    r = run_traced(exe, tmp_path / "b")
    assert r.returncode == plain.returncode == 4 and r.stdout == plain.stdout == "result 11\n"
    assert r.stderr == ("hbtrace: libgomp.so.1 has 2 OpenMP entry points this tracer does not know "
                        "(GOMP_future_region, GOMP_future_wait): the program runs as before, but beats and "
                        "waits inside them are not recorded\n")
    rec = records(trace_files(tmp_path / "b" / "trace")[0])
    omp = (rec["kind"] == BEAT) & ((rec["flags"] & 0xF) == SRC_OPENMP)
    assert sorted((rec["flags"][omp] >> 4).tolist()) == [EV_WORKSHARE, EV_IMPLICIT]  # the barrier, the region
    # beats off: no check, no warning
    quiet = run_traced(exe, tmp_path / "c", HBTRACE_BEATS="api")
    assert quiet.returncode == 4 and quiet.stderr == ""


def test_the_installed_libgomp_gives_no_warning_in_a_real_run(omp_prog, tmp_path):
    r = run_traced(omp_prog, tmp_path, "all")
    assert r.returncode == 3 and "hbtrace" not in r.stderr, r.stderr


# ----------------------------------------------------------------------------------------------
# a real program nobody here wrote: NPB MG class W, unmodified

NPB = ROOT.parent / "shared" / "workloads" / "npb-omp"


def build_npb(dest: Path, kernel: str = "MG", klass: str = "W") -> Path:
    """Build one NPB kernel in a copy of npb-omp (never in shared/), as its README says."""
    import shutil

    src = dest / "npb"
    shutil.copytree(NPB, src)
    mk = (src / "config" / "make.def.template").read_text()
    for old, new in (("CC = cc", "CC = gcc"), ("CLINK\t= cc", "CLINK = gcc"), ("CFLAGS\t= -O3 ", "CFLAGS = -O2 -fopenmp"),
                     ("CLINKFLAGS =", "CLINKFLAGS = -fopenmp"), ("C_LIB  =", "C_LIB = -lm"), ("UCC\t= cc -O", "UCC = gcc -O")):
        mk = "\n".join(new + ln[len(old):] if ln.startswith(old) else ln for ln in mk.splitlines()) + "\n"
    (src / "config" / "make.def").write_text(mk)
    (src / "bin").mkdir(exist_ok=True)
    subprocess.run(["make", kernel, f"CLASS={klass}"], cwd=src, check=True, capture_output=True, timeout=600)
    return src / "bin" / f"{kernel.lower()}.{klass}"


@pytest.fixture(scope="module")
def mg_w(tracer_built, tmp_path_factory):
    if not NPB.is_dir():
        pytest.skip("no ../shared/workloads/npb-omp")
    return build_npb(tmp_path_factory.mktemp("npb"))


@pytest.mark.parametrize("threads", [2, 4])
def test_npb_mg_verifies_and_every_openmp_thread_beats(mg_w, tmp_path, threads):
    r = run_traced(mg_w, tmp_path, OMP_NUM_THREADS=threads, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Verification    =               SUCCESSFUL" in r.stdout or "SUCCESSFUL" in r.stdout
    (f,) = trace_files(tmp_path / "trace")
    rec = records(f)
    omp = (rec["kind"] == BEAT) & ((rec["flags"] & 0xF) == SRC_OPENMP)
    per = Counter(rec["thread"][omp].tolist())
    assert set(per) == set(range(threads)) and min(per.values()) > 10, per
    assert ((rec["kind"] == WAIT) & (rec["thread"] == threads - 1)).any()
    nm = names(rec)
    assert any(v.startswith("parallel\t") and "mg.W+0x" in v for v in nm.values())
