"""HSA classification (SPEC 4, seed 000 Algorithm 1), its training, and macro-F1.

Normal ranges are learned from sequences labelled normal: one interval per feature,
robust centre +- z(level) * robust spread (median, 1.4826 * MAD; see docs/methods.md).
DistanceRange (DTW, LB) bounds from above only; progress from below only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .. import __version__, config
from .features import FEATURES, FeatureSettings

STATUSES = ("normal", "memoryleak", "shutdown")
UPPER_ONLY = ("DTW", "LB")
LOWER_ONLY = ("progress",)
MODEL_FORMAT = "hbtool-hsa-model"
MODEL_VERSION = 1


@dataclass
class HsaModel:
    ranges: dict[str, tuple[float | None, float | None]]
    level: float
    settings: FeatureSettings = field(default_factory=FeatureSettings)
    expected_beats: float | None = None
    lifecycle_rule: bool = True
    training: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "format": MODEL_FORMAT,
            "model_version": MODEL_VERSION,
            "hbtool_version": __version__,
            "level": self.level,
            "expected_beats": self.expected_beats,
            "lifecycle_rule": self.lifecycle_rule,
            "ranges": {k: [lo, hi] for k, (lo, hi) in self.ranges.items()},
            "settings": self.settings.to_dict(),
            "training": self.training,
        }


def _z(level: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(0.5 + level / 2)) if level < 1 else float("inf")


def fit_ranges(normal: pd.DataFrame, level: float) -> dict[str, tuple[float | None, float | None]]:
    """Per-feature normal interval from the rows of normal sequences."""
    z = _z(level)
    ranges = {}
    for f in FEATURES:
        x = normal[f].to_numpy(dtype=float)
        x = x[np.isfinite(x)]
        if x.size == 0:
            ranges[f] = (None, None)
            continue
        med = float(np.median(x))
        spread = 1.4826 * float(np.median(np.abs(x - med)))
        if spread == 0:
            spread = float(np.std(x))
        spread = max(spread, config.HSA_MIN_SPREAD * max(abs(med), 1e-12))
        if np.isinf(z):
            lo, hi = float(x.min()), float(x.max())
        else:
            lo, hi = med - z * spread, med + z * spread
            # an interval never excludes the bulk of its own training data
            lo, hi = min(lo, float(np.quantile(x, 0.5 - level / 2))), max(hi, float(np.quantile(x, 0.5 + level / 2)))
        if f in UPPER_ONLY:
            lo = None
        if f in LOWER_ONLY:
            hi = None
        ranges[f] = (lo, hi)
    return ranges


def _inside(v: float, r: tuple[float | None, float | None]) -> bool:
    lo, hi = r
    return (lo is None or v >= lo) and (hi is None or v <= hi)


def outside_ranges(row, ranges) -> list[str]:
    return [f for f in FEATURES if f in ranges and np.isfinite(row[f]) and not _inside(row[f], ranges[f])]


def _fmt(v) -> str:
    return "n/a" if v is None or not np.isfinite(v) else f"{v:.3g}"


def _describe(f: str, v: float, r) -> str:
    lo, hi = r
    if lo is None:
        return f"{f} {_fmt(v)} > {_fmt(hi)}"
    if hi is None:
        return f"{f} {_fmt(v)} < {_fmt(lo)}"
    return f"{f} {_fmt(v)} outside [{_fmt(lo)}, {_fmt(hi)}]"


def classify_row(row, model: HsaModel) -> tuple[str, str]:
    """(status, reason) of one sequence: Algorithm 1 with hbtool's documented additions."""
    rg = model.ranges
    if isinstance(row.get("na_reason"), str) and row["na_reason"]:
        return "unknown", row["na_reason"]
    if model.lifecycle_rule and row.get("died"):
        return "shutdown", f"the process ended abnormally before this thread finished ({row.get('ended', '')})"
    prog = row["progress"]
    if "progress" in rg and np.isfinite(prog) and not _inside(prog, rg["progress"]):
        return "shutdown", f"completed {row['beats']} beats, {_describe('progress', prog, rg['progress'])} (ended early)"
    mintime, maxtime = rg["GTR"]
    gtr = row["GTR"]
    dist_ok = all(_inside(row[f], rg[f]) for f in ("DTW", "LB") if np.isfinite(row[f]))
    out = outside_ranges(row, rg)
    why = "; ".join(_describe(f, row[f], rg[f]) for f in out)
    if dist_ok:
        time_ok = all(_inside(row[f], rg[f]) for f in ("GTR", "LTR") if np.isfinite(row[f]))
        if not time_ok:
            if mintime is not None and gtr < mintime:
                return "shutdown", f"similar heart rate, but ended early: {why}"
            hr_ok = all(_inside(row[f], rg[f]) for f in ("GHR", "LHR") if np.isfinite(row[f]))
            if maxtime is not None and gtr > maxtime and not hr_ok:
                return "memoryleak", f"slower, with a lower heart rate: {why}"
        return "normal", ("within the normal ranges" if not out else f"not enough to call an anomaly: {why}")
    if mintime is not None and np.isfinite(gtr) and gtr < mintime:
        return "shutdown", f"heart rate unlike the reference and ended early: {why}"
    return "memoryleak", f"heart rate unlike the reference: {why}"


def classify(features: pd.DataFrame, model: HsaModel) -> pd.DataFrame:
    """Status, reason and out-of-range features of every row of a features table."""
    rows = features.to_dict(orient="records")
    res = [classify_row(r, model) for r in rows]
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


def train(features: pd.DataFrame, labels, settings: FeatureSettings | None = None,
          levels=config.HSA_LEVELS, default_level: float = config.HSA_DEFAULT_LEVEL) -> HsaModel:
    """Learn the normal ranges from the rows labelled normal.

    With only normal rows the level is `default_level`. With anomalous rows too, the
    level in `levels` that maximises the training macro-F1 is chosen (ties: the
    higher level, which flags fewer normal sequences).
    """
    labels = np.asarray(labels, dtype=object)
    usable = ~features["na_reason"].astype(bool).to_numpy() if "na_reason" in features else np.ones(len(labels), bool)
    normal = features[(labels == "normal") & usable]
    if not len(normal):
        raise ValueError("no normal sequence with features to learn the normal ranges from")
    expected = float(np.median(normal["beats"])) if "beats" in normal else None
    settings = settings or FeatureSettings()
    counts = {c: int(np.sum(labels == c)) for c in STATUSES}
    anomalous = counts["memoryleak"] + counts["shutdown"] > 0
    best = None
    for level in (sorted(levels) if anomalous else [default_level]):
        model = HsaModel(fit_ranges(normal, level), level, settings, expected)
        f1 = macro_f1(labels[usable], classify(features[usable], model)["status"].to_numpy()) if anomalous else float("nan")
        if best is None or (anomalous and f1 >= best[0]):
            best = (f1, model)
    f1, model = best
    model.training = {"sequences": counts, "macro_f1": None if np.isnan(f1) else round(f1, 4),
                      "level_chosen_by": "training macro-F1" if anomalous else "default (normal data only)"}
    return model


def default_model(settings: FeatureSettings | None = None) -> HsaModel:
    """The ranges used when no model is given (documented in docs/methods.md)."""
    r = {k: tuple(v) for k, v in config.HSA_DEFAULT_RANGES.items()}
    return HsaModel(r, level=float("nan"), settings=settings or FeatureSettings(), expected_beats=None,
                    training={"source": "built-in default ranges (docs/methods.md)"})
