"""Trace bytes follow records (issue 20): a thread that never beats costs one 256-byte unit, a
process's file is its header page plus its chunks, the units an ended thread did not use are
taken by the threads after it, and a SIGKILL still leaves every beat older than 100 ms. Also
what `hbtool record` says when the trace cannot be written (a full disk at start or mid-run,
a file size limit), with the program's exit status kept. Real programs, real files."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLES, ROOT, TRACER, build_traced
from hbt_chunks import walk_chunks

from hbtool.io import read_heartbeats
from hbtool.io.hbt import read_hbt_file

LIB = TRACER / "lib" / "libhbtrace.so"
UNIT, PAGE = 256, 4096
THREAD_START, THREAD_END, BEAT = 2, 3, 1


def on_disk(path: Path) -> int:
    return sum(f.stat().st_blocks * 512 for f in ([path] if path.is_file() else path.iterdir()))


@pytest.fixture(scope="module")
def idle(tracer_built, tmp_path_factory) -> Path:
    exe = tmp_path_factory.mktemp("idle") / "idle_threads"
    subprocess.run(["gcc", "-O1", "-pthread", str(ROOT / "benchmarks" / "idle_threads.c"), "-o", str(exe)],
                   check=True)
    return exe


@pytest.fixture(scope="module")
def beaters(tracer_built, tmp_path_factory) -> Path:
    return build_traced(ROOT / "tests" / "programs" / "seq_beaters.c",
                        tmp_path_factory.mktemp("beaters") / "seq_beaters")


def preload_env(trace: Path, **extra) -> dict:
    env = dict(os.environ, LD_PRELOAD=str(LIB), HBTRACE_DIR=str(trace), **extra)
    return env


def test_a_thread_that_never_beats_costs_one_unit(idle, tmp_path):
    trace = tmp_path / "trace"
    r = subprocess.run([str(idle), "threads", "1000", "50"], env=preload_env(trace), timeout=120)
    assert r.returncode == 0
    (f,) = trace.glob("*.hbt")
    # the header page, one unit per thread (1000 and main), the last page rounded up
    assert f.stat().st_size <= PAGE + 1001 * UNIT + PAGE
    assert on_disk(f) <= PAGE + 1001 * UNIT + 2 * PAGE
    p = read_hbt_file(f)
    kinds = p["records"]["kind"]
    assert int((kinds == THREAD_START).sum()) == 1001 and int((kinds == THREAD_END).sum()) == 1000
    assert p["header"]["version"] == 2 and p["header"]["unit_size"] == UNIT and p["header"]["lost_records"] == 0


def test_a_forked_process_costs_its_header_page_and_its_records(idle, tmp_path):
    trace = tmp_path / "trace"
    r = subprocess.run([str(idle), "fork", "50", "4"], env=preload_env(trace), timeout=120)
    assert r.returncode == 0
    files = sorted(trace.glob("*.hbt"))
    assert len(files) == 50  # the parent recorded only its own start and exit: no file
    for f in files:
        assert f.stat().st_size == 2 * PAGE  # header page + one page holding 5 one-unit chunks
        assert on_disk(f) <= 2 * PAGE
        kinds = read_hbt_file(f)["records"]["kind"]
        assert int((kinds == THREAD_START).sum()) == 5 and int((kinds == THREAD_END).sum()) == 4


@pytest.mark.parametrize("prefault_mb", ["4", "256"])
def test_units_an_ended_thread_did_not_use_go_to_the_next_threads(beaters, tmp_path, prefault_mb):
    trace = tmp_path / "trace"
    # 40 threads one after another, 2100 beats each: each ends early in a 64 KiB chunk
    # (after chunks of 1, 2, ... 128 units), and gives back ~60 KiB of it. The pre-faulter
    # works ahead of them (4 MB, the default, or 256): the cut at exit waits for the page it
    # has in hand, and keeps none of its headroom (kept, half of such runs were 3-17 MB)
    env = dict(os.environ, HBTRACE_DIR=str(trace), HBTRACE_PREFAULT_MB=prefault_mb)
    env.pop("LD_PRELOAD", None)
    r = subprocess.run([str(beaters), "40", "1", "2100"], env=env, timeout=120)
    assert r.returncode == 0
    (f,) = trace.glob("*.hbt")
    records = 40 * (2100 + 2) + 3
    # without reuse every thread would take 511 units (128 KiB): 5.2 MB
    assert f.stat().st_size < 1.3 * records * 32 + 2 * 65536, f.stat().st_size
    tr = read_heartbeats(trace)
    per = tr.beats.groupby("os_tid")["seq"]
    assert len(per) == 40 and (per.count() == 2100).all()
    assert all((np.diff(s.to_numpy()) == 1).all() for _, s in per)


@pytest.mark.alone  # races with a running program: its timing matters
def test_sigkill_during_thread_churn_keeps_every_beat_older_than_100ms(beaters, tmp_path):
    trace = tmp_path / "trace"
    env = dict(os.environ, HBTRACE_DIR=str(trace))
    env.pop("LD_PRELOAD", None)
    # forever: rounds of 4 threads, 300 beats each, 200 us apart: threads end and give
    # units back, new ones take them, all the time
    p = subprocess.Popen([str(beaters), "0", "4", "300", "200"], env=env)
    try:
        deadline = time.time() + 30
        while time.time() < deadline and not list(trace.glob("*.hbt")):
            time.sleep(0.05)
        time.sleep(0.6)
        (f,) = trace.glob("*.hbt")
        before = read_hbt_file(f)["records"]  # a live read
        isbeat = before["kind"] == BEAT
        seen = {t: int(n) for t, n in zip(*np.unique(before["os_tid"][isbeat], return_counts=True))}
        time.sleep(0.1)
        p.kill()
        assert p.wait(timeout=10) == -signal.SIGKILL
    finally:
        if p.poll() is None:
            p.kill()
    after = read_hbt_file(f)["records"]
    isbeat = after["kind"] == BEAT
    assert len(seen) > 4  # several rounds of threads had ended and started
    for tid, n in seen.items():
        got = after["seq"][isbeat & (after["os_tid"] == tid)]
        assert got.size >= n, (tid, n, got.size)
        assert (got == np.arange(got.size)).all()


# --------------------------------------------------------------------------- messages


@pytest.fixture
def tiny_fs(tmp_path):
    """A tmpfs of 1 MiB mounted for the test (needs root; skipped where it cannot be)."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {r.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def record(outdir: Path, *cmd, preexec=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hbtool", "record", "-o", str(outdir), "--", *map(str, cmd)],
                          capture_output=True, text=True, timeout=300, preexec_fn=preexec)


def fill(mnt: Path) -> None:
    with open(mnt / "filler", "wb") as fh:
        try:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        except OSError:
            pass


def test_record_says_a_full_disk_at_start_kept_the_trace_from_being_written(tracer_built, tiny_fs):
    (tiny_fs / "trace").mkdir()
    fill(tiny_fs)
    r = record(tiny_fs / "trace", EXAMPLES / "probe_demo", "--threads", "3", "--seconds", "0.1", "--exit", "3")
    assert r.returncode == 3  # the program's own status
    assert "made no heartbeats" not in r.stderr
    assert (f"no trace written to {tiny_fs / 'trace'}/: the tracer could not create its trace file in "
            f"{tiny_fs / 'trace'}: No space left on device") in r.stderr, r.stderr
    assert not list((tiny_fs / "trace").glob("*.hbt"))
    # without the tracer's report (no RAM file system for it), record still tells a full disk
    from hbtool.cli.record import _full_disk

    assert _full_disk(tiny_fs / "trace").startswith(f"the disk holding {tiny_fs / 'trace'} is full")
    (tiny_fs / "filler").unlink()
    assert _full_disk(tiny_fs / "trace") == ""


def test_record_says_a_disk_that_filled_mid_run_dropped_records(tracer_built, tiny_fs):
    r = record(tiny_fs / "trace", EXAMPLES / "pi_pthread", "--threads", "4", "--beats", "100000", "--work", "100")
    assert r.returncode == 0
    assert "size cap" not in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("hbtool: warning:")]
    assert any("records dropped because the disk was full (No space left on device)" in ln for ln in lines), r.stderr
    (f,) = (tiny_fs / "trace").glob("*.hbt")
    h = read_hbt_file(f)["header"]
    lost = int(lines[-1].split("warning: ")[1].split()[0])
    assert lost == h["lost_records"] > 0 and h["lost_why"] == 0x2 and h["lost_errno"] == 28
    tr = read_heartbeats(tiny_fs / "trace")  # what was recorded before the disk filled is readable
    assert len(tr.beats) > 1000 and len(tr.beats) + lost >= 4 * 100000
    assert any(f"the tracer dropped {lost} records: the disk was full (No space left on device)" in w
               for w in tr.warnings), tr.warnings


def _fsize_limit(nbytes):
    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))
    return limit


def test_a_file_size_limit_neither_kills_the_program_nor_hides_why(tracer_built, tmp_path):
    # below the first 68 KiB the file needs: no trace, and no SIGXFSZ for the program
    r = record(tmp_path / "small", EXAMPLES / "probe_demo", "--threads", "2", "--seconds", "0.1", "--exit", "5",
               preexec=_fsize_limit(40_000))
    assert r.returncode == 5, r.stderr
    assert "the tracer could not create its trace file in" in r.stderr and "File too large" in r.stderr
    # room for the start only: the file stops growing, records are dropped and said so
    r = record(tmp_path / "mid", EXAMPLES / "pi_pthread", "--threads", "2", "--beats", "20000", "--work", "100",
               preexec=_fsize_limit(200_000))
    assert r.returncode == 0, r.stderr
    assert "records dropped because the file size limit was reached (File too large)" in r.stderr, r.stderr


def test_a_file_cut_inside_a_full_chunk_reads_the_records_before_the_cut(beaters, tmp_path):
    trace = tmp_path / "trace"
    env = dict(os.environ, HBTRACE_DIR=str(trace))
    env.pop("LD_PRELOAD", None)
    assert subprocess.run([str(beaters), "1", "1", "5000"], env=env, timeout=60).returncode == 0
    (f,) = trace.glob("*.hbt")
    whole = read_hbt_file(f)["records"]
    seq = whole["seq"][whole["kind"] == BEAT]
    assert (seq == np.arange(5000)).all()
    raw = f.read_bytes()
    # the thread's first 64 KiB chunk begins at unit 256 (main's chunk, then the thread's
    # chunks of 1, 2, ... 128 units): cut the file at a unit boundary in its middle, where
    # every slot holds a record
    cut = PAGE + (256 + 100) * UNIT
    f.write_bytes(raw[:cut])
    p = read_hbt_file(f)
    assert any("shorter than its header says" in w for w in p["warnings"])
    got = p["records"]["seq"][p["records"]["kind"] == BEAT]
    assert got.size < 5000 and (got == np.arange(got.size)).all()
    # every beat in the bytes that are left, as an independent walk of the units counts them
    left = sum(int((rec["kind"] == BEAT).sum()) for _, rec in walk_chunks(raw[:cut]))
    assert got.size == left > 2000


def test_record_says_the_size_cap_dropped_records(tracer_built, tmp_path):
    env = dict(os.environ, HBTRACE_MAX_MB="1")
    env.pop("LD_PRELOAD", None)
    r = subprocess.run([sys.executable, "-m", "hbtool", "record", "-o", str(tmp_path / "t"), "--",
                        str(EXAMPLES / "pi_pthread"), "--threads", "2", "--beats", "40000", "--work", "100"],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    assert "records dropped because the file size cap (HBTRACE_MAX_MB) was reached" in r.stderr, r.stderr
    assert "disk was full" not in r.stderr
    (f,) = (tmp_path / "t").glob("*.hbt")
    h = read_hbt_file(f)["header"]
    assert h["lost_why"] == 0x1 and h["lost_errno"] == 0 and h["lost_records"] > 0
    assert f.stat().st_size <= 1 << 20


def test_version_1_traces_are_still_read_alike():
    """The bundled sample traces are format 1 (64 KiB chunks): read as chunks of one unit, record for
    record as the independent walk reads them."""
    files = sorted((ROOT / "sample_traces").rglob("*.hbt"))
    assert files
    for f in files:
        p = read_hbt_file(f)
        assert p["header"]["version"] == 1 and p["header"]["unit_size"] == 0
        walked = [rec for _, rec in walk_chunks(f.read_bytes())]
        assert len(p["records"]["kind"]) == sum(r.size for r in walked) > 0
