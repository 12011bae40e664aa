"""HSA classification (SPEC 4, seed 000 Algorithm 1), its training, and macro-F1.

Library calls for the whole pipeline: :func:`diagnose` (a trace in, every thread's
status out) and :func:`train_from_traces` (labelled traces in, a model out).

Normal ranges are learned from sequences labelled normal: per feature, on a log scale,
the central `level` share of the normal values (level 1: their minimum to maximum),
each end moved away from the median by `margin` times its distance to it, and never
closer than config.HSA_MIN_SPREAD (docs/methods.md). DistanceRange (DTW, LB, LTRmax)
bounds from above only; progress from below only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import config
from ..model import HeartbeatTrace
from ..model.hsa import FEATURES, LOWER_ONLY, STATUSES, UPPER_ONLY, FeatureSettings, HsaModel
from .diagnosis import MODEL_RUNS, REFERENCE_COLUMNS, features_table, labelled_table, pooled_units

#: features that are ratios (1 = like the reference): ranges are fitted on their log,
#: where twice as slow and twice as fast lie equally far from 1
RATIO_FEATURES = ("GTR", "LTR", "GHR", "LHR", "LTRmax", "progress", "WR")


def _to_fit_scale(f: str, x: np.ndarray) -> np.ndarray:
    if f in RATIO_FEATURES:
        return np.log(np.maximum(x, 1e-12))
    return np.log1p(np.maximum(x, 0.0))  # distances: >= 0, heavy right tail


def _from_fit_scale(f: str, v: float) -> float:
    return float(np.exp(v)) if f in RATIO_FEATURES else float(np.expm1(v))


def fit_ranges(normal: pd.DataFrame, level: float, margin: float = 0.0) -> dict[str, tuple[float | None, float | None]]:
    """Per-feature normal interval from the rows of normal sequences.

    On a log scale (ratios: log; distances: log(1 + x)): the central `level` share of the
    values (level 1: their minimum to maximum), each end then moved away from the median
    by `margin` times its distance to the median, because the tails of a few dozen
    training values understate those of the population.
    """
    ranges = {}
    for f in FEATURES:
        x = normal[f].to_numpy(dtype=float) if f in normal else np.empty(0)
        x = x[np.isfinite(x)]
        if x.size == 0:
            ranges[f] = (None, None)
            continue
        y = _to_fit_scale(f, x)
        med = float(np.median(y))
        lo, hi = (float(v) for v in np.quantile(y, [0.5 - level / 2, 0.5 + level / 2]))
        floor = config.HSA_MIN_SPREAD
        lo = med - (1 + margin) * max(med - lo, floor)
        hi = med + (1 + margin) * max(hi - med, floor)
        ranges[f] = (None if f in UPPER_ONLY else _from_fit_scale(f, lo),
                     None if f in LOWER_ONLY else _from_fit_scale(f, hi))
    if ranges.get("WR", (None, None))[1] is not None:
        # a few normal runs do not show how much the machine's load moves one thread's work
        # from run to run: never tighter than the built-in bound
        ranges["WR"] = (None, max(ranges["WR"][1], config.HSA_DEFAULT_RANGES["WR"][1]))
    return ranges


def _inside(v: float, r: tuple[float | None, float | None]) -> bool:
    lo, hi = r
    return (lo is None or v >= lo) and (hi is None or v <= hi)


def outside_ranges(row, ranges) -> list[str]:
    return [f for f in FEATURES if f in ranges and np.isfinite(row.get(f, np.nan)) and not _inside(row[f], ranges[f])]


#: decimals a feature is shown with (ratios near 1, distances in heart-rate units)
DECIMALS = {f: (2 if f in RATIO_FEATURES else 1) for f in FEATURES}


def _fmt(v, digits: int) -> str:
    return "n/a" if v is None or not np.isfinite(v) else f"{v:.{digits}f}"


def _describe(f: str, v: float, r) -> str:
    lo, hi = r
    bound = hi if lo is None else lo if hi is None else (lo if v < lo else hi)
    digits = DECIMALS.get(f, 2)
    while digits < 8 and _fmt(v, digits) == _fmt(bound, digits):  # 1.8604 is not "1.86 > 1.86"
        digits += 1
    if lo is None:
        return f"{f} {_fmt(v, digits)} > {_fmt(hi, digits)}"
    if hi is None:
        return f"{f} {_fmt(v, digits)} < {_fmt(lo, digits)}"
    return f"{f} {_fmt(v, digits)} outside [{_fmt(lo, digits)}, {_fmt(hi, digits)}]"


def _bytes(v) -> int | None:
    return int(v) if v is not None and np.isfinite(v) else None


def _mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


def _work_shift(row) -> str:
    """The reason to call a thread slowed down by its work shift (diagnosis.work_shifts:
    its own work against its team's, later in its run against earlier) or, where that does
    not, by its units against the same constructs' in the model's normal runs (UR, against
    its teammates'), or "". Not by UR where its loop chunks, compared with its teammates' of
    the same loops and windows (IR), took under 1 / SHIFT_MAX of that per iteration: its
    units' excess over other runs is then which calls of a loop it took, not its pace (one
    loop's code costs 2.5x more per iteration in some of GraphicsMagick's calls; a normal
    thread that took mostly those read UR 2.38, IR 1.00, and was called slowed; its slowed
    victims, and cd-hit's and mmseqs2's, read IR 2.8-3.7 beside UR 2.2-3.4)."""
    ws = row.get("WS", float("nan"))
    if ws is None or not np.isfinite(ws) or ws <= config.SHIFT_MAX:
        ur, team = row.get("UR", float("nan")), row.get("UR_team", float("nan"))
        ir = row.get("IR", float("nan"))
        paced = ir is not None and np.isfinite(ir) and ir * config.SHIFT_MAX < (ur if ur is not None else np.nan)
        if ur is not None and np.isfinite(ur) and ur > config.SHIFT_MAX and team is not None and np.isfinite(team) \
                and ur > config.SHIFT_MAX * team and not paced:
            return (f"its units of work took {ur:.2f}x as long as the same constructs' in "
                    f"{row.get('UR_against') or 'the normal runs'}, construct by construct, its teammates' "
                    f"{team:.2f}x (unit ratio, > {config.SHIFT_MAX:g} and "
                    f"{config.SHIFT_MAX:g}x theirs): it slowed down in its own work")
        return ""
    if row.get("WS_against") == "iterations":
        return (f"over its whole run, its loop chunks took {ws:.2f}x as long per iteration as its teammates' of "
                f"the same loops (iteration ratio, > {config.SHIFT_MAX:g}): it slowed down in its own work while "
                f"its team waited for it at the loops' ends")
    if row.get("WS_against") == "model":
        return (f"over its whole run, its own work in the parallel regions took {ws:.2f}x as long against its "
                f"team's as in the model's normal runs (work shift, > {config.SHIFT_MAX:g}): it was slow from its "
                f"first beats, or from too early in its run to be compared with its own earlier work, while its "
                f"team waited for it at the barriers")
    return (f"from about its beat {int(row.get('WS_beat') or 0)} on, its own work in the parallel regions took "
            f"{ws:.2f}x as long against its team's as before (work shift, > {config.SHIFT_MAX:g}): it slowed "
            f"down while its team waited for it at the barriers")


def _slowed_not_stopped(row, ss: float) -> bool:
    """A thread whose share of its team's units fell (share shift `ss`) because each of its units
    grew past the work shift's bound: it works, slowly, and takes fewer units for it -- its share
    times its slow-down, its share of the team's time at work, is still config.SHARE_SHIFT_MIN at
    least (cd-hit at 4 threads asked: a victim of slow 3x, WS 3.2, SS 0.050: 0.16). A thread
    that stopped has next to no units left, and what its few units measure is not work
    (FastTree's stopped victim: WS 2.3 from the ends of regions it took no section of, SS 0.009:
    0.02)."""
    ws = row.get("WS", float("nan"))
    return bool(_work_shift(row)) and ss * ws >= config.SHARE_SHIFT_MIN


def _as_many_as_its_team(row) -> bool:
    """A thread whose beats do not count its progress (automatic OpenMP beats) that made as
    many beats as the most of its process's threads (config.SHIFT_SAME_BEATS: a static loop's
    uneven split): it did its share of the work to the end."""
    team = row.get("team_beats", float("nan"))
    return (not row.get("progress_counts", True) and team is not None and np.isfinite(team)
            and row["beats"] * config.SHIFT_SAME_BEATS >= team)


def classify_row(row, model: HsaModel) -> tuple[str, str]:
    """(status, reason) of one sequence: Algorithm 1 with hbtool's documented additions."""
    rg = model.ranges
    if model.lifecycle_rule and row.get("died"):
        return "shutdown", f"the process ended abnormally before this thread finished ({row.get('ended', '')})"
    if row.get("leaking"):
        # the memory signal (hbtool's): it kept what it allocated, step after step
        return "memoryleak", (f"kept {_mib(row['retained'])} it allocated over its run, more than "
                              f"{_mib(row['retained_bound'])} (bound from {row.get('retained_against')}), "
                              f"and its process kept it too")
    ss = row.get("SS", float("nan"))
    if ss is not None and np.isfinite(ss) and ss < config.SHARE_SHIFT_MIN and not _slowed_not_stopped(row, ss):
        # (hbtool's) in a team cut by time (a dynamic loop's chunks): it stopped taking its
        # share of the units of work while its team went on
        if row.get("SS_against") == "model":
            return "shutdown", (f"over its whole run, it did {ss:.2g} of the share of its team's units of work "
                                f"that it did in the model's normal runs (share shift, < {config.SHARE_SHIFT_MIN:g}): "
                                f"it stopped working from its first beats while its team went on")
        return "shutdown", (f"from about its beat {int(row.get('SS_beat') or 0)} on, it did {ss:.2g} of the share "
                            f"of its team's units of work it did before (share shift, < {config.SHARE_SHIFT_MIN:g}): "
                            f"it stopped working while its team went on")
    wr = row.get("WR", float("nan"))
    wr_known = "WR" in rg and wr is not None and np.isfinite(wr)
    shifted = _work_shift(row)
    if isinstance(row.get("na_reason"), str) and row["na_reason"]:
        # no heart rates; its own work may still be judged (a long static loop beats once)
        if shifted:
            return "memoryleak", f"{shifted}; {row['na_reason']}"
        if wr_known and not _inside(wr, rg["WR"]):
            return "memoryleak", (f"worked {wr:.2f}x as long as {row.get('WR_against') or 'its reference'} in "
                                  f"the parallel regions ({_describe('WR', wr, rg['WR'])}); {row['na_reason']}")
        prog = row.get("progress", float("nan"))
        all_beats = (np.isfinite(prog) and prog >= 1.0) or not row.get("progress_counts", True)
        if wr_known and all_beats and row.get("ending") not in ("no_end_record", "unknown"):
            return "normal", (f"its own work in line with {row.get('WR_against')} (WR {wr:.2f}) and a normal "
                              f"end; {row['na_reason']}")
        return "unknown", row["na_reason"]
    prog = row["progress"]
    if "progress" in rg and np.isfinite(prog) and not _inside(prog, rg["progress"]):
        return "shutdown", f"completed {row['beats']} beats, {_describe('progress', prog, rg['progress'])} (ended early)"
    if shifted:
        return "memoryleak", shifted
    if wr_known and not _inside(wr, rg["WR"]):
        # it took longer over its own work than its reference, while its team waited for it at
        # the barriers: their heartbeats slowed with it, so only this tells it from them
        return "memoryleak", (f"worked {wr:.2f}x as long as {row.get('WR_against') or 'its reference'} in the "
                              f"parallel regions ({_describe('WR', wr, rg['WR'])}): its heart rate fell with "
                              f"its team's, which waited for it at the barriers")
    mintime, maxtime = rg["GTR"]
    gtr = row["GTR"]
    peak = row.get("LTRmax", float("nan"))
    if "LTRmax" in rg and np.isfinite(peak) and not _inside(peak, rg["LTRmax"]):
        # a stretch of the run much slower than the reference, not explained by an early end
        why = "; ".join(_describe(f, row[f], rg[f]) for f in outside_ranges(row, rg))
        return "memoryleak", f"slowed down: at its slowest it took {peak:.2f}x the reference's time: {why}"
    # it did all its work: as many beats as the reference (or the model's count), not merely
    # enough to stay inside the progress range (that would override Algorithm 1's
    # GTR-below-minimum -> shutdown rule for a thread that stopped a few beats short)
    all_done = np.isfinite(prog) and prog >= 1.0
    share_done = not all_done and _as_many_as_its_team(row)
    if (all_done or share_done) and mintime is not None and np.isfinite(gtr) and gtr < mintime \
            and not (row["GHR"] < (rg["GHR"][0] or 0)):
        # it did all its work, sooner than the reference: not a shutdown, not a leak
        why = "; ".join(_describe(f, row[f], rg[f]) for f in outside_ranges(row, rg))
        if share_done:
            return "normal", (f"made as many beats as the most of its team ({int(row['team_beats'])}), sooner "
                              f"than the reference: {why}")
        return "normal", f"completed its beats faster than the reference: {why}"
    dist_ok = all(_inside(row[f], rg[f]) for f in ("DTW", "LB") if np.isfinite(row[f]))
    out = outside_ranges(row, rg)
    why = "; ".join(_describe(f, row[f], rg[f]) for f in out)
    if dist_ok:
        time_ok = all(_inside(row[f], rg[f]) for f in ("GTR", "LTR") if np.isfinite(row[f]))
        if not time_ok:
            if mintime is not None and gtr < mintime:
                return "shutdown", f"similar heart rate, but ended early: {why}"
            # second evidence: the heart rate (GHR, LHR, as in Algorithm 1) or, added by hbtool,
            # the local time ratios (LTR, LTRmax), which a leak that starts late moves more
            local_ok = all(_inside(row[f], rg[f]) for f in ("GHR", "LHR", "LTR", "LTRmax")
                           if f in rg and np.isfinite(row.get(f, np.nan)))
            if maxtime is not None and gtr > maxtime and not local_ok:
                return "memoryleak", f"slower, locally and overall: {why}"
        return "normal", ("within the normal ranges" if not out else f"not enough to call an anomaly: {why}")
    if mintime is not None and np.isfinite(gtr) and gtr < mintime:
        return "shutdown", f"heart rate unlike the reference and ended early: {why}"
    return "memoryleak", f"heart rate unlike the reference: {why}"


def with_progress(features: pd.DataFrame, expected_beats: float | None) -> pd.DataFrame:
    """The table with progress = beats / expected_beats (a model's learned count); as is
    when there is none (progress then stays relative to each row's reference)."""
    if not expected_beats or "beats" not in features:
        return features
    out = features.copy()
    counts = out["progress_counts"].to_numpy(dtype=bool) if "progress_counts" in out else np.ones(len(out), bool)
    out["progress"] = np.where(counts, out["beats"].to_numpy(dtype=float) / float(expected_beats), np.nan)
    return out


def records(table: pd.DataFrame) -> list[dict]:
    """The rows of `table` as dicts of Python values, what DataFrame.to_dict("records") gives,
    column by column (to_dict boxes value by value: most of training's time on small tables)."""
    cols = list(table.columns)
    return [dict(zip(cols, vals)) for vals in zip(*(table[c].tolist() for c in cols))] if cols else \
        [{} for _ in range(len(table))]


def _with_crowding(row, status: str, reason: str) -> tuple[str, str]:
    """A normal verdict on a thread whose team's work over time could not be judged, because
    the machine kept a thread of its team off its CPU in so many windows that fewer than six
    were left (summary._crowded), says so: it is normal only as far as the rest of the trace
    tells."""
    n = int(row.get("crowded") or 0)
    ws = row.get("WS", float("nan"))
    if status == "normal" and n > config.SHIFT_WINDOWS - 6 and not (ws is not None and np.isfinite(ws)):
        reason += (f"; its work over its team's time not judged: the machine kept a thread of its team off "
                   f"its CPU in {n} of {config.SHIFT_WINDOWS} windows")
    return status, reason


def classify(features: pd.DataFrame, model: HsaModel) -> pd.DataFrame:
    """Status, reason and out-of-range features of every row of a features table."""
    features = with_progress(features, model.expected_beats)
    rows = records(features)
    res = [_with_crowding(r, *classify_row(r, model)) for r in rows]
    return pd.DataFrame({
        "status": [s for s, _ in res],
        "reason": [w for _, w in res],
        "outside": [outside_ranges(r, model.ranges) if not r.get("na_reason") else [] for r in rows],
    }, index=features.index)


def macro_f1(y_true, y_pred, classes=STATUSES) -> float:
    """Mean F1 over `classes` (a class absent from both truth and prediction is skipped)."""
    y_true, y_pred = np.asarray(y_true, dtype=object), np.asarray(y_pred, dtype=object)
    scores = []
    for c in classes:
        tp = np.sum((y_true == c) & (y_pred == c))
        fp = np.sum((y_true != c) & (y_pred == c))
        fn = np.sum((y_true == c) & (y_pred != c))
        if tp + fp + fn == 0:
            continue
        scores.append(2 * tp / (2 * tp + fp + fn))
    return float(np.mean(scores)) if scores else float("nan")


def confusion(y_true, y_pred, classes=STATUSES + ("unknown",)) -> pd.DataFrame:
    m = pd.crosstab(pd.Categorical(y_true, categories=classes), pd.Categorical(y_pred, categories=classes),
                    dropna=False)
    m.index.name, m.columns.name = "true", "predicted"
    return m


def _cv_f1(features: pd.DataFrame, labels: np.ndarray, level: float, margin: float, settings, folds: int,
           seed: int) -> float:
    """Macro-F1 of `level` by k-fold cross-validation inside the training rows: each fold's
    ranges come from the other folds' normal rows, so training normals are judged by
    ranges they did not shape (scoring on the rows that made the ranges flatters a
    level that merely spans them)."""
    rng = np.random.default_rng(seed)
    fold = np.empty(len(labels), dtype=int)
    for lab in np.unique(labels):
        idx = np.flatnonzero(labels == lab)
        fold[rng.permutation(idx)] = np.arange(idx.size) % folds
    pred = np.empty(len(labels), dtype=object)
    rows = records(features)   # once: each fold's rows are classified as classify() would
    beats = features["beats"].to_numpy(dtype=float) if "beats" in features else None
    counts = features["progress_counts"].to_numpy(dtype=bool) if "progress_counts" in features else \
        np.ones(len(features), bool)
    for k in range(folds):
        fit = (fold != k) & (labels == "normal")
        if not fit.any():
            return float("nan")
        normal = features[fit]
        expected = float(np.median(normal["beats"])) if "beats" in normal else None
        model = HsaModel(fit_ranges(with_progress(normal, expected), level, margin), level, margin, settings, expected)
        for i in np.flatnonzero(fold == k):
            r = rows[i]
            if expected and beats is not None:   # with_progress, row by row
                r = {**r, "progress": beats[i] / expected if counts[i] else float("nan")}
            pred[i] = classify_row(r, model)[0]
    return macro_f1(labels, pred)


def train(features: pd.DataFrame, labels, settings: FeatureSettings | None = None,
          levels=config.HSA_LEVELS, margins=config.HSA_MARGINS, default_level: float = config.HSA_DEFAULT_LEVEL,
          default_margin: float = config.HSA_DEFAULT_MARGIN, folds: int = config.HSA_CV_FOLDS,
          seed: int = 0) -> HsaModel:
    """Learn the normal ranges from the rows labelled normal.

    With only normal rows the level and margin are the defaults. With anomalous rows
    too, the (level, margin) with the best cross-validated macro-F1 on the training rows
    is chosen (the mean over config.HSA_CV_REPEATS shuffles; ties: the one nearest the
    defaults, so that a small training set that cannot tell settings apart gets them).
    """
    labels = np.asarray(labels, dtype=object)
    features, work = _against_normal_work(features, labels)
    retained = _normal_retained(features, labels)
    team_work = _normal_team_work(features, labels)
    team_share = _normal_median(features, labels, "team_share", above=0.0)
    units = _normal_units(features, labels)
    usable = ~features["na_reason"].astype(bool).to_numpy() if "na_reason" in features else np.ones(len(labels), bool)
    normal = features[(labels == "normal") & usable]
    if not len(normal) and work:
        # no thread beat often enough for heart rates (one long static loop each): the
        # built-in ranges, and each thread's normal work to judge it by (WR)
        model = default_model(settings)
        model.work = work
        model.retained = retained
        model.team_work = team_work
        model.team_share = team_share
        model.units = units
        model.level, model.margin = default_level, 0.0
        model.training = {"sequences": {c: int(np.sum(labels == c)) for c in STATUSES}, "macro_f1": None,
                          "cv_macro_f1": None, "ranges": "built-in: no normal thread had enough beats for "
                                                         "heart rates; only its work (WR) was learned"}
        return model
    if not len(normal):
        raise ValueError("no normal sequence with features to learn the normal ranges from")
    expected = float(np.median(normal["beats"])) if "beats" in normal else None
    normal = with_progress(normal, expected)
    settings = settings or FeatureSettings()
    counts = {c: int(np.sum(labels == c)) for c in STATUSES}
    anomalous = counts["memoryleak"] + counts["shutdown"] > 0
    level, margin, f1 = default_level, default_margin, float("nan")
    grid = [(lv, m) for lv in levels for m in margins]
    if anomalous and len(grid) > 1:
        k = max(2, min(folds, counts["normal"]))
        scores = []
        for lv, m in grid:
            cv = [_cv_f1(features[usable], labels[usable], lv, m, settings, k, seed + r)
                  for r in range(config.HSA_CV_REPEATS)]
            prior = abs(lv - default_level) + abs(m - default_margin)
            scores.append((round(float(np.nanmean(cv)), 6) if np.isfinite(cv).any() else -1.0, -prior, lv, m))
        f1, _, level, margin = max(scores)
    elif anomalous:
        level, margin = grid[0]
    ranges = fit_ranges(normal, level, margin)
    if not anomalous:
        ranges = never_narrower(ranges, config.HSA_DEFAULT_RANGES)
    model = HsaModel(ranges, level, margin, settings, expected, work=work, retained=retained, team_work=team_work,
                     units=units, team_share=team_share)
    train_f1 = macro_f1(labels[usable], classify(features[usable], model)["status"].to_numpy()) if anomalous else None
    model.training = {
        "sequences": counts,
        "macro_f1": None if train_f1 is None else round(train_f1, 4),
        "cv_macro_f1": None if np.isnan(f1) else round(f1, 4),
        "level_chosen_by": (f"{k}-fold cross-validated macro-F1 on the training sequences"
                            if anomalous and len(grid) > 1 else "given" if anomalous else "default (normal data only)"),
    }
    return model


def never_narrower(ranges: dict, floor: dict) -> dict:
    """Each range widened to contain `floor`'s (a missing bound stays missing).

    A model learnt from normal runs alone has no evidence that the built-in ranges are too
    wide for its program, only a few runs' spread, which understates how much a program's
    runs differ from one another on a loaded machine (NPB EP, 4 threads on 2 CPUs: three
    quiet runs bounded LB at 0.2, and normal threads of later runs reached 15). Such a model
    widens the built-in ranges where its runs vary more and never narrows them; one trained
    with anomalous runs too may narrow them, its level and margin chosen by cross-validation."""
    out = dict(ranges)
    for f, (lo, hi) in ranges.items():
        flo, fhi = floor.get(f, (None, None))
        out[f] = (None if lo is None else lo if flo is None else min(lo, flo),
                  None if hi is None else hi if fhi is None else max(hi, fhi))
    return out


def _against_normal_work(features: pd.DataFrame, labels: np.ndarray) -> tuple[pd.DataFrame, dict | None]:
    """Each thread number's median work in the normal rows (None without any), and the
    table with WR measured against it, as diagnose measures it with the model."""
    if "work_s" not in features:
        return features, None
    w = features["work_s"].to_numpy(dtype=float)
    ok = (labels == "normal") & np.isfinite(w) & (w > 0)
    if not ok.any():
        return features, None
    work = pd.Series(w[ok]).groupby(features["thread"].to_numpy()[ok]).median()
    work = {int(k): float(v) for k, v in work.items()}
    out = features.copy()
    ref = np.array([work.get(int(t), np.nan) for t in out["thread"]], dtype=float)
    # as work_ratios and features_table: the team first, and none where the team judges it over time (WS)
    fill = np.isnan(out["WR"].to_numpy(dtype=float)) & np.isfinite(ref)
    if "WS" in out:   # (a team cut by time: its WS follows a lasting slow-down only, diagnosis.py)
        by_time = out["WS_by_time"].to_numpy(dtype=bool) if "WS_by_time" in out else np.zeros(len(out), bool)
        fill &= ~(np.isfinite(out["WS"].to_numpy(dtype=float)) & ~by_time)
    out.loc[fill, "WR"] = w[fill] / ref[fill]
    out.loc[fill, "WR_against"] = [f"thread {int(t)}{MODEL_RUNS}" for t in out.loc[fill, "thread"]]
    return out, work


def _normal_median(features: pd.DataFrame, labels: np.ndarray, column: str,
                   above: float = -np.inf) -> dict[int, float] | None:
    """Each thread number's median of `column` (its finite values above `above`) in the normal
    rows; None without any."""
    if column not in features:
        return None
    v = features[column].to_numpy(dtype=float)
    ok = (labels == "normal") & np.isfinite(v) & (v > above)
    if not ok.any():
        return None
    med = pd.Series(v[ok]).groupby(features["thread"].to_numpy()[ok]).median()
    return {int(k): float(x) for k, x in med.items()}


def _normal_team_work(features: pd.DataFrame, labels: np.ndarray) -> dict[int, float] | None:
    """Each thread number's median work against its team's over a run (summary._team_work) in
    the normal rows, None without any."""
    return _normal_median(features, labels, "team_work", above=0.0)


def _normal_units(features: pd.DataFrame, labels: np.ndarray) -> dict[str, float] | None:
    """Each construct's units of work in the normal rows (diagnosis.pooled_units), None
    without any."""
    if "unit_medians" not in features:
        return None
    rows = features["unit_medians"].to_numpy(dtype=object)[labels == "normal"]
    return pooled_units([m for m in rows if isinstance(m, dict)]) or None


def _normal_retained(features: pd.DataFrame, labels: np.ndarray) -> dict[int, float] | None:
    """Each thread number's median bytes retained (diagnosis.memory_leaks) in the normal
    rows; None without memory records."""
    med = _normal_median(features, labels, "retained")
    return {k: max(v, 0.0) for k, v in med.items()} if med else None


def default_model(settings: FeatureSettings | None = None) -> HsaModel:
    """The ranges used when no model is given (documented in docs/methods.md)."""
    r = {k: tuple(v) for k, v in config.HSA_DEFAULT_RANGES.items()}
    return HsaModel(r, level=float("nan"), margin=float("nan"), settings=settings or FeatureSettings(), expected_beats=None,
                    training={"source": "built-in default ranges (docs/methods.md)"})


# --------------------------------------------------------------------------- pipelines


@dataclass
class Diagnosis:
    """What :func:`diagnose` found: per thread its features (``table``) and its status,
    reason and out-of-range features (``verdict``, same index); the model used;
    ``stages``: seconds spent in each stage."""

    table: pd.DataFrame
    verdict: pd.DataFrame
    model: HsaModel
    stages: dict[str, float]

    def threads(self) -> list[dict]:
        """One dict per thread: identity, status, reason, outside, beats, every feature,
        the reference it was compared with, and how it ended."""
        rows = []
        for r, v in zip(self.table.to_dict(orient="records"), self.verdict.to_dict(orient="records")):
            rows.append({"run": r["run"], "process": r["process"], "thread": r["thread"], "status": v["status"],
                         "reason": v["reason"], "outside": v["outside"], "beats": r["beats"],
                         **{f: r[f] for f in FEATURES}, "WR_against": r.get("WR_against", ""),
                         "WS": r.get("WS", float("nan")), "WS_beat": int(r.get("WS_beat") or 0),
                         "WS_against": r.get("WS_against") or "",
                         "SS": r.get("SS", float("nan")), "SS_beat": int(r.get("SS_beat") or 0),
                         "SS_against": r.get("SS_against") or "",
                         "UR": r.get("UR", float("nan")), "UR_team": r.get("UR_team", float("nan")),
                         "UR_against": r.get("UR_against") or "",
                         "IR": r.get("IR", float("nan")),
                         "crowded": int(r.get("crowded") or 0),
                         **{f: _bytes(r.get(f)) for f in ("retained", "retained_bound")},
                         "retained_against": r.get("retained_against") or "",
                         "reference": r["reference"],
                         **{c: r[c] for c in REFERENCE_COLUMNS}, "ending": r["ending"], "ended": r["ended"],
                         "died": r["died"]})
        return rows

    def counts(self) -> dict[str, int]:
        """Threads per status."""
        return self.verdict["status"].value_counts().to_dict() if len(self.verdict) else {}

    @property
    def references(self) -> list[str]:
        return sorted(set(self.table["reference"])) if len(self.table) else []


def diagnose(trace: HeartbeatTrace, model: HsaModel | None = None,
             reference: HeartbeatTrace | None = None) -> Diagnosis:
    """The status of every thread of `trace`: its features against a reference (the
    thread of the same number in `reference`, else in the reference `model` was trained
    against, else its team's median thread), checked against `model`'s normal ranges
    (default: the built-in ranges)."""
    model = model or default_model()
    if reference is None:
        reference = model.reference_trace()  # the one the model was trained against, if it keeps one
    stages = {}
    t = time.perf_counter()
    table = features_table(trace, model.settings, reference=reference, work_reference=model.work,
                           retained_reference=model.retained, team_work_reference=model.team_work,
                           units_reference=model.units, team_share_reference=model.team_share)
    stages["features"] = time.perf_counter() - t
    t = time.perf_counter()
    table = with_progress(table, model.expected_beats)
    verdict = classify(table, model)
    stages["classify"] = time.perf_counter() - t
    return Diagnosis(table, verdict, model, stages)


def train_from_traces(labelled, reference: HeartbeatTrace | None = None, levels=config.HSA_LEVELS,
                      default_level: float = config.HSA_DEFAULT_LEVEL) -> tuple[HsaModel, pd.DataFrame]:
    """Train a model on labelled traces (diagnosis.labelled_table says what `labelled`
    yields); returns the model and the features table it was trained on."""
    table = labelled_table(labelled, reference=reference)
    model = train(table, table["label"].to_numpy(dtype=object), levels=levels, default_level=default_level)
    if reference is not None:
        model.reference = stored_reference(reference)
        model.training["reference_stored"] = model.reference is not None
    return model, table


def stored_reference(reference: HeartbeatTrace) -> dict[int, list[int]] | None:
    """What a model keeps of a reference trace: per thread number (the first run and process
    holding it, as features_table picks it), its beat times; None past MAX_REFERENCE_BEATS."""
    from ..model.hsa import MAX_REFERENCE_BEATS

    if reference.beat_count() > MAX_REFERENCE_BEATS:   # before a streamed trace's beats are read
        return None
    out: dict[int, list[int]] = {}
    for (_, _, thread), g in reference.threads():
        if int(thread) not in out:
            out[int(thread)] = g["t_ns"].astype("int64").clip(lower=0).sort_values().tolist()
    if sum(len(t) for t in out.values()) > MAX_REFERENCE_BEATS:
        return None
    return out or None
