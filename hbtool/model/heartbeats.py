"""The heartbeat trace: beats, lifecycle events, online-monitor records, run metadata."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .frames import conform, empty_frame, sort_rows

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
    "source": "category",   # who made the beat: one of BEAT_SOURCES ("api" for every table format)
    "construct": "category",  # automatic beats: the construct, "<kind> <symbol>" ("" when none)
}

#: where beats come from: the program's heartbeat API, or the tracer with no change to the
#: program (its OpenMP wrappers and OMPT tool, its PMPI layer)
BEAT_SOURCES = ("api", "openmp", "mpi")
#: the aux of an automatic TASK beat whose task the thread that made it ran, no teammate
#: took it (the tracer's HBT_TASK_UNSHARED), and the end of its construct's name then
TASK_UNSHARED = 1
UNSHARED = " unshared"
#: the suffix of a construct whose units are a loop's chunks measured per iteration, in
#: picoseconds (analyzers.summary._UnitHistograms.add): kept apart from the same loop's units
#: of unknown iterations (a trace or a model from a tracer before 2026-12-01), whole chunks
PER_ITERATION = " (ps per iteration)"


def chunk_iterations_of(beats: pd.DataFrame) -> np.ndarray:
    """Per row of a beats table: a loop chunk's count of iterations (the tag of an automatic
    beat of a loop construct, docs/formats.md), 0 for any other beat."""
    if "construct" not in beats or "source" not in beats:
        return np.zeros(len(beats), dtype=np.int64)
    loop = beats["construct"].astype(str).str.startswith("loop ").to_numpy() & \
        (beats["source"].astype(str).to_numpy() == "openmp")
    return np.where(loop, beats["tag"].to_numpy(np.int64), 0).clip(0)
#: what `beats` a command analyses: "auto" (per process, api beats where it has any, else
#: openmp, else mpi) or one source
BEAT_CHOICES = ("auto",) + BEAT_SOURCES

#: columns of StreamedTrace.stats: the beats of a trace summarised per (run, process, thread,
#: OS thread, source), for traces whose beats stay in their files
STATS_COLUMNS: dict[str, str] = {
    "run": "category",
    "process": "int64",
    "thread": "int64",
    "os_tid": "int64",
    "source": "category",
    "beats": "int64",
    "first_s": "float64",   # the first beat's time, seconds since the run started
    "last_s": "float64",
    "first_ns": "int64",    # the same in integer nanoseconds (exact)
    "last_ns": "int64",
}

#: columns of StreamedTrace.wait_stats: the waits of a trace summarised per (run, process,
#: thread, OS thread, source, sync)
WAIT_STATS_COLUMNS: dict[str, str] = {
    "run": "category",
    "process": "int64",
    "thread": "int64",
    "os_tid": "int64",
    "source": "category",
    "sync": "category",
    "waits": "int64",       # how many
    "wait_ns": "int64",     # their total time
}

#: columns of HeartbeatTrace.waits: time a thread spent waiting in a synchronisation
#: (tracer `wait` records, automatic only)
WAIT_COLUMNS: dict[str, str] = {
    "run": "category",
    "process": "int64",
    "thread": "int64",
    "os_tid": "int64",
    "t": "float64",         # when the wait ended, seconds since the run started
    "t_ns": "int64",
    "wait_ns": "int64",     # how long it lasted
    "sync": "category",     # barrier, taskwait, critical, ordered, collective, outside (a parallel region)
    "source": "category",
    "construct": "category",
}

#: columns of HeartbeatTrace.cpu: the CPU time a thread used in a gap of 2 ms or more
#: between its records (tracer `cpu` records; 10 ms before 2026-11-28): what tells spinning
#: from sleeping; and the time it was runnable then, waiting for a CPU: what tells a thread
#: the machine starved from one that blocked
CPU_COLUMNS: dict[str, str] = {
    "run": "category",
    "process": "int64",
    "thread": "int64",
    "os_tid": "int64",
    "t_ns": "int64",        # the gap's end
    "gap_ns": "int64",      # its length
    "cpu_ns": "int64",      # CPU time the thread used in it
    "queued_ns": "int64",   # time it was runnable in it, waiting for a CPU (-1: unknown)
}

#: columns of HeartbeatTrace.sched: a thread's CPU time and the time it was runnable, waiting
#: for a CPU (run-queue delay), over consecutive spans of its run of about 20 ms (tracer
#: `sched` records, since 2026-11-29): what tells a thread the machine kept off its CPU from
#: one that did not take the work it could have
SCHED_COLUMNS: dict[str, str] = {
    "run": "category",
    "process": "int64",
    "thread": "int64",
    "os_tid": "int64",
    "t_ns": "int64",        # the span's end
    "span_ns": "int64",     # its length
    "cpu_ns": "int64",      # CPU time the thread used in it
    "queued_ns": "int64",   # time it was runnable in it, waiting for a CPU
}

#: columns of HeartbeatTrace.memory: the memory signal (tracer `memory` records). Rows of
#: scope "thread": what that OS thread allocated and freed since it started (usable bytes;
#: `resident` and `heap` -1); rows of scope "process": the process's resident bytes and the
#: bytes in use in glibc's heap (-1 unknown; `allocated` and `freed` -1); rows of scope "owned":
#: a thread's counts as of the process's exit, written by the exiting thread for one whose
#: blocks of 64 KiB or more other threads freed after its last record (`thread` is its number,
#: `os_tid` the writer's: summary.memory_retained finds the thread by its number)
MEMORY_COLUMNS: dict[str, str] = {
    "run": "category",
    "process": "int64",
    "scope": "category",    # thread, process, owned
    "thread": "int64",      # the writer's thread number
    "os_tid": "int64",
    "t_ns": "int64",
    "allocated": "int64",
    "freed": "int64",
    "resident": "int64",
    "heap": "int64",
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
    "process_exit": "exit status (flags 1: _exit; 2: exit() was called here, its handlers then ran "
                    "until the record without the flag)",
    "signal": "signal number of the fatal signal",
    "lost": "number of records the tracer dropped",
}

THREAD_END_REASONS = {0: "returned", 1: "pthread_exit", 2: "cancelled"}

#: columns of HeartbeatTrace.monitor: what the tracer's online behavior monitor
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

#: behavior names, in the order of the format's HBT_BHV_* codes
BEHAVIORS = ["running", "busy-waiting", "conditional-waiting", "exited", "failed"]
MONITOR_MODES = {0: "central", 1: "ring"}



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
    * ``monitor``: records of the tracer's online behavior monitor, columns
      MONITOR_COLUMNS (empty for other sources).
    * ``waits``: time threads spent waiting in synchronisations, columns WAIT_COLUMNS
      (the tracer's automatic `wait` records; empty for other sources).
    * ``cpu``: CPU time threads used in the gaps between their records, columns
      CPU_COLUMNS (the tracer's `cpu` records; empty for other sources).
    * ``memory``: the memory signal, columns MEMORY_COLUMNS (the tracer's `memory`
      records; empty for other sources).
    * ``sched``: threads' CPU time and run-queue delay over spans of their run, columns
      SCHED_COLUMNS (the tracer's `sched` records; empty for other sources).
    """

    beats: pd.DataFrame
    events: pd.DataFrame = field(default_factory=lambda: empty_frame(EVENT_COLUMNS))
    runs: dict[str, dict] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    monitor: pd.DataFrame = field(default_factory=lambda: empty_frame(MONITOR_COLUMNS))
    waits: pd.DataFrame = field(default_factory=lambda: empty_frame(WAIT_COLUMNS))
    cpu: pd.DataFrame = field(default_factory=lambda: empty_frame(CPU_COLUMNS))
    memory: pd.DataFrame = field(default_factory=lambda: empty_frame(MEMORY_COLUMNS))
    sched: pd.DataFrame = field(default_factory=lambda: empty_frame(SCHED_COLUMNS))

    def __post_init__(self) -> None:
        self.beats = conform(self.beats, BEAT_COLUMNS)
        src = self.beats["source"]
        if "" in src.cat.categories:  # formats that do not say: beats the program made itself
            self.beats["source"] = src.cat.rename_categories({"": "api"}) if "api" not in src.cat.categories \
                else src.astype(str).replace("", "api").astype("category")
        self.waits = conform(self.waits, WAIT_COLUMNS)
        self.cpu = conform(self.cpu, CPU_COLUMNS)
        self.memory = conform(self.memory, MEMORY_COLUMNS)
        self.sched = conform(self.sched, SCHED_COLUMNS)
        self.events = conform(self.events, EVENT_COLUMNS)
        self.monitor = conform(self.monitor, MONITOR_COLUMNS)
        if len(self.beats):
            self.beats = sort_rows(self.beats, ["run", "process", "thread", "seq", "t_ns"])
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
        """Join traces of different runs (run names must differ; later duplicates get a suffix).
        Traces whose beats stay in their files (StreamedTrace) are joined into one such."""
        if traces and all(isinstance(tr, StreamedTrace) for tr in traces):
            return StreamedTrace.join(traces)
        beats, events, monitor, waits, cpu, memory, sched, runs, warnings = [], [], [], [], [], [], [], {}, []
        for tr in traces:
            rename = _renames(tr.runs, runs)
            b = tr.beats.copy()
            e = tr.events.copy()
            m = tr.monitor.copy()
            w = tr.waits.copy()
            c = tr.cpu.copy()
            mem = tr.memory.copy()
            sc = tr.sched.copy()
            if any(k != v for k, v in rename.items()):
                b["run"] = b["run"].map(rename)
                e["run"] = e["run"].map(rename)
                m["run"] = m["run"].map(rename)
                w["run"] = w["run"].map(rename)
                c["run"] = c["run"].map(rename)
                mem["run"] = mem["run"].map(rename)
                sc["run"] = sc["run"].map(rename)
            beats.append(b)
            events.append(e)
            monitor.append(m)
            waits.append(w)
            cpu.append(c)
            memory.append(mem)
            sched.append(sc)
            warnings.extend(tr.warnings)
        return HeartbeatTrace(
            beats=pd.concat(beats, ignore_index=True) if beats else empty_frame(BEAT_COLUMNS),
            events=pd.concat(events, ignore_index=True) if events else empty_frame(EVENT_COLUMNS),
            runs=runs,
            warnings=warnings,
            **joined_tables({"monitor": monitor, "waits": waits, "cpu": cpu, "memory": memory, "sched": sched}),
        )

    def sources(self) -> dict[tuple, dict[str, int]]:
        """(run, process) -> {source: beats}, for every process with beats."""
        if not len(self.beats):
            return {}
        n = self.beats.groupby(["run", "process", "source"], observed=True).size()
        out: dict[tuple, dict[str, int]] = {}
        for (run, process, source), k in n.items():
            out.setdefault((run, int(process)), {})[str(source)] = int(k)
        return out

    def beat_count(self) -> int:
        """How many beats the trace holds."""
        return len(self.beats)

    def with_beats(self, which: str = "auto") -> "HeartbeatTrace":
        """The trace with only the beats an analysis should use: `which` one of BEAT_SOURCES,
        or "auto": per process, its api beats when it has any (the program's own beats say
        what a unit of its work is), else its openmp beats, else its mpi beats. Each run's
        metadata gets ``beats``: {process: the source used} and ``beats_available``:
        {process: {source: beats in the trace}}."""
        available = self.sources()
        chosen = choose_sources(available, which)
        b = self.beats
        if len(b):
            keys = b[["run", "process", "source"]].astype({"run": str, "source": str})
            keep = [chosen.get((r, p)) == src for r, p, src in keys.drop_duplicates().itertuples(index=False)]
            allowed = keys.drop_duplicates()[keep]
            mask = keys.merge(allowed, how="left", indicator=True)["_merge"].to_numpy() == "both"
            if not mask.all():
                b = b[mask].reset_index(drop=True)
        return HeartbeatTrace(beats=b, events=self.events, runs=runs_with_sources(self.runs, chosen, available),
                              warnings=list(self.warnings), monitor=self.monitor, waits=self.waits, cpu=self.cpu,
                              memory=self.memory, sched=self.sched)


def joined_tables(parts: dict[str, list]) -> dict[str, pd.DataFrame]:
    """Each of a trace's record tables (monitor, waits, cpu, memory, sched) named in `parts`,
    its pieces joined (an empty table of its columns when it has none)."""
    columns = {"monitor": MONITOR_COLUMNS, "waits": WAIT_COLUMNS, "cpu": CPU_COLUMNS, "memory": MEMORY_COLUMNS,
               "sched": SCHED_COLUMNS}
    return {name: pd.concat(pieces, ignore_index=True) if pieces else empty_frame(columns[name])
            for name, pieces in parts.items()}


def _renames(names, taken: dict) -> dict[str, str]:
    """Each run name of a trace joined to `taken` (run name -> metadata, which gets them):
    itself, or with a suffix #2, #3, ... when the name is taken."""
    rename = {}
    for name in names:
        new = name
        k = 2
        while new in taken:
            new = f"{name}#{k}"
            k += 1
        rename[name] = new
        taken[new] = names[name]
    return rename


def choose_sources(available: dict[tuple, dict[str, int]], which: str) -> dict[tuple, str]:
    """(run, process) -> the source of beats HeartbeatTrace.with_beats(which) keeps."""
    if which not in BEAT_CHOICES:
        raise ValueError(f"beats: {which!r} is not one of {', '.join(BEAT_CHOICES)}")
    chosen: dict[tuple, str] = {}
    for key, counts in available.items():
        if which != "auto":
            chosen[key] = which
        else:
            # a source this hbtool does not know (a newer tracer's) only when there is nothing else
            chosen[key] = next((s for s in BEAT_SOURCES if counts.get(s)), max(counts, key=counts.get))
    return chosen


def runs_with_sources(runs: dict, chosen: dict[tuple, str], available: dict[tuple, dict[str, int]]) -> dict:
    """Run metadata with ``beats`` and ``beats_available`` (HeartbeatTrace.with_beats)."""
    runs = {name: dict(meta) for name, meta in runs.items()}
    for (run, process), src in chosen.items():
        runs.setdefault(run, {}).setdefault("beats", {})[process] = src
    for (run, process), counts in available.items():
        runs[run].setdefault("beats_available", {})[process] = counts
    return runs


class StreamedTrace(HeartbeatTrace):
    """A trace whose beats stay in their files (hbtool.io.hbt_stream reads the tracer's
    binary files this way): ``stats`` (STATS_COLUMNS) summarises the beats per thread, and
    :meth:`thread_loaders` reads one thread's beat times when an analysis asks for them, so
    that memory does not grow with the trace; ``wait_stats`` (WAIT_STATS_COLUMNS) likewise
    stands in for the waits, and :meth:`wait_overlap` gives what summary.region_work asks
    of them. Events, monitor, cpu, memory and sched records are in memory as in HeartbeatTrace. Reading ``beats`` or ``waits`` reads the whole trace into memory (as
    the eager reader does), for the analyses that need the whole tables.

    ``source`` is the reader's object: ``materialize()`` -> HeartbeatTrace,
    ``load_times(process, thread, sources)`` -> beat times (s) in beats-table order,
    ``wait_overlap(spans)`` -> per thread, ns of its waits within its first and last beat."""

    def __init__(self, source, stats: pd.DataFrame, events: pd.DataFrame | None = None, runs: dict | None = None,
                 warnings: list[str] | None = None, monitor: pd.DataFrame | None = None,
                 wait_stats: pd.DataFrame | None = None, which: str | None = None,
                 cpu: pd.DataFrame | None = None, memory: pd.DataFrame | None = None,
                 sched: pd.DataFrame | None = None):
        self._source = source
        self._beats = None
        self._waits = None
        self._which = which
        self._sources_of = None   # thread_beats: each thread's beat sources, once
        ws = conform(wait_stats if wait_stats is not None else empty_frame(WAIT_STATS_COLUMNS), WAIT_STATS_COLUMNS)
        self.wait_stats = sort_rows(ws, ["run", "process", "thread", "os_tid", "source", "sync"]) if len(ws) else ws
        stats = conform(stats, STATS_COLUMNS)
        if len(stats):
            stats = sort_rows(stats, ["run", "process", "thread", "os_tid", "source"])
        self.stats = stats
        self.events = conform(events if events is not None else empty_frame(EVENT_COLUMNS), EVENT_COLUMNS)
        self.runs = runs if runs is not None else {}
        self.warnings = warnings if warnings is not None else []
        self.monitor = conform(monitor if monitor is not None else empty_frame(MONITOR_COLUMNS), MONITOR_COLUMNS)
        self.cpu = conform(cpu if cpu is not None else empty_frame(CPU_COLUMNS), CPU_COLUMNS)
        self.memory = conform(memory if memory is not None else empty_frame(MEMORY_COLUMNS), MEMORY_COLUMNS)
        self.sched = conform(sched if sched is not None else empty_frame(SCHED_COLUMNS), SCHED_COLUMNS)

    def _materialize(self) -> None:
        whole = self._source.materialize()
        if self._beats is None:
            self._beats = (whole.with_beats(self._which) if self._which else whole).beats
        if self._waits is None:
            self._waits = whole.waits

    @property
    def beats(self) -> pd.DataFrame:
        if self._beats is None:
            self._materialize()
        return self._beats

    @beats.setter
    def beats(self, value: pd.DataFrame) -> None:
        self._beats = value

    @property
    def waits(self) -> pd.DataFrame:
        if self._waits is None:
            self._materialize()
        return self._waits

    @waits.setter
    def waits(self, value: pd.DataFrame) -> None:
        self._waits = value

    def __repr__(self) -> str:
        return f"StreamedTrace(runs={list(self.runs)}, beats={self.beat_count()}, threads={len(self.thread_keys())})"

    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def beat_count(self) -> int:
        return int(self.stats["beats"].sum())

    def sources(self) -> dict[tuple, dict[str, int]]:
        if not len(self.stats):
            return {}
        n = self.stats.groupby(["run", "process", "source"], observed=True)["beats"].sum()
        out: dict[tuple, dict[str, int]] = {}
        for (run, process, source), k in n.items():
            if k:
                out.setdefault((run, int(process)), {})[str(source)] = int(k)
        return out

    def with_beats(self, which: str = "auto") -> "StreamedTrace":
        available = self.sources()
        chosen = choose_sources(available, which)
        st = self.stats
        if len(st):
            keep = [chosen.get((r, int(p))) == src
                    for r, p, src in zip(st["run"].astype(str), st["process"], st["source"].astype(str))]
            st = st[np.asarray(keep, dtype=bool)].reset_index(drop=True)
        out = StreamedTrace(self._source, st, self.events, runs_with_sources(self.runs, chosen, available),
                            list(self.warnings), self.monitor, self.wait_stats, which=which, cpu=self.cpu,
                            memory=self.memory, sched=self.sched)
        out._waits = self._waits
        return out

    @staticmethod
    def join(traces: list["StreamedTrace"]) -> "StreamedTrace":
        """Streamed traces of different runs as one (HeartbeatTrace.concat's renaming)."""
        runs, warnings, by_run = {}, [], {}
        stats, wstats, events, monitor, cpu, memory, sched = [], [], [], [], [], [], []
        for tr in traces:
            rename = _renames(tr.runs, runs)
            for old, new in rename.items():
                by_run[new] = (tr._source, old)

            def renamed(df):
                df = df.copy()
                if any(k != v for k, v in rename.items()):
                    df["run"] = df["run"].astype(str).map(rename)
                return df

            stats.append(renamed(tr.stats))
            wstats.append(renamed(tr.wait_stats))
            events.append(renamed(tr.events))
            monitor.append(renamed(tr.monitor))
            cpu.append(renamed(tr.cpu))
            memory.append(renamed(tr.memory))
            sched.append(renamed(tr.sched))
            warnings.extend(tr.warnings)
        return StreamedTrace(_JoinedSources(by_run, [tr._source for tr in traces]), pd.concat(stats, ignore_index=True),
                             pd.concat(events, ignore_index=True), runs, warnings,
                             pd.concat(monitor, ignore_index=True), pd.concat(wstats, ignore_index=True),
                             cpu=pd.concat(cpu, ignore_index=True), memory=pd.concat(memory, ignore_index=True),
                             sched=pd.concat(sched, ignore_index=True))

    def _thread_groups(self) -> list[tuple]:
        """(key, first row, end row) of each thread's rows of `stats` (sorted, so contiguous)."""
        st = self.stats
        if not len(st):
            return []
        run = st["run"].cat.codes.to_numpy()
        proc, thread = st["process"].to_numpy(), st["thread"].to_numpy()
        new = np.r_[True, (run[1:] != run[:-1]) | (proc[1:] != proc[:-1]) | (thread[1:] != thread[:-1])]
        starts = np.flatnonzero(new).tolist()
        names = st["run"].cat.categories
        return [((names[run[a]], int(proc[a]), int(thread[a])), a, b)
                for a, b in zip(starts, starts[1:] + [len(st)])]

    def wait_overlap(self, spans: pd.DataFrame) -> pd.DataFrame:
        """spans: run, process, thread, first, last (t_ns of a thread's first and last beat).
        Per such thread with waits: off_ns, the ns of its waits that lie between the two
        (summary.region_work), summed from the reader's per-chunk sums where a chunk's waits
        lie wholly inside, its waits read again where they do not."""
        return self._source.wait_overlap(spans)

    def thread_keys(self) -> list[tuple]:
        """(run, process, thread) of every thread with beats, in beats-table order."""
        return [k for k, _, _ in self._thread_groups()]

    def thread_loaders(self) -> list[tuple]:
        """One (key, beats, load) per thread with beats: load() reads the thread's beat times
        (s, in beats-table order) from the trace."""
        source = self.stats["source"].astype(str).tolist()
        beats = self.stats["beats"].to_numpy()
        out = []
        for (run, process, thread), a, b in self._thread_groups():
            sources = sorted(set(source[a:b]))
            out.append(((run, process, thread), int(beats[a:b].sum()),
                        lambda r=run, p=process, t=thread, s=sources: self._source.load_times(r, p, t, s)))
        return out

    def thread_beats(self, key: tuple) -> tuple[np.ndarray, pd.Categorical]:
        """One thread's beats read from the trace: their times (ns, beats-table order) and
        each one's construct name ("" for the program's own beats), as a Categorical (a code
        per beat, not a string)."""
        run, process, thread = key
        t, ids = self._source.load_times(run, process, thread, self._thread_sources(key), loops=True)
        t_ns = np.rint(t * 1e9).astype(np.int64)
        del t
        return t_ns, self.construct_labels(key, ids)

    def thread_iterations(self, key: tuple) -> tuple[np.ndarray, np.ndarray]:
        """Per beat of one thread (thread_beats' order): a loop chunk's count of iterations (0
        for any other beat, or not known) and its first iteration."""
        run, process, thread = key
        b = self._source.load_beats(run, process, thread, self._thread_sources(key), aux=True)
        return b["iterations"], b["iteration"]

    def construct_labels(self, key: tuple, ids: np.ndarray) -> pd.Categorical:
        """Construct ids of some of one thread's beats (0: the program's own beats) as their
        names ("" for 0), a Categorical: a code per beat, not a string."""
        run, process, _ = key
        if self._thread_sources(key) == ["api"]:
            return pd.Categorical.from_codes(np.zeros(ids.size, dtype=np.int8), categories=[""])
        names = self._source.construct_names(run, process)
        u, inv = np.unique(ids, return_inverse=True)
        labels = np.array([construct_label(names, int(c)) for c in u], dtype=object)
        labels, again = np.unique(labels, return_inverse=True)   # two ids of one name: one category
        codes = again[inv].astype(np.int8 if labels.size < 127 else np.int32)
        return pd.Categorical.from_codes(codes, categories=labels)

    def thread_beat_pieces(self, key: tuple, rows: int | None = None, iterations: bool = False):
        """One thread's beats in consecutive pieces, as thread_row_pieces cuts its rows: (times
        ns, construct ids: 0 for the program's own beats; construct_labels names them), and
        with `iterations` each beat's loop chunk count of iterations (0: not a chunk's beat, or
        not known) and its first iteration."""
        from .. import config

        run, process, thread = key
        for b in self._source.beat_pieces(run, process, thread, self._thread_sources(key),
                                          rows or config.STREAM_PIECE_ROWS, constructs=True):
            yield (b["t_ns"], b["construct"], b["iterations"], b["first"]) if iterations else (b["t_ns"], b["construct"])

    def thread_waits(self, key: tuple) -> pd.DataFrame:
        """One thread's waits read from the trace: t_ns (the end), wait_ns, sync."""
        return self._source.load_waits(*key)

    def thread_rows(self, key: tuple) -> pd.DataFrame:
        """One thread's rows of the beats table (BEAT_COLUMNS, in its order), read from the
        trace: what ``beats`` holds of that thread, without reading the others."""
        run, process, thread = key
        return self._rows_frame(key, self._source.load_beats(run, process, thread, self._thread_sources(key)))

    def thread_row_pieces(self, key: tuple, rows: int | None = None):
        """The same rows in consecutive pieces: of at most `rows` rows (default
        config.STREAM_PIECE_ROWS), each after the one
        before in time, when the thread's records are in the table's order already (one OS
        thread and one source: memory then follows the piece, not the thread); else all of
        them in one piece."""
        from .. import config

        run, process, thread = key
        rows = rows or config.STREAM_PIECE_ROWS
        for b in self._source.beat_pieces(run, process, thread, self._thread_sources(key), rows):
            yield self._rows_frame(key, b)

    def construct_names(self, run: str, process: int) -> dict[int, str]:
        """Construct id -> name of one process's automatic beats and waits (its NAME records)."""
        return self._source.construct_names(run, process)

    def thread_time_pieces(self, key: tuple, rows: int | None = None):
        """One thread's beat times (s, beats-table order, as thread_loaders' load gives them)
        in consecutive pieces, as thread_row_pieces cuts its rows."""
        from .. import config

        run, process, thread = key
        for b in self._source.beat_pieces(run, process, thread, self._thread_sources(key),
                                          rows or config.STREAM_PIECE_ROWS, times_only=True):
            yield b["t_ns"].astype(np.float64) / 1e9

    def thread_times_at(self, key: tuple, idx: np.ndarray) -> np.ndarray:
        """The times (ns) of the beats at indices `idx` (ascending) of one thread's beats sorted
        by time, read in pieces when they come in time order already (else read whole and
        sorted): what needs a few of a long thread's beats without holding them."""
        run, process, thread = key
        idx = np.asarray(idx, dtype=np.int64)
        out, at, last = np.empty(idx.size, dtype=np.int64), 0, None
        from .. import config

        for b in self._source.beat_pieces(run, process, thread, self._thread_sources(key),
                                          config.STREAM_PIECE_ROWS, times_only=True):
            t = b["t_ns"]
            if t.size and ((last is not None and t[0] < last) or (t.size > 1 and (np.diff(t) < 0).any())):
                return np.sort(self.thread_beats(key)[0], kind="stable")[idx]   # not in time order
            sel = (idx >= at) & (idx < at + t.size)
            out[sel] = t[idx[sel] - at]
            at += t.size
            last = t[-1] if t.size else last
        if idx.size and (idx.min() < 0 or idx.max() >= at):
            from ..errors import TraceFormatError

            raise TraceFormatError(f"thread {thread} of process {process} has {at} beats in its records, fewer than "
                                   f"its summary counted: the trace changed while it was read")
        return out

    def thread_wait_pieces(self, key: tuple, span: tuple | None = None):
        """One thread's waits read in pieces: (end t_ns, wait_ns, sync kind names as a
        Categorical), in file order; with span (t0, t1 ns), at least those that overlap it
        (HbtStream.wait_pieces)."""
        return self._source.wait_pieces(*key, span=span)

    def _thread_sources(self, key: tuple) -> list[str]:
        if self._sources_of is None:   # once, not per thread
            source = self.stats["source"].astype(str).tolist()
            self._sources_of = {k: sorted(set(source[a:b])) for k, a, b in self._thread_groups()}
        return self._sources_of[key]

    def _rows_frame(self, key: tuple, b: dict) -> pd.DataFrame:
        """Rows of the beats table from one thread's beat fields (load_beats')."""
        run, process, thread = key
        n = b["t_ns"].size
        names = self._source.construct_names(run, process) if self._thread_sources(key) != ["api"] else {}
        # (a reader that names constructs apart from the loop field gives their ids: parquet)
        ids = b["construct"] if "construct" in b else np.where(b["source"] != 0, b["loop"], 0)
        u, inv = np.unique(ids, return_inverse=True)
        construct = [("" if c == 0 else names.get(int(c), f"construct {int(c)}")) for c in u.tolist()]
        su, sinv = np.unique(b["source"], return_inverse=True)
        return pd.DataFrame({
            "run": pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), [run]),
            "process": np.full(n, process, dtype=np.int64), "thread": np.full(n, thread, dtype=np.int64),
            "seq": b["seq"], "t": b["t_ns"] / 1e9, "t_ns": b["t_ns"], "loop": b["loop"], "iteration": b["iteration"],
            "tag": b["tag"], "os_tid": b["os_tid"], "label": pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), [""]),
            "source": _observed([BEAT_SOURCES[c] if c < len(BEAT_SOURCES) else f"source {c}" for c in su.tolist()],
                                sinv),
            "construct": _observed(construct, inv),
        })

    def process_wait_pieces(self, run: str, process: int, thread: int | None = None):
        """Every wait of one process (WAIT_COLUMNS), in the whole reader's order, read from the
        trace in consecutive pieces, each a batch of its chunks: memory follows the read window,
        not the process; of one thread only, given one."""
        for w in self._source.process_wait_pieces(run, process, thread):
            yield conform(w.assign(t=w["t_ns"] / 1e9), WAIT_COLUMNS)


def construct_label(names: dict[int, str], key: int) -> str:
    """The name of a construct key (construct_keys): "" for 0; a sections construct's
    units named with the sections they held ("sections main+0x4a2 #1,3"), so that a unit of
    work is compared with units of the same sections (they differ in length, and whichever
    thread comes first takes the first); an unshared task's ("task f+0x10 unshared": the
    thread that made it ran it, no teammate took it) apart from the tasks of its construct
    that went to a teammate."""
    if key == 0:
        return ""
    cid, taken = key & 0xFFFFFFFF, key >> 32
    name = names.get(cid, f"construct {cid}")
    if taken & TASK_UNSHARED and name.startswith("task "):
        return name + UNSHARED
    if taken and name.startswith("sections "):
        nums = [str(b + 1) for b in range(31) if taken >> b & 1] + (["32+"] if taken >> 31 & 1 else [])
        name += " #" + ",".join(nums)
    return name


def task_construct(label: str) -> str:
    """The construct a unit of work named `label` (construct_label) belongs to: an unshared
    task's label without its mark ("task f+0x10 unshared": "task f+0x10"), any other as it is.
    Who ran a task says whether it was shared, not how long it is."""
    return label[: -len(UNSHARED)] if label.endswith(UNSHARED) and label.startswith("task ") else label


def sections_named(label: str) -> tuple[str, int]:
    """Of a construct's name as construct_label writes it: the construct's own name and how
    many sections the name says its unit held ("sections f+0x10 #1,3": ("sections f+0x10",
    2)); (label, 0) for any other name."""
    if label.startswith("sections "):
        base, mark, taken = label.rpartition(" #")
        if mark and taken:
            return base, taken.count(",") + 1
    return label, 0


def _observed(names: list[str], codes: np.ndarray) -> pd.Categorical:
    """pd.Categorical(np.asarray(names)[codes]) without the array of strings: categories in
    sorted order, names given twice merged (each name is observed)."""
    cats, remap = np.unique(np.asarray(names, dtype=object), return_inverse=True)
    return pd.Categorical.from_codes(remap[codes], cats.tolist())


class _JoinedSources:
    """The sources of joined streamed traces: a run's beats from the source that has it."""

    def __init__(self, by_run: dict[str, tuple], sources: list):
        self.by_run, self.sources = by_run, sources

    def load_times(self, run: str, process: int, thread: int, sources: list[str], loops: bool = False):
        source, name = self.by_run[run]
        return source.load_times(name, process, thread, sources, loops=loops)

    def construct_names(self, run: str, process: int) -> dict[int, str]:
        source, name = self.by_run[run]
        return source.construct_names(name, process)

    def load_waits(self, run: str, process: int, thread: int) -> pd.DataFrame:
        source, name = self.by_run[run]
        return source.load_waits(name, process, thread)

    def load_beats(self, run: str, process: int, thread: int, sources: list[str], aux: bool = False) -> dict:
        source, name = self.by_run[run]
        return source.load_beats(name, process, thread, sources, aux=aux)

    def beat_pieces(self, run: str, process: int, thread: int, sources: list[str], rows: int,
                    times_only: bool = False, constructs: bool = False):
        source, name = self.by_run[run]
        return source.beat_pieces(name, process, thread, sources, rows, times_only, constructs)

    def wait_pieces(self, run: str, process: int, thread: int, span: tuple | None = None):
        source, name = self.by_run[run]
        return source.wait_pieces(name, process, thread, span=span)

    def process_wait_pieces(self, run: str, process: int, thread: int | None = None):
        source, name = self.by_run[run]
        for w in source.process_wait_pieces(name, process, thread):
            yield w.assign(run=run)

    def wait_overlap(self, spans: pd.DataFrame) -> pd.DataFrame:
        parts = []
        for run, g in spans.groupby(spans["run"].astype(str), sort=False):
            source, name = self.by_run[run]
            part = source.wait_overlap(g.assign(run=name))
            parts.append(part.assign(run=run))
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["run", "process", "thread",
                                                                                      "off_ns"])

    def materialize(self) -> HeartbeatTrace:
        return HeartbeatTrace.concat([s.materialize() for s in self.sources])
