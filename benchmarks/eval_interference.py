"""Evaluate `hbtool interference` (seed 004) with real Open MPI runs and injected interference.

    python benchmarks/eval_interference.py [--runs 16] [--seed 2026]
                                           [--parts accuracy,overhead,scale,faults,fortran]
    python benchmarks/eval_interference.py --parts lammps,hpcc [--np 2,4] [--clean 3]
                                           [--repeats 3] [--overhead-runs 5] [--keep DIR]
    python benchmarks/eval_interference.py --parts lammps,hpcc --reanalyse --keep DIR

1. accuracy: for each example (stencil: halo exchange + Allreduce + POSIX checkpoints;
   transpose: Bcast + sub-communicator Allreduce + MPI-IO checkpoints + Alltoall), --runs
   runs of 4 ranks (mpirun --oversubscribe on this 2-core machine) under the profiler, with
   gradually increasing injected interference (Gaussian delays of MPI and I/O calls,
   probability rising from 0 run by run, seeded). Each run's estimate is made from its own
   profile and the campaign's fastest per group and per unit of work (as `hbtool
   interference` given all the runs); its measured interference is its time against the
   fastest run's, and accuracy = 1 - |p(measured) - p(estimated)| (seed 004; target:
   median >= 0.9, minimum >= 0.8). Beside it: the accuracy of the run judged alone and of
   seed 004's own figure, which evidence decided each verdict, and how many verdicts rest
   on the run's time against the fastest run's (the truth's own figure: accurate by
   construction); and the injector's own truth (the delay it injected, per rank and segment).
2. overhead: the stencil at about 100 Allreduce/s, 4 ranks, with and without the
   profiler preloaded, interleaved; the median of the program's own time.
3. scale: a synthetic run file of 1 000 000 segments x 64 ranks, analysed end to end by
   `hbtool interference` (reading included), wall time (target < 10 s).
4. faults: the stencil, 4 ranks, rank 1 ending at iteration 40 by MPI_Abort, a segfault,
   exit without MPI_Finalize, SIGKILL, and mpirun itself killed: the wall time (nothing
   may hang) and what `hbtool interference` says (target: class failed, the right rank
   and how, in one line).
5. fortran: examples/bin/fstencil (use mpi), fstencil_h (mpif.h), fstencil_f08 (use
   mpi_f08) with 2 and 4 ranks: segments and blocking point-to-point calls per rank in the
   run file against what the program does (ITERATIONS + 3 segments, 2 MPI_Sendrecv per
   iteration).
6. lammps, hpcc: real applications from Debian (`apt-get install lammps hpcc`; the part is
   skipped, saying so, when they are not installed): LAMMPS on a Lennard-Jones melt of
   2048 atoms, 1000 steps; HPCC on its Debian example input (N 1000, P x Q = 1 x 2 or
   2 x 2), with 2 and 4 ranks (--np):
   - counts: per rank, the segments and the point-to-point and collective calls in the
     profile against an independent PMPI counter (benchmarks/pmpi_counter.c, loaded first
     in the same run, forwarding to the profiler);
   - verdicts: --clean clean runs side by side (their median time is the clean time), then
     --repeats runs at each level of our injector (delays N(5 ms, 1 ms) on MPI calls, the
     probability per call chosen from the counted calls so that each rank would sleep
     about 10 % or 30 % of the clean time) and of a real CPU hog (processes spinning for
     the duty cycle of every 20 ms period: one at 25 %, one at 50 %, one pinned to core 0
     at 75 %). Each run's lost time = (its time - the clean time) / its time (the truth;
     the clean time is the fastest clean run's: on a machine shared with other work the
     clean runs are not all clean); hbtool's class from the run alone and with the clean runs as
     --reference (a clean run against the others); target: the right class in >= 90 % of
     the runs, and no "low" for a run that lost more than 15 %;
   - overhead: --overhead-runs runs with and without the profiler, interleaved: the median
     wall time of mpirun, and the median CPU time of mpirun and its ranks (target <= 3 % on
     HPCC); --overhead-only runs only this.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
MPI = ROOT / "native_tracer" / "mpi"
LIB = MPI / "lib" / "libhbprof.so"
HBTOOL = [sys.executable, "-m", "hbtool"]

EXAMPLES = {
    # ~40 iterations/s with 4 ranks on 2 cores (segments of ~20 ms, long beside the
    # scheduler's time slices); heavy iterations and checkpoints give several groups;
    # a run lasts about 6 s
    "stencil": ["--iterations", "250", "--work", "800", "--heavy-every", "4", "--checkpoint-every", "25",
                "--io", "posix"],
    "transpose": ["--iterations", "250", "--work", "800", "--heavy-every", "4", "--checkpoint-every", "25",
                  "--io", "mpiio"],
}


def seed_of(*parts) -> int:
    return int.from_bytes(hashlib.sha256(":".join(map(str, parts)).encode()).digest()[:4], "little") or 1


def mpirun(prog: str, args: list[str], d: Path, env_extra: dict, profile: bool = True) -> tuple[float, Path | None]:
    d.mkdir(parents=True, exist_ok=True)
    for f in d.glob("hbprof-*"):
        f.unlink()
    env = {k: v for k, v in os.environ.items() if not k.startswith("HBPROF_") and k != "LD_PRELOAD"}
    env.update(OMPI_MCA_mpi_yield_when_idle="1")
    cmd = ["mpirun", "--oversubscribe", "--allow-run-as-root", "-np", "4"]
    if profile:
        cmd += ["-x", f"LD_PRELOAD={LIB}", "-x", f"HBPROF_DIR={d}", "-x", "HBPROF_QUIET=1"]
        for k, v in env_extra.items():
            cmd += ["-x", f"{k}={v}"]
    cmd += [str(MPI / "examples" / "bin" / prog), *args, "--ckpt-dir", str(d)]
    r = subprocess.run(cmd, cwd=d, env=env, capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        sys.exit(f"eval_interference: {prog} failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    m = re.search(r"time=([0-9.]+) s", r.stdout)
    runs = [p for p in d.glob("hbprof-*.hbp") if not re.search(r"-r\d+$", p.stem)]
    return float(m.group(1)) if m else float("nan"), (runs[0] if runs else None)


def injected_percent(run_file: Path, run_time_s: float) -> float:
    """The injector's truth as a share of the run: per segment, the largest delay of any rank."""
    from hbtool.io.hbprof import read_injection_truth

    truth = read_injection_truth(str(run_file))
    per_seg: dict[int, int] = {}
    for (rank, seg), (ns, _) in truth.items():
        per_seg[seg] = max(per_seg.get(seg, 0), ns)
    return 100.0 * sum(per_seg.values()) / 1e9 / run_time_s if run_time_s else 0.0


def accuracy(args, tmp: Path) -> dict:
    from hbtool.analyzers.interference import compare_with_references, estimate, measured
    from hbtool.io.hbprof import read_hbprof

    out = {}
    for prog, base in EXAMPLES.items():
        ests, injected, alone = [], {}, {}
        for i in range(args.runs):
            prob = args.max_prob * i / max(args.runs - 1, 1)
            d = tmp / "acc" / prog / f"run{i:02d}"
            env = {"HBPROF_INJECT": f"{args.mean_us},{args.sd_us},{prob:.5f}",
                   "HBPROF_INJECT_SEED": str(seed_of(args.seed, prog, i)),
                   "HBPROF_INJECT_CALLS": "mpi,posix,mpiio"} if prob > 0 else {}
            _, run_file = mpirun(prog, base + ["--seed", str(seed_of(args.seed, prog, "data"))], d, env)
            e = estimate(read_hbprof(str(run_file), name=f"{prog}-{i:02d}"))
            ests.append(e)
            injected[e.name] = (prob, injected_percent(run_file, e.run_time_s))
            alone[e.name] = (e.interference_percent, e.klass, e.decided_by)   # before the campaign's references
            print(f"  {prog} run {i:2d}: prob {prob:.4f}: estimated {e.interference_percent:5.1f} % "
                  f"({e.klass}), injected {injected[e.name][1]:5.1f} %, {e.run_time_s:.3f} s", file=sys.stderr)
        for e in ests:   # the campaign's fastest per group and per unit of work, as `hbtool interference` does
            compare_with_references(e, ests)
        rows = measured(ests)
        basis = {e.name: e.reference_basis for e in ests}
        for r in rows:
            r["probability"], r["injected_percent"] = injected[r["run"]]
            r["alone_percent"], r["alone_class"], r["alone_decided_by"] = alone[r["run"]]
            r["basis"] = basis[r["run"]]
        out[prog] = rows
    return out


def overhead(args, tmp: Path) -> dict:
    prog_args = ["--iterations", "300", "--work", str(args.overhead_work), "--checkpoint-every", "50",
                 "--heavy-every", "10", "--seed", "7"]
    times = {False: [], True: []}
    mpirun("stencil", prog_args, tmp / "ovh", {}, profile=False)  # warm-up
    for k in range(args.overhead_runs):
        for prof in ((False, True) if k % 2 == 0 else (True, False)):
            t, _ = mpirun("stencil", prog_args, tmp / "ovh", {}, profile=prof)
            times[prof].append(t)
    bare, prof = statistics.median(times[False]), statistics.median(times[True])
    return {"bare_s": bare, "profiled_s": prof, "overhead": prof / bare - 1, "rate_hz": 300 / bare,
            "runs": args.overhead_runs, "spread_bare": (min(times[False]), max(times[False])),
            "spread_profiled": (min(times[True]), max(times[True]))}


def scale(args, tmp: Path) -> dict:
    """Write a 1M x 64 run file straight from bins (no per-value work), then time hbtool on it."""
    from hbtool.io import hbprof as H

    S, R = args.scale_segments, args.scale_ranks
    path = tmp / "scale" / "hbprof-synthetic-1.hbp"
    path.parent.mkdir(parents=True, exist_ok=True)
    names = ["computation", "p2p_nonblocking", "bytes_sent", "bytes_received", "posix_write", "posix_write_bytes"]
    m = len(names)
    bins = np.zeros((m, H.RUN_BINS), dtype=H.bin_dtype())
    comp_vals = np.sort(np.r_[np.linspace(0.98e6, 1.02e6, 200), np.linspace(2.94e6, 3.06e6, 200)])
    bins["value"][0, :400] = comp_vals
    for j, vals in enumerate([[4], [8192], [8192], [0, 1], [0, 1 << 20]], start=1):
        bins["value"][j, : len(vals)] = vals
    used = [400, 1, 1, 1, 2, 2]
    bins["count"][:, :] = 0
    rng = np.random.default_rng(args.seed)
    heavy = (np.arange(S) % 5) == 4
    ckpt = (np.arange(S) % 100) == 99
    base_dur = np.where(heavy, 3_000_000, 1_000_000)
    # the records go after the tables (write_run_file_head says where; the tables are written last)
    do = (((H.HEADER_SIZE + m * H.METRIC_ENTRY_SIZE + 63) // 64 * 64 + R * H.RANK_ENTRY_SIZE + 63) // 64 * 64
          + m * H.RUN_BINS * H.BIN_ENTRY_SIZE + 4095) // 4096 * 4096
    hit = rng.random(S) < 0.02
    t0 = time.perf_counter()
    with open(path, "wb") as f:
        f.truncate(do + S * R * H.RUN_RECORD_SIZE)
        f.seek(do)
        rec = np.zeros(S, dtype=H.run_record_dtype())
        rec["segment"] = np.arange(S)
        rec["flags"] = 1
        rec["boundary"] = 4
        rec["bin"][:, 1] = 0
        rec["bin"][:, 2] = 0
        rec["bin"][:, 3] = 0
        rec["bin"][:, 4] = ckpt
        rec["bin"][:, 5] = ckpt
        run_ns = 0
        for r in range(R):
            rec["rank"] = r
            rec["bin"][:, 0] = np.where(heavy, 200, 0) + rng.integers(0, 200, S)
            dur = (base_dur * (1 + 0.01 * rng.standard_normal(S))).astype(np.int64)
            if r == 7:
                dur += hit * 2_000_000
            rec["duration_ns"] = dur
            run_ns = max(run_ns, int(dur.sum()))
            f.write(rec.tobytes())
        rt = np.zeros(R, dtype=H.rank_dtype())
        for r in range(R):
            rt[r] = (r, H.RANK_OK, run_ns, S, r * S, 0, 0, 0, 2, 0, b"synthetic")
        bins["count"][0, :400] = S * R // 400
        if H.write_run_file_head(f, names, used, rt, bins, run_ns, S * R, comp_source=2) != do:
            sys.exit("eval_interference: the run file's layout changed; update scale()")
    made = time.perf_counter() - t0
    size = path.stat().st_size
    # first run warms the page cache and numba; then the timed runs
    walls = []
    for _ in range(args.scale_repeats + 1):
        t = time.perf_counter()
        r = subprocess.run(HBTOOL + ["interference", str(path), "--format", "json"], capture_output=True, text=True,
                           timeout=600)
        walls.append(time.perf_counter() - t)
        if r.returncode != 0:
            sys.exit(f"eval_interference: hbtool failed on the synthetic profile:\n{r.stderr}")
    doc = json.loads(r.stdout)
    path.unlink()
    return {"segments": S, "ranks": R, "bytes": size, "write_s": made, "cold_s": walls[0],
            "warm_s": statistics.median(walls[1:]), "interfered": doc["segments_interfered"], "hit": int(hit.sum()),
            "interference_percent": doc["interference_percent"]}


def faults(tmp: Path) -> list[dict]:
    """Each way of failing, once: wall time, hbtool's one line, its class."""
    prog = MPI / "examples" / "bin" / "stencil"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HBPROF_") and k != "LD_PRELOAD"}
    out = []
    for how in ("abort", "segv", "exit", "kill", "mpirun-killed"):
        d = tmp / f"fault-{how}"
        d.mkdir(parents=True, exist_ok=True)
        cmd = ["mpirun", "--oversubscribe", "--allow-run-as-root", "-np", "4", "-x", f"LD_PRELOAD={LIB}",
               "-x", f"HBPROF_DIR={d}", str(prog), "--work", "100"]
        cmd += ["--iterations", "3000"] if how == "mpirun-killed" else \
            ["--iterations", "200", "--die-at", "40", "--die-rank", "1", "--die-how", how]
        t0 = time.time()
        p = subprocess.Popen(cmd, cwd=d, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if how == "mpirun-killed":
            while len(list(d.glob("hbprof-*-r*.hbp"))) < 4 and time.time() - t0 < 60:
                time.sleep(0.1)
            time.sleep(0.5)
            kids = subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True).stdout.split()
            p.kill()
        try:
            rc = p.wait(timeout=300)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = "hung (killed after 300 s)"
        if how == "mpirun-killed":   # its orphans: wait for them, never leave them behind
            while any(os.path.exists(f"/proc/{k}") for k in kids) and time.time() - t0 < 300:
                time.sleep(0.2)
            for k in kids:
                if os.path.exists(f"/proc/{k}"):
                    os.kill(int(k), 9)
        wall = time.time() - t0
        r = subprocess.run([*HBTOOL, "interference", str(d), "--format", "json"], capture_output=True, text=True,
                           timeout=300)
        run = json.loads(r.stdout)["runs"][0] if r.returncode == 0 else {}
        out.append({"how": how, "exit": rc, "wall_s": wall, "class": run.get("class", "error"),
                    "said": run.get("failure") or (r.stderr.strip() or "no failure reported")})
    return out


def fortran(tmp: Path, iters: int = 40) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HBPROF_") and k != "LD_PRELOAD"}
    from hbtool.io.hbprof import read_rank_stream

    out = []
    for prog in ("fstencil", "fstencil_h", "fstencil_f08"):
        exe = MPI / "examples" / "bin" / prog
        if not exe.exists():
            continue
        for np_ in (2, 4):
            d = tmp / f"{prog}-{np_}"
            d.mkdir(parents=True, exist_ok=True)
            cmd = ["mpirun", "--oversubscribe", "--allow-run-as-root", "-np", str(np_), "-x", f"LD_PRELOAD={LIB}",
                   "-x", f"HBPROF_DIR={d}", "-x", "HBPROF_KEEP_RANK_FILES=1", str(exe), str(iters), "2"]
            r = subprocess.run(cmd, cwd=d, env=env, capture_output=True, text=True, timeout=300)
            ranks = [read_rank_stream(str(f)) for f in sorted(d.glob("hbprof-*-r*.hbp"))]
            segs = sorted({len(x["segment"]) for x in ranks})
            p2p = sorted({int(x["values"][:, x["names"].index("p2p_blocking")].sum()) for x in ranks})
            out.append({"prog": prog, "np": np_, "exit": r.returncode, "ranks": len(ranks), "segments": segs,
                        "p2p": p2p, "ok": r.returncode == 0 and len(ranks) == np_ and segs == [iters + 3]
                        and p2p == [2 * iters]})
    return out


APPS = {
    # a 3d Lennard-Jones melt (LAMMPS's examples/melt at 2048 atoms and 1000 steps)
    "lammps": {"files": {"in.bench": "units lj\natom_style atomic\nlattice fcc 0.8442\n"
                                     "region box block 0 8 0 8 0 8\ncreate_box 1 box\ncreate_atoms 1 box\n"
                                     "mass 1 1.0\nvelocity all create 3.0 87287 loop geom\n"
                                     "pair_style lj/cut 2.5\npair_coeff 1 1 1.0 1.0 2.5\nneighbor 0.3 bin\n"
                                     "neigh_modify every 20 delay 0 check no\nfix 1 all nve\nthermo 50\n"
                                     "run 1000\n"},
               "cmd": ["lmp", "-in", "in.bench", "-log", "log.lammps", "-screen", "none"], "exe": "lmp"},
    "hpcc": {"files": {}, "cmd": ["hpcc"], "exe": "hpcc"},
}
HPCC_EXAMPLE = Path("/usr/share/doc/hpcc/examples/_hpccinf.txt")
#: the CPU hog's levels: (name, processes, duty cycle, pinned one per core)
HOGS = [("hog 1x25%", 1, 0.25, False), ("hog 1x50%", 1, 0.5, False), ("hog 1x75% pinned", 1, 0.75, True)]
INJECT_LEVELS = (0.1, 0.3)
HOG_CODE = """
import sys, time
duty, period = float(sys.argv[1]), 0.02
while True:
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < duty * period:
        pass
    if duty < 1:
        time.sleep((1 - duty) * period)
"""


def app_dir(app: str, np_: int, d: Path) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    for name, text in APPS[app]["files"].items():
        (d / name).write_text(text)
    if app == "hpcc":   # Debian's example, the process grid for np ranks
        p, q = (1, 2) if np_ == 2 else (2, 2)
        lines = HPCC_EXAMPLE.read_text().splitlines()
        lines[10], lines[11] = f"{p}            Ps", f"{q}            Qs"
        (d / "hpccinf.txt").write_text("\n".join(lines) + "\n")
    return d


def app_run(app: str, np_: int, d: Path, preload: list[str], env_extra: dict,
            prefix: tuple[str, ...] = ()) -> tuple[float, Path | None]:
    """One run in d: mpirun's wall time and the run file (None without the profiler); the
    CPU time of mpirun and its ranks in app_run.cpu_s. prefix: a command that runs mpirun
    (perf record ... --)."""
    for f in list(d.glob("hbprof-*")) + list(d.glob("count-*")) + list(d.glob("hpccoutf.txt")):
        f.unlink()
    env = {k: v for k, v in os.environ.items() if not k.startswith("HBPROF_") and k != "LD_PRELOAD"}
    env.update(OMPI_MCA_mpi_yield_when_idle="1")
    cmd = [*prefix, "mpirun", "--oversubscribe", "--allow-run-as-root", "-np", str(np_)]
    if preload:
        cmd += ["-x", "LD_PRELOAD=" + ":".join(preload), "-x", f"HBPROF_DIR={d}", "-x", "HBPROF_QUIET=1",
                "-x", f"PMPI_COUNTER_DIR={d}"]
    for k, v in env_extra.items():
        cmd += ["-x", f"{k}={v}"]
    ru0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    r = subprocess.run(cmd + APPS[app]["cmd"], cwd=d, env=env, capture_output=True, text=True, timeout=1800)
    wall, ru1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    app_run.cpu_s = ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime
    if r.returncode != 0:
        sys.exit(f"eval_interference: {app} failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    runs = [p for p in d.glob("hbprof-*.hbp") if not re.search(r"-r\d+$", p.stem)]
    return wall, (runs[0] if runs else None)


def build_counter(tmp: Path) -> Path:
    so = tmp / "pmpi_counter.so"
    subprocess.run(["mpicc", "-shared", "-fPIC", "-O2", "-o", str(so), str(ROOT / "benchmarks" / "pmpi_counter.c"),
                    "-ldl"], check=True)
    return so


def _die_with_parent() -> None:
    """In a hog: SIGKILL when this benchmark ends, however it ends (prctl PR_SET_PDEATHSIG)."""
    import ctypes
    import signal

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)


class Hog:
    """CPU hogs beside a run: processes spinning for a duty cycle of every 20 ms, pinned or not."""

    def __init__(self, procs: int, duty: float, pinned: bool):
        self.procs = []
        for k in range(procs):
            cmd = [sys.executable, "-c", HOG_CODE, str(duty)]
            if pinned:
                cmd = ["taskset", "-c", str(k % (os.cpu_count() or 1))] + cmd
            self.procs.append(subprocess.Popen(cmd, preexec_fn=_die_with_parent))

    def __enter__(self):
        time.sleep(0.2)
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
            p.wait()


def rank_counts(d: Path) -> list[dict]:
    """Per rank: the profile's counts (rank files) and the counter's, category by category."""
    from hbtool.io.hbprof import read_rank_stream

    out = []
    for f in sorted(d.glob("hbprof-*-r*.hbp")):
        x = read_rank_stream(str(f))
        rank = int(re.search(r"-r(\d+)$", f.stem).group(1))
        prof = {"segments": len(x["segment"])}
        for name in ("p2p_blocking", "p2p_nonblocking", "coll_one_to_all", "coll_all_to_one", "coll_all_to_all"):
            prof[name] = int(round(float(x["values"][:, x["names"].index(name)].sum())))
        theirs = dict(line.split() for line in (d / f"count-{rank}.txt").read_text().splitlines())
        out.append({"rank": rank, "profile": prof, "counter": {k: int(v) for k, v in theirs.items()}})
    return out


def app_overhead(app: str, np_: int, d: Path, runs: int) -> dict:
    """With and without the profiler, interleaved: medians of mpirun's wall time and of the
    CPU time of mpirun and its ranks (less disturbed by other work on the machine)."""
    times = {False: [], True: []}
    cpu = {False: [], True: []}
    for k in range(runs):
        for with_prof in ((False, True) if k % 2 == 0 else (True, False)):
            times[with_prof].append(app_run(app, np_, d, [str(LIB)] if with_prof else [], {})[0])
            cpu[with_prof].append(app_run.cpu_s)
    bare, profd = statistics.median(times[False]), statistics.median(times[True])
    cb, cp = statistics.median(cpu[False]), statistics.median(cpu[True])
    return {"bare_s": bare, "profiled_s": profd, "overhead": profd / bare - 1, "runs": runs,
            "bare": times[False], "profiled": times[True], "cpu_bare_s": cb, "cpu_profiled_s": cp,
            "cpu_overhead": cp / cb - 1}


def application(app: str, np_: int, args, tmp: Path, counter: Path) -> dict:
    from hbtool.io.hbprof import read_hbprof

    d = app_dir(app, np_, tmp / f"{app}-{np_}")
    prof = [str(LIB)]
    if args.overhead_only:
        return {"app": app, "np": np_, "overhead": app_overhead(app, np_, d, args.overhead_runs)}
    # counts, beside the independent counter (loaded first: it forwards to the profiler)
    app_run(app, np_, d, [str(counter), str(LIB)], {"HBPROF_KEEP_RANK_FILES": "1"})
    counts = rank_counts(d)
    calls = statistics.median(sum(v for k, v in c["counter"].items() if k != "segments")
                              + c["counter"]["segments"] - 1 for c in counts)
    runs = []   # (condition, level, wall, profile)

    def profiled(cond: str, level: str, env: dict, i: int):
        rd = d / f"{cond}-{level}-{i}".replace(" ", "_").replace("%", "")
        rd.mkdir(exist_ok=True)
        for name in [*APPS[app]["files"], "hpccinf.txt"]:
            if (d / name).exists():
                (rd / name).write_bytes((d / name).read_bytes())
        wall, run_file = app_run(app, np_, rd, prof, env)
        p = read_hbprof(str(run_file), name=f"{app}-{np_}-{rd.name}")
        runs.append({"condition": cond, "level": level, "wall_s": wall, "profile": p})
        print(f"  {app} -np {np_} {cond} {level} #{i}: {wall:.2f} s", file=sys.stderr)

    for i in range(args.clean):
        profiled("clean", "", {}, i)
    clean = [r for r in runs if r["condition"] == "clean"]
    t_clean = min(r["profile"].run_time_ns / 1e9 for r in clean)
    mean_us = 5000.0
    for f in INJECT_LEVELS:
        prob = f * t_clean / (max(calls, 1) * mean_us * 1e-6)
        for i in range(args.repeats):
            profiled("injector", f"{100 * f:.0f}%", {"HBPROF_INJECT": f"{mean_us:g},{mean_us / 5:g},{prob:.6g}",
                                                     "HBPROF_INJECT_SEED": str(seed_of(args.seed, app, np_, f, i)),
                                                     "HBPROF_INJECT_CALLS": "mpi"}, i)
    for name, procs, duty, pinned in HOGS:
        for i in range(args.repeats):
            with Hog(procs, duty, pinned):
                profiled("hog", name[4:], {}, i)
    return {"app": app, "np": np_, "counts": counts, "calls_per_rank": calls, "clean_s": t_clean,
            "rows": verdict_rows(runs), "overhead": app_overhead(app, np_, d, args.overhead_runs)}


def kept_runs(app: str, np_: int, tmp: Path) -> list[dict]:
    """The profiled runs a --keep folder holds, for --reanalyse (their names say the condition)."""
    from hbtool.io.hbprof import read_hbprof

    runs = []
    for rd in sorted((tmp / f"{app}-{np_}").iterdir()):
        m = re.fullmatch(r"(clean|injector|hog)-(.*)-(\d+)", rd.name)
        files = [f for f in rd.glob("hbprof-*.hbp") if not re.search(r"-r\d+$", f.stem)] if m else []
        if files:
            level = re.sub(r"(\d+)(?=$|_)", r"\1%", m.group(2)).replace("_", " ")   # 1x75_pinned: 1x75% pinned
            runs.append({"condition": m.group(1), "level": level, "wall_s": float("nan"),
                         "profile": read_hbprof(str(files[0]), name=f"{app}-{np_}-{rd.name}")})
    order = {"clean": 0, "injector": 1, "hog": 2}
    return sorted(runs, key=lambda r: order[r["condition"]])


def verdict_rows(runs: list[dict]) -> list[dict]:
    """Each run: the truth from the clean time, the class alone and with the clean runs as reference."""
    from hbtool.analyzers.interference import assess, classify, estimate

    clean = [r for r in runs if r["condition"] == "clean"]
    t_clean = min(r["profile"].run_time_ns / 1e9 for r in clean)
    rows = []
    for r in runs:
        p = r["profile"]
        t = p.run_time_ns / 1e9
        lost = max(100.0 * (t - t_clean) / t, 0.0)
        (alone,), _ = assess([p])
        refs = [c["profile"] for c in clean if c is not r]
        (ref,), _ = assess([p], references=refs)
        paces = [estimate(c).run_pace for c in refs]
        per_work = max(100.0 * (1 - min(paces) / ref.run_pace), 0.0) if ref.run_pace and all(paces) else float("nan")
        rows.append({"condition": r["condition"], "level": r["level"], "run_s": t, "wall_s": r["wall_s"],
                     "lost_percent": lost, "truth": classify(lost), "alone_percent": alone.interference_percent,
                     "alone": alone.klass, "alone_seed": alone.evidence["seed"], "alone_decided_by": alone.decided_by,
                     "ref_percent": ref.interference_percent, "ref": ref.klass, "ref_decided_by": ref.decided_by,
                     "coverage": ref.reference_coverage, "basis": ref.reference_basis, "per_work_percent": per_work})
    return rows


def print_overhead(res: dict) -> None:
    o = res["overhead"]
    print(f"  overhead ({res['app']}, {res['np']} ranks), median of {o['runs']} interleaved runs each: mpirun wall "
          f"time bare {o['bare_s']:.2f} s, profiled {o['profiled_s']:.2f} s: {100 * o['overhead']:+.1f} % (bare "
          f"{min(o['bare']):.2f}-{max(o['bare']):.2f}, profiled {min(o['profiled']):.2f}-{max(o['profiled']):.2f}); "
          f"CPU time of mpirun and the ranks bare {o['cpu_bare_s']:.2f} s, profiled {o['cpu_profiled_s']:.2f} s: "
          f"{100 * o['cpu_overhead']:+.1f} %")


def print_application(res: dict) -> None:
    app, np_ = res["app"], res["np"]
    if "rows" not in res:
        return print_overhead(res)
    print(f"\n## {app}, {np_} ranks: clean time {res['clean_s']:.2f} s (the fastest clean run, MPI_Init to "
          f"MPI_Finalize)" + (f", {res['calls_per_rank']:.0f} MPI calls per rank" if "counts" in res else ""))
    if "counts" in res:
        keys = list(res["counts"][0]["counter"])
        ok = all(c["profile"][k] == c["counter"][k] for c in res["counts"] for k in c["profile"])
        print(f"  counts per rank, profile / independent counter ({'all equal' if ok else 'DIFFERENT'}):")
        for c in res["counts"]:
            print("    rank %d: " % c["rank"] + ", ".join(
                f"{k} {c['profile'][k]}/{c['counter'][k]}" if k in c["profile"] else f"{k} -/{c['counter'][k]}"
                for k in keys))
    print(f"  {'condition':<24} {'run s':>6} {'lost %':>7} {'truth':>7} {'alone %':>8} {'alone':>7} "
          f"{'with reference %':>17} {'class':>7} {'decided by':>15} {'per work %':>10}")
    for r in res["rows"]:
        mark = "" if r["ref"] == r["truth"] else "  (wrong)"
        if r["ref"] == "low" and r["lost_percent"] > 15:
            mark = "  (LOW for a run that lost > 15 %)"
        print(f"  {(r['condition'] + ' ' + r['level']).strip():<24} {r['run_s']:6.2f} {r['lost_percent']:7.1f} "
              f"{r['truth']:>7} {r['alone_percent']:8.1f} {r['alone']:>7} {r['ref_percent']:17.1f} {r['ref']:>7} "
              f"{r['ref_decided_by'] + ('/' + r['basis'] if r['ref_decided_by'] == 'reference' else ''):>15} "
              f"{r['per_work_percent']:10.1f}{mark}")
    if "overhead" in res:
        print_overhead(res)


def summary(results: list[dict]) -> None:
    rows = [r for res in results for r in res.get("rows", [])]
    if not rows:
        return
    right = sum(r["ref"] == r["truth"] for r in rows)
    alone = sum(r["alone"] == r["truth"] for r in rows)
    bad = [r for r in rows if r["ref"] == "low" and r["lost_percent"] > 15]
    bad_alone = [r for r in rows if r["alone"] == "low" and r["lost_percent"] > 15]
    print(f"\n## verdicts over {len(rows)} runs of real applications: right class {right}/{len(rows)} "
          f"({100 * right / len(rows):.0f} %) with the clean runs as reference, {len(bad)} 'low' for a run that "
          f"lost more than 15 %; alone (no reference) {alone}/{len(rows)} ({100 * alone / len(rows):.0f} %), "
          f"{len(bad_alone)} such 'low' (none of them is told to trust the run: without a reference a low "
          f"verdict says a slowdown of the whole run cannot be seen)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=16, help="runs per example, interference rising (default 16)")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--mean-us", type=float, default=100000.0, help="mean injected delay (us)")
    ap.add_argument("--sd-us", type=float, default=20000.0, help="its standard deviation (us)")
    ap.add_argument("--max-prob", type=float, default=0.003, help="probability per call in the last run")
    ap.add_argument("--overhead-runs", type=int, default=11)
    ap.add_argument("--overhead-work", type=int, default=550, help="stencil --work for ~100 Allreduce/s")
    ap.add_argument("--scale-segments", type=int, default=1_000_000)
    ap.add_argument("--scale-ranks", type=int, default=64)
    ap.add_argument("--scale-repeats", type=int, default=3)
    ap.add_argument("--parts", default="accuracy,overhead,scale,faults,fortran",
                    help="comma list; also lammps, hpcc (real applications, about 25 min each here)")
    ap.add_argument("--np", default="2,4", help="ranks for the lammps and hpcc parts (default 2,4)")
    ap.add_argument("--clean", type=int, default=3, help="lammps, hpcc: clean runs (default 3)")
    ap.add_argument("--repeats", type=int, default=3, help="lammps, hpcc: runs per interference level (default 3)")
    ap.add_argument("--overhead-only", action="store_true", help="lammps, hpcc: only the overhead")
    ap.add_argument("--reanalyse", action="store_true",
                    help="lammps, hpcc: judge again the runs a --keep folder holds, without running anything")
    ap.add_argument("--keep", metavar="DIR")
    args = ap.parse_args()
    if not LIB.exists():
        sys.exit("eval_interference: build the profiler first: make -C native_tracer/mpi")
    parts = set(args.parts.split(","))
    if args.reanalyse and not args.keep:
        sys.exit("eval_interference: --reanalyse reads the runs of a --keep DIR folder: give --keep DIR")
    ctx = None if args.keep else tempfile.TemporaryDirectory()
    tmp = Path(args.keep or ctx.name)
    tmp.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    print(f"# interference: seed {args.seed}; parts {','.join(sorted(parts))}")
    if "accuracy" in parts:
        print(f"# accuracy: injected delays N({args.mean_us:g} us, {args.sd_us:g} us), probability 0 .. "
              f"{args.max_prob:g} per call")
        res = accuracy(args, tmp)
        for prog, rows in res.items():
            print(f"\n## {prog}: {len(rows)} runs of 4 ranks")
            print(f"{'run':>12} {'prob':>7} {'time s':>7} {'measured %':>10} {'estimated %':>11} {'decided by':>14} "
                  f"{'alone %':>7} {'seed %':>6} {'injected %':>10} {'accuracy':>8} {'alone':>6} {'seed':>6} "
                  f"{'vs injected':>11}")
            from hbtool.analyzers.interference import probability_high

            for r in rows:
                r["accuracy_injected"] = 1 - abs(probability_high(r["injected_percent"]) - r["probability_estimated"])
                r["accuracy_alone"] = 1 - abs(r["probability_measured"] - probability_high(r["alone_percent"]))
            for r in sorted(rows, key=lambda r: r["probability"]):
                by = r["decided_by"] + (f"/{r['basis']}" if r["decided_by"] == "reference" else "")
                print(f"{r['run']:>12} {r['probability']:7.4f} {r['run_time_s']:7.3f} {r['measured_percent']:10.1f} "
                      f"{r['estimated_percent']:11.1f} {by:>14} {r['alone_percent']:7.1f} {r['seed_percent']:6.1f} "
                      f"{r['injected_percent']:10.1f} {r['accuracy']:8.3f} {r['accuracy_alone']:6.3f} "
                      f"{r['seed_accuracy']:6.3f} {r['accuracy_injected']:11.3f}")
            pp = [abs(r["measured_percent"] - r["estimated_percent"]) for r in rows]
            ai = [r["accuracy_injected"] for r in rows]
            circular = sum(r["decided_by"] == "reference" and r["basis"] == "time" for r in rows)

            def med_min(key):
                v = [r[key] for r in rows]
                return f"median {statistics.median(v):.3f}, min {min(v):.3f}"

            print(f"  accuracy against the measured truth (the run's time against the fastest run's, nothing "
                  f"subtracted): the verdict given all the runs {med_min('accuracy')} (|measured - estimated|: "
                  f"median {statistics.median(pp):.1f} points, max {max(pp):.1f}); the run alone "
                  f"{med_min('accuracy_alone')}; seed 004's figure {med_min('seed_accuracy')}")
            print(f"  {circular} of {len(rows)} verdicts rest on the whole run's time against the fastest run's "
                  f"(reference/time: the work is under half of the time), the truth's own figure: their "
                  f"accuracy shows that, not an independent estimate")
            print(f"  accuracy against the injector's own truth (per segment, the largest delay of any rank): "
                  f"{med_min('accuracy_injected')}; the runs' measured loss minus the injected: median "
                  f"{statistics.median(r['measured_percent'] - r['injected_percent'] for r in rows):+.1f} points "
                  f"(the machine's own load)")
    if "overhead" in parts:
        o = overhead(args, tmp)
        print(f"\n## profiler overhead: stencil, 4 ranks, ~{o['rate_hz']:.0f} Allreduce/s, median of "
              f"{o['runs']} interleaved runs each")
        print(f"  bare {o['bare_s']:.3f} s, profiled {o['profiled_s']:.3f} s: {100 * o['overhead']:+.1f} % "
              f"(ranges: bare {o['spread_bare'][0]:.3f}-{o['spread_bare'][1]:.3f}, profiled "
              f"{o['spread_profiled'][0]:.3f}-{o['spread_profiled'][1]:.3f})")
    if "scale" in parts:
        s = scale(args, tmp)
        print(f"\n## scale: {s['segments']:,} segments x {s['ranks']} ranks ({s['bytes'] / 1e9:.1f} GB run file)")
        print(f"  hbtool interference, end to end: {s['warm_s']:.2f} s (first run, cold: {s['cold_s']:.2f} s); "
              f"{s['interfered']} segments judged interfered of {s['hit']} hit")
    if "faults" in parts:
        print("\n## faults: stencil, 4 ranks, rank 1 ends at iteration 40 (or mpirun is killed)")
        for f in faults(tmp):
            print(f"  {f['how']:<14} exit {f['exit']!s:<4} {f['wall_s']:6.1f} s  {f['class']:<7} {f['said']}")
    if "fortran" in parts:
        print("\n## fortran: segments and blocking p2p calls per rank (want ITERATIONS + 3 = 43 and 80)")
        for f in fortran(tmp):
            print(f"  {f['prog']:<13} -np {f['np']}: exit {f['exit']}, {f['ranks']} rank files, segments "
                  f"{f['segments']}, p2p_blocking {f['p2p']}: {'right' if f['ok'] else 'WRONG'}")
    results = []
    for app in ("lammps", "hpcc"):
        if app not in parts:
            continue
        if not shutil.which(APPS[app]["exe"]) or (app == "hpcc" and not HPCC_EXAMPLE.exists()):
            print(f"\n## {app}: skipped: not installed (apt-get install -y lammps hpcc)")
            continue
        counter = None if args.reanalyse else build_counter(tmp)
        for np_ in map(int, args.np.split(",")):
            if args.reanalyse:
                runs = kept_runs(app, np_, tmp)
                if not runs:
                    continue
                results.append({"app": app, "np": np_, "rows": verdict_rows(runs),
                                "clean_s": min(r["profile"].run_time_ns for r in runs
                                               if r["condition"] == "clean") / 1e9})
            else:
                results.append(application(app, np_, args, tmp, counter))
            print_application(results[-1])
    summary(results)
    print(f"\n(total {time.time() - t0:.0f} s)")
    if ctx:
        ctx.cleanup()


if __name__ == "__main__":
    main()
