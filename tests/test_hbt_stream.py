"""The bounded-memory reader of tracer traces (hbtool.io.hbt_stream): the same answers as
the reader that loads every beat, on real traces; live traces read as consistent
snapshots; corrupted time stamps skipped with a warning."""

from __future__ import annotations

import json
import os
import subprocess
import time
import warnings

import numpy as np
import pandas as pd
import pytest

from hbtool import config
from hbtool.analyzers.diagnosis import features_table
from hbtool.analyzers.summary import summarize_threads
from hbtool.io import read_heartbeats
from hbtool.io.hbt import record_dtype
from hbtool.model.heartbeats import StreamedTrace

from conftest import ROOT, SAMPLES, build_traced, run_cli, run_hbtool, spy_on_reader

HBT_SAMPLES = sorted(p.name for p in SAMPLES.iterdir() if p.is_dir() and list(p.glob("*.hbt")))


def _both(path, which="auto"):
    eager = read_heartbeats(path).with_beats(which)
    streamed = read_heartbeats(path, stream=True).with_beats(which)
    assert isinstance(streamed, StreamedTrace) and not isinstance(eager, StreamedTrace)
    return eager, streamed


def _same_trace(eager, streamed):
    """Everything but the beats table is equal, and each thread's beat times are."""
    pd.testing.assert_frame_equal(summarize_threads(eager, beatless=True), summarize_threads(streamed, beatless=True))
    for name in ("events", "monitor", "waits", "cpu"):
        a, b = getattr(eager, name), getattr(streamed, name)
        pd.testing.assert_frame_equal(a.astype({c: str for c in a.select_dtypes("category")}),
                                      b.astype({c: str for c in b.select_dtypes("category")}))
    assert eager.warnings == streamed.warnings
    assert eager.runs == streamed.runs
    assert eager.sources() == streamed.sources()
    assert streamed.beat_count() == len(eager.beats)
    times = {k: g["t"].to_numpy() for k, g in eager.threads()}
    loaded = {k: load() for k, n, load in streamed.thread_loaders()}
    assert list(times) == list(loaded)
    for k in times:
        np.testing.assert_array_equal(times[k], loaded[k])


@pytest.mark.parametrize("name", HBT_SAMPLES)
def test_streamed_reader_agrees_with_the_whole_reader_on_every_sample(name):
    eager, streamed = _both(SAMPLES / name)
    _same_trace(eager, streamed)
    pd.testing.assert_frame_equal(features_table(eager), features_table(streamed))
    # asking a streamed trace for its beats table reads it whole: the same table
    pd.testing.assert_frame_equal(eager.beats, streamed.beats)


@pytest.fixture(scope="module")
def burst(tmp_path_factory, tracer_built):
    """beat_burst (benchmarks/beat_burst.c), built against the real tracer."""
    d = tmp_path_factory.mktemp("burst")
    return build_traced(ROOT / "benchmarks" / "beat_burst.c", d / "beat_burst", opt="-O2")


def test_record_counts_what_it_wrote_without_reading_the_beats_into_memory(burst, tmp_path, capsys, monkeypatch):
    """`hbtool record`'s summary line counts beats from the streamed reader's per-thread
    statistics: before, it read every beat of the trace into memory once the program had ended
    (10 M beats: 36 s and 3.4 GB after the run, for one line)."""
    def never(self):
        raise AssertionError("record read every beat into memory")

    kinds = spy_on_reader(monkeypatch)
    monkeypatch.setattr(StreamedTrace, "_materialize", never)
    code, _, err = run_cli(capsys, "record", "-o", tmp_path / "t", "--", burst, 3, 20000)
    assert code == 0, err
    assert kinds == [StreamedTrace]
    assert err.splitlines()[-1] == \
        f"hbtool: trace written to {tmp_path / 't'}/ (1 file, 4 threads (3 with beats), 60000 api beats)"


def _printed(values, decimals: int) -> list:
    """`values` rounded as the CLI prints them (Python's round, correctly rounded; pandas' and
    numpy's round scale by 10**decimals first, and 0.0084295 came out 0.00843, not 0.008429)."""
    return [round(float(v), decimals) for v in values]


def _record(burst, tmp_path, *args) -> "os.PathLike":
    env = dict(os.environ, HBTRACE_DIR=str(tmp_path / "trace"))
    env.pop("LD_PRELOAD", None)
    subprocess.run([str(burst), *map(str, args)], env=env, check=True, timeout=120)
    (f,) = (tmp_path / "trace").glob("*.hbt")
    return f


def test_small_windows_and_a_cut_short_file_give_the_same_answers(burst, tmp_path, monkeypatch):
    """Windows of two chunks (a thread's chunks spread over many windows), then the same
    file cut inside a chunk: streamed and whole readers agree, warnings included."""
    f = _record(burst, tmp_path, 3, 9000)
    monkeypatch.setattr(config, "HBT_READ_WINDOW_BYTES", 2 * 65536)
    eager, streamed = _both(f)
    _same_trace(eager, streamed)
    assert streamed.beat_count() == 27000
    cut = tmp_path / "cut.hbt"
    cut.write_bytes(f.read_bytes()[: 4096 + 5 * 65536 + 1000])
    eager, streamed = _both(cut)
    _same_trace(eager, streamed)
    assert any("shorter than its header says" in w for w in streamed.warnings)
    assert any("half-written" in w for w in streamed.warnings)
    assert 0 < streamed.beat_count() < 27000


def test_diagnose_and_info_print_what_they_printed_before(burst, tmp_path):
    """The CLI reads tracer traces streamed: its figures are the whole reader's (json,
    rounded as the output rounds them)."""
    f = _record(burst, tmp_path, 4, 20000)
    r = run_hbtool("info", "--format", "json", f)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    eager = read_heartbeats(f).with_beats("auto")
    s = summarize_threads(eager, beatless=True)
    assert [t["beats"] for t in doc["threads"]] == s["beats"].tolist() == [20000] * 4 + [0]
    assert [t["first_s"] for t in doc["threads"]] == _printed(s["first_s"], 6)
    assert [t["last_s"] for t in doc["threads"]] == _printed(s["last_s"], 6)
    assert doc["runs"][0]["live"] is False
    r = run_hbtool("diagnose", "--format", "json", f)
    assert r.returncode == 0, r.stderr
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.RankWarning)  # a burst's flat heart rate: as the CLI
        feats = features_table(eager)
    got = json.loads(r.stdout)["threads"]
    assert [t["GTR"] for t in got] == _printed(feats["GTR"], 4)
    assert [t["DTW"] for t in got] == _printed(feats["DTW"], 3)
    assert [t["beats"] for t in got] == [20000] * 4


def test_info_on_a_trace_being_written_is_a_consistent_live_snapshot(burst, tmp_path):
    """A real traced program beats until told to stop; info reads its trace three times
    meanwhile. Each snapshot says it is live, and every beat it counts is the very record
    the finished trace holds (no half-written record, no record seen twice or lost). (The
    program ran for a fixed number of beats before, about 7 s: on a loaded machine a read
    took longer than that, and the test saw one snapshot -- a CI run.)"""
    env = dict(os.environ, HBTRACE_DIR=str(tmp_path / "trace"))
    env.pop("LD_PRELOAD", None)
    stop = tmp_path / "stop"
    proc = subprocess.Popen([str(burst), "4", "0", "2000", str(stop)], env=env)
    try:
        snaps = []
        deadline = time.monotonic() + 100
        while len(snaps) < 3 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.3)
            files = list((tmp_path / "trace").glob("*.hbt"))
            if not files:
                continue
            r = run_hbtool("info", "--format", "json", files[0])
            assert r.returncode == 0, r.stderr
            assert "Traceback" not in r.stderr
            doc = json.loads(r.stdout)
            if not doc["runs"][0]["live"]:
                break
            tr = read_heartbeats(files[0], stream=True).with_beats("auto")
            if not tr.runs[tr.run_names[0]].get("live"):
                break  # the program ended in between
            snaps.append((doc, tr, {k: load() for k, _, load in tr.thread_loaders()}))
    finally:
        stop.touch()
        assert proc.wait(timeout=120) == 0
    assert len(snaps) >= 2, "the program ended before info could read its trace twice"
    final = read_heartbeats(files[0]).with_beats("auto")
    whole = {k: g["t"].to_numpy() for k, g in final.threads()}
    before = 0
    for doc, tr, times in snaps:
        assert doc["runs"][0]["live"] is True
        assert tr.runs[tr.run_names[0]]["live"]
        assert {t["ending"] for t in doc["threads"]} <= {"running"}
        n = sum(t["beats"] for t in doc["threads"])
        assert before <= n <= tr.beat_count()  # info's snapshot, then the library's: later, more
        before = tr.beat_count()
        for k, t in times.items():
            np.testing.assert_array_equal(t, whole[k][: t.size])  # a prefix of what was finally written
            row = tr.stats[tr.stats["thread"] == k[2]]  # the same snapshot's summary
            assert int(row["beats"].sum()) == t.size and float(row["last_s"].max()) == t[-1]
    r = run_hbtool("info", "--format", "json", files[0])
    assert json.loads(r.stdout)["runs"][0]["live"] is False


def test_a_corrupted_time_stamp_is_skipped_with_a_warning(burst, tmp_path):
    """One beat's time stamp set to about 1.2e10 s (a fuzzer's find: `behavior` raised
    pandas' OutOfBoundsTimedelta): every command skips that record and says so."""
    f = _record(burst, tmp_path, 2, 3000)
    raw = bytearray(f.read_bytes())
    recs = np.frombuffer(bytes(raw[4096:]), dtype=record_dtype("<"))
    slot = np.arange(recs.size)
    k = int(np.flatnonzero((recs["kind"] == 1) & (slot % 2048 != 0))[100])  # a beat (not a chunk header)
    at = 4096 + 32 * k
    raw[at: at + 8] = int(1.2e19).to_bytes(8, "little")
    bad = tmp_path / "bad.hbt"
    bad.write_bytes(bytes(raw))
    for cmd in ("behavior", "info", "diagnose"):
        r = run_hbtool(cmd, bad)
        assert r.returncode == 0, (cmd, r.stderr)
        assert "Traceback" not in r.stderr and "OutOfBounds" not in r.stderr
        assert "skipped 1 record whose time stamp lies more than 100 years" in r.stderr, (cmd, r.stderr)
    eager, streamed = _both(bad)
    _same_trace(eager, streamed)
    assert streamed.beat_count() == 5999


@pytest.mark.parametrize("mode", ["all", "fork"])
def test_openmp_beats_waits_and_a_forked_child_read_alike(tracer_built, tmp_path, mode, monkeypatch):
    """Automatic beats of every OpenMP construct, with barrier and outside-region waits,
    cpu records and construct names (tests/programs/omp_beats.c under `hbtool record
    --beats openmp`), in whole windows and in windows of one largest chunk; `fork`: a run
    directory of two processes' files."""
    from hbtool.analyzers.diagnosis import _counts_progress
    from hbtool.analyzers.summary import region_work, wait_times

    exe = tmp_path / "omp_beats"
    subprocess.run(["gcc", "-fopenmp", "-O2", str(ROOT / "tests" / "programs" / "omp_beats.c"), "-o", str(exe)],
                   check=True)
    out = tmp_path / "trace"
    run_hbtool("record", "-q", "-o", out, "--beats", "openmp", "--", exe, mode)
    assert len(list(out.glob("*.hbt"))) == (2 if mode == "fork" else 1)
    for window in (config.HBT_READ_WINDOW_BYTES, 65536):
        monkeypatch.setattr(config, "HBT_READ_WINDOW_BYTES", window)
        for which in ("auto", "openmp", "api"):
            eager, streamed = _both(out, which)
            # the work in the regions from the per-chunk sums of waits (before the waits are read)
            pd.testing.assert_frame_equal(_by_key(region_work(eager)), _by_key(region_work(streamed)))
            assert _counts_progress(eager) == _counts_progress(streamed)
            _same_trace(eager, streamed)
            pd.testing.assert_frame_equal(wait_times(eager), wait_times(streamed))
        assert streamed.beat_count() == 0 and len(streamed.waits) > 0  # api: none; the waits stay
    eager, streamed = _both(out)
    assert streamed.beat_count() > 100
    if mode == "all":  # a 200 ms sleep in a thread's records: a cpu record; the master outside the regions
        assert len(streamed.cpu) > 0 and "outside" in set(streamed.wait_stats["sync"].astype(str))
    assert np.isfinite(region_work(streamed)["work_s"]).all()


def _by_key(df):
    return df.astype({"run": str}).sort_values(["run", "process", "thread"]).reset_index(drop=True)


COMMANDS = (["info"], ["info", "--format", "json"], ["info", "--format", "csv"], ["diagnose"],
            ["diagnose", "--format", "json"], ["diagnose", "--format", "json", "--reference", SAMPLES / "pi-normal"])


def _cli_both(capsys, monkeypatch, *paths):
    """Each command's (exit, stdout, stderr) reading `paths` streamed, then whole."""
    import hbtool.io

    from conftest import run_cli

    whole = hbtool.io.read_heartbeats
    out = []
    for cmd in COMMANDS:
        monkeypatch.setattr(hbtool.io, "read_heartbeats", whole)
        streamed = run_cli(capsys, *cmd, *paths)
        monkeypatch.setattr(hbtool.io, "read_heartbeats", lambda p, stream=False: whole(p, stream=False))
        out.append((cmd, streamed, run_cli(capsys, *cmd, *paths)))
    return out


@pytest.mark.parametrize("name", HBT_SAMPLES)
def test_info_and_diagnose_print_exactly_what_the_whole_reader_gives(capsys, monkeypatch, name):
    for cmd, streamed, whole in _cli_both(capsys, monkeypatch, SAMPLES / name):
        assert streamed == whole, cmd
        assert streamed[0] == 0 and streamed[1]


def test_several_traces_at_once_and_one_twice(capsys, monkeypatch):
    """Several traces join into one streamed trace (the second of one name gets '#2')."""
    paths = (SAMPLES / "pi-segv", SAMPLES / "jacobi-leak", SAMPLES / "pi-segv")
    for cmd, streamed, whole in _cli_both(capsys, monkeypatch, *paths):
        assert streamed == whole, cmd
    trace = read_heartbeats(list(paths), stream=True)
    assert isinstance(trace, StreamedTrace) and list(trace.runs) == ["pi-segv", "jacobi-leak", "pi-segv#2"]
    assert "pi-segv#2" in run_hbtool("info", *paths).stdout


def test_info_and_diagnose_alike_on_openmp_waits(capsys, monkeypatch, tracer_built, tmp_path):
    exe = tmp_path / "omp_beats"
    subprocess.run(["gcc", "-fopenmp", "-O2", str(ROOT / "tests" / "programs" / "omp_beats.c"), "-o", str(exe)],
                   check=True)
    run_hbtool("record", "-q", "-o", tmp_path / "trace", "--beats", "openmp", "--", exe, "all")
    results = _cli_both(capsys, monkeypatch, tmp_path / "trace")
    for cmd, streamed, whole in results:
        assert streamed == whole, cmd
    assert "waiting %" in results[0][1][1]  # info's table has the time waited at barriers


def test_live_means_this_hosts_process_that_wrote_the_file():
    """A file is live when its pid runs here and started no later than the tracer: this
    test's own process, with a tracer start now, is; the same pid with a tracer start
    long before the process began (a pid used again) is not, nor another host's, nor a
    converted file."""
    import socket

    from hbtool.io.hbt_stream import process_is_live

    now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    me = {"pid": os.getpid(), "start_mono_ns": now, "flags": 0}
    here = {"host": socket.gethostname()}
    assert process_is_live(me, here)
    assert not process_is_live({**me, "start_mono_ns": 0}, here)
    assert not process_is_live(me, {"host": here["host"] + "-elsewhere"})
    assert not process_is_live({**me, "flags": 0x2}, here)
    assert not process_is_live({**me, "pid": 0}, here)


def test_mutated_traces_give_answers_or_one_line_never_a_traceback(capsys, tmp_path):
    """A seeded mutation run over a real trace through info and diagnose (truncation, bit
    flips, zeroed ranges, huge header fields, random record words): exit 0 or one error
    line with exit 2, never a traceback."""
    import random

    from conftest import run_cli

    src = (next((SAMPLES / "pi-segv").glob("*.hbt"))).read_bytes()
    rng = random.Random(20)
    codes = []
    for case in range(60):
        b = bytearray(src)
        op = case % 5
        if op == 0:
            b = b[:rng.randrange(len(b))]
        elif op == 1:
            for _ in range(rng.randrange(1, 20)):
                b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        elif op == 2:
            i = rng.randrange(len(b))
            b[i:i + 4096] = bytes(len(b[i:i + 4096]))
        elif op == 3:
            i = rng.randrange(0, 128, 4)
            b[i:i + 8] = rng.getrandbits(64).to_bytes(8, "little")
        else:
            i = 4096 + 32 * rng.randrange((len(b) - 4096) // 32)
            b[i:i + 8] = rng.getrandbits(64).to_bytes(8, "little")
        p = tmp_path / f"case{case}.hbt"
        p.write_bytes(bytes(b))
        for cmd in ("info", "diagnose"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                code, out, err = run_cli(capsys, cmd, p)
            assert code in (0, 2), (case, cmd, code, err)
            assert "Traceback" not in err
            codes.append(code)
            if code == 2:
                assert len(err.strip().splitlines()) == 1, (case, cmd, err)
    assert codes.count(0) > 20 and codes.count(2) > 5  # both answers and refusals were exercised


def test_diagnose_keeps_no_beat_times_once_done(burst, tmp_path, monkeypatch):
    """A thread's beat times are read again after being dropped (a small budget forces it),
    with the same features; once the series are gone, no arrays stay behind."""
    import gc

    from hbtool.analyzers import features

    f = _record(burst, tmp_path, 4, 30000)
    eager, streamed = _both(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.RankWarning)
        want = features_table(eager)
        monkeypatch.setattr(config, "SERIES_CACHE_BYTES", 1)  # keeps only the two used last
        got = features_table(streamed)
    pd.testing.assert_frame_equal(want, got)
    gc.collect()
    assert all(ref() is None for ref, _ in features._CACHE.used.values())


@pytest.mark.parametrize("name", ["burst", "pi-shutdown", "matmul-earlyexit"])
def test_a_thread_read_in_pieces_has_the_features_of_the_whole_thread(name, burst, tmp_path, monkeypatch):
    """Threads of more than WHOLE_THREAD_BEATS beats are never held whole: their features
    come from pieces of beat times, two passes and more (threads of different lengths, whose
    LTRmax asks for beat indices of another count, a reference trace), the same values as
    from the whole threads."""
    from hbtool.analyzers import diagnosis, features

    f = _record(burst, tmp_path, 3, 20000) if name == "burst" else SAMPLES / name
    ref = SAMPLES / "pi-normal"
    eager, _ = _both(f)
    eager_ref, _ = _both(ref)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.RankWarning)
        want = [features_table(eager), features_table(eager, reference=eager_ref)]
        monkeypatch.setattr(config, "WHOLE_THREAD_BEATS", 100)
        monkeypatch.setattr(config, "STREAM_PIECE_ROWS", 97)
        if name != "burst":   # the times LTR compares read again for each comparison, not held
            monkeypatch.setattr(features, "EVERY_HELD", 3)
        streamed, streamed_ref = _both(f)[1], _both(ref)[1]
        series = diagnosis.thread_series(streamed, features.FeatureSettings())
        assert all(isinstance(v, features.PiecewiseSeries) for v in series.values())
        got = [features_table(streamed), features_table(streamed, reference=streamed_ref)]
    # pieces pool their points in another order, so the fitted curves differ in the last bits
    # (pooled sums differ by rounding; through a fit of degree 12 to a ragged rate, R^2 0.2,
    # the curves differed by up to 1.6e-9 of their scale over 8 runs). LHR divides by a
    # window's fitted mean: it once left in windows where the fit came near zero, and a burst
    # thread's LHR of 1152 changed by 1.1e-6; windows under a tenth of the reference's mean
    # rate are now left out, and over 52 runs LHR changed by at most 1.9e-7. 1e-5 is far
    # below a printed digit. An LHR far above 1 divides by a reference's fitted mean near that
    # floor, and its rounding grows with it: over 150 runs here 1.7e-6 at most (LHR 14.9), and
    # once under a full parallel test run 7.4e-5 (LHR 81114.47 against 81120.45); LHRs above
    # 10 (the reference's fitted rate a tenth of the thread's) are held to 1e-3
    for w, g in zip(want, got):
        big = w["LHR"].abs().to_numpy(float) > 10
        pd.testing.assert_series_equal(w["LHR"][big], g["LHR"][big], check_exact=False, rtol=1e-3)
        w, g = w.assign(LHR=w["LHR"].where(~big)), g.assign(LHR=g["LHR"].where(~big))
        pd.testing.assert_frame_equal(w, g, check_exact=False, rtol=1e-5)
        assert np.isfinite(g["DTW"].to_numpy(float)).sum() >= 3   # the features were computed
    if name == "pi-shutdown":   # its threads made different numbers of beats
        assert want[0]["beats"].nunique() > 1


@pytest.mark.alone  # judges the work shift of a real run: wall time, which other work moves (0.42 for 4x seen)
def test_a_team_of_many_regions_is_judged_without_holding_its_threads(tracer_built, tmp_path, monkeypatch):
    """An OpenMP run whose threads beat and wait at each of thousands of regions
    (tests/programs/omp_regions.c: thread 1 works four times as long from region 1,500 on):
    the scan sums waits per chunk, thread and kind (not per wait), and the work shift is
    found from the beats and the waits read in pieces (histograms of the units), with small
    windows and pieces: the same table as from the whole threads."""
    from hbtool.analyzers.summary import work_shifts
    from hbtool.io import hbt_stream

    exe = tmp_path / "omp_regions"
    subprocess.run(["gcc", "-fopenmp", "-O2", str(ROOT / "tests" / "programs" / "omp_regions.c"), "-o", str(exe)],
                   check=True)
    out = tmp_path / "trace"
    run_hbtool("record", "-q", "-o", out, "--beats", "openmp", "--", exe, "3000",
               env=dict(os.environ, OMP_NUM_THREADS="2"))
    eager, streamed = _both(out)
    want = work_shifts(eager)
    assert len(want) == 2 and want.set_index("thread").loc[1, "work_shift"] > 2.0, want
    assert abs(want.set_index("thread").loc[1, "shift_beat"] - 1501) < 100, want
    waits = len(eager.waits)
    assert waits >= 6000
    monkeypatch.setattr(config, "HBT_READ_WINDOW_BYTES", 2 * 65536)
    monkeypatch.setattr(config, "STREAM_PIECE_ROWS", 50)
    monkeypatch.setattr(hbt_stream, "MIXED_RECORDS", 100)
    _, streamed = _both(out)
    summed = sum(s.waits["chunk"].size for s in streamed._source.scans)
    assert summed < waits / 10, (summed, waits)
    pd.testing.assert_frame_equal(want, work_shifts(streamed))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.RankWarning)
        pd.testing.assert_frame_equal(features_table(eager), features_table(streamed))


def test_a_run_of_many_files_is_read_without_keeping_them_open(tmp_path, monkeypatch):
    """Past KEEP_OPEN files (a run of hundreds of forked processes), each file is opened
    again when read, not held open: the same answers."""
    import shutil

    from hbtool.io import hbt_stream

    run = tmp_path / "run"
    run.mkdir()
    for name in ("pi-segv", "jacobi-leak", "matmul-exit1"):
        for f in (SAMPLES / name).glob("*.hbt"):
            shutil.copy(f, run / f.name)
    monkeypatch.setattr(hbt_stream, "KEEP_OPEN", 2)
    eager, streamed = _both(run)
    assert all(s.fh is None for s in streamed._source.scans)
    _same_trace(eager, streamed)
    pd.testing.assert_frame_equal(features_table(eager), features_table(streamed))
    assert len(streamed.runs[streamed.run_names[0]]["processes"]) == 3


def test_version_2_chunks_in_units_given_back_and_taken_again_read_alike(tracer_built, tmp_path, monkeypatch):
    """Format 2: chunks of 1, 2, ... 256 units, and units an ended thread gave back taken
    by the next threads (tests/programs/seq_beaters.c: 12 rounds of 3 threads, 2100
    beats each), read alike by both readers in whole windows and in windows of one
    largest chunk."""
    exe = build_traced(ROOT / "tests" / "programs" / "seq_beaters.c", tmp_path / "seq_beaters")
    trace = tmp_path / "trace"
    env = dict(os.environ, HBTRACE_DIR=str(trace))
    env.pop("LD_PRELOAD", None)
    assert subprocess.run([str(exe), "12", "3", "2100"], env=env, timeout=120).returncode == 0
    (f,) = trace.glob("*.hbt")
    from hbtool.io.hbt import read_hbt_file

    assert read_hbt_file(f)["header"]["version"] == 2
    for window in (config.HBT_READ_WINDOW_BYTES, 65536):
        monkeypatch.setattr(config, "HBT_READ_WINDOW_BYTES", window)
        eager, streamed = _both(trace)
        _same_trace(eager, streamed)
        assert streamed.beat_count() == 36 * 2100


def test_mutated_long_threads_give_answers_or_one_line_never_a_traceback(capsys, tmp_path, tracer_built,
                                                                         monkeypatch):
    """The paths that never hold a thread whole (diagnose's pieces, behavior's segments, the
    work shift's edge beats and waits read in pieces), made to run on an OpenMP trace of 3,000
    beats a thread by small thresholds, meet seeded mutations of it (bit flips, zeroed ranges,
    truncations, repeated records): an answer, or one line and exit status 2."""
    from hbtool.analyzers import behavior
    from hbtool.io import hbt_stream

    exe = tmp_path / "omp_regions"
    subprocess.run(["gcc", "-fopenmp", "-O2", str(ROOT / "tests" / "programs" / "omp_regions.c"), "-o", str(exe)],
                   check=True)
    run_hbtool("record", "-q", "-o", tmp_path / "trace", "--beats", "openmp", "--", exe, "3000",
               env=dict(os.environ, OMP_NUM_THREADS="2"))
    (src,) = (tmp_path / "trace").glob("*.hbt")
    data = src.read_bytes()
    monkeypatch.setattr(config, "WHOLE_THREAD_BEATS", 100)
    monkeypatch.setattr(config, "STREAM_PIECE_ROWS", 97)
    monkeypatch.setattr(behavior, "SEGMENT_BEATS", 512)
    monkeypatch.setattr(behavior, "SEGMENT_MARGIN", 256)
    monkeypatch.setattr(hbt_stream, "MIXED_RECORDS", 100)
    rng = np.random.default_rng(11)
    codes = []
    for case in range(24):
        b = bytearray(data)
        kind = case % 4
        if kind == 0:
            for _ in range(20):
                i = int(rng.integers(4096, len(b)))
                b[i] ^= 1 << int(rng.integers(0, 8))
        elif kind == 1:
            i = int(rng.integers(4096, len(b)))
            b[i:i + 4096] = bytes(len(b[i:i + 4096]))
        elif kind == 2:
            b = b[:int(rng.integers(4096, len(b)))]
        else:
            i, j = (int(x) for x in rng.integers(4096, len(b) - 64, 2))
            b[j:j + 64] = b[i:i + 64]
        d = tmp_path / f"m{case}"
        d.mkdir()
        (d / src.name).write_bytes(bytes(b))
        for cmd in ("diagnose", "behavior"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                code, _, err = run_cli(capsys, cmd, d)
            assert code in (0, 2) and "Traceback" not in err, (case, cmd, code, err)
            if code == 2:
                assert len(err.strip().splitlines()) == 1, (case, cmd, err)
            codes.append(code)
    assert codes.count(0) > 20


def test_a_threads_waits_over_a_span_are_read_from_the_chunks_that_hold_them(tracer_built, tmp_path):
    """behavior reads a long thread a segment at a time, and each segment's waits: from the
    chunks whose waits overlap the segment (the scan keeps each chunk's earliest start and
    latest end), not the thread's every chunk again for each segment (a thread of 20 M beats
    took 45 s instead of 30). Every wait that overlaps the span is there."""
    exe = tmp_path / "omp_task_tree"
    subprocess.run(["gcc", "-fopenmp", "-O2", f"-I{ROOT / 'tests' / 'programs'}",
                    str(ROOT / "tests" / "programs" / "omp_task_tree.c"), "-o", exe], check=True)
    out = tmp_path / "trace"
    r = run_hbtool("record", "-q", "-o", out, "--", exe, 12, 0.01, env=dict(os.environ, OMP_NUM_THREADS="2"))
    assert r.returncode == 0, r.stderr
    streamed = read_heartbeats(out, stream=True)
    key = max(((k[0], k[1], k[2]) for k, _, _ in streamed.thread_loaders()),
              key=lambda k: int(((streamed.wait_stats["thread"] == k[2]) * streamed.wait_stats["waits"]).sum()))

    def waits(span=None):
        parts = [(e, e - d) for e, d, _ in streamed.thread_wait_pieces(key, span)]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    end, start = waits()
    assert end.size > 5000   # in many chunks
    edges = np.quantile(end, [0.0, 0.2, 0.5, 0.51, 1.0]).astype(np.int64)
    for t0, t1 in zip(edges[:-1], edges[1:]):
        e, s = waits((int(t0), int(t1)))
        want = (end > t0) & (start < t1)
        got = (e > t0) & (s < t1)
        assert sorted(zip(e[got], s[got])) == sorted(zip(end[want], start[want]))
        assert e.size < end.size   # not every chunk
