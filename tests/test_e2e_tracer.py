"""End to end: the real tracer on the real example programs, real threads, real deaths."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from hbtool.analyzers.summary import summarize_threads
from hbtool.io import read_heartbeats
from hbtool.io.hbt import read_hbt_file

from conftest import EXAMPLES, TRACER, hbtool_here, run_hbtool

pytestmark = pytest.mark.usefixtures("tracer_built")


def run_example(name, env, *args, timeout=120):
    return subprocess.run([str(EXAMPLES / name), *map(str, args)], env=env, capture_output=True,
                          text=True, timeout=timeout)


def trace_of(env) -> tuple:
    """The files and the trace of a run, with the beats an analysis uses (the programs' own,
    beside which the tracer records OpenMP beats of its own)."""
    d = Path(env["HBTRACE_DIR"])
    files = sorted(d.glob("*.hbt"))
    return files, read_heartbeats(d).with_beats("auto")


def per_thread(tr):
    return tr.beats.groupby("thread").size().to_dict()


def test_openmp_jacobi_normal(traced_env):
    r = run_example("jacobi_omp", traced_env, "--threads", 4, "--beats", 150, "--size", 48)
    assert r.returncode == 0, r.stderr
    files, tr = trace_of(traced_env)
    assert len(files) == 1
    assert per_thread(tr) == {0: 150, 1: 150, 2: 150, 3: 150}
    for _, g in tr.threads():
        assert (np.diff(g["seq"]) == 1).all() and (np.diff(g["t_ns"]) >= 0).all()
        assert g["loop"].unique().tolist() == [1]
    assert len(set(tr.beats["os_tid"])) == 4  # four real OS threads
    ex = tr.events[tr.events["kind"] == "process_exit"]
    assert ex["detail"].tolist() == [0]
    assert "init" in set(tr.events["kind"]) and "finished" in set(tr.events["kind"])
    meta = tr.runs[next(iter(tr.runs))]["processes"][0]
    assert meta["clock"] == "CLOCK_MONOTONIC" and meta["pid"] > 0 and meta["lost_records"] == 0


def test_pthread_workers_return_normally(traced_env):
    r = run_example("pi_pthread", traced_env, "--threads", 3, "--beats", 100, "--work", 2000)
    assert r.returncode == 0, r.stderr
    _, tr = trace_of(traced_env)
    assert per_thread(tr) == {0: 100, 1: 100, 2: 100}
    s = summarize_threads(tr).set_index("thread")
    assert s["ending"].tolist() == ["returned"] * 3
    starts = tr.events[tr.events["kind"] == "thread_start"]
    assert len(starts) >= 4  # main thread + 3 workers


def test_modern_api_matmul(traced_env):
    r = run_example("matmul_pthread", traced_env, "--threads", 2, "--beats", 40)
    assert r.returncode == 0, r.stderr
    files, tr = trace_of(traced_env)
    assert per_thread(tr) == {0: 40, 1: 40}
    assert read_hbt_file(files[0])["meta"].get("name") == "matmul"


def test_one_thread_shutdown_others_run_to_the_end(traced_env, tmp_path):
    truth = tmp_path / "truth.json"
    r = run_example("pi_pthread", traced_env, "--threads", 4, "--beats", 120, "--work", 2000,
                    "--inject", "shutdown", "--shutdown-mode", "thread", "--inject-thread", 2,
                    "--inject-beat", 30, "--truth", truth)
    assert r.returncode == 0, r.stderr
    _, tr = trace_of(traced_env)
    counts = per_thread(tr)
    assert counts[2] == 31 and counts[0] == counts[1] == counts[3] == 120
    s = summarize_threads(tr).set_index("thread")
    assert s.loc[2, "ending"] == "pthread_exit"
    t = json.loads(truth.read_text())
    assert (t["inject"], t["thread"], t["beat"]) == ("shutdown", 2, 30)


def test_worker_calls_exit_1(traced_env):
    # default work per beat (~0.5 ms): the other threads are mid-run when thread 1 exits
    r = run_example("pi_pthread", traced_env, "--threads", 4, "--beats", 400,
                    "--inject", "shutdown", "--shutdown-mode", "exit", "--inject-thread", 1,
                    "--inject-beat", 20)
    assert r.returncode == 1
    _, tr = trace_of(traced_env)
    ex = tr.events[tr.events["kind"] == "process_exit"].sort_values("t_ns")
    # the exit() call (flag 2: the exit handlers begin), then the process's end after them
    assert ex["detail"].tolist() == [1, 1] and ex["flags"].tolist() == [2, 0]
    worker1 = set(tr.beats.loc[tr.beats["thread"] == 1, "os_tid"])
    assert set(ex["os_tid"]) == worker1  # recorded by the worker that called exit
    assert per_thread(tr)[1] == 21
    s = summarize_threads(tr).set_index("thread")
    assert s.loc[1, "ended"] == "called exit(1)" and s.loc[1, "ending"] == "exit"
    assert s.loc[0, "ended"] == "ended by exit(1) in another thread" and s.loc[0, "ending"] == "process_exit"
    assert s["abnormal"].all()


@pytest.mark.parametrize("mode,signo", [("abort", signal.SIGABRT), ("segv", signal.SIGSEGV)])
def test_crash_leaves_readable_trace_and_same_status(traced_env, mode, signo):
    r = run_example("pi_pthread", traced_env, "--threads", 2, "--beats", 400, "--work", 2000,
                    "--inject", "shutdown", "--shutdown-mode", mode, "--inject-thread", 0,
                    "--inject-beat", 25)
    assert r.returncode == -signo
    _, tr = trace_of(traced_env)
    assert per_thread(tr)[0] == 26
    sig = tr.events[tr.events["kind"] == "signal"]
    assert sig["detail"].tolist() == [int(signo)]
    s = summarize_threads(tr).set_index("thread")
    assert s.loc[0, "ending"] == "signal"
    assert s.loc[0, "ended"] == f"killed by {signo.name}"


@pytest.mark.alone  # races with a running program: its timing matters
def test_sigkill_mid_run_keeps_every_beat_older_than_100ms(traced_env):
    p = subprocess.Popen([str(EXAMPLES / "pi_pthread"), "--threads", "2", "--beats", "1000000",
                          "--work", "20000"], env=traced_env)
    d = Path(traced_env["HBTRACE_DIR"])
    try:
        deadline = time.time() + 30
        while time.time() < deadline and not list(d.glob("*.hbt")):
            time.sleep(0.05)
        time.sleep(0.5)
        f = next(d.glob("*.hbt"))
        before = read_hbt_file(f)["records"]
        seen = {tid: int((before["kind"][before["os_tid"] == tid] == 1).sum()) for tid in set(before["os_tid"].tolist())}
        time.sleep(0.1)
        p.kill()
        assert p.wait(timeout=10) == -signal.SIGKILL
    finally:
        if p.poll() is None:
            p.kill()
    tr = read_heartbeats(d)
    assert sum(seen.values()) > 0
    for tid, n in seen.items():
        got = tr.beats[tr.beats["os_tid"] == tid]
        assert len(got) >= n  # every beat recorded before the snapshot survived the kill
        assert (np.diff(got["seq"]) == 1).all()
    s = summarize_threads(tr)
    assert set(s["ending"]) == {"no_end_record"}
    assert tr.events[tr.events["kind"].isin(["process_exit", "signal"])].empty


def test_exit_status_unchanged_by_tracer(tracer_built, tmp_path):
    """The same program with and without the tracer ends the same way."""
    lib = TRACER / "lib" / "libhbtrace.so"
    prog = [str(EXAMPLES / "jacobi_omp_nohb"), "--threads", "2", "--beats", "30", "--size", "32",
            "--inject", "shutdown", "--shutdown-mode", "exit", "--inject-thread", "1", "--inject-beat", "5"]
    plain = subprocess.run(prog, capture_output=True, timeout=60)
    env = dict(os.environ, LD_PRELOAD=str(lib), HBTRACE_DIR=str(tmp_path / "t"))
    traced = subprocess.run(prog, capture_output=True, env=env, timeout=60)
    assert plain.returncode == traced.returncode == 1


def test_record_preload_sees_threads_of_an_uninstrumented_program(tracer_built, tmp_path):
    code = ("import threading, sys\n"
            "def work(): sum(range(10000))\n"
            "ts = [threading.Thread(target=work) for _ in range(3)]\n"
            "[t.start() for t in ts]; [t.join() for t in ts]\n"
            "sys.exit(3)\n")
    out = tmp_path / "rec"
    r = run_hbtool("record", "-o", out, "--", sys.executable, "-c", code)
    assert r.returncode == 3
    assert f"trace written to {out}/" in r.stderr and "exited with status 3" in r.stderr
    tr = read_heartbeats(out)
    ev = tr.events
    # the main thread and the three it started; CPython's Thread.join returns before the OS thread does, so a
    # thread may still be in its start routine at exit and leave no end of its own
    assert len(ev[ev["kind"] == "thread_start"]) == 4
    assert (ev.loc[ev["kind"] == "thread_end", "detail"] == 0).all()
    ex = ev[ev["kind"] == "process_exit"].sort_values("t_ns")
    assert ex["detail"].tolist() == [3, 3] and ex["flags"].tolist() == [2, 0]  # exit() called; the end
    assert tr.runs["rec"]["processes"][0]["preload"] is True


def test_record_passes_signal_status_and_missing_program(tracer_built, tmp_path):
    r = run_hbtool("record", "-o", tmp_path / "a", "--", str(EXAMPLES / "pi_pthread"), "--threads", "1",
                   "--beats", "200", "--inject", "shutdown", "--shutdown-mode", "abort",
                   "--inject-thread", "0", "--inject-beat", "3")
    assert r.returncode == 128 + signal.SIGABRT
    assert "killed by SIGABRT" in r.stderr
    r = run_hbtool("record", "-o", tmp_path / "b", "--", str(tmp_path / "no-such-program"))
    assert r.returncode == 127 and "command not found" in r.stderr and "Traceback" not in r.stderr


def test_single_threaded_program_without_beats_leaves_no_file(tracer_built, tmp_path):
    r = run_hbtool("record", "-o", tmp_path / "c", "--", "sh", "-c", "exit 0")
    assert r.returncode == 0
    assert list((tmp_path / "c").glob("*.hbt")) == []
    assert "no trace written" in r.stderr


def test_record_refuses_a_folder_that_holds_a_trace_unless_forced(tracer_built, tmp_path):
    out = tmp_path / "t"
    prog = [str(EXAMPLES / "pi_pthread"), "--threads", "2", "--beats", "50", "--work", "1000"]
    assert run_hbtool("record", "-o", out, "--", *prog).returncode == 0
    first = sorted(out.glob("*.hbt"))
    r = run_hbtool("record", "-o", out, "--", *prog)
    assert r.returncode == 2
    assert r.stderr == (f"hbtool: error: {out} already holds a trace (1 file); record into another folder "
                        f"with -o, or add --force to delete it first\n")
    assert sorted(out.glob("*.hbt")) == first  # nothing lost
    r = run_hbtool("record", "--force", "-o", out, "--", *prog, "--threads", "3")
    assert r.returncode == 0
    assert len(list(out.glob("*.hbt"))) == 1 and not set(out.glob("*.hbt")) & set(first)
    assert read_heartbeats(out).beats["thread"].nunique() == 3


def test_record_counts_threads_as_info_does(tracer_built, tmp_path):
    out = tmp_path / "t"
    r = run_hbtool("record", "-o", out, "--", str(EXAMPLES / "pi_pthread"), "--threads", "2", "--beats", "50",
                   "--work", "1000")
    assert r.returncode == 0
    assert r.stderr.splitlines()[-1] == f"hbtool: trace written to {out}/ (1 file, 3 threads (2 with beats), 100 api beats)"
    info = hbtool_here("info", out)
    assert ", 3 threads (2 with beats), 100 api beats," in info.stdout
    code = "import threading\nts=[threading.Thread(target=sum, args=([1],)) for _ in range(3)]\n" \
           "[t.start() for t in ts]; [t.join() for t in ts]\n"
    r = run_hbtool("record", "-o", tmp_path / "u", "--", sys.executable, "-c", code)
    # the main thread and the three it started
    assert r.stderr.splitlines()[-1] == f"hbtool: trace written to {tmp_path / 'u'}/ (1 file, 4 threads (0 with beats), 0 beats)"


def test_record_bad_folder_exits_2_and_default_folder_is_not_left_empty(tracer_built, tmp_path):
    r = run_hbtool("record", "-o", "/proc/hbtool-forbidden/t", "--", "true")
    assert r.returncode == 2
    assert r.stderr.startswith("hbtool: error: cannot create the trace folder /proc/hbtool-forbidden/t: ")
    assert len(r.stderr.splitlines()) == 1
    r = run_hbtool("record", "--", "sh", "-c", "exit 0", cwd=tmp_path)
    assert r.returncode == 0 and "no trace written" in r.stderr
    r = run_hbtool("record", "--", str(tmp_path / "no-such-program"), cwd=tmp_path)
    assert r.returncode == 127
    assert list(tmp_path.iterdir()) == []


def test_forked_child_gets_its_own_file(tracer_built, tmp_path):
    code = ("import os, threading\n"
            "t = threading.Thread(target=lambda: None); t.start(); t.join()\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    t = threading.Thread(target=lambda: None); t.start(); t.join(); os._exit(7)\n"
            "_, st = os.waitpid(pid, 0)\n"
            "raise SystemExit(os.waitstatus_to_exitcode(st))\n")
    out = tmp_path / "fork"
    r = run_hbtool("record", "-o", out, "--", sys.executable, "-c", code)
    assert r.returncode == 7
    files = sorted(out.glob("*.hbt"))
    assert len(files) == 2
    pids = {read_hbt_file(f)["header"]["pid"] for f in files}
    assert len(pids) == 2
    exits = []
    for f in files:
        rec = read_hbt_file(f)["records"]
        ex = rec["kind"] == 6
        exits.append(sorted((int(a), int(fl)) for a, fl in zip(rec["aux"][ex], rec["flags"][ex])))
    # the child's _exit(7) (flag 1) and the parent's exit(7) (its call, flag 2, and its end),
    # each in its own file
    assert sorted(exits) == [[(7, 0), (7, 2)], [(7, 1)]], exits


def test_unwritable_trace_dir_warns_once_and_program_runs(tracer_built, tmp_path):
    env = dict(os.environ, HBTRACE_DIR="/proc/hbtool-cannot-write-here")
    r = run_example("pi_pthread", env, "--threads", 2, "--beats", 20, "--work", 1000)
    assert r.returncode == 0
    warn = [line for line in r.stderr.splitlines() if "hbtrace" in line]
    assert len(warn) == 1 and "tracing disabled" in warn[0]


def test_a_trace_of_lifecycle_records_only_shows_its_threads_and_their_fate(tracer_built, tmp_path):
    # C, not Python: CPython's threads are detached, and Thread.join returns before the OS thread does, so
    # its last thread may still be in its start routine when the main thread calls exit
    src = tmp_path / "three.c"
    src.write_text("#include <pthread.h>\n"
                   "static void *work(void *a) { return a; }\n"
                   "int main(void) { pthread_t t[3];\n"
                   "  for (int i = 0; i < 3; i++) pthread_create(&t[i], 0, work, 0);\n"
                   "  for (int i = 0; i < 3; i++) pthread_join(t[i], 0);\n"
                   "  return 0; }\n")
    exe = tmp_path / "three"
    subprocess.run(["gcc", "-pthread", str(src), "-o", str(exe)], check=True)
    out = tmp_path / "t"
    assert run_hbtool("record", "-o", out, "--", exe).returncode == 0
    info = hbtool_here("info", out).stdout.splitlines()
    assert info[0].endswith(", 1 process, 4 threads (0 with beats), 0 beats, clock CLOCK_MONOTONIC")
    ended = [line.split(None, 7)[7] for line in info[3:]]
    assert ended == ["called exit(0)", "returned", "returned", "returned"]
    beh = hbtool_here("behavior", out)
    assert beh.returncode == 0, beh.stderr
    lines = beh.stdout.splitlines()
    assert lines[:2] == ["4 threads; found: nothing unusual; 4 exited normally", "beats: none"]
    assert sum(line == f"  thread {k}: no beats" for k in range(4) for line in lines) == 4


def test_a_statically_linked_program_runs_and_record_says_it_cannot_be_traced(tmp_path):
    src = tmp_path / "st.c"
    src.write_text('#include <stdio.h>\nint main(void) { puts("static hello"); return 3; }\n')
    exe = tmp_path / "st"
    subprocess.run(["gcc", "-static", str(src), "-o", str(exe)], check=True)
    r = run_hbtool("record", "-o", tmp_path / "t", "--", exe)
    assert r.returncode == 3 and r.stdout == "static hello\n"
    # one line, before the program runs, and nothing after it that says it again
    assert r.stderr.splitlines() == [
        f"hbtool: warning: {exe} is statically linked: the tracer cannot be loaded into it, so nothing will be "
        f"recorded (link it dynamically to trace it)",
    ]
    assert not (tmp_path / "t").exists()


@pytest.mark.alone  # races with a running program: its timing matters
def test_sigkill_in_the_middle_of_a_parallel_region_leaves_a_readable_trace(tracer_built, tmp_path):
    env = dict(os.environ, LD_PRELOAD=str(TRACER / "lib" / "libhbtrace.so"), HBTRACE_DIR=str(tmp_path / "t"),
               OMP_NUM_THREADS="2")
    proc = subprocess.Popen([str(EXAMPLES / "heat_omp"), "--threads", "2", "--steps", "100000", "--size", "128"],
                            env=env, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # until the trace holds openmp beats of both threads
            files = list((tmp_path / "t").glob("*.hbt"))
            # the tracer creates the file, then writes its header: a poll may come in between
            if files and files[0].read_bytes()[:8] == b"HBTRACE\0" and \
                    len(read_heartbeats(tmp_path / "t").beats.groupby("thread")) == 2:
                break
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait()
    tr = read_heartbeats(tmp_path / "t")
    assert set(tr.beats["source"]) == {"openmp"} and tr.beats.groupby("thread").size().min() > 0
    s = summarize_threads(tr)
    assert set(s["ending"]) == {"no_end_record"}
    assert not [w for w in tr.warnings if "skipped" in w]
