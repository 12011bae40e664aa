"""The HSA model (SPEC 4, seed 000): feature names, the settings of the feature
computation, and the normal ranges a classifier checks features against."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from .. import config

PAPER_FEATURES = ("GTR", "LTR", "GHR", "LHR", "DTW", "LB")
#: WR, hbtool's: the thread's own work in the parallel regions (its time there less its
#: recorded waits) against its reference's: the one feature that tells, in a team held
#: together by barriers, the thread that slowed from the ones that waited for it
FEATURES = PAPER_FEATURES + ("LTRmax", "progress", "WR")
#: features a model trained before they existed has no range for (read as unbounded)
LATER_FEATURES = ("WR",)


@dataclass(frozen=True)
class FeatureSettings:
    """Every knob of the feature computation; stored in a trained model."""

    window: int = config.HEART_RATE_WINDOW      # heart-rate window (beats), SPEC 1
    ltr_window: int = config.LTR_WINDOW          # LTR window (beats)
    lhr_points: int = config.LHR_POINTS          # grid points of the aligned curves
    lhr_window: int = config.LHR_WINDOW          # LHR window (grid points)
    r2_target: float = config.POLY_R2_TARGET
    max_degree: int = config.POLY_MAX_DEGREE
    dtw_max_points: int = config.DTW_MAX_POINTS  # longer sequences are mean-pooled
    band: int | None = config.DTW_BAND           # Sakoe-Chiba half-width, None: none
    lb_radius: int = config.LB_RADIUS            # LB_Keogh envelope half-width (points)
    peak_windows: int = config.PEAK_WINDOWS      # LTRmax: equal windows over the common beats

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "FeatureSettings":
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        return cls(**known)


#: the classes of Algorithm 1
STATUSES = ("normal", "memoryleak", "shutdown")
#: features bounded from above only, and from below only

UPPER_ONLY = ("DTW", "LB", "LTRmax", "WR")
LOWER_ONLY = ("progress",)
MODEL_FORMAT = "hbtool-hsa-model"
MODEL_VERSION = 1
#: most beats of a reference trace a model stores (about 12 bytes each in its JSON)
MAX_REFERENCE_BEATS = 200_000


@dataclass
class HsaModel:
    """Normal ranges per feature (None: unbounded on that side), how they were learned
    (level, margin, training summary), the feature settings they hold for, and the
    beats a normal thread makes (progress is measured against it when known)."""

    ranges: dict[str, tuple[float | None, float | None]]
    level: float
    margin: float = 0.0
    settings: FeatureSettings = field(default_factory=FeatureSettings)
    expected_beats: float | None = None
    lifecycle_rule: bool = True
    training: dict = field(default_factory=dict)
    #: the reference the features were trained against, when it was a trace (train
    #: --reference): thread number -> its beat times (ns since its run started); diagnose
    #: compares with it when it is given no reference of its own
    reference: dict[int, list[int]] | None = None
    #: each thread number's own work in the parallel regions in the normal training runs
    #: (median, seconds; summary.region_work): what diagnose measures WR against
    work: dict[int, float] | None = None
    #: each thread number's bytes retained (allocated, not freed) over its run in the normal
    #: training runs (median; the tracer's memory signal): what diagnose's leak bound uses
    retained: dict[int, float] | None = None
    #: each thread number's units against its teammates' over the run in the normal training
    #: runs (median; summary._team_work): what diagnose measures a whole run's work shift against
    team_work: dict[int, float] | None = None
    #: each construct's units of work in the normal training runs (ns, the median of the
    #: threads' medians; diagnosis.pooled_units): what diagnose measures UR against
    units: dict[str, float] | None = None
    #: each thread number's share of its team's shared units of work (chunks, tasks, sections)
    #: against its teammates' over the run in the normal training runs (median;
    #: summary._share_shifts): what diagnose measures a whole run's share against
    team_share: dict[int, float] | None = None

    def reference_trace(self):
        """The stored reference as a HeartbeatTrace (run "model reference"), or None."""
        if not self.reference:
            return None
        import numpy as np
        import pandas as pd

        from .heartbeats import HeartbeatTrace

        rows = [pd.DataFrame({"run": "model reference", "process": 0, "thread": k, "seq": np.arange(len(t)),
                              "t_ns": np.asarray(t, dtype=np.int64)}) for k, t in sorted(self.reference.items())]
        beats = pd.concat(rows, ignore_index=True)
        beats["t"] = beats["t_ns"] / 1e9
        return HeartbeatTrace(beats=beats, runs={"model reference": {"lifecycle": False}})
