"""Timing-probe cost: one probe use (BEGIN + END) beside one clock read.

    python benchmarks/bench_probes.py [--rounds 15] [--calls 2000000]

Builds benchmarks/probe_cost.c against native_tracer/lib (run `make -C native_tracer`
first) and runs it three times: with the clock the tracer chooses (the TSC where it is
invariant), with HBTRACE_PROBE_CLOCK=monotonic, and with tracing disabled (probes are
no-ops then). Each run measures its figures interleaved, round by round; compare the
ratios, not absolute times, on a shared machine. Prints "key value" lines per run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACER = ROOT / "native_tracer"

RUNS = [("auto", {}), ("monotonic", {"HBTRACE_PROBE_CLOCK": "monotonic"}), ("disabled", {"HBTRACE_DISABLE": "1"})]


def build(tmp: Path) -> Path:
    exe = tmp / "probe_cost"
    lib = TRACER / "lib"
    if not (lib / "libhbtrace.so").exists():
        sys.exit("bench_probes: native_tracer/lib/libhbtrace.so is missing; run: make -C native_tracer")
    subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-pthread", f"-I{TRACER / 'include'}",
                    str(ROOT / "benchmarks" / "probe_cost.c"), f"-L{lib}", f"-Wl,-rpath,{lib}", "-lhbtrace",
                    "-o", str(exe)], check=True)
    return exe


def run(exe: Path, tmp: Path, name: str, extra: dict, rounds: int, calls: int) -> dict[str, str]:
    env = dict(os.environ, HBTRACE_DIR=str(tmp / name), HBTRACE_QUIET="1", **extra)
    env.pop("LD_PRELOAD", None)
    out = subprocess.run([str(exe), "--rounds", str(rounds), "--calls", str(calls)], env=env,
                         capture_output=True, text=True, check=True)
    vals = {}
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2:
            vals[parts[0]] = parts[1]
    return vals


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=2000000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_probes_") as d:
        tmp = Path(d)
        exe = build(tmp)
        for name, extra in RUNS:
            vals = run(exe, tmp, name, extra, args.rounds, args.calls)
            print(f"run {name}")
            for k, v in vals.items():
                if k != "trace":
                    print(f"  {k} {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
