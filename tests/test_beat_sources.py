"""Beats know where they came from (the program's API, or the tracer at OpenMP constructs
and MPI collectives): the model picks which to analyse, the binary format keeps the
source, the construct and the waits, and the commands say which beats they used."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from hbtool.io import read_heartbeats, write_heartbeats
from hbtool.model import HeartbeatTrace

from conftest import run_cli


def _mixed() -> HeartbeatTrace:
    """Process 0: 3 threads with api beats and openmp beats; process 1: 2 threads with
    openmp beats only; waits at a barrier in process 1."""
    rows = []
    for proc, sources in ((0, ("api", "openmp")), (1, ("openmp",))):
        for th in range(3 if proc == 0 else 2):
            for src in sources:
                n = 60 if src == "api" else 90
                t_ns = (np.arange(1, n + 1) * (1e7 if src == "api" else 6e6) * (1 + th / 20)).astype(np.int64)
                rows.append(pd.DataFrame({
                    "run": "r", "process": proc, "thread": th, "seq": np.arange(n), "t_ns": t_ns, "t": t_ns / 1e9,
                    "loop": 0, "iteration": np.arange(n), "tag": 0, "os_tid": 100 * (proc + 1) + th,
                    "source": src, "construct": "loop resid._omp_fn.3" if src == "openmp" else ""}))
    waits = pd.DataFrame({"run": "r", "process": 1, "thread": [0, 1], "os_tid": [200, 201],
                          "t_ns": [500_000_000, 500_000_000], "t": [0.5, 0.5], "wait_ns": [7_000_000, 5_000_000_123],
                          "sync": "barrier", "source": "openmp", "construct": "parallel mg3P._omp_fn.1"})
    return HeartbeatTrace(beats=pd.concat(rows, ignore_index=True), waits=waits,
                          runs={"r": {"lifecycle": False}})


def test_auto_takes_api_beats_where_a_process_has_them_else_openmp():
    tr = _mixed()
    assert tr.sources() == {("r", 0): {"api": 180, "openmp": 270}, ("r", 1): {"openmp": 180}}
    auto = tr.with_beats("auto")
    got = auto.beats.groupby(["process", "source"], observed=True).size().to_dict()
    assert got == {(0, "api"): 180, (1, "openmp"): 180}
    assert auto.runs["r"]["beats"] == {0: "api", 1: "openmp"}
    only = tr.with_beats("openmp")
    assert set(only.beats["source"]) == {"openmp"} and len(only.beats) == 450
    assert len(tr.with_beats("mpi").beats) == 0
    with pytest.raises(ValueError):
        tr.with_beats("pthreads")


def test_tables_without_a_source_column_hold_api_beats(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("thread,seq,t\n0,0,0.0\n0,1,0.5\n")
    assert list(read_heartbeats(str(p)).beats["source"]) == ["api", "api"]


def test_the_binary_format_keeps_source_construct_and_waits(tmp_path):
    tr = _mixed()
    tr.beats["process"] = 0
    tr.waits["process"] = 0
    tr.beats["os_tid"] = 100 + tr.beats["os_tid"] % 100 + 10 * (tr.beats["source"] == "openmp")
    (path,) = write_heartbeats(tr, str(tmp_path / "mixed.hbt"))
    back = read_heartbeats(path)
    got = back.beats.groupby(["source", "construct"], observed=True).size().to_dict()
    assert got == {("api", ""): 180, ("openmp", "loop resid._omp_fn.3"): 450}
    w = back.waits.sort_values("thread")
    assert w["wait_ns"].tolist() == [7_000_000, 5_000_000_123]  # past 2**32 ns too
    assert set(w["sync"]) == {"barrier"} and set(w["construct"]) == {"parallel mg3P._omp_fn.1"}
    assert back.warnings == []


def test_commands_say_which_beats_they_used_and_pick_with_the_option(tmp_path, capsys):
    tr = _mixed()
    p = tmp_path / "mixed.parquet"
    write_heartbeats(tr, str(p))
    code, out, _ = run_cli(capsys, "diagnose", p)
    assert code == 0
    assert out.splitlines()[0] == "beats: api (process 0); openmp (process 1)"
    code, out, _ = run_cli(capsys, "diagnose", "--beats", "openmp", "--format", "json", p)
    assert code == 0 and len(json.loads(out)["threads"]) == 5
    code, out, _ = run_cli(capsys, "info", p)
    assert ", 360 api/openmp beats" in out.splitlines()[0]
    assert out.splitlines()[0].endswith("; also 270 openmp beats (--beats picks)")
    code, out, err = run_cli(capsys, "behavior", "--beats", "mpi", p)
    assert code == 2
    assert err == f"hbtool: error: {p}: no mpi beats in this trace (it has api, openmp beats: pick one with --beats)\n"


def test_info_shows_the_time_each_thread_waited(tmp_path, capsys):
    tr = _mixed()
    p = tmp_path / "mixed.parquet"
    write_heartbeats(tr, str(p))
    code, out, _ = run_cli(capsys, "info", "--format", "json", p)
    rows = {(t["process"], t["thread"]): t for t in json.loads(out)["threads"]}
    assert rows[(1, 0)]["wait_s"] == pytest.approx(0.007) and rows[(1, 1)]["wait_s"] == pytest.approx(5.000000123)
    assert rows[(1, 0)]["wait_pct"] == pytest.approx(100 * 0.007 / rows[(1, 0)]["duration_s"], rel=1e-3)
    assert rows[(0, 0)]["wait_s"] is None  # no wait records for it
    code, out, _ = run_cli(capsys, "info", p)
    assert out.splitlines()[2].split() == ["run", "process", "thread", "beats", "first_s", "last_s", "duration_s",
                                           "beats/s", "wait_s", "waiting", "%", "ended"]


def test_behavior_names_the_construct_a_thread_waited_in():
    from hbtool.analyzers.behavior import behavior_timelines

    rng = np.random.default_rng(2)
    d = np.r_[0.002 * (1 + 0.05 * rng.standard_normal(300)), [0.6], 0.002 * (1 + 0.05 * rng.standard_normal(300))]
    t_ns = (0.01 + np.r_[0.0, np.cumsum(d)]) * 1e9
    b = pd.DataFrame({"run": "r", "process": 0, "thread": 0, "seq": np.arange(len(t_ns)),
                      "t_ns": t_ns.astype(np.int64), "source": "openmp",
                      "construct": ["loop resid._omp_fn.3"] * 301 + ["loop psinv._omp_fn.1"] * 301})
    b["t"] = b["t_ns"] / 1e9
    (row,) = behavior_timelines(HeartbeatTrace(beats=b, runs={"r": {"lifecycle": False}}))
    cw = [iv for iv in row["intervals"] if iv["behavior"] == "conditional-waiting"]
    assert [iv["detail"] for iv in cw] == ["no beats for 0.600 s, then beats resumed (in loop psinv._omp_fn.1)"]


def test_json_says_which_beats_were_analysed(tmp_path, capsys):
    p = tmp_path / "mixed.parquet"
    write_heartbeats(_mixed(), str(p))
    for cmd in ("diagnose", "behavior"):
        code, out, _ = run_cli(capsys, cmd, "--format", "json", p)
        assert code == 0 and json.loads(out)["beats"] == {"r": {"0": "api", "1": "openmp"}}


def test_record_refuses_an_unknown_beat_source_in_one_line(tmp_path):
    from conftest import run_hbtool

    r = run_hbtool("record", "--beats", "openmp,pthreads", "-o", tmp_path / "t", "--", "true")
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == ("hbtool: error: --beats 'openmp,pthreads': expected a comma list of api, openmp, mpi, "
                        "or none (see 'hbtool record --help')\n")
    assert not (tmp_path / "t").exists()


def test_source_and_construct_codes_decode_as_the_format_says():
    from hbtool.io.hbt import SOURCES, _coded, _construct_column, construct_keys

    codes = np.array([0, 1, 0, 2, 9])
    assert _coded(codes, SOURCES, "source").tolist() == ["api", "openmp", "api", "mpi", "source 9"]
    loop = np.array([0, 3, 3, 7, 2**32 - 1], dtype=np.uint32)  # a crafted id past any table falls back to sorting
    auto = np.array([False, True, True, True, True])
    assert _construct_column(construct_keys(loop, None, auto), {3: "loop a", 7: "loop a"}).tolist() == \
        ["", "loop a", "loop a", "loop a", "construct 4294967295"]
    # a sections beat's aux names the sections its thread ran (bit n-1: section n; bit 31: 32 on);
    # on any other construct, or a beat of the program's own, aux is not a construct's
    loop = np.array([5, 5, 5, 5, 3, 5], dtype=np.uint32)
    aux = np.array([0, 1, 0b101, 1 << 31 | 2, 4, 7], dtype=np.uint32)
    auto = np.array([True, True, True, True, True, False])
    names = {5: "sections f+0x10", 3: "loop a"}
    assert _construct_column(construct_keys(loop, aux, auto), names).tolist() == \
        ["sections f+0x10", "sections f+0x10 #1", "sections f+0x10 #1,3", "sections f+0x10 #2,32+", "loop a", ""]
