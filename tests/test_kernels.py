"""The distance kernels (hbtool.analyzers.distance) against tests/naive.py and hand values."""

from __future__ import annotations

import subprocess
import sys

import numba
import numpy as np
import pytest

import naive
from hbtool import config
from hbtool.analyzers import distance as dist


def walk(rng, n):
    return np.cumsum(rng.standard_normal(n))


# ---------------------------------------------------------------- DTW, by hand

@pytest.mark.parametrize("q, c, window, expected", [
    # cost |q_i - c_j| for q=[0,1,2] (rows), c=[0,2] (columns):
    #   [[0, 2], [1, 1], [2, 0]]
    # D row 0: 0, 0+2=2
    # D row 1: 1+0=1, 1+min(2, 1, 0)=1
    # D row 2: 2+1=3, 0+min(1, 3, 1)=1  -> last cell 1
    ([0, 1, 2], [0, 2], None, 1.0),
    # window=0 with n - m = 1 widens to 1: only (2,0) leaves the band; D(2,1) = 0+min(1, inf, 1) = 1
    ([0, 1, 2], [0, 2], 0, 1.0),
    # q=[0,0,0,1], c=[0,1,1,1]: a zero-cost path needs |i-j| = 2 ((0,0),(1,0),(2,0),(3,1),(3,2),(3,3))
    ([0, 0, 0, 1], [0, 1, 1, 1], None, 0.0),
    ([0, 0, 0, 1], [0, 1, 1, 1], 2, 0.0),
    # band 1: every path meets a cell (2, j>=1), cost |0 - 1| = 1; (0,0),(1,0),(2,1),(3,2),(3,3) costs 1
    ([0, 0, 0, 1], [0, 1, 1, 1], 1, 1.0),
    # band 0: the diagonal, 0 + 1 + 1 + 0 = 2
    ([0, 0, 0, 1], [0, 1, 1, 1], 0, 2.0),
    # one point against three: band widened to 2, D = |3-1| + |3-4| + |3-6| = 2 + 1 + 3
    ([3], [1, 4, 6], 0, 6.0),
    ([1, 4, 6], [3], None, 6.0),
    ([5], [2], None, 3.0),
    # q=[1,2,3], c=[2,2,5]: cost [[1,1,4],[0,0,3],[1,1,2]];
    # D rows [1,2,6], [1,1,4], [2,2,3] -> 3 (the diagonal 1+0+2 is also optimal)
    ([1, 2, 3], [2, 2, 5], None, 3.0),
    ([1, 2, 3], [2, 2, 5], 0, 3.0),
])
def test_dtw_hand(q, c, window, expected):
    assert dist.dtw(q, c, window) == expected
    assert naive.dtw(q, c, window) == expected
    assert dist.dtw(c, q, window) == expected  # symmetric


def test_dtw_window_zero_is_l1():
    rng = np.random.default_rng(1)
    q, c = rng.standard_normal(50), rng.standard_normal(50)
    assert dist.dtw(q, c, 0) == pytest.approx(np.abs(q - c).sum(), rel=1e-12)


def test_dtw_identical_is_zero():
    x = walk(np.random.default_rng(2), 100)
    assert dist.dtw(x, x) == 0.0 and dist.dtw(x, x, 3) == 0.0


# ------------------------------------------------------------- DTW, at random

@pytest.mark.parametrize("seed", range(6))
def test_dtw_random_against_naive(seed):
    rng = np.random.default_rng(seed)
    for _ in range(12):
        n, m = rng.integers(1, 35, size=2)
        if rng.random() < 0.3:
            m = n
        q, c = walk(rng, n), walk(rng, m)
        for window in (None, 0, 1, 2, 5, int(rng.integers(0, 40)), 1000):
            assert dist.dtw(q, c, window) == pytest.approx(naive.dtw(q, c, window), rel=1e-12, abs=1e-12)


def test_dtw_longer_against_naive():
    rng = np.random.default_rng(7)
    q, c = walk(rng, 150), walk(rng, 131)
    for window in (None, 3, 19, 40):
        assert dist.dtw(q, c, window) == pytest.approx(naive.dtw(q, c, window), rel=1e-12)


def test_dtw_band_monotone():
    """A wider band can only lower the distance; no band is the widest."""
    rng = np.random.default_rng(8)
    q, c = walk(rng, 64), walk(rng, 64)
    d = [dist.dtw(q, c, w) for w in range(0, 64, 3)] + [dist.dtw(q, c)]
    assert all(a >= b for a, b in zip(d, d[1:]))
    assert dist.dtw(q, c, 63) == dist.dtw(q, c)


# ---------------------------------------------------------------- dtw_many

def test_dtw_many_equals_a_loop_of_dtw_varying_lengths():
    rng = np.random.default_rng(10)
    qs = [walk(rng, int(k)) for k in rng.integers(1, 60, size=57)]
    cs = [walk(rng, int(k)) for k in rng.integers(1, 60, size=57)]
    for window in (None, 0, 4, 17):
        got = dist.dtw_many(qs, cs, window)
        assert got.dtype == np.float64 and got.shape == (57,)
        np.testing.assert_array_equal(got, [dist.dtw(q, c, window) for q, c in zip(qs, cs)])


def test_dtw_many_2d_and_threads():
    rng = np.random.default_rng(11)
    Q = np.cumsum(rng.standard_normal((40, 33)), axis=1)
    C = np.cumsum(rng.standard_normal((40, 33)), axis=1)
    expected = [dist.dtw(q, c, 5) for q, c in zip(Q, C)]
    np.testing.assert_array_equal(dist.dtw_many(Q, C, 5), expected)
    np.testing.assert_array_equal(dist.dtw_many(list(Q), C.tolist(), 5), expected)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        np.testing.assert_array_equal(dist.dtw_many(Q, C, 5), expected)
    finally:
        numba.set_num_threads(before)


def test_dtw_many_empty_and_int_input():
    assert dist.dtw_many([], []).shape == (0,)
    assert dist.dtw_many(np.empty((0, 4)), np.empty((0, 4))).shape == (0,)
    np.testing.assert_array_equal(dist.dtw_many([[0, 1, 2], [1, 2]], [[0, 2], [5]]), [1.0, 7.0])


# ---------------------------------------------------------------- LB_Keogh

@pytest.mark.parametrize("q, c, r, squared, l1", [
    # envelope of q=[0,1,2] with r=0 is q itself; c=[3,2,-1] exceeds by +3, +1, -3
    ([0, 1, 2], [3, 2, -1], 0, 9 + 1 + 9, 3 + 1 + 3),
    # r=1: u=[1,2,2], l=[0,0,1]; c exceeds by 3-1=2, 0 (2 in [0,2]), 1-(-1)=2
    ([0, 1, 2], [3, 2, -1], 1, 4 + 0 + 4, 2 + 0 + 2),
    # r=5 > n: u=2, l=0 everywhere; excess 1, 0, 1
    ([0, 1, 2], [3, 2, -1], 5, 1 + 0 + 1, 1 + 0 + 1),
    # q=[0,2] resampled to 3 points: [0,1,2]; c=[0,5,1], r=0: excess 0, 4, -1
    ([0, 2], [0, 5, 1], 0, 0 + 16 + 1, 0 + 4 + 1),
    # c=[4,0] resampled to 5 points: [4,3,2,1,0]; q=[0,1,2,3,4], r=1:
    # u=[1,2,3,4,4], l=[0,0,1,2,3]; excess 3, 1, 0, -1, -3
    ([0, 1, 2, 3, 4], [4, 0], 1, 9 + 1 + 0 + 1 + 9, 3 + 1 + 0 + 1 + 3),
    # inside the envelope: 0
    ([0, 1, 2], [0.5, 1, 1.5], 1, 0, 0),
])
def test_lb_keogh_hand(q, c, r, squared, l1):
    assert dist.lb_keogh(q, c, r) == squared
    assert dist.lb_keogh_l1(q, c, r) == l1
    assert naive.lb_keogh(q, c, r) == squared
    assert naive.lb_keogh(q, c, r, squared=False) == l1


@pytest.mark.parametrize("seed", range(4))
def test_lb_keogh_random_against_naive(seed):
    rng = np.random.default_rng(100 + seed)
    for _ in range(25):
        n, m = rng.integers(1, 80, size=2)
        if rng.random() < 0.4:
            m = n
        q, c = walk(rng, n), walk(rng, m)
        for r in (0, 1, 3, int(rng.integers(0, 90)), 500):
            assert dist.lb_keogh(q, c, r) == pytest.approx(naive.lb_keogh(q, c, r), rel=1e-12, abs=1e-12)
            assert dist.lb_keogh_l1(q, c, r) == pytest.approx(naive.lb_keogh(q, c, r, squared=False),
                                                              rel=1e-12, abs=1e-12)


def test_envelope_kernel_against_naive():
    """The streaming envelope, including ties (a plateau) and r beyond the ends."""
    from hbtool import kernels

    rng = np.random.default_rng(5)
    for x in (rng.integers(0, 4, 40).astype(float), walk(rng, 57), np.array([3.0])):
        for r in (0, 1, 2, 7, len(x) - 1, len(x) + 3):
            u, lo = np.empty(len(x)), np.empty(len(x))
            kernels._envelope(x, r, u, lo)
            nu, nl = naive.envelope(list(x), r)
            np.testing.assert_array_equal(u, nu)
            np.testing.assert_array_equal(lo, nl)


def test_lb_keogh_l1_is_a_lower_bound_of_dtw():
    rng = np.random.default_rng(20)
    for _ in range(300):
        n = int(rng.integers(1, 100))
        q, c = walk(rng, n), walk(rng, n) + rng.normal(0, 2)
        for r in (0, 1, 4, int(rng.integers(0, n + 1))):
            assert dist.lb_keogh_l1(q, c, r) <= dist.dtw(q, c, r) * (1 + 1e-12) + 1e-12


def test_squared_lb_is_not_a_bound_of_absolute_dtw():
    # why SPEC 3 prunes with the L1 form: q=[0,1,2], c=[3,2,-1], band 0:
    # dtw = |0-3| + |1-2| + |2+1| = 7, squared LB = 19
    assert dist.dtw([0, 1, 2], [3, 2, -1], 0) == 7.0
    assert dist.lb_keogh([0, 1, 2], [3, 2, -1], 0) == 19.0


# ---------------------------------------------------------------- pool

def test_pool_hand():
    # n=10, cap=4: edges floor(k*10/4) = 0, 2, 5, 7, 10 -> bins [0,1] [2,3,4] [5,6] [7,8,9]
    np.testing.assert_array_equal(dist.pool(np.arange(10), 4), [0.5, 3.0, 5.5, 8.0])
    # cap divides n: pairs
    np.testing.assert_array_equal(dist.pool(np.arange(10), 5), [0.5, 2.5, 4.5, 6.5, 8.5])
    np.testing.assert_array_equal(dist.pool([1, 2, 3], 5), [1.0, 2.0, 3.0])  # short: unchanged
    np.testing.assert_array_equal(dist.pool([1, 2, 3], 3), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(dist.pool([1, 2, 3], 1), [2.0])
    assert dist.pool(np.arange(513.0)).shape == (config.DTW_MAX_POINTS,)


def test_pool_random_against_naive():
    rng = np.random.default_rng(30)
    for _ in range(60):
        n = int(rng.integers(1, 3000))
        cap = int(rng.integers(1, 700))
        x = rng.standard_normal(n)
        got = dist.pool(x, cap)
        assert got.shape == (min(n, cap),)
        np.testing.assert_allclose(got, naive.pool(x, cap), rtol=1e-12, atol=1e-13)
        if n > cap:
            edges = np.arange(cap + 1) * n // cap
            sizes = np.diff(edges)
            assert sizes.min() >= 1 and sizes.max() - sizes.min() <= 1
            assert (got * sizes).sum() == pytest.approx(x.sum(), abs=1e-9)


def test_pool_returns_a_copy():
    x = np.arange(4.0)
    y = dist.pool(x, 10)
    y[0] = 99
    assert x[0] == 0


# ---------------------------------------------------------------- NaN

def test_nan_stays_visible():
    assert np.isnan(dist.dtw([0, np.nan, 1], [0, 1]))
    assert np.isnan(dist.dtw([0, 1], [0, 1, np.nan], 1))
    got = dist.dtw_many([[0, 1], [0, np.nan], [2.0]], [[0, 1], [1, 2], [np.nan]])
    assert got[0] == 0.0 and np.isnan(got[1]) and np.isnan(got[2])
    assert np.isnan(dist.lb_keogh([0, np.nan, 2], [0, 1, 2], 1))
    assert np.isnan(dist.lb_keogh_l1([0, 1, 2], [0, 1, np.nan], 1))
    p = dist.pool([1, 2, np.nan, 4, 5, 6], 3)
    assert p[0] == 1.5 and np.isnan(p[1]) and p[2] == 5.5


# ---------------------------------------------------------------- validation

@pytest.mark.parametrize("call", [
    lambda: dist.dtw([[0, 1], [2, 3]], [0, 1]),
    lambda: dist.dtw([0, 1], np.zeros((2, 2))),
    lambda: dist.dtw([], [0, 1]),
    lambda: dist.dtw([0, 1], []),
    lambda: dist.dtw(3.0, [0, 1]),
    lambda: dist.dtw([0, np.inf], [0, 1]),
    lambda: dist.dtw([0, np.nan], [0, -np.inf]),
    lambda: dist.dtw([0, 1], [0, 1], -1),
    lambda: dist.dtw_many([[0, 1]], [[0, 1], [1]]),
    lambda: dist.dtw_many([[0, 1], []], [[0, 1], [1]]),
    lambda: dist.dtw_many(np.zeros((2, 3, 1)), np.zeros((2, 3, 1))),
    lambda: dist.dtw_many([0.0, 1.0], [0.0, 1.0]),
    lambda: dist.dtw_many([[0, 1]], [[0, 1]], window=-2),
    lambda: dist.dtw_many([[0, -np.inf]], [[0, 1]]),
    lambda: dist.lb_keogh([0, 1], [0, 1], -1),
    lambda: dist.lb_keogh_l1(np.zeros((1, 3)), [0, 1], 1),
    lambda: dist.lb_keogh([], [0, 1], 1),
    lambda: dist.lb_keogh([0, 1], [np.inf, 1], 1),
    lambda: dist.lb_keogh_l1([0, -np.inf], [np.nan, 1], 1),
    lambda: dist.pool(np.zeros((4, 4)), 2),
    lambda: dist.pool([1, 2, 3], 0),
])
def test_value_errors(call):
    with pytest.raises(ValueError):
        call()


@pytest.mark.parametrize("call", [
    lambda: dist.dtw([0, 1], [0, 1], 1.5),
    lambda: dist.dtw([0, 1], [0, 1], True),
    lambda: dist.lb_keogh([0, 1], [0, 1], None),
    lambda: dist.lb_keogh([0, 1], [0, 1], 2.0),
    lambda: dist.pool([1, 2, 3], 2.0),
])
def test_type_errors(call):
    with pytest.raises(TypeError):
        call()


def test_numpy_ints_accepted():
    assert dist.dtw([0, 1], [0, 1], np.int32(1)) == 0.0
    assert dist.lb_keogh([0, 1], [0, 1], np.int64(0)) == 0.0


def test_every_kernel_uses_the_config_options():
    from numba.core.registry import CPUDispatcher

    from hbtool import kernels

    found = [f for f in vars(kernels).values() if isinstance(f, CPUDispatcher)]
    assert len(found) >= 6
    for f in found:
        assert type(f._cache).__name__ == "FunctionCache"  # cache=True: on disk
        assert f.targetoptions["fastmath"] is False and f.targetoptions["nogil"] is True


def test_cli_import_does_not_load_numba():
    code = "import sys, hbtool.cli; sys.exit('numba' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0
