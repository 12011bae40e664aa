"""The data models that readers return and analyzers consume.

Nothing here reads a file or computes a result: io and analyzers both depend on
this package, never the other way round (tests/test_architecture.py checks it).
"""

from .frames import conform, empty_frame
from .heartbeats import (BEAT_CHOICES, BEAT_COLUMNS, BEAT_SOURCES, BEHAVIORS, EVENT_COLUMNS, EVENT_KINDS,
                         MONITOR_COLUMNS, MONITOR_MODES, THREAD_END_REASONS, WAIT_COLUMNS, CPU_COLUMNS, MEMORY_COLUMNS, SCHED_COLUMNS, HeartbeatTrace)
from .hsa import FEATURES, PAPER_FEATURES, STATUSES, FeatureSettings, HsaModel
from .instruments import (PROBE_COLUMNS, QUEUE_ENDS, QUEUE_SAMPLE_COLUMNS, STATUS_METRICS, ProbeStats, QueueSamples,
                          StatusSamples)
from .segments import SegmentProfile, Segments

__all__ = ["BEAT_CHOICES", "BEAT_COLUMNS", "BEAT_SOURCES", "BEHAVIORS", "EVENT_COLUMNS", "EVENT_KINDS", "FEATURES", "MONITOR_COLUMNS", "MONITOR_MODES",
           "PAPER_FEATURES", "PROBE_COLUMNS", "QUEUE_ENDS", "QUEUE_SAMPLE_COLUMNS", "STATUSES", "STATUS_METRICS",
           "THREAD_END_REASONS", "WAIT_COLUMNS", "CPU_COLUMNS", "MEMORY_COLUMNS", "SCHED_COLUMNS", "FeatureSettings", "HeartbeatTrace", "HsaModel", "ProbeStats", "QueueSamples",
           "SegmentProfile", "Segments", "StatusSamples", "conform", "empty_frame"]
