"""End to end: the PMPI segment profiler (native_tracer/mpi) under real mpirun.

The files are parsed by a small reader written here from docs/profile-format.md
(not hbtool's), and its dtypes are checked against bin/hbprof_layout.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
MPI_DIR = ROOT / "native_tracer" / "mpi"
LIB = MPI_DIR / "lib" / "libhbprof.so"
EXBIN = MPI_DIR / "examples" / "bin"
NP = 4

# ---------------------------------------------------------------------------
# a reader of the format (docs/profile-format.md)

HEADER = np.dtype([
    ("magic", "S8"), ("version", "u4"), ("endian", "u4"), ("header_size", "u4"), ("flags", "u4"),
    ("rank", "i4"), ("nranks", "u4"), ("comp_source", "u4"), ("metric_count", "u4"),
    ("max_bins", "u4"), ("index_size", "u4"), ("record_size", "u4"), ("boundary_mask", "u4"),
    ("clock_id", "u4"), ("pid", "u4"), ("start_mono_ns", "u8"), ("start_real_ns", "i8"),
    ("run_ns", "u8"), ("segment_count", "u8"), ("metric_table_offset", "u8"),
    ("metric_entry_size", "u4"), ("rank_entry_size", "u4"), ("rank_table_offset", "u8"),
    ("bin_table_offset", "u8"), ("bin_entry_size", "u4"), ("inject_families", "u4"),
    ("data_offset", "u8"), ("data_length", "u8"), ("inject_mean_ns", "u8"), ("inject_sd_ns", "u8"),
    ("inject_prob", "f8"), ("inject_seed", "u8"), ("end_how", "u4"), ("end_detail", "i4"), ("host", "S64")])
METRIC_ENTRY = np.dtype([("name", "S32"), ("unit", "u4"), ("bins_used", "u4")])
RANK_ENTRY = np.dtype([
    ("rank", "i4"), ("flags", "u4"), ("run_ns", "u8"), ("segment_count", "u8"),
    ("first_record", "u8"), ("start_real_ns", "i8"), ("start_mono_ns", "u8"), ("pid", "u4"),
    ("comp_source", "u4"), ("end_how", "u4"), ("end_detail", "i4"), ("host", "S64")])
BIN = np.dtype([("value", "f8"), ("count", "u8")])
SEGMENT_RECORD = np.dtype([
    ("duration_ns", "u8"), ("end_ns", "u8"), ("segment", "u4"), ("bin", "u1", (22,)),
    ("reserved", "u2"), ("kind", "u2"), ("flags", "u2")])
BIN_RECORD = np.dtype([
    ("value", "f8"), ("count", "u8"), ("segment", "u4"), ("metric", "u2"), ("slot", "u2"),
    ("from_slot", "u2"), ("reserved0", "u2"), ("reserved", "u1", (16,)), ("kind", "u2"),
    ("flags", "u2")])
INJECT_RECORD = np.dtype([
    ("injected_ns", "u8"), ("segment", "u4"), ("delayed_calls", "u4"), ("reserved", "u1", (28,)),
    ("kind", "u2"), ("flags", "u2")])
RUN_RECORD = np.dtype([
    ("duration_ns", "u8"), ("segment", "u4"), ("rank", "i4"), ("bin", "u2", (22,)),
    ("boundary", "u2"), ("flags", "u2")])
STRUCTS = {"hbp_file_header": HEADER, "hbp_metric_entry": METRIC_ENTRY, "hbp_rank_entry": RANK_ENTRY,
           "hbp_bin": BIN, "hbp_segment_record": SEGMENT_RECORD, "hbp_bin_record": BIN_RECORD,
           "hbp_inject_record": INJECT_RECORD, "hbp_run_record": RUN_RECORD}

MAGIC = b"HBPROF\0\0"
ENDIAN_MARK = 0x01020304
FLAG_RANK, FLAG_RUN, FLAG_COMPLETE, FLAG_INJECT, FLAG_PRELOAD, FLAG_PARTIAL = 1, 2, 4, 8, 16, 32
REC_SEGMENT, REC_BIN_SET, REC_BIN_MERGE, REC_INJECT = 1, 2, 3, 4
COLL_ALLTOALL, COLL_ALLREDUCE, COLL_BARRIER, COLL_FINALIZE = 1, 4, 7, 15
METRICS = ["computation", "p2p_blocking", "p2p_nonblocking", "coll_one_to_all", "coll_all_to_one",
           "coll_all_to_all", "bytes_sent", "bytes_received", "posix_open", "posix_close", "posix_read",
           "posix_write", "posix_read_bytes", "posix_write_bytes", "mpiio_open", "mpiio_close",
           "mpiio_read", "mpiio_write", "mpiio_read_bytes", "mpiio_write_bytes"]
M = {name: i for i, name in enumerate(METRICS)}


def _header(raw: bytes):
    if len(raw) < HEADER.itemsize:
        raise ValueError("shorter than a header")
    h = np.frombuffer(raw, HEADER, count=1)[0]
    if h["endian"] != ENDIAN_MARK:
        h = np.frombuffer(raw, HEADER.newbyteorder(), count=1)[0]
        assert h["endian"] == ENDIAN_MARK, "no endianness mark"
    assert h["magic"] == MAGIC.rstrip(b"\0") and h["version"] == 2 and h["header_size"] == 256
    return h


def _metric_names(raw, h):
    off, n = int(h["metric_table_offset"]), int(h["metric_count"])
    assert h["metric_entry_size"] == METRIC_ENTRY.itemsize
    t = np.frombuffer(raw, METRIC_ENTRY, count=n, offset=off)
    return [x.decode() for x in t["name"]], t


def read_rank_file(path):
    """A per-rank stream: records up to the first empty or partial slot, replayed to values."""
    raw = Path(path).read_bytes()
    h = _header(raw)
    assert h["flags"] & FLAG_RANK and h["record_size"] == 48 and h["index_size"] == 1
    names, _ = _metric_names(raw, h)
    off = int(h["data_offset"])
    end = off + int(h["data_length"]) if h["flags"] & FLAG_COMPLETE else len(raw)
    n = max(0, (min(end, len(raw)) - off) // 48)
    kinds = np.frombuffer(raw, np.dtype([("body", "V44"), ("kind", "u2"), ("flags", "u2")]), count=n,
                          offset=off)["kind"]
    zero = np.flatnonzero(kinds == 0)
    n = int(zero[0]) if len(zero) else n
    kinds = kinds[:n]
    seg = np.frombuffer(raw, SEGMENT_RECORD, count=n, offset=off)
    binr = np.frombuffer(raw, BIN_RECORD, count=n, offset=off)
    inj = np.frombuffer(raw, INJECT_RECORD, count=n, offset=off)
    nm = int(h["metric_count"])
    # forward: the bins' final values; backward: every record's final slot
    value = np.zeros((nm, 256))
    for i in np.flatnonzero((kinds == REC_BIN_SET) | (kinds == REC_BIN_MERGE)):
        value[binr["metric"][i], binr["slot"][i]] = binr["value"][i]
    fin = np.tile(np.arange(256), (nm, 1))
    seg_idx = np.flatnonzero(kinds == REC_SEGMENT)
    final_slot = np.zeros((len(seg_idx), nm), dtype=np.int64)
    k = len(seg_idx)
    for i in range(n - 1, -1, -1):
        if kinds[i] == REC_SEGMENT:
            k -= 1
            final_slot[k] = fin[np.arange(nm), seg["bin"][i][:nm]]
        elif kinds[i] == REC_BIN_MERGE:
            m = binr["metric"][i]
            fin[m, binr["from_slot"][i]] = fin[m, binr["slot"][i]]
    values = value[np.arange(nm)[None, :], final_slot]
    s = seg[seg_idx]
    live = [len(np.unique(final_slot[:, m])) for m in range(nm)]
    ii = np.flatnonzero(kinds == REC_INJECT)
    return {"header": h, "names": names, "kinds": kinds, "segment": s["segment"].astype(np.int64),
            "duration_ns": s["duration_ns"].astype(np.int64), "end_ns": s["end_ns"].astype(np.int64),
            "boundary": s["flags"].astype(np.int64), "values": values, "live_bins": live,
            "merges": int((kinds == REC_BIN_MERGE).sum()),
            "inject": {int(inj["segment"][i]): (int(inj["injected_ns"][i]), int(inj["delayed_calls"][i]))
                       for i in ii}}


def read_run_file(path):
    raw = Path(path).read_bytes()
    h = _header(raw)
    assert h["flags"] & FLAG_RUN and h["flags"] & FLAG_COMPLETE
    assert h["record_size"] == 64 and h["index_size"] == 2 and h["max_bins"] == 512
    names, mt = _metric_names(raw, h)
    nr, nm = int(h["nranks"]), int(h["metric_count"])
    ranks = np.frombuffer(raw, RANK_ENTRY, count=nr, offset=int(h["rank_table_offset"]))
    bins = np.frombuffer(raw, BIN, count=nm * 512, offset=int(h["bin_table_offset"])).reshape(nm, 512)
    nrec = int(h["segment_count"])
    assert h["data_length"] == nrec * 64 and len(raw) >= int(h["data_offset"]) + nrec * 64
    rec = np.frombuffer(raw, RUN_RECORD, count=nrec, offset=int(h["data_offset"]))
    idx = rec["bin"][:, :nm].astype(np.int64)
    assert (idx < mt["bins_used"][None, :]).all()
    values = bins["value"][np.arange(nm)[None, :], idx]
    return {"header": h, "names": names, "metric_table": mt, "ranks": ranks, "bins": bins, "records": rec,
            "values": values}


# ---------------------------------------------------------------------------
# running the examples

@pytest.fixture(scope="session")
def built():
    if not shutil.which("mpicc") or not shutil.which("mpirun"):
        pytest.skip("mpicc/mpirun not found: the MPI profiler tests need Open MPI or MPICH")
    r = subprocess.run(["make", "-C", str(MPI_DIR), "-j2"], capture_output=True, text=True, timeout=300,
                       check=False)
    if r.returncode != 0:
        pytest.fail(f"building native_tracer/mpi failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return MPI_DIR


def mpirun(workdir, prog, *args, env=None, preload=True, np_=NP, timeout=90):
    """Run an example under mpirun in workdir (HBPROF_DIR = workdir unless env says otherwise)."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    base = {k: v for k, v in os.environ.items() if not k.startswith("HBPROF_") and k != "LD_PRELOAD"}
    base["OMPI_MCA_rmaps_base_oversubscribe"] = "1"
    pe = {"HBPROF_DIR": str(workdir)}
    pe.update(env or {})
    if preload:
        pe["LD_PRELOAD"] = str(LIB)
    cmd = ["mpirun", "--oversubscribe", "--allow-run-as-root", "-np", str(np_)]
    for k, v in pe.items():
        cmd += ["-x", f"{k}={v}"]
    cmd += [str(EXBIN / prog), *map(str, args)]
    return subprocess.run(cmd, cwd=workdir, env=base, capture_output=True, text=True, timeout=timeout,
                          check=False)


def checksum(r):
    m = re.search(r"checksum=(\S+)", r.stdout)
    assert m, r.stdout + r.stderr
    return m.group(1)


def run_file(d):
    files = [p for p in Path(d).glob("hbprof-*.hbp") if not re.search(r"-r\d+\.hbp$", p.name)]
    assert len(files) == 1, sorted(Path(d).iterdir())
    return files[0]


def rank_files(d):
    files = {int(re.search(r"-r(\d+)\.hbp$", p.name).group(1)): p for p in Path(d).glob("hbprof-*-r*.hbp")}
    return {r: read_rank_file(p) for r, p in sorted(files.items())}


def per_rank(run):
    """{rank: (records of that rank in segment order, values)}"""
    rec, out = run["records"], {}
    for e in run["ranks"]:
        a, n = int(e["first_record"]), int(e["segment_count"])
        out[int(e["rank"])] = (rec[a:a + n], run["values"][a:a + n])
    return out


# the examples' seeded knobs, as in examples/common.h
_MASK = (1 << 64) - 1


def _mix64(z):
    z = (z + 0x9E3779B97F4A7C15) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def _urand(seed, a, b):
    return (_mix64(seed ^ _mix64(a ^ _mix64(b))) >> 11) * 2.0**-53


def halo_of(seed, halo, i):
    return 8 * (1 + int(_urand(seed, 0x68616C6F, i) * (halo // 8)))


# ---------------------------------------------------------------------------
# the build and the layout

@pytest.fixture(scope="module")
def layout(built):
    out = subprocess.run([str(MPI_DIR / "bin" / "hbprof_layout")], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


@pytest.mark.parametrize("struct", list(STRUCTS))
def test_layout_matches_header(layout, struct):
    dt, c = STRUCTS[struct], layout["structs"][struct]
    assert dt.itemsize == c["size"]
    assert {name: dt.fields[name][1] for name in dt.names} == c["fields"]
    assert {name: dt.fields[name][0].itemsize for name in dt.names} == c["field_sizes"]


def test_layout_constants(layout):
    k = layout["constants"]
    assert k["HBP_VERSION"] == 2 and k["HBP_ENDIAN_MARK"] == ENDIAN_MARK and k["HBP_HEADER_SIZE"] == 256
    assert (k["HBP_FLAG_RANK_FILE"], k["HBP_FLAG_RUN_FILE"], k["HBP_FLAG_COMPLETE"], k["HBP_FLAG_INJECT"],
            k["HBP_FLAG_PRELOAD"], k["HBP_FLAG_PARTIAL"]) == (1, 2, 4, 8, 16, 32)
    assert (k["HBP_REC_SEGMENT"], k["HBP_REC_BIN_SET"], k["HBP_REC_BIN_MERGE"], k["HBP_REC_INJECT"]) == (1, 2, 3, 4)
    assert k["HBP_RANK_BINS"] == 256 and k["HBP_RUN_BINS"] == 512 and k["HBP_METRIC_COUNT"] == len(METRICS)
    assert [m["name"] for m in layout["metrics"]] == METRICS
    assert all(k["HBP_M_" + name.upper()] == i for i, name in enumerate(METRICS))
    assert layout["collectives"]["4"] == "Allreduce" and k["HBP_COLL_FINALIZE"] == COLL_FINALIZE


# ---------------------------------------------------------------------------
# a stencil with POSIX checkpoints: counts, bytes, durations, heavy iterations

ITERS, HALO, NPTS, HEAVY, CKPT = 200, 2048, 4096, 5, 25


@pytest.fixture(scope="module")
def stencil_posix(built, tmp_path_factory):
    d = tmp_path_factory.mktemp("stencil_posix")
    r = mpirun(d, "stencil", "--iterations", ITERS, "--work", 30, "--n", NPTS, "--heavy-every", HEAVY,
               "--halo", HALO, "--checkpoint-every", CKPT, "--io", "posix", "--seed", 3,
               env={"HBPROF_KEEP_RANK_FILES": "1"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "hbprof" not in r.stderr, r.stderr
    return d, r, read_run_file(run_file(d)), rank_files(d)


def test_files_and_header(stencil_posix):
    d, _, run, ranks = stencil_posix
    assert sorted(ranks) == list(range(NP))
    assert not list(d.glob("*.tmp")) and not list(d.glob("*.csv"))
    h = run["header"]
    assert h["rank"] == -1 and h["nranks"] == NP and run["names"] == METRICS
    assert h["flags"] & FLAG_PRELOAD and not h["flags"] & (FLAG_PARTIAL | FLAG_INJECT)
    assert h["comp_source"] in (1, 2) and h["clock_id"] == 1
    assert h["boundary_mask"] == 0x3FE
    print(f"\ncomputation source here: {'instructions' if h['comp_source'] == 1 else 'cputime'}")
    for r, rf in ranks.items():
        rh = rf["header"]
        assert rh["flags"] & FLAG_COMPLETE and rh["rank"] == r and rh["comp_source"] == h["comp_source"]
        assert rh["segment_count"] == ITERS + 1 and rh["data_length"] == 48 * len(rf["kinds"])
    e = run["ranks"]
    assert list(e["rank"]) == list(range(NP)) and (e["flags"] & 1).all()
    assert h["run_ns"] == e["run_ns"].max() and h["segment_count"] == e["segment_count"].sum()


def test_segments_and_durations(stencil_posix):
    _, _, run, ranks = stencil_posix
    for r, (rec, _) in per_rank(run).items():
        assert len(rec) == ITERS + 1  # one per Allreduce, and the last one up to MPI_Finalize
        assert (rec["segment"] == np.arange(ITERS + 1)).all() and (rec["rank"] == r).all()
        assert (rec["flags"] == 1).all()
        assert (rec["boundary"][:-1] == COLL_ALLREDUCE).all() and rec["boundary"][-1] == COLL_FINALIZE
        run_ns = int(run["ranks"]["run_ns"][r])
        total = int(rec["duration_ns"].sum())
        assert abs(total - run_ns) <= 0.01 * run_ns
        rf = ranks[r]
        assert (rf["duration_ns"] == rec["duration_ns"]).all()
        assert (np.diff(rf["end_ns"]) == rf["duration_ns"][1:]).all() and rf["end_ns"][-1] == run_ns


def test_p2p_and_collective_counts(stencil_posix):
    _, _, run, _ = stencil_posix
    for r, (rec, v) in per_rank(run).items():
        it = v[:-1]
        assert (it[:, M["p2p_nonblocking"]] == 4).all() and (it[:, M["p2p_blocking"]] == 0).all()
        # two halos each way, plus the boundary Allreduce of one double
        assert (it[:, M["bytes_sent"]] == 2 * HALO + 8).all()
        assert (it[:, M["bytes_received"]] == 2 * HALO + 8).all()
        for name in ("coll_one_to_all", "coll_all_to_one", "coll_all_to_all"):
            assert (it[:, M[name]] == 0).all()
        last = v[-1]  # MPI_Reduce of the checksum to rank 0
        assert last[M["coll_all_to_one"]] == 1 and last[M["bytes_sent"]] == 8
        assert last[M["bytes_received"]] == (8 if r == 0 else 0) and last[M["p2p_nonblocking"]] == 0


def test_checkpoint_io_is_exact(stencil_posix):
    _, _, run, _ = stencil_posix
    ck = np.array([(i + 1) % CKPT == 0 for i in range(ITERS)] + [False])
    for _, v in per_rank(run).values():
        assert (v[ck, M["posix_open"]] == 1).all() and (v[ck, M["posix_close"]] == 1).all()
        assert (v[ck, M["posix_write"]] == 1).all() and (v[ck, M["posix_write_bytes"]] == NPTS * 8).all()
        posix = [M[n] for n in METRICS if n.startswith("posix_")]
        assert (v[~ck][:, posix] == 0).all()
        assert (v[:, [M[n] for n in METRICS if n.startswith("mpiio_")]] == 0).all()
        assert (v[:, M["posix_read"]] == 0).all()


def test_heavy_iterations_have_three_times_the_computation(stencil_posix):
    _, _, run, _ = stencil_posix
    heavy = np.array([i % HEAVY == HEAVY - 1 for i in range(ITERS)])
    heavy[0] = False
    normal = ~heavy
    normal[0] = False  # segment 0 holds the set-up too
    for r, (_, v) in per_rank(run).items():
        comp = v[:-1, M["computation"]]
        # each heavy segment against the normal ones on either side of it, the median of those
        # ratios: this VM now and then charges the work of a stretch of the run several times
        # its CPU time, or less (a stall of tens of ms, docs/progress.md), and a stretch moves
        # neighbours alike. Quantiles over the whole run were not robust to it: lower quartiles
        # gave 3.67 and 2.29 (one run in about 30 each), medians 3.76; these paired medians gave
        # 2.87-3.09 in 32 ranks' runs where the quartiles gave 2.29-3.22
        at = np.flatnonzero(heavy)
        at = at[(at >= 2) & (at + 1 < len(comp))]
        assert len(at) >= 30 and normal[at - 1].all() and normal[at + 1].all()
        ratio = np.median(comp[at] / ((comp[at - 1] + comp[at + 1]) / 2))
        assert 2.4 < ratio < 3.6, (r, ratio)


def test_bins_within_limits_and_counts_consistent(stencil_posix):
    _, _, run, ranks = stencil_posix
    used = run["metric_table"]["bins_used"]
    assert (used <= 512).all() and (used >= 1).all()
    total = int(run["header"]["segment_count"])
    for m in range(len(METRICS)):
        b = run["bins"][m]
        assert b["count"][: used[m]].sum() == total and (b["count"][used[m]:] == 0).all()
        assert (np.diff(b["value"][: used[m]]) > 0).all()  # sorted by value
    for r, rf in ranks.items():
        assert max(rf["live_bins"]) <= 256
        # the run file agrees with this rank's own replay (exactly for the few-valued metrics)
        _, v = per_rank(run)[r]
        assert (v[:, 1:] == rf["values"][:, 1:]).all()
        rel = np.abs(v[:, 0] / rf["values"][:, 0] - 1)
        assert np.median(rel) < 0.01 and rel.max() < 0.1


# ---------------------------------------------------------------------------
# other programs and options

def test_stencil_mpiio_blocking(built, tmp_path):
    n, iters, ck = 1024, 60, 20
    r = mpirun(tmp_path, "stencil", "--iterations", iters, "--work", 10, "--n", n, "--halo", 512,
               "--checkpoint-every", ck, "--io", "mpiio", "--p2p", "blocking")
    assert r.returncode == 0, r.stdout + r.stderr
    assert not list(tmp_path.glob("hbprof-*-r*.hbp"))  # removed after the run file was written
    run = read_run_file(run_file(tmp_path))
    isck = np.array([(i + 1) % ck == 0 for i in range(iters)] + [False])
    for rec, v in per_rank(run).values():
        assert len(rec) == iters + 1
        it = v[:-1]
        assert (it[:, M["p2p_blocking"]] == 2).all() and (it[:, M["p2p_nonblocking"]] == 0).all()
        assert (it[:, M["bytes_sent"]] == 2 * 512 + 8).all()
        for name, want in (("mpiio_open", 1), ("mpiio_close", 1), ("mpiio_write", 1),
                           ("mpiio_write_bytes", n * 8), ("mpiio_read", 0)):
            assert (v[isck, M[name]] == want).all(), name
        assert (v[~isck][:, [M[x] for x in METRICS if x.startswith("mpiio_")]] == 0).all()
        # the MPI-IO library's own open/pwrite are inside MPI_File_* and not counted as POSIX
        assert (v[:, [M[x] for x in METRICS if x.startswith("posix_")]] == 0).all()


def test_transpose_alltoall_and_classes(built, tmp_path):
    iters, halo = 80, 512
    r = mpirun(tmp_path, "transpose", "--iterations", iters, "--work", 5, "--halo", halo, "--heavy-every", 4)
    assert r.returncode == 0, r.stdout + r.stderr
    run = read_run_file(run_file(tmp_path))
    for rank, (rec, v) in per_rank(run).items():
        assert len(rec) == iters + 1
        assert (rec["boundary"][:-1] == COLL_ALLTOALL).all() and rec["boundary"][-1] == COLL_FINALIZE
        it = v[:-1]
        assert (it[:, M["coll_one_to_all"]] == 1).all()  # MPI_Bcast
        assert (it[:, M["coll_all_to_all"]] == 1).all()  # Allreduce on a half-size communicator
        assert (it[:, M["coll_all_to_one"]] == 0).all()
        assert (it[:, M["bytes_sent"]] == NP * halo + 8 + (8 if rank == 0 else 0)).all()
        assert (it[:, M["bytes_received"]] == NP * halo + 8 + (0 if rank == 0 else 8)).all()
        assert v[-1, M["coll_all_to_one"]] == 1


def test_boundaries_from_the_environment(built, tmp_path):
    r = mpirun(tmp_path, "stencil", "--iterations", 20, "--work", 5, env={"HBPROF_BOUNDARIES": "MPI_Barrier"})
    assert r.returncode == 0, r.stdout + r.stderr
    run = read_run_file(run_file(tmp_path))
    assert run["header"]["boundary_mask"] == 1 << COLL_BARRIER
    for rec, v in per_rank(run).values():
        assert len(rec) == 1 and rec["boundary"][0] == COLL_FINALIZE
        assert v[0, M["coll_all_to_all"]] == 20 and v[0, M["p2p_nonblocking"]] == 80


def test_many_distinct_values_stay_within_the_bins(built, tmp_path):
    iters, halo, seed = 3000, 8192, 5
    r = mpirun(tmp_path, "stencil", "--iterations", iters, "--work", 2, "--n", 1024, "--jitter", 0.5,
               "--vary-halo", "--halo", halo, "--seed", seed, env={"HBPROF_KEEP_RANK_FILES": "1"})
    assert r.returncode == 0, r.stdout + r.stderr
    run = read_run_file(run_file(tmp_path))
    ranks = rank_files(tmp_path)
    truth = np.array([2 * halo_of(seed, halo, i) + 8 for i in range(iters)], dtype=float)
    assert len(np.unique(truth)) > 600  # far more distinct values than bins
    assert (run["metric_table"]["bins_used"] <= 512).all()
    for rk, rf in ranks.items():
        assert len(rf["segment"]) == iters + 1
        assert max(rf["live_bins"]) <= 256 and rf["live_bins"][M["bytes_sent"]] == 256
        assert rf["merges"] > 0
        got = rf["values"][:-1, M["bytes_sent"]]
        rel = np.abs(got / truth - 1)
        assert np.median(rel) < 0.01 and rel.max() < 0.1, (np.median(rel), rel.max())
        _, v = per_rank(run)[rk]
        rel_run = np.abs(v[:-1, M["bytes_sent"]] / truth - 1)
        assert np.median(rel_run) < 0.02 and rel_run.max() < 0.15


# ---------------------------------------------------------------------------
# the injector

def test_injector_truth(built, tmp_path):
    iters, mean_us, sd_us, prob = 300, 2000, 300, 0.02
    r = mpirun(tmp_path, "stencil", "--iterations", iters, "--work", 20,
               env={"HBPROF_INJECT": f"{mean_us},{sd_us},{prob}", "HBPROF_INJECT_CALLS": "mpi",
                    "HBPROF_INJECT_SEED": "7", "HBPROF_KEEP_RANK_FILES": "1"})
    assert r.returncode == 0, r.stdout + r.stderr
    rf = run_file(tmp_path)
    run = read_run_file(rf)
    h = run["header"]
    assert h["flags"] & FLAG_INJECT and h["inject_families"] == 1 and h["inject_seed"] == 7
    assert h["inject_mean_ns"] == mean_us * 1000 and h["inject_prob"] == prob
    truth = tmp_path / (rf.name + ".inject.csv")
    with open(truth, newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["rank", "segment", "injected_ns", "delayed_calls"]
    t = np.array(rows[1:], dtype=np.int64)
    assert len(t) == NP * (iters + 1)
    assert (t[:, 0] == np.repeat(np.arange(NP), iters + 1)).all()
    assert (t[:, 1] == np.tile(np.arange(iters + 1), NP)).all()
    # calls per rank: per iteration 2 Irecv + 2 Isend + Waitall + Allreduce, then one Reduce
    calls = NP * (6 * iters + 1)
    delayed = int(t[:, 3].sum())
    expect, sd = calls * prob, np.sqrt(calls * prob * (1 - prob))
    assert abs(delayed - expect) < 5 * sd, (delayed, expect)
    # The truth is the time each sleep took, which is the draw plus the wake-up: a sleep never
    # ends early, so the mean is at least the requested one; but under load a few wake-ups wait
    # for a core for many ms (at a load average of 9 on 2 cores: single sleeps of 2 ms took up to
    # 24 ms, and the mean per call reached 1.3x), so the typical sleep is checked by the median
    # of the segments with one delayed call (their truth is that call's): near the requested
    # mean (the draws' median is within 2 % of it; a unit error or a repeated sleep is not)
    per_call = t[:, 2].sum() / delayed / 1000.0
    assert per_call > mean_us * 0.97, per_call
    single = t[t[:, 3] == 1, 2] / 1000.0
    assert len(single) > 0.5 * delayed, (len(single), delayed)
    assert mean_us * 0.97 < np.median(single) < mean_us * 1.3, np.median(single)
    ranks = rank_files(tmp_path)
    for rank, (rec, _) in per_rank(run).items():
        mine = t[t[:, 0] == rank]
        assert {s: (ns, c) for _, s, ns, c in mine if c} == ranks[rank]["inject"]
        assert (rec["duration_ns"] >= mine[:, 2]).all()  # the sleep is inside the segment
    # segments with a delay on some rank take longer (the Allreduce waits for it)
    dur = np.max([rec["duration_ns"] for rec, _ in per_rank(run).values()], axis=0)[1:-1]
    hit = np.zeros(iters + 1, bool)
    hit[t[t[:, 3] > 0, 1]] = True
    hit = hit[1:-1]
    assert hit.sum() > 10
    assert np.median(dur[hit]) - np.median(dur[~hit]) > 0.5 * mean_us * 1000


# ---------------------------------------------------------------------------
# crashes, failures, pass-through

def test_killed_rank_leaves_a_readable_file(built, tmp_path):
    r = mpirun(tmp_path, "stencil", "--iterations", 200, "--work", 10, "--die-at", 50, "--die-rank", 1)
    assert r.returncode != 0
    assert not [p for p in tmp_path.glob("hbprof-*.hbp") if not re.search(r"-r\d+\.hbp$", p.name)]
    ranks = rank_files(tmp_path)
    assert sorted(ranks) == list(range(NP))
    for rf in ranks.values():
        assert not rf["header"]["flags"] & FLAG_COMPLETE
        # every rank finished the Allreduce of iterations 0..49, none the one of iteration 50
        assert (rf["segment"] == np.arange(50)).all() and (rf["duration_ns"] > 0).all()
        assert (rf["values"][1:, M["p2p_nonblocking"]] == 4).all()
    # a file cut in the middle of a record reads up to the last whole one
    path = next(tmp_path.glob("hbprof-*-r1.hbp"))
    raw = path.read_bytes()
    full = read_rank_file(path)
    n = len(full["kinds"])
    cut = tmp_path / "cut.hbp"
    for keep in (n - 1, n // 2):
        cut.write_bytes(raw[:4096 + 48 * keep + 17])
        part = read_rank_file(cut)
        assert len(part["kinds"]) == keep
        k = len(part["segment"])
        assert (part["segment"] == full["segment"][:k]).all()
        assert (part["duration_ns"] == full["duration_ns"][:k]).all()


def test_disable_is_pass_through_and_checksums_agree(built, tmp_path):
    args = ("--iterations", 40, "--work", 10, "--n", 1024, "--checkpoint-every", 10, "--heavy-every", 3)
    prof = mpirun(tmp_path / "prof", "stencil", *args)
    off = mpirun(tmp_path / "off", "stencil", *args, env={"HBPROF_DISABLE": "1"})
    bare = mpirun(tmp_path / "bare", "stencil", *args, preload=False)
    for r in (prof, off, bare):
        assert r.returncode == 0, r.stdout + r.stderr
    assert checksum(prof) == checksum(off) == checksum(bare)
    assert not list((tmp_path / "off").glob("hbprof-*")) and not list((tmp_path / "bare").glob("hbprof-*"))
    assert len(list((tmp_path / "prof").glob("hbprof-*"))) == 1


def test_failure_warns_once_and_the_program_goes_on(built, tmp_path):
    args = ("--iterations", 30, "--work", 10, "--checkpoint-every", 10)
    bad = mpirun(tmp_path, "stencil", *args, env={"HBPROF_DIR": str(tmp_path / "no" / "such" / "dir")})
    good = mpirun(tmp_path / "good", "stencil", *args, preload=False)
    assert bad.returncode == 0, bad.stdout + bad.stderr
    assert checksum(bad) == checksum(good)
    warnings = [line for line in bad.stderr.splitlines() if line.startswith("hbprof: ")]
    per = [sum(line.startswith(f"hbprof: rank {r}:") for line in warnings) for r in range(NP)]
    assert per == [1] * NP, bad.stderr
    assert not list(tmp_path.glob("hbprof-*"))
    quiet = mpirun(tmp_path, "stencil", *args, env={"HBPROF_DIR": str(tmp_path / "nope"), "HBPROF_QUIET": "1"})
    assert quiet.returncode == 0 and "hbprof" not in quiet.stderr


def test_linked_instead_of_preloaded(built, tmp_path):
    r = mpirun(tmp_path, "stencil_linked", "--iterations", 30, "--work", 5, preload=False)
    assert r.returncode == 0, r.stdout + r.stderr
    run = read_run_file(run_file(tmp_path))
    assert not run["header"]["flags"] & FLAG_PRELOAD
    assert (run["ranks"]["segment_count"] == 31).all()


def _doc_tables():
    """(struct -> {field: (offset, size)}) from the tables of docs/profile-format.md."""
    text = (ROOT / "docs" / "profile-format.md").read_text()
    out = {}
    for struct in STRUCTS:
        m = re.search(rf"\(`struct {struct}`, (\d+) bytes\)\n\n(.*?)\n\n", text, re.DOTALL)
        assert m, f"docs/profile-format.md has no table for struct {struct}"
        rows = {}
        for line in m.group(2).splitlines()[2:]:
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[cells[3]] = (int(cells[0]), int(cells[1]))
        out[struct] = (int(m.group(1)), rows)
    return out


@pytest.mark.parametrize("struct", list(STRUCTS))
def test_docs_mirror_the_header(layout, struct):
    size, doc = _doc_tables()[struct]
    c = layout["structs"][struct]
    assert size == c["size"]
    assert {f: off for f, (off, _) in doc.items()} == c["fields"]
    assert {f: sz for f, (_, sz) in doc.items()} == c["field_sizes"]


# ---------------------------------------------------------------------------
# the bin rule against a naive reference (src/bins.c alone, through a harness)

def _reldist(a, b):
    if a == b:
        return 0.0
    lo = min(abs(a), abs(b))
    return float("inf") if lo == 0 else abs(a - b) / lo


def _wmean(a, ca, b, cb):
    m = a + (b - a) * (cb / (ca + cb))
    return min(max(m, min(a, b)), max(a, b))


def naive_online(values, nbins=256):
    """The per-rank rule written plainly: returns the slot of every value and the final bins."""
    val, cnt, slots = [], [], []
    for raw in values:
        v = float(raw)
        hit = [s for s in range(len(val)) if cnt[s] and val[s] == v]
        if hit:
            s = min(hit, key=lambda s: (val[s], s))
            cnt[s] += 1
        elif len(val) < nbins:
            s = len(val)
            val.append(v)
            cnt.append(1)
        else:
            cand = sorted([(val[s], 0, s) for s in range(nbins)] + [(v, -1, None)])  # new first on ties
            d = [_reldist(cand[i][0], cand[i + 1][0]) for i in range(nbins)]
            i = min(range(nbins), key=lambda i: (d[i], i))
            a, b = cand[i][2], cand[i + 1][2]
            if a is None or b is None:
                s = b if a is None else a
                val[s] = _wmean(val[s], cnt[s], v, 1)
                cnt[s] += 1
            else:
                keep, gone = min(a, b), max(a, b)
                val[keep] = _wmean(val[a], cnt[a], val[b], cnt[b])
                cnt[keep] = cnt[a] + cnt[b]
                val[gone], cnt[gone] = v, 1
                s = gone
        slots.append(s)
    return slots, val, cnt


def naive_offline(values, counts, maxbins):
    order = sorted(range(len(values)), key=lambda i: (values[i], i))
    groups = []  # [value, count, members]
    for i in order:
        if groups and groups[-1][0] == values[i]:
            groups[-1][1] += counts[i]
            groups[-1][2].append(i)
        else:
            groups.append([values[i], counts[i], [i]])
    keys = list(range(len(groups)))  # the left node's original position breaks ties
    while len(groups) > maxbins:
        d = [(_reldist(groups[j][0], groups[j + 1][0]), keys[j]) for j in range(len(groups) - 1)]
        j = min(range(len(d)), key=lambda j: d[j])
        a, b = groups[j], groups[j + 1]
        groups[j] = [_wmean(a[0], a[1], b[0], b[1]), a[1] + b[1], a[2] + b[2]]
        del groups[j + 1]
        del keys[j + 1]
    mapping = [0] * len(values)
    for g, (_, _, members) in enumerate(groups):
        for i in members:
            mapping[i] = g
    return [(g[0], g[1]) for g in groups], mapping


@pytest.fixture(scope="module")
def harness(built, tmp_path_factory):
    exe = tmp_path_factory.mktemp("harness") / "bins_harness"
    subprocess.run(["mpicc", "-O2", "-Wall", "-Wextra", "-Werror", "-Iinclude", "-Isrc", "tools/bins_harness.c",
                    "src/bins.c", "-lm", "-o", str(exe)], cwd=MPI_DIR, check=True, capture_output=True)
    return exe


@pytest.mark.parametrize("case", ["random", "clustered", "zeros", "ramp"])
def test_online_bins_match_the_naive_rule(harness, case):
    rng = np.random.default_rng(11)
    if case == "random":
        vals = rng.integers(1, 10**6, 3000)
    elif case == "clustered":
        vals = np.concatenate([rng.integers(c, c + 200, 400) for c in (100, 5000, 5100, 90000, 10**7)])
        rng.shuffle(vals)
    elif case == "zeros":
        vals = np.where(rng.random(2000) < 0.2, 0, rng.integers(1, 3000, 2000))
    else:
        vals = np.arange(1, 1500) * 7
    out = subprocess.run([str(harness), "online"], input="\n".join(map(str, vals)), capture_output=True,
                         text=True, check=True).stdout.splitlines()
    slots = [int(line.split()[1]) for line in out if line.startswith("S ")]
    want, val, cnt = naive_online(vals.tolist())
    assert slots == want
    # replaying the log gives the same final values as the reference
    final = {}
    for line in out:
        if line.startswith("B "):
            fields = line.split()
            final[int(fields[3])] = float(fields[5])
    assert all(final[s] == val[s] for s in range(len(val)))
    assert len(val) <= 256 and sum(cnt) == len(vals)


@pytest.mark.parametrize("maxbins", [512, 40, 3])
def test_offline_merge_matches_the_naive_rule(harness, maxbins):
    rng = np.random.default_rng(5)
    values = np.concatenate([rng.integers(1, 10**5, 700), rng.integers(1, 10**5, 50), np.zeros(3)]).astype(float)
    values[10:20] = values[0]  # some equal values
    counts = rng.integers(1, 9, len(values))
    text = "\n".join(f"{v!r} {c}" for v, c in zip(values.tolist(), counts.tolist()))
    out = subprocess.run([str(harness), "offline", str(maxbins)], input=text, capture_output=True, text=True,
                         check=True).stdout.splitlines()
    n = int(out[0].split()[1])
    bins = [(float(x.split()[1]), int(x.split()[2])) for x in out[1:1 + n]]
    mapping = [int(x.split()[1]) for x in out[1 + n:]]
    want_bins, want_map = naive_offline(values.tolist(), counts.tolist(), maxbins)
    assert bins == want_bins and mapping == want_map
    assert n <= maxbins and sum(c for _, c in bins) == counts.sum()
