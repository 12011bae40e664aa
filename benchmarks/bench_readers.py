"""Reader throughput in beats/s for the binary, csv, xlsx and parquet formats.

    python benchmarks/bench_readers.py

The same synthetic trace (16 threads) is written in each format by hbtool's writers,
then read back with read_heartbeats; the best of 3 reads is reported. The xlsx file is
smaller (an xlsx sheet is slow to write and holds at most ~1 M rows); openpyxl's own
read_only reader is timed beside hbtool's (calamine) on the same workbook.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from hbtool.io import read_heartbeats, write_heartbeats
from hbtool.model import HeartbeatTrace


def synthetic(threads: int, beats: int) -> HeartbeatTrace:
    rng = np.random.default_rng(0)
    frames = []
    for k in range(threads):
        t = np.cumsum(rng.exponential(1e-3, beats))
        t_ns = (t * 1e9).astype(np.int64)
        frames.append(pd.DataFrame({"run": "bench", "process": 0, "thread": k, "seq": np.arange(beats),
                                    "t_ns": t_ns, "t": t_ns / 1e9, "loop": 1, "iteration": np.arange(beats),
                                    "tag": 0, "os_tid": 5000 + k}))
    return HeartbeatTrace(beats=pd.concat(frames, ignore_index=True))


def best_of(fn, n=3) -> float:
    best = float("inf")
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def openpyxl_read(path: Path) -> int:
    from openpyxl import load_workbook

    wb = load_workbook(path, read_only=True)
    n = sum(1 for ws in wb.worksheets for _ in ws.iter_rows(values_only=True))
    wb.close()
    return n


def main() -> None:
    big = synthetic(16, 62_500)    # 1 000 000 beats
    small = synthetic(16, 6_250)   # 100 000 beats
    with tempfile.TemporaryDirectory() as td:
        tmp = Path(td)
        for fmt, trace in (("hbt", big), ("csv", big), ("parquet", big), ("xlsx", small)):
            path = tmp / f"t.{fmt}"
            write_heartbeats(trace, str(path))
            n = len(trace.beats)
            assert len(read_heartbeats(path).beats) == n
            dt = best_of(lambda: read_heartbeats(path))
            print(f"read {fmt:8s}: {n / dt / 1e6:8.3f} M beats/s  ({n} beats in {dt:.3f} s, "
                  f"{path.stat().st_size / n:.1f} bytes/beat)")
        path = tmp / "t.xlsx"
        dt = best_of(lambda: openpyxl_read(path), n=1)
        print(f"read xlsx with openpyxl read_only (anchor, same file): {len(small.beats) / dt / 1e6:8.3f} M rows/s")


if __name__ == "__main__":
    main()
