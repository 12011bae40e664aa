#!/usr/bin/env python3
"""Make the seed corpus of the reader fuzzer (benchmarks/fuzz_readers.py) with the real tracer.

Every seed is a small, valid input of one reader, written by the real programs: the tracer
on the example programs (heartbeats with lifecycle records, OpenMP beats, queues, probes,
machine status), the PMPI profiler under real mpirun, and hbtool itself (convert to csv,
xlsx and parquet; train for a model; the profile and queue samples as tables). The fuzzer
mutates these and the bundled sample_traces/. The corpus is committed, so that a case is
the same bytes on every machine given (seed, index); run this to make it again:

    python benchmarks/fuzz_seeds.py [DIR]        (default benchmarks/fuzz_seeds)
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / "native_tracer" / "examples" / "bin"
MPI = ROOT / "native_tracer" / "mpi"
SEEDS = ROOT / "benchmarks" / "fuzz_seeds"


def hbtool(*args) -> None:
    subprocess.run([sys.executable, "-m", "hbtool", *map(str, args)], check=True, timeout=300,
                   stdout=subprocess.DEVNULL)


def record(out: Path, name: str, *argv, options=()) -> None:
    """Record one run of an example program; its one trace file becomes `out/name`."""
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run([sys.executable, "-m", "hbtool", "record", "-q", "-o", d, *options, "--",
                            *map(str, argv)], capture_output=True, text=True, timeout=300)
        files = list(Path(d).glob("*.hbt"))
        if len(files) != 1:
            sys.exit(f"fuzz_seeds: {name}: expected one trace file, got {files}: {r.stderr}")
        shutil.copyfile(files[0], out / name)


def profile(out: Path) -> None:
    """A run file and a per-rank stream of the PMPI profiler: 2 ranks of the stencil example under mpirun."""
    with tempfile.TemporaryDirectory() as d:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HBPROF_") and k != "LD_PRELOAD"}
        subprocess.run(["mpirun", "--oversubscribe", "--allow-run-as-root", "-np", "2", "-x", f"HBPROF_DIR={d}",
                        "-x", "HBPROF_KEEP_RANK_FILES=1",
                        "-x", f"LD_PRELOAD={MPI / 'lib' / 'libhbprof.so'}", str(MPI / "examples" / "bin" / "stencil"),
                        "--iterations", "30", "--work", "5"], env=env, check=True, timeout=120,
                       capture_output=True)
        files = sorted(Path(d).glob("hbprof-*.hbp"))
        shutil.copyfile(next(f for f in files if not re.search(r"-r\d+\.hbp$", f.name)), out / "profile.hbp")
        shutil.copyfile(next(f for f in files if f.name.endswith("-r1.hbp")), out / "rank-r1.hbp")


def tables(out: Path) -> None:
    """The profile as a segment table and the queue trace as a sample table (csv, parquet)."""
    import numpy as np
    import pandas as pd

    from hbtool.io import read_profile, read_queue_samples

    p = read_profile(out / "profile.hbp")
    a = p.aggregated  # the run file is read aggregated per segment: a table of one process
    seg = pd.DataFrame({"rank": 0, "segment": a.segment, "duration_ns": a.duration_ns,
                        "computation": a.computation})
    for k, name in enumerate(p.feature_names):
        seg[name] = np.asarray(a.features[:, k]).astype(np.int64)
    seg.to_csv(out / "segments.csv", index=False)
    seg.to_parquet(out / "segments.parquet", index=False)
    q = read_queue_samples(out / "queues.hbt").samples
    cols = [c for c in ("queue", "end", "t", "count", "blocked", "item_size", "period") if c in q.columns]
    q = q[cols].head(120)
    q.to_csv(out / "samples.csv", index=False)
    q.to_parquet(out / "samples.parquet", index=False)


def make(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    record(out, "pi.hbt", BIN / "pi_pthread", "--threads", 3, "--beats", 150, "--work", 20000, "--seed", 3,
           "--inject", "shutdown", "--inject-thread", 1, "--inject-beat", 60)
    record(out, "omp.hbt", BIN / "jacobi_omp", "--threads", 2, "--beats", 60, "--size", 32, "--seed", 4,
           options=("--beats", "openmp"))
    record(out, "status.hbt", BIN / "pi_pthread", "--threads", 2, "--beats", 100, "--work", 300000, "--seed", 5,
           options=("--status",))
    record(out, "queues.hbt", BIN / "stream_micro", "--rate", 20000, "--duration", 0.15, "--capacity", 64)
    record(out, "probes.hbt", BIN / "probe_demo", "--threads", 2, "--uses", 20)
    profile(out)
    for suffix in ("csv", "xlsx", "parquet"):
        hbtool("convert", out / "pi.hbt", "-o", out / f"pi.{suffix}", "--force")
    shutil.copyfile(ROOT / "sample_traces" / "legacy-shutdown" / "2020-02", out / "legacy-2020-00")
    # (with an OpenMP team: the model then has every field, the work per thread and the work
    # against the team's too)
    hbtool("train", "--normal", ROOT / "sample_traces" / "pi-normal", out / "omp.hbt", "-o", out / "model.json")
    tables(out)
    for f in sorted(out.iterdir()):
        print(f"{f.name:20s} {f.stat().st_size:8d} bytes")


if __name__ == "__main__":
    make(Path(sys.argv[1]) if len(sys.argv) > 1 else SEEDS)
