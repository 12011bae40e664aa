#!/usr/bin/env python3
"""Cost of the automatic OpenMP beats of the libgomp wrappers (issue 15, "Tests and figures").

Prints, for NPB MG and LU (gcc -fopenmp, unmodified; class A, or W with --quick) at 2 threads:

- run-time overhead: the median wall time of interleaved rounds (the order of the three runs
  rotates each round) of the program without the tracer (baseline), with the tracer preloaded
  and HBTRACE_BEATS=none (no automatic beats), and with the tracer's default (openmp beats on);
  each median and the ratios;
- trace bytes per beat (records, and the trace file as written) of the last default run;
- what the beats and waits counted in that trace can cost at most, at the measured cost of one
  intercepted event (below): a bound that this machine's noise cannot blur;

and, measured first, the cost of one intercepted event, a chunk of a dynamically scheduled loop
(GOMP_loop_*_next, one thread, schedule(dynamic,1), 2,000,000 chunks): the extra time per chunk
with beats on as a ratio to one clock_gettime(CLOCK_MONOTONIC) measured in the same process,
median of interleaved rounds; and in the same runs the extra time of an OpenMP lock taken and
given back (omp_set_lock: a lock beat and a critical wait, three clock reads), and of an explicit
task made and run (GOMP_task's wrapper and the task's beat), also with the online monitor judging
the automatic beats (the task's unit of work for it); with --lib-before OLD.so, the same for another build of
libhbtrace.so side by side in the same rounds (before/after a change of the chunk path).

    python benchmarks/bench_openmp_beats.py            # class A: ~4 min on a quiet 2-core machine (LU A ~14 s a run), 15 min loaded
    python benchmarks/bench_openmp_beats.py --quick    # class W: ~40 s
    python benchmarks/bench_openmp_beats.py --micro-only --lib-before /tmp/libhbtrace-main.so

Runs use LD_PRELOAD and HBTRACE_* directly, as `hbtool record` sets them, so that Python's start
is not in the times.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
LIB = ROOT / "native_tracer" / "lib" / "libhbtrace.so"

MICRO = r"""
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
int main(int argc, char **argv)
{
    long n = atol(argv[1]);
    volatile long sink = 0;
    double best_loop = 1e9, best_clock = 1e9, best_lock = 1e9, best_task = 1e9;
    omp_lock_t lock;
    omp_init_lock(&lock);
    for (int rep = 0; rep < 5; rep++) {
        double a = now();
#pragma omp parallel num_threads(1)
#pragma omp for schedule(dynamic, 1)
        for (long i = 0; i < n; i++) sink += i;
        double b = now();
        struct timespec ts;
        for (long i = 0; i < n; i++) { clock_gettime(CLOCK_MONOTONIC, &ts); sink += ts.tv_nsec; }
        double c = now();
#pragma omp parallel num_threads(1)
        for (long i = 0; i < n; i++) { omp_set_lock(&lock); sink += i; omp_unset_lock(&lock); }
        double d = now();
#pragma omp parallel num_threads(1)
#pragma omp single
        for (long i = 0; i < n; i++) {
#pragma omp task
            sink += i;
        }
        double e = now();
        if (b - a < best_loop) best_loop = b - a;
        if (c - b < best_clock) best_clock = c - b;
        if (d - c < best_lock) best_lock = d - c;
        if (e - d < best_task) best_task = e - d;
    }
    printf("%.3f %.3f %.3f %.3f\n", best_loop / n * 1e9, best_clock / n * 1e9, best_lock / n * 1e9,
           best_task / n * 1e9);
    return 0;
}
"""


def env_with(lib: Path | None, beats: str | None, d: Path, threads: int) -> dict:
    """lib None: no tracer; beats None: the tracer's default (every source that applies)."""
    e = {k: v for k, v in os.environ.items() if not k.startswith(("HBTRACE_", "OMP_"))}
    e.pop("LD_PRELOAD", None)
    e["OMP_NUM_THREADS"] = str(threads)
    if lib is not None:
        e["LD_PRELOAD"] = str(lib)
        e["HBTRACE_DIR"] = str(d)
        if beats is not None:
            e["HBTRACE_BEATS"] = beats
    return e


def timed(cmd, env) -> float:
    t = time.perf_counter()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t
    assert r.returncode == 0 and "SUCCESSFUL" in r.stdout, r.stdout[-500:] + r.stderr[-500:]
    return dt


VARIANTS = [("no tracer", False, None), ("tracer, HBTRACE_BEATS=none", True, "none"),
            ("tracer, default (openmp beats)", True, None)]


def overhead(tmp: Path, kernel: str, klass: str, rounds: int, threads: int, per_event_ns: float) -> None:
    from test_openmp_beats import BEAT, SRC_OPENMP, WAIT, build_npb, records

    exe = build_npb(tmp / kernel, kernel, klass)
    times: dict = {name: [] for name, _, _ in VARIANTS}
    last = None
    for k in range(rounds):
        order = VARIANTS[k % 3:] + VARIANTS[:k % 3]
        for name, traced, beats in order:
            d = tmp / f"{kernel}-{k}-{beats}"
            times[name].append(timed([str(exe)], env_with(LIB if traced else None, beats, d, threads)))
            if traced and beats is None:
                last = d
    med = {name: statistics.median(v) for name, v in times.items()}
    base, off, on = (med[name] for name, _, _ in VARIANTS)
    print(f"NPB {kernel} class {klass}, gcc, {threads} threads, {rounds} interleaved rounds, median wall time:")
    for name, _, _ in VARIANTS:
        print(f"  {name:32s} {med[name]:8.3f} s   (runs: {' '.join(f'{x:.2f}' for x in times[name])})")
    print(f"  openmp beats / beats none: {on / off:.4f} ({100 * (on / off - 1):+.2f} %); "
          f"openmp beats / no tracer: {on / base:.4f} ({100 * (on / base - 1):+.2f} %); "
          f"beats none / no tracer: {off / base:.4f} ({100 * (off / base - 1):+.2f} %)")
    (f,) = sorted(last.glob("*.hbt"))
    rec = records(f)
    nbeats = int(((rec["kind"] == BEAT) & ((rec["flags"] & 0xF) == SRC_OPENMP)).sum())
    nrec = len(rec["kind"])
    nwait = int(((rec["kind"] == WAIT) & ((rec["flags"] & 0xF) == SRC_OPENMP)).sum())
    print(f"  trace: {nbeats} openmp beats, {nrec} records in all (beats, waits, names, lifecycle): "
          f"{nrec * 32 / nbeats:.1f} bytes of records per beat; file {f.stat().st_size} bytes, "
          f"{f.stat().st_size / nbeats:.1f} per beat")
    # what the beats can cost at most, from what was counted: every beat and wait at the
    # measured cost of one intercepted event, all on one thread's critical path
    cost = (nbeats + nwait) * per_event_ns * 1e-9
    print(f"  expected from the counts: {nbeats + nwait} beats and waits x {per_event_ns:.1f} ns = {cost * 1e3:.3f} ms, "
          f"{100 * cost / off:.4f} % of the run (at most: the threads record in parallel)")


def micro(tmp: Path, rounds: int, libs: list[tuple[str, Path]], n: int = 2_000_000) -> float:
    """Prints the cost per event (a chunk; a lock) of each library; returns the last one's chunk's, ns."""
    src = tmp / "micro.c"
    src.write_text(MICRO)
    exe = tmp / "micro"
    subprocess.run(["gcc", "-O2", "-fopenmp", str(src), "-o", str(exe)], check=True)
    modes = ("none", "openmp", "monitor")
    res: dict = {(label, beats): [] for label, _ in libs for beats in modes}
    for k in range(rounds):  # interleaved: every library, beats off, on, and judged by the monitor, each round
        runs = [(label, lib, beats) for label, lib in libs for beats in modes]
        if k % 2:
            runs.reverse()
        for label, lib, beats in runs:
            d = tmp / f"m-{label}-{beats}-{k}"
            env = env_with(lib, "openmp" if beats == "monitor" else beats, d, 1)
            if beats == "monitor":   # the online monitor judging the automatic beats (its units of work)
                env.update(HBTRACE_MONITOR="central", HBTRACE_MONITOR_BEATS="openmp")
            r = subprocess.run([str(exe), str(n)], env=env, capture_output=True, text=True, check=True)
            res[label, beats].append(tuple(map(float, r.stdout.split())))
            for f in d.glob("*.hbt"):  # 320 MB a run: keep the disk free
                f.unlink()
    print(f"one intercepted event: a dynamic-loop chunk (GOMP_loop_*_next), 1 thread, {n} chunks, "
          f"best of 5 repetitions per run, median of {rounds} interleaved rounds:")
    for label, _ in libs:
        off = statistics.median(x[0] for x in res[label, "none"])
        on = statistics.median(x[0] for x in res[label, "openmp"])
        clock = statistics.median(x[1] for x in res[label, "none"] + res[label, "openmp"])
        ratios = [(a[0] - b[0]) / ((a[1] + b[1]) / 2) for a, b in zip(res[label, "openmp"], res[label, "none"])]
        chunk_cost = on - off
        print(f"  {label:8s}: {off:.1f} ns per chunk with beats none, {on:.1f} ns with openmp beats: "
              f"+{on - off:.1f} ns per event = {(on - off) / clock:.2f}x one clock read ({clock:.1f} ns); "
              f"per round: {' '.join(f'{x:.2f}' for x in ratios)}")
    print(f"an OpenMP lock taken and given back (omp_set_lock, omp_unset_lock), 1 thread, {n} times, the same runs:")
    for label, _ in libs:
        off = statistics.median(x[2] for x in res[label, "none"])
        on = statistics.median(x[2] for x in res[label, "openmp"])
        clock = statistics.median(x[1] for x in res[label, "none"] + res[label, "openmp"])
        print(f"  {label:8s}: {off:.1f} ns per lock with beats none, {on:.1f} ns with openmp beats (a lock beat and "
              f"a critical wait): +{on - off:.1f} ns = {(on - off) / clock:.2f}x one clock read")
    print(f"an explicit task made and run (#pragma omp task in a team of one), {n} tasks, the same runs:")
    for label, _ in libs:
        off = statistics.median(x[3] for x in res[label, "none"])
        on = statistics.median(x[3] for x in res[label, "openmp"])
        mon = statistics.median(x[3] for x in res[label, "monitor"])
        clock = statistics.median(x[1] for x in res[label, "none"] + res[label, "openmp"])
        print(f"  {label:8s}: {off:.1f} ns per task with beats none, {on:.1f} ns with openmp beats (+{on - off:.1f} ns"
              f" = {(on - off) / clock:.2f}x one clock read), {mon:.1f} ns with the monitor judging them (its unit of "
              f"work: +{mon - on:.1f} ns)")
    return chunk_cost


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="class W instead of A")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--kernels", default="MG,LU")
    ap.add_argument("--lib-before", type=Path, help="another libhbtrace.so whose chunk path to measure beside this one")
    ap.add_argument("--micro-only", action="store_true", help="only the cost per intercepted event")
    a = ap.parse_args()
    subprocess.run(["make", "-C", str(ROOT / "native_tracer"), "-j2"], check=True, capture_output=True)
    klass = "W" if a.quick else "A"
    print(f"load before: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} (1, 5, 15 min); "
          f"{os.cpu_count()} CPUs")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        libs = ([("before", a.lib_before.resolve())] if a.lib_before else []) + [("this", LIB)]
        per_event = micro(tmp, max(a.rounds, 5), libs)
        if not a.micro_only:
            for kernel in a.kernels.split(","):
                overhead(tmp, kernel.strip().upper(), klass, a.rounds, a.threads, per_event)
    print(f"load after: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}; "
          f"took {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
