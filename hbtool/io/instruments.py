"""The tracer's instrument records: queue samples, timing probes, machine status.

They live in the same binary trace files as the heartbeats (record kinds 12-16 of
native_tracer/include/hbtrace_format.h); this module decodes them from the raw
arrays that :func:`hbtool.io.hbt.read_hbt_file` returns. Every value read from a
file is checked before it is used as a length or an index.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import TraceFormatError
from ..model import (PROBE_COLUMNS, QUEUE_ENDS, QUEUE_SAMPLE_COLUMNS, STATUS_METRICS, ProbeStats, QueueSamples,
                    StatusSamples, conform)
from .hbt import NAME_PROBE, NAME_QUEUE, REC_NAME, decode_names
from .registry import ReadOptions

REC_QUEUE_OPEN = 12
REC_QUEUE_SAMPLE = 13
REC_PROBE = 15
REC_STATUS = 16
INSTRUMENT_KINDS = {REC_QUEUE_OPEN, REC_QUEUE_SAMPLE, REC_NAME, REC_PROBE, REC_STATUS}

QFLAG_BLOCKED = 0x1
QFLAG_FINAL = 0x2
QFLAG_STAGE_BLOCKED = 0x4   # the thread at the end blocked on any of its queues (seed 002: per kernel)
PSTATS = ("count", "total_ns", "min_ns", "max_ns")
QUEUE_COLUMNS = ["queue", "process", "queue_id", "capacity", "item_size", "opened_t"]


# --------------------------------------------------------------------------- files


def read_parsed(path: str | os.PathLike) -> tuple[list[dict], list[int], str]:
    """Parse every trace file of `path` (a file or run directory); return them in process
    order, their time offsets (hbt.run_offsets) and the run name."""
    from .hbt import process_order, read_hbt_file, run_offsets, trace_paths

    files, run = trace_paths(Path(path))
    parsed = [read_hbt_file(f) for f in files]
    for f, p in zip(files, parsed):
        p["file"] = os.fspath(f)
    offsets, _ = run_offsets(parsed)
    order = process_order(parsed, offsets)
    return [parsed[i] for i in order], [offsets[i] for i in order], run


def read_queue_trace(path: Path, options: ReadOptions) -> QueueSamples:
    """The registry's reader of queue samples from a trace (an item size given overrides the recorded one)."""
    qs = queue_samples_from_trace(os.fspath(path))
    if options.item_size is not None:
        qs.samples["item_size"] = options.item_size
        qs.queues["item_size"] = options.item_size
    return qs


def read_probe_trace(path: Path, options: ReadOptions) -> ProbeStats:
    return probes_from_trace(os.fspath(path))


def read_status_trace(path: Path, options: ReadOptions) -> StatusSamples:
    return status_from_trace(os.fspath(path))


def _process_number(p: dict, index: int) -> int:
    rank = p["header"]["rank"]
    return int(rank) if rank >= 0 else index


def _times(p: dict, offset: int, sel: np.ndarray) -> np.ndarray:
    """Seconds since the run started of the selected records (t_ns is a clock value)."""
    t_ns = p["records"]["t_ns"][sel].astype(np.int64) - np.int64(p["header"]["start_mono_ns"]) + np.int64(offset)
    return t_ns / 1e9


# --------------------------------------------------------------------------- queues


def queue_samples_from_trace(path: str) -> QueueSamples:
    parsed, offsets, run = read_parsed(path)
    warnings: list[str] = []
    frames, queues = [], []
    names_seen: dict[str, int] = {}
    for index, (p, off) in enumerate(zip(parsed, offsets)):
        warnings.extend(p["warnings"])
        r, f = p["records"], p["file"]
        proc = _process_number(p, index)
        names = decode_names(r, NAME_QUEUE, warnings, f)
        opened = r["kind"] == REC_QUEUE_OPEN
        qinfo: dict[int, dict] = {}
        t_open = _times(p, off, opened)
        for k, qid in enumerate(r["thread"][opened].astype(np.int64).tolist()):
            qinfo.setdefault(qid, {"capacity": int(r["seq"][opened][k]), "item_size": int(r["aux"][opened][k]),
                                   "opened_t": float(t_open[k])})
        smp = r["kind"] == REC_QUEUE_SAMPLE
        if not smp.any() and not qinfo:
            continue
        qid = r["thread"][smp].astype(np.int64)
        end = r["loop"][smp].astype(np.int64)
        bad = (qid < 0) | ((end != 0) & (end != 1))
        if bad.any():
            warnings.append(f"{f}: skipped {int(bad.sum())} queue samples with a bad queue id or end")
        t = _times(p, off, smp)
        df = pd.DataFrame({"queue_id": qid, "end_code": end, "t": t, "count": r["seq"][smp].astype(np.int64),
                           "blocked": (r["flags"][smp] & (QFLAG_BLOCKED | QFLAG_STAGE_BLOCKED)) != 0,
                           "target_period_s": r["iter"][smp].astype(np.int64) / 1e6,
                           "item_size": r["aux"][smp].astype(np.int64)})[~bad]
        for q in sorted(set(df["queue_id"].tolist()) | set(qinfo)):
            name = names.get(q, f"queue{q}")
            label = name if len(parsed) == 1 else f"{name}@{proc}"
            if label in names_seen:  # two queues of one name: keep them apart
                names_seen[label] += 1
                label = f"{label}#{names_seen[label]}"
            else:
                names_seen[label] = 1
            info = qinfo.get(q, {})
            queues.append({"queue": label, "process": proc, "queue_id": q, "capacity": info.get("capacity", -1),
                           "item_size": info.get("item_size", -1), "opened_t": info.get("opened_t", np.nan)})
            for e in (0, 1):
                s = df[(df["queue_id"] == q) & (df["end_code"] == e)].sort_values("t", kind="stable")
                if not len(s):
                    continue
                start = info.get("opened_t", np.nan)
                prev = np.r_[start, s["t"].to_numpy()[:-1]]
                period = s["t"].to_numpy() - prev
                if np.isnan(period[0]):
                    period[0] = s["target_period_s"].iloc[0]
                frames.append(pd.DataFrame({"run": run, "process": proc, "queue": label, "end": QUEUE_ENDS[e],
                                            "t": s["t"].to_numpy(), "period_s": period,
                                            "target_period_s": s["target_period_s"].to_numpy(),
                                            "count": s["count"].to_numpy(), "blocked": s["blocked"].to_numpy(),
                                            "item_size": s["item_size"].to_numpy()}))
    samples = conform(pd.concat(frames, ignore_index=True), QUEUE_SAMPLE_COLUMNS) if frames else \
        conform(pd.DataFrame(), QUEUE_SAMPLE_COLUMNS)
    return QueueSamples(samples=samples, queues=pd.DataFrame(queues, columns=QUEUE_COLUMNS),
                        meta={"run": run, "source": path, "format": "hbtrace",
                              "processes": [{"file": p["file"], "pid": p["header"]["pid"], "meta": p["meta"]}
                                            for p in parsed]},
                        warnings=warnings)


# --------------------------------------------------------------------------- probes


def probes_from_trace(path: str) -> ProbeStats:
    parsed, offsets, run = read_parsed(path)
    warnings: list[str] = []
    rows = []
    for index, p in enumerate(parsed):
        warnings.extend(p["warnings"])
        r, f = p["records"], p["file"]
        proc = _process_number(p, index)
        sel = r["kind"] == REC_PROBE
        if not sel.any():
            continue
        names = decode_names(r, NAME_PROBE, warnings, f)
        df = pd.DataFrame({"probe": r["seq"][sel].astype(np.int64), "thread": r["thread"][sel].astype(np.int64),
                           "thread_slot": r["loop"][sel].astype(np.int64),
                           "stat": r["flags"][sel].astype(np.int64),
                           "value": r["t_ns"][sel].astype(np.uint64)})
        badstat = ~df["stat"].isin(range(len(PSTATS)))
        if badstat.any():
            warnings.append(f"{f}: skipped {int(badstat.sum())} probe records with an unknown statistic")
            df = df[~badstat]
        if (df["value"] > np.uint64(1 << 62)).any():
            raise TraceFormatError(f"{f}: corrupted probe record (a value above 2^62)")
        df["value"] = df["value"].astype(np.int64)
        dup = df.duplicated(["probe", "thread_slot", "stat"], keep="first")
        if dup.any():
            warnings.append(f"{f}: {int(dup.sum())} probe statistics were written twice; the first is kept")
            df = df[~dup]
        wide = df.pivot_table(index=["probe", "thread_slot"], columns="stat", values="value", aggfunc="first")
        threads = df.groupby(["probe", "thread_slot"])["thread"].first()
        partial = wide.isna().any(axis=1)
        if partial.any():
            warnings.append(f"{f}: {int(partial.sum())} probe statistics of a thread are incomplete (the process died "
                            f"while writing them); left out")
        for (probe, slot), vals in wide[~partial].iterrows():
            name = names.get(int(probe))
            if name is None:
                site, label = "?", f"probe{probe}"
            else:
                site, _, label = name.partition("\t")
            rows.append({"process": proc, "probe": int(probe), "label": label, "site": site,
                         "thread": int(threads[(probe, slot)]), "thread_slot": int(slot),
                         **{s: int(vals[k]) for k, s in enumerate(PSTATS)}})
    per_thread = conform(pd.DataFrame(rows), PROBE_COLUMNS) if rows else conform(pd.DataFrame(), PROBE_COLUMNS)
    bad = (per_thread["count"] < 0) | (per_thread["min_ns"] > per_thread["max_ns"]) & (per_thread["count"] > 0)
    if bad.any():
        warnings.append(f"{path}: {int(bad.sum())} probe statistics are inconsistent (min above max); left out")
        per_thread = per_thread[~bad].reset_index(drop=True)
    meta = {"run": run, "source": path, "processes": [{"file": p["file"], "pid": p["header"]["pid"],
                                                      "clock": p["meta"].get("probe_clock", ""),
                                                      "tsc_hz": p["meta"].get("probe_tsc_hz", ""),
                                                      "meta": p["meta"]} for p in parsed]}
    return ProbeStats(per_thread=per_thread, meta=meta, warnings=warnings)


# --------------------------------------------------------------------------- status


def status_from_trace(path: str) -> StatusSamples:
    parsed, offsets, run = read_parsed(path)
    warnings: list[str] = []
    frames, machine = [], []
    for index, (p, off) in enumerate(zip(parsed, offsets)):
        warnings.extend(p["warnings"])
        r, f, m = p["records"], p["file"], p["meta"]
        proc = _process_number(p, index)
        sel = r["kind"] == REC_STATUS
        metric = r["flags"][sel].astype(np.int64)
        known = metric < len(STATUS_METRICS)
        if (~known).any():
            warnings.append(f"{f}: skipped {int((~known).sum())} status records of metrics this hbtool does not know")
        if sel.any():
            value = (r["aux"][sel].astype(np.int64) << 32) | r["seq"][sel].astype(np.int64)
            df = pd.DataFrame({"sample": r["loop"][sel].astype(np.int64), "t": _times(p, off, sel),
                               "metric": metric, "value": value})[known]
            df = df.drop_duplicates(["sample", "metric"], keep="first")
            t = df.groupby("sample")["t"].min()
            wide = df.pivot(index="sample", columns="metric", values="value")
            wide.columns = [STATUS_METRICS[int(c)] for c in wide.columns]
            wide = wide.reindex(columns=STATUS_METRICS).astype("float64")
            wide.insert(0, "t", t)
            wide.insert(0, "process", proc)
            frames.append(wide.reset_index().sort_values("t", kind="stable"))
        machine.append({"process": proc, "cores": _int(m.get("machine_cores")), "model": m.get("machine_model", ""),
                        "mem_kb": _int(m.get("machine_mem_kb")), "period_s": _float(m.get("status_period_s")),
                        "clk_tck": _int(m.get("status_clk_tck")), "host": m.get("host", "")})
    cols = ["process", "sample", "t"] + STATUS_METRICS
    samples = pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols)
    return StatusSamples(samples=samples, machine=machine, meta={"run": run, "source": path}, warnings=warnings)


def _int(v) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _float(v) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None
