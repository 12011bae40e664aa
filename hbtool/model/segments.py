"""Segment profiles (SPEC 6, seed 004): one run's segments between global collectives."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class SegmentProfile:
    """One run's segments, one row per (process, segment)."""

    name: str
    rank: np.ndarray          # int64
    segment: np.ndarray       # int64
    duration_ns: np.ndarray   # int64
    computation: np.ndarray   # float64
    features: np.ndarray      # (rows, F) float64: communication and I/O
    feature_names: list[str]
    run_time_ns: int | None = None          # the run's execution time, if the profile says
    computation_source: str = "unknown"     # "instructions", "cputime", or what the table says
    meta: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    #: readers of big profiles aggregate per segment as they read (then the row arrays are empty)
    aggregated: "Segments | None" = None
    nprocesses: int | None = None


@dataclass
class Segments:
    """Per-segment aggregates of a profile (one entry per segment number)."""

    segment: np.ndarray       # segment numbers
    computation: np.ndarray   # median over processes
    duration_ns: np.ndarray   # maximum over processes
    features: np.ndarray      # (n, F): sum over processes
    processes: np.ndarray     # processes that recorded the segment
