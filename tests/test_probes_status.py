"""Timing probes and the machine-status sampler of the tracer (seed 003): real programs.

The subject is native_tracer/examples/probe_demo.c: with --expect it prints what it did
("expect <user thread> <label> <count>"), and the test compares that with the
HBT_REC_PROBE records of its trace. Records are read with a small local reader
(the byte layout of native_tracer/include/hbtrace_format.h), independent of hbtool's.
"""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from hbt_chunks import walk_chunks

ROOT = Path(__file__).resolve().parent.parent
TRACER = ROOT / "native_tracer"
DEMO_SRC = TRACER / "examples" / "probe_demo.c"

# record kinds and constants (hbtrace_format.h)
THREAD_END, PROCESS_EXIT = 3, 6
REC_NAME, REC_PROBE, REC_STATUS = 14, 15, 16
NAME_PROBE, NAME_LAST = 2, 0x8000
COUNT, TOTAL, MIN, MAX = 0, 1, 2, 3
END_PTHREAD_EXIT = 1
N_METRICS = 14
CPU = [0, 1, 2, 3, 4]
MEM_TOTAL, MEM_AVAIL, SWAP_TOTAL, SWAP_FREE = 5, 6, 7, 8
NET_RX, NET_TX, PROC_USER, PROC_SYS, PROC_RSS = 9, 10, 11, 12, 13
CUMULATIVE = CPU + [NET_RX, NET_TX, PROC_USER, PROC_SYS]

HEADER = np.dtype([("magic", "S8"), ("version", "<u4"), ("endian", "<u4"), ("header_size", "<u4"),
                   ("slot_size", "<u4"), ("chunk_size", "<u4"), ("flags", "<u4"), ("meta_offset", "<u4"),
                   ("meta_length", "<u4"), ("meta_capacity", "<u4"), ("clock_id", "<u4"),
                   ("data_offset", "<u8"), ("data_length", "<u8"), ("start_mono_ns", "<u8"),
                   ("start_real_ns", "<i8"), ("clock_res_ns", "<u4"), ("pid", "<u4"), ("rank", "<i4"),
                   ("reserved0", "<u4"), ("lost_records", "<u8"), ("reserved", "<u8", 3)])
CHUNK = np.dtype([("os_tid", "<u8"), ("thread_slot", "<u4"), ("chunk_seq", "<u4"), ("user_thread", "<i4"),
                  ("reserved", "<u4"), ("capacity", "<u4"), ("magic", "<u4")])
RECORD = np.dtype([("t_ns", "<u8"), ("seq", "<u4"), ("thread", "<i4"), ("loop", "<i4"), ("iter", "<i4"),
                   ("aux", "<u4"), ("kind", "<u2"), ("flags", "<u2")])
assert HEADER.itemsize == 128 and CHUNK.itemsize == 32 and RECORD.itemsize == 32


# --------------------------------------------------------------------------- reading


def read_trace(path: Path) -> dict:
    """Header, metadata, records (chunk order: slot, then chunk_seq) and each record's writer slot."""
    buf = path.read_bytes()
    hdr = np.frombuffer(buf, HEADER, count=1)[0]
    assert hdr["magic"] == b"HBTRACE" and hdr["endian"] == 0x01020304
    mo, ml = int(hdr["meta_offset"]), int(hdr["meta_length"])
    meta = dict(line.split("=", 1) for line in buf[mo:mo + ml].decode().splitlines() if "=" in line)
    chunks = [((int(head["thread_slot"]), int(head["chunk_seq"])), rec) for head, rec in walk_chunks(buf)]
    chunks.sort(key=lambda x: x[0])
    rec = np.concatenate([r for _, r in chunks]) if chunks else np.zeros(0, RECORD)
    writer = np.concatenate([np.full(r.size, k[0]) for k, r in chunks]) if chunks else np.zeros(0, int)
    return {"header": hdr, "meta": meta, "rec": rec, "writer": writer}


def probe_names(rec: np.ndarray) -> dict[int, str]:
    """id -> name from the NAME fragments of the probe name space (complete names only)."""
    sel = rec[(rec["kind"] == REC_NAME) & ((rec["aux"] >> 24) == NAME_PROBE)]
    frags: dict[int, dict[int, bytes]] = {}
    last: dict[int, int] = {}
    for r in sel:
        i, k = int(r["aux"]) & 0xFFFFFF, int(r["flags"]) & ~NAME_LAST
        frags.setdefault(i, {}).setdefault(k, r.tobytes()[:24])
        if int(r["flags"]) & NAME_LAST:
            last[i] = k
    out = {}
    for i, parts in frags.items():
        assert i in last and sorted(parts) == list(range(last[i] + 1)), f"name {i} incomplete"
        out[i] = b"".join(parts[k] for k in range(last[i] + 1)).split(b"\0", 1)[0].decode()
    return out


def probe_stats(tr: dict) -> dict[tuple[int, int], dict]:
    """(probe id, thread_slot) -> {thread, writer, count, total, min, max}; each statistic once."""
    rec, writer = tr["rec"], tr["writer"]
    out: dict[tuple[int, int], dict] = {}
    for i in np.flatnonzero(rec["kind"] == REC_PROBE):
        r = rec[i]
        assert r["iter"] == 0 and r["aux"] == 0
        d = out.setdefault((int(r["seq"]), int(r["loop"])), {"thread": int(r["thread"]), "writer": int(writer[i])})
        key = ("count", "total", "min", "max")[int(r["flags"])]
        assert key not in d, f"statistic written twice: {r}"
        assert d["thread"] == int(r["thread"])
        d[key] = int(r["t_ns"])
    for k, d in out.items():
        assert {"count", "total", "min", "max"} <= set(d), f"incomplete statistics {k}: {d}"
    return out


def by_label(tr: dict) -> dict[tuple[int, str], dict]:
    """(user thread, label) -> statistics, with the probe's site."""
    names = probe_names(tr["rec"])
    out = {}
    for (pid, slot), d in probe_stats(tr).items():
        assert pid in names, f"probe {pid} has statistics but no name"
        site, label = names[pid].split("\t", 1)
        key = (d["thread"], label)
        assert key not in out, f"two tables of one thread for {key}"
        out[key] = dict(d, site=site, slot=slot, probe=pid)
    return out


def status_samples(tr: dict) -> dict[int, dict]:
    """sample number -> {t, values: metric -> value}."""
    rec = tr["rec"]
    out: dict[int, dict] = {}
    for r in rec[rec["kind"] == REC_STATUS]:
        assert r["thread"] == -1 and r["iter"] == 0
        s = out.setdefault(int(r["loop"]), {"t": int(r["t_ns"]), "v": {}})
        assert s["t"] == int(r["t_ns"]), "one time per sample"
        m = int(r["flags"])
        assert m not in s["v"]
        s["v"][m] = (int(r["aux"]) << 32) | int(r["seq"])
    return out


def expectations(stdout: str, prefix: str = "expect") -> dict[tuple[int, str], int]:
    out = {}
    for line in stdout.splitlines():
        if line.startswith(prefix + " "):
            thread, rest = line[len(prefix) + 1:].split(" ", 1)
            label, count = rest.rsplit(" ", 1)
            out[(int(thread), label)] = int(count)
    return out


def source_lines() -> dict[str, int]:
    """label -> line of its HBT_PROBE_BEGIN/SCOPE in probe_demo.c."""
    out = {}
    for n, line in enumerate(DEMO_SRC.read_text().splitlines(), 1):
        m = re.search(r'HBT_PROBE_(?:BEGIN|SCOPE)\("([^"]+)"\)', line)
        if m:
            out[m.group(1)] = n
    return out


# --------------------------------------------------------------------------- running


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    """libhbtrace.so (only the library: the examples are not needed) and probe_demo."""
    r = subprocess.run(["make", "-s", "-C", str(TRACER), "lib/libhbtrace.so"], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    exe = tmp_path_factory.mktemp("probe_demo") / "probe_demo"
    lib = TRACER / "lib"
    r = subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-pthread", f"-I{TRACER / 'include'}",
                        str(DEMO_SRC), "-o", str(exe), f"-L{lib}", "-lhbtrace", f"-Wl,-rpath,{lib}"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return exe


def run(exe: Path, tmp_path: Path, *args, timeout: float = 60, **env) -> tuple[subprocess.CompletedProcess, Path]:
    tdir = tmp_path / "trace"
    e = dict(os.environ, HBTRACE_DIR=str(tdir))
    for k in ("LD_PRELOAD", "HBTRACE_STATUS", "HBTRACE_PROBE_CLOCK", "HBTRACE_DISABLE", "HBTRACE_MONITOR"):
        e.pop(k, None)
    e.update({k: str(v) for k, v in env.items()})
    p = subprocess.run([str(exe), *map(str, args)], env=e, capture_output=True, text=True, timeout=timeout)
    return p, tdir


def only_file(tdir: Path) -> Path:
    files = sorted(tdir.glob("*.hbt"))
    assert len(files) == 1, files
    return files[0]


# --------------------------------------------------------------------------- probes


def test_exact_counts_names_and_nesting(demo, tmp_path):
    p, tdir = run(demo, tmp_path, "--threads", 48, "--uses", 500, "--idle", 2, "--exit", 3, "--expect")
    assert p.returncode == 3, p.stderr   # the program's exit status is unchanged
    assert p.stderr == ""
    want = expectations(p.stdout)
    assert len(want) == 12 * 2 + 12 * 2 + 12 * 3 + 12 * 1 + 2 + 1   # 48 workers by kind, idle, main
    tr = read_trace(only_file(tdir))
    assert tr["header"]["lost_records"] == 0
    got = by_label(tr)
    assert {k: d["count"] for k, d in got.items()} == want

    lines = source_lines()
    for (thread, label), d in got.items():
        assert d["site"] == f"{DEMO_SRC}:{lines[label]}"
        assert 0 <= d["min"] <= d["total"] / d["count"] <= d["max"]
    # one id per call site, shared by every thread
    labels = {"outer", "inner", "pexit", "scoped", "idle", "sleep 2ms"}
    assert {label for _, label in got} == labels
    assert len({d["probe"] for d in got.values()}) == len(labels)
    # nesting: each outer use holds two inner ones
    for (thread, label), d in got.items():
        if label == "outer":
            inner = got[(thread, "inner")]
            assert inner["count"] == 2 * d["count"]
            assert inner["total"] <= d["total"]
    # durations are nanoseconds: five 2 ms sleeps
    s = got[(-1, "sleep 2ms")]
    assert s["min"] >= 1_990_000 and s["total"] >= 9_950_000 and s["max"] < 1_000_000_000

    # ended threads wrote their own statistics at their end; the idle ones (alive at
    # exit) and the main thread were written at exit by the exiting thread
    rec, writer = tr["rec"], tr["writer"]
    ended = {int(w) for w in writer[rec["kind"] == THREAD_END]}
    main_slot = got[(-1, "sleep 2ms")]["slot"]
    for (thread, label), d in got.items():
        if thread >= 100 or thread == -1:
            assert d["writer"] == main_slot
        else:
            assert d["writer"] == d["slot"] and d["slot"] in ended
    # the pthread_exit threads: statistics before their THREAD_END (pthread_exit)
    for (thread, label), d in got.items():
        if label == "pexit":
            mine = np.flatnonzero(writer == d["slot"])
            kinds = rec["kind"][mine]
            end = mine[kinds == THREAD_END]
            assert end.size == 1 and rec["aux"][end[0]] == END_PTHREAD_EXIT
            assert (mine[kinds == REC_PROBE] < end[0]).all()
    assert (rec["kind"] == REC_STATUS).sum() == 0   # no sampler without HBTRACE_STATUS
    meta = tr["meta"]
    assert meta["probe_clock"] in ("tsc", "monotonic")
    if meta["probe_clock"] == "tsc":
        assert 1e8 < float(meta["probe_tsc_hz"]) < 1e10
    assert not any(k.startswith(("machine_", "status_")) for k in meta)


CAP_PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include "hbtrace_probe.h"
#define N 4100
static struct hbt_probe_site site[N];
static char label[N][16];
int main(void)
{
    for (int i = 0; i < N; i++) {
        snprintf(label[i], sizeof label[i], "p%d", i);
        site[i].line = i;
        site[i].file = "gen.c";
        site[i].label = label[i];
    }
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < N; i++)
            hbt_probe_end_call(hbt_probe_begin_call(&site[i]));
    return 0;
}
"""


def test_probe_cap(demo, tmp_path):
    """Beyond HBT_PROBE_MAX (4096) probes: the rest are not counted, said once and in the metadata."""
    src, exe = tmp_path / "cap.c", tmp_path / "cap"
    src.write_text(CAP_PROGRAM)
    lib = TRACER / "lib"
    subprocess.run(["gcc", "-O1", f"-I{TRACER / 'include'}", str(src), "-o", str(exe), f"-L{lib}", "-lhbtrace",
                    f"-Wl,-rpath,{lib}"], check=True, timeout=120)
    p, tdir = run(exe, tmp_path)
    assert p.returncode == 0
    assert len(p.stderr.strip().splitlines()) == 1 and "4096" in p.stderr
    tr = read_trace(only_file(tdir))
    got = by_label(tr)
    assert sorted(d["probe"] for d in got.values()) == list(range(4096))
    assert all(d["count"] == 3 and d["site"] == f"gen.c:{label[1:]}" for (_, label), d in got.items())
    assert tr["meta"]["probe_dropped"] == str(3 * 4)
    assert tr["header"]["lost_records"] == 0


def test_monotonic_clock_override(demo, tmp_path):
    p, tdir = run(demo, tmp_path, "--threads", 4, "--uses", 200, "--expect", HBTRACE_PROBE_CLOCK="monotonic")
    assert p.returncode == 0, p.stderr
    tr = read_trace(only_file(tdir))
    assert tr["meta"]["probe_clock"] == "monotonic" and "probe_tsc_hz" not in tr["meta"]
    got = by_label(tr)
    assert {k: d["count"] for k, d in got.items()} == expectations(p.stdout)
    assert got[(-1, "sleep 2ms")]["min"] >= 2_000_000


def test_bad_clock_value_warns_once(demo, tmp_path):
    p, tdir = run(demo, tmp_path, "--threads", 2, "--uses", 10, "--expect", HBTRACE_PROBE_CLOCK="hpet")
    assert p.returncode == 0
    assert len(p.stderr.strip().splitlines()) == 1 and "HBTRACE_PROBE_CLOCK" in p.stderr
    got = by_label(read_trace(only_file(tdir)))
    assert {k: d["count"] for k, d in got.items()} == expectations(p.stdout)


def test_disabled_tracing_runs(demo, tmp_path):
    p, tdir = run(demo, tmp_path, "--threads", 8, "--uses", 100, "--idle", 1, "--fork", "--exit", 5, "--expect",
                  HBTRACE_DISABLE=1, HBTRACE_STATUS="0.2")
    assert p.returncode == 5 and p.stderr == ""
    assert len(expectations(p.stdout)) == 2 * (2 + 2 + 3 + 1) + 1 + 1
    assert "child expect -1 child 10" in p.stdout
    assert not tdir.exists() or not list(tdir.glob("*.hbt"))


def test_fork_child_gets_its_own_names_and_counts(demo, tmp_path):
    p, tdir = run(demo, tmp_path, "--threads", 2, "--uses", 50, "--fork", "--expect")
    assert p.returncode == 0, p.stderr
    files = sorted(tdir.glob("*.hbt"))
    assert len(files) == 2
    trs = {int(read_trace(f)["header"]["pid"]): read_trace(f) for f in files}
    child = next(t for t in trs.values() if "child" in str(probe_names(t["rec"]).values()))
    parent = next(t for t in trs.values() if t is not child)
    assert {k: d["count"] for k, d in by_label(child).items()} == expectations(p.stdout, "child expect")
    assert {k: d["count"] for k, d in by_label(parent).items()} == expectations(p.stdout)
    assert child["meta"]["probe_clock"] == parent["meta"]["probe_clock"]


# --------------------------------------------------------------------------- status


def check_samples(tr: dict, period: float) -> dict[int, dict]:
    smp = status_samples(tr)
    assert sorted(smp) == list(range(len(smp))), "samples numbered from 0 without gaps"
    for s in smp.values():
        assert sorted(s["v"]) == list(range(N_METRICS)), "every metric in every sample"
    ts = [smp[k]["t"] for k in sorted(smp)]
    assert all(b > a for a, b in zip(ts, ts[1:]))
    assert ts[0] >= int(tr["header"]["start_mono_ns"])
    for m in CUMULATIVE:
        vals = [smp[k]["v"][m] for k in sorted(smp)]
        assert all(b >= a for a, b in zip(vals, vals[1:])), (m, vals)
    first = smp[0]["v"]
    assert all(first[m] == 0 for m in CPU + [NET_RX, NET_TX])   # cumulative since the sampler started
    meta = tr["meta"]
    for k in ("machine_cores", "machine_model", "machine_mem_kb", "status_period_s", "status_clk_tck"):
        assert meta.get(k), k
    assert float(meta["status_period_s"]) == period
    assert int(meta["status_clk_tck"]) == os.sysconf("SC_CLK_TCK")
    assert int(meta["machine_cores"]) == os.sysconf("SC_NPROCESSORS_ONLN")
    assert int(meta["machine_mem_kb"]) == first[MEM_TOTAL] > 0
    for s in smp.values():
        v = s["v"]
        assert 0 < v[MEM_AVAIL] <= v[MEM_TOTAL] and v[SWAP_FREE] <= v[SWAP_TOTAL] and v[PROC_RSS] > 0
    return smp


def test_status_samples(demo, tmp_path):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p, tdir = run(demo, tmp_path, "--threads", 2, "--uses", 100, "--seconds", 1.0, "--expect", HBTRACE_STATUS="0.2")
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert p.returncode == 0 and p.stderr == ""
    tr = read_trace(only_file(tdir))
    smp = check_samples(tr, 0.2)
    assert len(smp) >= 5   # 0 at start, about 5 periodic ones, one at exit
    ts = [smp[k]["t"] for k in sorted(smp)]
    gaps = np.diff(ts[:-1]) / 1e9   # periodic ones (the last is the exit's)
    assert (gaps > 0.15).all() and np.median(gaps) < 0.3, gaps
    last = smp[len(smp) - 1]["v"]
    assert sum(last[m] for m in CPU) > 0
    # the process's CPU time at the exit sample: all of it but the last steps of its exit
    cpu_us = (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) * 1e6
    assert 0.9 * cpu_us - 20_000 <= last[PROC_USER] + last[PROC_SYS] <= cpu_us + 1_000
    # the probes are there as well
    assert {k: d["count"] for k, d in by_label(tr).items()} == expectations(p.stdout)


def test_short_run_has_two_samples(demo, tmp_path):
    p, tdir = run(demo, tmp_path, "--threads", 1, "--uses", 10, HBTRACE_STATUS=1)
    assert p.returncode == 0
    smp = check_samples(read_trace(only_file(tdir)), 1.0)
    assert len(smp) == 2


def test_bad_status_value(demo, tmp_path):
    p, tdir = run(demo, tmp_path, "--threads", 1, "--uses", 10, HBTRACE_STATUS="often")
    assert p.returncode == 0
    assert len(p.stderr.strip().splitlines()) == 1 and "HBTRACE_STATUS" in p.stderr
    tr = read_trace(only_file(tdir))
    assert (tr["rec"]["kind"] == REC_STATUS).sum() == 0 and "status_period_s" not in tr["meta"]


def test_bystander_process_leaves_no_file(tmp_path):
    """A process that records nothing but its start and exit: no samples, no file."""
    lib = TRACER / "lib" / "libhbtrace.so"
    e = dict(os.environ, HBTRACE_DIR=str(tmp_path / "t"), HBTRACE_STATUS="0.2", LD_PRELOAD=str(lib))
    p = subprocess.run(["/bin/sh", "-c", "exit 7"], env=e, capture_output=True, text=True, timeout=30)
    assert p.returncode == 7 and p.stderr == ""
    assert not list((tmp_path / "t").glob("*.hbt"))


def net_dev(ifaces: dict[str, tuple[int, int]]) -> str:
    lines = ["Inter-|   Receive                                                |  Transmit",
             " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo "
             "colls carrier compressed"]
    for name, (rx, tx) in ifaces.items():
        lines.append(f"{name:>6}: {rx} 1 0 0 0 0 0 0 {tx} 1 0 0 0 0 0 0")
    return "\n".join(lines) + "\n"


def test_net_counters_wrap_and_reset(demo, tmp_path):
    """Per interface: down with both readings below 2^32 = wrap at 2^32; down from above = reset (0);
    lo ignored; an interface that vanished and came back starts afresh."""
    f = tmp_path / "net_dev"

    def put(ifaces):
        tmp = tmp_path / "net_dev.tmp"
        tmp.write_text(net_dev(ifaces))
        tmp.replace(f)   # atomic: a sample never sees half a file

    big = 1 << 40
    steps = [
        {"lo": (10**9, 10**9), "eth0": ((1 << 32) - 100, 5)},
        {"lo": (1, 1), "eth0": (50, big)},              # rx wraps: +150; tx +big-5
        {"lo": (10**12, 0), "eth0": (1050, 7)},          # rx +1000; tx went down from above 2^32: reset, +0
        {"lo": (5, 5), "veth1": (500, 0)},                # eth0 gone; veth1 new: its first reading, +0
        {"lo": (5, 5), "eth0": (100, 0), "veth1": (600, 3)},   # eth0 back afresh +0; veth1 +100, +3
    ]
    put(steps[0])
    tdir = tmp_path / "trace"
    e = dict(os.environ, HBTRACE_DIR=str(tdir), HBTRACE_STATUS="0.1", HBTRACE_STATUS_NET_DEV=str(f))
    e.pop("LD_PRELOAD", None)
    proc = subprocess.Popen([str(demo), "--threads", "0", "--seconds", "3.2"], env=e,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    for k, step in enumerate(steps[1:], 1):
        time.sleep(max(0.0, t0 + 0.6 * k - time.monotonic()))
        put(step)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and err == ""
    tr = read_trace(only_file(tdir))
    smp = check_samples(tr, 0.1)
    last = smp[len(smp) - 1]["v"]
    assert last[NET_RX] == 150 + 1000 + 100
    assert last[NET_TX] == big - 5 + 3


def test_sigkill_keeps_what_was_merged(demo, tmp_path):
    """Killed mid-run: the statistics of the threads that ended are complete and named; the
    running main thread's are lost (never merged); the periodic samples are there."""
    tdir = tmp_path / "trace"
    e = dict(os.environ, HBTRACE_DIR=str(tdir), HBTRACE_STATUS="0.2")
    e.pop("LD_PRELOAD", None)
    proc = subprocess.Popen([str(demo), "--threads", "8", "--uses", "300", "--seconds", "30", "--expect"], env=e,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.2)
    proc.send_signal(signal.SIGKILL)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    want = {k: v for k, v in expectations(out).items() if k[0] >= 0}
    assert len(want) == 2 * (2 + 2 + 3 + 1)
    tr = read_trace(only_file(tdir))
    got = by_label(tr)   # every probe with statistics has its complete name
    assert {k: d["count"] for k, d in got.items()} == want
    rec = tr["rec"]
    assert (rec["kind"] == PROCESS_EXIT).sum() == 0
    smp = status_samples(tr)
    if smp and len(smp[max(smp)]["v"]) < N_METRICS:
        del smp[max(smp)]   # killed while writing a sample
    assert len(smp) >= 3 and all(len(x["v"]) == N_METRICS for x in smp.values())


def test_main_thread_pthread_exit_does_not_keep_process_alive(demo, tmp_path):
    """Sampler and central monitor both running, main leaves by pthread_exit: the process
    ends with its last program thread, and its records are complete."""
    t0 = time.monotonic()
    p, tdir = run(demo, tmp_path, "--threads", 4, "--uses", 20000, "--beat", "--main-exit", "--expect", timeout=30,
                  HBTRACE_STATUS="0.1", HBTRACE_MONITOR="central")
    wall = time.monotonic() - t0
    assert p.returncode == 0, p.stderr
    assert wall < 10, wall
    tr = read_trace(only_file(tdir))
    got = by_label(tr)
    want = expectations(p.stdout)
    assert {k: d["count"] for k, d in got.items()} == want
    assert len(check_samples(tr, 0.1)) >= 2
    assert (tr["rec"]["kind"] == PROCESS_EXIT).sum() == 1


@pytest.mark.usefixtures("tracer_built")
def test_probe_cost_benchmark_counts_every_use(tmp_path):
    """benchmarks/bench_probes.py's program, tiny: it builds, its probes counted every timed use
    with tracing on and none with tracing disabled, and it prints every figure it documents."""
    import sys
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_probes.py"), "--rounds", "3",
                        "--calls", "20000"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    runs, cur = {}, None
    for line in r.stdout.splitlines():
        if line.startswith("run "):
            cur = runs.setdefault(line.split()[1], {})
        else:
            k, v = line.split()
            cur[k] = v
    assert set(runs) == {"auto", "monotonic", "disabled"}
    assert runs["auto"]["counted"] == runs["monotonic"]["counted"] == str(3 * 20000)
    assert runs["disabled"]["counted"] == "0" and runs["monotonic"]["probe_clock"] == "monotonic"
    for k in ("probe_clock_ns", "two_reads_ns", "monotonic_ns", "probe_ns", "probe_call_ns", "ratio", "floor_ratio"):
        assert float(runs["auto"][k]) > 0
    # a use reads the clock twice: it cannot cost less than one read
    assert float(runs["auto"]["probe_ns"]) > float(runs["auto"]["probe_clock_ns"])
