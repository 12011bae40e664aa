"""Evaluate the service-rate estimator (seed 002) on real runs of the tracer's stream examples.

    python benchmarks/eval_service_rate.py [--seed 2026] [--parts accuracy,phases,apps,overhead]
                                           [--quick] [--keep DIR] [--z Z]

1. accuracy: stream_micro, one phase, the consumer's service rate set from 1 000 to
   100 000 items/s, exponential and deterministic service times: the share of converged
   estimates (consumer end) within 10 % and within 20 % of the set rate;
2. phases: stream_micro whose consumer changes its mean rate halfway by -50 %, -25 %,
   +25 % or +100 %: the share of runs in which both phases are found (two distinct
   phases, in order, each within 20 % of its set rate and nearer to it than to the
   other, overlapping its time span);
3. apps: stream_matmul and stream_search, every stage that reads from a queue: its
   status and median converged estimate against the rate of that kernel alone on
   resident data with an unbounded output (the seed's ground truth), and against the
   stage's own throughput in the pipeline (its service rate there when it seldom
   blocked, as a bottleneck does);
4. overhead: stream_micro with a fixed number of items, and stream_search (compute-
   bound, 4 threads), the queue monitors on against HBTRACE_QUEUE_MONITOR=off,
   interleaved runs: the median wall-time ratio of each.

Every run is seeded (--seed): service times and the programs' data. Timing on a shared
2-core VM is noisy; figures are pooled shares and medians.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BIN = ROOT / "native_tracer" / "examples" / "bin"

from hbtool.analyzers.service_rate import Params, service_rates  # noqa: E402
from hbtool.io import read_queue_samples  # noqa: E402

RATES = (1000, 3000, 10000, 30000, 100000)
DISTS = ("exp", "det")
CHANGES = (0.5, 0.75, 1.25, 2.0)
BASES = (4000, 20000)


def seed_of(base: int, *parts) -> int:
    h = hashlib.sha256(":".join(map(str, (base, *parts))).encode()).digest()
    return int.from_bytes(h[:4], "little") or 1


def run(prog: str, args: list[str], outdir: Path, env_extra: dict | None = None, timeout: float = 300) -> dict:
    outdir.mkdir(parents=True, exist_ok=True)
    truth = outdir / "truth.json"
    env = dict(os.environ, HBTRACE_DIR=str(outdir), HBTRACE_QUIET="1", **(env_extra or {}))
    t0 = time.perf_counter()
    p = subprocess.run([str(BIN / prog), *args, "--truth", str(truth)], env=env, capture_output=True, text=True,
                       timeout=timeout)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{prog} {' '.join(args)}: exit {p.returncode}: {p.stderr.strip()[:400]}")
    doc = json.loads(truth.read_text()) if truth.exists() else {}
    doc["_wall_s"] = wall
    return doc


def consumer_end(outdir: Path, queue: str | None, params: Params):
    res = service_rates(read_queue_samples(str(outdir)), params)
    ends = [e for e in res.ends if e.end == "consumer" and (queue is None or e.queue == queue)]
    if not ends:
        raise RuntimeError(f"{outdir}: no consumer end of queue {queue!r} in {[e.queue for e in res.ends]}")
    return ends[0]


def truth_phases(doc: dict) -> list[dict]:
    return doc["phases"]


def accuracy(args, params, workdir: Path) -> dict:
    errs, per_run = [], []
    reps = 1 if args.quick else 2
    dur = 2.0 if args.quick else 4.0
    for rate in RATES:
        for dist in DISTS:
            for rep in range(reps):
                s = seed_of(args.seed, "acc", rate, dist, rep)
                d = workdir / f"acc-{rate}-{dist}-{rep}"
                doc = run("stream_micro", ["--rate", str(rate), "--dist", dist, "--duration", str(dur),
                                           "--seed", str(s)], d)
                e = consumer_end(d, doc.get("queue"), params)
                conv = [x["items_per_s"] for x in e.estimates if x["converged"]]
                rel = [abs(v / rate - 1) for v in conv]
                errs.extend(rel)
                per_run.append({"rate": rate, "dist": dist, "rep": rep, "status": e.status, "estimates": len(conv),
                                "median_rel_err": float(np.median(rel)) if rel else None,
                                "phases": [round(p["items_per_s"], 1) for p in e.phases],
                                "period_s": e.period_s, "blocked_share": e.blocked_share})
                print(f"  accuracy rate {rate:>6} {dist}: {e.status}, {len(conv)} estimates, median error "
                      f"{(np.median(rel) * 100 if rel else float('nan')):.1f} %, period "
                      f"{(e.period_s or 0) * 1e3:.2f} ms, blocked {e.blocked_share * 100:.0f} %", flush=True)
    a = np.asarray(errs)
    return {"runs": per_run, "estimates": int(a.size),
            "within_10": float(np.mean(a <= 0.10)) if a.size else None,
            "within_20": float(np.mean(a <= 0.20)) if a.size else None,
            "runs_converged": sum(r["status"] == "converged" for r in per_run), "runs_total": len(per_run)}


def found(phases: list[dict], truth: list[dict], tol: float = 0.2) -> bool:
    r1, r2 = truth[0]["rate"], truth[1]["rate"]
    match = []
    for k, (mine, other) in enumerate(((r1, r2), (r2, r1))):
        lo, hi = truth[k]["start_s"], truth[k]["end_s"]
        cand = [i for i, p in enumerate(phases)
                if abs(p["items_per_s"] / mine - 1) <= tol and abs(p["items_per_s"] - mine) < abs(p["items_per_s"] - other)
                and p["end_s"] > lo and p["start_s"] < hi]
        match.append(cand)
    return any(i < j for i in match[0] for j in match[1])


def two_phase(args, params, workdir: Path) -> dict:
    rows = []
    reps = 1 if args.quick else 2
    dur = 4.0 if args.quick else 8.0
    for base in BASES:
        for ch in CHANGES:
            for rep in range(reps):
                s = seed_of(args.seed, "phase", base, ch, rep)
                d = workdir / f"phase-{base}-{ch}-{rep}"
                doc = run("stream_micro", ["--rate", str(base), "--rate2", str(base * ch), "--change-at", "0.5",
                                           "--dist", "exp", "--duration", str(dur), "--seed", str(s)], d)
                e = consumer_end(d, doc.get("queue"), params)
                ok = found(e.phases, truth_phases(doc))
                rows.append({"base": base, "change": ch, "rep": rep, "found": ok,
                             "phases": [(round(p["start_s"], 2), round(p["end_s"], 2), round(p["items_per_s"]))
                                        for p in e.phases]})
                print(f"  phases {base:>6} x{ch}: {'both found' if ok else 'MISSED'}: {rows[-1]['phases']}", flush=True)
    return {"runs": rows, "found": sum(r["found"] for r in rows), "total": len(rows),
            "share": sum(r["found"] for r in rows) / len(rows)}


def apps(args, params, workdir: Path) -> dict:
    """Every stage of the two applications that reads from a queue, against two references:
    the kernel alone on resident data with an unbounded output (the seed's ground truth), and
    the stage's own throughput in the pipeline (items it popped / run time), which is its
    service rate there when it blocked in few periods (the bottleneck)."""
    out = {}
    cases = [("stream_matmul", ["dot", "reduce"], []), ("stream_search", ["hash", "verify", "reduce"], [])]
    for prog, kernels, extra in cases:
        s = seed_of(args.seed, "apps", prog)
        solo = {k: run(prog, ["--solo", k, "--seed", str(s), *extra], workdir / f"{prog}-solo-{k}")["solo"]["items_per_s"]
                for k in kernels}
        d = workdir / f"{prog}-pipe"
        doc = run(prog, ["--seed", str(s), *extra], d)
        span = doc["end_s"] - doc["start_s"]
        res = service_rates(read_queue_samples(str(d)), params)
        byname = {q["name"]: q for q in doc["queues"]}
        rows = []
        for e in res.ends:
            q = byname.get(e.queue)
            if e.end != "consumer" or q is None:
                continue
            kernel = q["consumer"].rstrip("0123456789")
            popped = q["totals"]["consumer"]["nonblocking"] + q["totals"]["consumer"]["blocked"]
            conv = [x["items_per_s"] for x in e.estimates if x["converged"]]
            est = float(np.median(conv)) if conv else None
            row = {"queue": e.queue, "stage": q["consumer"], "status": e.status, "blocked_share": e.blocked_share,
                   "estimates": len(conv), "median_estimate": est, "solo_rate": solo[kernel],
                   "pipeline_rate": popped / span if span > 0 else None,
                   "vs_solo": est / solo[kernel] if est else None,
                   "vs_pipeline": est / (popped / span) if est and span > 0 else None}
            rows.append(row)
            vs_solo = f" (x{row['vs_solo']:.2f})" if est else ""
            vs_pipe = f" (x{row['vs_pipeline']:.2f})" if est else ""
            print(f"  {prog} {e.queue} ({q['consumer']}): {e.status}, blocked {e.blocked_share * 100:.0f} %, "
                  f"{len(conv)} estimates, median {est or float('nan'):.4g}/s; alone {solo[kernel]:.4g}/s{vs_solo}; "
                  f"in the pipeline {row['pipeline_rate']:.4g}/s{vs_pipe}", flush=True)
        out[prog] = {"span_s": span, "solo": solo, "stages": rows}
    return out


OVERHEAD_CASES = {
    # the consumer busy-waits its set service times: the monitor shows as preemptions
    "stream_micro": ["--rate", "50000", "--dist", "det", "--items", "300000", "--seed", "7"],
    # compute-bound, 4 threads on the machine's cores: any CPU the monitors take shows
    "stream_search": ["--mb", "192", "--seed", "7"],
}


def overhead(args, workdir: Path) -> dict:
    reps = 3 if args.quick else args.overhead_reps
    out = {}
    for prog, pargs in OVERHEAD_CASES.items():
        walls = {"off": [], "on": []}
        for rep in range(reps):
            for mode in (("off", "on") if rep % 2 == 0 else ("on", "off")):
                d = workdir / f"ovh-{prog}-{mode}-{rep}"
                env = {"HBTRACE_QUEUE_MONITOR": "off"} if mode == "off" else {}
                walls[mode].append(run(prog, pargs, d, env)["_wall_s"])
        ratios = [a / b for a, b in zip(walls["on"], walls["off"])]
        med = statistics.median(ratios)
        print(f"  overhead {prog}: monitor on / off wall time, median of {reps} pairs: {med:.4f} "
              f"({(med - 1) * 100:+.2f} %)", flush=True)
        out[prog] = {"pairs": reps, "median_ratio": med, "ratios": ratios, "walls": walls}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--parts", default="accuracy,phases,apps,overhead")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--keep", default=None, help="keep the traces in this directory")
    ap.add_argument("--z", type=float, default=None, help="override the quantile's z")
    ap.add_argument("--overhead-reps", type=int, default=10)
    ap.add_argument("--json", default=None, help="write all results to this file")
    args = ap.parse_args()
    params = Params() if args.z is None else replace(Params(), z=args.z)
    parts = args.parts.split(",")
    results = {"seed": args.seed, "params": params.__dict__}
    with tempfile.TemporaryDirectory(prefix="hbt-eval-sr-") as tmp:
        work = Path(args.keep) if args.keep else Path(tmp)
        if "accuracy" in parts:
            print("accuracy (stream_micro, one phase):", flush=True)
            r = results["accuracy"] = accuracy(args, params, work)
            print(f"ACCURACY estimates {r['estimates']}: within 10 % {r['within_10']:.3f}, within 20 % "
                  f"{r['within_20']:.3f}; runs converged {r['runs_converged']}/{r['runs_total']}", flush=True)
        if "phases" in parts:
            print("two phases (stream_micro):", flush=True)
            r = results["phases"] = two_phase(args, params, work)
            print(f"PHASES both found in {r['found']}/{r['total']} runs ({r['share']:.3f})", flush=True)
        if "apps" in parts:
            print("applications:", flush=True)
            results["apps"] = apps(args, params, work)
        if "overhead" in parts:
            print("overhead:", flush=True)
            r = results["overhead"] = overhead(args, work)
            print("OVERHEAD " + ", ".join(f"{p} {(v['median_ratio'] - 1) * 100:+.2f} %" for p, v in r.items())
                  + f" (median of {args.overhead_reps if not args.quick else 3} interleaved pairs)", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
