"""The fault suite's programs it was not written for, and its disk and file faults (issue 20):
every case of tests/hostile.py, quick and heavy, with the README's table at the end.

    python benchmarks/hostile_programs.py [--quick] [--kills N] [--seed S] [--work DIR]

Each program runs as it is and under `hbtool record` (same folder, same input): a fate changed
is a different exit status, stdout, stderr (without hbtool's and the tracer's own lines) or
files written; its trace must read with `hbtool info`. The SIGKILL case kills a 32-thread
program at N seeded moments (default 30) and counts the beats it had counted itself 100 ms
before the kill that are missing from the trace. The disk faults need root (a small tmpfs
is mounted); where it cannot be mounted they are left out and said so. --quick runs only
the cases of the default test run (and 3 kills). Takes ~10 minutes on 2 cores (200 MB of xz
and sort, make -j8, 5,000 threads, 500 forks, each twice).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import hostile  # noqa: E402

KINDS = {"program": "programs, with and without the tracer", "kill": "SIGKILL at seeded moments (32 threads)",
         "disk": "disk and file faults"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="only the cases of the default test run, 3 kills")
    ap.add_argument("--kills", type=int, default=None, help="SIGKILL moments (default 30, --quick 3)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the kill moments and the cuts (default 1)")
    ap.add_argument("--work", type=Path, default=None, help="work folder (default: a temporary one)")
    args = ap.parse_args()
    kills = args.kills if args.kills is not None else (3 if args.quick else 30)
    with tempfile.TemporaryDirectory(prefix="hostile-") as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        bins = hostile.build(work)
        results = []
        for case in hostile.CASES:
            if args.quick and case.slow:
                continue
            results.append(show(hostile.run_case(case, bins, work, work / "data")))
        results.append(show(hostile.run_kills(bins, work, kills, args.seed)))
        for fault in hostile.DISK_FAULTS:
            t0 = time.monotonic()
            res = fault(work)
            if res is not None:
                res.seconds = time.monotonic() - t0
            if res is None:
                print(f"  (left out: {fault.__name__}: no small tmpfs can be mounted here; needs root)")
                continue
            results.append(show(res))
        t0 = time.monotonic()
        res = hostile.truncated_while_read(work, 4 if args.quick else 20, args.seed)
        res.seconds = time.monotonic() - t0
        results.append(show(res))
    table(results)
    return 1 if any(r.problems for r in results) else 0


def show(r: hostile.Result) -> hostile.Result:
    print(f"{'ok  ' if not r.problems else 'FAIL'} {r.name:55s} {r.seconds:6.1f} s"
          + (f"  beats checked {r.beats_checked}, lost {r.beats_lost}" if r.kind == "kill" else ""), flush=True)
    for p in r.problems:
        print(f"       {p}")
    return r


def table(results: list[hostile.Result]) -> None:
    print()
    print("| kind | cases | runs | fates changed | tracebacks | hangs | beats lost (of those older than 100 ms) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for kind, label in KINDS.items():
        rs = [r for r in results if r.kind == kind]
        if not rs:
            continue
        lost = (f"{sum(r.beats_lost for r in rs)} of {sum(r.beats_checked for r in rs):,}" if kind == "kill"
                else "-")
        print(f"| {label} | {len(rs)} | {sum(r.runs for r in rs)} | {sum(r.fate_changed for r in rs)} | "
              f"{sum(r.tracebacks for r in rs)} | {sum(r.hangs for r in rs)} | {lost} |")
    failed = [r.name for r in results if r.problems]
    print(f"\n{len(results)} cases, {len(failed)} with problems" + (f": {', '.join(failed)}" if failed else ""))


if __name__ == "__main__":
    sys.exit(main())
