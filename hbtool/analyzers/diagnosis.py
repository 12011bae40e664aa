"""From a heartbeat trace to a table of per-thread features (SPEC 3): reference
selection, heart-rate series, features, and the lifecycle facts the classifier uses."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import config
from ..model import HeartbeatTrace
from ..model.heartbeats import sections_named
from .features import FEATURES, FeatureSettings, LazySeries, PiecewiseSeries, Series, compute_features, make_series, too_few_beats
from .summary import memory_retained, region_work, split_waits, summarize_threads, work_shifts_and_units

KEY = ["run", "process", "thread"]
#: which thread a row was compared with: "team-median" (its team's median thread) or
#: "reference-trace" (a thread of the trace given as reference), and that thread's key
REFERENCE_COLUMNS = ["reference_kind", "reference_run", "reference_process", "reference_thread"]
#: features that compare two threads beat by beat
BEAT_BY_BEAT = ["LTR", "LHR", "DTW", "LB", "LTRmax"]


def thread_series(trace: HeartbeatTrace, settings: FeatureSettings) -> dict[tuple, Series]:
    loaders = getattr(trace, "thread_loaders", None)
    if loaders is not None:  # a StreamedTrace: each thread's beats read from the file when needed
        return {k: (LazySeries(load, n, settings.window) if n <= config.WHOLE_THREAD_BEATS else
                    PiecewiseSeries(lambda k=k: trace.thread_time_pieces(k), n, settings))
                for k, n, load in loaders()}
    return {k: make_series(g["t"].to_numpy(), settings.window) for k, g in trace.threads()}


def team_reference(series: dict[tuple, Series], settings: FeatureSettings, stopped: frozenset = frozenset()):
    """The thread whose (beats, completion time, mean heart rate) lies closest to the
    team's median of each (log scale); None when no thread has features. Not a thread of
    `stopped` (its share of its team's work fell under SHARE_SHIFT_MIN: it stopped working
    while its team went on) while another can be: of two threads, each is as close to the
    median as the other, and the one that went on working was compared with the stopped one
    (GHR 3.5, memoryleak, in 2 runs of 3 of tests/programs/omp_guided_rows.c, libomp)."""
    cand = {k: s for k, s in series.items() if too_few_beats(s, settings) is None and s.end_t() > 0}
    if any(_key(k) not in stopped for k in cand):
        cand = {k: s for k, s in cand.items() if _key(k) not in stopped}
    if not cand:
        return None
    keys = list(cand)
    vec = np.array([[np.log(s.beats), np.log(s.end_t()), np.log(max(s.mean_hr(settings.window), 1e-300))]
                    for s in cand.values()])
    med = np.median(vec, axis=0)
    d = np.abs(vec - med).sum(axis=1)
    return keys[int(np.argmin(d))]


#: how a thread ended by itself, the process going on (summary.ENDINGS): its own end is its
#: end, whatever its team did. (A thread that ends the process, by exit or a fatal signal,
#: does so after its master left the region, or its master never leaves it.)
OWN_ENDS = ("returned", "pthread_exit", "cancelled")


def _key(k: tuple) -> tuple:
    return (str(k[0]), k[1], k[2])


def _master_leaves(trace: HeartbeatTrace, key: tuple) -> np.ndarray:
    """When the OpenMP master `key` (thread 0 of its process) left a parallel region for the
    program's serial part: the starts of its `outside` waits, in seconds, sorted."""
    stats = getattr(trace, "wait_stats", None)
    if stats is not None:   # a streamed trace: only a master that has such waits is read
        mine = ((stats["run"].astype(str) == str(key[0])) & (stats["process"] == key[1]) & (stats["thread"] == key[2])
                & (stats["sync"].astype(str) == "outside"))
        if not mine.any():
            return np.empty(0)
        starts = [(end - length)[np.asarray(sync == "outside")] for end, length, sync in trace.thread_wait_pieces(key)]
        return np.sort(np.concatenate(starts)) / 1e9 if starts else np.empty(0)
    _, w = split_waits(trace.waits)   # the master's time outside the regions: its serial part
    if not len(w):
        return np.empty(0)
    w = w[(w["run"].astype(str) == str(key[0])) & (w["process"] == key[1])]
    return np.sort((w["t_ns"].to_numpy(np.int64) - w["wait_ns"].to_numpy(np.int64)) / 1e9)


def presence_ends(trace: HeartbeatTrace, series: dict[tuple, Series], summary: pd.DataFrame | None) -> None:
    """Sets `present_until` of each thread of an OpenMP team whose last beat came before its
    master left the region that beat was in: the thread was in that region until then,
    waiting in the barrier that closes it with nothing left to take (a run that ends with one
    thread's walk of tasks: the others' beats end early, the master's too when a worker
    walks). libomp's worker beats at the region's end, after that barrier; libgomp's beats when
    its part ends, before it, and writes its wait there when it opens its next region -- the
    last region's never: its GTR was 0.10 and it was called shutdown, or the walking worker's
    9.7 against the master (tests/programs/omp_task_tree.c, LAST 0). Not for a thread that
    ended by itself (OWN_ENDS), nor where the master has no `outside` waits (no OpenMP regions
    seen)."""
    teams: dict[tuple, list] = {}
    for k, s in series.items():
        teams.setdefault((k[0], k[1]), []).append((k, s))
    for (run, process), members in teams.items():
        if not any(k[2] == 0 for k, _ in members):
            continue
        leaves = None
        for k, s in members:
            if not s.beats or (summary is not None and k in summary.index and summary.loc[k, "ending"] in OWN_ENDS):
                continue
            if leaves is None:
                leaves = _master_leaves(trace, (run, process, 0))
            last = s.last_t()
            i = int(np.searchsorted(leaves, last, side="right"))
            if i < leaves.size:
                s.present_until = float(leaves[i])


def _describe_key(k) -> str:
    run, process, thread = k
    return f"{run} thread {thread}" if process == 0 else f"{run} process {process} thread {thread}"


def features_table(trace: HeartbeatTrace, settings: FeatureSettings | None = None,
                   reference: HeartbeatTrace | None = None, expected_beats: float | None = None,
                   progress=None, work_reference: dict[int, float] | None = None,
                   retained_reference: dict[int, float] | None = None,
                   team_work_reference: dict[int, float] | None = None,
                   units_reference: dict[str, float] | None = None,
                   team_share_reference: dict[int, float] | None = None) -> pd.DataFrame:
    """One row per thread: identity, beats, the reference used, na_reason, every feature,
    and how the thread ended (ending, ended, died).

    Reference, in order of precedence: the thread of the same number in `reference`
    (else that trace's robust reference thread); otherwise the run's own robust
    reference: the median thread of the thread's team (its process; the whole run
    when the process has one thread).
    """
    settings = settings or FeatureSettings()
    series = thread_series(trace, settings)
    summary = summarize_threads(trace).set_index(KEY) if trace.beat_count() else None
    presence_ends(trace, series, summary)
    ref_series, ref_default = {}, None
    if reference is not None:
        rs = thread_series(reference, settings)
        presence_ends(reference, rs, summarize_threads(reference).set_index(KEY) if reference.beat_count() else None)
        for k, s in rs.items():
            ref_series.setdefault(k[2], (k, s))  # first run holding that thread number
        by_run = {}
        for k in rs:
            by_run.setdefault(k[0], {})[k] = rs[k]
        first = next(iter(by_run.values()), {})
        rk = team_reference(first, settings)
        ref_default = (rk, first[rk]) if rk is not None else None
    teams: dict[tuple, dict] = {}
    for k, s in series.items():
        teams.setdefault((k[0], k[1]), {})[k] = s
    run_teams: dict[str, dict] = {}
    for k, s in series.items():
        run_teams.setdefault(k[0], {})[k] = s
    shifts, medians = work_shifts_and_units(trace)
    if len(shifts):
        shifts = shifts.assign(run=shifts["run"].astype(str)).set_index(KEY)
        stopped = frozenset(shifts.index[shifts["share_shift"].to_numpy(float) < config.SHARE_SHIFT_MIN])
    else:
        stopped = frozenset()
    team_refs: dict[tuple, tuple] = {}  # (run, process) -> (reference key, its series), once per team
    rows = []
    for k, s in series.items():
        row = dict(zip(KEY, k))
        row["beats"] = s.beats
        if reference is not None:
            rk, rs_ = ref_series.get(k[2], ref_default or (None, None))
            row["reference"] = f"{'reference ' + _describe_key(rk) if rk is not None else 'none'}"
            row["reference_kind"] = "reference-trace"
        else:
            if (k[0], k[1]) not in team_refs:
                team = teams[(k[0], k[1])]
                if len(team) < 2:
                    team = run_teams[k[0]]
                rk = team_reference(team, settings, stopped)
                team_refs[(k[0], k[1])] = (rk, team[rk] if rk is not None else None)
            rk, rs_ = team_refs[(k[0], k[1])]
            row["reference"] = f"team median: {_describe_key(rk)}" if rk is not None else "none"
            row["reference_kind"] = "team-median"
        row["reference_run"], row["reference_process"], row["reference_thread"] = rk if rk is not None else (None,) * 3
        reason = too_few_beats(s, settings)
        if reason is None and (rs_ is None or too_few_beats(rs_, settings) is not None):
            reason = "no reference thread with enough beats"
        row["na_reason"] = reason or ""
        if reason is None:
            row.update(compute_features(rs_, s, settings, expected_beats))
        else:
            row.update(dict.fromkeys(FEATURES, float("nan")))
            exp = expected_beats or (rs_.beats if rs_ is not None else None)
            row["progress"] = s.beats / exp if exp else float("nan")
        if summary is not None and k in summary.index:
            srow = summary.loc[k]
            row["ending"], row["ended"], row["died"] = srow["ending"], srow["ended"], bool(srow["abnormal"])
        else:
            row["ending"], row["ended"], row["died"] = "unknown", "", False
        rows.append(row)
    cols = KEY + ["beats", "reference", *REFERENCE_COLUMNS, "na_reason", *FEATURES, "ending", "ended", "died"]
    table = pd.DataFrame(rows, columns=cols)
    table["work_s"] = _work_of(trace, table)
    table["WR"], table["WR_against"] = work_ratios(trace, table, reference, work_reference)
    keys = list(zip(table["run"].astype(str), table["process"], table["thread"]))
    table["unit_medians"] = [medians.get(k, {}) for k in keys]
    table["UR_against"] = "the model's normal runs" if units_reference else ""
    if not units_reference and reference is not None:   # the reference run's units, pooled
        units_reference = pooled_units(list(work_shifts_and_units(reference)[1].values()))
        table["UR_against"] = "the reference run"
    table["UR"], table["UR_team"] = unit_ratios(table, units_reference)
    table["WS"] = [float(shifts["work_shift"].get(k, np.nan)) if len(shifts) else np.nan for k in keys]
    table["WS_beat"] = [int(shifts["shift_beat"].get(k, 0)) if len(shifts) else 0 for k in keys]
    table["SS"] = [float(shifts["share_shift"].get(k, np.nan)) if len(shifts) else np.nan for k in keys]
    table["SS_beat"] = [int(shifts["share_beat"].get(k, 0)) if len(shifts) else 0 for k in keys]
    table["crowded"] = [int(shifts["crowded"].get(k, 0)) if len(shifts) else 0 for k in keys]
    table["team_work"] = [float(shifts["team_work"].get(k, np.nan)) if len(shifts) else np.nan for k in keys]
    table["team_share"] = [float(shifts["team_share"].get(k, np.nan)) if len(shifts) else np.nan for k in keys]
    table["IR"] = [float(shifts["iteration_ratio"].get(k, np.nan)) if len(shifts) else np.nan for k in keys]
    table["SS_against"] = ""
    if team_share_reference:
        # a thread that stopped before its team's first window of time ended has no earlier
        # share to fall from: its share over the whole run, against what the same thread
        # number took in the model's normal runs, where its share shift did not already say
        # it stopped (FastTree: a thread stopped 15 ms into a run of 2.6 s)
        ref = np.array([team_share_reference.get(int(k[2]), np.nan) for k in keys], dtype=float)
        whole = table["team_share"].to_numpy(dtype=float) / np.where(ref > 0, ref, np.nan)
        ss = table["SS"].to_numpy(dtype=float)
        use = (np.isfinite(whole) & (whole < config.SHARE_SHIFT_MIN)
               & ~(np.isfinite(ss) & (ss < config.SHARE_SHIFT_MIN)))
        table.loc[use, "SS"] = whole[use]
        table.loc[use, "SS_beat"] = 0
        table.loc[use, "SS_against"] = "model"
    table["WS_against"] = ""
    if team_work_reference:
        # a thread slowed from its first beats has no earlier self to shift from: its work
        # against its team's over the whole run, against what the model's normal runs did
        # (the same thread number's), where its shift over its run did not already judge it
        # (one that slowed from some beat on is told so, with that beat)
        ref = np.array([team_work_reference.get(int(k[2]), np.nan) for k in keys], dtype=float)
        whole = table["team_work"].to_numpy(dtype=float) / np.where(ref > 0, ref, np.nan)
        ws = table["WS"].to_numpy(dtype=float)
        use = np.isfinite(whole) & (whole > config.SHIFT_MAX) & ~(np.isfinite(ws) & (ws > config.SHIFT_MAX))
        table.loc[use, "WS"] = whole[use]
        table.loc[use, "WS_beat"] = 0
        table.loc[use, "WS_against"] = "model"
    # a thread whose loop chunks took longer per iteration than its teammates' of the same
    # loops, over its whole run, where its shift did not already judge it: a dynamic or guided
    # loop's chunks are alike per iteration, whoever takes them (GraphicsMagick's slowed
    # victim: 2.95x, its teammates 0.34x, normal runs 0.77-1.30x; its windows of time hold one
    # guided chunk each, too few for a shift)
    ir = table["IR"].to_numpy(dtype=float)
    ws = table["WS"].to_numpy(dtype=float)
    use = np.isfinite(ir) & (ir > config.SHIFT_MAX) & ~(np.isfinite(ws) & (ws > config.SHIFT_MAX))
    table.loc[use, "WS"] = ir[use]
    table.loc[use, "WS_beat"] = 0
    table.loc[use, "WS_against"] = "iterations"
    # where the team judges a thread over time (WS), other runs' work does not: the model's
    # normal runs ran under another load (the same reason work_ratios prefers the team). Not
    # where the team was cut by time (a dynamic loop's): its WS follows a slow-down that lasts,
    # not one long stall, which its whole work against the model's runs still shows
    by_time = [bool(shifts["by_time"].get(k, False)) if len(shifts) else False for k in keys]
    table["WS_by_time"] = by_time
    modelled = (table["WR_against"].astype(str).str.endswith(MODEL_RUNS) & np.isfinite(table["WS"].to_numpy(float))
                & ~np.asarray(by_time, dtype=bool))
    table.loc[modelled, "WR"], table.loc[modelled, "WR_against"] = np.nan, ""
    table = table.join(memory_leaks(trace, table, reference, retained_reference))
    # a thread's count of automatic OpenMP beats is the runtime's choice (who takes how many
    # chunks of a dynamic loop), not its progress: a thread that stopped early is one whose
    # beats end early (GTR), or whose process died
    counted = _counts_progress(trace)
    mask = np.array([counted.get(k, True) for k in zip(table["run"], table["process"], table["thread"])], dtype=bool)
    # ... and beat i of one thread is not the same unit of work as beat i of another, so the
    # features that compare them beat by beat say nothing either; GTR, GHR (whole runs) and WR stay
    table.loc[~mask, ["progress", *BEAT_BY_BEAT]] = np.nan
    table["progress_counts"] = mask
    # the most beats a thread of the same process made, where two threads or more beat: a
    # thread with automatic beats that made as many did not end early, whatever its GTR
    # against a model's runs says (a whole run a few per cent faster than those)
    team = table.groupby(["run", "process"], observed=True)["beats"]
    table["team_beats"] = team.transform("max").where(team.transform("size") > 1)
    return table


def pooled_units(medians: list[dict]) -> dict[str, float]:
    """Per construct, the median of its units over threads (and runs): the median of the
    medians (summary._UnitHistograms.construct_medians) of those that had
    config.UNIT_RATIO_MIN_UNITS of it at least."""
    by: dict[str, list[float]] = {}
    for m in medians:
        for c, (v, n, *_) in m.items():
            if c and n >= config.UNIT_RATIO_MIN_UNITS and v > 0:
                by.setdefault(c, []).append(v)
    return {c: float(np.median(v)) for c, v in by.items()}


def per_section(reference: dict[str, float]) -> dict[str, float]:
    """Per sections construct of a reference (its units named with the sections they held,
    "sections f+0x10 #1,3"), the median over those names of a unit's length per section it
    held: what a unit of sections the reference never saw together is measured against."""
    by: dict[str, list[float]] = {}
    for c, r in reference.items():
        base, k = sections_named(c)
        if k and r > 0:
            by.setdefault(base, []).append(r / k)
    return {b: float(np.median(v)) for b, v in by.items()}


def unit_ratio(medians: dict, reference: dict[str, float], sections: dict[str, float] | None = None) -> float:
    """How many times longer a thread's units took than the reference's (normal runs' or a
    reference run's), construct by construct: of each construct it had
    config.UNIT_RATIO_MIN_UNITS units of at least and the reference has, the log of its
    median over the reference's, and of those the median weighted by the work its units
    would have been at the reference's pace (its units times the reference's median): the
    constructs that hold its work decide, not the runtime's microsecond ones (a task's own
    work after its children ends, a few hundred ns, or a region's end after its last section,
    0.1 us, which any cost on the beat's path -- the fault injector's, armed -- makes tens of
    times longer). Weighted by its own units' time, those it took longer over weighed the
    more: FastTree's thread that took its stopped teammate's sections read 103, from its
    region ends (6.7 us against the model's 0.1), and was called memoryleak. A unit of sections
    whose set of sections the reference never ran together (a thread that took all three while
    its teammate had stopped: "#1,2,3") is measured against as many of the construct's sections
    at the reference's length per section (`sections`: per_section of the reference). NaN
    without any."""
    logs, weights = [], []
    for c, (v, n, *per) in medians.items():
        r = reference.get(c)
        if r is None and sections:
            base, k = sections_named(c)
            r = k * sections[base] if k and base in sections else None
        if c and r and r > 0 and v > 0 and n >= config.UNIT_RATIO_MIN_UNITS:
            logs.append(np.log(v / r))
            # (a loop measured per iteration: its chunks times their iterations times the
            # reference's picoseconds per iteration)
            weights.append(n * r * (per[0] / 1000.0 if per else 1.0))
    if not logs:
        return float("nan")
    o = np.argsort(logs)
    cw = np.cumsum(np.asarray(weights, dtype=float)[o])
    return float(np.exp(np.asarray(logs)[o][np.searchsorted(cw, 0.5 * cw[-1])]))


def unit_ratios(table: pd.DataFrame, reference: dict[str, float] | None) -> tuple[np.ndarray, np.ndarray]:
    """UR of every row of a features table (unit_ratio against `reference`, NaN without one)
    and UR_team, the median of its teammates' (the other threads of its process)."""
    ur = np.full(len(table), np.nan)
    if reference:
        sections = per_section(reference)
        ur = np.array([unit_ratio(m, reference, sections) for m in table["unit_medians"]], dtype=float)
    team = np.full(len(table), np.nan)
    for idx in pd.Series(np.arange(len(table))).groupby([table["run"].astype(str).to_numpy(),
                                                         table["process"].to_numpy()]).indices.values():
        team[idx] = _median_of_others(ur[idx])
    return ur, team


def _median_of_others(v: np.ndarray) -> np.ndarray:
    """Per element of v, the median of the other finite elements (NaN: none)."""
    out = np.full(v.size, np.nan)
    ok = np.flatnonzero(np.isfinite(v))
    m = ok.size
    if m < 2:
        return out
    o = ok[np.argsort(v[ok], kind="stable")]
    s = v[o]
    rank = np.arange(m)

    def at(p: int) -> np.ndarray:   # position p of the sorted others, for each removed rank
        return s[np.where(p < rank, p, p + 1)]

    k = m - 1
    out[o] = at(k // 2) if k % 2 else 0.5 * (at(k // 2 - 1) + at(k // 2))
    return out


def _counts_progress(trace: HeartbeatTrace) -> dict[tuple, bool]:
    """Per thread: whether its beat count measures its progress (not when most of its
    beats are the tracer's automatic OpenMP ones)."""
    stats = getattr(trace, "stats", None)
    if stats is not None:  # beats summarised per OS thread and source by the reader
        if not len(stats):
            return {}
        omp = stats["beats"].where(stats["source"] == "openmp", 0)
        g = [stats["run"].to_numpy(), stats["process"].to_numpy(), stats["thread"].to_numpy()]
        share = omp.groupby(g).sum() / stats["beats"].groupby(g).sum()
        return {k: bool(v <= 0.5) for k, v in share.items()}
    b = trace.beats
    if not len(b):
        return {}
    omp = (b["source"] == "openmp").to_numpy()
    share = pd.Series(omp).groupby([b["run"].to_numpy(), b["process"].to_numpy(), b["thread"].to_numpy()]).mean()
    return {k: bool(v <= 0.5) for k, v in share.items()}


def _work_of(trace: HeartbeatTrace, table: pd.DataFrame) -> np.ndarray:
    work = region_work(trace).set_index(KEY)["work_s"] if trace.beat_count() else pd.Series(dtype=float)
    return np.array([work.get(k, np.nan) for k in zip(table["run"], table["process"], table["thread"])], dtype=float)


#: how WR_against ends when WR was measured against the model's normal runs
MODEL_RUNS = " in the model's normal runs"


def work_ratios(trace: HeartbeatTrace, table: pd.DataFrame, reference: HeartbeatTrace | None,
                work_reference: dict[int, float] | None = None) -> tuple[np.ndarray, list[str]]:
    """WR of every row of a features table: the thread's own work in the parallel regions
    (summary.region_work) over its reference's. With a reference trace: the thread of the
    same number there (its first run). Otherwise its team's: the median of the other
    workers (threads but 0) of its process, for a worker of a team of three or more; the
    master (thread 0) has work of its own (the serial part inside regions, `master`
    blocks), so only a reference trace can judge it. NaN where either side has no wait
    records (API beats) or none of this holds."""
    work = region_work(trace).set_index(KEY)["work_s"] if trace.beat_count() else pd.Series(dtype=float)
    out = np.full(len(table), np.nan)
    against = [""] * len(table)
    if reference is not None:
        rw = region_work(reference) if reference.beat_count() else pd.DataFrame(columns=KEY + ["work_s"])
        ref_by_thread = rw.dropna().drop_duplicates("thread").set_index("thread")["work_s"]
        for i, k in enumerate(zip(table["run"], table["process"], table["thread"])):
            w, r = work.get(k, np.nan), ref_by_thread.get(k[2], np.nan)
            if np.isfinite(w) and np.isfinite(r) and r > 0:
                out[i], against[i] = w / r, f"thread {k[2]} of the reference"
        return out, against
    workers = work[work.index.get_level_values("thread") != 0].dropna()
    for i, k in enumerate(zip(table["run"], table["process"], table["thread"])):
        w = work.get(k, np.nan)
        if k[2] == 0 or not np.isfinite(w):
            continue
        team = workers[(workers.index.get_level_values("run") == k[0])
                       & (workers.index.get_level_values("process") == k[1])]
        others = team[team.index.get_level_values("thread") != k[2]]
        if len(team) >= 2 and len(others) and np.median(others) > 0:
            out[i], against[i] = w / float(np.median(others)), "the median of the team's other workers"
    if work_reference:
        # the rest (the master, a worker with one teammate): against the model's normal runs.
        # Its teammates, in the same run, share the machine's load; other runs do not, so the
        # team is the first choice
        for i, k in enumerate(zip(table["run"], table["process"], table["thread"])):
            w, r = work.get(k, np.nan), work_reference.get(int(k[2]), np.nan)
            if np.isnan(out[i]) and np.isfinite(w) and np.isfinite(r) and r > 0:
                out[i], against[i] = w / r, f"thread {k[2]}{MODEL_RUNS}"
    return out, against


#: columns memory_leaks adds to a features table
MEMORY_FEATURES = ["retained", "retained_bound", "retained_against", "leaking"]


def memory_leaks(trace: HeartbeatTrace, table: pd.DataFrame, reference: HeartbeatTrace | None = None,
                 retained_reference: dict[int, float] | None = None) -> pd.DataFrame:
    """The memory signal of every row of a features table (same index): ``retained``, the
    bytes the thread allocated and kept over its memory records (NaN without them:
    summary.memory_retained); ``retained_bound``, what it may keep and be normal: the
    largest of config.LEAK_MIN_BYTES, config.LEAK_MIN_SHARE of its process's largest
    resident size, and config.LEAK_FACTOR times its reference's (the same thread of the
    reference trace, else of the model's normal runs, else the median of its team's other
    threads); ``retained_against``, that reference in words; ``leaking``: above the bound, in
    config.LEAK_MIN_RISES steps or more, while its process kept at least
    config.LEAK_PROCESS_SHARE of it."""
    out = pd.DataFrame({"retained": np.nan, "retained_bound": np.nan, "retained_against": "",
                        "leaking": False}, index=table.index)
    mem = memory_retained(trace)
    if not len(mem):
        return out
    mem = mem.assign(run=mem["run"].astype(str)).set_index(KEY)
    ref_by_thread = {}
    if reference is not None:
        rm = memory_retained(reference)
        ref_by_thread = rm.drop_duplicates("thread").set_index("thread")["retained"].to_dict() if len(rm) else {}
    # each team's retained bytes by thread, once (not per row: thousands of threads)
    teams = {key: g.droplevel([0, 1])["retained"] for key, g in mem.groupby(level=[0, 1], sort=False)}
    for i, k in zip(table.index, zip(table["run"].astype(str), table["process"], table["thread"])):
        if k not in mem.index:
            continue
        m = mem.loc[k]
        kept = float(m["retained"])
        base, against = np.nan, ""
        if reference is not None:
            base = ref_by_thread.get(k[2], np.nan)
            against = f"thread {k[2]} of the reference" if np.isfinite(base) else ""
        elif retained_reference and int(k[2]) in retained_reference:
            base, against = retained_reference[int(k[2])], f"thread {k[2]} in the model's normal runs"
        else:
            team = teams.get((k[0], k[1]))
            others = team[team.index != k[2]] if team is not None else []
            if len(others):
                base, against = float(np.median(others)), "the median of its team's other threads"
        bound = max(config.LEAK_MIN_BYTES, config.LEAK_MIN_SHARE * float(np.nan_to_num(m["peak_resident"])),
                    config.LEAK_FACTOR * base if np.isfinite(base) else 0.0)
        grew = m["process_growth"]
        kept_by_process = not np.isfinite(grew) or grew >= config.LEAK_PROCESS_SHARE * kept
        out.loc[i, ["retained", "retained_bound", "retained_against"]] = [kept, bound, against or "the absolute bounds"]
        out.loc[i, "leaking"] = bool(kept > bound and m["rises"] >= config.LEAK_MIN_RISES and kept_by_process)
    return out


def labelled_table(labelled, settings: FeatureSettings | None = None,
                   reference: HeartbeatTrace | None = None) -> pd.DataFrame:
    """One features table over labelled traces, with a `label` column per thread.

    `labelled` yields (trace, label, thread_labels, columns): every thread carries
    `label` unless `thread_labels` ({thread number: label}) names its own; `columns`
    ({name: value}) are added to every row of that trace (e.g. the benchmark)."""
    tables = []
    for trace, label, thread_labels, columns in labelled:
        t = features_table(trace, settings, reference=reference)
        for name, value in columns.items():
            t[name] = value
        t["label"] = [thread_labels.get(int(th), label) for th in t["thread"]]
        tables.append(t)
    if not tables:
        raise ValueError("no traces to build a labelled table from")
    return pd.concat(tables, ignore_index=True)
