"""Interference from a segment profile (SPEC 6, seed 004).

A run is cut into segments at the ends of global blocking collectives; segment k is
the same on every process. Per segment: its computation (the median over processes),
its duration (the maximum over processes), and its communication and I/O features.
Segments with the same computation (clustered by relative distance) and the same
communication and I/O should take the same time; one that takes longer than
median + 4 MAD of its group lost the excess to interference.

Everything here works on numpy arrays, vectorised: a million segments of 64
processes take a few seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import config
from ..model import SegmentProfile, Segments


def aggregate(p: SegmentProfile) -> Segments:
    seg = p.segment
    if len(seg) and not bool((seg[1:] >= seg[:-1]).all()):
        order = np.argsort(seg, kind="stable")
        seg = seg[order]
    else:
        order = slice(None)  # already in segment order (what the profiler writes): no copy
    starts = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]])
    counts = np.diff(np.r_[starts, len(seg)])
    segs = seg[starts]
    dur = np.maximum.reduceat(p.duration_ns[order], starts) if len(seg) else np.empty(0, np.int64)
    feats = np.add.reduceat(p.features[order], starts, axis=0) if len(seg) and p.features.shape[1] else \
        np.zeros((len(segs), p.features.shape[1]))
    comp = _segment_medians(p.computation[order], starts, counts)
    return Segments(segs, comp, dur.astype(np.int64), feats, counts)


def _segment_medians(values: np.ndarray, starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Median of each run of `values` (runs given by starts/counts), vectorised by run length."""
    out = np.empty(len(starts))
    if len(starts) and (counts == counts[0]).all():  # every segment has every process
        return np.median(values.reshape(len(starts), int(counts[0])), axis=1)
    for c in np.unique(counts):
        sel = np.flatnonzero(counts == c)
        idx = starts[sel][:, None] + np.arange(c)[None, :]
        out[sel] = np.median(values[idx], axis=1)
    return out


def relative_clusters(x: np.ndarray, threshold: float = config.INTERFERENCE_REL_DISTANCE) -> np.ndarray:
    """Cluster ids (in ascending value order) by the relative-distance rule.

    Sort ascending; a new cluster starts where |x[i+1] - x[i]| / min(|x[i]|, |x[i+1]|)
    is at least `threshold`; equal values never split (0 and 0 included).
    """
    n = len(x)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    order = np.argsort(x, kind="stable")
    xs = x[order]
    a, b = xs[:-1], xs[1:]
    lo = np.minimum(np.abs(a), np.abs(b))
    diff = np.abs(b - a)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(diff == 0, 0.0, np.where(lo > 0, diff / np.where(lo > 0, lo, 1.0), np.inf))
    cid = np.r_[0, np.cumsum(rel >= threshold)]
    out = np.empty(n, dtype=np.int64)
    out[order] = cid
    return out


def _group_ids(cluster: np.ndarray, features: np.ndarray) -> np.ndarray:
    """Group id per segment: the exact (cluster, features...) tuple (hash-based, O(n F))."""
    import pandas as pd

    codes = pd.factorize(cluster)[0].astype(np.int64)
    for j in range(features.shape[1]):
        c = pd.factorize(features[:, j])[0].astype(np.int64)
        codes = pd.factorize(codes * (int(c.max()) + 1 if len(c) else 1) + c)[0].astype(np.int64)
    return codes


@dataclass
class Estimate:
    name: str
    interference_percent: float
    klass: str
    probability_high: float
    run_time_s: float
    segments: int
    processes: int
    clusters: int
    groups: int
    groups_judged: int
    segments_judged: int
    segments_interfered: int
    impact_s: float
    computation_source: str
    collective_rate_hz: float
    judged: bool
    top: list[dict]
    warnings: list[str]
    group_medians: dict          # group key -> median duration (ns), for multi-run comparison
    group_sizes: dict
    segment_groups: np.ndarray = field(repr=False, default=None)
    segment_keys: list = field(repr=False, default=None)
    #: the run failed (a rank aborted, crashed, exited without MPI_Finalize, or mpirun died):
    #: one line saying how, from the profile; then klass is "failed" and nothing is judged
    failure: str | None = None


def probability_high(x: float) -> float:
    """Seed 004's logistic: 1 / (1 + exp(-0.35 (x - 11.25)))."""
    return float(1.0 / (1.0 + np.exp(-config.INTERFERENCE_STEEPNESS * (x - config.INTERFERENCE_MIDPOINT))))


def classify(x: float) -> str:
    if x < config.INTERFERENCE_LOW:
        return "low"
    if x <= config.INTERFERENCE_HIGH:
        return "medium"
    return "high"


def estimate(p: SegmentProfile, top: int = 10) -> Estimate:
    s = p.aggregated if p.aggregated is not None else aggregate(p)
    n = len(s.segment)
    warnings = list(p.warnings)
    run_ns = p.run_time_ns if p.run_time_ns else int(s.duration_ns.sum())
    cl = relative_clusters(s.computation)
    gid = _group_ids(cl, s.features)
    ngroups = int(gid.max()) + 1 if n else 0
    sizes = np.bincount(gid, minlength=ngroups) if n else np.empty(0, np.int64)
    # per group: median and MAD of the durations, by sorting once by (group, duration)
    order = np.lexsort((s.duration_ns, gid))
    g_sorted = gid[order]
    d_sorted = s.duration_ns[order].astype(np.float64)
    starts = np.flatnonzero(np.r_[True, g_sorted[1:] != g_sorted[:-1]]) if n else np.empty(0, np.int64)
    med = _sorted_medians(d_sorted, starts, sizes[g_sorted[starts]] if n else starts)
    med_g = np.empty(ngroups)
    med_g[g_sorted[starts]] = med
    dev = np.abs(s.duration_ns - med_g[gid])
    order2 = np.lexsort((dev, gid))
    mad = _sorted_medians(dev[order2].astype(np.float64), starts, sizes[g_sorted[starts]] if n else starts)
    mad_g = np.empty(ngroups)
    mad_g[g_sorted[starts]] = mad
    judged_g = sizes >= config.INTERFERENCE_MIN_GROUP
    thr = med_g[gid] + config.INTERFERENCE_MADS * mad_g[gid]
    judged = judged_g[gid]
    impact = np.where(judged, np.maximum(s.duration_ns - thr, 0.0), 0.0)
    interfered = judged & (s.duration_ns > thr)
    total = float(impact.sum())
    pct = 100.0 * total / run_ns if run_ns > 0 else 0.0
    rate = n / (run_ns / 1e9) if run_ns > 0 else float("nan")
    failure = p.meta.get("failure") if p.meta else None
    if n and rate >= config.INTERFERENCE_MAX_RATE_HZ and not failure:
        warnings.append(
            f"{p.name}: {rate:.0f} segments/s (segments of {1e3 / rate:.2f} ms on average): collectives this "
            f"frequent make segments too short to judge well; the estimate may be off "
            f"(seed 004 saw this at about 300 Hz)")
    if not judged.any() and not failure:
        warnings.append(f"{p.name}: no group has {config.INTERFERENCE_MIN_GROUP} segments or more: nothing can be "
                        f"judged")
    idx = np.argsort(-impact, kind="stable")[:top]
    top_rows = [{"segment": int(s.segment[i]), "duration_s": s.duration_ns[i] / 1e9, "threshold_s": thr[i] / 1e9,
                 "impact_s": impact[i] / 1e9, "group": int(gid[i]), "computation": float(s.computation[i])}
                for i in idx if impact[i] > 0]
    keys = _group_keys(cl, s, gid, ngroups)
    return Estimate(
        name=p.name, interference_percent=pct, klass="failed" if failure else classify(pct),
        probability_high=probability_high(pct), failure=failure,
        run_time_s=run_ns / 1e9, segments=n,
        processes=p.nprocesses if p.nprocesses is not None else _count_distinct(p.rank), clusters=int(cl.max()) + 1 if n else 0,
        groups=ngroups, groups_judged=int(judged_g.sum()), segments_judged=int(judged.sum()),
        segments_interfered=int(interfered.sum()), impact_s=total / 1e9, computation_source=p.computation_source,
        collective_rate_hz=rate, judged=bool(judged.any()) and not failure, top=top_rows, warnings=warnings,
        group_medians={keys[g]: float(med_g[g]) for g in range(ngroups)},
        group_sizes={keys[g]: int(sizes[g]) for g in range(ngroups)},
        segment_groups=gid, segment_keys=keys)


def _sorted_medians(values: np.ndarray, starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Medians of consecutive sorted runs."""
    if len(starts) == 0:
        return np.empty(0)
    lo = starts + (counts - 1) // 2
    hi = starts + counts // 2
    return (values[lo] + values[hi]) / 2


def _count_distinct(x: np.ndarray) -> int:
    if not len(x):
        return 0
    lo, hi = int(x.min()), int(x.max())
    if lo >= 0 and hi < 1 << 24:
        return int(np.count_nonzero(np.bincount(x)))
    return int(len(np.unique(x)))


def _group_keys(cl, s: Segments, gid, ngroups) -> list:
    """A run-independent key per group: (median computation of its cluster, feature tuple)."""
    import pandas as pd

    keys = [None] * ngroups
    if not ngroups:
        return keys
    first = np.full(ngroups, -1)
    first[gid[::-1]] = np.arange(len(gid))[::-1]
    comp_cl = pd.Series(s.computation).groupby(cl).median().to_dict()
    for g in range(ngroups):
        i = first[g]
        keys[g] = (float(comp_cl[int(cl[i])]), tuple(float(v) for v in s.features[i]))
    return keys


def measured(estimates: list[Estimate]) -> list[dict]:
    """Several runs of one program: each run's measured interference and the accuracy.

    Measured = (its time - the fastest run's time) in % of its time, less the displacement
    of its group medians from the fastest run's (continuous interference, which the
    estimate leaves out by design), in % of its time. Accuracy = 1 - |p(measured) -
    p(estimated)|.
    """
    if len(estimates) < 2:
        return []
    fastest = min(estimates, key=lambda e: e.run_time_s)
    ref = fastest.group_medians
    ref_keys = list(ref)
    out = []
    for e in estimates:
        disp_ns = 0.0
        for k, med in e.group_medians.items():
            rk = _match_key(k, ref_keys)
            if rk is not None:
                disp_ns += (med - ref[rk]) * e.group_sizes[k]
        t = e.run_time_s
        raw = 100.0 * (t - fastest.run_time_s) / t if t > 0 else 0.0
        disp = 100.0 * disp_ns / 1e9 / t if t > 0 else 0.0
        m = max(raw - disp, 0.0)
        pm, pe = probability_high(m), e.probability_high
        out.append({"run": e.name, "run_time_s": t, "slower_than_fastest_percent": raw,
                    "median_displacement_percent": disp, "measured_percent": m,
                    "estimated_percent": e.interference_percent, "probability_measured": pm,
                    "probability_estimated": pe, "accuracy": 1.0 - abs(pm - pe), "fastest": e is fastest})
    return out


def _match_key(k, ref_keys):
    comp, feats = k
    best = None
    for rk in ref_keys:
        if rk[1] != feats:
            continue
        lo = min(abs(comp), abs(rk[0]))
        d = abs(comp - rk[0])
        rel = 0.0 if d == 0 else (d / lo if lo > 0 else np.inf)
        if rel < config.INTERFERENCE_REL_DISTANCE and (best is None or rel < best[0]):
            best = (rel, rk)
    return best[1] if best else None


def assess(profiles, top: int = 10) -> tuple[list[Estimate], list[dict]]:
    """The whole method over one or more runs of one program: each run's estimate, and,
    given several runs, each run's measured interference beside it (:func:`measured`)."""
    ests = [estimate(p, top=top) for p in profiles]
    whole = [e for e in ests if not e.failure]   # a failed run's time measures nothing
    return ests, (measured(whole) if len(whole) > 1 else [])
