"""The memory signal's cost (native_tracer/src/memory.c): malloc + free pairs bare and
with the tracer preloaded, and a real allocation-heavy program (gcc compiling the tracer's
largest source file), side by side, rounds interleaved; the ratios are what to compare.

    python benchmarks/bench_alloc.py [--rounds 7] [--pairs 2000000]

Besides the times, where valgrind is installed, the instructions each run executes
(callgrind, every child process counted): they do not move with the machine's load, so they
give the cost on a shared machine where times cannot.

With the tracer, the allocator's entry points are interposed and count each block's usable
size for the calling thread; the program makes no beats here, so no record is written:
this is the cost every traced program pays.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACER = ROOT / "native_tracer"
LIB = TRACER / "lib" / "libhbtrace.so"


def pair_ns(exe: Path, threads: int, pairs: int, env: dict) -> float:
    out = subprocess.run([str(exe), "--threads", str(threads), "--pairs", str(pairs)], env=env,
                         capture_output=True, text=True, check=True).stdout
    return float(next(line.split()[1] for line in out.splitlines() if line.startswith("pair_ns")))


def compile_s(src: Path, out: Path, env: dict) -> float:
    t0 = time.perf_counter()
    subprocess.run(["gcc", "-O2", "-c", f"-I{TRACER / 'include'}", str(src), "-o", str(out)], env=env, check=True)
    return time.perf_counter() - t0


def instructions(cmd: list[str], env: dict) -> int | None:
    """Instructions the command (and its children) executed, by callgrind; None without valgrind."""
    if shutil.which("valgrind") is None:
        return None
    r = subprocess.run(["valgrind", "--tool=callgrind", "--trace-children=yes", "--callgrind-out-file=/dev/null",
                        *cmd], env=env, capture_output=True, text=True, check=True)
    return sum(int(n) for n in re.findall(r"Collected : (\d+)", r.stderr))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--pairs", type=int, default=2_000_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        exe = tmp / "alloc_cost"
        subprocess.run(["gcc", "-O2", "-pthread", str(ROOT / "benchmarks" / "alloc_cost.c"), "-o", str(exe)], check=True)
        bare = dict(os.environ)
        bare.pop("LD_PRELOAD", None)
        traced = dict(bare, LD_PRELOAD=str(LIB), HBTRACE_DIR=str(tmp / "traces"))
        src = max((TRACER / "src").glob("*.c"), key=lambda p: p.stat().st_size)
        res: dict[str, list[float]] = {}
        for _ in range(args.rounds):
            for name, env in (("bare", bare), ("traced", traced)):
                for threads in (1, 2):
                    res.setdefault(f"{name} {threads}", []).append(pair_ns(exe, threads, args.pairs, env))
                res.setdefault(f"{name} gcc", []).append(compile_s(src, tmp / "x.o", env))
        med = {k: statistics.median(v) for k, v in res.items()}
        print(f"malloc+free pairs ({args.pairs} per thread, sizes 16 B-64 KiB), median of {args.rounds} rounds:")
        for threads in (1, 2):
            b, t = med[f"bare {threads}"], med[f"traced {threads}"]
            print(f"  {threads} thread(s): bare {b:.1f} ns, traced {t:.1f} ns per pair: {t / b:.2f}x "
                  f"(+{t - b:.1f} ns)")
        b, t = med["bare gcc"], med["traced gcc"]
        print(f"gcc -O2 -c {src.name}: bare {b:.3f} s, traced {t:.3f} s: {100 * (t / b - 1):+.1f} %")
        gcc = ["gcc", "-O2", "-c", f"-I{TRACER / 'include'}", str(src), "-o", str(tmp / "y.o")]
        counts = {}
        for name, env in (("bare", bare), ("traced", traced)):
            small, large = (instructions([str(exe), "--pairs", str(n)], env) for n in (100_000, 200_000))
            counts[name] = (None if small is None else (large - small) / 100_000, instructions(gcc, env))
        if counts["bare"][0] is not None:
            (pb, gb), (pt, gt) = counts["bare"], counts["traced"]
            print(f"instructions (callgrind): {pb:.0f} per malloc+free pair bare, {pt:.0f} traced (+{pt - pb:.0f}); "
                  f"gcc -O2 -c {src.name}: {gb / 1e9:.3f} G bare, {gt / 1e9:.3f} G traced ({100 * (gt / gb - 1):+.2f} %)")


if __name__ == "__main__":
    main()
