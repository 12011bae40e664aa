"""Heartbeats of MPI ranks with no change to the program (issue 15, the MPI part).

libhbprof's wrappers call libhbtrace's hbtrace_mpi_beat when both are loaded: a beat
(source mpi) each time a rank completes a blocking collective, with the time spent in
the call as a wait; or, with HBTRACE_MPI_BEATS, a beat on every call of the functions it
names. A small MPI program with a known number of each collective per rank (and an
uneven share: rank 0 an extra Barrier on a sub-communicator, rank r r extra Allreduces
on MPI_COMM_SELF) runs under real mpirun; every rank's .hbt file must hold exactly that
many mpi beats, each named after its MPI function.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from conftest import TRACER
from test_mpi_profiler import LIB as PROF_LIB
from test_mpi_profiler import built  # noqa: F401  (the make fixture of native_tracer/mpi)

from hbtool.io.hbt import read_hbt_file
from hbtool.io.instruments import decode_names

pytestmark = pytest.mark.skipif(shutil.which("mpicc") is None or shutil.which("mpirun") is None,
                                reason="needs mpicc and mpirun (Open MPI or MPICH)")

TRACE_LIB = TRACER / "lib" / "libhbtrace.so"
ITERS = 3
REC_BEAT, REC_WAIT = 1, 17
SRC_MPI = 2
EV_COLLECTIVE, EV_CALL = 1, 2
SYNC_COLLECTIVE = 5
NS_CONSTRUCTS = 3

#: the blocking collectives the program makes ITERS times on every rank (wrap_mpi.list's
#: beat=collective lines); Cart_create, Comm_split/dup/free, Ibarrier+Wait, Sendrecv beat not
COLLECTIVES = ["MPI_Barrier", "MPI_Bcast", "MPI_Reduce", "MPI_Allreduce", "MPI_Gather", "MPI_Gatherv",
               "MPI_Scatter", "MPI_Scatterv", "MPI_Allgather", "MPI_Allgatherv", "MPI_Alltoall",
               "MPI_Alltoallv", "MPI_Alltoallw", "MPI_Reduce_scatter", "MPI_Reduce_scatter_block", "MPI_Scan",
               "MPI_Exscan", "MPI_Neighbor_allgather", "MPI_Neighbor_allgatherv", "MPI_Neighbor_alltoall",
               "MPI_Neighbor_alltoallv", "MPI_Neighbor_alltoallw"]

PROGRAM = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define ITERS %(iters)d
#define MAXP 64

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int r, p;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    if (argc > 1) {   /* where this rank's trace is: its pid, beside stdout */
        char path[4096];
        snprintf(path, sizeof path, "%%s/rank-%%d.pid", argv[1], r);
        FILE *f = fopen(path, "w");
        fprintf(f, "%%d\n", (int)getpid());
        fclose(f);
    }
    /* set-up collectives: no beats */
    int dims[1] = {p}, periods[1] = {1};
    MPI_Comm ring, dup, sub;
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring);
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_split(MPI_COMM_WORLD, r == 0 ? 0 : MPI_UNDEFINED, 0, &sub);

    int one[MAXP], cnt[MAXP], dsp[MAXP], bdsp[MAXP], all[MAXP], out[MAXP];
    MPI_Aint adsp[MAXP];
    MPI_Datatype types[MAXP];
    for (int i = 0; i < MAXP; i++) {
        one[i] = r + i; cnt[i] = 1; dsp[i] = i; bdsp[i] = i * (int)sizeof(int); adsp[i] = (MPI_Aint)(i * sizeof(int));
        types[i] = MPI_INT;
    }
    long sum = 0;
    for (int it = 0; it < ITERS; it++) {
        int x = r + it, y = 0;
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Bcast(&x, 1, MPI_INT, 0, MPI_COMM_WORLD);
        MPI_Reduce(&x, &y, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
        MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        sum += y;
        MPI_Gather(&x, 1, MPI_INT, all, 1, MPI_INT, 0, MPI_COMM_WORLD);
        MPI_Gatherv(&x, 1, MPI_INT, all, cnt, dsp, MPI_INT, 0, MPI_COMM_WORLD);
        MPI_Scatter(one, 1, MPI_INT, &y, 1, MPI_INT, 0, MPI_COMM_WORLD);
        MPI_Scatterv(one, cnt, dsp, MPI_INT, &y, 1, MPI_INT, 0, MPI_COMM_WORLD);
        MPI_Allgather(&x, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
        MPI_Allgatherv(&x, 1, MPI_INT, all, cnt, dsp, MPI_INT, MPI_COMM_WORLD);
        MPI_Alltoall(one, 1, MPI_INT, out, 1, MPI_INT, MPI_COMM_WORLD);
        MPI_Alltoallv(one, cnt, dsp, MPI_INT, out, cnt, dsp, MPI_INT, MPI_COMM_WORLD);
        MPI_Alltoallw(one, cnt, bdsp, types, out, cnt, bdsp, types, MPI_COMM_WORLD);
        MPI_Reduce_scatter(one, &y, cnt, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Reduce_scatter_block(one, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Scan(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        sum += y;
        MPI_Exscan(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Neighbor_allgather(&x, 1, MPI_INT, out, 1, MPI_INT, ring);
        MPI_Neighbor_allgatherv(&x, 1, MPI_INT, out, cnt, dsp, MPI_INT, ring);
        MPI_Neighbor_alltoall(one, 1, MPI_INT, out, 1, MPI_INT, ring);
        MPI_Neighbor_alltoallv(one, cnt, dsp, MPI_INT, out, cnt, dsp, MPI_INT, ring);
        MPI_Neighbor_alltoallw(one, cnt, adsp, types, out, cnt, adsp, types, ring);
        /* point to point and a nonblocking collective: no beats by default */
        int left = (r + p - 1) %% p, right = (r + 1) %% p;
        MPI_Sendrecv(&x, 1, MPI_INT, right, 7, &y, 1, MPI_INT, left, 7, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        sum += y;
        MPI_Request rq;
        MPI_Ibarrier(MPI_COMM_WORLD, &rq);
        MPI_Wait(&rq, MPI_STATUS_IGNORE);
    }
    /* the uneven share */
    if (sub != MPI_COMM_NULL) {
        MPI_Barrier(sub);
        MPI_Comm_free(&sub);
    }
    for (int i = 0; i < r; i++) {
        int x = i, y = 0;
        MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_SELF);
    }
    long total = 0;
    MPI_Reduce(&sum, &total, 1, MPI_LONG, MPI_SUM, 0, dup);
    if (r == 0)
        printf("ranks=%%d checksum=%%ld\n", p, total);
    MPI_Comm_free(&dup);
    MPI_Comm_free(&ring);
    MPI_Finalize();
    return 0;
}
"""


def expected(rank: int) -> Counter:
    """The blocking collectives rank makes, by function."""
    c = Counter({name: ITERS for name in COLLECTIVES})
    c["MPI_Reduce"] += 1            # the checksum, on a duplicate of MPI_COMM_WORLD
    c["MPI_Barrier"] += rank == 0   # on rank 0's own sub-communicator
    c["MPI_Allreduce"] += rank      # on MPI_COMM_SELF
    return c


@pytest.fixture(scope="module")
def program(built, tmp_path_factory):
    make = subprocess.run(["make", "-C", str(TRACER), "-j2"], capture_output=True, text=True, timeout=600)
    if make.returncode != 0:
        pytest.fail(f"building the tracer failed:\n{make.stdout[-3000:]}\n{make.stderr[-3000:]}")
    d = tmp_path_factory.mktemp("mpibeats")
    src = d / "collectives.c"
    src.write_text(PROGRAM % {"iters": ITERS})
    exe = d / "collectives"
    subprocess.run(["mpicc", "-O1", "-Wall", "-Wextra", str(src), "-o", str(exe)], check=True)
    return exe


def _env(extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HBPROF_", "HBTRACE_")) and k != "LD_PRELOAD"}
    env["OMPI_MCA_rmaps_base_oversubscribe"] = "1"
    env.update(extra or {})
    return env


def mpirun_cmd(np_: int, exe: Path, pids: Path | None, xenv: dict | None = None) -> list[str]:
    cmd = ["mpirun", "--oversubscribe", "--allow-run-as-root", "-np", str(np_)]
    for k, v in (xenv or {}).items():
        cmd += ["-x", f"{k}={v}"]
    return cmd + [str(exe)] + ([str(pids)] if pids else [])


def run_preloaded(tmp: Path, exe: Path, np_: int, env: dict | None = None, libs=(TRACE_LIB, PROF_LIB)):
    """mpirun with LD_PRELOAD for the ranks only; traces and pid files in tmp."""
    tmp.mkdir(parents=True, exist_ok=True)
    xenv = {"LD_PRELOAD": " ".join(map(str, libs)), "HBTRACE_DIR": str(tmp), "HBPROF_DIR": str(tmp),
            **(env or {})}
    return subprocess.run(mpirun_cmd(np_, exe, tmp, xenv), cwd=tmp, env=_env(), capture_output=True, text=True,
                          timeout=120, check=False)


def mpi_records(tmp: Path, np_: int) -> dict[int, dict]:
    """Per rank: its mpi beats and waits and the construct names of its trace."""
    out = {}
    for rank in range(np_):
        pid = int((tmp / f"rank-{rank}.pid").read_text())
        files = [f for f in tmp.glob("*.hbt") if read_hbt_file(f)["header"]["pid"] == pid]
        assert len(files) == 1, (rank, pid, sorted(p.name for p in tmp.iterdir()))
        p = read_hbt_file(files[0])
        assert p["header"]["rank"] in (-1, rank)
        r = p["records"]
        src = r["flags"] & 15
        names = decode_names(r, NS_CONSTRUCTS, [], str(files[0]))
        beats = (r["kind"] == REC_BEAT) & (src == SRC_MPI)
        waits = (r["kind"] == REC_WAIT) & (src == SRC_MPI)
        out[rank] = {"beat_loop": r["loop"][beats], "beat_event": r["flags"][beats] >> 4,
                     "api_or_other": int(((r["kind"] == REC_BEAT) & (src != SRC_MPI)).sum()),
                     "wait_loop": r["loop"][waits], "wait_sync": r["flags"][waits] >> 4,
                     "wait_ns": (r["iter"][waits].astype(np.uint64).astype(np.uint64) << np.uint64(32))
                     | r["aux"][waits].astype(np.uint64),
                     "names": names}
    return out


def by_function(rec: dict, kind: str) -> Counter:
    """Beats per MPI function, from the construct names: kind TAB symbol TAB address."""
    c = Counter()
    for loop in rec["beat_loop"].tolist():
        fields = rec["names"][loop].split("\t")
        assert fields[0] == kind and re.fullmatch(r".*\+0x[0-9a-f]+", fields[2]), fields
        c[fields[1]] += 1
    return c


def _bare(exe: Path, tmp: Path, np_: int) -> subprocess.CompletedProcess:
    tmp.mkdir(parents=True, exist_ok=True)
    return subprocess.run(mpirun_cmd(np_, exe, None), cwd=tmp, env=_env(), capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.mark.parametrize("np_", [2, 4])
def test_a_beat_per_blocking_collective_per_rank(program, tmp_path, np_):
    """Under hbtool record --mpi: every rank's mpi beats are its blocking collectives, by function."""
    bare = _bare(program, tmp_path / "bare", np_)
    assert bare.returncode == 0, bare.stderr
    d = tmp_path / "rec"
    pids = tmp_path / "pids"
    pids.mkdir()
    r = subprocess.run([sys.executable, "-m", "hbtool", "record", "--mpi", "-q", "-o", str(d), "--",
                        *mpirun_cmd(np_, program, pids)], env=_env(), capture_output=True, text=True,
                       timeout=180, check=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout == bare.stdout and f"ranks={np_} checksum=" in r.stdout
    for f in pids.iterdir():
        shutil.copy(f, d)
    recs = mpi_records(d, np_)
    for rank, rec in recs.items():
        assert by_function(rec, "collective") == expected(rank), rank
        assert set(rec["beat_event"].tolist()) == {EV_COLLECTIVE}
        assert rec["api_or_other"] == 0
        # a wait per beat, in the same construct, of sync kind collective, each > 0
        assert rec["wait_loop"].tolist() == rec["beat_loop"].tolist()
        assert set(rec["wait_sync"].tolist()) == {SYNC_COLLECTIVE}
        assert (rec["wait_ns"] > 0).all()


def test_beats_do_not_need_profiling(program, tmp_path):
    """HBPROF_DISABLE turns the profile off, not the beats."""
    r = run_preloaded(tmp_path, program, 2, {"HBPROF_DISABLE": "1"})
    assert r.returncode == 0, r.stderr
    assert not list(tmp_path.glob("*.hbp"))
    for rank, rec in mpi_records(tmp_path, 2).items():
        assert by_function(rec, "collective") == expected(rank), rank


def test_named_functions_beat_instead_of_collectives(program, tmp_path):
    r = run_preloaded(tmp_path, program, 2, {"HBTRACE_MPI_BEATS": "MPI_Sendrecv"})
    assert r.returncode == 0, r.stderr
    assert "HBTRACE_MPI_BEATS" not in r.stderr
    for rank, rec in mpi_records(tmp_path, 2).items():
        assert by_function(rec, "call") == Counter({"MPI_Sendrecv": ITERS}), rank
        assert set(rec["beat_event"].tolist()) == {EV_CALL}
        assert len(rec["wait_loop"]) == 0   # a point-to-point call is not a collective wait


def test_an_unknown_name_is_warned_once_and_ignored(program, tmp_path):
    r = run_preloaded(tmp_path, program, 2, {"HBTRACE_MPI_BEATS": "MPI_Sendrecv, MPI_Bogus,MPI_Finalize"})
    assert r.returncode == 0, r.stderr
    warned = [line for line in r.stderr.splitlines() if "HBTRACE_MPI_BEATS" in line]
    assert len(warned) == 1 and "'MPI_Bogus'" in warned[0] and "'MPI_Finalize'" in warned[0], r.stderr
    for rank, rec in mpi_records(tmp_path, 2).items():
        assert by_function(rec, "call") == Counter({"MPI_Sendrecv": ITERS}), rank


def test_beats_api_only_records_no_mpi_beats(program, tmp_path):
    bare = _bare(program, tmp_path / "bare", 2)
    r = run_preloaded(tmp_path / "t", program, 2, {"HBTRACE_BEATS": "api"})
    assert r.returncode == 0 and r.stdout == bare.stdout, r.stderr
    for rank, rec in mpi_records(tmp_path / "t", 2).items():
        assert len(rec["beat_loop"]) == 0 and len(rec["wait_loop"]) == 0, rank


def test_without_libhbtrace_nothing_changes(program, tmp_path):
    """Only the profiler preloaded: same output and status, no warning even for a bad name."""
    bare = _bare(program, tmp_path / "bare", 2)
    r = run_preloaded(tmp_path / "p", program, 2, {"HBTRACE_MPI_BEATS": "MPI_Bogus"}, libs=(PROF_LIB,))
    assert r.returncode == bare.returncode == 0
    assert r.stdout == bare.stdout
    assert "HBTRACE_MPI_BEATS" not in r.stderr and not list((tmp_path / "p").glob("*.hbt"))


# ---------------------------------------------------------------------------
# the list is the one source of the collectives that beat

GEN = TRACER / "mpi" / "tools" / "gen_wrappers.py"
MPI_LIST = TRACER / "mpi" / "src" / "wrap_mpi.list"


def test_the_beating_collectives_come_from_the_list(built):
    marked = [line.split()[0] for line in MPI_LIST.read_text().splitlines()
              if line.strip() and not line.startswith("#") and re.search(r"\sbeat=collective\s*$", line)]
    assert sorted(marked) == sorted(COLLECTIVES)
    gen = "".join(p.read_text() for p in sorted((TRACER / "mpi" / "build").glob("wrap_mpi_*.gen.c")))
    table = re.search(r"hbp_wrap_collective\[\d+\] = \{(.*?)\};", gen, re.S).group(1)
    on = [name for flag, name in re.findall(r"(\d),\s*/\* (MPI_\w+) \*/", table) if flag == "1"]
    assert sorted(on) == sorted(COLLECTIVES)
    names = re.search(r"hbp_wrap_name\[\d+\] = \{(.*?)\};", gen, re.S).group(1)
    assert '"MPI_Init"' not in names and '"MPI_Finalize"' not in names and '"MPI_Sendrecv"' in names


@pytest.mark.parametrize("line, message", [
    ("MPI_Barrier  boundary  (MPI_Comm comm)  beat=sometimes\n", "beat= takes collective"),
    ("MPI_Init  start  beat=collective\n", "beat= takes collective"),
])
def test_a_bad_beat_marker_fails_the_build(built, tmp_path, line, message):
    lst, out = tmp_path / "bad.list", tmp_path / "out.c"
    lst.write_text(line)
    r = subprocess.run([sys.executable, str(GEN), "mpi", str(lst), "--header",
                        str(TRACER / "mpi" / "build" / "mpi.h.i"), "-o", str(out)], capture_output=True, text=True)
    assert r.returncode != 0 and not out.exists() and "bad.list:1: " in r.stderr and message in r.stderr
