"""The PMPI profiler's overhead on real applications (HPCC, LAMMPS), measured two ways that a
noisy shared machine does not swamp.

    python benchmarks/bench_mpi_app_overhead.py [--apps hpcc,lammps] [--np 4] [--pairs 10]
                                                [--poll-rounds 5] [--calls 1000000] [--callgrind]
                                                [--perf] [--arms bare,profiled] [--pairs-only]

The applications and inputs are benchmarks/eval_interference.py's (`apt-get install -y
lammps hpcc`; an application that is not installed is skipped, saying so).

1. Paired runs: --pairs rounds of runs of the application, one run of each arm (--arms; by
   default bare, without the profiler, and profiled, with it preloaded), the order rotating
   from round to round. Per round, the ratio of each arm's run to the bare run's wall time of
   mpirun and of the CPU time (user + sys) of mpirun and its ranks. Printed: the median of the
   paired ratios, their range, a distribution-free 95 % interval for that median (order
   statistics of the binomial), and in how many rounds the arm was slower. Pairing cancels
   the slow drifts of the machine's load; what it cannot cancel is load that changes within
   a round. Experimental arms, to find where an overhead comes from: no-cpu-reads (the
   profiler built with HBP_EXPERIMENT_NO_CPU_READ: no system call for the thread's CPU time;
   its profile is wrong, its work otherwise the same) and disabled (preloaded with
   HBPROF_DISABLE=1: the wrappers pass every call through; no start-up, no files).
   --pairs-only skips the parts below but --callgrind and --perf.
2. Analytic bound: what the profiler adds per call, from native_tracer/mpi's pollbench
   (bench_mpi_polling.py's program, --poll-rounds interleaved runs with and without the
   profiler, median ns per call): a polling call (the largest of MPI_Test*, Iprobe,
   Improbe, Request_get_status), a call measured every time (MPI_Wait on
   MPI_REQUEST_NULL: the full path, for the point-to-point, completion and collective
   calls) and a boundary collective (MPI_Barrier on one rank: the full path and the end of
   a segment); times the calls each rank makes in one run, counted by the independent
   counter (benchmarks/pmpi_counter.c) in that run; over the rank's time from MPI_Init to
   MPI_Finalize. An upper bound for the per-call cost (a poll made while waiting costs
   nothing that the run would not have waited anyway); it leaves out the calls the counter
   does not count (local queries such as MPI_Comm_rank: a few ns each) and the fixed cost
   of MPI_Init and MPI_Finalize (the rank files, the merge).
3. --callgrind: instructions per call of pollbench's functions under valgrind's callgrind,
   with and without the profiler (deterministic: no machine noise; not time).
4. --perf: one profiled run under `perf record -e cpu-clock` (a software clock: works
   where the PMU does not): the share of the CPU samples of mpirun and its ranks that fall
   in libhbprof.so's code, times their CPU time; spread over the ranks and against the run
   time, a bound for what the profiler's code costs in the application itself, cache
   misses included (which pollbench's tight loop cannot show). It leaves out the kernel's
   time in the profiler's system calls (the CPU-time reads, at most one per 10 us, and a
   write per segment).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import bench_mpi_polling as polling  # noqa: E402
import eval_interference as ev  # noqa: E402

#: the counter's categories, and the pollbench function whose extra cost each is charged
CHARGE = {"polling": "polling", "completion": "MPI_Wait", "p2p_blocking": "MPI_Wait", "p2p_nonblocking": "MPI_Wait",
          "coll_one_to_all": "MPI_Wait", "coll_all_to_one": "MPI_Wait", "coll_all_to_all": "MPI_Wait",
          "segments": "MPI_Barrier"}
POLLING = ("MPI_Test", "MPI_Testany", "MPI_Testall", "MPI_Testsome", "MPI_Iprobe", "MPI_Improbe",
           "MPI_Request_get_status")


def median_interval(values: list[float], level: float = 0.95) -> tuple[float, float] | None:
    """A distribution-free interval for the median: [x_(k), x_(n+1-k)] with the largest k such
    that P(Binomial(n, 1/2) < k) <= (1 - level) / 2; None when n is too small for it."""
    x, n = sorted(values), len(values)
    tail, k, below = (1 - level) / 2, 0, 0.0
    while k < n // 2:
        nxt = below + math.comb(n, k) / 2 ** n
        if nxt > tail:
            break
        below, k = nxt, k + 1
    return (x[k - 1], x[n - k]) if k >= 1 else None


#: the arms of the paired runs: what each preloads and sets (ARM_LIBS fills in the libraries)
ARMS = {
    "bare": None,            # no profiler
    "profiled": "profiled",  # the profiler as built
    "no-cpu-reads": "no-cpu-reads",  # built with HBP_EXPERIMENT_NO_CPU_READ: no system call per CPU-time read
    "disabled": "profiled",  # preloaded with HBPROF_DISABLE=1: every wrapper passes through, no start, no files
}


def build_no_cpu_read_lib(tmp: Path) -> Path:
    """The profiler built with HBP_EXPERIMENT_NO_CPU_READ (core.c): the thread's CPU time, a system
    call, replaced by the monotonic clock (vDSO); its profile's computation is wrong, its work the
    same otherwise. Built in a copy of native_tracer/ under tmp."""
    src = tmp / "native_tracer"
    shutil.copytree(ev.ROOT / "native_tracer", src,
                    ignore=shutil.ignore_patterns("build", "lib", "bin", "*.o", "*.so", "*.a"))
    r = subprocess.run(["make", "-s", "-C", str(src / "mpi"), "lib/libhbprof.so",
                        "CFLAGS=-O2 -g -DHBP_EXPERIMENT_NO_CPU_READ"], capture_output=True, text=True, check=False)
    if r.returncode != 0:
        sys.exit(f"bench_mpi_app_overhead: building the no-cpu-reads profiler failed:\n{r.stderr[-2000:]}")
    return src / "mpi" / "lib" / "libhbprof.so"


def paired_runs(app: str, np_: int, d: Path, pairs: int, arms: list[str], libs: dict[str, Path]) -> dict:
    """pairs rounds, each one run of every arm, the order rotating from round to round; the ratios
    of each arm's runs to the bare run of the same round."""
    ratios = {arm: {"wall": [], "cpu": []} for arm in arms if arm != "bare"}
    series: dict[str, list[tuple[float, float]]] = {arm: [] for arm in arms}
    for k in range(pairs):
        got = {}
        for arm in arms[k % len(arms):] + arms[:k % len(arms)]:
            lib = libs.get(ARMS[arm]) if ARMS[arm] else None
            wall, _ = ev.app_run(app, np_, d, [str(lib)] if lib else [],
                                 {"HBPROF_DISABLE": "1"} if arm == "disabled" else {})
            got[arm] = (wall, ev.app_run.cpu_s)
            series[arm].append(got[arm])
        for arm in ratios:
            ratios[arm]["wall"].append(got[arm][0] / got["bare"][0])
            ratios[arm]["cpu"].append(got[arm][1] / got["bare"][1])
        print(f"  {app} -np {np_} round {k}: " + ", ".join(f"{arm} {w:.2f} s wall / {c:.2f} s CPU"
                                                           for arm, (w, c) in got.items()), file=sys.stderr)
    return {"ratios": ratios, "series": series}


def per_call_extra(np_calls: int, rounds: int) -> tuple[dict, dict, dict]:
    """pollbench with and without the profiler, interleaved: median ns per call of each."""
    bare: dict[str, list[float]] = {}
    prof: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="hbpoll-") as d:
        for _ in range(rounds):
            for fn, ns in polling.one(1, np_calls, False, d).items():
                bare.setdefault(fn, []).append(ns)
            for fn, ns in polling.one(1, np_calls, True, d).items():
                prof.setdefault(fn, []).append(ns)
    b = {fn: statistics.median(v) for fn, v in bare.items()}
    p = {fn: statistics.median(v) for fn, v in prof.items()}
    extra = {fn: max(p[fn] - b[fn], 0.0) for fn in b}
    extra["polling"] = max(extra[fn] for fn in POLLING)
    return b, p, extra


def analytic_bound(app: str, np_: int, d: Path, counter: Path, extra: dict) -> list[dict]:
    from hbtool.io.hbprof import read_hbprof

    _, run_file = ev.app_run(app, np_, d, [str(counter), str(ev.LIB)], {"HBPROF_KEEP_RANK_FILES": "1"})
    run_s = read_hbprof(str(run_file), name=app).run_time_ns / 1e9
    out = []
    for c in ev.rank_counts(d):
        counts = c["counter"]
        added_s = sum(counts.get(cat, 0) * extra[fn] for cat, fn in CHARGE.items()) / 1e9
        out.append({"rank": c["rank"], "counts": counts, "run_s": run_s, "added_s": added_s,
                    "bound": added_s / run_s if run_s > 0 else float("nan")})
    return out


def callgrind_per_call(calls: int) -> dict[str, tuple[float, float]] | None:
    """Instructions per call of each pollbench function, bare and profiled (callgrind)."""
    if not shutil.which("valgrind") or not shutil.which("callgrind_annotate"):
        return None
    out: dict[str, list[float]] = {}
    env = {k: v for k, v in os.environ.items() if not k.startswith("HBPROF_") and k != "LD_PRELOAD"}
    with tempfile.TemporaryDirectory(prefix="hbcg-") as d:
        for with_prof in (False, True):
            cmd = ["mpirun", "--oversubscribe", "--allow-run-as-root", "-np", "1"]
            if with_prof:
                cmd += ["-x", f"LD_PRELOAD={polling.LIB}", "-x", f"HBPROF_DIR={d}"]
            f = Path(d) / f"cg-{int(with_prof)}.out"
            cmd += ["valgrind", "--tool=callgrind", f"--callgrind-out-file={f}", str(polling.PROG), "--calls",
                    str(calls), "--repeat", "1"]
            r = subprocess.run(cmd, env=env, cwd=d, capture_output=True, text=True, timeout=1200, check=False)
            if r.returncode != 0 or not f.exists():
                print(f"bench_mpi_app_overhead: callgrind failed: {r.stderr.strip()[-300:]}", file=sys.stderr)
                return None
            a = subprocess.run(["callgrind_annotate", "--tree=calling", "--inclusive=yes", "--threshold=100",
                                str(f)], capture_output=True, text=True, check=False).stdout
            # the calls main makes: bare, into libmpi's P-name (MPI_x is its alias); profiled, into
            # the wrapper; the inclusive cost of the call holds the real call and all it does
            block = re.search(r"^.*\*\s+\S*:main \[.*\n((?:.*\n)*?).*\*\s", a, re.M)
            calls_from_main: dict[str, list[float]] = {}
            for m in re.finditer(r"^\s*([\d,]+) \([^)]*\)\s+>\s+\S*:(P?MPI_\w+) \(([\d,]+)x\)",
                                 block.group(1) if block else "", re.M):
                name = m.group(2)[1:] if m.group(2).startswith("PMPI_") else m.group(2)
                c = calls_from_main.setdefault(name, [0.0, 0.0])
                c[0] += int(m.group(1).replace(",", ""))
                c[1] += int(m.group(3).replace(",", ""))
            for fn in polling_functions():
                if fn in calls_from_main and calls_from_main[fn][1] > 0:
                    out.setdefault(fn, []).append(calls_from_main[fn][0] / calls_from_main[fn][1])
    return {fn: (v[0], v[1]) for fn, v in out.items() if len(v) == 2}


def perf_share(app: str, np_: int, d: Path) -> dict | None:
    """One profiled run under perf record (cpu-clock): libhbprof.so's share of the samples."""
    if not shutil.which("perf"):
        return None
    data = d / "perf.data"
    wall, run_file = ev.app_run(app, np_, d, [str(ev.LIB)], {}, prefix=("perf", "record", "-q", "-e", "cpu-clock",
                                                                        "-F", "2000", "-o", str(data), "--"))
    cpu = ev.app_run.cpu_s
    rep = subprocess.run(["perf", "report", "-i", str(data), "--sort", "dso", "--stdio"], capture_output=True,
                         text=True, check=False).stdout
    data.unlink(missing_ok=True)
    shares = {m.group(2): float(m.group(1)) / 100 for m in re.finditer(r"^\s*([\d.]+)%\s+(\S+)", rep, re.M)}
    samples = re.search(r"# Samples: (\S+)", rep)
    from hbtool.io.hbprof import read_hbprof

    run_s = read_hbprof(str(run_file), name=app).run_time_ns / 1e9
    share = shares.get(ev.LIB.name, 0.0)
    return {"share": share, "cpu_s": cpu, "wall_s": wall, "run_s": run_s, "samples": samples.group(1) if samples
            else "?", "profiler_cpu_s": share * cpu, "bound": share * cpu / np_ / run_s if run_s > 0 else float("nan"),
            "kernel": shares.get("[kernel.kallsyms]", 0.0)}


def polling_functions() -> list[str]:
    return [*POLLING, "MPI_Comm_rank", "MPI_Type_size", "MPI_Wait", "MPI_Barrier"]


def summary_line(name: str, ratios: list[float]) -> str:
    ci = median_interval(ratios)
    ci_s = f"95 % interval of the median {100 * (ci[0] - 1):+.1f} .. {100 * (ci[1] - 1):+.1f} %" if ci else \
        "too few pairs for a 95 % interval"
    worse = sum(r > 1 for r in ratios)
    return (f"{name}: median of the paired ratios {100 * (statistics.median(ratios) - 1):+.1f} %, range "
            f"{100 * (min(ratios) - 1):+.1f} .. {100 * (max(ratios) - 1):+.1f} %, {ci_s}; slower than the bare run "
            f"in {worse} of {len(ratios)} pairs")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--apps", default="hpcc,lammps")
    ap.add_argument("--np", type=int, default=4, dest="np_")
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--poll-rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=1_000_000, help="pollbench calls per function")
    ap.add_argument("--callgrind", action="store_true", help="also instructions per call under callgrind")
    ap.add_argument("--perf", action="store_true", help="also the profiler's share of CPU samples (perf record)")
    ap.add_argument("--arms", default="bare,profiled",
                    help=f"the paired runs' arms, bare first: of {','.join(ARMS)} (default: bare,profiled)")
    ap.add_argument("--pairs-only", action="store_true", help="only the paired runs (no per-call costs, no bound)")
    a = ap.parse_args(argv)
    apps, arms = a.apps.split(","), a.arms.split(",")
    if a.pairs < 1 or a.poll_rounds < 1 or a.calls < 100 or a.np_ < 1 or not set(apps) <= set(ev.APPS) or \
            arms[0] != "bare" or len(arms) < 2 or len(set(arms)) != len(arms) or not set(arms) <= set(ARMS):
        print(f"bench_mpi_app_overhead: --pairs, --poll-rounds, --np positive, --calls >= 100, --apps of "
              f"{','.join(ev.APPS)}, --arms bare then others of {','.join(ARMS)}", file=sys.stderr)
        return 2
    if not ev.LIB.exists() or not polling.PROG.exists():
        print("bench_mpi_app_overhead: build the profiler first: make -C native_tracer/mpi", file=sys.stderr)
        return 2
    if not a.pairs_only:
        print(f"# per-call cost: pollbench, 1 rank, {a.calls} calls per function, best of 3 per run, median of "
              f"{a.poll_rounds} interleaved runs")
        bare, prof, extra = per_call_extra(a.calls, a.poll_rounds)
        print(f"{'function':<24} {'bare ns':>8} {'profiled ns':>12} {'added ns':>9}")
        for fn in bare:
            print(f"{fn:<24} {bare[fn]:8.1f} {prof[fn]:12.1f} {extra[fn]:9.1f}")
    if a.callgrind:
        cg = callgrind_per_call(min(a.calls, 100_000))
        if cg:
            print("\n# instructions per call (callgrind, the wrapper's inclusive cost against the bare call's)")
            print(f"{'function':<24} {'bare':>8} {'profiled':>9} {'added':>7}")
            for fn, (b, p) in cg.items():
                print(f"{fn:<24} {b:8.1f} {p:9.1f} {p - b:7.1f}")
    with tempfile.TemporaryDirectory(prefix="hbovh-") as tmp:
        counter = ev.build_counter(Path(tmp))
        libs = {"profiled": ev.LIB}
        if "no-cpu-reads" in arms:
            libs["no-cpu-reads"] = build_no_cpu_read_lib(Path(tmp))
        for app in apps:
            if not shutil.which(ev.APPS[app]["exe"]) or (app == "hpcc" and not ev.HPCC_EXAMPLE.exists()):
                print(f"\n## {app}: skipped: not installed (apt-get install -y lammps hpcc)")
                continue
            d = ev.app_dir(app, a.np_, Path(tmp) / f"{app}-{a.np_}")
            print(f"\n## {app}, {a.np_} ranks")
            bound = [] if a.pairs_only else analytic_bound(app, a.np_, d, counter, extra)
            for b in bound:
                c = b["counts"]
                print(f"  rank {b['rank']}: {c.get('polling', 0)} polls, {c.get('completion', 0)} waits, "
                      f"{c.get('p2p_blocking', 0) + c.get('p2p_nonblocking', 0)} point-to-point, "
                      f"{sum(c.get(k, 0) for k in ('coll_one_to_all', 'coll_all_to_one', 'coll_all_to_all'))} "
                      f"collectives, {c.get('segments', 0)} segments in {b['run_s']:.2f} s: at most "
                      f"{1e3 * b['added_s']:.1f} ms added, {100 * b['bound']:.2f} %")
            if bound:
                print(f"  analytic bound (per-call costs x calls / run time): at most "
                      f"{100 * max(b['bound'] for b in bound):.2f} % on the busiest rank")
            if a.perf:
                ps = perf_share(app, a.np_, d)
                if ps:
                    print(f"  perf record (cpu-clock, {ps['samples']} samples) of a profiled run: libhbprof.so "
                          f"{100 * ps['share']:.2f} % of the CPU samples ({100 * ps['kernel']:.0f} % are the "
                          f"kernel's: yielding while waiting, copies), {ps['profiler_cpu_s']:.3f} s of "
                          f"{ps['cpu_s']:.2f} s CPU; per rank against the run's {ps['run_s']:.2f} s: at most "
                          f"{100 * ps['bound']:.2f} %")
            res = paired_runs(app, a.np_, d, a.pairs, arms, libs)
            for arm, r in res["ratios"].items():
                print(f"  {arm} against bare:")
                print("    " + summary_line("wall time of mpirun", r["wall"]))
                print("    " + summary_line("CPU time of mpirun and its ranks", r["cpu"]))
            for arm, runs in res["series"].items():
                w = [x[0] for x in runs]
                c = [x[1] for x in runs]
                print(f"  {arm}: wall {min(w):.2f}-{max(w):.2f} s (median {statistics.median(w):.2f}), CPU "
                      f"{min(c):.2f}-{max(c):.2f} s (median {statistics.median(c):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
