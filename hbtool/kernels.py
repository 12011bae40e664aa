"""Every numba kernel of hbtool, behind public wrappers that validate (stumpy's habit).

Callers: ``analyzers/distance.py`` (DTW, LB_Keogh), ``analyzers/service_rate.py``
(the service-rate scan) and ``io/hbprof.py`` (aggregating a profile while it is read,
so memory stays bounded). The module sits beside model/ at the bottom of the
package: io and analyzers both use it without depending on each other.

Nothing here validates: the callers hand these functions contiguous arrays of the
documented dtypes, checked offsets and non-negative ints.
Every kernel has a slow, obvious twin in ``tests/naive.py``.

All kernels take their options from ``config.NUMBA_OPTIONS`` (on-disk cache, no
fastmath). They compile lazily, on first call: importing this module compiles
nothing, and with the on-disk cache a later process only loads machine code.

DTW layout: the two-row (rolling) formulation. Row i of the cumulative matrix
is computed from row i-1 only, over the Sakoe-Chiba band ``|i - j| <= w``; the
left neighbour and the diagonal stay in registers, so the inner loop is two
loads, one store, two min, one subtraction, one abs and one addition per cell;
its speed is bounded by the chain left -> min -> add (about 4 cycles a cell).
The longer sequence indexes the rows, so memory is O(min(n, m)).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange, uint64

from .config import NUMBA_OPTIONS


#: what _dtw_pair returns for a pair holding an infinite value (distances are >= 0);
#: the wrappers turn it into a ValueError
INFINITE_INPUT = -1.0


@njit(**NUMBA_OPTIONS)
def _scan(x):
    """0: all values finite; 1: a NaN but no infinity; 2: an infinity."""
    status = 0
    for v in x:
        if not abs(v) < np.inf:
            if v != v:
                status = 1
            else:
                return 2
    return status


@njit(**NUMBA_OPTIONS)
def _band(n, m, w):
    """The effective half-width: w < 0 means no band; at least |n - m| so a path exists."""
    d = n - m if n >= m else m - n
    if w < 0 or w > n + m:
        w = n + m
    return w if w >= d else d


@njit(**NUMBA_OPTIONS)
def _dtw_rows(a, b, w, prev, cur):
    """DTW of a (rows, n points) against b (columns, m points), band half-width w.

    Requires n >= 1, m >= 1, w >= |n - m|, no NaN, and prev/cur of length >= m.
    Cost |a_i - b_j|; D(i,j) = cost + min(D(i-1,j), D(i,j-1), D(i-1,j-1));
    returns D(n-1, m-1). Cells outside the band are +inf.
    """
    n = a.shape[0]
    m = b.shape[0]
    inf = np.inf
    # row 0: D(0, j) = sum of the costs |a_0 - b_k| for k <= j
    jhi = w if w < m - 1 else m - 1
    a0 = a[0]
    s = 0.0
    for j in range(jhi + 1):
        s += abs(a0 - b[j])
        prev[j] = s
    if jhi + 1 < m:
        prev[jhi + 1] = inf  # the only out-of-band cell the next row reads
    for i in range(1, n):
        jlo = i - w if i > w else 0
        jhi = i + w if i + w < m - 1 else m - 1
        ai = a[i]
        diag = prev[jlo - 1] if jlo > 0 else inf
        left = inf
        # unsigned j: numba then skips its negative-index wraparound on the three
        # accesses (+10-50 % measured); j is only ever used as an index here
        for j in range(uint64(jlo), uint64(jhi + 1)):
            up = prev[j]
            best = up if up < diag else diag
            if left < best:
                best = left
            left = abs(ai - b[j]) + best
            cur[j] = left
            diag = up
        if jhi + 1 < m:
            cur[jhi + 1] = inf
        prev, cur = cur, prev
    return prev[m - 1]


@njit(**NUMBA_OPTIONS)
def _dtw_pair(q, c, w):
    """DTW distance of q and c with half-width w (< 0: no band).

    NaN if either holds a NaN; INFINITE_INPUT if either holds an infinity.
    """
    status = max(_scan(q), _scan(c))
    if status == 2:
        return INFINITE_INPUT
    if status == 1:
        return np.nan
    n = q.shape[0]
    m = c.shape[0]
    w = _band(n, m, w)
    if m > n:  # the cost and the band are symmetric: put the shorter one in the columns
        q, c = c, q
        m = n
    prev = np.empty(m)
    cur = np.empty(m)
    return _dtw_rows(q, c, w, prev, cur)


@njit(parallel=True, **NUMBA_OPTIONS)
def _dtw_many(qflat, qoff, cflat, coff, w):
    """DTW of pairs k = (qflat[qoff[k]:qoff[k+1]], cflat[coff[k]:coff[k+1]]), in parallel."""
    npairs = qoff.shape[0] - 1
    out = np.empty(npairs)
    for k in prange(npairs):
        out[k] = _dtw_pair(qflat[qoff[k]:qoff[k + 1]], cflat[coff[k]:coff[k + 1]], w)
    return out


@njit(**NUMBA_OPTIONS)
def _envelope(x, r, upper, lower):
    """upper[i] = max(x[i-r..i+r]), lower[i] = min(...), clipped at the ends.

    Lemire's streaming min/max: O(n) whatever r, with two index deques held in
    arrays (each index enters once, so n slots suffice).
    """
    n = x.shape[0]
    dmax = np.empty(n, np.int64)
    dmin = np.empty(n, np.int64)
    hmax = tmax = 0  # deque = d[h:t]; front is the extreme of the window
    hmin = tmin = 0
    for k in range(n + r):
        if k < n:
            v = x[k]
            while tmax > hmax and x[dmax[tmax - 1]] <= v:
                tmax -= 1
            dmax[tmax] = k
            tmax += 1
            while tmin > hmin and x[dmin[tmin - 1]] >= v:
                tmin -= 1
            dmin[tmin] = k
            tmin += 1
        i = k - r  # the window of output i is [i - r, i + r] = [k - 2r, k]
        if i >= 0:
            while dmax[hmax] < i - r:
                hmax += 1
            while dmin[hmin] < i - r:
                hmin += 1
            upper[i] = x[dmax[hmax]]
            lower[i] = x[dmin[hmin]]


@njit(**NUMBA_OPTIONS)
def _lb_keogh(q, c, r, squared):
    """LB_Keogh of c against the envelope of q (equal lengths): squared or L1 excess.

    NaN if either holds a NaN (the wrapper has rejected infinities).
    """
    if _scan(q) or _scan(c):
        return np.nan
    n = q.shape[0]
    if r > n:
        r = n  # a window wider than the sequence is the whole sequence
    upper = np.empty(n)
    lower = np.empty(n)
    _envelope(q, r, upper, lower)
    s = 0.0
    for i in range(n):
        ci = c[i]
        if ci > upper[i]:
            e = ci - upper[i]
        elif ci < lower[i]:
            e = lower[i] - ci
        else:
            continue
        s += e * e if squared else e
    return s


@njit(**NUMBA_OPTIONS)
def replay_bins(kind, metric, slot, from_slot, value, seg_bins, m, nslots):
    """Values of every segment record of a per-rank profile stream (docs/profile-format.md).

    Forward over the bin records: the final value of every slot. Backward: a map from
    slot to the slot its bin ends up in after every later merge. Returns an array
    (segment records, m) of values. kind/metric/slot/from_slot/value are per record;
    seg_bins[i] holds record i's slot per metric (only read for segment records).
    """
    n = kind.shape[0]
    final_value = np.zeros((m, nslots))
    for i in range(n):
        if kind[i] == 2 or kind[i] == 3:
            final_value[metric[i], slot[i]] = value[i]
    nseg = 0
    for i in range(n):
        if kind[i] == 1:
            nseg += 1
    out = np.empty((nseg, m))
    final = np.empty((m, nslots), dtype=np.int64)
    for j in range(m):
        for s in range(nslots):
            final[j, s] = s
    k = nseg
    for i in range(n - 1, -1, -1):
        if kind[i] == 3:
            final[metric[i], from_slot[i]] = final[metric[i], slot[i]]
        elif kind[i] == 1:
            k -= 1
            for j in range(m):
                out[k, j] = final_value[j, final[j, seg_bins[i, j]]]
    return out


@njit(**NUMBA_OPTIONS)
def aggregate_run_records(u64, u32, u16, rank, m, bins_used, values, dur_max, comp_idx, feat, present):
    """One pass over one rank's 64-byte run-file records (hbtool.io.hbprof).

    u64/u32/u16: the same records viewed as (c, 8) uint64, (c, 16) uint32 and (c, 32)
    uint16 (native byte order). Per valid record k (flags bit 0): checks that it is
    segment k of `rank` and that every bin index is below bins_used; then takes the max of
    the durations, the computation bin index, and adds each feature's bin value.
    Returns -1, or the first bad record's index * 64 + (metric + 1, or 0 for a wrong
    segment/rank number). Invalid records are skipped (counted by the caller).
    """
    c = u64.shape[0]
    for k in range(c):
        if (u16[k, 31] & 1) == 0:
            continue
        if u32[k, 2] != k or np.int32(u32[k, 3]) != rank:
            return k * 64
        for j in range(m):
            if u16[k, 8 + j] >= bins_used[j]:
                return k * 64 + j + 1
        d = np.int64(u64[k, 0])
        if d > dur_max[k]:
            dur_max[k] = d
        comp_idx[k] = u16[k, 8]
        for j in range(1, m):
            feat[j - 1, k] += values[j, u16[k, 8 + j]]
        present[k] += 1
    return -1


# --------------------------------------------------------------------------- service rate (SPEC 7)


@njit(**NUMBA_OPTIONS)
def service_rate_scan(x, window, gauss, z, combined, conv_window, tol, min_values):
    """The online service-rate heuristic over one queue end's non-blocked samples.

    x: per-sample rates (count / realized period), in time order. For every sample
    from the window-th on: filter the last `window` rates with `gauss` (no padding),
    q = mean + z * sd of the filtered values, q-bar = Welford mean of the q since the
    last restart. Convergence: the running sd of the q, filtered with `combined`
    (Gaussian radius 1 then Laplacian), stays within tol * q-bar over the last
    `conv_window` values, with at least `min_values` q since the restart; then
    restart. Returns q-bar per sample (NaN before the window fills), the running sd,
    and 1 where an estimate converged.
    """
    n = x.size
    g = gauss.size
    c = combined.size
    nf = window - g + 1
    qbar = np.full(n, np.nan)
    qsd = np.full(n, np.nan)
    conv = np.zeros(n, dtype=np.uint8)
    f = np.empty(max(nf, 1))
    sds = np.empty(n + 1)
    k = 0
    mean = 0.0
    m2 = 0.0
    for i in range(window - 1, n):
        base = i - window + 1
        s = 0.0
        for j in range(nf):
            v = 0.0
            for h in range(g):
                v += gauss[h] * x[base + j + h]
            f[j] = v
            s += v
        m = s / nf
        ss = 0.0
        for j in range(nf):
            ss += (f[j] - m) * (f[j] - m)
        sd = np.sqrt(ss / (nf - 1)) if nf > 1 else 0.0
        q = m + z * sd
        k += 1
        d = q - mean
        mean += d / k
        m2 += d * (q - mean)
        sdk = np.sqrt(m2 / (k - 1)) if k > 1 else 0.0
        sds[k - 1] = sdk
        qbar[i] = mean
        qsd[i] = sdk
        if k >= min_values and k >= conv_window + c - 1:
            ok = True
            lim = tol * abs(mean)
            for j in range(conv_window):
                v = 0.0
                start = k - conv_window - c + 1 + j
                for h in range(c):
                    v += combined[h] * sds[start + h]
                if abs(v) > lim:
                    ok = False
                    break
            if ok:
                conv[i] = 1
                k = 0
                mean = 0.0
                m2 = 0.0
    return qbar, qsd, conv
