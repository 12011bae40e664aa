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

Before it starts it says on stderr how many runs it will make and about how many bytes
they will write, and where; on a terminal a progress bar follows (nothing when piped).
Ctrl-C stops it cleanly (exit status 130): the program being run is stopped, the run
folder it was writing removed, and the complete runs kept.

Thread labels: the injected thread carries the run's label; the other threads of a
memoryleak or one-thread shutdown run are normal; when the whole process goes down,
every thread's trace ends early and every thread is labelled shutdown.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's hbtool: its progress bar and trace format

from hbtool.cli.progress import progress  # noqa: E402
from hbtool.io.dataset import LABELS  # noqa: E402
from hbtool.io.hbt import CHUNK_SIZE, DATA_OFFSET, SLOT_SIZE, UNIT_SIZE  # noqa: E402

BIN = ROOT / "native_tracer" / "examples" / "bin"
BENCHMARKS = ("jacobi_omp", "pi_pthread", "matmul_pthread")
#: beats per thread relative to --beats, so that every benchmark's run lasts about 1 s
#: with about 0.5 ms of CPU per beat (matmul's beats take half as long as the others':
#: with as many beats its runs would be half as long, and noisier)
BEATS_FACTOR = {"matmul_pthread": 2}
#: shutdown modes and their share of shutdown runs (the rest: thread)
PROCESS_MODES = ("exit", "abort", "segv")
PROCESS_SHARE = 0.3
#: for the size estimate (measured with these programs): records of a worker thread
#: beside its beats; records of the program's other threads; a run's two json files; the
#: least a trace file of a process killed by abort() or a segfault takes (the tracer had
#: already extended the file ahead of its writers, and nobody trimmed it: its first
#: 64 KiB, and 4 MiB ahead once a thread beats in 64 KiB chunks)
EXTRA_RECORDS = 8
OTHER_RECORDS = {"jacobi_omp": 8, "pi_pthread": 120, "matmul_pthread": 16}
JSON_BYTES = 1500
KILLED_FILE_BYTES = (DATA_OFFSET + CHUNK_SIZE, 4 << 20)

#: what is being made now: the program running and the run folder it writes (stopped and
#: removed on Ctrl-C)
CURRENT: dict = {}


def run_seed(base: int, *parts) -> int:
    h = hashlib.sha256(":".join(map(str, (base, *parts))).encode()).digest()
    return int.from_bytes(h[:4], "little") or 1


@contextlib.contextmanager
def sigint_deferred():
    """SIGINT held until the block ends, then raised as KeyboardInterrupt: a program started
    in the block is in CURRENT by then (a ^C as the program had just begun writing, before
    CURRENT held it, left it running after make_dataset had exited, on a loaded CI machine).
    Python's handler only: the program, once exec'd, has SIGINT at its default."""
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    caught: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if caught:
        raise KeyboardInterrupt


def one_run(bench: str, label: str, i: int, args, out: Path) -> dict:
    seed = run_seed(args.seed, bench, label, i)
    d = out / bench / label / f"run{i:03d}"
    CURRENT.clear()
    CURRENT["dir"] = d   # from here on the folder is unfinished until labels.json is written
    d.mkdir(parents=True, exist_ok=True)
    for f in d.glob("*.hbt"):
        f.unlink()
    beats = args.beats * BEATS_FACTOR.get(bench, 1)
    cmd = [str(BIN / bench), "--threads", str(args.threads), "--beats", str(beats), "--seed", str(seed),
           "--truth", str(d / "truth.json")]
    mode = shutdown_mode(label, i)
    if label == "memoryleak":
        cmd += ["--inject", "leak", "--leak-bytes", str(args.leak_bytes)]
    elif label == "shutdown":
        cmd += ["--inject", "shutdown", "--shutdown-mode", mode]
    env = dict(os.environ, HBTRACE_DIR=str(d), HBTRACE_QUIET="1")
    with sigint_deferred():   # a ^C between the start and CURRENT: nobody would stop the program
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        CURRENT["proc"] = proc
    try:
        returncode = proc.wait(timeout=300)
    finally:
        stop(proc)
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
        {"label": label, "mode": mode, "threads": labels, "returncode": returncode,
         "command": [Path(cmd[0]).name, *cmd[1:]]}, indent=1) + "\n")
    CURRENT.clear()
    return {"bench": bench, "label": label, "run": i, "rc": returncode}


def shutdown_mode(label: str, i: int) -> str | None:
    """How run i of `label` shuts down: every PROCESS_SHARE-th shutdown run takes the whole
    process down, cycling through PROCESS_MODES; the others stop one thread."""
    if label != "shutdown":
        return None
    if i % round(1 / PROCESS_SHARE):
        return "thread"
    return PROCESS_MODES[(i // round(1 / PROCESS_SHARE)) % len(PROCESS_MODES)]


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def thread_bytes(records: int) -> int:
    """Bytes of a thread's chunks (docs/formats.md, version 2): one 256-byte unit, then each
    chunk twice the last up to 64 KiB, each holding its size / 32 - 2 records; the units
    of its last chunk it did not use are given back."""
    total, units = 0, 1
    while True:
        fits = units * UNIT_SIZE // SLOT_SIZE - 2
        if records <= fits:
            return total + math.ceil((records + 1) * SLOT_SIZE / UNIT_SIZE) * UNIT_SIZE
        total += units * UNIT_SIZE
        records -= fits
        units = min(units * 2, CHUNK_SIZE // UNIT_SIZE)


def estimated_bytes(bench: str, label: str, i: int, args) -> int:
    """About how many bytes run i writes: the trace file (a header, then chunks of 32-byte
    records; one record per beat) and the two json files."""
    beats = args.beats * BEATS_FACTOR.get(bench, 1)
    size = DATA_OFFSET + args.threads * thread_bytes(beats + EXTRA_RECORDS) + thread_bytes(OTHER_RECORDS[bench])
    if shutdown_mode(label, i) in ("abort", "segv"):
        size = max(size, KILLED_FILE_BYTES[beats + EXTRA_RECORDS > CHUNK_SIZE // SLOT_SIZE])
    return size + JSON_BYTES


def human_bytes(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024


def main() -> None:
    ap = argparse.ArgumentParser(description="Make a labelled heartbeat data set (see the module doc).")
    ap.add_argument("out", type=Path)
    ap.add_argument("--runs", type=int, default=30, help="runs per benchmark and label (default 30)")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--beats", type=int, default=1000, help="beats per thread (default 1000: runs of about 1 s)")
    ap.add_argument("--leak-bytes", type=int, default=2 << 20, help="bytes leaked per beat (default 2 MiB)")
    ap.add_argument("--labels", default=",".join(LABELS), help="labels to (re)make")
    ap.add_argument("--benchmarks", default=",".join(BENCHMARKS))
    args = ap.parse_args()
    if not BIN.is_dir():
        sys.exit(f"make_dataset: {BIN} is missing: run 'make -C native_tracer' (or scripts/install.sh) first")
    benches = [b for b in args.benchmarks.split(",") if b]
    unknown = [b for b in benches if b not in BENCHMARKS]
    if unknown:
        ap.error(f"--benchmarks: unknown benchmark {unknown[0]!r} (choose from {', '.join(BENCHMARKS)})")
    labels = [x for x in args.labels.split(",") if x]
    unknown = [x for x in labels if x not in LABELS]
    if unknown:
        ap.error(f"--labels: unknown label {unknown[0]!r} (choose from {', '.join(LABELS)})")
    plan = [(bench, label, i) for bench in benches for label in labels for i in range(args.runs)]
    size = sum(estimated_bytes(*job, args) for job in plan)
    print(f"make_dataset: {len(plan)} runs of {args.threads} threads, {args.beats} beats each, "
          f"about {human_bytes(size)} -> {args.out}", file=sys.stderr, flush=True)
    t0 = time.time()
    done = 0
    try:
        with progress(plan, "runs") as bar:
            for job in bar:
                one_run(*job, args, args.out)
                done += 1
        (args.out / "dataset.json").write_text(json.dumps({
            "maker": "benchmarks/make_dataset.py", "seed": args.seed, "runs_per_label": args.runs,
            "threads": args.threads, "beats": args.beats, "beats_factor": BEATS_FACTOR,
            "leak_bytes_per_beat": args.leak_bytes,
            "process_shutdown_share": PROCESS_SHARE, "benchmarks": benches}, indent=1) + "\n")
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)   # a second Ctrl-C does not cut the clean-up short
        if "proc" in CURRENT:
            stop(CURRENT["proc"])
        unfinished = CURRENT.get("dir")
        if unfinished is not None:
            shutil.rmtree(unfinished, ignore_errors=True)
        print(f"make_dataset: interrupted: {done} of {len(plan)} runs complete in {args.out}"
              + (f", the unfinished {unfinished.relative_to(args.out)} removed" if unfinished else "")
              + ", no dataset.json", file=sys.stderr)
        sys.exit(128 + signal.SIGINT)
    print(f"{len(plan)} runs in {time.time() - t0:.0f} s -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
