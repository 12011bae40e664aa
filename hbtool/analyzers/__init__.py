"""Analyzers: pure functions from models to results (no file access, no Click).

Each method is one call (docs/architecture.md): ``hsa.diagnose(trace)``,
``hsa.train_from_traces(labelled)``, ``evaluation.evaluate_runs(labelled)``,
``behavior.timeline(trace)``, ``interference.assess(profiles)``,
``service_rate.service_rates(samples)``, ``timers.probe_summary(stats)`` and
``timers.status_report(samples)``.

``dtw``, ``lb_keogh`` (and the rest of :mod:`hbtool.analyzers.distance`) load numba,
so they are imported on first use: ``from hbtool.analyzers import dtw`` works, and
importing this package alone stays light.
"""

from .heartrate import heart_rate
from .summary import summarize_threads, thread_endings

_LAZY = {"dtw": "distance", "dtw_many": "distance", "lb_keogh": "distance", "lb_keogh_l1": "distance",
         "pool": "distance"}

__all__ = ["heart_rate", "summarize_threads", "thread_endings", *_LAZY]


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
