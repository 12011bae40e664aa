"""Models of the tracer's instruments: queue samples (seed 002), timing probes and
machine status (seed 003)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

#: columns of QueueSamples.samples: one row per sample of one end of one queue
QUEUE_SAMPLE_COLUMNS: dict[str, str] = {
    "run": "object",
    "process": "int64",      # process index in the run (MPI rank when there is one)
    "queue": "object",       # queue name (unique within the run)
    "end": "object",         # "producer" (the tail: pushes) or "consumer" (the head: pops)
    "t": "float64",          # end of the sampling period, seconds since the run started
    "period_s": "float64",   # realized length of the period
    "target_period_s": "float64",  # the period the monitor aimed for (NaN when unknown)
    "count": "int64",        # non-blocking transactions in the period
    "blocked": "bool",       # this end blocked at least once in the period
    "item_size": "int64",    # bytes per item (-1 unknown)
}

QUEUE_ENDS = ("producer", "consumer")


@dataclass
class QueueSamples:
    """Samples of instrumented queue ends (seed 002), from the tracer or a table.

    ``samples`` has QUEUE_SAMPLE_COLUMNS sorted by queue, end, t; ``queues`` one row
    per queue (queue, process, queue_id, capacity, item_size, opened_t; -1/NaN unknown);
    ``meta`` where they came from; ``warnings`` what the reader repaired or skipped.
    """

    samples: pd.DataFrame
    queues: pd.DataFrame
    meta: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


#: columns of ProbeStats.per_thread: one row per probe and thread that merged
PROBE_COLUMNS: dict[str, str] = {
    "process": "int64",
    "probe": "int64",        # probe id within the process
    "label": "object",
    "site": "object",        # file:line of the call site
    "thread": "int64",       # user thread number, -1 none
    "thread_slot": "int64",  # order in which the thread registered
    "count": "int64",
    "total_ns": "int64",
    "min_ns": "int64",
    "max_ns": "int64",
}


@dataclass
class ProbeStats:
    """Statistics of the tracer's timing probes (seed 003), per thread."""

    per_thread: pd.DataFrame
    meta: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


#: metrics of the status sampler, in the order of the format's HBT_STAT_* codes
STATUS_METRICS = ["cpu_user", "cpu_system", "cpu_idle", "cpu_iowait", "cpu_steal", "mem_total_kb",
                  "mem_available_kb", "swap_total_kb", "swap_free_kb", "net_rx_bytes", "net_tx_bytes",
                  "proc_user_us", "proc_system_us", "proc_rss_kb"]


@dataclass
class StatusSamples:
    """Machine-status samples (seed 003): ``samples`` has process, sample, t and one
    column per STATUS_METRICS (NaN where a sample lacks it), sorted by process, t;
    ``machine`` the capabilities recorded once per process (cores, model, memory)."""

    samples: pd.DataFrame
    machine: list[dict] = field(default_factory=list)
    meta: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
