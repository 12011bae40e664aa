"""Data models that readers return and analyzers consume."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

#: columns of HeartbeatTrace.beats, in order, with their dtypes
BEAT_COLUMNS: dict[str, str] = {
    "run": "category",      # run name
    "process": "int64",     # MPI rank, or the process's index in the run, from 0
    "thread": "int64",      # user thread number
    "seq": "int64",         # per-thread beat number from 0
    "t": "float64",         # seconds since the run started
    "t_ns": "int64",        # the same in integer nanoseconds (exact)
    "loop": "int64",
    "iteration": "int64",
    "tag": "int64",
    "os_tid": "int64",      # OS thread id, -1 when unknown
    "label": "category",    # free text ("" when none)
}

#: columns of HeartbeatTrace.events (thread lifecycle and process end)
EVENT_COLUMNS: dict[str, str] = {
    "run": "category",
    "process": "int64",
    "os_tid": "int64",      # OS thread that recorded the event, -1 unknown
    "thread": "int64",      # user thread number when known, else -1
    "t": "float64",
    "t_ns": "int64",
    "kind": "object",       # see EVENT_KINDS
    "detail": "int64",      # kind-specific: exit status, signal number, end reason, ...
    "flags": "int64",
}

#: event kinds and what their `detail` holds
EVENT_KINDS = {
    "thread_start": "thread slot of the creator (-1 unknown)",
    "thread_end": "0 returned from its start routine, 1 pthread_exit, 2 cancelled",
    "init": "type argument of the Init call",
    "finished": "unused",
    "process_exit": "exit status (flags 1: _exit)",
    "signal": "signal number of the fatal signal",
    "lost": "number of records the tracer dropped",
}

THREAD_END_REASONS = {0: "returned", 1: "pthread_exit", 2: "cancelled"}

#: columns of HeartbeatTrace.monitor: what the tracer's online behaviour monitor
#: recorded (HBT_REC_BEHAVIOR, HBT_REC_MONITOR and HBT_REC_ADJUST records)
MONITOR_COLUMNS: dict[str, str] = {
    "run": "category",
    "process": "int64",
    "os_tid": "int64",      # OS thread that wrote the record
    "t": "float64",         # when it was written (behavior: when it was detected)
    "t_ns": "int64",
    "kind": "object",       # "behavior", "monitor" or "adjust"
    "mode": "object",       # "central" or "ring" ("" for adjust)
    "thread": "int64",      # behavior: the monitored thread's user thread number
    "behavior": "object",   # behavior: one of BEHAVIORS
    "onset_ns": "int64",    # behavior: when it began according to the beats
    "onset_seq": "int64",   # behavior: the monitored thread's beat count at the onset
    "messages": "int64",    # monitor: messages exchanged so far
    "passes": "int64",      # monitor: detection passes so far
    "monitored": "int64",   # monitor: threads being monitored
    "period_us": "int64",   # monitor: poll (or ring check) period
    "every": "int64",       # adjust: calls per recorded beat from now on
    "previous_every": "int64",  # adjust: the value before
    "target_hz": "float64",     # adjust: the heart rate aimed at
}

#: behaviour names, in the order of the format's HBT_BHV_* codes
BEHAVIORS = ["running", "busy-waiting", "conditional-waiting", "exited", "failed"]
MONITOR_MODES = {0: "central", 1: "ring"}


def empty_frame(columns: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=d) for c, d in columns.items()})


def _text(col: pd.Series | None, n: int) -> pd.Categorical:
    """A text column as a categorical of str ("" for missing)."""
    if col is None:
        return pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), [""])
    if isinstance(col.dtype, pd.CategoricalDtype) and not col.isna().any() and all(
        isinstance(c, str) for c in col.cat.categories
    ):
        return col.array
    return pd.Categorical(col.astype(object).where(col.notna(), "").astype(str))


def conform(df: pd.DataFrame, columns: dict[str, str]) -> pd.DataFrame:
    """Return df with exactly `columns`, in order, cast to their dtypes.

    Missing integer columns and integer fields missing from some rows are filled with -1
    (unknown), missing text with "".
    """
    out = {}
    n = len(df)
    for name, dtype in columns.items():
        col = df[name] if name in df.columns else None
        if dtype == "category":
            out[name] = _text(col, n)
        elif dtype == "object":
            out[name] = col.astype(object).to_numpy() if col is not None else np.full(n, "", dtype=object)
        elif col is not None:
            v = col.to_numpy()
            if np.dtype(dtype).kind in "iu" and v.dtype.kind in "fO":
                # rows that lack the field (NaN, None): -1, unknown, as for a missing column
                v = pd.to_numeric(col, errors="coerce").fillna(-1).to_numpy()
            out[name] = v.astype(dtype, copy=False)
        elif dtype == "int64":
            out[name] = np.full(n, -1, dtype=np.int64)
        else:
            out[name] = np.full(n, np.nan)
    return pd.DataFrame(out)


def _sorted(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Stable sort by `keys` (categoricals by their text); no copy when already sorted."""
    arrays = []
    for k in reversed(keys):
        col = df[k]
        if isinstance(col.dtype, pd.CategoricalDtype):
            order = np.argsort(np.asarray(col.cat.categories, dtype=object).astype(str), kind="stable")
            rank = np.empty(len(order), dtype=np.int64)
            rank[order] = np.arange(len(order))
            codes = col.cat.codes.to_numpy()
            arrays.append(np.where(codes >= 0, rank[codes], -1))
        else:
            arrays.append(col.to_numpy())
    if _is_sorted(arrays[::-1]):
        return df.reset_index(drop=True)
    return df.take(np.lexsort(arrays)).reset_index(drop=True)


def _is_sorted(keys: list[np.ndarray]) -> bool:
    """True when rows are already in lexicographic order of `keys` (most significant first)."""
    if len(keys[0]) < 2:
        return True
    tie = np.ones(len(keys[0]) - 1, dtype=bool)
    for k in keys:
        a, b = k[:-1], k[1:]
        if (tie & (a > b)).any():
            return False
        tie &= a == b
        if not tie.any():
            return True
    return True


@dataclass
class HeartbeatTrace:
    """Heartbeats of one or more runs, with lifecycle events and metadata.

    * ``beats``: one row per heartbeat, columns BEAT_COLUMNS, sorted by
      run, process, thread, seq.
    * ``events``: one row per lifecycle record, columns EVENT_COLUMNS.
    * ``runs``: run name -> metadata dict (source, format, host, pid, clock, ...).
      ``runs[name]["lifecycle"]`` is True when the source records thread and
      process ends (the tracer's binary format), so that "no end record" means
      something.
    * ``warnings``: what the reader skipped or repaired, one line each.
    * ``monitor``: records of the tracer's online behaviour monitor, columns
      MONITOR_COLUMNS (empty for other sources).
    """

    beats: pd.DataFrame
    events: pd.DataFrame = field(default_factory=lambda: empty_frame(EVENT_COLUMNS))
    runs: dict[str, dict] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    monitor: pd.DataFrame = field(default_factory=lambda: empty_frame(MONITOR_COLUMNS))

    def __post_init__(self) -> None:
        self.beats = conform(self.beats, BEAT_COLUMNS)
        self.events = conform(self.events, EVENT_COLUMNS)
        self.monitor = conform(self.monitor, MONITOR_COLUMNS)
        if len(self.beats):
            self.beats = _sorted(self.beats, ["run", "process", "thread", "seq", "t_ns"])
        runs = self.beats["run"]
        for run in runs.cat.categories[np.unique(runs.cat.codes.to_numpy())]:
            self.runs.setdefault(run, {})

    @property
    def run_names(self) -> list[str]:
        return list(self.runs)

    def threads(self):
        """Iterate ((run, process, thread), beats DataFrame) over every thread."""
        if not len(self.beats):
            return iter(())
        return iter(self.beats.groupby(["run", "process", "thread"], sort=False, observed=True))

    @staticmethod
    def concat(traces: list["HeartbeatTrace"]) -> "HeartbeatTrace":
        """Join traces of different runs (run names must differ; later duplicates get a suffix)."""
        beats, events, monitor, runs, warnings = [], [], [], {}, []
        for tr in traces:
            rename = {}
            for name in tr.runs:
                new = name
                k = 2
                while new in runs:
                    new = f"{name}#{k}"
                    k += 1
                rename[name] = new
                runs[new] = tr.runs[name]
            b = tr.beats.copy()
            e = tr.events.copy()
            m = tr.monitor.copy()
            if any(k != v for k, v in rename.items()):
                b["run"] = b["run"].map(rename)
                e["run"] = e["run"].map(rename)
                m["run"] = m["run"].map(rename)
            beats.append(b)
            events.append(e)
            monitor.append(m)
            warnings.extend(tr.warnings)
        return HeartbeatTrace(
            beats=pd.concat(beats, ignore_index=True) if beats else empty_frame(BEAT_COLUMNS),
            events=pd.concat(events, ignore_index=True) if events else empty_frame(EVENT_COLUMNS),
            runs=runs,
            warnings=warnings,
            monitor=pd.concat(monitor, ignore_index=True) if monitor else empty_frame(MONITOR_COLUMNS),
        )


# --------------------------------------------------------------------------- instruments

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
