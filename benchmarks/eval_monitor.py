"""Precision and latency of the tracer's online monitor (issue 16): its busy-waiting and
conditional-waiting reports, on our example programs and on the NAS kernels, with the
thread fault injector, on a quiet machine and beside a CPU hog.

    python benchmarks/eval_monitor.py [--runs 2] [--seed 2026] [--modes central,ring]
                                      [--programs examples,npb] [--kernels MG,LU,FT,EP]
                                      [--compilers gcc,clang] [--threads 2,4] [--class W]
                                      [--hog both|off|on] [--wait-ms 300] [--skip LU:4] [--json FILE]
                                      [--keep DIR] [--beats openmp|source]
    python benchmarks/eval_monitor.py --command "PROGRAM ARGS" [--cwd DIR] [--threads 2] ...

Programs (each under `hbtool record`, HBTRACE_MONITOR=central or ring):
  pi_pthread  pthreads, API beats (~1 ms of work each), no synchronisation between threads;
  jacobi_omp  OpenMP, API beats, every thread on its own grid;
  heat_omp    OpenMP with no heartbeat call: automatic beats (HBTRACE_MONITOR_BEATS=openmp),
              a dynamic and a static loop per step, the team meets at their barriers;
  NPB MG, LU, FT, EP (W), built unmodified with gcc and clang by benchmarks/eval_npb.py's
              helpers, automatic OpenMP beats (HBTRACE_MONITOR_BEATS=openmp); with
              `--beats source`, a copy with the program's own beats added to every shared
              loop (benchmarks/npb_source_beats.py), which the monitor judges (api).
  --command   any program (one that nobody here wrote: `cd-hit -i prot.fa ...`), run in
              --cwd, OMP_NUM_THREADS from --threads, judged by its automatic OpenMP beats
              (the program's own heartbeat calls, when it makes some, with --beats source);
              nothing else is run.
Per program, team size and mode: `--runs` normal runs (every busy-waiting or conditional-
waiting report is spurious) and `--runs` runs of each of the injector's busy and cond
faults (`--inject busy|cond --thread N --beat LO-HI --inject-seed S`, S = seed, seed+1,
...; N drawn from S among the threads that beat in the first normal run, LO-HI 10-60 % of
that thread's beats there; before 2026-12-01 `--thread random` and 10-60 % of the most beats
of any thread, which put some faults of a thread that beats less past its last beat),
`--wait-ms` long. All of
it once alone and once beside one busy-loop process per CPU (`--hog both`).

A report is true when it names the victim, the injected behaviour, and its onset lies
within [fire - 1 ms, fire + wait + 1 ms] (the victim's last beat before the fault is the
onset the monitor gives); every other busy-waiting or conditional-waiting report is
false (RUNNING and EXITED are not counted). Precision = true / all reports. Recall =
faults with a true report / faults that fired. Latency = first true report's detection
time - the fault's start, in ms and in beat periods: the victim's mean interval between
its beats before the fault (its run time before the fault / its beats then) -- the beat
period a heart rate states -- and, for reference, the median interval.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import numpy as np  # noqa: E402

import eval_npb  # noqa: E402  (build, env_for, hbtool, NPB)
from hbtool.io import read_heartbeats  # noqa: E402

EXAMPLES = ROOT / "native_tracer" / "examples" / "bin"
FAULT_BEHAVIOR = {"busy": "busy-waiting", "cond": "conditional-waiting"}
SLACK_NS = 1_000_000


def example_commands(threads: int) -> dict[str, tuple[list[str], str]]:
    """name -> (command, the beats the monitor judges)."""
    return {
        "pi_pthread": ([str(EXAMPLES / "pi_pthread"), "--threads", str(threads), "--beats", "600",
                        "--work", "640000"], "api"),
        "jacobi_omp": ([str(EXAMPLES / "jacobi_omp"), "--threads", str(threads), "--beats", "600",
                        "--size", "96", "--work", "4"], "api"),
        "heat_omp": ([str(EXAMPLES / "heat_omp"), "--threads", str(threads), "--size", "600",
                      "--steps", "300", "--chunk", "16"], "openmp"),
    }


def fault_place(per_thread: dict[int, int], seed: int) -> tuple[int, str]:
    """The victim (drawn from the seed among the threads that beat in a normal run) and the
    beats its fault is drawn from: 10-60 % of that thread's beats there. (A range of the most
    beats of any thread put the faults of a thread that beats less past its last beat: 5 of
    12 of kalign's did not fire, its thread 0 making a fourth of thread 1's beats.)"""
    rng = np.random.default_rng(seed)
    victim = int(rng.choice(sorted(per_thread)))
    n = per_thread[victim]
    return victim, f"{max(2, n // 10)}-{max(3, n * 6 // 10)}"


def run_one(cmd: list[str], out: Path, env: dict, kind: str, place: tuple[int, str] | None, seed: int,
            wait_ms: int, cwd: Path | None) -> dict | None:
    """One `hbtool record` run; the truth (a normal run's is {"kind": "normal"}), or None."""
    args = ["record", "-o", str(out), "--force"]
    if kind != "normal":
        args += ["--inject", kind, "--thread", str(place[0]), "--beat", place[1], "--inject-seed", str(seed),
                 "--inject-wait-ms", str(wait_ms)]
    r = eval_npb.hbtool(args + ["--"] + cmd, env, cwd=cwd)
    if r.returncode != 0:
        print(f"  {kind}: record failed ({r.returncode}): {r.stderr.strip()[-300:]}", file=sys.stderr)
        return None
    if kind == "normal":
        return {"kind": "normal"}
    tf = out / "inject-truth.json"
    return json.loads(tf.read_text()) if tf.exists() else None


def score(out: Path, truth: dict) -> dict:
    """The run's reports, true reports, and the latency of the first true one."""
    tr = read_heartbeats(out)
    m = tr.monitor
    rep = m[(m["kind"] == "behavior") & m["behavior"].isin(list(FAULT_BEHAVIOR.values()))]
    res = {"reports": int(len(rep)), "true": 0, "fired": False, "found": False}
    if truth["kind"] == "normal" or not truth.get("fired"):
        return res
    res["fired"] = True
    victim, t0 = int(truth["thread"]), int(truth["fired_at"]["mono_ns"])
    t1 = t0 + int(truth["params"]["wait_ms"]) * 1_000_000
    want = FAULT_BEHAVIOR[truth["kind"]]
    # the trace's times count from its start; the truth's mono_ns is CLOCK_MONOTONIC
    off = int(truth["fired_at"]["mono_ns"]) - int(truth["fired_at"]["trace_ns"])
    ok = rep[(rep["thread"] == victim) & (rep["behavior"] == want)
             & (rep["onset_ns"] + off >= t0 - SLACK_NS) & (rep["onset_ns"] + off <= t1 + SLACK_NS)]
    res["true"] = int(len(ok))
    if len(ok):
        res["found"] = True
        at = int(ok["t_ns"].min()) + off
        b = tr.beats
        bt = np.sort(b.loc[b["thread"] == victim, "t_ns"].to_numpy(np.int64)) + off
        before = bt[bt <= t0]
        res["latency_ms"] = (at - t0) / 1e6
        if before.size >= 2:
            res["period_ms"] = (before[-1] - before[0]) / (before.size - 1) / 1e6
            res["median_ms"] = float(np.median(np.diff(before))) / 1e6
            res["latency_periods"] = res["latency_ms"] / res["period_ms"]
    return res


def evaluate(name: str, cmd: list[str], beats_src: str, threads: int, a, work: Path,
             cwd: Path | None, hog: bool) -> list[dict]:
    rows = []
    base_env = eval_npb.env_for(threads)
    base_env["HBTRACE_MONITOR_BEATS"] = beats_src
    for mode in a.modes.split(","):
        env = dict(base_env, HBTRACE_MONITOR=mode)
        d = work / f"{name}-{threads}-{mode}-{'hog' if hog else 'alone'}"
        per_thread = None
        for kind in ["normal", "busy", "cond"]:
            for i in range(a.runs):
                out = d / f"{kind}{i}"
                t = time.monotonic()
                if kind != "normal" and not per_thread:
                    continue
                place = fault_place(per_thread, a.seed + i) if kind != "normal" else None
                truth = run_one(cmd, out, env, kind, place, a.seed + i, a.wait_ms, cwd)
                if truth is None:
                    continue
                if kind == "normal" and per_thread is None:
                    # beats per beating thread (a program's main thread may make none), every
                    # source counted as the injector counts them
                    per_thread = eval_npb.beats_of_threads(out, env)
                r = score(out, truth)
                r.update(program=name, threads=threads, mode=mode, hog=hog, kind=kind, seed=a.seed + i)
                rows.append(r)
                print(f"  {name} {threads}t {mode} {'hog' if hog else 'alone'} {kind}{i}: reports {r['reports']} "
                      f"true {r['true']}" + (f" latency {r['latency_ms']:.1f} ms" if r.get("found") else "")
                      + f" ({time.monotonic() - t:.1f} s)", file=sys.stderr, flush=True)
                if a.keep:
                    dest = a.keep / out.relative_to(work)
                    shutil.rmtree(dest, ignore_errors=True)
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    shutil.move(str(out), dest)
                else:
                    shutil.rmtree(out, ignore_errors=True)
        if per_thread is None:
            print(f"  {name} {threads}t {mode}: no normal run, skipped", file=sys.stderr)
    return rows


def summary(rows: list[dict]) -> dict:
    rep = sum(r["reports"] for r in rows)
    tp = sum(r["true"] for r in rows)
    fired = [r for r in rows if r["fired"]]
    found = [r for r in fired if r["found"]]
    lat = sorted(r["latency_periods"] for r in found if "latency_periods" in r)
    ms = sorted(r["latency_ms"] for r in found)

    def q(xs, p):
        return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else float("nan")

    return {"reports": rep, "true": tp, "precision": tp / rep if rep else float("nan"),
            "faults": len(fired), "found": len(found), "recall": len(found) / len(fired) if fired else float("nan"),
            "latency_periods_median": statistics.median(lat) if lat else float("nan"),
            "latency_periods_p90": q(lat, 0.9), "latency_ms_median": statistics.median(ms) if ms else float("nan"),
            "spurious_normal": sum(r["reports"] for r in rows if r["kind"] == "normal"),
            "normal_runs": sum(1 for r in rows if r["kind"] == "normal")}


#: a CPU hog: a busy loop that ends when the evaluation that started it is gone, however it
#: ended (a hog left behind by an evaluation stopped as it started them ran beside every
#: later run for an hour: `hog off` was then beside one hog)
HOG = "import os\np = os.getppid()\nwhile os.getppid() == p:\n    for _ in range(1000000):\n        pass\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=2, help="runs per fault kind and configuration (default 2)")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--modes", default="central,ring")
    ap.add_argument("--programs", default="examples,npb", help="examples, npb or both")
    ap.add_argument("--examples", default="pi_pthread,jacobi_omp,heat_omp")
    ap.add_argument("--kernels", default="MG,LU,FT,EP")
    ap.add_argument("--compilers", default="gcc,clang")
    ap.add_argument("--threads", default="2,4")
    ap.add_argument("--class", dest="klass", default="W", help="NPB problem class (default W)")
    ap.add_argument("--skip", default="LU:4", help="KERNEL:THREADS pairs left out (default LU:4: minutes "
                    "per run on 2 cores, its pipeline spin-waits); none: nothing")
    ap.add_argument("--hog", choices=["both", "off", "on"], default="both",
                    help="beside one busy-loop process per CPU: both (default), off, on")
    ap.add_argument("--wait-ms", type=int, default=300, help="busy and cond: how long (default 300)")
    ap.add_argument("--json", type=Path, help="also write every run's figures here")
    ap.add_argument("--keep", type=Path, help="keep every run's trace (and its truth) under this folder")
    ap.add_argument("--beats", choices=["openmp", "source"], default="openmp",
                    help="NPB: the unmodified kernels' automatic beats (default), or a copy with source beats "
                         "added (benchmarks/npb_source_beats.py), which the monitor then judges")
    ap.add_argument("--command", help="evaluate this program instead: its command line, split as the shell "
                                      "would (OMP_NUM_THREADS gives its threads)")
    ap.add_argument("--cwd", type=Path, default=Path("."), help="the folder --command runs in (default: here)")
    a = ap.parse_args(argv)
    command = eval_npb.split_command(a.command, a.cwd, "eval_monitor") if a.command is not None else None
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))   # the hogs and the work folder go too
    progs = a.programs.split(",") if command is None else ["command"]
    if "npb" in progs and not (eval_npb.NPB / "MG").is_dir():
        sys.exit(f"eval_monitor: NPB is not at {eval_npb.NPB}")
    work = Path(tempfile.mkdtemp(prefix="hbtool-eval-monitor-"))
    rows: list[dict] = []
    hogs_on = {"both": [False, True], "off": [False], "on": [True]}[a.hog]
    try:
        builds = {}
        if "npb" in progs:
            for cc in a.compilers.split(","):
                if shutil.which(cc):
                    builds[cc] = eval_npb.build(cc, a.klass, a.kernels.split(","), work,
                                                source=a.beats == "source")
        for hog in hogs_on:
            hogs = []
            try:
                for _ in range(os.cpu_count() or 1) if hog else ():
                    hogs.append(subprocess.Popen([sys.executable, "-c", HOG]))
                for n in map(int, a.threads.split(",")):
                    if command is not None:
                        rows += evaluate(Path(command[0]).name, command, "api" if a.beats == "source" else "openmp",
                                         n, a, work, a.cwd.resolve(), hog)
                    if "examples" in progs:
                        cmds = example_commands(n)
                        for name in a.examples.split(","):
                            cmd, src = cmds[name]
                            rows += evaluate(name, cmd, src, n, a, work, None, hog)
                    for cc, bdir in builds.items():
                        for k in a.kernels.split(","):
                            if f"{k}:{n}" in a.skip.split(","):
                                continue
                            exe = bdir / "bin" / f"{k.lower()}.{a.klass}"
                            rows += evaluate(f"{k}-{cc}", [str(exe)], "api" if a.beats == "source" else "openmp",
                                             n, a, work, bdir, hog)
            finally:
                for p in hogs:
                    p.kill()
                    p.wait()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if a.json:
        a.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(a).items()}, "runs": rows}, indent=1))

    def line(label, rs):
        s = summary(rs)
        print(f"{label:<26}{s['precision']:>9.3f}{s['true']:>5}/{s['reports']:<5}{s['recall']:>7.3f}"
              f"{s['found']:>4}/{s['faults']:<4}{s['latency_periods_median']:>8.2f}{s['latency_periods_p90']:>8.2f}"
              f"{s['latency_ms_median']:>9.1f}{s['spurious_normal']:>6} in {s['normal_runs']}")

    print()
    print(f"{'':<26}{'precision':>9}{'true/all':>11}{'recall':>7}{'found':>9}{'lat med':>8}{'lat p90':>8}"
          f"{'lat ms':>9}{'spurious (normal runs)':>24}")
    groups = sorted({(r["program"].split("-")[0] if r["program"][:2].isupper() else r["program"]) for r in rows})
    for mode in a.modes.split(","):
        for hog in hogs_on:
            rs = [r for r in rows if r["mode"] == mode and r["hog"] == hog]
            line(f"all {mode} {'hog' if hog else 'alone'}", rs)
    for g in groups:
        for hog in hogs_on:
            rs = [r for r in rows if (r["program"] == g or r["program"].startswith(g + "-")) and r["hog"] == hog]
            line(f"{g} {'hog' if hog else 'alone'}", rs)
    print("latency: first true report after the fault began, in the victim's mean beat intervals "
          "(med, p90) and ms (median)")


if __name__ == "__main__":
    main()
