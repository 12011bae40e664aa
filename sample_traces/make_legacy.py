#!/usr/bin/env python3
"""Write the legacy sample: a small run in the seed paper's tracer format (hbtool/io/legacy.py,
docs/formats.md "Legacy format"), one whitespace-separated text file per thread named
2020-00, 2020-01, ...: `Beat ThreadNum iter Timestamp Heartbeat Rate`, Timestamp in ns
since the thread's first beat, Beat restarting at 1 after 999.

The seed tracer is not part of hbtool, so the beats are synthetic, from a fixed seed: four
threads beating about every 2 ms with a little jitter; thread 2 stops after 150 of its 400
beats (a one-thread shutdown, which the legacy format can show only by the missing beats).

Usage: python sample_traces/make_legacy.py [OUT_DIR]   (default: sample_traces/legacy-shutdown)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

SEED = 2020
THREADS = 4
BEATS = 400
PERIOD_NS = 2_000_000
STOPPED_THREAD, STOPPED_AFTER = 2, 150
HEADER = "Beat    ThreadNum   iter    Timestamp    Heartbeat Rate\n"


def thread_lines(rng: np.random.Generator, thread: int, beats: int) -> list[str]:
    period = PERIOD_NS * (1 + 0.02 * thread)
    gaps = np.round(period * rng.lognormal(0.0, 0.08, beats - 1)).astype(np.int64)
    t = np.concatenate([[0], np.cumsum(gaps)])
    lines, beat, base = [HEADER], 0, 0
    for i in range(beats):
        beat += 1
        if beat == 1000:   # the seed tracer's counter restarts, and its clock with it
            beat, base = 1, int(t[i - 1])
        rate = 0.0 if i == 0 else 1e9 / (t[i] - t[i - 1])
        lines.append(f"{beat}    {thread}    {i}    {int(t[i]) - base}    {rate:.3f}\n")
    return lines


def main(out: Path) -> None:
    rng = np.random.default_rng(SEED)
    out.mkdir(parents=True, exist_ok=True)
    for k in range(THREADS):
        n = STOPPED_AFTER if k == STOPPED_THREAD else BEATS
        (out / f"2020-{k:02d}").write_text("".join(thread_lines(rng, k, n)))
    truth = {"program": "synthetic (sample_traces/make_legacy.py)", "seed": SEED, "threads": THREADS,
             "beats": BEATS, "inject": "shutdown", "thread": STOPPED_THREAD, "beat": STOPPED_AFTER}
    (out / "truth.json").write_text(json.dumps(truth) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent / "legacy-shutdown")
