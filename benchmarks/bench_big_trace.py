"""Time and peak memory of `hbtool info` and `hbtool diagnose` on big tracer traces.

    python benchmarks/bench_big_trace.py [--beats 1,20,100] [--dir DIR] [--keep]

For each size (millions of beats), 16 threads beat as fast as they can under the real
tracer (benchmarks/beat_burst.c, built here against native_tracer/lib), then `hbtool info`
and `hbtool diagnose` run on the trace as fresh processes; each command's wall time and
peak resident memory (its own rusage, from wait4) are printed, one row per size. The
traces (32 bytes a beat: 3.2 GB for 100 M) go to DIR (default: a temporary folder) and are
removed unless --keep. Targets (issue 20): info < 3 s and diagnose < 5 s at 20 M beats,
peak memory < 1 GB at every size, time linear in beats.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACER = ROOT / "native_tracer"
THREADS = 16


def build(exe: Path) -> None:
    subprocess.run(["make", "-C", str(TRACER), "-j2"], check=True, capture_output=True)
    lib = TRACER / "lib"
    subprocess.run(["gcc", "-O2", "-pthread", f"-I{TRACER / 'include'}", str(ROOT / "benchmarks" / "beat_burst.c"),
                    f"-L{lib}", f"-Wl,-rpath,{lib}", "-lhbtrace", "-o", str(exe)], check=True)


def measure(cmd: list[str]) -> tuple[float, float, int]:
    """(wall seconds, peak resident MB, exit status) of one command run as a fresh process."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_maxrss / 1024, p.returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--beats", default="1,20,100", help="sizes in millions of beats, comma-separated")
    ap.add_argument("--dir", help="where to write the traces (default: a temporary folder)")
    ap.add_argument("--keep", action="store_true", help="keep the traces")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each command (the best is shown)")
    args = ap.parse_args()
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="hbtool-big-"))
    base.mkdir(parents=True, exist_ok=True)
    exe = base / "beat_burst"
    build(exe)
    hbtool = [sys.executable, "-m", "hbtool"]
    print(f"{'beats':>6} {'file MB':>8} {'write s':>8} {'info s':>7} {'info MB':>8} {'diagnose s':>11} "
          f"{'diagnose MB':>12}")
    try:
        for m in (float(x) for x in args.beats.split(",")):
            per = int(m * 1e6 / THREADS)
            d = base / f"trace-{m:g}M"
            shutil.rmtree(d, ignore_errors=True)
            env = dict(os.environ, HBTRACE_DIR=str(d))
            env.pop("LD_PRELOAD", None)
            t0 = time.perf_counter()
            subprocess.run([str(exe), str(THREADS), str(per)], env=env, check=True)
            wrote = time.perf_counter() - t0
            (f,) = d.glob("*.hbt")
            res = {}
            for cmd in ("info", "diagnose"):
                runs = [measure(hbtool + [cmd, str(f)]) for _ in range(args.repeat)]
                bad = [r for r in runs if r[2] != 0]
                if bad:
                    sys.exit(f"hbtool {cmd} {f}: exit status {bad[0][2]}")
                res[cmd] = (min(r[0] for r in runs), max(r[1] for r in runs))
            print(f"{m:>5g}M {f.stat().st_size / 1e6:>8.0f} {wrote:>8.2f} {res['info'][0]:>7.2f} "
                  f"{res['info'][1]:>8.0f} {res['diagnose'][0]:>11.2f} {res['diagnose'][1]:>12.0f}", flush=True)
            if not args.keep:
                shutil.rmtree(d, ignore_errors=True)
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
