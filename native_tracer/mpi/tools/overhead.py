#!/usr/bin/env python3
"""Overhead of libhbprof: interleaved runs of an example with and without LD_PRELOAD.

    python3 native_tracer/mpi/tools/overhead.py [--runs 5] [--np 4] [--iterations 300] [--work 350]

Prints, for each configuration, the median of the program's own time (the loop,
as the example prints it) and of the whole mpirun (start-up, the loop, and the
profiler's finalize step that writes the run file), and the dilation in %.
Runs alternate (bare, profiled, bare, ...) so that drifts of the machine hit
both series alike. Build first: make -C native_tracer/mpi.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def one(prog: Path, np_: int, args: list[str], preload: bool, workdir: str) -> tuple[float, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HBPROF_") and k != "LD_PRELOAD"}
    cmd = ["mpirun", "--oversubscribe", "--allow-run-as-root", "-np", str(np_)]
    if preload:
        cmd += ["-x", f"LD_PRELOAD={HERE / 'lib' / 'libhbprof.so'}", "-x", f"HBPROF_DIR={workdir}"]
    cmd += [str(prog), *args]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=600, check=False)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"run failed:\n{r.stdout}\n{r.stderr}")
    m = re.search(r"time=([0-9.]+) s", r.stdout)
    for p in Path(workdir).glob("hbprof-*"):
        p.unlink()
    return float(m.group(1)), wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--np", type=int, default=4)
    ap.add_argument("--program", default="stencil")
    ap.add_argument("--iterations", type=int, default=300)
    ap.add_argument("--work", type=int, default=350)
    ap.add_argument("--extra", default="--checkpoint-every 50 --heavy-every 10",
                    help="further example options (default: %(default)s)")
    a = ap.parse_args()
    prog = HERE / "examples" / "bin" / a.program
    args = ["--iterations", str(a.iterations), "--work", str(a.work), *a.extra.split()]
    res: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as d:
        one(prog, a.np, args, False, d)  # warm-up
        for _ in range(a.runs):
            for pre in (False, True):
                res[pre].append(one(prog, a.np, args, pre, d))
    print(f"{a.program} {' '.join(args)}  np={a.np}  runs={a.runs} each, interleaved")
    med = {}
    for pre in (False, True):
        loop = statistics.median(x for x, _ in res[pre])
        wall = statistics.median(y for _, y in res[pre])
        med[pre] = (loop, wall)
        rate = a.iterations / loop
        print(f"  {'profiled' if pre else 'bare    '}: loop {loop:.3f} s ({rate:.0f} collectives/s), "
              f"mpirun {wall:.3f} s   loops: {' '.join(f'{x:.3f}' for x, _ in res[pre])}")
    print(f"  dilation: loop {100 * (med[True][0] / med[False][0] - 1):+.2f} %, "
          f"mpirun {100 * (med[True][1] / med[False][1] - 1):+.2f} %")


if __name__ == "__main__":
    main()
