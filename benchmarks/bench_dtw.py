"""DTW speed: hbtool's numba kernels beside dtaidistance's C, on the same pairs.

    python benchmarks/bench_dtw.py            # pip install dtaidistance for the comparison

Pairs: 90 random walks per length (512 and 128 points) split in two halves A and B;
the 45 x 45 = 2025 pairs (A[i], B[j]). hbtool runs ``dtw_many`` on them; dtaidistance
runs ``dtw.distance_matrix_fast(series, block=((0,45),(45,90),False), compact=True,
inner_dist='euclidean', use_pruning=False)`` - the same 2025 pairs, a rectangular block
so that its OpenMP rows are equally long. ``inner_dist='euclidean'`` is |a - b| for 1-D
series and no final sqrt, i.e. hbtool's cost; hbtool's half-width r is dtaidistance's
``window=r+1`` (equal lengths), no band is ``window=0``. Both mappings are checked on
every pair before timing. dtaidistance's default ``use_pruning=True`` (it abandons
cells above the Euclidean upper bound, so it computes fewer cells) is timed too, as an
extra column.

Times are the best of several runs; Mcells/s counts the cells inside the band. Each row also
prints the CPU that other processes used meanwhile (the machine may be shared).
dtaidistance is only used here: it is not a dependency of hbtool.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numba
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hbtool.analyzers import distance  # noqa: E402

try:
    from dtaidistance import dtw as ddtw
    from dtaidistance import __version__ as DTAI_VERSION
except ImportError:
    ddtw = None

HALF = 45                       # 45 x 45 = 2025 pairs
LENGTHS = (512, 128)
WINDOWS = (None, 5, 20, 64)
THREADS = (1, min(2, numba.config.NUMBA_NUM_THREADS))


def band_cells(n: int, m: int, r: int | None) -> int:
    """Cells with |i - j| <= max(r, |n - m|) (all n*m when r is None)."""
    if r is None:
        return n * m
    w = max(r, abs(n - m))
    i = np.arange(n)
    return int((np.minimum(m - 1, i + w) - np.maximum(0, i - w) + 1).sum())


def best_of(fn, budget: float = 1.0, at_least: int = 3, at_most: int = 30) -> float:
    t0 = time.perf_counter()
    fn()
    best = time.perf_counter() - t0
    runs = int(min(at_most, max(at_least, budget / max(best, 1e-9))))
    for _ in range(runs - 1):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


class OtherLoad:
    """CPU used by other processes meanwhile, in cores (from /proc/stat minus our own CPU time).

    The machine is shared; a row measured while something else ran is not comparable.
    """

    def __enter__(self):
        self.start = self._sample()
        return self

    def __exit__(self, *exc):
        self.end = self._sample()

    @staticmethod
    def _sample():
        try:
            with open("/proc/stat") as f:
                fields = [int(v) for v in f.readline().split()[1:]]
        except OSError:
            fields = None
        busy = None if fields is None else (sum(fields[:3]) + sum(fields[5:8])) / os.sysconf("SC_CLK_TCK")
        t = os.times()
        return busy, t.user + t.system + t.children_user + t.children_system, time.perf_counter()

    @property
    def cores(self) -> float:
        (b0, s0, w0), (b1, s1, w1) = self.start, self.end
        if b0 is None:
            return float("nan")
        return max(0.0, ((b1 - b0) - (s1 - s0)) / (w1 - w0))


def dtai_window(r: int | None) -> int:
    return 0 if r is None else r + 1


def dtai_matrix(series, r, parallel, pruning=False):
    return np.asarray(ddtw.distance_matrix_fast(series, block=((0, HALF), (HALF, 2 * HALF), False),
                                                compact=True, inner_dist="euclidean",
                                                use_pruning=pruning, window=dtai_window(r),
                                                parallel=parallel))


def throughput() -> None:
    print("\n== many pairs: 2025 pairs per row, best of several runs ==")
    head = (f"{'len':>4} {'r':>4} {'thr':>3} | {'hbtool ms':>9} {'Mcell/s':>8} | {'dtai ms':>8} {'Mcell/s':>8}"
            f" | {'dtai/hb':>7} | {'dtai pruned ms':>14} | {'others':>6}")
    print(head)
    print("-" * len(head))
    for length in LENGTHS:
        rng = np.random.default_rng(length)
        series = [np.cumsum(rng.standard_normal(length)) for _ in range(2 * HALF)]
        A, B = np.array(series[:HALF]), np.array(series[HALF:])
        Q, C = np.repeat(A, HALF, axis=0), np.tile(B, (HALF, 1))   # pair k = (A[k // 45], B[k % 45])
        for r in WINDOWS:
            cells = band_cells(length, length, r) * HALF * HALF
            ours = distance.dtw_many(Q, C, r)
            if ddtw is not None:
                theirs = dtai_matrix(series, r, parallel=False)
                diff = np.max(np.abs(ours - theirs) / np.maximum(1.0, np.abs(theirs)))
                if diff > 1e-12:
                    sys.exit(f"MISMATCH len={length} r={r}: max relative difference {diff:.3g}")
            for nthreads in THREADS:
                numba.set_num_threads(nthreads)
                with OtherLoad() as load:
                    t_hb = best_of(lambda: distance.dtw_many(Q, C, r))
                    par = nthreads > 1
                    if ddtw is not None:
                        t_dd = best_of(lambda: dtai_matrix(series, r, par))
                        t_pr = best_of(lambda: dtai_matrix(series, r, par, pruning=True))
                row = f"{length:>4} {str(r):>4} {nthreads:>3} | {t_hb * 1e3:>9.2f} {cells / t_hb / 1e6:>8.0f} |"
                if ddtw is None:
                    print(row + f" {'(dtaidistance not installed)':>45} | {load.cores:>6.2f}")
                    continue
                print(row + f" {t_dd * 1e3:>8.2f} {cells / t_dd / 1e6:>8.0f} | {t_dd / t_hb:>6.2f}x |"
                      f" {t_pr * 1e3:>14.2f} | {load.cores:>6.2f}")
    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    if ddtw is not None:
        print("checked: every pair equal (relative difference <= 1e-12) to dtaidistance with "
              "inner_dist='euclidean', window = r + 1 (r = hbtool half-width), None <-> window=0")
    print("dtai/hb > 1: hbtool faster. 'dtai pruned' = dtaidistance's default use_pruning=True, "
          "which skips cells (same distances).\n'others' = cores busy with other processes during the row "
          "(the machine is shared): a row with others > ~0.2 is contended, its 2-thread figures are not "
          "comparable")


def latency() -> None:
    print("\n== one pair per call: microseconds per call (wrapper + kernel) ==")
    print(f"{'len':>4} {'r':>4} | {'hbtool dtw':>10} | {'dtai distance_fast':>18}")
    rng = np.random.default_rng(1)
    for length in (16, 128, 512):
        q, c = np.cumsum(rng.standard_normal(length)), np.cumsum(rng.standard_normal(length))
        for r in (None, 5):
            loops = max(20, 20000 // length)

            def hb():
                for _ in range(loops):
                    distance.dtw(q, c, r)

            row = f"{length:>4} {str(r):>4} | {best_of(hb, 0.3) / loops * 1e6:>10.2f} |"
            if ddtw is None:
                print(row + " (dtaidistance not installed)")
                continue
            assert abs(distance.dtw(q, c, r) - ddtw.distance_fast(
                q, c, window=dtai_window(r), inner_dist="euclidean", use_pruning=False)) <= 1e-9

            def dd():
                for _ in range(loops):
                    ddtw.distance_fast(q, c, window=dtai_window(r), inner_dist="euclidean", use_pruning=False)

            print(row + f" {best_of(dd, 0.3) / loops * 1e6:>18.2f}")


COLD = r"""
import json, time
t0 = time.perf_counter()
import numpy as np
from hbtool.analyzers import distance as d
t1 = time.perf_counter()
q, c = np.arange(40.0), np.arange(37.0)[::-1].copy()
out = {"import": t1 - t0}
for name, call in (("dtw", lambda: d.dtw(q, c, 3)),
                   ("dtw_many", lambda: d.dtw_many([q, c], [c, q], 3)),
                   ("lb_keogh", lambda: (d.lb_keogh(q, c, 3), d.lb_keogh_l1(q, c, 3)))):
    t = time.perf_counter(); call(); first = time.perf_counter() - t
    warm = float("inf")
    for _ in range(5):
        t = time.perf_counter(); call(); warm = min(warm, time.perf_counter() - t)
    out[name] = [first, warm]
print(json.dumps(out))
"""


def cold_start() -> None:
    print("\n== cold start: a fresh process, first call (compile or on-disk cache load) vs warm (best of 5) ==")
    print(f"{'cache':<44} {'import':>7} | {'dtw 1st':>8} {'warm':>7} | {'many 1st':>8} {'warm':>7}"
          f" | {'lb 1st':>7} {'warm':>7} | {'others':>6}")

    def run(label, env):
        with OtherLoad() as load:
            r = subprocess.run([sys.executable, "-c", COLD], cwd=ROOT, env=env, capture_output=True,
                               text=True, check=True)
        t = json.loads(r.stdout)
        ms = lambda s: f"{s * 1e3:.1f}ms"  # noqa: E731
        print(f"{label:<44} {ms(t['import']):>7} | {ms(t['dtw'][0]):>8} {t['dtw'][1] * 1e6:>5.0f}us |"
              f" {ms(t['dtw_many'][0]):>8} {t['dtw_many'][1] * 1e6:>5.0f}us |"
              f" {ms(t['lb_keogh'][0]):>7} {t['lb_keogh'][1] * 1e6:>5.0f}us | {load.cores:>6.2f}")

    env = dict(os.environ)
    run("project cache (hbtool/analyzers/__pycache__)", env)
    with tempfile.TemporaryDirectory() as tmp:
        env["NUMBA_CACHE_DIR"] = tmp
        run("empty NUMBA_CACHE_DIR: compiles", env)
        run("same NUMBA_CACHE_DIR again: loads", env)


def main() -> None:
    print(f"numba {numba.__version__}, numpy {np.__version__}, threading layer "
          f"{numba.config.THREADING_LAYER}, {os.cpu_count()} cpus")
    if ddtw is None:
        print("dtaidistance is not installed: its columns are skipped (pip install dtaidistance)")
    else:
        print(f"dtaidistance {DTAI_VERSION}: C library {'found' if ddtw.dtw_cc is not None else 'MISSING'},"
              f" OpenMP {'found' if ddtw.dtw_cc_omp is not None else 'MISSING'}")
    cold_start()
    throughput()
    latency()


if __name__ == "__main__":
    main()
