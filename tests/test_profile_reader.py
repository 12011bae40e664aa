"""hbtool's reader of the PMPI profiler's files, and `hbtool interference` on real MPI runs.

The MPI runs are real: Open MPI's mpirun, 4 ranks of the example programs, the profiler
loaded by `hbtool record --mpi`."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import numpy as np
import pytest

from hbtool.analyzers.interference import SegmentProfile, estimate
from hbtool.io import hbprof as H

from conftest import ROOT, hbtool_here, run_cli, run_hbtool

MPI = ROOT / "native_tracer" / "mpi"
need_mpi = pytest.mark.skipif(shutil.which("mpirun") is None or shutil.which("mpicc") is None,
                              reason="Open MPI (mpicc, mpirun) is not installed: scripts/install.sh installs it")


@pytest.fixture(scope="module")
def profiler_built():
    r = subprocess.run(["make", "-s", "-C", str(MPI), "-j2"], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        pytest.fail(f"building the profiler failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return MPI


@need_mpi
def test_dtypes_match_the_c_layout(profiler_built):
    out = subprocess.run([str(MPI / "bin" / "hbprof_layout")], capture_output=True, text=True, check=True).stdout
    layout = json.loads(out)
    for name, make in H.STRUCTS.items():
        dt = make("<")
        c = layout["structs"][name]
        assert dt.itemsize == c["size"], name
        assert {f: dt.fields[f][1] for f in dt.names} == c["fields"], name
    k = layout["constants"]
    for const in ("VERSION", "ENDIAN_MARK", "HEADER_SIZE", "RANK_RECORD_SIZE", "RUN_RECORD_SIZE", "MAX_METRICS",
                  "RANK_BINS", "RUN_BINS", "RANK_DATA_OFFSET"):
        assert k["HBP_" + const] == getattr(H, const), const
    assert (k["HBP_REC_SEGMENT"], k["HBP_REC_BIN_SET"], k["HBP_REC_BIN_MERGE"], k["HBP_REC_INJECT"]) == (1, 2, 3, 4)
    assert (k["HBP_FLAG_RANK_FILE"], k["HBP_FLAG_RUN_FILE"], k["HBP_FLAG_COMPLETE"]) == (1, 2, 4)


def _record(tmp_path, *args, inject=None, np_=4, iters=120):
    out = tmp_path / "prof"
    cmd = ["record", "--mpi", "-o", out]
    if inject:
        cmd += ["--inject", inject, "--inject-seed", "3"]
    cmd += ["--", "mpirun", "--oversubscribe", "--allow-run-as-root", "-np", str(np_),
            MPI / "examples" / "bin" / "stencil", "--iterations", str(iters), "--work", "20",
            "--ckpt-dir", tmp_path, *args]
    r = run_hbtool(*cmd, cwd=tmp_path)
    return r, out


@need_mpi
@pytest.mark.alone  # 4 ranks on 2 CPUs: the segments must tile the run
def test_record_mpi_and_interference_end_to_end(tmp_path, profiler_built):
    r, out = _record(tmp_path, "--heavy-every", "4", "--checkpoint-every", "20", inject="2000,200,0.05")
    assert r.returncode == 0, r.stderr
    assert "MPI profile written" in r.stderr
    runs = [p for p in out.glob("hbprof-*.hbp") if not H.RANK_FILE_RE.search(p.stem)]
    assert len(runs) == 1 and (out / (runs[0].name + ".inject.csv")).exists()
    prof = H.read_hbprof(str(runs[0]))
    s = prof.aggregated
    assert len(s.segment) == 121 and (s.processes == 4).all()
    assert prof.computation_source in ("instructions", "cputime")
    # per segment the slowest rank's time: their sum is at least the run's time (the ranks
    # leave each collective at slightly different moments, so it can exceed it a little)
    assert prof.run_time_ns and 0.97 < s.duration_ns.sum() / prof.run_time_ns < 1.5
    names = prof.feature_names
    wb = s.features[:, names.index("posix_write_bytes")]
    ck = np.arange(121) % 20 == 19
    assert (wb[:120][ck[:120]] > 0).all() and (wb[:120][~ck[:120]] == 0).all()
    code = hbtool_here("interference", out, "--format", "json")
    assert code.returncode == 0, code.stderr
    doc = json.loads(code.stdout)
    assert doc["runs"][0]["segments"] == 121 and doc["runs"][0]["processes"] == 4
    assert doc["runs"][0]["computation_source"] == prof.computation_source
    assert 0 <= doc["interference_percent"] < 100 and doc["class"] in ("low", "medium", "high")
    assert doc["runs"][0]["clusters"] >= 2
    truth = H.read_injection_truth(str(runs[0]))
    assert sum(ns for ns, _ in truth.values()) > 0


def _rank_set(text: str) -> set[int]:
    """The ranks of "0, 2-4, 7": {0, 2, 3, 4, 7}."""
    out: set[int] = set()
    for part in text.split(", "):
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out


@need_mpi
def test_a_rank_killed_leaves_per_rank_files_that_hbtool_reads(tmp_path, profiler_built):
    r, out = _record(tmp_path, "--die-at", "60", "--die-rank", "2")
    assert r.returncode != 0
    files = sorted(out.glob("hbprof-*-r*.hbp"))
    assert len(files) == 4
    prof = H.read_profile_dir(str(out))
    # SIGKILL leaves no trace of itself: the rank is the one that ended first without one
    # (or among them, when mpirun SIGKILLed others too: then which went first is not told)
    failure = prof.meta["failure"]
    m = re.match(r"ranks ([\d, -]+): ended without a trace \(SIGKILL or _exit; which first", failure)
    assert failure.startswith("rank 2: ended without a trace") or (m and 2 in _rank_set(m.group(1))), failure
    seg_by_rank = {int(rk): int((prof.rank == rk).sum()) for rk in np.unique(prof.rank)}
    assert seg_by_rank[2] == 60
    res = hbtool_here("interference", out, "--format", "json")
    assert res.returncode == 0, res.stderr
    run = json.loads(res.stdout)["runs"][0]
    assert run["segments"] >= 60 and run["class"] == "failed" and not run["judged"]
    assert run["failure"] == prof.meta["failure"]


def _synthetic(tmp_path, S=200, R=4):
    rng = np.random.default_rng(1)
    seg = np.repeat(np.arange(S), R)
    rank = np.tile(np.arange(R), S)
    heavy = np.arange(S) % 4 == 0
    dur = (np.where(heavy, 3e6, 1e6)[seg] * (1 + 0.01 * rng.standard_normal(S * R))).astype(np.int64)
    dur[(seg == 50) & (rank == 1)] += 4_000_000
    vals = np.column_stack([np.where(heavy, 3e6, 1e6)[seg] * (1 + 0.001 * (rank % 2)),
                            np.full(S * R, 4.0), np.where(seg % 10 == 9, 4096.0, 0.0)])
    path = tmp_path / "hbprof-test-1.hbp"
    names = ["computation", "p2p_blocking", "posix_write_bytes"]
    H.write_run_file(str(path), rank, seg, dur, vals, names, run_ns=int(dur.reshape(S, R).max(1).sum()))
    table = SegmentProfile("t", rank, seg, dur, vals[:, 0], vals[:, 1:], names[1:],
                           run_time_ns=int(dur.reshape(S, R).max(1).sum()))
    return path, table


def test_run_file_reads_like_the_same_table(tmp_path):
    path, table = _synthetic(tmp_path)
    a = estimate(H.read_hbprof(str(path)))
    b = estimate(table)
    assert a.interference_percent == pytest.approx(b.interference_percent)
    assert (a.segments, a.groups, a.segments_interfered) == (b.segments, b.groups, b.segments_interfered)
    assert a.top[0]["segment"] == 50
    # the run's work, the least computation of any rank per segment, summed: the same both ways
    least = table.computation.reshape(200, 4).min(axis=1).sum()
    assert H.read_hbprof(str(path)).meta["work_least"] == pytest.approx(least, rel=1e-6)
    assert a.run_pace == pytest.approx(b.run_pace, rel=1e-6)
    assert b.run_pace == pytest.approx(table.run_time_ns / least)


def _damage(path, offset, data):
    b = bytearray(path.read_bytes())
    b[offset:offset + len(data)] = data
    path.write_bytes(bytes(b))


@pytest.mark.parametrize("how,msg", [
    ("truncate", "outside the file"),
    ("magic", "bad magic"),
    ("version", "format version"),
    ("bin_index", "does not match the bins"),
    ("metric_count", "metrics"),
    ("rank_table", "rank table"),
    ("nan_bin", "not a number"),
])
def test_damaged_run_files_one_line_exit_2(tmp_path, capsys, how, msg):
    path, _ = _synthetic(tmp_path)
    h = np.frombuffer(path.read_bytes()[:256], dtype=H.header_dtype())[0]
    if how == "truncate":
        path.write_bytes(path.read_bytes()[:-100])
    elif how == "magic":
        _damage(path, 0, b"XBPROF\0\0")
    elif how == "version":
        _damage(path, 8, (7).to_bytes(4, "little"))
    elif how == "bin_index":
        _damage(path, int(h["data_offset"]) + 5 * 64 + 16 + 2, (300).to_bytes(2, "little"))
    elif how == "metric_count":
        _damage(path, 36, (99).to_bytes(4, "little"))
    elif how == "rank_table":
        _damage(path, int(h["rank_table_offset"]) + 24, (10**9).to_bytes(8, "little"))
    elif how == "nan_bin":
        _damage(path, int(h["bin_table_offset"]), np.array([np.nan]).tobytes())
    code, out, err = run_cli(capsys, "interference", path)
    assert code == 2, (out, err)
    assert msg in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_random_damage_never_crashes(tmp_path, capsys):
    path, _ = _synthetic(tmp_path, S=40)
    good = path.read_bytes()
    rng = np.random.default_rng(7)
    for i in range(60):
        b = bytearray(good)
        for _ in range(rng.integers(1, 6)):
            pos = int(rng.integers(0, 4096 if rng.random() < 0.7 else len(b)))
            b[pos] = int(rng.integers(0, 256))
        if rng.random() < 0.2:
            b = b[: int(rng.integers(0, len(b)))]
        path.write_bytes(bytes(b))
        code, out, err = run_cli(capsys, "interference", path, "--format", "json")
        assert code in (0, 2), err
        assert "Traceback" not in err and "internal error" not in err


@pytest.mark.parametrize("args,msg", [
    (["--inject", "fast"], "expected MEAN_US,SD_US,PROB"),
    (["--inject", "100,10,1.5"], "PROB in [0, 1]"),
    (["--inject", "-5,10,0.1"], "must be >= 0"),
    (["--inject-calls", "mpi,disk"], "unknown family 'disk'"),
])
def test_record_bad_injector_options_one_line_exit_2(tmp_path, args, msg):
    r = run_hbtool("record", "-o", tmp_path / "o", *args, "--", "true")
    assert r.returncode == 2, r.stderr
    assert msg in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())
