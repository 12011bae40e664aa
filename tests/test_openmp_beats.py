"""Automatic beats and waits (issue 15): the shared infrastructure (native_tracer/src/autobeat.c)
and the libgomp wrappers (native_tracer/src/gomp.c).

The records are read raw (kind, flags, thread, loop, iter, aux) with hbtool.io.hbt.read_hbt_file,
so that these tests do not depend on how hbtool decodes the new flags.
"""

from __future__ import annotations

import os
import struct
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

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
    assert (parent["seq"][w] == 3).all()  # the thread's beats so far
    # every construct is named before its first beat or wait, in file order of its thread
    for i in np.flatnonzero((k == BEAT) & (f != 0) | waits).tolist():
        assert int(parent["loop"][i]) in nm
    # the fork child names the construct again in its own file
    cb = (child["kind"] == BEAT) & (child["flags"] == SRC_OPENMP | EV_WORKSHARE << 4)
    assert cb.sum() == 1
    assert names(child)[int(child["loop"][cb][0])] == nm[par]
