"""The tracer's online behavior monitor (HBTM, seed 001): real programs, real threads.

Records are read straight from the trace file with the numpy dtypes of hbtool.io.hbt,
so that these tests check what the tracer wrote, independent of hbtool's reader.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from hbt_chunks import walk_chunks
from conftest import EXAMPLES, ROOT, build_traced

from hbtool.io.hbt import chunk_header_dtype, header_dtype, record_dtype

pytestmark = pytest.mark.usefixtures("tracer_built")

# record kinds, behaviors, modes (native_tracer/include/hbtrace_format.h)
BEAT, THREAD_START, THREAD_END, INIT, FINISHED, PROCESS_EXIT = 1, 2, 3, 4, 5, 6
BEHAVIOR, MONITOR, ADJUST = 9, 10, 11
RUNNING, BUSY, COND, EXITED, FAILED = 0, 1, 2, 3, 4
CENTRAL, RING = 0, 1
END_CANCELLED = 2


# --------------------------------------------------------------------------- reading


def read_trace(path: Path) -> dict:
    """Header, metadata and every record of one trace file, with the chunk's os_tid and slot."""
    buf = path.read_bytes()
    hdr = np.frombuffer(buf, header_dtype(), count=1)[0]
    mo, ml = int(hdr["meta_offset"]), int(hdr["meta_length"])
    meta = dict(line.split("=", 1) for line in buf[mo : mo + ml].decode().splitlines() if "=" in line)
    parts, tids, slots, order = [], [], [], []
    for head, rec in walk_chunks(buf):
        parts.append(rec)
        tids.append(np.full(rec.size, int(head["os_tid"])))
        slots.append(np.full(rec.size, int(head["thread_slot"])))
        order.append((int(head["thread_slot"]), int(head["chunk_seq"])))
    idx = sorted(range(len(parts)), key=lambda i: order[i])
    rec = np.concatenate([parts[i] for i in idx])
    return {"header": hdr, "meta": meta, "rec": rec,
            "os_tid": np.concatenate([tids[i] for i in idx]),
            "slot": np.concatenate([slots[i] for i in idx])}


def trace_file(env) -> Path:
    files = sorted(Path(env["HBTRACE_DIR"]).glob("*.hbt"))
    assert len(files) == 1, files
    return files[0]


def behaviors(tr, thread=None):
    """BEHAVIOR records as dicts (onset and detection in CLOCK_MONOTONIC ns)."""
    r = tr["rec"]
    out = []
    for i in np.flatnonzero(r["kind"] == BEHAVIOR):
        x = r[i]
        d = {"thread": int(x["thread"]), "bhv": int(x["loop"]), "at": int(x["t_ns"]),
             "lag_ns": int(x["iter"]) * 1000, "onset": int(x["t_ns"]) - int(x["iter"]) * 1000,
             "seq": int(x["seq"]), "slot": int(x["aux"]), "mode": int(x["flags"]),
             "writer": int(tr["slot"][i])}
        if thread is None or d["thread"] == thread:
            out.append(d)
    return sorted(out, key=lambda d: d["at"])


def beat_times(tr, thread):
    r = tr["rec"]
    return np.sort(r["t_ns"][(r["kind"] == BEAT) & (r["thread"] == thread)].astype(np.int64))


def run(prog, env, *args, timeout=60):
    return subprocess.run([str(prog), *map(str, args)], env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def env_with(traced_env, **kw):
    env = dict(traced_env)
    for k in ("HBTRACE_MONITOR", "HBTRACE_MONITOR_PERIOD_US", "HBTRACE_MONITOR_LATE", "HBTRACE_HEART_RATE"):
        env.pop(k, None)
    env.update({k: str(v) for k, v in kw.items()})
    return env


# about 0.9 ms of work per beat: about 1 000 beats/s per thread, 2 threads on 2 cores
PI = ["--threads", 2, "--beats", 450, "--work", 640000, "--inject-thread", 1, "--inject-beat", 150]


def run_pi(env, tmp_path, *extra):
    truth = tmp_path / "truth.json"
    r = run(EXAMPLES / "pi_pthread", env, *PI, *extra, "--truth", truth)
    return r, json.loads(truth.read_text())


def timing(tr, truth):
    """(B, noise): the injected thread's beat period before the injection, and how much
    the machine disturbed the run: the 99th percentile of the other thread's intervals
    (about 1.5 B on a quiet machine; more when other processes compete for the CPUs)."""
    T = truth["thread"]
    t = beat_times(tr, T)
    B = float(np.median(np.diff(t[t <= truth["inject_mono_ns"]])))
    other = np.diff(beat_times(tr, 1 - T))
    return B, max(float(np.percentile(other, 99)), B)


def check_detected(tr, truth, bhv, mode, onset_periods=3.0, share=1.0):
    """The injected thread has a `bhv` record near the truth's onset, detected soon after:
    within 5 beat periods on a quiet machine (plus twice the disturbance seen in the run).
    `share`: the part of a CPU the injected thread had while it was judged, when the verdict
    waits for CPU time it uses (busy-waiting): the periods last as much longer."""
    T = truth["thread"]
    B, noise = timing(tr, truth)
    onset_truth = truth["inject_mono_ns"]
    got = [d for d in behaviors(tr, T) if d["bhv"] == bhv]
    assert got, f"no behavior {bhv} for thread {T}: {behaviors(tr)}"
    d = min(got, key=lambda d: abs(d["onset"] - onset_truth))
    assert abs(d["onset"] - onset_truth) < onset_periods * B + noise, (d, onset_truth, B, noise)
    # a new busy-waiting verdict waits while the other thread is itself held up (this VM
    # stalls every thread at once now and then: docs/methods.md): the longest interval the
    # other thread had between the onset and the report counts as disturbance too
    o = beat_times(tr, 1 - T)
    around = np.diff(o[(o >= d["onset"] - 20_000_000) & (o <= d["at"] + 20_000_000)])
    local = float(around.max()) if len(around) else 0.0
    assert 0 <= d["lag_ns"] < 5 * B / share + 2 * max(noise, local), (d, B, share, noise, local)
    assert d["mode"] == mode and d["slot"] != d["writer"]
    return d, B


# --------------------------------------------------------------------------- the injected behaviors


@pytest.mark.parametrize("mode", ["central", "ring"])
def test_condwait_detected_then_running_again(traced_env, tmp_path, mode):
    env = env_with(traced_env, HBTRACE_MONITOR=mode)
    r, truth = run_pi(env, tmp_path, "--inject", "condwait", "--wait-ms", 100)
    assert r.returncode == 0, r.stderr
    tr = read_trace(trace_file(env))
    assert tr["meta"]["monitor"] == mode
    d, B = check_detected(tr, truth, COND, CENTRAL if mode == "central" else RING)
    _, noise = timing(tr, truth)
    assert d["seq"] == truth["beat"] + 1  # beats recorded at the onset
    # beats flow again after --wait-ms: RUNNING, onset about when the wait ended
    back = [x for x in behaviors(tr, truth["thread"]) if x["bhv"] == RUNNING and x["at"] > d["at"]]
    assert back, behaviors(tr)
    # the wait lasted at least its 100 ms; the thread beat again when the machine ran it
    # (this VM can stall a thread for ~100 ms more), and the onset is that first beat
    t = beat_times(tr, truth["thread"])
    resumed = int(t[np.searchsorted(t, truth["inject_mono_ns"], side="right")])
    assert resumed - truth["inject_mono_ns"] > 100e6 - 5 * B, (resumed, truth)
    assert -5 * B < back[0]["onset"] - resumed < 25e6 + 2 * noise, (back[0], resumed, B, noise)


@pytest.mark.parametrize("mode", ["central", "ring"])
def test_busywait_detected(traced_env, tmp_path, mode):
    env = env_with(traced_env, HBTRACE_MONITOR=mode)
    # each of 12 beats spins 9 times its work more (about 0.1 s, while the other thread,
    # its only checker in the ring, still beats): this VM now and then charges a thread
    # 4-12 times its usual CPU time per beat for tens of milliseconds (both threads at once,
    # no tracer), and the monitor learns such a phase as usual work -- a spin of 3 times
    # the work (--busy-factor 4) is then within what the machine itself did
    # (the monitor learns a look taken while the machine runs the other thread as much
    # slower at the other thread's pace). The fault comes 500 beats in, and the other thread
    # beats 1,200 times: in ring mode it is the victim's only checker, and on this VM one
    # thread of a run sometimes gets half the CPU time of the other for the whole run
    r, truth = run_pi(env, tmp_path, "--beats", 1200, "--inject-beat", 500,
                      "--inject", "busywait", "--busy-beats", 12, "--busy-factor", 10)
    assert r.returncode == 0, r.stderr
    tr = read_trace(trace_file(env))
    # busy-waiting is told from waiting for a CPU by the CPU time it uses while late:
    # on a busy machine that may take one slow interval more, and the verdict comes as
    # much later as the spinning thread gets less of a CPU than at its usual work (it shares
    # two CPUs with its teammate, the monitor thread, and whatever else the machine runs).
    # Its spin is measured in CPU time (10 times a unit of work): its first spinning interval
    # over 10 usual intervals is that share
    t = beat_times(tr, truth["thread"])
    B, _ = timing(tr, truth)
    k = int(np.searchsorted(t, truth["inject_mono_ns"] - B / 2))
    share = min(1.0, 10 * B / float(t[k + 1] - t[k]))
    d, _ = check_detected(tr, truth, BUSY, CENTRAL if mode == "central" else RING, onset_periods=6,
                          share=share)
    later = [x["bhv"] for x in behaviors(tr, truth["thread"]) if x["at"] > d["at"]]
    assert RUNNING in later  # after 12 slow beats it runs at its usual rate again


@pytest.mark.parametrize("mode", ["central", "ring"])
def test_early_exit_detected(traced_env, tmp_path, mode):
    env = env_with(traced_env, HBTRACE_MONITOR=mode)
    r, truth = run_pi(env, tmp_path, "--inject", "earlyexit")
    assert r.returncode == 0, r.stderr
    tr = read_trace(trace_file(env))
    check_detected(tr, truth, EXITED, CENTRAL if mode == "central" else RING)
    seen = [x["bhv"] for x in behaviors(tr, truth["thread"])]
    assert seen.count(EXITED) == 1 and seen[-1] == EXITED and FAILED not in seen


def test_central_monitor_thread_is_invisible(traced_env, tmp_path):
    """Init(0) starts one monitor thread: a chunk with only its records, no lifecycle, no beats."""
    env = env_with(traced_env)
    r, _ = run_pi(env, tmp_path, "--inject", "earlyexit")
    assert r.returncode == 0
    tr = read_trace(trace_file(env))
    assert tr["meta"]["monitor"] == "central" and tr["meta"]["monitor_source"] == "Init"
    rec, slot = tr["rec"], tr["slot"]
    started = set(slot[rec["kind"] == THREAD_START])
    writers = set(slot[rec["kind"] == BEHAVIOR]) - started
    assert len(writers) == 1  # the monitor thread
    mine = rec[slot == writers.pop()]
    assert set(mine["kind"]) <= {BEHAVIOR, MONITOR}
    assert len(set(tr["os_tid"][rec["kind"] == BEAT])) == 2


@pytest.mark.parametrize("mode", ["central", "ring"])
def test_vanished_thread_failed_online(traced_env, tmp_path, mode):
    env = env_with(traced_env, HBTRACE_MONITOR=mode)
    r, truth = run_pi(env, tmp_path, "--inject", "shutdown", "--shutdown-mode", "vanish")
    assert r.returncode == 0, r.stderr
    assert truth["shutdown_mode"] == "vanish" and truth["end"] == "normal"
    tr = read_trace(trace_file(env))
    T = truth["thread"]
    tid = set(tr["os_tid"][(tr["rec"]["kind"] == BEAT) & (tr["rec"]["thread"] == T)])
    assert not (np.isin(tr["os_tid"], list(tid)) & (tr["rec"]["kind"] == THREAD_END)).any()
    d, _ = check_detected(tr, truth, FAILED, CENTRAL if mode == "central" else RING)
    end = int(tr["rec"]["t_ns"][tr["rec"]["kind"] == PROCESS_EXIT][0])
    assert d["at"] < end - 50e6  # online, long before the process ended


def test_cancelled_thread_failed(traced_env, tmp_path):
    env = env_with(traced_env)
    r, truth = run_pi(env, tmp_path, "--inject", "shutdown", "--shutdown-mode", "cancel")
    assert r.returncode == 0, r.stderr
    tr = read_trace(trace_file(env))
    rec = tr["rec"]
    tid = set(tr["os_tid"][(rec["kind"] == BEAT) & (rec["thread"] == truth["thread"])])
    ends = rec["aux"][np.isin(tr["os_tid"], list(tid)) & (rec["kind"] == THREAD_END)]
    assert ends.tolist() == [END_CANCELLED]
    check_detected(tr, truth, FAILED, CENTRAL)
    assert EXITED not in [x["bhv"] for x in behaviors(tr, truth["thread"])]


def test_openmp_example_rejects_cancel_and_vanish(tracer_built, traced_env):
    for m in ("cancel", "vanish"):
        r = run(EXAMPLES / "jacobi_omp", traced_env, "--threads", 2, "--beats", 10,
                "--inject", "shutdown", "--shutdown-mode", m)
        assert r.returncode == 2 and "pthread program" in r.stderr


def test_monitor_off_records_no_behavior(traced_env, tmp_path):
    env = env_with(traced_env, HBTRACE_MONITOR="off")
    r, _ = run_pi(env, tmp_path, "--inject", "condwait", "--wait-ms", 60)
    assert r.returncode == 0
    tr = read_trace(trace_file(env))
    assert tr["meta"]["monitor"] == "off"
    assert not np.isin(tr["rec"]["kind"], [BEHAVIOR, MONITOR, ADJUST]).any()
    assert (tr["rec"]["kind"] == BEAT).sum() == 900


@pytest.mark.parametrize("mode", ["central", "ring"])
@pytest.mark.parametrize("how,expect", [("abort", -signal.SIGABRT), ("segv", -signal.SIGSEGV), ("exit", 1)])
def test_monitor_never_changes_the_exit_status(traced_env, mode, how, expect):
    env = env_with(traced_env, HBTRACE_MONITOR=mode)
    r = run(EXAMPLES / "pi_pthread", env, "--threads", 2, "--beats", 400, "--work", 200000,
            "--inject", "shutdown", "--shutdown-mode", how, "--inject-thread", 0, "--inject-beat", 60)
    assert r.returncode == expect
    tr = read_trace(trace_file(env))
    if how == "exit":
        # exit(1) with a thread still at work: it failed with the process, onset = the exit
        ex = tr["rec"][tr["rec"]["kind"] == PROCESS_EXIT]
        failed = [d for d in behaviors(tr, 1) if d["bhv"] == FAILED]
        assert len(failed) == 1 and abs(failed[0]["onset"] - int(ex["t_ns"][0])) < 5e6


# --------------------------------------------------------------------------- small programs

PROBE_C = r"""
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "hbtrace.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
static void spin_us(double us)
{
    uint64_t end = now_ns() + (uint64_t)(us * 1e3);
    while (now_ns() < end)
        ;
}

struct job { pthread_t th; int tid, beats; double spin_us, extra_ms; int sleep_at; int sleep_ms; };

static void *beater(void *p)
{
    struct job *j = p;
    int b = 0;
    for (; b < j->beats; b++) {
        spin_us(j->spin_us);
        Heartbeat_MultiPthread_Generate(j->tid, 1, b);
        if (b == j->sleep_at)
            usleep((useconds_t)j->sleep_ms * 1000);
    }
    uint64_t end = now_ns() + (uint64_t)(j->extra_ms * 1e6);
    while (j->extra_ms > 0 && now_ns() < end) {
        spin_us(j->spin_us);
        Heartbeat_MultiPthread_Generate(j->tid, 1, b++);
    }
    return NULL;
}

static void start(struct job *j, int tid, int beats, double spin, double extra)
{
    memset(j, 0, sizeof *j);
    j->tid = tid; j->beats = beats; j->spin_us = spin; j->extra_ms = extra; j->sleep_at = -1;
    if (pthread_create(&j->th, NULL, beater, j) != 0) { perror("pthread_create"); exit(3); }
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    struct job js[8];
    if (!strcmp(mode, "shortlived")) {
        /* waves of short-lived beating threads under a fast central monitor */
        int total = atoi(argv[2]), wave = 4;
        Heartbeat_MultiPthread_Init(0);
        for (int w = 0; w < total; w += wave) {
            for (int k = 0; k < wave; k++)
                start(&js[k], w + k, 12, 30, 0);
            for (int k = 0; k < wave; k++)
                pthread_join(js[k].th, NULL);
        }
        Heartbeat_MultiPthread_Finished();
        return 0;
    }
    if (!strcmp(mode, "ringdie")) {
        /* a ring of 4 in which 3 die early and the last keeps beating */
        Heartbeat_MultiPthread_Init(1);
        for (int k = 0; k < 4; k++)
            start(&js[k], k, 40, 200, k == 3 ? 400 : 0);
        for (int k = 0; k < 4; k++)
            pthread_join(js[k].th, NULL);
        Heartbeat_MultiPthread_Finished();
        return 0;
    }
    if (!strcmp(mode, "nofinish")) {
        /* never calls Finished; runs a little over one second */
        Heartbeat_MultiPthread_Init(0);
        for (int k = 0; k < 2; k++)
            start(&js[k], k, 0, 500, 1200);
        for (int k = 0; k < 2; k++)
            pthread_join(js[k].th, NULL);
        return 0;
    }
    if (!strcmp(mode, "adjust")) {
        /* about 4 000 calls/s per thread; Adjust(500) after 0.4 s */
        int call = argc > 2 && !strcmp(argv[2], "call");
        L_Heartbeat_OpenMP_Init();
        int early = Heartbeat_HeartRate_Adjust(1000.0f);
        int bad = Heartbeat_HeartRate_Adjust(-5.0f) + Heartbeat_HeartRate_Adjust(NAN) +
                  Heartbeat_HeartRate_Adjust(0.0f) + Heartbeat_HeartRate_Adjust(INFINITY);
        for (int k = 0; k < 2; k++)
            start(&js[k], k, 0, 250, 1500);
        usleep(400000);
        int rc = call ? Heartbeat_HeartRate_Adjust(500.0f) : -1;
        for (int k = 0; k < 2; k++)
            pthread_join(js[k].th, NULL);
        printf("early %d bad %d rc %d\n", early, bad, rc);
        Heartbeat_OpenMP_Finished();
        return 0;
    }
    if (!strcmp(mode, "monitorapi")) {
        /* no monitor thread: the program drives its own monitor loop */
        L_Heartbeat_OpenMP_Init();
        for (int k = 0; k < 2; k++) {
            start(&js[k], k, 0, 0, 0);
        }
        for (int k = 0; k < 2; k++)
            pthread_join(js[k].th, NULL);
        for (int k = 0; k < 2; k++) {
            memset(&js[k], 0, sizeof js[k]);
            js[k].tid = k; js[k].beats = 300; js[k].spin_us = 500;
            js[k].sleep_at = k == 1 ? 100 : -1; js[k].sleep_ms = 100;
            pthread_create(&js[k].th, NULL, beater, &js[k]);
        }
        uint64_t end = now_ns() + 2000000000ull;
        while (now_ns() < end && pthread_tryjoin_np(js[0].th, NULL) != 0) {
            Heartbeat_OpenMP_Monitor();
            usleep(200);
        }
        pthread_join(js[1].th, NULL);
        Heartbeat_OpenMP_Finished();
        return 0;
    }
    if (!strcmp(mode, "fork")) {
        /* the child gets its own file, table and monitor thread */
        Heartbeat_MultiPthread_Init(0);
        start(&js[0], 0, 50, 300, 0);
        pthread_join(js[0].th, NULL);
        pid_t pid = fork();
        if (pid == 0) {
            start(&js[0], 10, 400, 500, 0);
            start(&js[1], 11, 60, 500, 0);   /* ends early */
            pthread_join(js[0].th, NULL);
            pthread_join(js[1].th, NULL);
            exit(0);
        }
        int st;
        waitpid(pid, &st, 0);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 99;
    }
    fprintf(stderr, "usage: probe shortlived N|ringdie|nofinish|adjust [call]|monitorapi|fork\n");
    return 2;
}
"""


@pytest.fixture(scope="module")
def probe(tracer_built, tmp_path_factory):
    d = tmp_path_factory.mktemp("probe")
    src = d / "probe.c"
    src.write_text(PROBE_C)
    return build_traced(src, d / "probe", "-lm", cc="cc", opt="-O2")


def test_threads_dying_while_a_fast_monitor_reads_them(probe, traced_env):
    env = env_with(traced_env, HBTRACE_MONITOR_PERIOD_US=100)
    r = run(probe, env, "shortlived", 240)
    assert r.returncode == 0, r.stderr
    tr = read_trace(trace_file(env))
    assert tr["meta"]["monitor_period_us"] == "100"
    exited = [d for d in behaviors(tr) if d["bhv"] == EXITED]
    assert sorted(d["thread"] for d in exited) == list(range(240))  # each exactly once
    assert all(d["bhv"] in (EXITED, BUSY, COND, RUNNING) for d in behaviors(tr))
    assert not [d for d in behaviors(tr) if d["bhv"] == FAILED]


def test_ring_whose_other_threads_all_died(probe, traced_env):
    env = env_with(traced_env)
    t0 = time.monotonic()
    r = run(probe, env, "ringdie", timeout=20)
    assert r.returncode == 0, r.stderr
    assert time.monotonic() - t0 < 5
    tr = read_trace(trace_file(env))
    assert tr["meta"]["monitor"] == "ring"
    ex = {d["thread"]: d for d in behaviors(tr) if d["bhv"] == EXITED}
    assert set(ex) == {0, 1, 2, 3}
    survivor = set(tr["slot"][(tr["rec"]["kind"] == BEAT) & (tr["rec"]["thread"] == 3)])
    for k in range(3):
        # the dead were reported online by a ring neighbour (in the end the survivor), not at the end
        assert ex[k]["mode"] == RING and ex[k]["lag_ns"] < 100e6
        assert ex[k]["at"] < ex[3]["onset"]
    assert ex[3]["writer"] not in survivor  # nobody left to check it: the Finished pass did
    mon = tr["rec"][tr["rec"]["kind"] == MONITOR]
    assert len(mon) == 2 and (mon["flags"] == RING).all()  # Finished and exit
    msgs = int(mon["seq"][-1]) | int(mon["aux"][-1]) << 32
    assert 0 < msgs < 100000 and int(mon["loop"][-1]) > 0


def test_program_without_finished(probe, traced_env):
    env = env_with(traced_env)
    r = run(probe, env, "nofinish")
    assert r.returncode == 0, r.stderr
    tr = read_trace(trace_file(env))
    rec = tr["rec"]
    assert not (rec["kind"] == FINISHED).any()
    assert (rec["kind"] == PROCESS_EXIT).sum() == 1
    started = set(tr["slot"][rec["kind"] == THREAD_START])
    ismon = rec["kind"] == MONITOR
    by_monitor = rec[ismon & ~np.isin(tr["slot"], list(started))]
    at_exit = rec[ismon & np.isin(tr["slot"], list(started))]
    assert len(by_monitor) >= 1 and len(at_exit) == 1  # once a second, and at exit
    first = by_monitor[0]
    assert int(first["thread"]) == 2  # two threads watched
    assert 100 <= int(first["iter"]) <= 100000  # mean poll period, us
    assert int(first["loop"]) > 0 and int(first["seq"]) > 0  # passes, messages
    assert int(at_exit["seq"][0]) >= int(first["seq"])  # cumulative
    assert {d["thread"] for d in behaviors(tr) if d["bhv"] == EXITED} == {0, 1}
    from hbtool.io import read_heartbeats

    assert len(read_heartbeats(Path(env["HBTRACE_DIR"])).beats) == (rec["kind"] == BEAT).sum()


@pytest.mark.parametrize("how", ["call", "env"])
def test_heart_rate_adjust(probe, traced_env, how):
    """Algorithm 2: ~4 000 calls/s per thread, expected 500 beats/s: every ~8th call recorded."""
    env = env_with(traced_env, **({"HBTRACE_HEART_RATE": 500} if how == "env" else {}))
    r = run(probe, env, "adjust", how)
    assert r.returncode == 0, r.stderr
    early, bad, rc = (int(x) for x in r.stdout.split()[1::2])
    assert early == 1 and bad == 4  # nothing to observe yet; not a positive finite rate
    assert rc == (0 if how == "call" else -1)
    tr = read_trace(trace_file(env))
    rec = tr["rec"]
    adj = rec[rec["kind"] == ADJUST]
    assert len(adj) >= 1
    first = adj[0]
    observed = int(first["loop"]) / 1000  # beats/s per thread when it adjusted
    assert int(first["seq"]) == 1 and int(first["aux"]) == max(1, round(observed / 500))
    assert int(first["aux"]) >= 3  # the machine may be busy, but not that busy
    assert int(first["iter"]) == 500000 and int(first["flags"]) == (1 if how == "env" else 0)
    for a, b in itertools.pairwise(adj):
        assert int(b["seq"]) == int(a["aux"])  # k_old of each change is the k_new of the one before
    # beats every 250 us of calls before; every k-th call, i.e. every k x 250 us, after
    t = beat_times(tr, 0)
    before = np.diff(t[t < int(first["t_ns"])])
    after = np.diff(t[t > int(adj["t_ns"][-1]) + 20e6])
    assert abs(np.median(before) - 250e3) < 50e3
    k = int(adj["aux"][-1])
    assert abs(np.median(after) - k * 250e3) < 0.2 * k * 250e3
    if how == "env":
        assert tr["meta"]["heart_rate"] == "500"


def test_monitor_api_drives_detection(probe, traced_env):
    env = env_with(traced_env)
    r = run(probe, env, "monitorapi")
    assert r.returncode == 0, r.stderr
    tr = read_trace(trace_file(env))
    assert "monitor" not in tr["meta"]  # L_ Init: no monitor thread, no mode
    cond = [d for d in behaviors(tr, 1) if d["bhv"] == COND]
    assert len(cond) == 1 and cond[0]["mode"] == CENTRAL
    main_slot = int(tr["slot"][tr["rec"]["kind"] == INIT][0])
    assert cond[0]["writer"] == main_slot  # found by the program's own Monitor() loop
    # online, during the 100 ms wait (the loop runs on a machine whose CPUs the two
    # beating threads keep busy, so its wake-ups may come late)
    assert cond[0]["lag_ns"] < 20e6
    assert abs(cond[0]["onset"] - beat_times(tr, 1)[100]) < 1e3  # its beat 100, the last one


def test_fork_child_monitors_its_own_threads(probe, traced_env):
    env = env_with(traced_env)
    r = run(probe, env, "fork")
    assert r.returncode == 0, r.stderr
    files = sorted(Path(env["HBTRACE_DIR"]).glob("*.hbt"))
    assert len(files) == 2
    child = [read_trace(f) for f in files]
    child = [t for t in child if (t["rec"]["thread"][t["rec"]["kind"] == BEAT] >= 10).any()]
    assert len(child) == 1
    c = child[0]
    assert c["meta"]["monitor"] == "central"
    ex = [d for d in behaviors(c) if d["bhv"] == EXITED]
    assert {d["thread"] for d in ex} == {10, 11}
    early = next(d for d in ex if d["thread"] == 11)
    assert early["lag_ns"] < 20e6  # online, by the child's own monitor thread
    assert not [d for d in behaviors(c) if d["thread"] == 0]  # nothing of the parent's threads


# --------------------------------------------------------------------------- an OpenMP team

HEAT_ARGS = ["--threads", 2, "--size", 300, "--steps", 200, "--chunk", 16]


@pytest.fixture(scope="module")
def heat(tracer_built, tmp_path_factory):
    """heat_omp (no heartbeat call: automatic OpenMP beats) built with gcc (libgomp, the
    tracer's GOMP wrappers) and, where clang is installed, with clang (libomp, OMPT)."""
    import shutil

    progs = {"gcc": EXAMPLES / "heat_omp"}
    if shutil.which("clang"):
        exe = tmp_path_factory.mktemp("heat") / "heat_omp_clang"
        subprocess.run(["clang", "-O2", "-fopenmp", str(EXAMPLES.parent / "heat_omp.c"), "-o", str(exe)],
                       check=True)
        progs["clang"] = exe
    return progs


def record_team(heat, cc, tmp_path, mode, *inject, args=HEAT_ARGS):
    if cc not in heat:
        pytest.skip(f"{cc} not installed")
    from conftest import run_hbtool

    out = tmp_path / "rec"
    env = env_with({k: v for k, v in os.environ.items() if not k.startswith(("HBTRACE_", "OMP_"))},
                   HBTRACE_MONITOR=mode, HBTRACE_MONITOR_BEATS="openmp", OMP_NUM_THREADS=2)
    r = run_hbtool("record", "-o", out, *inject, "--", heat[cc], *args, env=env)
    assert r.returncode == 0, r.stderr
    tr = read_trace(next(out.glob("*.hbt")))
    assert tr["meta"]["monitor"] == mode and tr["meta"]["monitor_beats"] == "openmp"
    truth = json.loads((out / "inject-truth.json").read_text()) if inject else None
    return tr, truth


@pytest.mark.parametrize("kind", ["busy", "cond"])
def test_team_waiting_for_a_sick_thread_is_not_blamed(heat, tmp_path, kind):
    """A thread that spins (busy) or blocks (cond) in the middle of a parallel region holds
    its team up: the others wait for it at the next barrier, spinning in the runtime before
    they sleep -- as busy-looking to /proc as the victim. The monitor judges the automatic
    OpenMP beats, names the victim while the fault lasts, and never the waiting thread.
    (Central mode: in ring mode the victim's checker is one of the team, which makes no
    beat, so no check, while it waits for the victim.)"""
    mode = "central"
    wait_ms = 500
    # the fault 0.1 s into a run of 0.28-0.9 s (quiet machine): after the monitor's first 16
    # looks at the thread, which it needs to know the CPU time of its beats (HBT_CPU_WARM); at
    # beat 600 of the short run, 10 ms in on a quiet machine, it had not had them. (With 2,000
    # steps the run took 0.3 s when this was written and 0.092 s on the same kind of machine a
    # month later: the fault never came, in 1 run of 3.)
    long_run = [a if a != 200 else 6000 for a in HEAT_ARGS]
    tr, truth = record_team(heat, "gcc", tmp_path, mode, "--inject", kind, "--thread", 1, "--at", 0.1,
                            "--inject-wait-ms", wait_ms, args=long_run)
    assert truth["fired"] and truth["thread"] == 1, json.dumps(truth)
    t0 = truth["fired_at"]["mono_ns"]
    want = BUSY if kind == "busy" else COND
    got = [d for d in behaviors(tr, 1) if d["bhv"] == want]
    assert got, behaviors(tr)
    # nothing else said of it meanwhile (a state read while the spinning victim wrote the
    # injector's truth file once made a conditional-waiting report before the busy one)
    assert not [d for d in behaviors(tr, 1) if d["bhv"] in (BUSY, COND) and d["bhv"] != want], behaviors(tr, 1)
    d = got[0]
    assert t0 - 1e6 <= d["onset"] <= t0 + 1e6  # its last beat before the fault
    assert d["at"] < t0 + wait_ms * 1e6  # online, while the fault lasted
    assert d["mode"] == (CENTRAL if mode == "central" else RING)
    # running again once it beats at its usual rate, the onset about when the fault ended
    back = [x for x in behaviors(tr, 1) if x["bhv"] == RUNNING and x["at"] > d["at"]]
    assert back and back[0]["onset"] >= t0 + wait_ms * 1e6 - 5e6, (back, t0)
    assert not [x for x in behaviors(tr, 0) if x["bhv"] in (BUSY, COND)], behaviors(tr, 0)


@pytest.mark.parametrize("cc,mode", [("gcc", "ring"), ("clang", "central"), ("clang", "ring")])
def test_team_at_work_is_not_reported(heat, tmp_path, cc, mode):
    """Units of work of every length (a dynamic loop's chunks, a static copy, the barriers
    between them) and nothing injected: no busy-waiting, no conditional waiting."""
    tr, _ = record_team(heat, cc, tmp_path, mode)
    assert (tr["rec"]["kind"] == BEAT).sum() > 2000
    assert not [x for x in behaviors(tr) if x["bhv"] in (BUSY, COND)], behaviors(tr)


LONG_LOOP_ARGS = [3, 40000, 1, 20]   # 3 steps of a dynamic loop: 40,000 chunks of 20 us, the last of 1 ms


def omp_builds(tmp_path_factory, program: str) -> dict:
    """tests/programs/PROGRAM.c built with gcc (libgomp) and, where installed, clang (libomp)."""
    import shutil

    d = tmp_path_factory.mktemp(program)
    progs = {}
    for cc in ("gcc", "clang"):
        if shutil.which(cc):
            exe = d / f"{program}_{cc}"
            subprocess.run([cc, "-O2", "-fopenmp", f"-I{ROOT / 'tests' / 'programs'}",
                            str(ROOT / "tests" / "programs" / f"{program}.c"), "-o", str(exe)], check=True)
            progs[cc] = exe
    return progs


@pytest.fixture(scope="module")
def long_loop(tracer_built, tmp_path_factory):
    """tests/programs/omp_long_chunks.c, gcc and clang."""
    return omp_builds(tmp_path_factory, "omp_long_chunks")


@pytest.mark.parametrize("cc,kind", [("gcc", "busy"), ("gcc", "cond"), ("clang", "busy"), ("clang", "cond")])
def test_a_thread_stuck_in_a_chunk_while_its_team_goes_on_is_found_at_once(long_loop, tmp_path, cc, kind):
    """cd-hit's pattern: a dynamically scheduled loop of many short chunks (20 us here), run
    again and again, so that the threads have waited for each other before. A thread that
    spins or blocks in the middle of it while its teammate goes on taking the loop's chunks
    holds nobody up until the loop runs out of chunks -- here after the fault is over, 0.3 s
    into a step of 0.4 s -- and was reported then or never (here: neither found; cd-hit: 1
    spin in 4 found, blocks 60-190 ms late). Its chunk is now measured against the loop's
    chunks: reported within tens of milliseconds, with its onset, and nothing of its
    teammate. No report in a normal run."""
    tr, _ = record_team(long_loop, cc, tmp_path, "central", args=LONG_LOOP_ARGS)
    assert (tr["rec"]["kind"] == BEAT).sum() > 40000
    assert_stuck_found_while_the_team_goes_on(long_loop, cc, tmp_path, tr, kind, ["--at", 0.5], LONG_LOOP_ARGS)


def assert_stuck_found_while_the_team_goes_on(progs, cc, tmp_path, normal, kind, moment, args):
    """No report in the `normal` run; a 300 ms spin or block (kind) injected into thread 1 at
    `moment` is reported with its onset within 100 ms (before its teammate, which goes on
    working, runs out of work), and nothing of its teammate."""
    assert not [x for x in behaviors(normal) if x["bhv"] in (BUSY, COND)], behaviors(normal)
    tr, truth = record_team(progs, cc, tmp_path / "fault", "central", "--inject", kind, "--thread", 1,
                            *moment, "--inject-wait-ms", 300, args=args)
    assert truth["fired"] and truth["thread"] == 1, json.dumps(truth)
    t0 = truth["fired_at"]["mono_ns"]
    want = BUSY if kind == "busy" else COND
    got = [d for d in behaviors(tr, 1) if d["bhv"] == want]
    assert got, (behaviors(tr), t0)
    assert t0 - 1e6 <= got[0]["onset"] <= t0 + 1e6, (got, t0)
    # found while the teammate still works (before: 300 ms or never)
    assert got[0]["at"] < t0 + 100e6, (got, t0)
    assert not [x for x in behaviors(tr, 0) if x["bhv"] in (BUSY, COND)], behaviors(tr, 0)


@pytest.fixture(scope="module")
def lock_queue(tracer_built, tmp_path_factory):
    """tests/programs/omp_lock_queue.c, gcc and clang."""
    return omp_builds(tmp_path_factory, "omp_lock_queue")


LOCK_QUEUE_ARGS = ["queue", 600, 2000]   # items handed out under a lock, us of CPU each


@pytest.mark.parametrize("cc,kind", [("gcc", "busy"), ("gcc", "cond"), ("clang", "busy"), ("clang", "cond")])
def test_a_thread_stuck_between_two_locks_while_its_team_goes_on_is_found_at_once(lock_queue, tmp_path, cc, kind):
    """MUSCLE 5's pattern: a team that shares its work out by hand under an OpenMP lock (items
    of 2 ms here). A thread that spins or blocks between two of its locks while its teammate
    goes on taking items holds nobody up until the items run out, after the fault is over (the
    tracer before: MUSCLE's 300 ms faults found 5 of 12, up to 200 ms late). Its unit since
    its latest lock is measured against the units begun at that lock before: reported while
    its teammate still takes items, with its onset, and nothing of its teammate. No report in
    a normal run."""
    tr, _ = record_team(lock_queue, cc, tmp_path, "central", args=LOCK_QUEUE_ARGS)
    assert_stuck_found_while_the_team_goes_on(lock_queue, cc, tmp_path, tr, kind, ["--beat", 150], LOCK_QUEUE_ARGS)


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_a_loops_long_last_chunk_is_reported_once_not_at_every_step(long_loop, tmp_path, cc):
    """Five steps of a dynamic loop of 20,000 chunks of 20 us whose last iteration takes 20 ms
    (1000 times the others): the thread that takes it works alone while its teammate waits at
    the loop's end. The first time nothing says that is the loop's work, and it is reported;
    from then on the loop's longest chunk lately is known, and a chunk no more than twice that
    is work, even while the team waits (before: reported at every step, 5 of 5)."""
    tr, _ = record_team(long_loop, cc, tmp_path, "central", args=[5, 20000, 20, 20])
    assert (tr["rec"]["kind"] == BEAT).sum() > 100000
    assert len([x for x in behaviors(tr) if x["bhv"] in (BUSY, COND)]) <= 1, behaviors(tr)


@pytest.fixture(scope="module")
def uneven_share(tracer_built, tmp_path_factory):
    """tests/programs/omp_uneven_share.c, gcc and clang."""
    return omp_builds(tmp_path_factory, "omp_uneven_share")


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_a_longer_share_of_a_long_region_is_not_busy_waiting(uneven_share, tmp_path, cc):
    """IQ-TREE's first long region: after thousands of units of microseconds, a region whose
    static split gives one thread 100 ms of work and the other 130 ms (IQ-TREE: 99 and 144). The
    first waits 30 ms for the second at the region's end, and the second had never used more
    than microseconds of CPU time between two beats: it was called busy-waiting 100 ms into
    its share (IQ-TREE 2 runs of 3). A thread is late for its team once it has taken twice the
    share of the teammate that waits for it."""
    tr, _ = record_team(uneven_share, cc, tmp_path, "central", args=[3000, 100, 1.3])
    assert (tr["rec"]["kind"] == BEAT).sum() > 6000
    assert not [x for x in behaviors(tr) if x["bhv"] in (BUSY, COND)], behaviors(tr)


@pytest.fixture(scope="module")
def mixed_units(tracer_built, tmp_path_factory):
    """tests/programs/omp_mixed_units.c, gcc and clang."""
    return omp_builds(tmp_path_factory, "omp_mixed_units")


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_units_of_milliseconds_among_beats_microseconds_apart_are_the_threads_pace(mixed_units, tmp_path, cc):
    """GROMACS's pace: per step 17 regions of 5 us and two of 1.5 ms (every 50th step thread
    1's share of the first 4.5 ms, which thread 0 waits for). A look's mean interval dilutes
    the long regions, and at the 0.5 ms floor each thread was late twice a step, looked at
    every 0.2 ms until it beat: 2,700-2,900 monitor passes a second of the run, which took 1.6
    s where it takes 1.0 (GROMACS: +59 % wall). Its silences of 1.5 ms, 100 a second, are its
    pace now: a few hundred passes a second, and still no report."""
    from hbtool.io import read_heartbeats

    tr, _ = record_team(mixed_units, cc, tmp_path, "central", args=[300, 17, 1.5, 50, 3])
    assert not [x for x in behaviors(tr) if x["bhv"] in (BUSY, COND)], behaviors(tr)
    trace = read_heartbeats(tmp_path / "rec")
    m = trace.monitor
    passes = int(m[m["kind"] == "monitor"]["passes"].max())
    span = float(trace.beats["t"].max() - trace.beats["t"].min())
    assert span > 0.5 and passes / span < 1500, (passes, span)


# --------------------------------------------------------------------------- waiting in the program's own code

PIPELINE_ARGS = [60, 0.1, 4, 0.2, 30]   # steps, unit, long, tail, spike (ms of CPU)


@pytest.fixture(scope="module")
def flag_pipeline(tracer_built, tmp_path_factory):
    """tests/programs/omp_flag_pipeline.c, gcc and clang."""
    return omp_builds(tmp_path_factory, "omp_flag_pipeline")


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_thread_waiting_in_its_own_code_is_late_by_its_teams_wait(flag_pipeline, tmp_path, cc):
    """NPB LU's pattern: thread 1 spins on a flag (no runtime call) while thread 0 works a
    long unit, then meets it at the barrier 0.2 ms after it. Thread 1 is silent and on a CPU
    for the whole unit -- 30 ms every 4th step, far longer than any of its units took -- but
    its team waited for it 0.2 ms: not busy-waiting. (Judged by its silence, the monitor
    called it busy-waiting at each such step: 15 of 15.) And a real spin there is still
    reported while its team waits for it."""
    tr, _ = record_team(flag_pipeline, cc, tmp_path, "central", args=PIPELINE_ARGS)
    assert (tr["rec"]["kind"] == BEAT).sum() > 2000
    assert not [x for x in behaviors(tr) if x["bhv"] in (BUSY, COND)], behaviors(tr)
    assert_spin_found(flag_pipeline, cc, tmp_path / "fault", 1, 600, PIPELINE_ARGS)


def assert_spin_found(progs, cc, tmp_path, thread, beat, args):
    """A 300 ms spin injected into `thread` at its beat `beat` is reported busy-waiting, with
    its onset, within the spin."""
    tr, truth = record_team(progs, cc, tmp_path, "central", "--inject", "busy", "--thread", thread,
                            "--beat", beat, "--inject-wait-ms", 300, args=args)
    assert truth["fired"] and truth["thread"] == thread, json.dumps(truth)
    t0 = truth["fired_at"]["mono_ns"]
    got = [d for d in behaviors(tr, thread) if d["bhv"] == BUSY]
    assert got and t0 - 1e6 <= got[0]["onset"] <= t0 + 1e6 and got[0]["at"] < t0 + 300e6, (behaviors(tr), t0)


RELEASED_ARGS = [40, 0.1, 10, 20, 4]   # steps, unit, long, sleep (ms), every


@pytest.fixture(scope="module")
def released(tracer_built, tmp_path_factory):
    """tests/programs/omp_released.c, gcc and clang."""
    return omp_builds(tmp_path_factory, "omp_released")


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_a_teammate_released_from_a_barrier_that_has_not_run_since_waits_for_nobody(released, tmp_path, cc):
    """A thread released from a barrier still bears its mark there until it runs again: on a
    busy machine it may be queued for milliseconds (omp_flag_pipeline with libomp, in CI: its
    thread 1, queued at the loop's barrier, made thread 0's 4 ms of work after it look like a
    wait of the team, and thread 0 was called busy-waiting 2.4 ms in). Here thread 1 sleeps
    20 ms in a signal handler inside the barrier every 4th step while thread 0 works 10 ms
    after it: nobody waits for thread 0 (the tracer before called it busy-waiting at each such
    step, 10 of 10). And a real spin of thread 0 while thread 1 waits for it is still found."""
    tr, _ = record_team(released, cc, tmp_path, "central", args=RELEASED_ARGS)
    r = tr["rec"]
    waits = r[(r["kind"] == 17) & ((r["flags"] >> 4) == 1) & (r["thread"] == 1)]
    slept = ((waits["iter"].astype(np.int64) << 32) | waits["aux"].astype(np.int64)) > 15e6
    assert slept.sum() >= 5, slept.sum()   # thread 1 slept in the barrier (not before it)
    assert not [x for x in behaviors(tr, 0) if x["bhv"] in (BUSY, COND)], behaviors(tr)
    assert_spin_found(released, cc, tmp_path / "fault", 0, 300, RELEASED_ARGS)


@pytest.fixture(scope="module")
def team_of_one(tracer_built, tmp_path_factory):
    """tests/programs/omp_team_of_one.c, gcc and clang."""
    return omp_builds(tmp_path_factory, "omp_team_of_one")


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_a_spin_in_a_region_of_one_thread_is_found_while_the_worker_waits_in_the_pool(team_of_one, tmp_path, cc):
    """A region of one thread is a later region than the worker's pool mark, but it does not
    count the worker: the worker is not let out of the pool, and still waits for the master.
    A spin of the master there is found. (Judged released, the worker's mark held the master
    no more: IQ-TREE's master spinning in such a region went unreported, 4 faults of 12.)"""
    args = [100, 0.1]   # gcc: 43 beats of thread 0 a step, clang 4 (libomp runs the loop of a team
    #                     of one as one chunk): its 300th beat is in the run either way
    tr, _ = record_team(team_of_one, cc, tmp_path, "central", args=args)
    assert not [x for x in behaviors(tr) if x["bhv"] in (BUSY, COND)], behaviors(tr)
    assert_spin_found(team_of_one, cc, tmp_path / "fault", 0, 300, args)


@pytest.fixture(scope="module")
def serial_sync(tracer_built, tmp_path_factory):
    """tests/programs/omp_serial_sync.c, gcc and clang."""
    return omp_builds(tmp_path_factory, "omp_serial_sync")


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_a_master_that_takes_a_critical_section_in_the_serial_part_stays_there(serial_sync, tmp_path, cc):
    """cd-hit's master takes a critical section outside any parallel region. The end of that
    wait made it "at work" in its team from then on, and its serial work (30 ms here) and
    sleep (100 ms) were judged as a team's thread's: busy-waiting and conditional waiting every
    4th step (the tracer before, gcc: critical, clang: taskwait); cd-hit beside two CPU hogs:
    conditional waiting while its master wrote the output at the run's end. After a wait in
    the runtime a thread in the serial part is there again."""
    tr, _ = record_team(serial_sync, cc, tmp_path, "central", args=[40, 0.1, 30, 100])
    assert (tr["rec"]["kind"] == BEAT).sum() > 1000
    assert not [x for x in behaviors(tr) if x["bhv"] in (BUSY, COND)], behaviors(tr)


# --------------------------------------------------------------------------- a static loop with the program's own beats


@pytest.fixture(scope="module")
def batches_tls(tracer_built, tmp_path_factory):
    """tests/programs/omp_batches.c with 4 MiB of `omp threadprivate` data per thread (NPB EP
    has 1 MiB): glibc carves a thread's static TLS out of its stack and refuses a thread whose
    stack cannot hold it, the tracer's own threads included."""
    d = tmp_path_factory.mktemp("batches_tls")
    return build_traced(ROOT / "tests" / "programs" / "omp_batches.c", d / "omp_batches_tls", "-fopenmp",
                        f"-I{ROOT / 'tests' / 'programs'}", "-DTLS_MIB=4")


@pytest.mark.parametrize("kind", ["busy", "cond"])
def test_thread_of_a_static_loop_with_its_own_beats(batches_tls, tmp_path, kind):
    """NPB EP's shape with source beats: a static loop of equal batches, a beat of the
    program's own at each, no barrier until the loop's end, large threadprivate data. A thread
    that spins or blocks between two of its beats holds nobody up for seconds, and is still
    the one whose beats stopped: reported while the fault lasts, the other thread never. (The
    monitor thread could not start in such a program -- glibc's EINVAL for a stack smaller
    than the static TLS -- and, judged at its team's pace, the victim was never blamed while
    nobody waited for it: 0 of 8 such faults of NPB EP reported.)"""
    from conftest import run_hbtool

    out = tmp_path / "rec"
    env = env_with({k: v for k, v in os.environ.items() if not k.startswith(("HBTRACE_", "OMP_"))},
                   HBTRACE_MONITOR="central", OMP_NUM_THREADS=2)
    # 150 batches of 4 ms a thread: the fault, from about 80 ms to 380 ms, ends long before
    # the loop does (600 ms), where the other thread would wait for it
    r = run_hbtool("record", "-o", out, "--inject", kind, "--thread", 1, "--beat", 20, "--inject-wait-ms", 300,
                   "--", batches_tls, 300, 4, env=env)
    assert r.returncode == 0 and "done" in r.stdout, r.stderr
    assert "cannot start" not in r.stderr, r.stderr
    tr = read_trace(next(out.glob("*.hbt")))
    assert tr["meta"]["monitor"] == "central" and tr["meta"]["monitor_beats"] == "api"
    truth = json.loads((out / "inject-truth.json").read_text())
    assert truth["fired"] and truth["thread"] == 1, json.dumps(truth)
    t0 = truth["fired_at"]["mono_ns"]
    want = BUSY if kind == "busy" else COND
    got = [d for d in behaviors(tr, 1) if d["bhv"] == want]
    assert got, behaviors(tr)
    d = got[0]
    assert t0 - 1e6 <= d["onset"] <= t0 + 1e6 and d["at"] < t0 + 300e6, (d, t0)
    assert (tr["rec"]["kind"] == BEAT)[tr["rec"]["t_ns"] > t0 + 300e6].sum() > 50  # the loop went on after it
    assert not [x for x in behaviors(tr, 1) if x["bhv"] in (BUSY, COND) and x["bhv"] != want], behaviors(tr, 1)
    assert not [x for x in behaviors(tr, 0) if x["bhv"] in (BUSY, COND)], behaviors(tr, 0)


# --------------------------------------------------------------------------- a pipeline of flags, the program's own beats


@pytest.fixture(scope="module")
def flag_buffer(tracer_built, tmp_path_factory):
    """tests/programs/flag_buffer.c: NPB LU's sweeps in small, two threads that wait for each
    other on counters in their own code, with the program's own beats."""
    d = tmp_path_factory.mktemp("flag_buffer")
    return build_traced(ROOT / "tests" / "programs" / "flag_buffer.c", d / "flag_buffer",
                        f"-I{ROOT / 'tests' / 'programs'}")


@pytest.mark.parametrize("kind", ["busy", "cond"])
def test_thread_waiting_in_its_own_code_for_a_sick_teammate_is_not_blamed(flag_buffer, tmp_path, kind):
    """Thread 1 makes each unit after thread 0 has made it, spinning on a counter (no call
    the tracer sees), a few units behind. When thread 0 spins or blocks, thread 1 makes the
    units it has and falls silent a few of its beats after, spinning: thread 0 is the one to
    report, thread 1 is not. (Before: a spinning thread 0 was never reported -- each thread's
    silence made the other's look like a slow machine -- and thread 1 was called busy-waiting
    beside a blocked thread 0, as NPB LU's threads were with gcc.)"""
    from conftest import run_hbtool

    out = tmp_path / "rec"
    env = env_with({k: v for k, v in os.environ.items() if not k.startswith("HBTRACE_")},
                   HBTRACE_MONITOR="central")
    # units of 20 and 40 us; the fault at thread 0's 5000th beat (about 0.2 s), 300 ms long
    r = run_hbtool("record", "-o", out, "--inject", kind, "--thread", 0, "--beat", 5000, "--inject-wait-ms", 300,
                   "--", flag_buffer, 20000, 0.02, 8, env=env)
    assert r.returncode == 0 and "done" in r.stdout, r.stderr
    tr = read_trace(next(out.glob("*.hbt")))
    assert tr["meta"]["monitor_beats"] == "api"
    truth = json.loads((out / "inject-truth.json").read_text())
    assert truth["fired"] and truth["thread"] == 0, json.dumps(truth)
    t0 = truth["fired_at"]["mono_ns"]
    want = BUSY if kind == "busy" else COND
    got = [d for d in behaviors(tr, 0) if d["bhv"] == want]
    # (it failed one CI run in the 37th session, not reproduced since: the message says what
    # the monitor did -- every report, and thread 0's beats around the fault)
    rec = tr["rec"]
    beats0 = np.sort(rec["t_ns"][(rec["kind"] == BEAT) & (rec["thread"] == 0)].astype(np.int64))
    near = beats0[(beats0 > t0 - 5e6) & (beats0 < t0 + 310e6)]
    assert got and t0 - 1e6 <= got[0]["onset"] <= t0 + 1e6 and got[0]["at"] < t0 + 300e6, \
        (behaviors(tr), t0, (near - t0).tolist()[-20:], tr["meta"].get("monitor_still"), out)
    during = [x for x in behaviors(tr, 1) if x["bhv"] in (BUSY, COND) and t0 - 1e6 <= x["onset"] <= t0 + 300e6]
    assert not during, (during, t0)
