"""Evaluate `diagnose` and `behavior` on real OpenMP programs nobody here wrote (issue 16).

    python benchmarks/eval_npb.py [--kernels MG,LU,FT,EP] [--compilers gcc,clang]
                                  [--threads 2,4] [--runs 8] [--kinds normal,leak,...] [--class W] [--seed 2026]
                                  [--beats openmp|source] [--moment beat|time]
                                  [--keep DIR] [--json FILE]

The NAS Parallel Benchmarks kernels from ../shared/workloads/npb-omp, built unmodified
with gcc (GCC's libgomp) and clang (LLVM's libomp) into a temporary folder, run under
`hbtool record` with their automatic OpenMP beats (no source change; with `--beats source`,
a copy with the program's own beats added to every shared loop, benchmarks/npb_source_beats.py,
which the analyses then pick), one fault per run
injected by the tracer's thread fault injector (`hbtool record --inject KIND --thread
random --beat LO-HI --inject-seed S`): the injector picks the thread and the moment from
the seed, and its truth file (docs/inject.md) is the ground truth. LO-HI is 10-60 % of
the beats per thread of a normal run of the same program; with `--moment time`, the fault
comes instead at `--at LO-HI`, 10-60 % of a normal run's time (a program that beats mostly
near its end, as MUSCLE does, is then hit as often early as late).

Per kernel, compiler and team size, with `--runs` runs per fault kind (seeds
seed, seed+1, ...) and 3 more normal runs to train a model on:

- `diagnose` (HSA, seed 000), per thread: normal (normal runs; every thread but the
  victim otherwise), memoryleak (leak, slow: the victim), shutdown (stop: the victim;
  exit, segv: every thread, the process died). Macro-F1 with the built-in ranges (no
  model) and with a model trained on the 3 normal runs (`hbtool train --normal`).
- `behavior` (HBTM, seed 001), per run: busy-waiting and conditional-waiting (the busy
  and cond faults: the victim, an interval overlapping the injected wait), exit (the
  thread `behavior` says ended the process with a non-zero status: the exit fault's
  victim), failure (the thread it labels failed because a fatal signal hit it: the segv
  fault's victim). A report on any other thread, run or time is a false positive;
  precision and recall per behaviour, pooled over every run of every kind.

A busy-waiting report on the victim of `slow` after the fault is counted neither way (slow
spins after each unit of work, which is busy-waiting, but on short units not always
visible); so is a fatal signal in another thread after the victim of `exit` called exit()
(the exit's handlers ran while that thread still worked: cd-hit's crashed). Runs whose fault did nothing are counted and left out (stop under libomp skips nothing,
docs/inject.md; a stop that skipped no chunk, in a program whose loops are all static).
The online monitor is evaluated by benchmarks/eval_monitor.py (on these kernels with
HBTRACE_MONITOR_BEATS=openmp, and on our examples).

Long: a few seconds per run; the defaults are 4 kernels x 2 compilers x 2 team sizes x
(8 kinds x 8 runs + 3): about 1,100 runs. `--runs 2 --kernels MG` is a quick look.
`--keep DIR --rescore` judges the runs of an earlier `--keep DIR` again (a changed
hbtool, the same traces).

`--command "PROGRAM ARGS" [--cwd DIR]` evaluates any OpenMP or pthread program the same way
instead of the kernels (the team size from OMP_NUM_THREADS, `--threads`): how a user checks
hbtool's verdicts on their own program, e.g. ImageMagick, as Debian ships it:

    python benchmarks/eval_npb.py --command "convert-im6.q16 in.miff -sharpen 0x4 out.miff" --threads 2
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import npb_source_beats

ROOT = Path(__file__).resolve().parent.parent
NPB = ROOT.parent / "shared" / "workloads" / "npb-omp"
HBTOOL = [sys.executable, "-m", "hbtool"]
KINDS = ["normal", "leak", "slow", "stop", "exit", "segv", "busy", "cond"]
DIAGNOSE_KINDS = {"normal", "leak", "slow", "stop", "exit", "segv"}
BEHAVIORS = ["busy-waiting", "conditional-waiting", "exit", "failure"]
FAULT_BEHAVIOR = {"busy": "busy-waiting", "cond": "conditional-waiting", "exit": "exit", "segv": "failure"}
MAKE_DEF = ("CC = {cc}\nCLINK = {cc}\nC_LIB = -lm{link}\nC_INC = -I../common\nCFLAGS = -O2 -fopenmp\n"
            "CLINKFLAGS = -fopenmp\nUCC = {cc} -O\nBINDIR = ../bin\nRAND = randdp\nWTIME = wtime.c\n")
RUN_TIMEOUT_S = 300


def build(cc: str, klass: str, kernels: list[str], where: Path, source: bool = False) -> Path:
    """The kernels built by cc in a copy of NPB under `where`; source: with source beats
    (benchmarks/npb_source_beats.py), linked with libhbtrace."""
    d = where / (f"npb-{cc}-source" if source else f"npb-{cc}")
    if not (d / "bin").is_dir():
        shutil.copytree(NPB, d, ignore=shutil.ignore_patterns("bin", "*.o"))
        link = ""
        if source:
            for k in kernels:
                npb_source_beats.add_source_beats(d / npb_source_beats.FILES[k])
            link = " " + npb_source_beats.link_flags()
        (d / "config" / "make.def").write_text(MAKE_DEF.format(cc=cc, link=link))
        (d / "bin").mkdir()
    for k in kernels:
        if not (d / "bin" / f"{k.lower()}.{klass}").exists():
            r = subprocess.run(["make", k, f"CLASS={klass}"], cwd=d, capture_output=True, text=True)
            if r.returncode:
                sys.exit(f"eval_npb: {cc}: make {k} CLASS={klass} failed:\n{r.stdout[-1500:]}{r.stderr[-1500:]}")
    return d


def env_for(threads: int) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HBTRACE_", "OMP_", "KMP_"))}
    env.pop("LD_PRELOAD", None)
    env["OMP_NUM_THREADS"] = str(threads)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def hbtool(args: list[str], env: dict, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(HBTOOL + args, env=env, cwd=cwd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)


RESCORE = False   # --rescore: judge the runs a --keep folder holds again, without running them
MOMENT = "beat"   # --moment: the fault's moment drawn among the victim's beats, or in time


def record(cmd: list[str], cwd: Path, out: Path, env: dict, kind: str, moment: list[str], seed: int) -> dict | None:
    """One run of cmd under hbtool record into out; a fault of `kind` (not normal) injected at
    `moment` (["--beat", "LO-HI"] or ["--at", "LO-HI"]): its truth, None when the run failed."""
    if RESCORE:
        if not any(out.glob("*.hbt")):
            return None
        tf = out / "inject-truth.json"
        return json.loads(tf.read_text()) if tf.exists() else ({"kind": "normal", "fired": False}
                                                                if kind == "normal" else None)
    args = ["record", "-o", str(out), "--force"]
    if kind != "normal":
        args += ["--inject", kind, "--thread", "random", *moment, "--inject-seed", str(seed)]
    r = hbtool(args + ["--", *cmd], env, cwd=cwd)
    if kind == "normal":
        if r.returncode != 0:
            print(f"  normal run failed ({r.returncode}): {r.stderr.strip()[-300:]}", file=sys.stderr)
            return None
        return {"kind": "normal", "fired": False}
    tf = out / "inject-truth.json"
    if not tf.exists():
        print(f"  {kind}: no truth file ({r.returncode}): {r.stderr.strip()[-300:]}", file=sys.stderr)
        return None
    return json.loads(tf.read_text())


def beats_of_threads(trace: Path, env: dict) -> dict[int, int]:
    """Per thread number that made beats, its beats, counting every source as the injector
    counts them (a helper thread with none, as GROMACS's, is not one of the team)."""
    per = defaultdict(int)
    for src in ("openmp", "api"):
        r = hbtool(["info", str(trace), "--format", "json", "--beats", src], env)
        if r.returncode == 0:
            for t in json.loads(r.stdout)["threads"]:
                per[int(t["thread"])] += int(t["beats"])
    return {k: n for k, n in sorted(per.items()) if n > 0}


def beats_per_thread(trace: Path, env: dict, most: bool = False) -> int:
    """The fewest (most: the most) beats of any thread that made beats (beats_of_threads)."""
    counts = list(beats_of_threads(trace, env).values()) or [0]
    return max(counts) if most else min(counts)


def beating_threads(trace: Path, env: dict) -> list[dict]:
    """The threads of the trace that made beats, as `hbtool info --format json` gives them
    (none if it cannot say)."""
    r = hbtool(["info", str(trace), "--format", "json"], env)
    return [t for t in json.loads(r.stdout)["threads"] if int(t["beats"]) > 0] if r.returncode == 0 else []


def run_seconds(trace: Path, env: dict) -> float:
    """How long the trace's threads beat, from the tracer's start to the last beat."""
    return max([float(t["last_s"]) for t in beating_threads(trace, env)] or [0.0])


def team_size(trace: Path, env: dict) -> int:
    """How many threads of the trace made beats, 0 if it cannot say."""
    return len(beating_threads(trace, env))


def effective(truth: dict) -> bool:
    """The fault did something: it fired, and a stop skipped work."""
    if truth["kind"] == "normal":
        return True
    if not truth.get("fired"):
        return False
    if truth["kind"] == "stop":
        return int(truth["effect"].get("chunks_skipped") or 0) > 0 or truth["effect"].get("stop") == "pthread_exit"
    return True


def diagnose_truth(truth: dict, threads: int) -> dict[int, str]:
    kind = truth["kind"]
    labels = {t: "normal" for t in range(threads)}
    if kind in ("exit", "segv"):
        return {t: "shutdown" for t in range(threads)}
    if kind in ("leak", "slow"):
        labels[truth["thread"]] = "memoryleak"
    elif kind == "stop":
        labels[truth["thread"]] = "shutdown"
    return labels


def diagnose(trace: Path, env: dict, model: Path | None) -> dict[int, str]:
    args = ["diagnose", str(trace), "--format", "json"] + (["--model", str(model)] if model else [])
    r = hbtool(args, env)
    if r.returncode != 0:
        print(f"  diagnose failed: {r.stderr.strip()[-300:]}", file=sys.stderr)
        return {}
    return {int(t["thread"]): t["status"] for t in json.loads(r.stdout)["threads"]}


def behavior_reports(trace: Path, env: dict) -> list[tuple[str, int, float, float]]:
    """(behaviour, thread, start_s, end_s) for every report of a behaviour in BEHAVIORS."""
    r = hbtool(["behavior", str(trace), "--format", "json"], env)
    if r.returncode != 0:
        print(f"  behavior failed: {r.stderr.strip()[-300:]}", file=sys.stderr)
        return []
    out = []
    for th in json.loads(r.stdout)["threads"]:
        for iv in th["intervals"]:
            b = iv["behavior"]
            if b in ("busy-waiting", "conditional-waiting"):
                out.append((b, int(th["thread"]), iv["start_s"], iv["end_s"]))
            elif b == "failed" and iv.get("ended_process"):
                out.append(("failure", int(th["thread"]), iv["start_s"], iv["end_s"]))
            elif b == "exited" and iv.get("ended_process") and iv.get("exit_status", 0) != 0:
                out.append(("exit", int(th["thread"]), iv["start_s"], iv["end_s"]))
    return out


def excused(report, truth: dict, slack_s: float = 0.05) -> bool:
    """A report neither right nor wrong: busy-waiting on the victim of `slow` after the fault
    (slow spins after every unit of work: that is busy-waiting, but not always visible); a
    fatal signal in another thread after the victim of `exit` called exit() (the exit's
    handlers ran while that thread still worked, and it crashed: a real failure, which the
    injected exit caused)."""
    b, thread, start, end = report
    if truth["kind"] == "exit" and b == "failure":
        return thread != truth.get("thread") and end >= truth["fired_at"]["trace_s"] - slack_s
    return (truth["kind"] == "slow" and b == "busy-waiting" and thread == truth.get("thread")
            and end >= truth["fired_at"]["trace_s"])


def matches(report, truth: dict, slack_s: float = 0.05) -> bool:
    b, thread, start, end = report
    if truth["kind"] == "normal" or FAULT_BEHAVIOR.get(truth["kind"]) != b or thread != truth["thread"]:
        return False
    if b in ("exit", "failure"):
        return True
    t0 = truth["fired_at"]["trace_s"]
    t1 = t0 + truth["params"]["wait_ms"] / 1000
    return start <= t1 + slack_s and end >= t0 - slack_s


def macro_f1(pairs: list[tuple[str, str]], classes=("normal", "memoryleak", "shutdown")) -> float:
    f1s = []
    for c in classes:
        tp = sum(1 for t, p in pairs if t == c and p == c)
        fp = sum(1 for t, p in pairs if t != c and p == c)
        fn = sum(1 for t, p in pairs if t == c and p != c)
        if tp + fp + fn == 0:
            continue
        f1s.append(2 * tp / (2 * tp + fp + fn))
    return sum(f1s) / len(f1s) if f1s else float("nan")


def evaluate(cmd: list[str], cwd: Path, threads: int, runs: int, seed: int, work: Path, env: dict,
             keep: bool) -> dict:
    """Every fault kind `runs` times on the program `cmd` (run in `cwd`), with `threads`
    threads, under the injector; the runs go to `work`."""
    res = {"skipped": defaultdict(int), "diag": [], "diag_model": [], "beh_tp": defaultdict(int),
           "beh_fp": defaultdict(int), "beh_fn": defaultdict(int), "confusion": defaultdict(int), "runs": 0}
    train = []
    for i in range(3):
        d = work / f"train{i}"
        if record(cmd, cwd, d, env, "normal", "", 0):
            train.append(d)
    if not train:
        return res
    if MOMENT == "time":   # 10-60 % of a normal run's time
        span = run_seconds(train[0], env)
        moment = ["--at", f"{0.1 * span:.4f}-{0.6 * span:.4f}"]
    else:   # 10-60 % of the beats per thread of a normal run
        per_thread = beats_per_thread(train[0], env)
        moment = ["--beat", f"{max(2, per_thread // 10)}-{max(3, per_thread * 6 // 10)}"]
    model = work / ("model-rescored.json" if RESCORE else "model.json")
    r = hbtool(["train", "--normal", *map(str, train), "-o", str(model)], env)
    if r.returncode != 0:
        print(f"  train failed: {r.stderr.strip()[-300:]}", file=sys.stderr)
        model = None
    for kind in KINDS:
        for i in range(runs):
            d = work / f"{kind}{i}"
            t = time.monotonic()
            truth = record(cmd, cwd, d, env, kind, moment, seed + i)
            if truth is None or not effective(truth):
                res["skipped"][kind] += 1
                continue
            res["runs"] += 1
            wrong = []   # what this run got wrong, printed with it
            if kind in DIAGNOSE_KINDS:
                # the threads the run had (a program may cap what OMP_NUM_THREADS asks: cd-hit
                # runs 2 threads on 2 CPUs whatever -T says), each judged: one diagnose leaves
                # out counts as wrong
                want = diagnose_truth(truth, min(threads, team_size(d, env) or threads))
                got = diagnose(d, env, None)
                got_m = diagnose(d, env, model) if model else {}
                for th, lab in want.items():
                    res["diag"].append((lab, got.get(th, "missing")))
                    res["diag_model"].append((lab, got_m.get(th, "missing")))
                    res["confusion"][f"{lab}->{got.get(th, 'missing')}"] += 1
                    for how, verdict in (("", got), (" with the model", got_m if model else None)):
                        if verdict is not None and verdict.get(th, "missing") != lab:
                            wrong.append(f"thread {th} {lab}, diagnose{how} {verdict.get(th, 'missing')}")
            reports = behavior_reports(d, env)
            found = set()
            for rep in reports:
                if matches(rep, truth):
                    found.add(rep[0])
                elif excused(rep, truth):
                    continue
                else:
                    res["beh_fp"][rep[0]] += 1
                    wrong.append(f"behavior reported {rep[0]} on thread {rep[1]}")
            want_b = FAULT_BEHAVIOR.get(kind)
            if want_b:
                if want_b in found:
                    res["beh_tp"][want_b] += 1
                else:
                    res["beh_fn"][want_b] += 1
                    wrong.append(f"behavior missed {want_b}")
            print(f"  {kind}{i}: thread {truth.get('thread')} at beat "
                  f"{(truth.get('fired_at') or {}).get('beat')}, {time.monotonic() - t:.1f} s"
                  + "".join(f"; {w}" for w in wrong), file=sys.stderr)
            if kind != "normal" and not keep:
                shutil.rmtree(d, ignore_errors=True)
    return res


def summarize(res: dict) -> dict:
    out = {"runs": res["runs"], "skipped": dict(res["skipped"]),
           "diagnose_macro_f1": macro_f1(res["diag"]), "diagnose_macro_f1_model": macro_f1(res["diag_model"]),
           "confusion": dict(res["confusion"]), "behavior": {}}
    for b in BEHAVIORS:
        tp, fp, fn = res["beh_tp"][b], res["beh_fp"][b], res["beh_fn"][b]
        out["behavior"][b] = {"tp": tp, "fp": fp, "fn": fn,
                              "precision": tp / (tp + fp) if tp + fp else float("nan"),
                              "recall": tp / (tp + fn) if tp + fn else float("nan")}
    return out


def refuse(why: str, prog: str = "eval_npb") -> None:
    print(f"{prog}: {why}", file=sys.stderr)
    sys.exit(2)


def split_command(text: str, cwd: Path, prog: str = "eval_npb") -> list[str]:
    """--command split as the shell would, with --cwd checked: a command line it cannot
    split, an empty one or a missing folder is one line on stderr and exit status 2."""
    try:
        command = shlex.split(text)
    except ValueError as e:
        refuse(f"--command: {e} (quote the command line as a shell would)", prog)
    if not command:
        refuse("--command is empty: give the program and its arguments", prog)
    if not cwd.is_dir():
        refuse(f"--cwd {cwd}: no such folder", prog)
    return command


def main() -> None:
    global RESCORE, KINDS, MOMENT
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kernels", default="MG,LU,FT,EP")
    ap.add_argument("--compilers", default="gcc,clang")
    ap.add_argument("--threads", default="2,4")
    ap.add_argument("--runs", type=int, default=8, help="runs per fault kind (default 8)")
    ap.add_argument("--kinds", default=",".join(KINDS), help=f"fault kinds to run (default all: {','.join(KINDS)})")
    ap.add_argument("--class", dest="klass", default="W", help="NPB problem class (default W)")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--beats", choices=["openmp", "source"], default="openmp",
                    help="openmp: the unmodified kernels' automatic beats (default); source: a copy with the "
                         "program's own beats added (benchmarks/npb_source_beats.py), which the analyses then use")
    ap.add_argument("--moment", choices=["beat", "time"], default="beat",
                    help="beat: the fault at a beat drawn from 10-60 %% of a normal run's beats per thread "
                         "(default); time: at a time drawn from 10-60 %% of a normal run's time (a program "
                         "that beats mostly at its end is then hit earlier than by beat)")
    ap.add_argument("--keep", type=Path, help="keep builds and traces here")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--command", help="evaluate this program instead of the NPB kernels: its command line, split as "
                                      "the shell would (OMP_NUM_THREADS gives its threads)")
    ap.add_argument("--cwd", type=Path, default=Path("."), help="the folder --command runs in (default: here)")
    ap.add_argument("--rescore", action="store_true",
                    help="judge again the runs that --keep DIR holds, with this hbtool, without running them")
    a = ap.parse_args()
    RESCORE = a.rescore
    MOMENT = a.moment
    unknown = sorted(set(a.kinds.split(",")) - set(KINDS))
    if unknown:
        sys.exit(f"eval_npb: unknown fault kinds {', '.join(unknown)} (known: {', '.join(KINDS)})")
    KINDS = [k for k in KINDS if k in a.kinds.split(",")]
    if a.rescore and not a.keep:
        sys.exit("eval_npb: --rescore needs --keep DIR (the folder of an earlier run)")
    if a.command is not None:   # one line and exit status 2, before anything runs
        command = split_command(a.command, a.cwd)
    if not a.command and not (NPB / "MG").is_dir():
        sys.exit(f"eval_npb: NPB is not at {NPB}")
    kernels = a.kernels.split(",")
    work = a.keep or Path(tempfile.mkdtemp(prefix="hbtool-eval-npb-"))
    work.mkdir(parents=True, exist_ok=True)
    table = {}

    def judge(key: str, cmd: list[str], cwd: Path, n: int, run_dir: Path) -> None:
        print(f"{key}:", file=sys.stderr)
        run_dir.mkdir(parents=True, exist_ok=True)
        table[key] = s = summarize(evaluate(cmd, cwd, n, a.runs, a.seed, run_dir, env_for(n), bool(a.keep)))
        print(f"{key}: diagnose macro-F1 {s['diagnose_macro_f1']:.2f} (model "
              f"{s['diagnose_macro_f1_model']:.2f}); " + "; ".join(
                  f"{b} P {v['precision']:.2f} R {v['recall']:.2f}" for b, v in s["behavior"].items()),
              flush=True)

    try:
        if a.command:
            name = Path(command[0]).name
            for n in map(int, a.threads.split(",")):
                judge(f"{name} {n}t", command, a.cwd.resolve(), n, work / "runs" / f"{name}-{n}")
        for cc in a.compilers.split(",") if not a.command else []:
            if shutil.which(cc) is None:
                print(f"eval_npb: {cc} not found, skipped", file=sys.stderr)
                continue
            bdir = build(cc, a.klass, kernels, work, source=a.beats == "source")
            for k in kernels:
                for n in map(int, a.threads.split(",")):
                    tail = "-source" if a.beats == "source" else ""
                    judge(f"{k} {cc} {n}t" + (" source" if tail else ""), [str(bdir / "bin" / f"{k.lower()}.{a.klass}")],
                          bdir, n, work / "runs" / f"{k}-{cc}-{n}{tail}")
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    print()
    print(f"{'kernel':<16}{'runs':>5}{'F1':>6}{'F1 model':>9}" + "".join(f"{b[:12]:>16}" for b in BEHAVIORS))
    for key, s in table.items():
        cells = "".join(f"{v['precision']:>8.2f}/{v['recall']:<7.2f}" for v in s["behavior"].values())
        print(f"{key:<16}{s['runs']:>5}{s['diagnose_macro_f1']:>6.2f}{s['diagnose_macro_f1_model']:>9.2f}{cells}")
    print("behaviour cells: precision/recall; F1: diagnose macro-F1 per thread (no model / model on 3 normal runs)")
    if a.json:
        a.json.write_text(json.dumps({"args": vars(a) | {"keep": str(a.keep), "json": str(a.json)}, "results": table},
                                     indent=2, default=str))


if __name__ == "__main__":
    main()
