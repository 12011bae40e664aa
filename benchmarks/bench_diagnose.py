"""End-to-end speed of `hbtool diagnose` on 64 threads x 16 000 beats (target: < 3 s warm).

    python benchmarks/bench_diagnose.py

Writes a synthetic trace in the tracer's binary format (64 threads, 16 000 beats each,
two of them anomalous), runs `hbtool diagnose --timings` as a fresh process three times
(the first may compile or load the numba cache), and prints the wall time of each run
and the share of each stage of the last one.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from hbtool.io import write_heartbeats
from hbtool.model import HeartbeatTrace

THREADS, BEATS = 64, 16_000


def synthetic() -> HeartbeatTrace:
    rng = np.random.default_rng(42)
    frames = []
    for k in range(THREADS):
        dt = rng.gamma(20, 1e-3 / 20, BEATS)          # ~1000 beats/s with jitter
        if k == 5:
            dt[BEATS // 2:] *= np.linspace(1, 4, BEATS - BEATS // 2)   # slows down: a leak
        n = BEATS // 3 if k == 9 else BEATS            # stops early: a shutdown
        t_ns = (np.cumsum(dt[:n]) * 1e9).astype(np.int64)
        frames.append(pd.DataFrame({"run": "bench", "process": 0, "thread": k, "seq": np.arange(n),
                                    "t_ns": t_ns, "t": t_ns / 1e9, "loop": 1, "iteration": np.arange(n),
                                    "tag": 0, "os_tid": 10_000 + k}))
    return HeartbeatTrace(beats=pd.concat(frames, ignore_index=True))


def main() -> None:
    with tempfile.TemporaryDirectory() as td:
        path = Path(td) / "bench.hbt"
        write_heartbeats(synthetic(), str(path))
        cmd = [sys.executable, "-m", "hbtool", "diagnose", "--timings", "--format", "json", str(path)]
        for i in range(3):
            t0 = time.perf_counter()
            r = subprocess.run(cmd, capture_output=True, text=True, check=True)
            wall = time.perf_counter() - t0
            print(f"run {i + 1}: {wall:.2f} s end to end ({THREADS} threads x {BEATS} beats)")
        stages = [line for line in r.stderr.splitlines() if "timings" in line]
        print(stages[-1].replace("hbtool: timings: ", "stages of the last run: "))
        import json

        doc = json.loads(r.stdout)
        flagged = sorted((t["thread"], t["status"]) for t in doc["threads"] if t["status"] != "normal")
        print(f"threads not normal: {flagged} (injected: 5 memoryleak, 9 shutdown)")


if __name__ == "__main__":
    main()
