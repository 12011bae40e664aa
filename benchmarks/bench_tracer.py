"""Tracer benchmarks: cost of a beat beside a clock read, overhead on the instrumented
Jacobi at 1 000 and 100 000 beats/s per thread, and bytes on disk per beat.

    python benchmarks/bench_tracer.py            # after scripts/install.sh

Every figure is measured side by side in one run (interleaved), because this machine is
shared and noisy: ratios, not absolute times, are what to compare.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACER = ROOT / "native_tracer"
BIN = TRACER / "examples" / "bin"


def build_beat_cost(tmp: Path) -> Path:
    exe = tmp / "beat_cost"
    lib = TRACER / "lib"
    subprocess.run(["gcc", "-O2", "-pthread", f"-I{TRACER / 'include'}", str(ROOT / "benchmarks" / "beat_cost.c"),
                    f"-L{lib}", f"-Wl,-rpath,{lib}", "-lhbtrace", "-o", str(exe)], check=True)
    return exe


def beat_cost(exe: Path, tmp: Path, threads: int) -> dict[str, float]:
    env = dict(os.environ, HBTRACE_DIR=str(tmp / f"bc{threads}"))
    out = subprocess.run([str(exe), "--threads", str(threads), "--rounds", "15", "--calls", "300000"], env=env, capture_output=True, text=True, check=True)
    vals = {}
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2:
            try:
                vals[parts[0]] = float(parts[1])
            except ValueError:
                pass
    return vals


def run_jacobi(exe: str, size: int, beats: int, threads: int, tracedir: Path | None,
               disable: bool = False) -> tuple[float, float]:
    """(wall seconds, CPU seconds user+sys) of one run of the Jacobi example."""
    env = dict(os.environ)
    if tracedir is not None:
        env["HBTRACE_DIR"] = str(tracedir)
    if disable:
        env["HBTRACE_DISABLE"] = "1"
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([str(BIN / exe), "--threads", str(threads), "--beats", str(beats), "--size", str(size),
                    "--work", "1"], env=env, check=True, capture_output=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def beat_seconds(size: int, threads: int, rate: float) -> float:
    """Seconds per beat of the uninstrumented Jacobi (start-up cancels in the difference)."""
    short = 200
    long_ = short + max(500, int(0.5 * rate))
    a = min(run_jacobi("jacobi_omp_nohb", size, short, threads, None)[0] for _ in range(2))
    b = min(run_jacobi("jacobi_omp_nohb", size, long_, threads, None)[0] for _ in range(2))
    return max(b - a, 1e-7) / (long_ - short)


def calibrate(rate: float, threads: int, seconds: float) -> tuple[int, int]:
    """Block size (one sweep per beat) and beats giving about `rate` beats/s per thread for `seconds`."""
    size = 64
    for _ in range(10):
        per = 1.0 / beat_seconds(size, threads, rate)
        if abs(per / rate - 1) < 0.15:
            break
        step = min(4.0, max(0.25, (per / rate) ** 0.5))  # work grows as size^2; bounded steps
        size = min(4096, max(4, int(round(size * step))))
    return size, max(200, int(seconds * rate))


def overhead(rate: float, threads: int, pairs: int, tmp: Path) -> dict:
    """Traced vs the same binary with HBTRACE_DISABLE=1 (same code layout) and vs the
    binary built without heartbeats, interleaved A B C A B C ..."""
    size, beats = calibrate(rate, threads, seconds=1.0)
    runs = {"nohb": [], "off": [], "on": []}
    for i in range(pairs):
        runs["nohb"].append(run_jacobi("jacobi_omp_nohb", size, beats, threads, None))
        runs["off"].append(run_jacobi("jacobi_omp", size, beats, threads, tmp / f"off{rate}-{i}", disable=True))
        runs["on"].append(run_jacobi("jacobi_omp", size, beats, threads, tmp / f"ov{rate}-{i}"))
    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in runs.items()}
    return {"rate_target": rate, "size": size, "beats": beats, "achieved_rate": beats / med["off"][0],
            "wall_pct": 100 * (med["on"][0] / med["off"][0] - 1),
            "cpu_pct": 100 * (med["on"][1] / med["off"][1] - 1),
            "wall_vs_nohb_pct": 100 * (med["on"][0] / med["nohb"][0] - 1),
            "cpu_vs_nohb_pct": 100 * (med["on"][1] / med["nohb"][1] - 1)}


def disk_per_beat(tmp: Path) -> dict:
    d = tmp / "disk"
    beats, threads = 200_000, 2
    run_jacobi("jacobi_omp", 8, beats, threads, d)  # one sweep of an 8x8 block per beat: fast beats
    f = next(d.glob("*.hbt"))
    st = f.stat()
    total = beats * threads
    return {"beats": total, "file_bytes": st.st_size, "disk_bytes": st.st_blocks * 512,
            "bytes_per_beat": st.st_size / total, "disk_bytes_per_beat": st.st_blocks * 512 / total}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=15, help="interleaved runs per overhead figure")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as td:
        tmp = Path(td)
        exe = build_beat_cost(tmp)
        for n in (1, args.threads):
            v = beat_cost(exe, tmp, n)
            print(f"beat cost, {n} thread(s): clock_gettime {v.get('clock_ns', float('nan')):.1f} ns, "
                  f"hbt_beat {v.get('beat_ns', float('nan')):.1f} ns, legacy Generate "
                  f"{v.get('legacy_beat_ns', float('nan')):.1f} ns, beat/clock ratio {v.get('ratio', float('nan')):.2f}")
        for rate in (1_000, 100_000):
            o = overhead(rate, args.threads, args.pairs, tmp)
            print(f"overhead at {rate} beats/s/thread ({args.threads} threads, achieved {o['achieved_rate']:.0f}/s, "
                  f"{o['beats']} beats each, block {o['size']}, medians of {args.pairs} interleaved runs): "
                  f"wall {o['wall_pct']:+.2f} %, CPU {o['cpu_pct']:+.2f} % vs the same binary with HBTRACE_DISABLE=1; "
                  f"wall {o['wall_vs_nohb_pct']:+.2f} %, CPU {o['cpu_vs_nohb_pct']:+.2f} % vs the binary built "
                  f"without heartbeats")
        d = disk_per_beat(tmp)
        print(f"bytes per beat: {d['bytes_per_beat']:.1f} in the file, {d['disk_bytes_per_beat']:.1f} on disk "
              f"({d['beats']} beats, {d['file_bytes']} bytes)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
