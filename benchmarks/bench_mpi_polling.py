"""What MPI's polling calls cost under the PMPI profiler, beside the same calls without it.

    python benchmarks/bench_mpi_polling.py [--rounds 5] [--calls 1000000] [--np 1]

Runs native_tracer/mpi/examples/bin/pollbench (it posts a receive that nothing matches and
times --calls calls of each polling function on it, of two local queries, MPI_Comm_rank and
MPI_Type_size, and, for comparison, of two calls the profiler measures every time: MPI_Wait
on MPI_REQUEST_NULL and, --calls / 100 times, MPI_Barrier, which ends a segment; best of 3)
under mpirun, alternately without and with
libhbprof preloaded, --rounds times each, and prints per function the median ns per call
of both series and their ratio (target for the polling calls: at most 2x; issue 19). The
profiled runs write their profile into a temporary directory, which is removed.
Build first: make -C native_tracer/mpi.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

MPI_DIR = Path(__file__).resolve().parent.parent / "native_tracer" / "mpi"
LIB = MPI_DIR / "lib" / "libhbprof.so"
PROG = MPI_DIR / "examples" / "bin" / "pollbench"
#: not polling calls: local queries on the same sampled path (a few ns each bare)
LOCAL = {"MPI_Comm_rank", "MPI_Type_size"}
#: calls measured every time (the full path; MPI_Barrier also ends a segment): shown, no target
MEASURED = {"MPI_Wait", "MPI_Barrier"}


def one(np_: int, calls: int, preload: bool, workdir: str) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HBPROF_") and k != "LD_PRELOAD"}
    cmd = ["mpirun", "--oversubscribe", "--allow-run-as-root", "-np", str(np_)]
    if preload:
        cmd += ["-x", f"LD_PRELOAD={LIB}", "-x", f"HBPROF_DIR={workdir}"]
    cmd += [str(PROG), "--calls", str(calls), "--repeat", "3"]
    r = subprocess.run(cmd, env=env, cwd=workdir, capture_output=True, text=True, timeout=600, check=False)
    if r.returncode != 0:
        sys.exit(f"bench_mpi_polling: pollbench failed (exit {r.returncode}): {r.stderr.strip()[-500:]}")
    for p in Path(workdir).glob("hbprof-*"):
        p.unlink()
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"pollbench (\S+) ns_per_call ([0-9.]+)", r.stdout)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=1_000_000)
    ap.add_argument("--np", type=int, default=1, dest="np_")
    a = ap.parse_args(argv)
    if a.rounds < 1 or a.calls < 1 or a.np_ < 1:
        print("bench_mpi_polling: --rounds, --calls and --np must be positive", file=sys.stderr)
        return 2
    if not PROG.exists() or not LIB.exists():
        print(f"bench_mpi_polling: {PROG} or {LIB} missing; run: make -C native_tracer/mpi", file=sys.stderr)
        return 2
    bare: dict[str, list[float]] = {}
    prof: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="hbpoll-") as d:
        for _ in range(a.rounds):   # interleaved, so that drifts of the machine hit both alike
            for fn, ns in one(a.np_, a.calls, False, d).items():
                bare.setdefault(fn, []).append(ns)
            for fn, ns in one(a.np_, a.calls, True, d).items():
                prof.setdefault(fn, []).append(ns)
    print(f"{a.np_} rank(s), {a.calls} calls per function, best of 3 per run, median of {a.rounds} runs")
    print(f"{'function':<24} {'bare ns':>8} {'profiled ns':>12} {'ratio':>6}")
    worst = {"polling": 0.0, "local": 0.0}
    for fn in bare:
        b, p = statistics.median(bare[fn]), statistics.median(prof[fn])
        kind = "local" if fn in LOCAL else "measured" if fn in MEASURED else "polling"
        worst[kind] = max(worst.get(kind, 0.0), p / b)
        print(f"{fn:<24} {b:8.1f} {p:12.1f} {p / b:6.2f}")
    print(f"worst ratio: polling calls {worst['polling']:.2f} (target <= 2); local queries {worst['local']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
