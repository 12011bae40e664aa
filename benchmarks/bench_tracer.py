"""Tracer benchmarks: cost of a beat beside a clock read, overhead on the instrumented
Jacobi at 1 000 and 100 000 beats/s per thread, and bytes on disk per beat.

    python benchmarks/bench_tracer.py            # after scripts/install.sh

Every figure is measured side by side in one run (interleaved), because this machine is
shared and noisy: ratios, not absolute times, are what to compare.
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


def run_jacobi(exe: str, size: int, beats: int, threads: int, tracedir: Path | None) -> float:
    env = dict(os.environ)
    if tracedir is not None:
        env["HBTRACE_DIR"] = str(tracedir)
    t0 = time.perf_counter()
    subprocess.run([str(BIN / exe), "--threads", str(threads), "--beats", str(beats), "--size", str(size)],
                   env=env, check=True, capture_output=True)
    return time.perf_counter() - t0


def calibrate(rate: float, threads: int, seconds: float) -> tuple[int, int]:
    """Block size and beats that give about `rate` beats/s per thread for `seconds`."""
    size = 8
    while True:
        beats = 200
        dt = run_jacobi("jacobi_omp_nohb", size, beats, threads, None)
        per = beats / dt
        if per <= rate * 1.15 or size > 4096:
            break
        size = int(size * max(1.1, (per / rate) ** 0.5))
    beats = max(200, int(seconds * rate))
    return size, beats


def overhead(rate: float, threads: int, pairs: int, tmp: Path) -> dict:
    size, beats = calibrate(rate, threads, seconds=1.0)
    base, inst = [], []
    for i in range(pairs):  # interleaved: A B A B ...
        base.append(run_jacobi("jacobi_omp_nohb", size, beats, threads, None))
        d = tmp / f"ov{rate}-{i}"
        inst.append(run_jacobi("jacobi_omp", size, beats, threads, d))
    b, t = statistics.median(base), statistics.median(inst)
    ratios = [y / x - 1 for x, y in zip(base, inst)]
    return {"rate_target": rate, "size": size, "beats": beats, "achieved_rate": beats / b,
            "base_s": b, "traced_s": t, "overhead_pct": 100 * (t / b - 1),
            "pairwise_median_pct": 100 * statistics.median(ratios)}


def disk_per_beat(tmp: Path) -> dict:
    d = tmp / "disk"
    beats, threads = 200_000, 2
    run_jacobi("jacobi_omp", 8, beats, threads, d)
    f = next(d.glob("*.hbt"))
    st = f.stat()
    total = beats * threads
    return {"beats": total, "file_bytes": st.st_size, "disk_bytes": st.st_blocks * 512,
            "bytes_per_beat": st.st_size / total, "disk_bytes_per_beat": st.st_blocks * 512 / total}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=9, help="interleaved runs per overhead figure")
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
                  f"{o['beats']} beats each, median of {args.pairs} interleaved pairs): "
                  f"{o['overhead_pct']:+.2f} % (pairwise median {o['pairwise_median_pct']:+.2f} %)")
        d = disk_per_beat(tmp)
        print(f"bytes per beat: {d['bytes_per_beat']:.1f} in the file, {d['disk_bytes_per_beat']:.1f} on disk "
              f"({d['beats']} beats, {d['file_bytes']} bytes)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
