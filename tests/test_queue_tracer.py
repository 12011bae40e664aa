"""Instrumented stream queues (seed 002): the tracer's queue library, its monitor threads
and the stream examples, run for real (real threads, real futexes, real trace files).

Records are decoded here with a small reader of the .hbt layout (hbtrace_format.h),
independent of hbtool's readers, so that these tests check what the tracer wrote.
"""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from hbt_chunks import walk_chunks
from conftest import EXAMPLES, ROOT, TRACER, build_traced

pytestmark = pytest.mark.usefixtures("tracer_built")

# record kinds and flags (native_tracer/include/hbtrace_format.h)
QUEUE_OPEN, QUEUE_SAMPLE, NAME = 12, 13, 14
PRODUCER, CONSUMER = 0, 1
QFLAG_BLOCKED, QFLAG_FINAL, QFLAG_STAGE = 0x1, 0x2, 0x4
NAME_QUEUE, NAME_LAST = 1, 0x8000
# the sampling-period policy of src/queue_monitor.c (hbtrace_queue.h)
K_STABLE, TOL = 8, 0.10
T0_US, TMAX_US = 1000, 16000

RECORD = np.dtype([("t_ns", "<u8"), ("seq", "<u4"), ("thread", "<i4"), ("loop", "<i4"), ("iter", "<i4"),
                   ("aux", "<u4"), ("kind", "<u2"), ("flags", "<u2")])
MICRO = EXAMPLES / "stream_micro"
MATMUL = EXAMPLES / "stream_matmul"
SEARCH = EXAMPLES / "stream_search"


# --------------------------------------------------------------------------- reading


def read_trace(path: Path) -> dict:
    """Header fields, metadata and all records (chunk order) of one little-endian trace file."""
    buf = path.read_bytes()
    assert buf[:8] == b"HBTRACE\0"
    assert struct.unpack_from("<I", buf, 12)[0] == 0x01020304
    meta_off, meta_len = struct.unpack_from("<II", buf, 32)
    data_off, data_len, start_ns = struct.unpack_from("<QQQ", buf, 48)
    meta = dict(line.split("=", 1) for line in buf[meta_off:meta_off + meta_len].decode().splitlines())
    parts = [rec for _, rec in walk_chunks(buf)]
    rec = np.concatenate(parts) if parts else np.zeros(0, RECORD)
    return {"start_ns": start_ns, "meta": meta, "rec": rec}


def trace_file(tmp_path: Path) -> Path:
    files = sorted((tmp_path / "trace").glob("*.hbt"))
    assert len(files) == 1, files
    return files[0]


def queue_names(rec) -> dict[int, str]:
    """Queue id -> name from the NAME records (fragments in index order, LAST on the last)."""
    sel = rec[(rec["kind"] == NAME) & ((rec["aux"] >> 24) == NAME_QUEUE)]
    frags: dict[int, dict[int, bytes]] = {}
    last: dict[int, int] = {}
    for r in sel:
        qid, idx = int(r["aux"]) & 0xFFFFFF, int(r["flags"]) & ~NAME_LAST
        assert idx not in frags.setdefault(qid, {})
        frags[qid][idx] = r.tobytes()[:24]
        if int(r["flags"]) & NAME_LAST:
            last[qid] = idx
    out = {}
    for qid, f in frags.items():
        assert sorted(f) == list(range(last[qid] + 1)), f"queue {qid}: fragments {sorted(f)}"
        out[qid] = b"".join(f[i] for i in range(last[qid] + 1)).rstrip(b"\0").decode()
    return out


def opens(rec) -> dict[int, np.void]:
    o = rec[rec["kind"] == QUEUE_OPEN]
    assert len(set(o["thread"].tolist())) == o.size
    return {int(r["thread"]): r for r in o}


def samples(rec, qid: int, end: int):
    """One queue end's samples in time order."""
    s = rec[(rec["kind"] == QUEUE_SAMPLE) & (rec["thread"] == qid) & (rec["loop"] == end)]
    return s[np.argsort(s["t_ns"], kind="stable")]


def run(prog, env, *args, timeout=60):
    return subprocess.run([str(prog), *map(str, args)], env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def env_with(traced_env, **kw):
    env = {k: v for k, v in traced_env.items() if not k.startswith("HBTRACE_QUEUE")}
    env.pop("HBTRACE_DISABLE", None)
    env.update({k: str(v) for k, v in kw.items()})
    return env


def check_queue(tr: dict, qid: int, name: str, item_size: int, capacity: int, totals: dict,
                final: bool = True):
    """Everything the trace must say about one queue, against the program's exact totals."""
    rec = tr["rec"]
    o = opens(rec)[qid]
    assert (int(o["seq"]), int(o["aux"]), int(o["loop"])) == (capacity, item_size, 0)
    assert queue_names(rec)[qid] == name
    for end, key in ((PRODUCER, "producer"), (CONSUMER, "consumer")):
        s = samples(rec, qid, end)
        assert s.size >= 1
        assert np.all(s["aux"] == item_size)
        # every non-blocking transaction is in exactly one sample
        assert int(s["seq"].sum()) == totals[key]["nonblocking"]
        t = s["t_ns"].astype(np.int64)
        assert t[0] > int(o["t_ns"]) and np.all(np.diff(t) > 0)
        if totals[key]["waits"] == 0:
            assert not np.any(s["flags"] & QFLAG_BLOCKED)
        else:
            assert np.any(s["flags"] & QFLAG_BLOCKED)
        # the stage view includes the end's own blocking
        assert np.all(((s["flags"] & QFLAG_STAGE) != 0) | ((s["flags"] & QFLAG_BLOCKED) == 0))
        fin = (s["flags"] & QFLAG_FINAL) != 0
        assert fin.sum() == (1 if final else 0) and (not final or fin[-1])
        check_period_policy(s, int(o["t_ns"]), samples(rec, qid, 1 - end))


def check_period_policy(s, open_ns: int, other, t0_us: int = T0_US, tmax_us: int = TMAX_US):
    """T starts at t0, only doubles, never passes tmax, and doubles only after K periods in a
    row (idle ones aside) in which at least one end's stage did not block, each within 10 %
    of T, or after K periods in a row in which both ends' stages blocked (a back-off)."""
    T = s["iter"].astype(np.int64)
    assert T[0] == t0_us and np.all(T <= tmax_us)
    steps = np.flatnonzero(np.diff(T) != 0)
    assert np.all(T[steps + 1] == np.minimum(2 * T[steps], tmax_us))
    t = s["t_ns"].astype(np.int64)
    realized = np.diff(np.concatenate([[open_ns], t]))
    assert np.array_equal(other["t_ns"], s["t_ns"])   # both ends sampled together
    blocked = ((s["flags"] & other["flags"]) & QFLAG_STAGE) != 0   # both ends' stages blocked
    active = (s["seq"].astype(np.int64) + other["seq"]) > 0
    for i in steps:   # sample i is the last one at the old period
        if i + 1 >= K_STABLE and np.all(blocked[i + 1 - K_STABLE:i + 1]) and np.all(T[i + 1 - K_STABLE:i + 1] == T[i]):
            continue   # backed off: both stages blocked K periods in a row
        good = 0
        for k in range(i, -1, -1):
            assert T[k] == T[i], "doubled before K good periods at the old period"
            assert not blocked[k] and abs(realized[k] - T[k] * 1000) <= TOL * T[k] * 1000
            good += bool(active[k])
            if good == K_STABLE:
                break
        assert good == K_STABLE


# --------------------------------------------------------------------------- stream_micro


def test_micro_counts_names_and_samples_are_exact(tmp_path, traced_env):
    truth = tmp_path / "truth.json"
    r = run(MICRO, env_with(traced_env), "--rate", 50000, "--duration", 0.6, "--item-size", 24,
            "--capacity", 512, "--name", "src->sink ü", "--truth", truth)
    assert r.returncode == 0, r.stderr
    t = json.loads(truth.read_text())
    assert t["end"] == "normal" and t["order_errors"] == 0 and t["popped"] == t["items"] > 10000
    # nonblocking + blocked transactions = items, at both ends
    for end in ("producer", "consumer"):
        assert t["totals"][end]["nonblocking"] + t["totals"][end]["blocked"] == t["items"]
    # a producer as fast as possible fills the queue: it blocks; the consumer waits only for
    # the very first item (and when the machine holds the producer back for long)
    assert t["totals"]["producer"]["blocked"] > 0 and t["totals"]["consumer"]["blocked"] < t["items"] // 100
    tr = read_trace(trace_file(tmp_path))
    assert tr["meta"]["queue_monitor"] == "on" and tr["meta"]["queue_period_us"] == str(T0_US)
    assert t["t0_source"] == "trace" and t["t0_mono_ns"] == tr["start_ns"]
    assert t["trace"] == str(trace_file(tmp_path))
    check_queue(tr, 0, "src->sink ü", 24, 512, t["totals"])
    # the phase is on the trace clock, inside the sampled span
    ph = t["phases"]
    assert len(ph) == 1 and ph[0]["rate"] == 50000
    assert abs(ph[0]["start_mono_ns"] - tr["start_ns"] - ph[0]["start_s"] * 1e9) < 2
    c = samples(tr["rec"], 0, CONSUMER)
    assert c["t_ns"][0] - 5_000_000 < ph[0]["start_mono_ns"] < ph[0]["end_mono_ns"] <= c["t_ns"][-1]
    # with the queue kept full, the producer end is blocked in (nearly) every period
    p = samples(tr["rec"], 0, PRODUCER)
    assert np.mean((p["flags"] & QFLAG_BLOCKED) != 0) > 0.9


def test_micro_rate_change_phases(tmp_path, traced_env):
    truth = tmp_path / "truth.json"
    r = run(MICRO, env_with(traced_env), "--rate", 40000, "--rate2", 10000, "--change-at", 0.5,
            "--duration", 0.6, "--dist", "det", "--truth", truth)
    assert r.returncode == 0, r.stderr
    t = json.loads(truth.read_text())
    a, b = t["phases"]
    assert (a["rate"], b["rate"]) == (40000, 10000)
    assert a["end_mono_ns"] == b["start_mono_ns"] and abs(b["start_s"] - a["start_s"] - 0.3) < 0.01
    assert a["served"] + b["served"] == t["items"]
    # det: the drawn service times are exactly 1/rate
    assert a["mean_service_rate"] == pytest.approx(40000, rel=1e-6)
    assert b["mean_service_rate"] == pytest.approx(10000, rel=1e-6)
    check_queue(read_trace(trace_file(tmp_path)), 0, "source->server", 8, 1024, t["totals"])


def test_micro_items_mode_switches_after_the_given_item(tmp_path, traced_env):
    truth = tmp_path / "truth.json"
    r = run(MICRO, env_with(traced_env), "--items", 10000, "--rate", 100000, "--rate2", 50000,
            "--change-at", 0.25, "--item-size", 3, "--capacity", 64, "--truth", truth)
    assert r.returncode == 0, r.stderr
    t = json.loads(truth.read_text())
    assert t["items"] == t["popped"] == 10000 and t["order_errors"] == 0
    assert [p["served"] for p in t["phases"]] == [2500, 7500]
    check_queue(read_trace(trace_file(tmp_path)), 0, "source->server", 3, 64, t["totals"])


def test_period_lengthens_without_blocking_and_stops_at_the_max(tmp_path, traced_env):
    # the producer is a little faster than the consumer and the queue is large: after the
    # first item neither end ever blocks, so T doubles every K periods up to the max
    truth = tmp_path / "truth.json"
    env = env_with(traced_env, HBTRACE_QUEUE_PERIOD_US=1000, HBTRACE_QUEUE_PERIOD_MAX_US=16000)
    r = run(MICRO, env, "--rate", 20000, "--producer-rate", 24000, "--capacity", 100000,
            "--duration", 1.0, "--dist", "det", "--truth", truth)
    assert r.returncode == 0, r.stderr
    t = json.loads(truth.read_text())
    assert t["totals"]["producer"]["waits"] == 0 and t["period_us"] == 16000
    tr = read_trace(trace_file(tmp_path))
    assert tr["meta"]["queue_period_max_us"] == "16000"
    o = opens(tr["rec"])[0]
    assert int(o["iter"]) == 1000
    c, p = samples(tr["rec"], 0, CONSUMER), samples(tr["rec"], 0, PRODUCER)
    for s, other in ((c, p), (p, c)):
        check_period_policy(s, int(o["t_ns"]), other, 1000, 16000)
    levels = sorted(set(c["iter"].tolist()))
    assert levels == [1000, 2000, 4000, 8000, 16000]
    # the realized periods follow T (the monitor sleeps toward absolute deadlines)
    realized = np.diff(c["t_ns"].astype(np.int64))[:-1]   # the last one ends at the final sample
    assert np.median(np.abs(realized / (c["iter"][1:-1] * 1000.0) - 1)) < 0.05
    assert int(c["seq"].sum()) == t["totals"]["consumer"]["nonblocking"]


def test_period_lengthens_while_only_the_producer_blocks(tmp_path, traced_env):
    # a fast producer keeps the queue full and blocks all along; the consumer runs
    # unhindered, so its end is observable and T lengthens to the max
    truth = tmp_path / "truth.json"
    r = run(MICRO, env_with(traced_env), "--rate", 100000, "--duration", 0.5, "--truth", truth)
    assert r.returncode == 0, r.stderr
    t = json.loads(truth.read_text())
    tr = read_trace(trace_file(tmp_path))
    p, c = samples(tr["rec"], 0, PRODUCER), samples(tr["rec"], 0, CONSUMER)
    running = p[:-1]   # the final sample may fall after the producer stopped
    assert np.mean((running["flags"] & QFLAG_BLOCKED) != 0) > 0.9
    assert np.mean((c["flags"] & QFLAG_BLOCKED) != 0) < 0.1
    assert p["iter"][0] == T0_US and p["iter"].max() == TMAX_US
    check_queue(tr, 0, "source->server", 8, 1024, t["totals"])


def test_monitor_off_writes_no_samples(tmp_path, traced_env):
    truth = tmp_path / "truth.json"
    r = run(MICRO, env_with(traced_env, HBTRACE_QUEUE_MONITOR="off"), "--duration", 0.2,
            "--truth", truth)
    assert r.returncode == 0, r.stderr
    t = json.loads(truth.read_text())
    assert t["monitored"] is False and t["period_us"] == 0 and t["order_errors"] == 0
    assert t["totals"]["consumer"]["nonblocking"] + t["totals"]["consumer"]["blocked"] == t["items"] > 0
    tr = read_trace(trace_file(tmp_path))
    assert tr["meta"]["queue_monitor"] == "off"
    assert not np.any(tr["rec"]["kind"] == QUEUE_SAMPLE)
    assert queue_names(tr["rec"]) == {0: "source->server"} and set(opens(tr["rec"])) == {0}


def test_untraced_run_works(tmp_path, traced_env):
    truth = tmp_path / "truth.json"
    r = run(MICRO, env_with(traced_env, HBTRACE_DISABLE=1), "--duration", 0.2, "--rate", 30000,
            "--truth", truth)
    assert r.returncode == 0, r.stderr
    assert not list((tmp_path / "trace").glob("*.hbt"))
    t = json.loads(truth.read_text())
    assert t["trace"] is None and t["t0_source"] == "program" and t["monitored"] is False
    assert t["popped"] == t["items"] > 0 and t["order_errors"] == 0


@pytest.mark.parametrize("prog,args", [
    (MICRO, ["--rate", "0"]), (MICRO, ["--rate", "abc"]), (MICRO, ["--dist", "gauss"]),
    (MICRO, ["--items", "10", "--duration", "1"]), (MICRO, ["--change-at", "0.5"]),
    (MICRO, ["--capacity"]), (MICRO, ["--bogus", "1"]), (MICRO, ["stray"]),
    (MICRO, ["--truth", "/nonexistent-dir/t.json"]),
    (MATMUL, ["--workers", "0"]), (MATMUL, ["--solo", "add"]), (MATMUL, ["--reps", "2", "--duration", "1"]),
    (SEARCH, ["--pattern", ""]), (SEARCH, ["--pattern", "x" * 65]), (SEARCH, ["--every", "3"]),
    (SEARCH, ["--chunk", "10"]), (SEARCH, ["--solo", "all"]),
])
def test_bad_arguments_exit_2_with_one_line(prog, args, traced_env):
    r = run(prog, env_with(traced_env, HBTRACE_DISABLE=1), *args)
    assert r.returncode == 2
    assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.parametrize("prog", [MICRO, MATMUL, SEARCH])
def test_help(prog, traced_env):
    r = run(prog, env_with(traced_env, HBTRACE_DISABLE=1), "--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: ") and "--truth" in r.stdout


def test_sigkill_leaves_samples_up_to_the_kill(tmp_path, traced_env):
    env = env_with(traced_env)
    p = subprocess.Popen([str(MICRO), "--duration", "60", "--rate", "50000"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            files = list((tmp_path / "trace").glob("*.hbt"))
            # the tracer creates the file, then writes its header: a poll may come in between
            if files and files[0].read_bytes()[:8] == b"HBTRACE\0" and \
                    np.sum(read_trace(files[0])["rec"]["kind"] == QUEUE_SAMPLE) >= 400:
                break
            time.sleep(0.05)
        killed_at = time.monotonic_ns()   # CLOCK_MONOTONIC, the trace clock
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=10)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == -signal.SIGKILL
    tr = read_trace(trace_file(tmp_path))
    c = samples(tr["rec"], 0, CONSUMER)
    assert c.size >= 190
    assert not np.any(tr["rec"]["flags"][tr["rec"]["kind"] == QUEUE_SAMPLE] & QFLAG_FINAL)
    assert killed_at - 200_000_000 < int(c["t_ns"][-1]) < killed_at + 1_000_000_000
    assert queue_names(tr["rec"]) == {0: "source->server"}
    assert int(c["seq"].sum()) > 0


# --------------------------------------------------------------------------- pipelines


def test_matmul_pipeline_queues(tmp_path, traced_env):
    truth = tmp_path / "truth.json"
    r = run(MATMUL, env_with(traced_env), "--size", 96, "--workers", 2, "--reps", 20,
            "--capacity", 128, "--truth", truth)
    assert r.returncode == 0, r.stderr
    t = json.loads(truth.read_text())
    assert t["verified"] is True and t["items"] == t["reduced"] == 20 * 96 * 96 and t["solo"] is None
    tr = read_trace(trace_file(tmp_path))
    qs = t["queues"]
    assert [q["name"] for q in qs] == ["reader->dot0", "dot0->reduce", "reader->dot1", "dot1->reduce"]
    assert queue_names(tr["rec"]) == {q["id"]: q["name"] for q in qs}
    for q in qs:
        per = t["items"] // 2   # dealt round robin, an even count
        for end in ("producer", "consumer"):
            assert q["totals"][end]["nonblocking"] + q["totals"][end]["blocked"] == per
        check_queue(tr, q["id"], q["name"], q["item_size"], 128, q["totals"])
    assert {q["item_size"] for q in qs} == {8, 16}


def test_stage_blocking_of_a_thread_with_one_queue_is_its_end_blocking(tmp_path, traced_env):
    # seed 002 keeps a sample only if the kernel blocked on none of its queues. A thread
    # with one queue: the stage flag is the end's own flag (its first sample aside, when
    # what the thread did before is unknown).
    truth = tmp_path / "truth.json"
    r = run(MICRO, env_with(traced_env), "--rate", 20000, "--duration", 0.4, "--truth", truth)
    assert r.returncode == 0, r.stderr
    tr = read_trace(trace_file(tmp_path))
    for end in (PRODUCER, CONSUMER):
        f = samples(tr["rec"], 0, end)["flags"].astype(np.int64)
        stage, own = (f[1:] & QFLAG_STAGE) != 0, (f[1:] & QFLAG_BLOCKED) != 0
        assert not (own & ~stage).any()   # the end blocked: so did its stage
        # the stage's counter and the end's are read one after the other, unlocked, while the
        # thread may be blocking: one blocking can then show in the stage's counter in one
        # period and in the end's in the next. So a stage flag without the end's own lies
        # next to a period whose end flag is set (the same blocking), never alone
        near = np.r_[own[1:], False] | np.r_[False, own[:-1]]
        assert not (stage & ~own & ~near).any(), f


def test_stage_blocked_on_its_output_flags_its_input_end(tmp_path, traced_env):
    # a stage that waits on its output queue gets stage-blocked samples on its input end,
    # which itself did not wait in those periods (a fixed 1 ms period). The stage's output
    # is the bottleneck by construction: its sink sleeps between pops, its source keeps the
    # input full. (In stream_matmul the reader is the bottleneck: an output wait there is a
    # moment's preemption of reduce, and the stage then drains its input and waits on it in
    # the same period nearly always, so such periods came by chance or, under load, not at all.)
    exe = build_traced(ROOT / "tests" / "programs" / "output_bound_stage.c", tmp_path / "obs")
    env = env_with(traced_env, HBTRACE_QUEUE_PERIOD_US=1000, HBTRACE_QUEUE_PERIOD_MAX_US=1000)
    r = subprocess.run([str(exe), "2000", "250"], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    in_id, out_id, out_waits, in_waits = map(int, r.stdout.split())
    assert out_waits > 1000   # nearly every push waits for the sleeping sink
    tr = read_trace(trace_file(tmp_path))
    f = samples(tr["rec"], in_id, CONSUMER)["flags"].astype(np.int64)
    stage_only = ((f & QFLAG_STAGE) != 0) & ((f & QFLAG_BLOCKED) == 0)
    assert len(f) > 100
    assert stage_only.sum() > len(f) // 2, (stage_only.sum(), len(f), in_waits)
    # and the output end: its own flag, with the stage's
    g = samples(tr["rec"], out_id, PRODUCER)["flags"].astype(np.int64)
    assert (((g & QFLAG_BLOCKED) != 0) & ((g & QFLAG_STAGE) != 0)).sum() > len(g) // 2


def test_search_pipeline_queues(tmp_path, traced_env):
    truth = tmp_path / "truth.json"
    r = run(SEARCH, env_with(traced_env), "--mb", 24, "--verifiers", 2, "--every", 1000,
            "--chunk", 2048, "--seed", 5, "--truth", truth)
    assert r.returncode == 0, r.stderr
    t = json.loads(truth.read_text())
    assert t["verified"] is True and t["regular"] is True
    n = 24 << 20
    assert t["matches"] == t["expected_matches"] == (n - t["first"] - 6) // 1000 + 1
    assert t["interval_min"] == t["interval_max"] == 1000 and t["first_match"] == t["first"]
    tr = read_trace(trace_file(tmp_path))
    names = [q["name"] for q in t["queues"]]
    assert names == ["gen->hash", "hash->verify0", "verify0->reduce", "hash->verify1", "verify1->reduce"]
    assert queue_names(tr["rec"]) == {q["id"]: q["name"] for q in t["queues"]}
    for q in t["queues"]:
        items = t["chunks"] if q["name"] == "gen->hash" else None
        if items is not None:
            for end in ("producer", "consumer"):
                assert q["totals"][end]["nonblocking"] + q["totals"][end]["blocked"] == items
        check_queue(tr, q["id"], q["name"], q["item_size"], 64, q["totals"])
    cand = sum(q["totals"]["consumer"]["nonblocking"] + q["totals"]["consumer"]["blocked"]
               for q in t["queues"] if q["name"].startswith("hash->"))
    assert cand == t["candidates"] == t["matches"]


@pytest.mark.parametrize("prog,args", [(MATMUL, ["--size", 32, "--reps", 3, "--workers", 3]),
                                       (SEARCH, ["--mb", 2, "--verifiers", 2])])
@pytest.mark.parametrize("how", [{"HBTRACE_DISABLE": 1}, {"HBTRACE_QUEUE_MONITOR": "off"}])
def test_pipelines_run_untraced_and_unmonitored(tmp_path, traced_env, prog, args, how):
    truth = tmp_path / "truth.json"
    r = run(prog, env_with(traced_env, **how), *args, "--truth", truth)
    assert r.returncode == 0, r.stderr
    t = json.loads(truth.read_text())
    assert t["verified"] is True and all(q["monitored"] is False for q in t["queues"])
    files = list((tmp_path / "trace").glob("*.hbt"))
    if "HBTRACE_DISABLE" in how:
        assert t["trace"] is None and not files
    else:
        rec = read_trace(files[0])["rec"]
        assert not np.any(rec["kind"] == QUEUE_SAMPLE)
        assert queue_names(rec) == {q["id"]: q["name"] for q in t["queues"]}


@pytest.mark.parametrize("prog,kernel,in_size", [(MATMUL, "dot", 8), (MATMUL, "reduce", 16),
                                                 (SEARCH, "hash", 4112), (SEARCH, "verify", 80),
                                                 (SEARCH, "reduce", 16)])
def test_solo_ground_truth(tmp_path, traced_env, prog, kernel, in_size):
    truth = tmp_path / "truth.json"
    r = run(prog, env_with(traced_env), "--solo", kernel, "--solo-time", 0.1, "--truth", truth)
    assert r.returncode == 0, r.stderr
    s = json.loads(truth.read_text())["solo"]
    assert s["kernel"] == kernel and s["in_item_size"] == in_size and s["items"] > 0
    assert 0.1 <= s["seconds"] < 1.0
    assert s["items_per_s"] == pytest.approx(s["items"] / s["seconds"], rel=1e-4)
    assert f"solo {kernel} items {s['items']} " in r.stdout
    assert s["items_per_s"] == json.loads(truth.read_text())["solo"]["items_per_s"]
    # no queue: the process recorded nothing, and a bystander's file is removed at exit
    for f in (tmp_path / "trace").glob("*.hbt"):
        assert not np.any(read_trace(f)["rec"]["kind"] == QUEUE_OPEN)


# --------------------------------------------------------------------------- the library itself

UNIT = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>
#include "hbtrace.h"
#include "hbtrace_queue.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "FAIL line %d: %s\n", __LINE__, #c); exit(1); } } while (0)

static hbt_queue_t *gq;
static long gn;

static void *prod(void *a) { (void)a; for (long i = 0; i < gn; i++) CHECK(hbt_queue_push(gq, &i) == 0);
                             hbt_queue_close(gq); return NULL; }
static void *cons(void *a) { (void)a; long v, e = 0; while (hbt_queue_pop(gq, &v) == 1) { CHECK(v == e); e++; }
                             CHECK(e == gn); return NULL; }

/* threads of this process named hbt-queues */
static int queue_monitors(void)
{
    DIR *d = opendir("/proc/self/task");
    CHECK(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue;
        char path[300], comm[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", de->d_name);
        FILE *f = fopen(path, "r");
        if (f) { if (fgets(comm, sizeof comm, f)) n += !strcmp(comm, "hbt-queues\n"); fclose(f); }
    }
    closedir(d);
    return n;
}

/* queue_monitors() once a monitor thread was joined: pthread_join returns when the thread's
 * exit has cleared its tid, and the kernel may list the task under /proc/self/task a little
 * longer; a thread that never stopped is still counted after 0.5 s. */
static int queue_monitors_joined(void)
{
    int n = queue_monitors();
    for (int i = 0; n && i < 500; i++) {
        usleep(1000);
        n = queue_monitors();
    }
    return n;
}

/* a producer that pushes every 100 us for 0.3 s, and its consumer */
struct pair { hbt_queue_t *q; long n; };
static void *slow_prod(void *a) { struct pair *p = a; for (long i = 0; i < p->n; i++) { usleep(100); hbt_queue_push(p->q, &i); }
                                  hbt_queue_close(p->q); return NULL; }
static void *pair_cons(void *a) { struct pair *p = a; long v; while (hbt_queue_pop(p->q, &v) == 1) {} return NULL; }

static void print_stats(const char *what, hbt_queue_t *q)
{
    struct hbt_queue_stats s;
    CHECK(hbt_queue_stats(q, &s) == 0);
    printf("%s {\"id\": %u, \"push_nonblocking\": %llu, \"push_blocked\": %llu, \"push_waits\": %llu, "
           "\"pop_nonblocking\": %llu, \"pop_blocked\": %llu, \"pop_waits\": %llu, \"monitored\": %u}\n",
           what, s.id, (unsigned long long)s.push_nonblocking, (unsigned long long)s.push_blocked,
           (unsigned long long)s.push_waits, (unsigned long long)s.pop_nonblocking,
           (unsigned long long)s.pop_blocked, (unsigned long long)s.pop_waits, s.monitored);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "basic";
    if (!strcmp(mode, "basic")) {
        errno = 0; CHECK(hbt_queue_create("x", 0, 4) == NULL && errno == EINVAL);
        errno = 0; CHECK(hbt_queue_create("x", 8, 0) == NULL && errno == EINVAL);
        errno = 0; CHECK(hbt_queue_create("x", 8, ((size_t)1 << 30) + 1) == NULL && errno == EINVAL);
        errno = 0; CHECK(hbt_queue_stats(NULL, NULL) == -1 && errno == EINVAL);
        hbt_queue_t *q = hbt_queue_create(NULL, sizeof(int), 2);
        CHECK(q);
        int v = 0, a = 1, b = 2, c = 3;
        CHECK(hbt_queue_try_pop(q, &v) == 0);
        CHECK(hbt_queue_try_push(q, &a) == 1);
        CHECK(hbt_queue_push(q, &b) == 0);
        CHECK(hbt_queue_try_push(q, &c) == 0);
        CHECK(hbt_queue_try_pop(q, &v) == 1 && v == 1);
        CHECK(hbt_queue_try_push(q, &c) == 1);
        hbt_queue_close(q);
        hbt_queue_close(q);
        CHECK(hbt_queue_try_push(q, &c) == -1);
        CHECK(hbt_queue_push(q, &c) == -1);
        CHECK(hbt_queue_pop(q, &v) == 1 && v == 2);
        CHECK(hbt_queue_try_pop(q, &v) == 1 && v == 3);
        CHECK(hbt_queue_pop(q, &v) == 0);
        CHECK(hbt_queue_try_pop(q, &v) == -1);
        CHECK(hbt_queue_pop(q, &v) == 0);
        print_stats("small", q);
        hbt_queue_destroy(q);
        hbt_queue_destroy(NULL);
        /* 253 bytes, then a 3-byte character that does not fit in 255: cut before it */
        char name[400];
        memset(name, 'a', 253);
        strcpy(name + 253, "\xe2\x82\xac tail");
        hbt_queue_t *l = hbt_queue_create(name, 1, 1);
        CHECK(l);
        hbt_queue_destroy(l);
        /* both ends block, over and over, through a tiny queue */
        gq = hbt_queue_create("tiny", sizeof(long), 3);
        gn = 100000;
        pthread_t p, c2;
        pthread_create(&c2, NULL, cons, NULL);
        pthread_create(&p, NULL, prod, NULL);
        pthread_join(p, NULL);
        pthread_join(c2, NULL);
        print_stats("tiny", gq);
        hbt_queue_destroy(gq);
        return 0;
    }
    if (!strcmp(mode, "shared")) {   /* one monitor thread for every queue, ended with the last */
        CHECK(queue_monitors() == 0);
        struct pair pr[3];
        pthread_t th[6];
        for (int i = 0; i < 3; i++) {
            char name[8];
            snprintf(name, sizeof name, "s%d", i);
            pr[i].q = hbt_queue_create(name, sizeof(long), 64);
            pr[i].n = 2000;
            CHECK(pr[i].q);
            usleep(3000);   /* opened at different times */
        }
        for (int i = 0; i < 3; i++) {
            pthread_create(&th[2 * i], NULL, pair_cons, &pr[i]);
            pthread_create(&th[2 * i + 1], NULL, slow_prod, &pr[i]);
        }
        printf("running %d\n", queue_monitors());
        for (int i = 0; i < 6; i++) pthread_join(th[i], NULL);
        hbt_queue_destroy(pr[0].q);
        hbt_queue_destroy(pr[1].q);
        printf("one_left %d\n", queue_monitors());
        hbt_queue_destroy(pr[2].q);
        printf("none_left %d\n", queue_monitors_joined());
        hbt_queue_t *q = hbt_queue_create("again", 8, 4);
        long v = 1;
        hbt_queue_push(q, &v);
        usleep(5000);
        printf("again %d\n", queue_monitors());
        hbt_queue_destroy(q);
        printf("end %d\n", queue_monitors_joined());
        return 0;
    }
    if (!strcmp(mode, "exit")) {   /* exit() with a queue never destroyed */
        hbt_queue_t *q = hbt_queue_create("left open", 8, 16);
        long v = 7;
        for (int i = 0; i < 5; i++) hbt_queue_push(q, &v);
        usleep(20000);
        for (int i = 0; i < 3; i++) hbt_queue_pop(q, &v);
        print_stats("open", q);
        fflush(stdout);
        exit(0);
    }
    if (!strcmp(mode, "pthread_exit") || !strcmp(mode, "pthread_exit_hbtm")) {
        /* main leaves, the stages finish: the monitors must not keep the process alive */
        if (!strcmp(mode, "pthread_exit_hbtm")) {   /* with the behavior monitor's thread too */
            Heartbeat_MultiPthread_Init(0);
            Heartbeat_MultiPthread_Generate(0, 1, 0);
        }
        gq = hbt_queue_create("orphan", sizeof(long), 64);
        gn = 50000;
        pthread_t p, c2;
        pthread_create(&c2, NULL, cons, NULL);
        pthread_create(&p, NULL, prod, NULL);
        pthread_detach(p);
        pthread_detach(c2);
        pthread_exit(NULL);
    }
    if (!strcmp(mode, "fork")) {
        hbt_queue_t *q = hbt_queue_create("parent", 8, 16);
        long v = 1;
        hbt_queue_push(q, &v);
        pid_t pid = fork();
        if (pid == 0) {
            hbt_queue_push(q, &v);   /* the parent's queue: a plain queue in the child */
            CHECK(hbt_queue_pop(q, &v) == 1);
            hbt_queue_t *c = hbt_queue_create("child", 8, 16);
            hbt_queue_push(c, &v);
            usleep(20000);
            hbt_queue_destroy(c);
            hbt_queue_destroy(q);
            _exit(0);
        }
        int st;
        CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
        usleep(5000);
        hbt_queue_destroy(q);
        return 0;
    }
    return 2;
}
"""


@pytest.fixture(scope="module")
def unit_prog(tmp_path_factory, tracer_built):
    d = tmp_path_factory.mktemp("qunit")
    (d / "qunit.c").write_text(UNIT)
    lib = TRACER / "lib"
    r = subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-pthread", f"-I{TRACER / 'include'}",
                        "-o", str(d / "qunit"), str(d / "qunit.c"), f"-L{lib}", "-lhbtrace",
                        f"-Wl,-rpath,{lib}"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return d / "qunit"


def stats_lines(out: str) -> dict:
    return {line.split(" ", 1)[0]: json.loads(line.split(" ", 1)[1]) for line in out.splitlines()}


def test_api_semantics_and_names(tmp_path, traced_env, unit_prog):
    r = run(unit_prog, env_with(traced_env), "basic")
    assert r.returncode == 0, r.stderr
    st = stats_lines(r.stdout)
    assert st["small"] == {"id": 0, "push_nonblocking": 3, "push_blocked": 0, "push_waits": 1,
                           "pop_nonblocking": 3, "pop_blocked": 0, "pop_waits": 1, "monitored": 1}
    tiny = st["tiny"]
    assert tiny["push_nonblocking"] + tiny["push_blocked"] == 100000
    assert tiny["pop_nonblocking"] + tiny["pop_blocked"] == 100000
    assert tiny["push_waits"] >= tiny["push_blocked"] > 0 and tiny["pop_waits"] >= tiny["pop_blocked"]
    tr = read_trace(trace_file(tmp_path))
    names = queue_names(tr["rec"])
    assert names == {0: "queue0", 1: "a" * 253, 2: "tiny"}
    frag = tr["rec"][(tr["rec"]["kind"] == NAME) & ((tr["rec"]["aux"] & 0xFFFFFF) == 1)]
    assert sorted(int(f) & ~NAME_LAST for f in frag["flags"]) == list(range(11))   # 253 bytes / 24
    o = opens(tr["rec"])
    assert [(int(o[i]["seq"]), int(o[i]["aux"])) for i in range(3)] == [(2, 4), (1, 1), (3, 8)]
    # the failed try_push and try_pop count as blocking: the only sample (FINAL) says so
    for end in (PRODUCER, CONSUMER):
        s = samples(tr["rec"], 0, end)
        assert s.size >= 1 and int(s["seq"].sum()) == 3 and np.any(s["flags"] & QFLAG_BLOCKED)
        assert int(s["flags"][-1]) & QFLAG_FINAL
    check_queue(tr, 2, "tiny", 8, 3, {"producer": {"nonblocking": tiny["push_nonblocking"],
                                                   "waits": tiny["push_waits"]},
                                      "consumer": {"nonblocking": tiny["pop_nonblocking"],
                                                   "waits": tiny["pop_waits"]}})


def test_api_works_untraced(tmp_path, traced_env, unit_prog):
    r = run(unit_prog, env_with(traced_env, HBTRACE_DISABLE=1), "basic")
    assert r.returncode == 0, r.stderr
    assert stats_lines(r.stdout)["small"]["monitored"] == 0
    assert not list((tmp_path / "trace").glob("*.hbt"))


def test_exit_writes_final_samples_of_open_queues(tmp_path, traced_env, unit_prog):
    r = run(unit_prog, env_with(traced_env), "exit")
    assert r.returncode == 0, r.stderr
    st = stats_lines(r.stdout)["open"]
    tr = read_trace(trace_file(tmp_path))
    check_queue(tr, 0, "left open", 8, 16, {"producer": {"nonblocking": st["push_nonblocking"], "waits": 0},
                                            "consumer": {"nonblocking": st["pop_nonblocking"], "waits": 0}})
    assert (st["push_nonblocking"], st["pop_nonblocking"]) == (5, 3)


@pytest.mark.parametrize("mode", ["pthread_exit", "pthread_exit_hbtm"])
def test_monitors_do_not_keep_the_process_alive(tmp_path, traced_env, unit_prog, mode):
    t0 = time.monotonic()
    r = run(unit_prog, env_with(traced_env), mode, timeout=30)
    assert r.returncode == 0, r.stderr
    assert time.monotonic() - t0 < 10
    tr = read_trace(trace_file(tmp_path))
    for end in (PRODUCER, CONSUMER):
        s = samples(tr["rec"], 0, end)
        # exit (by the last thread) wrote the final samples; every transaction is counted once
        assert int(s["flags"][-1]) & QFLAG_FINAL and np.sum(s["flags"] & QFLAG_FINAL) == QFLAG_FINAL
        assert int(s["seq"].sum()) <= 50000


def test_one_monitor_thread_samples_every_queue_in_shared_wakeups(tmp_path, traced_env, unit_prog):
    r = run(unit_prog, env_with(traced_env), "shared")
    assert r.returncode == 0, r.stderr
    counts = dict(line.split() for line in r.stdout.splitlines())
    # one thread while queues exist, joined with the last queue, started again with a new one
    assert counts == {"running": "1", "one_left": "1", "none_left": "0", "again": "1", "end": "0"}
    tr = read_trace(trace_file(tmp_path))
    o = opens(tr["rec"])
    ts = []
    for qid in range(3):
        s = samples(tr["rec"], qid, PRODUCER)
        check_period_policy(s, int(o[qid]["t_ns"]), samples(tr["rec"], qid, CONSUMER))
        assert int(s["seq"].sum()) == 2000   # the slow producer never found its queue full
        reg = s[(s["flags"] & QFLAG_FINAL) == 0]
        assert reg.size >= 10
        # deadlines lie on the grid of multiples of T: a sample is taken soon after one
        late = (reg["t_ns"].astype(np.int64) % (reg["iter"].astype(np.int64) * 1000)) / (reg["iter"] * 1000.0)
        assert np.median(late) < 0.25
        ts.append(reg["t_ns"].astype(np.int64))
    # queues opened 3 ms apart are still sampled in shared wake-ups: far fewer wake-ups
    # (sample times more than 200 us apart) than samples
    t = np.sort(np.concatenate(ts))
    wakeups = 1 + int(np.sum(np.diff(t) > 200_000))
    assert wakeups < 0.6 * t.size, (wakeups, t.size)


def test_fork_child_has_its_own_queue_ids(tmp_path, traced_env, unit_prog):
    r = run(unit_prog, env_with(traced_env), "fork")
    assert r.returncode == 0, r.stderr
    files = sorted((tmp_path / "trace").glob("*.hbt"))
    assert len(files) == 2
    by_name = {}
    for f in files:
        tr = read_trace(f)
        names = queue_names(tr["rec"])
        assert list(names) == [0]
        by_name[names[0]] = tr
    parent, child = by_name["parent"], by_name["child"]
    # the child recorded nothing about the parent's queue, the parent nothing of the child's use
    assert int(samples(parent["rec"], 0, PRODUCER)["seq"].sum()) == 1
    assert int(samples(parent["rec"], 0, CONSUMER)["seq"].sum()) == 0
    assert int(samples(child["rec"], 0, PRODUCER)["seq"].sum()) == 1
    assert np.sum(child["rec"]["kind"] == QUEUE_OPEN) == 1
