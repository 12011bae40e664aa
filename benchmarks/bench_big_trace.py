"""Time and peak memory of hbtool's commands on big tracer traces.

    python benchmarks/bench_big_trace.py [--beats 1,20,100] [--threads 16] [--program burst|regions|tasks|guided]
                                         [--commands info,diagnose,...] [--dir DIR] [--keep]

For each size (millions of beats), 16 threads (--threads) beat as fast as they can under the real
tracer (benchmarks/beat_burst.c, built here against native_tracer/lib; `--program regions`: an
OpenMP team, tests/programs/omp_regions.c with no work, entering a parallel region again and
again under `hbtool record --beats openmp`, each thread beating and waiting once per region:
about 80 bytes a beat, its waits included; `--program tasks`: tests/programs/omp_task_tree.c,
recursive tasks of no work, rounds of a tree of 2^16 leaves, under `hbtool record --beats
openmp`, a wait cut where each task runs inside one: about 110 bytes a beat; `--program
guided`: tests/programs/omp_guided_rows.c, passes of a guided loop of 256 rows of no work,
each chunk's beat carrying its iterations, which `diagnose` measures per iteration), then each command
runs on the trace as a fresh process: `info`, `diagnose`, `behavior`, `plot` (to a PNG),
`convert` to csv, to parquet and to the binary format, and `info` of the csv table and `info`
and `diagnose` of the parquet table that convert wrote (`info-csv`, `info-parquet`,
`diagnose-parquet`: they follow `convert-csv` or `convert-parquet`)
(`--commands` picks some; default all); each command's
wall time and peak resident memory (its own rusage, from wait4) are printed, one row per
size and command, with the time per million beats. The traces (32 bytes a beat: 3.2 GB
for 100 M) and the converted files go to DIR (default: a temporary folder) and are removed
unless --keep. Targets (issue 20): info < 3 s and diagnose < 5 s at 20 M beats, peak
memory < 1 GB at every size for every command, time linear in beats.
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
#: command name -> its arguments after `hbtool` ({trace}: the trace file, {out}: a file to write)
COMMANDS = {
    "info": ["info", "{trace}"],
    "diagnose": ["diagnose", "{trace}"],
    "behavior": ["behavior", "{trace}"],
    "plot": ["plot", "{trace}", "-o", "{out}.png"],
    "convert-csv": ["convert", "-f", "{trace}", "{out}.csv"],
    "info-csv": ["info", "{out}.csv"],
    "convert-parquet": ["convert", "-f", "{trace}", "{out}.parquet"],
    "info-parquet": ["info", "{out}.parquet"],
    "diagnose-parquet": ["diagnose", "{out}.parquet"],
    "convert-hbt": ["convert", "-f", "{trace}", "{out}.hbt"],
}


def build(exe: Path, program: str = "burst") -> None:
    subprocess.run(["make", "-C", str(TRACER), "-j2"], check=True, capture_output=True)
    if program in ("regions", "tasks", "guided"):
        src = ROOT / "tests" / "programs" / {"regions": "omp_regions.c", "tasks": "omp_task_tree.c",
                                             "guided": "omp_guided_rows.c"}[program]
        subprocess.run(["gcc", "-O2", "-fopenmp", f"-I{ROOT / 'tests' / 'programs'}", str(src), "-o", str(exe)],
                       check=True)
        return
    lib = TRACER / "lib"
    subprocess.run(["gcc", "-O2", "-pthread", f"-I{TRACER / 'include'}", str(ROOT / "benchmarks" / "beat_burst.c"),
                    f"-L{lib}", f"-Wl,-rpath,{lib}", "-lhbtrace", "-o", str(exe)], check=True)


def _guided_chunks(rows: int, threads: int) -> int:
    """How many chunks a guided loop of `rows` iterations makes for `threads` threads (libgomp:
    each chunk the remaining iterations over the threads, rounded up, at least 1)."""
    n, left = 0, rows
    while left > 0:
        left -= max(1, -(-left // threads))
        n += 1
    return n


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
    ap.add_argument("--threads", type=int, default=THREADS, help=f"threads that share the beats (default {THREADS})")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each command (the best is shown)")
    ap.add_argument("--program", choices=("burst", "regions", "tasks", "guided"), default="burst",
                    help="what writes the trace: threads beating (burst), an OpenMP team's regions, "
                         "its recursive tasks, or its guided loops")
    ap.add_argument("--commands", default=",".join(COMMANDS), help=f"comma-separated, of {', '.join(COMMANDS)}")
    args = ap.parse_args()
    commands = args.commands.split(",")
    unknown = [c for c in commands if c not in COMMANDS]
    if unknown:
        sys.exit(f"bench_big_trace: unknown command {unknown[0]} (known: {', '.join(COMMANDS)})")
    for c, first in (("info-csv", "convert-csv"), ("info-parquet", "convert-parquet"),
                     ("diagnose-parquet", "convert-parquet")):
        if c in commands and (first not in commands or commands.index(c) < commands.index(first)):
            sys.exit(f"bench_big_trace: {c} reads what {first} writes: give {first} before it")
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="hbtool-big-"))
    base.mkdir(parents=True, exist_ok=True)
    exe = base / {"burst": "beat_burst", "regions": "omp_regions", "tasks": "omp_task_tree",
                  "guided": "omp_guided_rows"}[args.program]
    build(exe, args.program)
    hbtool = [sys.executable, "-m", "hbtool"]
    print(f"{'beats':>6} {'file MB':>8} {'write s':>8}  {'command':<16} {'time s':>8} {'s per M beats':>14} "
          f"{'peak MB':>8}", flush=True)
    try:
        for m in (float(x) for x in args.beats.split(",")):
            per = int(m * 1e6 / args.threads)
            d = base / f"trace-{m:g}M"
            shutil.rmtree(d, ignore_errors=True)
            env = dict(os.environ, HBTRACE_DIR=str(d))
            env.pop("LD_PRELOAD", None)
            t0 = time.perf_counter()
            if args.program == "regions":
                subprocess.run(hbtool + ["record", "-q", "-o", str(d), "--beats", "openmp", "--", str(exe), str(per), "0"],
                               env=dict(env, OMP_NUM_THREADS=str(args.threads)), check=True, stdout=subprocess.DEVNULL)
            elif args.program == "tasks":   # 2^17 - 2 task beats a round, shared by the team
                rounds = max(1, round(m * 1e6 / (2 ** 17 - 2)))
                subprocess.run(hbtool + ["record", "-q", "-o", str(d), "--beats", "openmp", "--", str(exe), "16", "0", "0",
                                         str(rounds)],
                               env=dict(env, OMP_NUM_THREADS=str(args.threads), OMP_MAX_ACTIVE_LEVELS="1"), check=True,
                               stdout=subprocess.DEVNULL)
            elif args.program == "guided":   # a pass: a beat per chunk and per thread at its end
                chunks = _guided_chunks(256, args.threads)
                passes = max(1, round(m * 1e6 / (chunks + args.threads)))
                subprocess.run(hbtool + ["record", "-q", "-o", str(d), "--beats", "openmp", "--", str(exe), str(passes),
                                         "256", "0", "flat"],
                               env=dict(env, OMP_NUM_THREADS=str(args.threads)), check=True, stdout=subprocess.DEVNULL)
            else:
                subprocess.run([str(exe), str(args.threads), str(per)], env=env, check=True)
            wrote = time.perf_counter() - t0
            (f,) = d.glob("*.hbt")
            out = base / f"out-{m:g}M"
            for cmd in commands:
                argv = [a.format(trace=f, out=out) for a in COMMANDS[cmd]]
                runs = [measure(hbtool + argv) for _ in range(args.repeat)]
                bad = [r for r in runs if r[2] != 0]
                if bad:
                    sys.exit(f"hbtool {' '.join(argv)}: exit status {bad[0][2]}")
                wall, peak = min(r[0] for r in runs), max(r[1] for r in runs)
                print(f"{m:>5g}M {f.stat().st_size / 1e6:>8.0f} {wrote:>8.2f}  {cmd:<16} {wall:>8.2f} {wall / m:>14.2f} "
                      f"{peak:>8.0f}", flush=True)
            if not args.keep:
                shutil.rmtree(d, ignore_errors=True)
                for written in base.glob(f"out-{m:g}M.*"):
                    written.unlink()
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
