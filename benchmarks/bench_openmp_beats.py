#!/usr/bin/env python3
"""Cost of the automatic OpenMP beats of the libgomp wrappers (issue 15).

Prints: the run-time overhead on NPB MG (class W by default) at 2 threads, median of
interleaved runs with the tracer preloaded and HBTRACE_BEATS=openmp versus HBTRACE_BEATS=api
(tracer loaded, no automatic beats); the cost of one intercepted event (a chunk of a dynamic
loop: GOMP_loop_*_next) as a ratio to one clock read measured in the same run; trace bytes
per beat.

    python benchmarks/bench_openmp_beats.py [--class W|A] [--runs 7]
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
    double best_loop = 1e9, best_clock = 1e9;
    for (int rep = 0; rep < 5; rep++) {
        double a = now();
#pragma omp parallel num_threads(1)
#pragma omp for schedule(dynamic, 1)
        for (long i = 0; i < n; i++) sink += i;
        double b = now();
        struct timespec ts;
        for (long i = 0; i < n; i++) { clock_gettime(CLOCK_MONOTONIC, &ts); sink += ts.tv_nsec; }
        double c = now();
        if (b - a < best_loop) best_loop = b - a;
        if (c - b < best_clock) best_clock = c - b;
    }
    printf("%.3f %.3f\n", best_loop / n * 1e9, best_clock / n * 1e9);
    return 0;
}
"""


def env_with(beats: str | None, d: Path, threads: int) -> dict:
    e = {k: v for k, v in os.environ.items() if not k.startswith("HBTRACE_")}
    e["OMP_NUM_THREADS"] = str(threads)
    e["HBTRACE_DIR"] = str(d)
    if beats is not None:
        e["LD_PRELOAD"] = str(LIB)
        e["HBTRACE_BEATS"] = beats
    return e


def timed(cmd, env) -> float:
    t = time.perf_counter()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t
    assert r.returncode == 0 and "SUCCESSFUL" in r.stdout, r.stdout[-500:] + r.stderr[-500:]
    return dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--class", dest="klass", default="W")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    subprocess.run(["make", "-C", str(ROOT / "native_tracer"), "-j2"], check=True, capture_output=True)
    from test_openmp_beats import build_npb, records, BEAT, SRC_OPENMP  # noqa: E402

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        exe = build_npb(tmp, "MG", a.klass)
        on, off = [], []
        for k in range(a.runs):  # interleaved, the order alternating
            for beats, out in (("openmp", on), ("api", off)) if k % 2 == 0 else (("api", off), ("openmp", on)):
                d = tmp / f"t{k}{beats}"
                out.append(timed([str(exe)], env_with(beats, d, a.threads)))
        m_on, m_off = statistics.median(on), statistics.median(off)
        print(f"NPB MG class {a.klass}, {a.threads} threads, {a.runs} interleaved runs each:")
        print(f"  median with openmp beats {m_on:.3f} s, without {m_off:.3f} s: "
              f"overhead {100 * (m_on / m_off - 1):+.2f} %")
        # bytes per beat, from the last traced run
        f = next((tmp / f"t{a.runs - 1}openmp").glob("*.hbt"), None) or next((tmp / "t0openmp").glob("*.hbt"))
        rec = records(f)
        beats = int(((rec["kind"] == BEAT) & ((rec["flags"] & 0xF) == SRC_OPENMP)).sum())
        used = len(rec["kind"]) * 32
        print(f"  {beats} openmp beats, {len(rec['kind'])} records in all: {used / beats:.1f} bytes of "
              f"records per beat (file {f.stat().st_size} bytes, {f.stat().st_size / beats:.1f} per beat)")
        # one intercepted event versus one clock read
        src = tmp / "micro.c"
        src.write_text(MICRO)
        micro = tmp / "micro"
        subprocess.run(["gcc", "-O2", "-fopenmp", str(src), "-o", str(micro)], check=True)
        n = 2_000_000
        res = {}
        for beats in ("api", "openmp"):
            r = subprocess.run([str(micro), str(n)], env=env_with(beats, tmp / f"m{beats}", 1),
                               capture_output=True, text=True, check=True)
            res[beats] = tuple(map(float, r.stdout.split()))
        extra = res["openmp"][0] - res["api"][0]
        clock = (res["openmp"][1] + res["api"][1]) / 2
        print(f"  dynamic chunk (GOMP_loop_*_next): {res['api'][0]:.1f} ns without beats, "
              f"{res['openmp'][0]:.1f} ns with: +{extra:.1f} ns per event = {extra / clock:.2f}x "
              f"one clock read ({clock:.1f} ns)")


if __name__ == "__main__":
    main()
