"""Reader (and, for tests, writer) of the PMPI segment profiler's files (.hbp).

The layout is native_tracer/mpi/include/hbprof_format.h, mirrored in
docs/profile-format.md; tests/test_profile_reader.py checks these dtypes against
hbprof_layout's sizeof/offsetof.

* A run file (one per MPI run, written at MPI_Finalize): program-wide bins (at most
  512 per metric, sorted by value) and one 64-byte record per (rank, segment) holding
  the exact duration and a bin index per metric. It is aggregated per segment as it is
  read, rank by rank, without ever holding a value per (rank, segment, metric): a
  million segments of 64 ranks read in seconds and a few hundred MB.
* Per-rank files (what ranks leave when the run did not reach MPI_Finalize): a
  stream of 48-byte records with a log of bin changes, replayed backward (the
  format's rule) to give each segment's values.

Every length, count, offset and index is checked before use; a damaged or truncated
file gets one TraceFormatError naming what is wrong.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

from .. import config
from ..errors import TraceFormatError
from ..model import SegmentProfile, Segments
from .registry import MAGIC_HBPROF, ReadOptions, written_end

MAGIC = MAGIC_HBPROF
VERSION = 2
#: versions this reader takes: 1 lacks how each rank ended (end_how 0 everywhere)
VERSIONS = (1, 2)
ENDIAN_MARK = 0x01020304
HEADER_SIZE = 256
RANK_DATA_OFFSET = 4096
RANK_RECORD_SIZE = 48
RUN_RECORD_SIZE = 64
METRIC_ENTRY_SIZE = 40
RANK_ENTRY_SIZE = 128
BIN_ENTRY_SIZE = 16
MAX_METRICS = 22
RANK_BINS = 256
RUN_BINS = 512
NO_INDEX = 65535
FLAG_RANK_FILE, FLAG_RUN_FILE, FLAG_COMPLETE, FLAG_INJECT, FLAG_PRELOAD, FLAG_PARTIAL = 1, 2, 4, 8, 16, 32
FLAG_ORPHANED = 0x40
END_UNKNOWN, END_FINALIZED, END_ABORT, END_SIGNAL, END_EXIT, END_EXIT_NOW = 0, 1, 2, 3, 4, 5
COMP_SOURCES = {0: "nothing (profiling off)", 1: "instructions", 2: "cputime"}
REC_SEGMENT, REC_BIN_SET, REC_BIN_MERGE, REC_INJECT = 1, 2, 3, 4
RANK_OK, RANK_FAILED, RANK_INCOMPLETE, RANK_INJECT, RANK_ORPHANED = 1, 2, 4, 8, 16
#: most ranks accepted from a header (the rank table is read whole)
MAX_RANKS = 1 << 20
#: ranks of a run whose per-rank files may be missing (each is listed in the profile's rank ends)
MAX_MISSING_RANKS = 1 << 16


def header_dtype(o: str = "<") -> np.dtype:
    return np.dtype([
        ("magic", "S8"), ("version", o + "u4"), ("endian", o + "u4"), ("header_size", o + "u4"),
        ("flags", o + "u4"), ("rank", o + "i4"), ("nranks", o + "u4"), ("comp_source", o + "u4"),
        ("metric_count", o + "u4"), ("max_bins", o + "u4"), ("index_size", o + "u4"), ("record_size", o + "u4"),
        ("boundary_mask", o + "u4"), ("clock_id", o + "u4"), ("pid", o + "u4"), ("start_mono_ns", o + "u8"),
        ("start_real_ns", o + "i8"), ("run_ns", o + "u8"), ("segment_count", o + "u8"),
        ("metric_table_offset", o + "u8"), ("metric_entry_size", o + "u4"), ("rank_entry_size", o + "u4"),
        ("rank_table_offset", o + "u8"), ("bin_table_offset", o + "u8"), ("bin_entry_size", o + "u4"),
        ("inject_families", o + "u4"), ("data_offset", o + "u8"), ("data_length", o + "u8"),
        ("inject_mean_ns", o + "u8"), ("inject_sd_ns", o + "u8"), ("inject_prob", o + "f8"),
        ("inject_seed", o + "u8"), ("end_how", o + "u4"), ("end_detail", o + "i4"), ("host", "S64"),
    ])


def metric_dtype(o: str = "<") -> np.dtype:
    return np.dtype([("name", "S32"), ("unit", o + "u4"), ("bins_used", o + "u4")])


def rank_dtype(o: str = "<") -> np.dtype:
    return np.dtype([
        ("rank", o + "i4"), ("flags", o + "u4"), ("run_ns", o + "u8"), ("segment_count", o + "u8"),
        ("first_record", o + "u8"), ("start_real_ns", o + "i8"), ("start_mono_ns", o + "u8"), ("pid", o + "u4"),
        ("comp_source", o + "u4"), ("end_how", o + "u4"), ("end_detail", o + "i4"), ("host", "S64"),
    ])


def bin_dtype(o: str = "<") -> np.dtype:
    return np.dtype([("value", o + "f8"), ("count", o + "u8")])


def run_record_dtype(o: str = "<") -> np.dtype:
    return np.dtype([("duration_ns", o + "u8"), ("segment", o + "u4"), ("rank", o + "i4"),
                     ("bin", o + "u2", (MAX_METRICS,)), ("boundary", o + "u2"), ("flags", o + "u2")])


def segment_record_dtype(o: str = "<") -> np.dtype:
    return np.dtype([("duration_ns", o + "u8"), ("end_ns", o + "u8"), ("segment", o + "u4"),
                     ("bin", "u1", (MAX_METRICS,)), ("reserved", o + "u2"), ("kind", o + "u2"), ("flags", o + "u2")])


def bin_record_dtype(o: str = "<") -> np.dtype:
    return np.dtype([("value", o + "f8"), ("count", o + "u8"), ("segment", o + "u4"), ("metric", o + "u2"),
                     ("slot", o + "u2"), ("from_slot", o + "u2"), ("reserved0", o + "u2"), ("reserved", "u1", (16,)),
                     ("kind", o + "u2"), ("flags", o + "u2")])


def inject_record_dtype(o: str = "<") -> np.dtype:
    return np.dtype([("injected_ns", o + "u8"), ("segment", o + "u4"), ("delayed_calls", o + "u4"),
                     ("reserved", "u1", (28,)), ("kind", o + "u2"), ("flags", o + "u2")])


STRUCTS = {
    "hbp_file_header": header_dtype, "hbp_metric_entry": metric_dtype, "hbp_rank_entry": rank_dtype,
    "hbp_bin": bin_dtype, "hbp_run_record": run_record_dtype, "hbp_segment_record": segment_record_dtype,
    "hbp_bin_record": bin_record_dtype, "hbp_inject_record": inject_record_dtype,
}


# --------------------------------------------------------------------------- header


def _bad(path, what) -> TraceFormatError:
    return TraceFormatError(f"{path}: {what}")


def _header(buf, path: str, size: int) -> tuple[np.void, str]:
    if size < HEADER_SIZE:
        raise _bad(path, f"{size} bytes: too short for a profile header ({HEADER_SIZE} bytes; cut short?)")
    raw = bytes(buf[:HEADER_SIZE])
    if raw[:8] != MAGIC:
        raise _bad(path, "not an hbtool profile (bad magic)")
    mark = int.from_bytes(raw[12:16], "little")
    if mark == ENDIAN_MARK:
        o = "<"
    elif mark == int.from_bytes(ENDIAN_MARK.to_bytes(4, "little"), "big"):
        o = ">"
    else:
        raise _bad(path, f"corrupted header (endianness mark {mark:#x})")
    h = np.frombuffer(raw, dtype=header_dtype(o), count=1)[0]
    if int(h["version"]) not in VERSIONS:
        raise _bad(path, f"profile format version {int(h['version'])}; this hbtool reads versions "
                         f"{', '.join(map(str, VERSIONS))} (upgrade hbtool?)")
    if int(h["header_size"]) != HEADER_SIZE:
        raise _bad(path, f"corrupted header (header size {int(h['header_size'])})")
    m = int(h["metric_count"])
    if not 1 <= m <= MAX_METRICS:
        raise _bad(path, f"corrupted header ({m} metrics; at most {MAX_METRICS})")
    if int(h["metric_entry_size"]) != METRIC_ENTRY_SIZE:
        raise _bad(path, "corrupted header (metric entry size)")
    _span(path, size, int(h["metric_table_offset"]), m * METRIC_ENTRY_SIZE, "metric table")
    return h, o


def _span(path, size, offset, length, what) -> None:
    if offset < HEADER_SIZE or length < 0 or offset + length > size:
        raise _bad(path, f"the {what} ({length} bytes at {offset}) lies outside the file's {size} bytes "
                         f"(truncated or corrupted)")


def _metric_names(buf, h, o, path) -> tuple[list[str], np.ndarray]:
    m = int(h["metric_count"])
    t = np.frombuffer(buf, dtype=metric_dtype(o), count=m, offset=int(h["metric_table_offset"]))
    names = []
    for raw in t["name"]:
        name = raw.split(b"\0", 1)[0].decode("ascii", "replace")
        if not re.fullmatch(r"[A-Za-z0-9_]{1,31}", name):
            raise _bad(path, f"corrupted metric table (name {name!r})")
        names.append(name)
    if len(set(names)) != len(names):
        raise _bad(path, "corrupted metric table (a metric appears twice)")
    return names, t["bins_used"].astype(np.int64)


def _host(h) -> str:
    return bytes(h["host"]).split(b"\0", 1)[0].decode("utf-8", "replace")


# --------------------------------------------------------------------------- run files


def read_run_file(path: str, buf, size: int, h, o: str, name: str) -> SegmentProfile:
    m = int(h["metric_count"])
    names, bins_used = _metric_names(buf, h, o, path)
    if int(h["record_size"]) != RUN_RECORD_SIZE or int(h["index_size"]) != 2 or \
            int(h["bin_entry_size"]) != BIN_ENTRY_SIZE or int(h["rank_entry_size"]) != RANK_ENTRY_SIZE:
        raise _bad(path, "corrupted header (record, index, bin or rank entry size of a run file)")
    max_bins = int(h["max_bins"])
    if not 1 <= max_bins <= RUN_BINS:
        raise _bad(path, f"corrupted header ({max_bins} bins per metric; at most {RUN_BINS})")
    if (bins_used > max_bins).any():
        raise _bad(path, "corrupted metric table (more bins in use than the table holds)")
    nranks = int(h["nranks"])
    if not 1 <= nranks <= MAX_RANKS:
        raise _bad(path, f"corrupted header ({nranks} ranks)")
    _span(path, size, int(h["rank_table_offset"]), nranks * RANK_ENTRY_SIZE, "rank table")
    _span(path, size, int(h["bin_table_offset"]), m * max_bins * BIN_ENTRY_SIZE, "bin table")
    nrec = int(h["segment_count"])
    if nrec > config.MAX_PROFILE_ROWS:
        raise _bad(path, f"{nrec} segment records, more than the {config.MAX_PROFILE_ROWS} hbtool reads")
    if int(h["data_length"]) != nrec * RUN_RECORD_SIZE:
        raise _bad(path, "corrupted header (data length does not match the segment count)")
    _span(path, size, int(h["data_offset"]), nrec * RUN_RECORD_SIZE, "segment records")
    ranks = np.frombuffer(buf, dtype=rank_dtype(o), count=nranks, offset=int(h["rank_table_offset"]))
    bins = np.frombuffer(buf, dtype=bin_dtype(o), count=m * max_bins,
                         offset=int(h["bin_table_offset"])).reshape(m, max_bins)
    values = [bins["value"][j, : bins_used[j]].astype(np.float64) for j in range(m)]
    for j in range(m):
        if not np.isfinite(values[j]).all():
            raise _bad(path, f"corrupted bin table (metric {names[j]} has a value that is not a number)")
    warnings = []
    # the rank table: each rank's records, in segment order
    counts = ranks["segment_count"].astype(np.int64)
    firsts = ranks["first_record"].astype(np.int64)
    if (ranks["rank"] < 0).any() or (ranks["rank"] >= nranks).any() or len(np.unique(ranks["rank"])) != nranks:
        raise _bad(path, "corrupted rank table (rank numbers)")
    if (counts < 0).any() or (firsts < 0).any() or (firsts + counts > nrec).any():
        raise _bad(path, "corrupted rank table (records outside the data section)")
    S = int(counts.max()) if nranks else 0
    if S == 0:
        raise _bad(path, "the profile holds no segments")
    fidx = list(range(1, m))
    dur_max = np.zeros(S, dtype=np.int64)
    feat = np.zeros((len(fidx), S))                                   # feature-major: rows are contiguous
    comp_idx = np.full((nranks, S), NO_INDEX, dtype=np.uint16)        # rank-major, for the same reason
    present = np.zeros(S, dtype=np.int64)
    from ..kernels import aggregate_run_records

    vals = np.zeros((m, max(int(bins_used.max()), 1)))
    for j in range(m):
        vals[j, : len(values[j])] = values[j]
    do = int(h["data_offset"])
    swap = o != ("<" if np.little_endian else ">")
    with open(path, "rb") as fh:
        for k in range(nranks):
            r = int(ranks["rank"][k])
            fl = int(ranks["flags"][k])
            if fl & RANK_FAILED:
                warnings.append(f"{path}: rank {r}: the profiler failed on this rank; it has no segments")
                continue
            c, f0 = int(counts[k]), int(firsts[k])
            if c == 0:
                continue
            fh.seek(do + f0 * RUN_RECORD_SIZE)
            raw = np.fromfile(fh, dtype=np.uint64, count=c * 8)   # one sequential read of this rank's records
            if raw.size != c * 8:
                raise _bad(path, "the segment records end early (truncated)")
            if swap:
                raw = np.frombuffer(raw.tobytes(), dtype=run_record_dtype(o)).astype(run_record_dtype("=")).view(
                    np.uint64)
            u64 = raw.reshape(c, 8)
            u32 = raw.view(np.uint32).reshape(c, 16)
            u16 = raw.view(np.uint16).reshape(c, 32)
            invalid = int(c - np.count_nonzero(u16[:, 31] & 1))
            if invalid:
                if not fl & RANK_INCOMPLETE:
                    raise _bad(path, f"rank {r}: records without data in a rank not marked incomplete")
                warnings.append(f"{path}: rank {r}: {invalid} of its segment records did not arrive")
            cidx = np.full(c, NO_INDEX, dtype=np.uint16)
            bad = aggregate_run_records(u64, u32, u16, r, m, bins_used, vals, dur_max[:c], cidx, feat[:, :c],
                                        present[:c])
            if bad >= 0:
                i, j = divmod(bad, 64)
                if j == 0:
                    raise _bad(path, f"rank {r}: segment records out of order, or carrying another rank's number")
                raise _bad(path, f"rank {r}, segment {i}: bin index {int(u16[i, 8 + j - 1])} of metric {names[j - 1]} "
                                 f"does not match the bins ({int(bins_used[j - 1])} in use): the profile is corrupted")
            comp_idx[k, :c] = cidx
    have = present > 0
    if not have.all():
        warnings.append(f"{path}: {int((~have).sum())} segments have no record from any rank: left out")
    comp, least = _median_from_indices(np.ascontiguousarray(comp_idx.T), present, values[0])
    del comp_idx
    segs = Segments(segment=np.flatnonzero(have), computation=comp[have], duration_ns=dur_max[have],
                    features=feat.T[have], processes=present[have])
    src = COMP_SOURCES.get(int(h["comp_source"]), f"source {int(h['comp_source'])}")
    meta = _meta(h, path, "run")
    ends = [rank_end(int(e["rank"]), int(e["end_how"]) if not int(e["flags"]) & RANK_FAILED else END_UNKNOWN,
                     int(e["end_detail"]), bool(int(e["flags"]) & RANK_OK), bool(int(e["flags"]) & RANK_ORPHANED),
                     int(e["run_ns"]), int(h["version"]), int(e["pid"])) for e in ranks]
    meta["rank_ends"] = sorted(ends, key=lambda e: e["rank"])
    meta["failure"] = run_failure(meta["rank_ends"])
    meta["work_least"] = float(np.nansum(least[have]))   # the interference analyzer's work of the run
    if int(h["flags"]) & FLAG_PARTIAL:
        warnings.append(f"{path}: some ranks' records are missing (the profile says it is partial)")
    return SegmentProfile(
        name=name, rank=np.empty(0, np.int64), segment=np.empty(0, np.int64), duration_ns=np.empty(0, np.int64),
        computation=np.empty(0), features=np.zeros((0, len(fidx))), feature_names=names[1:],
        run_time_ns=int(h["run_ns"]) or None, computation_source=src, warnings=warnings,
        meta=meta, aggregated=segs, nprocesses=int(nranks - sum(1 for w in warnings if "failed" in w)))


def _median_from_indices(idx: np.ndarray, present: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the median and the least of values[idx] over the present entries (NO_INDEX
    sorts last).

    Bins are sorted by value, so the median index is the index of the median."""
    s = np.sort(idx, axis=1, kind="stable")
    c = np.maximum(present, 1)
    lo = s[np.arange(len(s)), (c - 1) // 2]
    hi = s[np.arange(len(s)), c // 2]
    v = np.append(values, np.nan)
    lo = np.where(lo == NO_INDEX, len(values), np.minimum(lo, len(values)))
    hi = np.where(hi == NO_INDEX, len(values), np.minimum(hi, len(values)))
    first = np.where(s[:, 0] == NO_INDEX, len(values), np.minimum(s[:, 0], len(values)))
    return (v[lo] + v[hi]) / 2, v[first]


def _meta(h, path, kind) -> dict:
    return {"format": f"hbprof {kind} file", "source": str(path), "host": _host(h), "pid": int(h["pid"]),
            "nranks": int(h["nranks"]), "boundary_mask": int(h["boundary_mask"]),
            "complete": bool(int(h["flags"]) & FLAG_COMPLETE),
            "injector": ({"mean_ns": int(h["inject_mean_ns"]), "sd_ns": int(h["inject_sd_ns"]),
                          "probability": float(h["inject_prob"]), "seed": int(h["inject_seed"]),
                          "families": int(h["inject_families"])} if int(h["flags"]) & FLAG_INJECT else None)}


# --------------------------------------------------------------------------- how ranks ended

_SIGNALS = {1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL",
            11: "SIGSEGV", 13: "SIGPIPE", 15: "SIGTERM", 24: "SIGXCPU"}
#: signals a launcher sends to end the ranks that are left when one failed
_FOLLOW_UP = {"SIGTERM", "SIGKILL", "SIGINT", "SIGHUP", "SIGPIPE"}


def rank_end(rank: int, how: int, detail: int, complete: bool, orphaned: bool, run_ns: int, version: int,
             pid: int = 0) -> dict:
    """How one rank ended, decoded from its header or rank entry (format version 2; a
    version 1 file says only whether the rank reached MPI_Finalize)."""
    if how == END_FINALIZED or (complete and how not in (END_ABORT, END_SIGNAL, END_EXIT, END_EXIT_NOW)):
        # (a complete file or an OK rank entry reached MPI_Finalize, whatever unknown code it holds)
        kind, text = "finalized", "reached MPI_Finalize"
    elif how == END_ABORT:
        kind, text = "abort", f"called MPI_Abort (error code {detail})"
    elif how == END_SIGNAL:
        sig = _SIGNALS.get(detail, f"signal {detail}")
        kind, text = "signal", f"killed by {sig}"
    elif how == END_EXIT:
        kind, text = "exit", f"exited with status {detail} without calling MPI_Finalize"
    elif how == END_EXIT_NOW:
        kind, text = "exit", f"called _exit({detail}) without calling MPI_Finalize"
    elif version < 2:
        kind, text = "unknown", "did not reach MPI_Finalize (a version 1 profile does not say how it ended)"
    else:
        kind, text = "unknown", "ended without a trace (SIGKILL or _exit), or is still running"
    if orphaned and kind != "finalized":
        text += ", after mpirun had died"
    elif orphaned:
        text += ", orphaned (mpirun had died)"
    return {"rank": rank, "pid": pid, "how": kind, "detail": detail, "ended": text,
            "end_s": run_ns / 1e9 if how not in (END_UNKNOWN,) and run_ns else None,
            "complete": kind == "finalized", "orphaned": orphaned}


def _ranks(rs: list[int]) -> str:
    """rank 3, or ranks 0, 2-7 (runs of consecutive ranks as ranges: a run of a million
    ranks of which one left a file says so in a few words)."""
    spans: list[list[int]] = []
    for r in rs:
        if spans and r == spans[-1][1] + 1:
            spans[-1][1] = r
        else:
            spans.append([r, r])
    text = ", ".join(f"{a}" if a == b else f"{a}, {b}" if b == a + 1 else f"{a}-{b}" for a, b in spans)
    return ("rank " if len(rs) == 1 else "ranks ") + text


def run_failure(ends: list[dict]) -> str | None:
    """One line saying how the run failed (None when every rank reached MPI_Finalize under a
    live launcher): the rank that failed first and how, then what became of the others."""
    bad = [e for e in ends if not e["complete"]]
    orphans = [e["rank"] for e in ends if e["orphaned"]]
    if orphans:   # the launcher went first: what became of every rank after it
        groups: dict[str, list[int]] = {}
        for e in ends:
            groups.setdefault(e["ended"].replace(", after mpirun had died", "").replace(
                ", orphaned (mpirun had died)", ""), []).append(e["rank"])
        return "mpirun (the launcher) died during the run; then " + "; ".join(
            f"{_ranks(rs)}: {text}" for text, rs in groups.items())
    if not bad:
        return None

    def first_key(e):
        # what a rank did itself (abort, a crash, exit) first; then a rank that left no trace
        # (SIGKILL is what leaves none); then the signals a launcher sends to the rest
        follow = e["how"] == "signal" and _SIGNALS.get(e["detail"]) in _FOLLOW_UP
        order = 2 if follow else 1 if e["how"] in ("unknown", "no file") else 0
        return (order, e["end_s"] if e["end_s"] is not None else 1e300, e["rank"])

    culprit = min(bad, key=first_key)
    rest: dict[str, list[int]] = {}
    if first_key(culprit)[0] == 1 and sum(first_key(e)[0] == 1 for e in bad) > 1:
        # several ranks left no trace and none did anything else first: which went first
        # cannot be told
        first = [e for e in bad if first_key(e)[0] == 1]
        line = f"{_ranks([e['rank'] for e in first])}: ended without a trace (SIGKILL or _exit; which first " \
               f"cannot be told)"
        culprits = {e["rank"] for e in first}
    else:
        when = f" after {culprit['end_s']:.3f} s" if culprit["end_s"] is not None else ""
        line = f"rank {culprit['rank']}: {culprit['ended']}{when}"
        culprits = {culprit["rank"]}
    for e in ends:
        if e["rank"] not in culprits:
            rest.setdefault(e["ended"], []).append(e["rank"])
    for text, rs in rest.items():
        line += f"; {_ranks(rs)}: {text}"
    return line


# --------------------------------------------------------------------------- per-rank files


def read_rank_stream(path: str) -> dict:
    """One per-rank file: its header and every segment's duration and metric values."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        # records past a hole at the end are zeros: where the records end anyway (kind 0)
        buf = f.read(max(written_end(f, size), min(size, HEADER_SIZE)))
    h, o = _header(buf, path, size)
    if not int(h["flags"]) & FLAG_RANK_FILE:
        raise _bad(path, "not a per-rank profile file")
    m = int(h["metric_count"])
    names, _ = _metric_names(buf, h, o, path)
    if int(h["record_size"]) != RANK_RECORD_SIZE or int(h["index_size"]) != 1 or int(h["max_bins"]) != RANK_BINS:
        raise _bad(path, "corrupted header (record size, index size or bins of a per-rank file)")
    if not 0 <= int(h["rank"]) < int(h["nranks"]) <= MAX_RANKS:
        raise _bad(path, f"corrupted header (rank {int(h['rank'])} of {int(h['nranks'])}; at most {MAX_RANKS} ranks)")
    do = int(h["data_offset"])
    if do < HEADER_SIZE or do > size:
        raise _bad(path, "corrupted header (data offset outside the file)")
    warnings = []
    complete = bool(int(h["flags"]) & FLAG_COMPLETE)
    if complete:
        length = int(h["data_length"])
        if length % RANK_RECORD_SIZE or do + length > size:
            raise _bad(path, f"the records ({length} bytes at {do}) lie outside the file's {size} bytes (truncated)")
    else:
        length = (size - do) // RANK_RECORD_SIZE * RANK_RECORD_SIZE
        pass   # how it ended: "end" below; the profile's meta["failure"] says it in one line
    n = length // RANK_RECORD_SIZE
    if n > config.MAX_PROFILE_ROWS:
        raise _bad(path, f"{n} records, more than the {config.MAX_PROFILE_ROWS} hbtool reads")
    n = min(n, max(len(buf) - do, 0) // RANK_RECORD_SIZE)
    raw = np.frombuffer(buf, dtype=np.uint8, count=n * RANK_RECORD_SIZE, offset=do)
    segr = raw.view(segment_record_dtype(o))
    kind = segr["kind"]
    zero = np.flatnonzero(kind == 0)
    if len(zero):
        n = int(zero[0])
        segr = segr[:n]
        kind = kind[:n]
    binr = raw[: n * RANK_RECORD_SIZE].view(bin_record_dtype(o))
    injr = raw[: n * RANK_RECORD_SIZE].view(inject_record_dtype(o))
    isbin = (kind == REC_BIN_SET) | (kind == REC_BIN_MERGE)
    if isbin.any():
        b = binr[isbin]
        if (b["metric"] >= m).any() or (b["slot"] >= RANK_BINS).any() or \
                ((b["kind"] == REC_BIN_MERGE) & (b["from_slot"] >= RANK_BINS)).any():
            raise _bad(path, "a bin record's metric or slot is out of range: the profile is corrupted")
        if not np.isfinite(b["value"]).all():
            raise _bad(path, "a bin record's value is not a number: the profile is corrupted")
    isseg = kind == REC_SEGMENT
    from ..kernels import replay_bins

    vals = replay_bins(kind.astype(np.int64), binr["metric"].astype(np.int64), binr["slot"].astype(np.int64),
                       binr["from_slot"].astype(np.int64), binr["value"].astype(np.float64),
                       np.ascontiguousarray(segr["bin"][:, :m]).astype(np.int64), m, RANK_BINS)
    inj = injr[kind == REC_INJECT]
    end = rank_end(int(h["rank"]), int(h["end_how"]), int(h["end_detail"]), complete,
                   bool(int(h["flags"]) & FLAG_ORPHANED), int(h["run_ns"]), int(h["version"]), int(h["pid"]))
    return {"header": h, "names": names, "rank": int(h["rank"]), "end": end,
            "segment": segr["segment"][isseg].astype(np.int64),
            "duration_ns": segr["duration_ns"][isseg].astype(np.int64), "values": vals,
            "injected": {int(s): (int(ns), int(c)) for s, ns, c in zip(inj["segment"], inj["injected_ns"],
                                                                      inj["delayed_calls"])},
            "complete": complete, "warnings": warnings}


def read_rank_files(paths: list[str], name: str) -> SegmentProfile:
    parts = [read_rank_stream(p) for p in paths]
    names = parts[0]["names"]
    for p, pa in zip(paths, parts):
        if pa["names"] != names:
            raise _bad(p, "its metrics differ from the other ranks' files: not the same run")
    ranks = [pa["rank"] for pa in parts]
    if len(set(ranks)) != len(ranks):
        raise TraceFormatError(f"{name}: two files for the same rank: files of different runs mixed?")
    rank = np.concatenate([np.full(len(pa["segment"]), pa["rank"], dtype=np.int64) for pa in parts])
    seg = np.concatenate([pa["segment"] for pa in parts])
    dur = np.concatenate([pa["duration_ns"] for pa in parts])
    vals = np.concatenate([pa["values"] for pa in parts]) if len(seg) else np.zeros((0, len(names)))
    if not len(seg):
        raise TraceFormatError(f"{name}: the per-rank files hold no segments")
    warnings = [w for pa in parts for w in pa["warnings"]]
    h = parts[0]["header"]
    nranks = int(h["nranks"])
    ends = [pa["end"] for pa in parts]
    have = {e["rank"] for e in ends}
    if nranks - len(have) > MAX_MISSING_RANKS:  # each is listed: a corrupted count must not fill memory
        raise TraceFormatError(f"{name}: the files say the run had {nranks} ranks, and {nranks - len(have)} of them "
                               f"left no file: give the run file, or every rank's file")
    ends += [{"rank": r, "pid": 0, "how": "no file", "detail": 0, "ended": "left no profile file", "end_s": None,
              "complete": False, "orphaned": False} for r in range(nranks) if r not in have]
    ends.sort(key=lambda e: e["rank"])
    meta = _meta(h, paths[0], "per-rank")
    meta["rank_ends"] = ends
    meta["failure"] = run_failure(ends)
    src = COMP_SOURCES.get(int(h["comp_source"]), "unknown")
    return SegmentProfile(name=name, rank=rank, segment=seg, duration_ns=dur, computation=vals[:, 0],
                          features=vals[:, 1:], feature_names=names[1:], run_time_ns=None,
                          computation_source=src, warnings=warnings, meta=meta)


# --------------------------------------------------------------------------- entry points


RANK_FILE_RE = re.compile(r"-r\d+$")


def read_hbprof(path: str, name: str | None = None) -> SegmentProfile:
    p = Path(path)
    size = p.stat().st_size
    name = name or p.stem
    with open(p, "rb") as f:
        head = f.read(HEADER_SIZE)
    h, o = _header(head, str(p), size)
    flags = int(h["flags"])
    if flags & FLAG_RANK_FILE:
        return read_rank_files([str(p)], name)
    if not flags & FLAG_RUN_FILE:
        raise _bad(p, "corrupted header (neither a run file nor a per-rank file)")
    buf = np.memmap(p, dtype=np.uint8, mode="r") if size else b""
    return read_run_file(str(p), buf, size, h, o, name)


def read_profile_path(path: Path, options: ReadOptions) -> SegmentProfile:
    """The registry's reader: a run or per-rank profile file, or a directory of them."""
    return read_profile_dir(os.fspath(path)) if path.is_dir() else read_hbprof(os.fspath(path))


def read_profile_dir(path: str) -> SegmentProfile:
    d = Path(path)
    files = sorted(f for f in d.glob("*.hbp") if f.is_file())
    runs = [f for f in files if not RANK_FILE_RE.search(f.stem)]
    ranks = [f for f in files if RANK_FILE_RE.search(f.stem)]
    if len(runs) == 1:
        return read_hbprof(str(runs[0]), d.name)
    if len(runs) > 1:
        raise TraceFormatError(f"{path}: {len(runs)} run profiles in one directory: give the one to analyse")
    if ranks:
        return read_rank_files([str(f) for f in ranks], d.name)
    raise TraceFormatError(f"{path}: no profile (.hbp) in this directory")


def read_injection_truth(run_file: str) -> dict[tuple[int, int], tuple[int, int]]:
    """(rank, segment) -> (injected ns, delayed calls) from <run file>.inject.csv (empty if none)."""
    import pandas as pd

    p = Path(str(run_file) + ".inject.csv")
    if not p.exists():
        return {}
    df = pd.read_csv(p)
    return {(int(r), int(s)): (int(ns), int(c)) for r, s, ns, c in
            zip(df["rank"], df["segment"], df["injected_ns"], df["delayed_calls"])}


# --------------------------------------------------------------------------- writing (tests, tools)


def write_run_file(path: str, rank: np.ndarray, segment: np.ndarray, duration_ns: np.ndarray,
                   values: np.ndarray, names: list[str], run_ns: int = 0, comp_source: int = 1) -> None:
    """A run file from exact values: each metric's distinct values become its bins (at most 512)."""
    m = len(names)
    nranks = int(rank.max()) + 1
    order = np.lexsort((segment, rank))
    rank, segment, duration_ns, values = rank[order], segment[order], duration_ns[order], values[order]
    bins = np.zeros((m, RUN_BINS), dtype=bin_dtype())
    idx = np.zeros((len(rank), MAX_METRICS), dtype=np.uint16)
    used = []
    for j in range(m):
        u, inv, cnt = np.unique(values[:, j], return_inverse=True, return_counts=True)
        if len(u) > RUN_BINS:
            raise ValueError(f"metric {names[j]}: {len(u)} distinct values, more than {RUN_BINS} bins")
        bins["value"][j, : len(u)] = u
        bins["count"][j, : len(u)] = cnt
        idx[:, j] = inv.ravel()
        used.append(len(u))
    rt = np.zeros(nranks, dtype=rank_dtype())
    for r in range(nranks):
        sel = np.flatnonzero(rank == r)
        rt[r] = (r, RANK_OK, run_ns, len(sel), sel[0] if len(sel) else 0, 0, 0, 0, comp_source, END_FINALIZED, 0,
                 b"test")
    recs = np.zeros(len(rank), dtype=run_record_dtype())
    recs["duration_ns"] = duration_ns
    recs["segment"] = segment
    recs["rank"] = rank
    recs["bin"] = idx
    recs["boundary"] = 4
    recs["flags"] = 1
    with open(path, "wb") as f:
        data = write_run_file_head(f, names, used, rt, bins, run_ns, len(recs), comp_source)
        f.seek(data)
        f.write(recs.tobytes())


def write_run_file_head(f, names: list[str], used: list[int], ranks: np.ndarray, bins: np.ndarray, run_ns: int,
                        segment_count: int, comp_source: int) -> int:
    """Everything of a run file but its records (header, metric, rank and bin tables) into
    the open file `f`; returns the offset where the `segment_count` records go."""
    m, nranks = len(names), len(ranks)
    mt = np.zeros(m, dtype=metric_dtype())
    for j, n in enumerate(names):
        mt[j] = (n.encode(), 0, used[j])
    mto = HEADER_SIZE
    rto = (mto + m * METRIC_ENTRY_SIZE + 63) // 64 * 64
    bto = (rto + nranks * RANK_ENTRY_SIZE + 63) // 64 * 64
    do = (bto + m * RUN_BINS * BIN_ENTRY_SIZE + 4095) // 4096 * 4096
    h = np.zeros(1, dtype=header_dtype())
    h[0]["magic"] = MAGIC
    for k, v in dict(version=VERSION, endian=ENDIAN_MARK, header_size=HEADER_SIZE,
                     flags=FLAG_RUN_FILE | FLAG_COMPLETE, rank=-1, nranks=nranks, comp_source=comp_source,
                     metric_count=m, max_bins=RUN_BINS, index_size=2, record_size=RUN_RECORD_SIZE,
                     boundary_mask=0x3FE, clock_id=1, pid=os.getpid(), run_ns=run_ns, segment_count=segment_count,
                     metric_table_offset=mto, metric_entry_size=METRIC_ENTRY_SIZE, rank_entry_size=RANK_ENTRY_SIZE,
                     rank_table_offset=rto, bin_table_offset=bto, bin_entry_size=BIN_ENTRY_SIZE, data_offset=do,
                     data_length=segment_count * RUN_RECORD_SIZE).items():
        h[0][k] = v
    h[0]["host"] = b"test"
    f.seek(0)
    f.write(h.tobytes())
    f.write(mt.tobytes())
    f.seek(rto)
    f.write(ranks.tobytes())
    f.seek(bto)
    f.write(bins.tobytes())
    return do
