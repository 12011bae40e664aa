"""Make a labelled heartbeat data set with the real tracer and the example programs.

    python benchmarks/make_dataset.py DATASET_DIR [--runs 30] [--seed 2026]
    hbtool evaluate DATASET_DIR

Layout (what `hbtool evaluate` reads):

    DATASET_DIR/<benchmark>/<label>/<run>/hbtrace-*.hbt   the tracer's file
                                        /truth.json       what the example injected
                                        /labels.json      the label of every thread

Benchmarks: jacobi_omp (OpenMP), pi_pthread and matmul_pthread (pthreads), 4 threads
each. Labels: normal; memoryleak (one random thread leaks --leak-bytes per beat from a
random beat on: memory allocated, touched and never freed); shutdown (one random thread
stops at a random beat: it exits (pthread_exit, or leaves its OpenMP loop) in most runs,
and in the rest the whole process goes down: exit(1), abort() or a segfault). The
injected thread and beat come from the example's --seed, which is derived from --seed
here: the whole data set is reproducible (up to the machine's timing noise).

Thread labels: the injected thread carries the run's label; the other threads of a
memoryleak or one-thread shutdown run are normal; when the whole process goes down,
every thread's trace ends early and every thread is labelled shutdown.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / "native_tracer" / "examples" / "bin"
BENCHMARKS = ("jacobi_omp", "pi_pthread", "matmul_pthread")
#: beats per thread relative to --beats, so that every benchmark's run lasts about 1 s
#: with about 0.5 ms of CPU per beat (matmul's beats take half as long as the others':
#: with as many beats its runs would be half as long, and noisier)
BEATS_FACTOR = {"matmul_pthread": 2}
#: shutdown modes and their share of shutdown runs (the rest: thread)
PROCESS_MODES = ("exit", "abort", "segv")
PROCESS_SHARE = 0.3


def run_seed(base: int, *parts) -> int:
    h = hashlib.sha256(":".join(map(str, (base, *parts))).encode()).digest()
    return int.from_bytes(h[:4], "little") or 1


def one_run(bench: str, label: str, i: int, args, out: Path) -> dict:
    seed = run_seed(args.seed, bench, label, i)
    d = out / bench / label / f"run{i:03d}"
    d.mkdir(parents=True, exist_ok=True)
    for f in d.glob("*.hbt"):
        f.unlink()
    beats = args.beats * BEATS_FACTOR.get(bench, 1)
    cmd = [str(BIN / bench), "--threads", str(args.threads), "--beats", str(beats), "--seed", str(seed),
           "--truth", str(d / "truth.json")]
    mode = None
    if label == "memoryleak":
        cmd += ["--inject", "leak", "--leak-bytes", str(args.leak_bytes)]
    elif label == "shutdown":
        # every PROCESS_SHARE-th run takes the whole process down, cycling through the modes
        k = i % round(1 / PROCESS_SHARE)
        mode = PROCESS_MODES[(i // round(1 / PROCESS_SHARE)) % len(PROCESS_MODES)] if k == 0 else "thread"
        cmd += ["--inject", "shutdown", "--shutdown-mode", mode]
    env = dict(os.environ, HBTRACE_DIR=str(d), HBTRACE_QUIET="1")
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    truth = json.loads((d / "truth.json").read_text())
    labels = {str(t): "normal" for t in range(args.threads)}
    if label == "memoryleak":
        labels[str(truth["thread"])] = "memoryleak"
    elif label == "shutdown":
        if mode == "thread":
            labels[str(truth["thread"])] = "shutdown"
        else:
            labels = {str(t): "shutdown" for t in range(args.threads)}
    (d / "labels.json").write_text(json.dumps(
        {"label": label, "mode": mode, "threads": labels, "returncode": r.returncode,
         "command": [Path(cmd[0]).name, *cmd[1:]]}, indent=1) + "\n")
    return {"bench": bench, "label": label, "run": i, "rc": r.returncode}


def main() -> None:
    ap = argparse.ArgumentParser(description="Make a labelled heartbeat data set (see the module doc).")
    ap.add_argument("out", type=Path)
    ap.add_argument("--runs", type=int, default=30, help="runs per benchmark and label (default 30)")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--beats", type=int, default=1000, help="beats per thread (default 1000: runs of about 1 s)")
    ap.add_argument("--leak-bytes", type=int, default=2 << 20, help="bytes leaked per beat (default 2 MiB)")
    ap.add_argument("--labels", default="normal,memoryleak,shutdown", help="labels to (re)make")
    ap.add_argument("--benchmarks", default=",".join(BENCHMARKS))
    args = ap.parse_args()
    if not BIN.is_dir():
        sys.exit(f"make_dataset: {BIN} is missing: run 'make -C native_tracer' (or scripts/install.sh) first")
    t0 = time.time()
    done = 0
    benches = [b for b in args.benchmarks.split(",") if b]
    unknown = [b for b in benches if b not in BENCHMARKS]
    if unknown:
        ap.error(f"--benchmarks: unknown benchmark {unknown[0]!r} (choose from {', '.join(BENCHMARKS)})")
    total = len(benches) * len([x for x in args.labels.split(",") if x]) * args.runs
    for bench in benches:
        for label in [x for x in args.labels.split(",") if x]:
            for i in range(args.runs):
                one_run(bench, label, i, args, args.out)
                done += 1
                if sys.stderr.isatty():
                    print(f"\r{done}/{total} runs", end="", file=sys.stderr)
    (args.out / "dataset.json").write_text(json.dumps({
        "maker": "benchmarks/make_dataset.py", "seed": args.seed, "runs_per_label": args.runs,
        "threads": args.threads, "beats": args.beats, "beats_factor": BEATS_FACTOR,
        "leak_bytes_per_beat": args.leak_bytes,
        "process_shutdown_share": PROCESS_SHARE, "benchmarks": benches}, indent=1) + "\n")
    print(f"{'' if not sys.stderr.isatty() else chr(10)}{total} runs in {time.time() - t0:.0f} s -> {args.out}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
