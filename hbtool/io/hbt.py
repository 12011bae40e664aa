"""Reader and writer of the tracer's binary format (native_tracer/include/hbtrace_format.h).

The C header is the source of truth; the numpy dtypes below mirror it and
tests/test_layout.py checks them against sizeof/offsetof from a C program.
Every length and offset read from a file is checked against the file's size
before use: trace files are untrusted input.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import numpy as np
import pandas as pd

from .. import config
from ..errors import TraceFormatError
from ..model import BEHAVIORS, MONITOR_MODES, HeartbeatTrace
from ..model.heartbeats import construct_label, joined_tables
from .registry import MAGIC_HBTRACE, ReadOptions, head, written_end

MAGIC = MAGIC_HBTRACE
VERSION = 2
#: versions this reader reads: 1 (every chunk chunk_size bytes), 2 (chunks of whole units)
READ_VERSIONS = (1, 2)
UNIT_SIZE = 256
ENDIAN_MARK = 0x01020304
HEADER_SIZE = 128
SLOT_SIZE = 32
CHUNK_MAGIC = 0x4B434248
META_CAPACITY = 3968
DATA_OFFSET = 4096
CHUNK_SIZE = 65536
SUFFIX = ".hbt"

CLOCKS = {1: "CLOCK_MONOTONIC", 4: "CLOCK_MONOTONIC_RAW", 255: "synthetic (converted)"}
FLAG_PRELOAD = 0x1
FLAG_CONVERTED = 0x2
#: lost_why bits of the header: why the tracer dropped records
LOST_REASONS = {
    0x1: "the file size cap (HBTRACE_MAX_MB) was reached",
    0x2: "the disk was full",
    0x4: "the file size limit was reached",
    0x8: "the file could not grow or be mapped into memory",
    0x10: "the tracer's lock was held too long",
}

REC_BEAT = 1
REC_NAME = 14
REC_PROBE = 15  # t_ns holds a value, not a time
REC_WAIT = 17
REC_CPU = 18
#: flags of a cpu record beyond its source: HBT_CPU_QUEUED set when bits 4..14 hold the
#: share of the gap the thread waited for a CPU, in 1/CPU_QUEUED_MAX (hbtrace_format.h)
CPU_QUEUED = 0x8000
CPU_QUEUED_SHIFT = 4
CPU_QUEUED_MAX = 2047
REC_MEMORY = 19
REC_SCHED = 20
#: scope of a memory record (flags bits 4..7)
MEMORY_SCOPES = {0: "thread", 1: "process", 2: "owned"}
#: largest code _dense maps with a table (construct ids are at most a few thousand)
DENSE_MAX = 1 << 20
#: a beat's or wait's source: flags & 15 (docs/formats.md)
SOURCES = {0: "api", 1: "openmp", 2: "mpi"}
#: a wait's synchronisation: flags >> 4
SYNC_KINDS = {1: "barrier", 2: "taskwait", 3: "critical", 4: "ordered", 5: "collective", 6: "outside",
              7: "flag"}
#: name spaces of NAME records
NAME_QUEUE = 1
NAME_PROBE = 2
NAME_CONSTRUCT = 3
NAME_LAST = 0x8000
NAME_FRAGMENT_BYTES = 24
MAX_NAME_FRAGMENTS = 64  # names are at most 255 bytes; a crafted file gets no more than this
REC_KINDS = {
    2: "thread_start",
    3: "thread_end",
    4: "init",
    5: "finished",
    6: "process_exit",
    7: "signal",
    8: "lost",
}
KIND_CODES = {v: k for k, v in REC_KINDS.items()}
#: records of the online behavior monitor: read into HeartbeatTrace.monitor
MONITOR_KINDS = {9: "behavior", 10: "monitor", 11: "adjust"}


def header_dtype(order: str = "<") -> np.dtype:
    return np.dtype(
        [
            ("magic", "S8"),
            ("version", order + "u4"),
            ("endian", order + "u4"),
            ("header_size", order + "u4"),
            ("slot_size", order + "u4"),
            ("chunk_size", order + "u4"),
            ("flags", order + "u4"),
            ("meta_offset", order + "u4"),
            ("meta_length", order + "u4"),
            ("meta_capacity", order + "u4"),
            ("clock_id", order + "u4"),
            ("data_offset", order + "u8"),
            ("data_length", order + "u8"),
            ("start_mono_ns", order + "u8"),
            ("start_real_ns", order + "i8"),
            ("clock_res_ns", order + "u4"),
            ("pid", order + "u4"),
            ("rank", order + "i4"),
            ("unit_size", order + "u4"),
            ("lost_records", order + "u8"),
            ("lost_why", order + "u4"),
            ("lost_errno", order + "u4"),
            ("reserved", order + "u8", (2,)),
        ]
    )


def chunk_header_dtype(order: str = "<") -> np.dtype:
    return np.dtype(
        [
            ("os_tid", order + "u8"),
            ("thread_slot", order + "u4"),
            ("chunk_seq", order + "u4"),
            ("user_thread", order + "i4"),
            ("reserved", order + "u4"),
            ("capacity", order + "u4"),
            ("magic", order + "u4"),
        ]
    )


def record_dtype(order: str = "<") -> np.dtype:
    return np.dtype(
        [
            ("t_ns", order + "u8"),
            ("seq", order + "u4"),
            ("thread", order + "i4"),
            ("loop", order + "i4"),
            ("iter", order + "i4"),
            ("aux", order + "u4"),
            ("kind", order + "u2"),
            ("flags", order + "u2"),
        ]
    )


def is_hbt(head: bytes) -> bool:
    return head[:8] == MAGIC


# --------------------------------------------------------------------------- reading


def _parse_header(buf, path: str, size: int | None = None) -> tuple[np.void, str]:
    """The header of a file of `size` bytes (default len(buf)) whose first bytes are `buf`."""
    size = len(buf) if size is None else size
    if len(buf) < min(size, HEADER_SIZE):
        raise TraceFormatError(f"{path}: the file shrank while being read")
    if size < HEADER_SIZE:
        raise TraceFormatError(
            f"{path}: only {size} bytes, shorter than the {HEADER_SIZE}-byte header of an hbtrace file"
        )
    if bytes(buf[:8]) != MAGIC:
        raise TraceFormatError(f"{path}: not an hbtrace file (bad magic number)")
    mark = bytes(buf[12:16])
    if mark == ENDIAN_MARK.to_bytes(4, "little"):
        order = "<"
    elif mark == ENDIAN_MARK.to_bytes(4, "big"):
        order = ">"
    else:
        raise TraceFormatError(f"{path}: corrupted header (bad endianness marker {mark.hex()})")
    hdr = np.frombuffer(buf, dtype=header_dtype(order), count=1)[0]
    if int(hdr["version"]) not in READ_VERSIONS:
        raise TraceFormatError(
            f"{path}: hbtrace format version {int(hdr['version'])}; this hbtool reads versions "
            f"{' and '.join(map(str, READ_VERSIONS))}: upgrade hbtool"
        )
    if int(hdr["header_size"]) != HEADER_SIZE or int(hdr["slot_size"]) != SLOT_SIZE:
        raise TraceFormatError(
            f"{path}: corrupted header (header size {int(hdr['header_size'])}, "
            f"slot size {int(hdr['slot_size'])}; expected {HEADER_SIZE} and {SLOT_SIZE})"
        )
    chunk = int(hdr["chunk_size"])
    if chunk < 4096 or chunk % 4096 or chunk > config.MAX_CHUNK_BYTES:
        raise TraceFormatError(f"{path}: corrupted header (chunk size {chunk})")
    unit = _unit_size(hdr)
    if unit < 2 * SLOT_SIZE or unit % SLOT_SIZE or chunk % unit:
        raise TraceFormatError(f"{path}: corrupted header (unit size {unit}, chunk size {chunk})")
    mo, ml, mc = int(hdr["meta_offset"]), int(hdr["meta_length"]), int(hdr["meta_capacity"])
    do = int(hdr["data_offset"])
    if mo < HEADER_SIZE or ml > mc or mc > config.MAX_METADATA_BYTES or mo + mc > do:
        raise TraceFormatError(
            f"{path}: corrupted header (metadata offset {mo}, length {ml}, capacity {mc}, "
            f"data offset {do})"
        )
    if mo + ml > size:
        raise TraceFormatError(
            f"{path}: metadata section (offset {mo}, {ml} bytes) runs past the end of the "
            f"file ({size} bytes): the file is corrupted or cut short"
        )
    if int(hdr["start_mono_ns"]) >= 1 << 62:
        raise TraceFormatError(f"{path}: corrupted header (start time {int(hdr['start_mono_ns'])} ns)")
    if do > size:
        raise TraceFormatError(
            f"{path}: data section starts at byte {do}, past the end of the file ({size} bytes)"
        )
    return hdr, order


def _unit_size(hdr) -> int:
    """Bytes of the units chunks are made of: version 1 had one chunk size, its unit."""
    return int(hdr["unit_size"]) if int(hdr["version"]) >= 2 else int(hdr["chunk_size"])


def lost_reason(header: dict) -> str:
    """Why the tracer dropped records, in words, from a header's lost_why and lost_errno."""
    why = [text for bit, text in LOST_REASONS.items() if int(header.get("lost_why", 0)) & bit]
    err = int(header.get("lost_errno", 0))
    text = " and ".join(why) if why else "the file size cap was reached or the disk was full"
    if not err:
        return text
    # a corrupted header's errno may be no errno at all (os.strerror takes a C int)
    return f"{text} ({os.strerror(err) if 0 < err < 4096 else f'error number {err}'})"


def _parse_metadata(buf, hdr) -> dict[str, str]:
    mo, ml = int(hdr["meta_offset"]), int(hdr["meta_length"])
    return metadata_text(bytes(buf[mo : mo + ml]))


def metadata_text(raw: bytes) -> dict[str, str]:
    """The metadata section's "key=value" lines as a dict."""
    text = raw.decode("utf-8", errors="replace")
    meta = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key:
            meta[key.strip()] = value
    return meta


def read_hbt_file(path: str | os.PathLike, fh=None) -> dict:
    """Parse one binary trace file into raw arrays (no run assembly).

    Returns a dict with ``header`` (dict), ``meta`` (dict), ``records``
    (structured array with extra fields os_tid, thread_slot, order),
    and ``warnings``. `fh`: the file already open (read from its start).
    """
    path = str(path)
    warnings: list[str] = []
    with contextlib.nullcontext(fh) if fh is not None else open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        # a hole at the end (a sparse file) holds no record: it is not read into memory
        buf = f.read(max(written_end(f, size), min(size, 1 << 16)))
    if size == 0:
        raise TraceFormatError(f"{path}: empty file, not an hbtrace file")
    hdr, order = _parse_header(buf, path, size)
    meta = _parse_metadata(buf, hdr)
    header = {name: hdr[name].tolist() for name in hdr.dtype.names if name != "magic"}
    from .hbt_stream import process_is_live   # the stream reader builds on this module

    records = _parse_chunks(buf, hdr, order, path, size, warnings, live=process_is_live(header, meta))
    if header["lost_records"]:
        warnings.append(
            f"{path}: the tracer dropped {header['lost_records']} records: {lost_reason(header)}"
        )
    return {"header": header, "meta": meta, "records": records, "warnings": warnings}


def _chunk_table(raw: np.ndarray, hdr, order: str, path: str, first_byte: int | None = None,
                 live: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The used chunks of a chunk area (raw: its bytes, a whole number of units), in
    file order: (their first slots, their headers). A unit whose first slot has the
    chunk magic begins a chunk of `capacity` slots (docs/formats.md, version 2); a unit
    that begins no chunk and lies inside none must be zero. A chunk whose capacity
    reaches into the next one (read while its thread was giving units back) ends there.
    `raw` may be a part of the area that begins at a multiple of chunk_size (a streaming
    reader's window): `first_byte`, where it lies in the file (default data_offset), only
    places the errors. `live`: data outside any chunk is left out, not an error."""
    do, chunk, unit = int(hdr["data_offset"]), int(hdr["chunk_size"]), _unit_size(hdr)
    do = do if first_byte is None else int(first_byte)
    upc, spu = chunk // unit, unit // SLOT_SIZE
    nunits = raw.size // unit
    hdt = chunk_header_dtype(order)
    magic = raw[: nunits * unit].reshape(nunits, unit)[:, 28:32].copy().view(order + "u4").reshape(nunits)
    starts = np.flatnonzero(magic == CHUNK_MAGIC)
    heads = raw[: nunits * unit].reshape(nunits, unit)[starts, :SLOT_SIZE].copy().view(hdt).reshape(starts.size)
    cap = heads["capacity"].astype(np.int64)
    ok = (cap > 0) & (cap % spu == 0) & ((starts % upc) * spu + cap <= upc * spu)
    if int(hdr["version"]) < 2:
        ok &= cap == upc * spu
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        raise TraceFormatError(
            f"{path}: corrupted chunk header at byte {do + int(starts[i]) * unit} "
            f"(capacity {int(cap[i])}; chunks of {unit}-byte units, at most {chunk // SLOT_SIZE} slots)"
        )
    ends = starts + cap // spu
    if starts.size > 1:
        ends[:-1] = np.minimum(ends[:-1], starts[1:])
    # units inside no chunk hold no data (chunks no longer overlap: a running count of
    # chunk starts minus chunk ends is 1 inside one, 0 outside)
    delta = np.zeros(nunits + 1, dtype=np.int8)
    delta[starts] += 1
    np.subtract.at(delta, np.minimum(ends, nunits), 1)  # a cut-short file ends inside a chunk
    bad = (np.cumsum(delta[:nunits], dtype=np.int8) == 0) & (magic != 0)
    # `live`: the file is being written while it is read, so a read can see a new chunk's
    # records before its header (the tracer writes the header first, but one read of the
    # file is not one moment): such units are not in this snapshot yet
    if bad.any() and not live:
        i = int(np.flatnonzero(bad)[0])
        raise TraceFormatError(
            f"{path}: corrupted chunk header at byte {do + i * unit} (bad magic {int(magic[i]):#x})"
        )
    heads["capacity"] = (ends - starts) * spu
    return starts * spu, heads


def _parse_chunks(buf, hdr, order, path, size, warnings, live: bool = False) -> dict[str, np.ndarray]:
    do = int(hdr["data_offset"])
    unit = _unit_size(hdr)
    claimed = int(hdr["data_length"])
    if claimed % unit:
        raise TraceFormatError(
            f"{path}: corrupted header (data length {claimed} is not a multiple of the unit size {unit})"
        )
    avail = size - do
    if claimed > avail:
        warnings.append(
            f"{path}: file is {claimed - avail} bytes shorter than its header says "
            f"(cut short?): reading the records that are there"
        )
    area = min(claimed, avail)
    nslots = area // SLOT_SIZE
    if area % SLOT_SIZE:
        warnings.append(
            f"{path}: the last record is half-written ({area % SLOT_SIZE} of {SLOT_SIZE} bytes): "
            f"read up to the last whole record"
        )
    nslots = min(nslots, max(len(buf) - do, 0) // SLOT_SIZE)  # past the written end: zeros, no record
    rdt = record_dtype(order)
    spu = unit // SLOT_SIZE
    nunits = -(-nslots // spu)
    raw = np.frombuffer(buf, dtype=np.uint8, count=nslots * SLOT_SIZE, offset=do)
    if nslots % spu:
        # a cut-short file ends inside a unit: pad that unit with empty slots
        padded = np.zeros(nunits * unit, dtype=np.uint8)
        padded[: raw.size] = raw
        raw = padded
    first, heads = _chunk_table(raw, hdr, order, path, live=live)
    # used chunks in record order: by thread slot, then the thread's chunk sequence
    idx = np.lexsort((heads["chunk_seq"], heads["thread_slot"]))
    first, h = first[idx], heads[idx]
    slots = raw.view(rdt)
    # a chunk's records end at its first empty slot
    empty = np.flatnonzero(slots["kind"] == 0)
    lo = first + 1
    stop = np.full(lo.shape, np.iinfo(np.int64).max)
    if empty.size:
        at = np.searchsorted(empty, lo)
        stop = np.where(at < empty.size, empty[np.minimum(at, empty.size - 1)], stop)
    hi = np.minimum(np.minimum(stop, first + h["capacity"].astype(np.int64)), slots.size)
    counts = np.maximum(hi - lo, 0)
    total = int(counts.sum())
    take = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts) + np.repeat(lo, counts)
    recs = slots[take]  # one copy, in order
    out = {name: recs[name] for name in rdt.names}
    tid = np.repeat(h["os_tid"].astype(np.int64), counts)
    out["os_tid"] = np.where(tid == 0, -1, tid)  # 0: unknown (converted files)
    out["thread_slot"] = np.repeat(h["thread_slot"].astype(np.int64), counts)
    bad = bad_times(out["kind"], out["t_ns"], int(hdr["start_mono_ns"]))
    if bad.any():
        warnings.append(bad_time_warning(path, int(bad.sum())))
        out = {k: v[~bad] for k, v in out.items()}
    return out


def bad_times(kind: np.ndarray, t_ns: np.ndarray, start_mono_ns: int) -> np.ndarray:
    """Records whose time stamp cannot be right: more than config.MAX_TRACE_SPAN_NS from the
    tracer's start (a corrupted file; such a time would also overflow the analyses' clocks).
    Records that hold no time in t_ns (names, probe values) are never flagged."""
    lo, hi = time_bounds(start_mono_ns)
    timed = (kind != REC_NAME) & (kind != REC_PROBE)
    return timed & ((t_ns < lo) | (t_ns > hi))


def time_bounds(start_mono_ns: int) -> tuple[np.uint64, np.uint64]:
    """The plausible record times (raw clock values) of a file whose tracer started then."""
    return (np.uint64(max(start_mono_ns - config.MAX_TRACE_SPAN_NS, 0)),
            np.uint64(start_mono_ns + config.MAX_TRACE_SPAN_NS))


def bad_time_warning(path, n: int) -> str:
    return (f"{path}: skipped {n} record{'s' if n != 1 else ''} whose time stamp lies more than "
            f"{config.MAX_TRACE_SPAN_NS // (365 * 86400 * 10**9)} years from the tracer's start (a corrupted file)")


def _monitor_frame(r, sel, t_ns, run, proc, path, warnings) -> pd.DataFrame:
    """The online monitor's records of one process, decoded (MONITOR_COLUMNS)."""
    kind = r["kind"][sel].astype(np.int64)
    n = kind.size
    seq = r["seq"][sel].astype(np.int64)
    aux = r["aux"][sel].astype(np.int64)
    loop = r["loop"][sel].astype(np.int64)
    it = r["iter"][sel].astype(np.int64)
    flags = r["flags"][sel].astype(np.int64)
    t = t_ns[sel]
    isb, ism, isa = kind == 9, kind == 10, kind == 11
    badb = isb & ((loop < 0) | (loop >= len(BEHAVIORS)) | (it < 0))
    if badb.any():
        warnings.append(f"{path}: skipped {int(badb.sum())} behavior records with an unknown behavior code")
    keep = ~badb
    lag = np.where(isb, it, 0) * 1000
    mode = [MONITOR_MODES.get(int(f), f"mode {int(f)}") if k != 11 else "" for k, f in zip(kind.tolist(), flags.tolist())]
    neg = np.full(n, -1, dtype=np.int64)
    df = pd.DataFrame(
        {
            "run": run,
            "process": proc,
            "os_tid": r["os_tid"][sel],
            "t_ns": t,
            "t": t / 1e9,
            "kind": [MONITOR_KINDS[int(k)] for k in kind.tolist()],
            "mode": mode,
            "thread": np.where(isb, r["thread"][sel].astype(np.int64), -1),
            "behavior": [BEHAVIORS[int(c)] if b and 0 <= c < len(BEHAVIORS) else "" for b, c in zip(isb.tolist(), loop.tolist())],
            "onset_ns": np.where(isb, t - lag, -1),
            "onset_seq": np.where(isb, seq, -1),
            "messages": np.where(ism, seq | (aux << 32), neg),
            "passes": np.where(ism, loop, neg),
            "monitored": np.where(ism, r["thread"][sel].astype(np.int64), neg),
            "period_us": np.where(ism, it, neg),
            "every": np.where(isa, aux, neg),
            "previous_every": np.where(isa, seq, neg),
            "target_hz": np.where(isa, it / 1000.0, np.nan),
        }
    )
    return df[keep].reset_index(drop=True)


def _unwrap_seq(seq: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Undo the 32-bit wrap of per-thread sequence numbers (records of a group in the order
    written; groups may interleave)."""
    s = seq.astype(np.int64)
    if s.size == 0:
        return s
    if group[0] == group[-1] and (group == group[0]).all():  # one group: wraps are the only drops
        if not (np.diff(s) < -(1 << 31)).any():
            return s
    if (np.diff(group) != 0).sum() >= np.unique(group).size:  # interleaved: unwrap each group apart
        order = np.argsort(group, kind="stable")
        out = np.empty_like(s)
        out[order] = _unwrap_seq(s[order], group[order])
        return out
    d = np.diff(s)
    same = group[1:] == group[:-1]
    wrap = np.zeros(s.size, dtype=np.int64)
    wrap[1:] = (same & (d < -(1 << 31))).astype(np.int64)
    # cumulative wraps restart at each new group
    starts = np.r_[True, ~same]
    c = np.cumsum(wrap)
    base = np.maximum.accumulate(np.where(starts, c, 0))
    return s + ((c - base) << 32)


def run_files(d: Path) -> list[Path]:
    """The tracer's files of a run directory: every *.hbt file that starts with the magic."""
    return [f for f in sorted(d.iterdir()) if f.is_file() and f.suffix == SUFFIX and is_hbt(head(f, 8))]


def trace_paths(path: Path) -> tuple[list[Path], str]:
    """The trace files of a path (one file, or a run directory) and the run's name."""
    if path.is_dir():
        files = run_files(path)
        if not files:
            raise TraceFormatError(f"{path}: no hbtrace files (.hbt) in this directory; give a trace file or the "
                                   f"directory 'hbtool record -o DIR' wrote")
        return files, path.resolve().name
    return [path], path.stem


def run_offsets(parsed: list[dict]) -> tuple[list[int], int | None]:
    """Each process's start in ns after the run's zero, so that its record times (its own
    clock values) become seconds since the run started; and the zero as a CLOCK_MONOTONIC
    value when every process shares that clock (else None).

    On one host CLOCK_MONOTONIC is shared, so the earliest tracer start is the run's
    zero; across hosts (or clocks) the earliest wall-clock start is."""
    hosts = {p["meta"].get("host", "") for p in parsed}
    same_clock = len(hosts) == 1 and len({p["header"]["clock_id"] for p in parsed}) == 1
    key = "start_mono_ns" if same_clock else "start_real_ns"
    zero = min(p["header"][key] for p in parsed)
    return [p["header"][key] - zero for p in parsed], (int(zero) if same_clock else None)


def process_order(parsed: list[dict], offsets: list[int]) -> list[int]:
    """Indices of `parsed` in process order: MPI ranks first, then by start time and pid."""
    return sorted(range(len(parsed)), key=lambda i: (parsed[i]["header"]["rank"] < 0, parsed[i]["header"]["rank"],
                                                     offsets[i], parsed[i]["header"]["pid"]))


def read_heartbeat_trace(path: Path, options: ReadOptions) -> HeartbeatTrace:
    """The registry's reader: one trace file, or a run directory of them."""
    files, run = trace_paths(path)
    if options.stream:
        from .hbt_stream import read_hbt_stream

        return read_hbt_stream([str(f) for f in files], run=run)
    return read_hbt([str(f) for f in files], run=run)


def read_hbt(paths: list[str], run: str, files: list | None = None) -> HeartbeatTrace:
    """Read binary trace files of one run (one file per process). `files`: the files
    already open, in the order of `paths`."""
    parsed = [read_hbt_file(p, fh) for p, fh in zip(paths, files or [None] * len(paths))]
    warnings = [w for p in parsed for w in p["warnings"]]
    offsets, zero_mono = run_offsets(parsed)
    beats, events, monitor, waits, cpu, memory, sched, procmeta = [], [], [], [], [], [], [], []
    for process, i in enumerate(process_order(parsed, offsets)):
        p = parsed[i]
        hdr, r = p["header"], p["records"]
        proc = hdr["rank"] if hdr["rank"] >= 0 else process
        t_ns = r["t_ns"].astype(np.int64) - np.int64(hdr["start_mono_ns"]) + np.int64(offsets[i])
        kind = r["kind"]
        isbeat = kind == REC_BEAT
        thread = np.where(r["thread"] >= 0, r["thread"], r["thread_slot"]).astype(np.int64)
        source_code = (r["flags"] & 0xF).astype(np.int64)
        # API beats and automatic beats count in sequences of their own, per OS thread
        seq = _unwrap_seq(r["seq"][isbeat], r["os_tid"][isbeat].astype(np.int64) * 16 + source_code[isbeat])
        nb = int(isbeat.sum())
        auto = source_code != 0
        constructs = (_construct_names(r, paths[i], warnings, p["meta"].get("exe"))
                      if (auto & (isbeat | (kind == REC_WAIT))).any() else {})
        construct = _construct_column(construct_keys(r["loop"], np.where(isbeat, key_aux(r["aux"], r["flags"]), 0),
                                                     auto), constructs)
        beats.append(
            pd.DataFrame(
                {
                    "run": pd.Categorical.from_codes(np.zeros(nb, dtype=np.int8), [run]),
                    "process": proc,
                    "thread": thread[isbeat],
                    "seq": seq,
                    "t_ns": t_ns[isbeat],
                    "t": t_ns[isbeat] / 1e9,
                    "loop": r["loop"][isbeat].astype(np.int64),
                    "iteration": r["iter"][isbeat].astype(np.int64),
                    "tag": beat_tag(r["aux"][isbeat], r["flags"][isbeat]),
                    "os_tid": r["os_tid"][isbeat],
                    "source": _coded(source_code[isbeat], SOURCES, "source"),
                    "construct": construct[isbeat],
                }
            )
        )
        # the user thread number of an OS thread: the one its beats carry
        btid, first = np.unique(r["os_tid"][isbeat], return_index=True)
        tid_thread = dict(zip(btid.tolist(), thread[isbeat][first].tolist()))
        w, e, m, c = side_frames(r, ~isbeat, t_ns, thread, source_code, construct, tid_thread, run, proc,
                                 paths[i], warnings)
        events.append(e)
        if w is not None:
            waits.append(w)
        if m is not None:
            monitor.append(m)
        if c is not None:
            cpu.append(c)
        mem = memory_frame(r, ~isbeat, t_ns, thread, run, proc)
        if mem is not None:
            memory.append(mem)
        sc = sched_frame(r, ~isbeat, t_ns, thread, run, proc)
        if sc is not None:
            sched.append(sc)
        procmeta.append(process_meta(paths[i], proc, hdr, p["meta"], offsets[i]))
    return HeartbeatTrace(
        beats=pd.concat(beats, ignore_index=True),
        events=pd.concat(events, ignore_index=True),
        runs={run: run_meta(paths, zero_mono, procmeta)},
        warnings=warnings,
        **joined_tables({"monitor": monitor, "waits": waits, "cpu": cpu, "memory": memory, "sched": sched}),
    )


def sched_frame(r: dict, sel: np.ndarray, t_ns: np.ndarray, thread: np.ndarray, run: str, proc: int):
    """The sched records among the records `sel` of one process (SCHED_COLUMNS), or None:
    microseconds in the file (span in iter, CPU time in seq, run-queue delay in aux), ns
    here; a span that is not positive, or CPU time or delay longer than the span (a damaged
    record; the kernel's clocks agree to a tick), is left out."""
    iss = sel & (r["kind"] == REC_SCHED)
    if not iss.any():
        return None
    span = r["iter"][iss].astype(np.int64) * 1000
    cpu = r["seq"][iss].astype(np.int64) * 1000
    queued = r["aux"][iss].astype(np.int64) * 1000
    tick = 10_000_000
    ok = (span > 0) & (cpu <= span + tick) & (queued <= span + tick) & (cpu + queued <= span + 2 * tick)
    if not ok.any():
        return None
    idx = np.flatnonzero(iss)[ok]
    return pd.DataFrame({
        "run": run, "process": proc, "thread": thread[idx], "os_tid": r["os_tid"][idx].astype(np.int64),
        "t_ns": t_ns[idx], "span_ns": span[ok], "cpu_ns": np.minimum(cpu[ok], span[ok]),
        "queued_ns": np.minimum(queued[ok], span[ok]),
    })


def memory_frame(r: dict, sel: np.ndarray, t_ns: np.ndarray, thread: np.ndarray, run: str, proc: int):
    """The memory records among the records `sel` of one process (MEMORY_COLUMNS), or None.
    Two 64-bit values per record: seq and aux, loop and iter (low, high 32 bits); all ones
    is unknown; a scope this hbtool does not know is left out."""
    ism = sel & (r["kind"] == REC_MEMORY)
    if not ism.any():
        return None
    scope = (r["flags"][ism].astype(np.int64) >> 4) & 0xF
    keep = np.isin(scope, list(MEMORY_SCOPES))
    if not keep.any():
        return None
    idx = np.flatnonzero(ism)[keep]
    scope = scope[keep]
    u32 = np.uint64(0xFFFFFFFF)
    a = (r["aux"][idx].astype(np.uint64) << np.uint64(32)) | (r["seq"][idx].astype(np.uint64) & u32)
    b = ((r["iter"][idx].astype(np.int64).astype(np.uint64) & u32) << np.uint64(32)) \
        | (r["loop"][idx].astype(np.int64).astype(np.uint64) & u32)
    big = np.uint64(np.iinfo(np.int64).max)
    # beyond int64 (all ones: unknown) -> -1
    a = np.where(a > big, -1, a.astype(np.int64))
    b = np.where(b > big, -1, b.astype(np.int64))
    isproc = scope == 1
    return pd.DataFrame({
        "run": run, "process": proc, "scope": np.array(list(MEMORY_SCOPES.values()), dtype=object)[scope],
        "thread": thread[idx], "os_tid": r["os_tid"][idx].astype(np.int64), "t_ns": t_ns[idx],
        "allocated": np.where(isproc, -1, a), "freed": np.where(isproc, -1, b),
        "resident": np.where(isproc, a, -1), "heap": np.where(isproc, b, -1),
    })


def side_frames(r: dict, sel: np.ndarray, t_ns: np.ndarray, thread: np.ndarray, source_code: np.ndarray,
                construct: pd.Categorical, tid_thread: dict, run: str, proc: int, path, warnings: list[str]):
    """The waits, lifecycle events, monitor and cpu records among the records `sel` of one
    process (every array aligned with `r`): (waits or None, events, monitor or None, cpu
    or None)."""
    kind = r["kind"]
    iswait = sel & (kind == REC_WAIT)
    waits = None
    if iswait.any():
        waits = pd.DataFrame({
            "run": run, "process": proc, "thread": thread[iswait], "os_tid": r["os_tid"][iswait],
            "t_ns": t_ns[iswait], "t": t_ns[iswait] / 1e9,
            "wait_ns": (r["iter"][iswait].astype(np.uint32).astype(np.int64) << 32)
            | r["aux"][iswait].astype(np.int64),
            "sync": _coded(r["flags"][iswait].astype(np.int64) >> 4, SYNC_KINDS, "sync"),
            "source": _coded(source_code[iswait], SOURCES, "source"),
            "construct": construct[iswait],
        })
    iscpu = sel & (kind == REC_CPU)
    cpu = None
    if iscpu.any():
        gap_ns = r["iter"][iscpu].astype(np.int64).clip(0) * 1000
        fl = r["flags"][iscpu].astype(np.int64)
        # the run-queue delay, as a share of the gap in 1/CPU_QUEUED_MAX (tracers since
        # 2026-11-28, where /proc/thread-self/schedstat could be read): -1 where unknown
        share = np.minimum((fl >> CPU_QUEUED_SHIFT) & CPU_QUEUED_MAX, CPU_QUEUED_MAX)
        queued = np.where((fl & CPU_QUEUED) != 0, gap_ns * share // CPU_QUEUED_MAX, -1)
        cpu = pd.DataFrame({
            "run": run, "process": proc, "thread": thread[iscpu], "os_tid": r["os_tid"][iscpu],
            "t_ns": t_ns[iscpu], "gap_ns": gap_ns,
            "cpu_ns": (r["aux"][iscpu].astype(np.int64) << 32) | r["seq"][iscpu].astype(np.int64),
            "queued_ns": queued,
        })
    known = sel & np.isin(kind, list(REC_KINDS))
    ismon = sel & np.isin(kind, list(MONITOR_KINDS))
    # instruments (queues, probes, status) are read by hbtool.io.instruments
    unknown = (sel & (kind != REC_BEAT) & ~known & ~ismon & ((kind < 12) | (kind > 16)) & ~iswait & ~iscpu
               & (kind != REC_MEMORY) & (kind != REC_SCHED))
    if unknown.any():
        warnings.append(
            f"{path}: skipped {int(unknown.sum())} records of kinds this hbtool does not "
            f"know (written by a newer tracer?)"
        )
    ev = known
    ev_tid = r["os_tid"][ev]
    events = pd.DataFrame(
        {
            "run": run,
            "process": proc,
            "os_tid": ev_tid,
            "thread": [tid_thread.get(x, -1) for x in ev_tid.tolist()],
            "t_ns": t_ns[ev],
            "t": t_ns[ev] / 1e9,
            "kind": [REC_KINDS[int(k)] for k in kind[ev]],
            "detail": r["aux"][ev].astype(np.int64),
            "flags": r["flags"][ev].astype(np.int64),
        }
    )
    monitor = _monitor_frame(r, ismon, t_ns, run, proc, path, warnings) if ismon.any() else None
    return waits, events, monitor, cpu


def process_meta(path, proc: int, hdr: dict, meta: dict, offset: int) -> dict:
    """What a run's metadata says of one of its processes (files)."""
    return {
        "file": str(path),
        "process": int(proc),
        "pid": int(hdr["pid"]),
        "rank": int(hdr["rank"]),
        "host": meta.get("host", ""),
        "clock": CLOCKS.get(hdr["clock_id"], f"clock {hdr['clock_id']}"),
        "clock_res_ns": int(hdr["clock_res_ns"]),
        "start_real_ns": int(hdr["start_real_ns"]),
        "start_mono_ns": int(hdr["start_mono_ns"]),
        "t0_offset_ns": int(offset),
        "preload": bool(hdr["flags"] & FLAG_PRELOAD),
        "converted": bool(hdr["flags"] & FLAG_CONVERTED),
        "lost_records": int(hdr["lost_records"]),
        "lost_reason": lost_reason(hdr) if hdr["lost_records"] else "",
        "meta": meta,
    }


def run_meta(paths: list[str], zero_mono: int | None, procmeta: list[dict]) -> dict:
    return {
        "format": "hbtrace",
        "source": os.path.commonpath([str(p) for p in paths]) if len(paths) > 1 else str(paths[0]),
        # converted files know lifecycle only if their source did
        # clock value of the run's t = 0 (same host and clock only), to place outside times
        "zero_mono_ns": zero_mono,
        "lifecycle": all(not pm["converted"] or pm["meta"].get("lifecycle") == "1" for pm in procmeta),
        "processes": procmeta,
    }


def _dense(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct values, each value's index among them) of small non-negative integer
    codes, in O(n): per-beat columns of tens of millions of rows, where np.unique's sort
    took seconds. Codes past DENSE_MAX (only a crafted file has them) fall back to the sort."""
    if not codes.size:
        return codes.astype(np.int64), codes.astype(np.int32)
    top = int(codes.max())
    if int(codes.min()) < 0 or top > DENSE_MAX:
        u, inv = np.unique(codes, return_inverse=True)
        return u, inv.astype(np.int32)
    present = np.flatnonzero(np.bincount(codes, minlength=top + 1))
    lut = np.zeros(top + 1, dtype=np.int32)
    lut[present] = np.arange(present.size, dtype=np.int32)
    return present, lut[codes]


def _coded(codes: np.ndarray, names: dict[int, str], what: str) -> pd.Categorical:
    """Small integer codes as a categorical of their names ("<what> N" for a code not known)."""
    u, inv = _dense(codes)
    return pd.Categorical.from_codes(inv, [names.get(int(c), f"{what} {int(c)}") for c in u])


def _construct_names(r: dict, path: str, warnings: list[str], exe: str | None = None) -> dict[int, str]:
    """Construct id -> "<kind> <symbol>" (name space 3: "<kind>\t<symbol>\t<address>"). A
    symbol dladdr could not find (a local function, such as an OpenMP region's outlined
    body) is looked up in the program's symbol table; failing that the address stands in."""
    from .symbols import symbolize

    out = {}
    for cid, text in decode_names(r, NAME_CONSTRUCT, warnings, path).items():
        parts = text.split("\t")
        kind = parts[0]
        address = parts[2] if len(parts) > 2 else ""
        where = parts[1] if len(parts) > 1 and parts[1] else (symbolize(address, exe) or address)
        out[cid] = f"{kind} {where}".strip()
    return out


def chunk_beats(flags: np.ndarray) -> np.ndarray:
    """Per record: is it an OpenMP loop chunk's beat (source openmp, event 1)? Its aux is the
    chunk's count of iterations (0: not known; since 2026-12-01), not part of its construct."""
    f = flags.astype(np.int64)
    return ((f & 0xF) == 1) & (((f >> 4) & 0xFFF) == 1)


def key_aux(aux: np.ndarray, flags: np.ndarray) -> np.ndarray:
    """The aux that names a beat's construct (construct_keys): 0 for a chunk's beat."""
    return np.where(chunk_beats(flags), 0, aux)


def chunk_iterations(aux: np.ndarray, flags: np.ndarray) -> np.ndarray:
    """Per beat: a loop chunk's count of iterations (chunk_beats), 0 for any other beat."""
    return np.where(chunk_beats(flags), aux, 0).astype(np.int64)


def beat_tag(aux: np.ndarray, flags: np.ndarray) -> np.ndarray:
    """The beats table's `tag`: the program's own beat's tag, a loop chunk's count of
    iterations (chunk_beats), 0 for the other automatic beats (their aux names their
    construct)."""
    return np.where(((flags & 0xF) == 0) | chunk_beats(flags), aux, 0).astype(np.int64)


def construct_keys(loop: np.ndarray, aux: np.ndarray | None, auto: np.ndarray) -> np.ndarray:
    """Per record: 0 for the program's own, else its construct id (`loop`), with the
    sections a sections beat's thread was given (its `aux`, a bit per section; 0 for any
    other record) in the high 32 bits: construct_label names them."""
    key = np.where(auto, loop.astype(np.int64), 0)
    if aux is not None:
        key |= np.where(auto, aux.astype(np.int64) & 0xFFFFFFFF, 0) << 32
    return key


def _construct_column(keys: np.ndarray, names: dict[int, str]) -> pd.Categorical:
    """Per record: the name of its construct key (construct_keys; "" for 0)."""
    u, inv = _dense(keys)
    labels = [construct_label(names, int(c)) for c in u]
    if len(set(labels)) != len(labels):  # two ids with one name: merge them
        cats = sorted(set(labels))
        to_cat = np.array([cats.index(label) for label in labels], dtype=np.int32)
        return pd.Categorical.from_codes(to_cat[inv], cats)
    return pd.Categorical.from_codes(inv.astype(np.int32), labels)


# --------------------------------------------------------------------------- names


def decode_names(r: dict, space: int, warnings: list[str], path: str) -> dict[int, str]:
    """Names of one name space (NAME records): id -> text."""
    sel = (r["kind"] == REC_NAME) & ((r["aux"] >> 24) == space)
    if not sel.any():
        return {}
    fields = ["t_ns", "seq", "thread", "loop", "iter"]
    dt = np.dtype([(f, r[f].dtype) for f in fields])
    n = int(sel.sum())
    a = np.empty(n, dtype=dt)
    for f in fields:
        a[f] = r[f][sel]
    text = a.view(np.uint8).reshape(n, NAME_FRAGMENT_BYTES)
    ids = (r["aux"][sel] & 0xFFFFFF).astype(np.int64)
    flags = r["flags"][sel].astype(np.int64)
    index = flags & ~NAME_LAST
    out: dict[int, str] = {}
    incomplete = 0
    for i in np.unique(ids).tolist():
        rows = np.flatnonzero(ids == i)
        frags: dict[int, bytes] = {}
        last = None
        for k in rows.tolist():
            fi = int(index[k])
            if fi >= MAX_NAME_FRAGMENTS or fi in frags:
                continue  # a crafted or repeated fragment: the first one wins
            frags[fi] = bytes(text[k])
            if flags[k] & NAME_LAST:
                last = fi
        parts = []
        for fi in range(MAX_NAME_FRAGMENTS):
            if fi not in frags:
                break
            parts.append(frags[fi])
            if fi == last:
                break
        whole = last is not None and len(parts) == last + 1
        if not whole:
            incomplete += 1
        name = b"".join(parts).split(b"\0", 1)[0].decode("utf-8", errors="replace")
        out[i] = name if whole else name + "..."
    if incomplete:
        warnings.append(f"{path}: {incomplete} names are incomplete (the trace was cut short?); shown with '...'")
    return out



def write_hbt(trace: HeartbeatTrace, out: str | os.PathLike) -> list[str]:
    """Write a trace of ONE run in the binary format (hbtool.io.hbt_writer)."""
    from .hbt_writer import write_hbt as write

    return write(trace, out)


__all__ = ["read_hbt", "read_hbt_file", "write_hbt", "is_hbt"]
