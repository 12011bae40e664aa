"""Evaluate thread behavior detection (seed 001 HBTM): offline labels and the online monitor.

    python benchmarks/eval_behavior.py [--reps 4] [--seed 2026] [--quick] [--keep DIR]

Runs the real example programs under the real tracer, injecting each behavior into a
known thread at a known beat (the program writes the ground truth beside its trace),
then reports:

1. offline (`hbtool behavior`): per-behavior precision and recall, and the error of
   the start times, over pi_pthread, matmul_pthread (pthreads) and jacobi_omp (OpenMP),
   2 worker threads each (one per core of this machine), with the online monitor on
   (central and ring, alternately);
2. online monitor: detection latency (report time minus injection time, and minus the
   onset the monitor itself gave) in beat periods, against the heart rate from 10 to
   1 000 beats/s, for the centralized monitor and the ring;
3. messages per window of 100 beats per thread, centralized versus ring;
4. run-time overhead of the monitor: pi_pthread, 2 threads at about 1 000 beats/s
   each, HBTRACE_MONITOR=off / central / ring interleaved, median wall time.

Everything is seeded (--seed): which thread, which beat, and the programs' own data.
Timing on a shared 2-core VM is noisy; the figures are medians or pooled counts.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BIN = ROOT / "native_tracer" / "examples" / "bin"

from hbtool.analyzers.behavior import behavior_timelines, monitor_summary, BehaviorSettings  # noqa: E402
from hbtool.analyzers.behavior_eval import SCORED, Score, score_run  # noqa: E402
from hbtool.io import read_heartbeats  # noqa: E402

PROGRAMS = ("pi_pthread", "matmul_pthread", "jacobi_omp")
#: (inject, shutdown mode) cases of the offline evaluation; jacobi_omp cannot cancel or vanish
CASES = [("none", None), ("busywait", None), ("condwait", None), ("earlyexit", None),
         ("shutdown", "thread"), ("shutdown", "cancel"), ("shutdown", "vanish"),
         ("shutdown", "exit"), ("shutdown", "abort"), ("shutdown", "segv")]
PTHREAD_ONLY = {"cancel", "vanish"}
RATES = (10, 30, 100, 300, 1000)
ONLINE_CASES = [("condwait", None, "conditional-waiting"), ("busywait", None, "busy-waiting"),
                ("earlyexit", None, "exited"), ("shutdown", "vanish", "failed"),
                ("shutdown", "cancel", "failed")]


def seed_of(base: int, *parts) -> int:
    h = hashlib.sha256(":".join(map(str, (base, *parts))).encode()).digest()
    return int.from_bytes(h[:4], "little") or 1


def run_example(prog: str, args: list[str], d: Path, env_extra: dict, timeout: float = 300) -> tuple[int, float]:
    d.mkdir(parents=True, exist_ok=True)
    for f in d.glob("*.hbt"):
        f.unlink()
    env = dict(os.environ, HBTRACE_DIR=str(d), HBTRACE_QUIET="1", OMP_WAIT_POLICY="passive", **env_extra)
    t = time.perf_counter()
    r = subprocess.run([str(BIN / prog), *args, "--truth", str(d / "truth.json")], env=env,
                       capture_output=True, text=True, timeout=timeout)
    return r.returncode, time.perf_counter() - t


def calibrate(prog: str, rate: float, tmp: Path, threads: int = 2) -> int:
    """--work that gives about `rate` beats/s per thread with `threads` threads."""
    work = 20000 if prog != "jacobi_omp" else 1
    for _ in range(3):
        d = tmp / f"cal-{prog}"
        beats = 200
        _, el = run_example(prog, ["--threads", str(threads), "--beats", str(beats), "--work", str(work)], d,
                            {"HBTRACE_MONITOR": "off"})
        tr = read_heartbeats(str(d))
        b = tr.beats
        per_beat = float(b.groupby("thread")["t"].agg(lambda s: (s.max() - s.min()) / max(len(s) - 1, 1)).median())
        work = max(1, int(round(work * (1.0 / rate) / max(per_beat, 1e-7))))
    return work


def offline(args, tmp: Path) -> tuple[Score, dict]:
    total = Score()
    per_prog = {}
    settings = BehaviorSettings()
    n = 0
    for prog in args.programs:
        work = calibrate(prog, args.rate, tmp)
        sc_prog = Score()
        for inject, mode in CASES:
            if prog == "jacobi_omp" and mode in PTHREAD_ONLY:
                continue
            for rep in range(args.reps):
                seed = seed_of(args.seed, prog, inject, mode, rep)
                monitor = "central" if rep % 2 == 0 else "ring"
                d = tmp / "offline" / prog / f"{inject}-{mode}-{rep}"
                cmd = ["--threads", "2", "--beats", str(args.beats), "--work", str(work), "--seed", str(seed),
                       "--inject", inject, "--wait-ms", str(args.wait_ms)]
                if mode:
                    cmd += ["--shutdown-mode", mode]
                run_example(prog, cmd, d, {"HBTRACE_MONITOR": monitor})
                truth = json.loads((d / "truth.json").read_text())
                tr = read_heartbeats(str(d))
                run = tr.run_names[0]
                sc = score_run(tr, behavior_timelines(tr, settings), truth, run)
                sc_prog.add(sc)
                n += 1
                print(f"  {prog:15s} {inject:9s} {mode or '':7s} rep {rep} ({monitor:7s}): "
                      f"missed {sc.missed or '-'}  spurious {sc.spurious or '-'}", file=sys.stderr)
        per_prog[prog] = sc_prog
        total.add(sc_prog)
    return total, per_prog


def online(args, tmp: Path) -> list[dict]:
    rows = []
    for rate in args.rates:
        work = calibrate("pi_pthread", rate, tmp)
        # enough beats for warm-up, the injection in the middle, and a wait of 20 periods
        beats = max(60, min(args.beats, int(rate * 2)))
        wait_ms = max(args.wait_ms, int(20 * 1000 / rate))
        for mode in ("central", "ring"):
            for inject, smode, behavior in ONLINE_CASES:
                for rep in range(args.online_reps):
                    seed = seed_of(args.seed, "online", rate, mode, inject, smode, rep)
                    d = tmp / "online" / f"{rate}-{mode}-{inject}-{smode}-{rep}"
                    cmd = ["--threads", "2", "--beats", str(beats), "--work", str(work), "--seed", str(seed),
                           "--inject", inject, "--inject-beat", str(beats // 2), "--wait-ms", str(wait_ms)]
                    if smode:
                        cmd += ["--shutdown-mode", smode]
                    run_example("pi_pthread", cmd, d, {"HBTRACE_MONITOR": mode})
                    truth = json.loads((d / "truth.json").read_text())
                    tr = read_heartbeats(str(d))
                    run = tr.run_names[0]
                    tl = behavior_timelines(tr)
                    sc = score_run(tr, tl, truth, run)
                    usual = next((r["usual_interval_s"] for r in tl if r["thread"] == truth["thread"]), float("nan"))
                    lat = sc.online_latency[behavior]
                    lag = sc.online_lag[behavior]
                    rows.append({"rate": rate, "mode": mode, "behavior": behavior, "period_s": usual,
                                 "detected": bool(lat), "latency_s": lat[0] if lat else None,
                                 "lag_s": lag[0] if lag else None, "false": sc.online_false})
    return rows


def messages(args, tmp: Path) -> list[dict]:
    out = []
    work = calibrate("pi_pthread", 1000, tmp)
    for mode in ("central", "ring"):
        for threads in (2, 4, 8):
            d = tmp / "messages" / f"{mode}-{threads}"
            run_example("pi_pthread", ["--threads", str(threads), "--beats", "2000", "--work",
                                       str(work * 2 // threads if threads > 2 else work)], d, {"HBTRACE_MONITOR": mode})
            tr = read_heartbeats(str(d))
            for m in monitor_summary(tr, BehaviorSettings()):
                out.append({"mode": mode, "threads": threads, **m})
    return out


def overhead(args, tmp: Path) -> dict:
    work = calibrate("pi_pthread", 1000, tmp)
    times = {"off": [], "central": [], "ring": []}
    beats = args.overhead_beats
    for rep in range(args.overhead_reps):
        order = list(times)
        order = order[rep % 3:] + order[:rep % 3]
        for mode in order:
            d = tmp / "overhead" / mode
            rc, el = run_example("pi_pthread", ["--threads", "2", "--beats", str(beats), "--work", str(work)], d,
                                 {"HBTRACE_MONITOR": mode})
            times[mode].append(el)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"work": work, "beats": beats, "median_s": med,
            "overhead_central": med["central"] / med["off"] - 1, "overhead_ring": med["ring"] / med["off"] - 1}


def pct(v):
    return "n/a" if v != v else f"{100 * v:.1f} %"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=4, help="runs per program and case (offline part)")
    ap.add_argument("--online-reps", type=int, default=2, help="runs per rate, mode and case (online part)")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--beats", type=int, default=600, help="beats per thread (offline part)")
    ap.add_argument("--rate", type=float, default=500.0, help="beats/s per thread in the offline part")
    ap.add_argument("--wait-ms", type=int, default=300, help="conditional wait (at least 20 beat periods online)")
    ap.add_argument("--rates", type=float, nargs="+", default=list(RATES))
    ap.add_argument("--overhead-reps", type=int, default=9)
    ap.add_argument("--overhead-beats", type=int, default=3000)
    ap.add_argument("--parts", default="offline,online,messages,overhead")
    ap.add_argument("--programs", nargs="+", default=list(PROGRAMS), choices=PROGRAMS)
    ap.add_argument("--quick", action="store_true", help="a smoke run: 1 rep, rates 100 and 1000")
    ap.add_argument("--keep", metavar="DIR", help="keep the traces in DIR")
    args = ap.parse_args()
    if args.quick:
        args.reps, args.online_reps, args.rates, args.overhead_reps = 1, 1, [100, 1000], 3
    parts = set(args.parts.split(","))
    if not (BIN / "pi_pthread").exists():
        sys.exit("eval_behavior: build the tracer and its examples first: make -C native_tracer")
    ctx = tempfile.TemporaryDirectory() if not args.keep else None
    tmp = Path(args.keep or ctx.name)
    t0 = time.time()
    print(f"# behavior detection: seed {args.seed}, {args.reps} reps offline, {args.online_reps} online")
    if "offline" in parts:
        total, per = offline(args, tmp)
        print(f"\n## offline labels (hbtool behavior), 2 threads, ~{args.rate:g} beats/s, {args.beats} beats")
        print(f"{'behavior':22s} {'precision':>9s} {'recall':>7s} {'found':>6s} {'truth':>6s} "
              f"{'start error median':>19s} {'p95 |error|':>12s}")
        for b in SCORED:
            errs = total.start_errors[b]
            med = f"{1e3 * statistics.median(errs):+.2f} ms" if errs else "n/a"
            p95 = f"{1e3 * sorted(abs(e) for e in errs)[int(0.95 * (len(errs) - 1))]:.2f} ms" if errs else "n/a"
            print(f"{b:22s} {total.precision(b):9.3f} {total.recall(b):7.3f} {total.tp[b] + total.fp[b]:6d} "
                  f"{total.tp[b] + total.fn[b]:6d} {med:>19s} {p95:>12s}")
        for prog, sc in per.items():
            print(f"  {prog}: " + ", ".join(f"{b} P {sc.precision(b):.2f} R {sc.recall(b):.2f}" for b in SCORED))
        if total.missed:
            print("  missed:", total.missed[:10])
        if total.spurious:
            print("  spurious:", total.spurious[:10])
    if "online" in parts:
        rows = online(args, tmp)
        print("\n## online monitor: detection latency in beat periods (median over behaviors and runs)")
        print(f"{'beats/s':>8s} {'mode':8s} {'detected':>9s} {'latency (periods)':>18s} {'latency':>10s} "
              f"{'lag (periods)':>14s} {'max latency (periods)':>22s}")
        for rate in args.rates:
            for mode in ("central", "ring"):
                rs = [r for r in rows if r["rate"] == rate and r["mode"] == mode]
                hit = [r for r in rs if r["detected"]]
                lp = [r["latency_s"] / r["period_s"] for r in hit]
                gp = [r["lag_s"] / r["period_s"] for r in hit]
                lat = [r["latency_s"] for r in hit]
                print(f"{rate:8g} {mode:8s} {len(hit):4d}/{len(rs):<4d} "
                      f"{statistics.median(lp) if lp else float('nan'):18.2f} "
                      f"{1e3 * statistics.median(lat) if lat else float('nan'):8.2f}ms "
                      f"{statistics.median(gp) if gp else float('nan'):14.2f} {max(lp) if lp else float('nan'):22.2f}")
        for b in sorted({r["behavior"] for r in rows}):
            hit = [r for r in rows if r["behavior"] == b and r["detected"]]
            lp = [r["latency_s"] / r["period_s"] for r in hit]
            print(f"  {b}: detected {len(hit)}/{sum(1 for r in rows if r['behavior'] == b)}, median "
                  f"{statistics.median(lp) if lp else float('nan'):.2f} periods")
        print(f"  online reports matching no injected behavior: {sum(r['false'] for r in rows)} "
              f"in {len(rows)} runs")
    if "messages" in parts:
        ms = messages(args, tmp)
        print("\n## messages per window (100 beats per thread), pi_pthread at ~1000 beats/s")
        for threads in (2, 4, 8):
            c = next((m for m in ms if m["mode"] == "central" and m["threads"] == threads), None)
            r = next((m for m in ms if m["mode"] == "ring" and m["threads"] == threads), None)
            if c and r:
                print(f"  {threads} threads: central {c['messages_per_window']:.1f}, ring {r['messages_per_window']:.1f} "
                      f"({100 * r['messages_per_window'] / c['messages_per_window']:.0f} % of central)")
    if "overhead" in parts:
        o = overhead(args, tmp)
        print(f"\n## monitor overhead: pi_pthread, 2 threads, ~1000 beats/s each, {o['beats']} beats, "
              f"median of {args.overhead_reps} interleaved runs")
        print(f"  wall: off {o['median_s']['off']:.3f} s, central {o['median_s']['central']:.3f} s "
              f"({pct(o['overhead_central'])}), ring {o['median_s']['ring']:.3f} s ({pct(o['overhead_ring'])})")
    print(f"\n(total {time.time() - t0:.0f} s)")
    if ctx:
        ctx.cleanup()


if __name__ == "__main__":
    main()
