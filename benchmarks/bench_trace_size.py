"""Trace bytes on disk for threads and processes that never beat, and `hbtool info` on them.

    python benchmarks/bench_trace_size.py [--quick]

Runs benchmarks/idle_threads.c under the tracer (LD_PRELOAD, as `hbtool record`
loads it): 5,000 short-lived threads made 50 at a time, and 500 forked children
that start 4 threads each (the cases of issue 20), none of which beat; and, to show
the units an ended thread gives back taken by the next, tests/programs/seq_beaters.c:
40 threads one after another, 2,100 beats each (linked with the tracer). Prints,
per case: the files written, their bytes on disk (`du`: blocks, as files may be
sparse), their apparent size, and the time and peak resident memory of
`hbtool info` on the folder. --quick runs a tenth of each.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIB = ROOT / "native_tracer" / "lib" / "libhbtrace.so"
SRC = ROOT / "benchmarks" / "idle_threads.c"
BEATERS = ROOT / "tests" / "programs" / "seq_beaters.c"


def build(tmp: Path) -> tuple[Path, Path]:
    exe, beaters = tmp / "idle_threads", tmp / "seq_beaters"
    subprocess.run(["gcc", "-O2", "-pthread", str(SRC), "-o", str(exe)], check=True)
    inc, lib = ROOT / "native_tracer" / "include", LIB.parent
    subprocess.run(["gcc", "-O2", "-pthread", f"-I{inc}", str(BEATERS), f"-L{lib}", f"-Wl,-rpath,{lib}",
                    "-lhbtrace", "-o", str(beaters)], check=True)
    return exe, beaters


def du_bytes(folder: Path) -> int:
    out = subprocess.run(["du", "-s", "-B1", str(folder)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0])


def timed(cmd: list[str], env: dict | None = None) -> tuple[int, float, int]:
    """(exit status, wall seconds, peak resident KiB) of one command."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.stderr.write(p.stderr.read().decode(errors="replace"))
    p.stderr.close()
    return p.returncode, wall, usage.ru_maxrss


def case(exe: Path, tmp: Path, name: str, args: list[str]) -> dict:
    out = tmp / name
    out.mkdir()
    env = dict(os.environ, LD_PRELOAD=str(LIB), HBTRACE_DIR=str(out))
    rc, run_s, _ = timed([str(exe), *args], env)
    files = sorted(out.glob("*.hbt"))
    apparent = sum(f.stat().st_size for f in files)
    disk = du_bytes(out)
    irc, info_s, info_kib = timed([sys.executable, "-m", "hbtool", "info", str(out)])
    return {"case": name, "args": " ".join(args), "status": rc, "run_s": run_s, "files": len(files),
            "disk": disk, "apparent": apparent, "info_status": irc, "info_s": info_s, "info_mib": info_kib / 1024}


def main() -> None:
    quick = "--quick" in sys.argv[1:]
    if not LIB.exists():
        sys.exit(f"{LIB}: build the tracer first (make -C native_tracer)")
    tmp = Path(tempfile.mkdtemp(prefix="hbt-size-"))
    try:
        exe, beaters = build(tmp)
        threads, procs, seq = (500, 50, 4) if quick else (5000, 500, 40)
        rows = [case(exe, tmp, "threads", ["threads", str(threads), "50"]),
                case(exe, tmp, "forks", ["fork", str(procs), "4"]),
                case(beaters, tmp, "beaters", [str(seq), "1", "2100"])]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{'case':<28} {'files':>6} {'on disk':>12} {'apparent':>12} {'per thread':>11} {'info':>8} {'info RSS':>9}")
    for r in rows:
        nthreads = {"threads": threads + 1, "forks": procs * 5, "beaters": seq + 1}[r["case"]]
        label = {"threads": f"{threads} threads, 50 at a time", "forks": f"{procs} forks x 4 threads",
                 "beaters": f"{seq} threads x 2100 beats"}[r["case"]]
        print(f"{label:<28} {r['files']:>6} {r['disk'] / 1e6:>9.2f} MB {r['apparent'] / 1e6:>9.2f} MB "
              f"{r['disk'] / nthreads:>9.0f} B {r['info_s']:>6.2f} s {r['info_mib']:>6.0f} MiB"
              + ("" if r["status"] == 0 and r["info_status"] == 0
                 else f"  (program status {r['status']}, info status {r['info_status']})"))


if __name__ == "__main__":
    main()
