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
from ..errors import HbtoolError
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


#: the evidence a verdict can rest on, in the order they are tried (a tie goes to the first)
EVIDENCE = ("seed", "best", "reference")
EVIDENCE_SAYS = {
    "seed": "segments longer than median + 4 MAD of their group (seed 004)",
    "best": "segments slower per unit of work than the run's own best segments of their group",
    "reference": "segments slower per unit of work than the same group in the reference",
    "reference run": "the whole run slower per unit of work than the reference",
    "reference time": "the whole run slower than the reference (mostly communication: time against time)",
}


@dataclass
class Estimate:
    name: str
    #: the verdict: the largest of the evidences' figures (``evidence``), and its class
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
    #: each evidence's figure (% of the run's time lost), None when it could not be formed
    evidence: dict = field(default_factory=dict)
    #: the evidence whose figure is the verdict's
    decided_by: str = "seed"
    #: share of the judged segments' time the reference judged: 1 when the whole run was
    #: compared (the profiles record computation), else the share in groups the reference has
    #: (None: no reference)
    reference_coverage: float | None = None
    #: group key -> median time per unit of work (ns per instruction or per CPU ns; per
    #: segment where the group does no work), a reference for other runs
    group_pace: dict = field(default_factory=dict)
    #: the run's time per unit of work (run time / the sum over segments of the least
    #: computation of any process), a reference for other runs; None without computation
    run_pace: float | None = None
    #: what the reference evidence rests on: "groups" (segment by segment), "run" (the
    #: whole run's time per unit of work) or "time" (the whole run's time, when communication
    #: sets the reference's: less than half its time is work); None without a reference
    reference_basis: str | None = None
    _seg: dict = field(repr=False, default_factory=dict)


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
    keys = _group_keys(cl, s, gid, ngroups)
    # beyond the seed: each segment's duration against its work (the computation; a group
    # that does no work is judged per segment), and the run's best segments of its group
    work = np.where(s.computation > 0, s.computation, 1.0)
    pace = s.duration_ns / work
    order3 = np.lexsort((pace, gid))
    p_sorted = pace[order3]
    cnt = sizes[g_sorted[starts]] if n else starts
    best_g = np.empty(ngroups)
    best_g[g_sorted[starts]] = p_sorted[starts + np.floor(config.INTERFERENCE_BEST_QUANTILE * (cnt - 1)).astype(np.int64)] \
        if n else p_sorted[:0]
    pace_med_g = np.empty(ngroups)
    pace_med_g[g_sorted[starts]] = _sorted_medians(p_sorted, starts, cnt)
    # work-bound groups: some work, and their best segments work at least at a share of the
    # run's fastest rate of work; in the others communication sets the time, the seed judges them
    works = np.zeros(ngroups, bool)
    if n:
        works[gid[s.computation > 0]] = True
    rate_g = np.where(works & judged_g & (best_g > 0), 1.0 / np.where(best_g > 0, best_g, 1.0), 0.0)
    bound_g = works & judged_g & (rate_g >= config.INTERFERENCE_MIN_WORK_SHARE * (rate_g.max() if n else 0.0)) \
        & (rate_g > 0)
    best_thr = np.where(bound_g[gid], (1 + config.INTERFERENCE_TOLERANCE) * work * best_g[gid], np.nan) if n \
        else pace
    e = Estimate(
        name=p.name, interference_percent=pct, klass="failed" if failure else classify(pct),
        probability_high=probability_high(pct), failure=failure,
        run_time_s=run_ns / 1e9, segments=n,
        processes=p.nprocesses if p.nprocesses is not None else _count_distinct(p.rank), clusters=int(cl.max()) + 1 if n else 0,
        groups=ngroups, groups_judged=int(judged_g.sum()), segments_judged=int(judged.sum()),
        segments_interfered=int(interfered.sum()), impact_s=total / 1e9, computation_source=p.computation_source,
        collective_rate_hz=rate, judged=bool(judged.any()) and not failure, top=[], warnings=warnings,
        group_medians={keys[g]: float(med_g[g]) for g in range(ngroups)},
        group_sizes={keys[g]: int(sizes[g]) for g in range(ngroups)},
        segment_groups=gid, segment_keys=keys,
        group_pace={keys[g]: float(pace_med_g[g]) for g in range(ngroups) if bound_g[g]},
        _seg={"segment": s.segment, "duration": s.duration_ns.astype(np.float64), "work": work,
              "computation": s.computation, "group": gid, "judged": judged, "run_ns": run_ns,
              "median": work * pace_med_g[gid] if n else pace, "seed_lost": impact, "group_pace": pace_med_g,
              "threshold": {"seed": thr, "best": best_thr}})
    work_total = _least_work(p, s)
    e.run_pace = run_ns / work_total if work_total > 0 and run_ns > 0 and not failure else None
    _decide(e, top)
    return e


def _least_work(p: SegmentProfile, s: Segments) -> float:
    """The run's work: per segment the least computation of any process, summed. Not the
    median: a process that waits for another in a polling loop of its own (HPCC) turns the
    wait into computation, and delays then look like work; the least is the process that
    did not wait. Readers that aggregate as they read give it in meta["work_least"]."""
    if "work_least" in p.meta:
        return float(p.meta["work_least"])
    if not len(p.segment):
        return float(s.computation.sum())
    order = np.argsort(p.segment, kind="stable")
    seg = p.segment[order]
    starts = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]])
    return float(np.minimum.reduceat(p.computation[order], starts).sum())


def _decide(e: Estimate, top: int) -> None:
    """Each evidence's figure from its thresholds; the verdict is the largest of the seed's and
    the reference's, or without a reference of the seed's and the best segments'."""
    sg = e._seg
    d, judged, run_ns = sg["duration"], sg["judged"], sg["run_ns"]
    lost = {}
    for name in EVIDENCE:
        thr = sg["threshold"].get(name)
        if thr is None:
            e.evidence[name] = None
            continue
        if name == "seed":
            lost[name] = sg["seed_lost"]
        else:   # the seed's excess, plus the shift of the segment (at most to its group's median) over thr
            shift = np.maximum(np.minimum(d, sg["median"]) - np.nan_to_num(thr, nan=np.inf), 0.0)
            lost[name] = sg["seed_lost"] + np.where(judged, shift, 0.0)
        total = float(lost[name].sum())
        if name == "reference":   # the whole run against the reference's time per unit of work (or time)
            if sg["run_lost"] > total:
                e.reference_basis = "time" if e.reference_basis == "time" else "run"
            else:
                e.reference_basis = "groups"
            total = max(total, sg["run_lost"])
        e.evidence[name] = 100.0 * total / run_ns if run_ns > 0 else 0.0
    # the run's own best segments stand in for a clean run: with a reference, it decides
    voting = [k for k in lost if k != ("best" if "reference" in lost else "reference")]
    pct = max(e.evidence[k] for k in voting)
    # the first evidence (in EVIDENCE order) that reaches the largest figure, to the 0.05 points shown
    e.decided_by = next(k for k in EVIDENCE if k in voting and e.evidence[k] >= pct - 0.05)
    e.interference_percent, e.probability_high = pct, probability_high(pct)
    if not e.failure:
        e.klass = classify(pct)
    imp, thr = lost[e.decided_by], sg["threshold"][e.decided_by]
    e.impact_s, e.segments_interfered = float(imp.sum()) / 1e9, int(np.count_nonzero(imp))
    idx = np.argsort(-imp, kind="stable")[:top]
    e.top = [{"segment": int(sg["segment"][i]), "duration_s": d[i] / 1e9, "threshold_s": thr[i] / 1e9,
              "impact_s": imp[i] / 1e9, "group": int(sg["group"][i]), "computation": float(sg["computation"][i])}
             for i in idx if imp[i] > 0]


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

    Measured = (its time - the fastest run's time) in % of its time: a truth that a shift
    of every segment cannot hide (seed 004 subtracted the displacement of the group
    medians, which absorbs exactly such a shift; that figure is kept as
    ``seed_measured_percent``). Accuracy = 1 - |p(measured) - p(estimated)|, for the
    verdict and (``seed_accuracy``) for the seed's own figure.
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
        pm, pe = probability_high(raw), e.probability_high
        seed = e.evidence.get("seed", e.interference_percent)
        out.append({"run": e.name, "run_time_s": t, "slower_than_fastest_percent": raw,
                    "median_displacement_percent": disp, "measured_percent": raw,
                    "estimated_percent": e.interference_percent, "decided_by": e.decided_by,
                    "probability_measured": pm, "probability_estimated": pe, "accuracy": 1.0 - abs(pm - pe),
                    "seed_percent": seed, "seed_measured_percent": max(raw - disp, 0.0),
                    "seed_accuracy": 1.0 - abs(pm - probability_high(seed)), "fastest": e is fastest})
    return out


def compare_with_references(e: Estimate, sources: list[Estimate], top: int = 10) -> None:
    """The reference evidence of one run: each judged segment against the best median time
    per unit of work of the same group (same features, computation within the clustering
    distance) among `sources` (clean reference runs, or the runs of a campaign, e itself
    included); then the verdict again. Groups no source has are judged by the seed only."""
    sg = e._seg
    if not len(sg.get("group", ())) or not sources:
        return
    keys = e.segment_keys
    pace = np.full(len(keys), np.nan)
    for g, k in enumerate(keys):
        if e.group_sizes.get(k, 0) < config.INTERFERENCE_MIN_GROUP:
            continue
        for src in sources:
            rk = _match_key(k, list(src.group_pace))
            if rk is not None and not (src.group_pace[rk] >= pace[g]):
                pace[g] = src.group_pace[rk]
    matched = ~np.isnan(pace[sg["group"]])
    # a group counts once its median is slower per unit of work than the reference's by
    # more than the tolerance (two medians of clean runs differ by noise); then from the
    # reference's pace itself
    slow = sg["group_pace"] > (1 + config.INTERFERENCE_TOLERANCE) * pace
    thr = np.where(slow[sg["group"]], sg["work"] * pace[sg["group"]], np.nan)
    sg["threshold"]["reference"] = thr
    judged_time = float(sg["duration"][sg["judged"]].sum())
    covered = float(sg["duration"][sg["judged"] & matched].sum())
    e.reference_coverage = covered / judged_time if judged_time > 0 else 0.0
    # the whole run: the segments that no group judges (too small, or features that vary from
    # segment to segment) take part too; it counts once the run is slower per unit of work
    # than the fastest source by more than the tolerance
    sg["run_lost"] = 0.0
    paced = [src for src in sources if src.run_pace]
    if e.run_pace and paced:
        fastest = min(paced, key=lambda src: src.run_pace)
        # with CPU time as the work, 1 / pace is the share of the wall time spent working
        if fastest.computation_source == "cputime" and 1.0 / fastest.run_pace < config.INTERFERENCE_MIN_WORK_SHARE:
            # communication sets the reference's time, and a process that polls turns waits into
            # work: the references are the same job, so its time against the fastest's
            expected = min(src.run_time_s for src in sources) * 1e9
            e.reference_basis = "time"
        else:
            expected = sg["run_ns"] / e.run_pace * fastest.run_pace      # per unit of work
        if sg["run_ns"] > (1 + config.INTERFERENCE_TOLERANCE) * expected:
            sg["run_lost"] = sg["run_ns"] - expected
        e.reference_coverage = 1.0   # the whole run was compared: it is judged, groups or not
        if not e.judged:
            e.judged = True
            e.warnings = [w for w in e.warnings if "nothing can be judged" not in w]
    _decide(e, top)


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


def assess(profiles, top: int = 10, references=()) -> tuple[list[Estimate], list[dict]]:
    """The whole method over one or more runs of one program: each run's estimate, and,
    given several runs, each run's measured interference beside it (:func:`measured`).

    The reference evidence compares each run with `references` (clean runs of the same
    program) and, given several runs, with all of them: per group, the fastest."""
    ests = [estimate(p, top=top) for p in profiles]
    refs = [estimate(p, top=0) for p in references]
    for r in refs:
        if r.failure:
            raise HbtoolError(f"reference {r.name}: the run failed ({r.failure}); give a run that finished "
                              f"as --reference")
    whole = [e for e in ests if not e.failure]   # a failed run's time measures nothing
    sources = refs + (whole if len(whole) > 1 else [])
    if sources:
        for e in whole:
            compare_with_references(e, sources, top=top)
    return ests, (measured(whole) if len(whole) > 1 else [])
