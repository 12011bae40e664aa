"""What the online monitor costs a real program: its wall time and CPU time under `hbtool
record` with the central monitor judging its automatic OpenMP beats
(HBTRACE_MONITOR=central, HBTRACE_MONITOR_BEATS=openmp) against the same with the monitor
off, runs interleaved, medians.

    python benchmarks/bench_monitor_overhead.py [--pairs 3] [--threads 2]
                                                [--programs gromacs,cd-hit,iqtree,muscle,fasttree,clustalo]
    python benchmarks/bench_monitor_overhead.py --command "PROGRAM ARGS" --cwd DIR

The programs are the Debian ones of the README ("A program from Debian"; `apt-get install
gromacs cd-hit iqtree muscle fasttree clustalo`), run on the seeded inputs of
benchmarks/real_inputs.py (written into a temporary folder); one that is not installed is
skipped, saying so. The machine should be otherwise idle: the figures are ratios of runs
made side by side, and their spread is printed with them.
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import real_inputs  # noqa: E402

PROGRAMS = {
    "gromacs": "gmx -quiet mdrun -s md.tpr -ntmpi 1 -ntomp {t} -nb cpu -deffnm run -pin off",
    "cd-hit": "cd-hit -i prot2.fa -o cl.fa -c 0.8 -n 5 -T {t} -M 2000",
    "iqtree": "iqtree2 -s dna100.phy -m GTR+G4 -T {t} -redo -quiet -seed 1 -fast",
    "muscle": "muscle -align m30.fa -output out.afa -threads {t}",
    "fasttree": "fasttreeMP -quiet -out tree.nwk tree100.fa",
    "clustalo": "clustalo -i aln150.fa -o out.aln --threads {t} --force",
}


def hbtool() -> list[str]:
    exe = Path(sys.executable).with_name("hbtool")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "hbtool"]


def run_once(cmd: list[str], cwd: Path, out: Path, monitor: str, threads: int) -> tuple[float, float]:
    """(wall s, CPU s of the recorded program and its children) of one recorded run."""
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), HBTRACE_MONITOR=monitor,
               HBTRACE_MONITOR_BEATS="openmp")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run([*hbtool(), "record", "-q", "-o", str(out), "--", *cmd], cwd=cwd, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise RuntimeError(f"{shlex.join(cmd)} under record failed: {r.stderr.strip()[-300:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def measure(name: str, cmd: list[str], cwd: Path, pairs: int, threads: int, tmp: Path) -> None:
    runs: dict[str, list[tuple[float, float]]] = {"off": [], "central": []}
    for _ in range(pairs):
        for monitor in ("off", "central"):
            runs[monitor].append(run_once(cmd, cwd, tmp / "trace", monitor, threads))
    off_w = statistics.median(w for w, _ in runs["off"])
    off_c = statistics.median(c for _, c in runs["off"])
    on_w = statistics.median(w for w, _ in runs["central"])
    on_c = statistics.median(c for _, c in runs["central"])
    spread = ", ".join(f"{w:.2f}" for w, _ in runs["central"]) + " vs " + ", ".join(f"{w:.2f}" for w, _ in runs["off"])
    print(f"| {name} | {off_w:.2f} s | {100 * (on_w / off_w - 1):+.1f} % | {100 * (on_c / off_c - 1):+.1f} % | {spread} |",
          flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=3, help="interleaved pairs of runs (off, central) per program")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--programs", default=",".join(PROGRAMS))
    ap.add_argument("--command", help="any program instead, run in --cwd")
    ap.add_argument("--cwd", type=Path, default=Path.cwd())
    a = ap.parse_args(argv)
    if a.pairs < 1:
        ap.error("--pairs must be at least 1")
    with tempfile.TemporaryDirectory(prefix="hbtool-monitor-overhead-") as d:
        tmp = Path(d)
        print("| program | wall, monitor off | wall with the central monitor | CPU time | runs (s): central vs off |")
        print("|---|---|---|---|---|")
        if a.command:
            measure(a.command, shlex.split(a.command), a.cwd, a.pairs, a.threads, tmp)
            return 0
        inputs = tmp / "inputs"
        inputs.mkdir()
        with open(os.devnull, "w") as quiet:
            stdout, sys.stdout = sys.stdout, quiet
            try:
                real_inputs.main([str(inputs)])
            finally:
                sys.stdout = stdout
        for name in a.programs.split(","):
            if name not in PROGRAMS:
                ap.error(f"--programs: {name!r} is none of {', '.join(PROGRAMS)}")
            cmd = shlex.split(PROGRAMS[name].format(t=a.threads))
            if not shutil.which(cmd[0]) or (name == "gromacs" and not (inputs / "md.tpr").exists()):
                print(f"| {name} | skipped: not installed (apt-get install {name}) | | | |")
                continue
            measure(name, cmd, inputs, a.pairs, a.threads, tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
