"""Data models that readers return and analyzers consume."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

#: columns of HeartbeatTrace.beats, in order, with their dtypes
BEAT_COLUMNS: dict[str, str] = {
    "run": "object",        # run name
    "process": "int64",     # MPI rank, or the process's index in the run, from 0
    "thread": "int64",      # user thread number
    "seq": "int64",         # per-thread beat number from 0
    "t": "float64",         # seconds since the run started
    "t_ns": "int64",        # the same in integer nanoseconds (exact)
    "loop": "int64",
    "iteration": "int64",
    "tag": "int64",
    "os_tid": "int64",      # OS thread id, -1 when unknown
    "label": "object",      # free text ("" when none)
}

#: columns of HeartbeatTrace.events (thread lifecycle and process end)
EVENT_COLUMNS: dict[str, str] = {
    "run": "object",
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


def empty_frame(columns: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=d) for c, d in columns.items()})


def conform(df: pd.DataFrame, columns: dict[str, str]) -> pd.DataFrame:
    """Return df with exactly `columns`, in order, cast to their dtypes.

    Missing integer columns are filled with -1 (unknown), missing text with "".
    """
    out = {}
    n = len(df)
    for name, dtype in columns.items():
        if name in df.columns:
            col = df[name]
            if dtype == "object":
                col = col.astype(str).where(col.notna(), "") if n else col.astype(object)
            else:
                col = col.astype(dtype)
            out[name] = col.to_numpy()
        elif dtype == "object":
            out[name] = np.full(n, "", dtype=object)
        elif dtype == "int64":
            out[name] = np.full(n, -1, dtype=np.int64)
        else:
            out[name] = np.full(n, np.nan)
    return pd.DataFrame(out)


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
    """

    beats: pd.DataFrame
    events: pd.DataFrame = field(default_factory=lambda: empty_frame(EVENT_COLUMNS))
    runs: dict[str, dict] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.beats = conform(self.beats, BEAT_COLUMNS)
        self.events = conform(self.events, EVENT_COLUMNS)
        if len(self.beats):
            self.beats = self.beats.sort_values(
                ["run", "process", "thread", "seq", "t_ns"], kind="stable"
            ).reset_index(drop=True)
        for run in pd.unique(self.beats["run"]):
            self.runs.setdefault(run, {})

    @property
    def run_names(self) -> list[str]:
        return list(self.runs)

    def threads(self):
        """Iterate ((run, process, thread), beats DataFrame) over every thread."""
        if not len(self.beats):
            return iter(())
        return iter(self.beats.groupby(["run", "process", "thread"], sort=False))

    @staticmethod
    def concat(traces: list["HeartbeatTrace"]) -> "HeartbeatTrace":
        """Join traces of different runs (run names must differ; later duplicates get a suffix)."""
        beats, events, runs, warnings = [], [], {}, []
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
            if any(k != v for k, v in rename.items()):
                b["run"] = b["run"].map(rename)
                e["run"] = e["run"].map(rename)
            beats.append(b)
            events.append(e)
            warnings.extend(tr.warnings)
        return HeartbeatTrace(
            beats=pd.concat(beats, ignore_index=True) if beats else empty_frame(BEAT_COLUMNS),
            events=pd.concat(events, ignore_index=True) if events else empty_frame(EVENT_COLUMNS),
            runs=runs,
            warnings=warnings,
        )
