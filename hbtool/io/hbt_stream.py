"""Bounded-memory reading of the tracer's binary files: the beats stay in the file.

`hbtool info` and `hbtool diagnose` need, per thread, a few numbers (beats, first and
last time, OS threads, time waited) and, for diagnose, one thread's beat times at a time.
This reader scans each file once in windows of config.HBT_READ_WINDOW_BYTES, keeping only
those per-thread numbers and the records that are neither beats nor waits (lifecycle,
the monitor's, names: a few per thread); a thread's beat times are read from the file
again when an analysis asks for them (:meth:`HbtStream.load_times`). Memory so follows
the window and the largest thread, not the trace.

The layout is docs/formats.md's (versions 1 and 2): chunks of whole units that never
cross a multiple of ``chunk_size`` (so windows begin at such multiples, and each window's
chunks are found and checked by hbt._chunk_table, as the whole reader finds them), each
owned by one thread slot, a chunk's records ending at its first empty slot, a thread's
records in (thread_slot, chunk_seq, slot) order. Nothing else is assumed: chunks of
one thread may lie anywhere in the chunk area, in any order. Waits are summed per chunk,
thread, source and kind, with their earliest start and latest end, so that the time a
thread waited between its first and last beat (summary.region_work) is read again only
for the chunks whose waits reach past either (:meth:`HbtStream.wait_overlap`); `cpu`
records are kept with the lifecycle ones.

A live trace (its process still runs on this host) is read as a snapshot: the chunk
area the header declared when the file was opened, each chunk's records up to its first
empty slot as first seen (the tracer stores a slot's kind last, with release ordering,
so a slot seen with a kind was complete when seen). A thread's chunk that a later chunk
of the same thread follows is counted again: it was seen while being filled, and was
full before its successor, seen later, began. The window is then read a second time and
the records' fields taken from that copy, which cannot hold a half-written record (a
record is never rewritten); the chunks are those of the first look (one begun later, in
units an ended thread gave back, is left out). Each thread's records are so a prefix of all it will write;
records added after the first look are left out, and every later read of the file (a
thread's beat times) sees the same snapshot.
"""

from __future__ import annotations

import contextlib
import os
import socket
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .. import config
from ..errors import HbtoolError, TraceFormatError
from ..model import HeartbeatTrace, empty_frame
from ..model.heartbeats import STATS_COLUMNS, WAIT_STATS_COLUMNS, StreamedTrace, joined_tables
from . import hbt
from .hbt import (HEADER_SIZE, REC_BEAT, REC_WAIT, SLOT_SIZE, SOURCES, SYNC_KINDS, _coded, _construct_column,
                  construct_keys, key_aux, beat_tag, chunk_iterations, _construct_names, _unwrap_seq, bad_time_warning, bad_times,
                  chunk_header_dtype, lost_reason,
                  metadata_text, process_meta, process_order, record_dtype, run_meta, run_offsets, side_frames, memory_frame,
                  sched_frame, time_bounds)
from .registry import written_end

#: source name -> its code in the records' flags
_SOURCE_CODES = {name: c for c, name in SOURCES.items()}


#: a run of more files than this is read with each file opened when needed, not all kept open
KEEP_OPEN = 64


@dataclass
class FileScan:
    """One trace file, scanned: its header, the index of its used chunks, per-thread beat
    counts and times, and every record that is not a beat."""

    path: str
    fh: object                       # the open file (kept open: standard input's copy is unlinked), or None
    header: dict
    meta: dict
    order: str
    live: bool
    chunk_size: int                  # the largest chunk: no chunk crosses a multiple of it (windows begin there)
    unit: int                        # chunks begin at, and are whole numbers of, units of this many bytes
    chunks: dict = field(default_factory=dict)   # used chunks in record order: offset, cap, slot, seq, os_tid, nrec
    runs: dict = field(default_factory=dict)     # beats per (chunk, thread, source): see _beat_runs
    other: dict = field(default_factory=dict)    # other records in record order (as hbt._parse_chunks)
    waits: dict = field(default_factory=dict)    # waits per (chunk, thread, source, sync): count, total ns, span
    chunk_at: dict = field(default_factory=dict)  # by chunk number (file order): offset, nrec, slot, os_tid
    warnings: list = field(default_factory=list)

    def window_bytes(self) -> int:
        """Bytes read at a time: whole largest chunks, so that no chunk crosses a window."""
        return max(1, config.HBT_READ_WINDOW_BYTES // self.chunk_size) * self.chunk_size


# --------------------------------------------------------------------------- scanning


def _pread_into(fh, buf: np.ndarray, offset: int) -> int:
    """Read into `buf` from `offset`; the bytes read (fewer at the end of the file)."""
    fd = fh.fileno()
    view = memoryview(buf).cast("B")
    got = 0
    while got < len(view):
        n = os.preadv(fd, [view[got:]], offset + got)
        if not n:
            break
        got += n
    return got


def process_is_live(header: dict, meta: dict) -> bool:
    """True when the process that writes the file still runs on this host: the same pid,
    started no later than the tracer (a pid used again by a later process is not it)."""
    pid = int(header.get("pid") or 0)
    if pid <= 0 or header.get("flags", 0) & hbt.FLAG_CONVERTED or meta.get("host") != socket.gethostname():
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        ticks = int(stat[stat.rindex(b")") + 2:].split()[19])  # field 22: start time, clock ticks after boot
    except (OSError, ValueError, IndexError):
        return False
    if stat[stat.rindex(b")") + 2:stat.rindex(b")") + 3] == b"Z":
        return False  # exited, not yet reaped
    started_ns = ticks * 10**9 // os.sysconf("SC_CLK_TCK")
    return started_ns <= int(header["start_mono_ns"]) + 2 * 10**9


def scan_file(path: str) -> FileScan:
    """Open and scan one trace file (see the module's docstring)."""
    path = str(path)
    fh = open(path, "rb")
    try:
        return _scan(path, fh)
    except BaseException:
        fh.close()
        raise


def _scan(path: str, fh) -> FileScan:
    size = os.fstat(fh.fileno()).st_size
    if size == 0:
        raise TraceFormatError(f"{path}: empty file, not an hbtrace file")
    head = np.zeros(HEADER_SIZE, dtype=np.uint8)
    got = _pread_into(fh, head, 0)
    hdr, order = hbt._parse_header(bytes(head[:got]), path, size)
    mo, ml = int(hdr["meta_offset"]), int(hdr["meta_length"])
    mbuf = np.zeros(ml, dtype=np.uint8)
    _pread_into(fh, mbuf, mo)
    meta = metadata_text(mbuf.tobytes())
    header = {name: hdr[name].tolist() for name in hdr.dtype.names if name != "magic"}
    scan = FileScan(path, fh, header, meta, order, process_is_live(header, meta), int(hdr["chunk_size"]),
                    hbt._unit_size(hdr))
    _scan_chunks(scan, size)
    if header["lost_records"]:
        scan.warnings.append(f"{path}: the tracer dropped {header['lost_records']} records: {lost_reason(header)}")
    return scan


class _Table:
    """Chunks found so far, in file order: first slot (counted from data_offset), header,
    records (nrec, -1 none read)."""

    def __init__(self):
        self.first, self.heads, self.nrec = [], [], []

    def add(self, first, heads, nrec) -> int:
        base = sum(len(f) for f in self.first)
        self.first.append(first)
        self.heads.append(heads)
        self.nrec.append(nrec)
        return base

    def arrays(self, hdt):
        if not self.first:
            return np.zeros(0, np.int64), np.zeros(0, dtype=hdt), np.zeros(0, np.int64)
        return np.concatenate(self.first), np.concatenate(self.heads), np.concatenate(self.nrec)


def _scan_chunks(scan: FileScan, size: int) -> None:
    path, h, unit = scan.path, scan.header, scan.unit
    do, claimed = int(h["data_offset"]), int(h["data_length"])
    if claimed % unit:
        raise TraceFormatError(
            f"{path}: corrupted header (data length {claimed} is not a multiple of the unit size {unit})")
    avail = size - do
    if claimed > avail and not scan.live:
        scan.warnings.append(f"{path}: file is {claimed - avail} bytes shorter than its header says "
                             f"(cut short?): reading the records that are there")
    area = max(min(claimed, avail), 0)
    nslots = area // SLOT_SIZE
    if area % SLOT_SIZE and not scan.live:
        scan.warnings.append(f"{path}: the last record is half-written ({area % SLOT_SIZE} of {SLOT_SIZE} bytes): "
                             f"read up to the last whole record")
    # a hole at the end (a sparse file) holds no record: its zeros are not read
    nslots = min(nslots, max(written_end(scan.fh, size) - do, 0) // SLOT_SIZE)
    rdt, hdt = record_dtype(scan.order), chunk_header_dtype(scan.order)
    wbytes = scan.window_bytes()
    wslots = wbytes // SLOT_SIZE
    buf = np.zeros(min(wbytes, -(-nslots * SLOT_SIZE // unit) * unit), dtype=np.uint8)
    start = int(h["start_mono_ns"])
    runs, others, waits, bad_time = [], [], [], 0
    looked = None  # a live file's first look: (first, heads, nrec) of every chunk

    def windows(strict: bool):
        """(first slot, slots, raw) of each window, read into buf (raw: whole units)."""
        for s0 in range(0, nslots, wslots):
            want = min(wslots, nslots - s0) * SLOT_SIZE
            got = _pread_into(scan.fh, buf[:want], do + s0 * SLOT_SIZE)
            if got < want and strict:
                # a live program's clean end cuts its file to the space used: no counted record is lost
                first, _, nrec = looked
                inw = (first >= s0) & (first < s0 + want // SLOT_SIZE)
                need = int(((first[inw] - s0 + 1 + np.maximum(nrec[inw], 0)) * SLOT_SIZE).max(initial=0))
                if got < need:
                    raise HbtoolError(f"{path}: the file shrank while being read: read it again")
                buf[got:want] = 0
                got = want
            if got < want:
                if not scan.live:
                    scan.warnings.append(f"{path}: the file shrank while being read (cut short by another "
                                         f"program?): reading the records that were there")
                want = got // SLOT_SIZE * SLOT_SIZE
            end = -(-want // unit) * unit
            buf[want:end] = 0  # a chunk cut short ends with empty slots
            if want:
                yield s0, want // SLOT_SIZE, buf[:end]
            if got < want or want < min(wslots, nslots - s0) * SLOT_SIZE:
                return

    table = _Table()
    if scan.live:
        # first look: which slots hold a record (a slot with a kind was complete when seen)
        for s0, ns, raw in windows(strict=False):
            first, heads, nrec = _chunk_counts(raw, ns, scan, do + s0 * SLOT_SIZE, rdt)
            table.add(first + s0, heads, nrec)
        looked = table.arrays(hdt)
        _complete_earlier_chunks(scan, *looked, rdt)
        first_all, heads_all, nrec_all = looked
        for s0, ns, raw in windows(strict=True):
            # the fields from a second copy, read after every counted slot was seen complete
            inw = np.flatnonzero((first_all >= s0) & (first_all < s0 + ns))
            bad_time += _window_records(raw.view(rdt), first_all[inw] - s0, nrec_all[inw], inw, start,
                                        heads_all[inw], runs, others, waits)
    else:
        for s0, ns, raw in windows(strict=False):
            first, heads, nrec = _chunk_counts(raw, ns, scan, do + s0 * SLOT_SIZE, rdt)
            base = table.add(first + s0, heads, nrec)
            bad_time += _window_records(raw.view(rdt), first, nrec, base + np.arange(first.size), start, heads,
                                        runs, others, waits)
        first_all, heads_all, nrec_all = table.arrays(hdt)
    if bad_time:
        scan.warnings.append(bad_time_warning(path, bad_time))
    nchunks = first_all.size
    idx = np.lexsort((heads_all["chunk_seq"], heads_all["thread_slot"]))
    tid = heads_all["os_tid"].astype(np.int64)
    tid = np.where(tid == 0, -1, tid)  # 0: unknown (converted files)
    scan.chunks = {"offset": do + first_all[idx] * SLOT_SIZE, "slot": heads_all["thread_slot"][idx].astype(np.int64),
                   "seq": heads_all["chunk_seq"][idx].astype(np.int64), "os_tid": tid[idx],
                   "nrec": nrec_all[idx]}
    scan.runs = _beat_runs(runs, heads_all, tid)
    # chunks holding nothing but beats of one thread and source (most): that thread and source
    r = scan.runs
    one = np.bincount(r["chunk"], minlength=nchunks)[r["chunk"]] == 1
    pure = one & (r["beats"] == nrec_all[r["chunk"]])
    pthread = np.full(nchunks, -1, dtype=np.int64)
    psrc = np.full(nchunks, -1, dtype=np.int64)
    pthread[r["chunk"][pure]] = r["thread"][pure]
    psrc[r["chunk"][pure]] = r["source"][pure]
    scan.chunks["pure_thread"], scan.chunks["pure_source"] = pthread[idx], psrc[idx]
    scan.chunks["id"] = idx
    scan.other = _other_records(others, heads_all, tid, rdt)
    keys = ["chunk", "thread", "source", "sync", "waits", "wait_ns", "start", "end", "wmin"]
    scan.waits = {k: np.concatenate([w[k] for w in waits]) if waits else np.zeros(0, dtype=np.int64) for k in keys}
    scan.waits["os_tid"] = tid[scan.waits["chunk"]]
    scan.chunk_at = {"offset": do + first_all * SLOT_SIZE, "nrec": nrec_all,
                     "slot": heads_all["thread_slot"].astype(np.int64), "os_tid": tid}


def _complete_earlier_chunks(scan: FileScan, first, heads, nrec, rdt) -> None:
    """A live file is read over a while: a thread's chunk may have been seen while it was
    being filled, and its next chunk later, already in use. A chunk followed by another of
    the same thread was full before that one began, so it is read again and counted anew:
    each thread's records in the snapshot are then a prefix of all it will write."""
    do = int(scan.header["data_offset"])
    cap = heads["capacity"].astype(np.int64)
    idx = np.flatnonzero(nrec >= 0)
    slot = heads["thread_slot"][idx]
    idx = idx[np.lexsort((heads["chunk_seq"][idx], slot))]
    slot = heads["thread_slot"][idx]
    followed = np.r_[slot[1:] == slot[:-1], False]
    for ci in idx[followed & (nrec[idx] < cap[idx] - 2)].tolist():
        one = np.zeros(int(cap[ci]) * SLOT_SIZE, dtype=np.uint8)
        if _pread_into(scan.fh, one, do + int(first[ci]) * SLOT_SIZE) < one.size:
            raise HbtoolError(f"{scan.path}: the file shrank while being read: read it again")
        kind = one.view(rdt)["kind"][1:]
        empty = np.flatnonzero(kind == 0)
        nrec[ci] = int(empty[0]) if empty.size else kind.size


def _chunk_counts(raw, ns: int, scan: FileScan, first_byte: int, rdt):
    """The used chunks of a window (hbt._chunk_table; raw: whole units, of which the first
    `ns` slots were read): first slots, headers, and each one's records up to its first
    empty slot."""
    first, heads = hbt._chunk_table(raw, scan.header, scan.order, scan.path, first_byte=first_byte,
                                    live=scan.live)
    kind = raw.view(rdt)["kind"]
    empty = np.flatnonzero(kind == 0)
    lo = first + 1
    stop = np.full(lo.shape, np.iinfo(np.int64).max)
    if empty.size:
        at = np.searchsorted(empty, lo)
        stop = np.where(at < empty.size, empty[np.minimum(at, empty.size - 1)], stop)
    hi = np.minimum(np.minimum(stop, first + heads["capacity"].astype(np.int64)), ns)
    return first.astype(np.int64), heads, np.maximum(hi - lo, 0)


def _window_records(recs, first, nrec, cid, start, heads, runs, others, waits) -> int:
    """Beats of a window (`recs`: its slots, a view of our own buffer; its chunks begin at
    slots `first`, hold `nrec` records and are numbered `cid`) summarised as runs, waits
    summed, other records kept; returns the records skipped for a corrupted time stamp.

    Most chunks hold nothing but beats of one thread and source with plausible times
    ("pure"): those are summarised with whole-chunk reductions; the others record by
    record."""
    has = nrec > 0
    if not has.any():
        return 0
    f, n, cid = first[has], nrec[has].astype(np.int64), cid[has]
    slot = heads["thread_slot"][has].astype(np.int64)
    # each chunk's records reduced in place (no copy of them): the reductions over
    # [first + 1, first + 1 + nrec), the even ones of reduceat over both bounds
    ix = np.empty(2 * f.size, dtype=np.int64)
    ix[0::2], ix[1::2] = f + 1, f + 1 + n
    if ix[-1] >= recs.size:
        ix = ix[:-1]

    def lo_hi(a):
        return np.minimum.reduceat(a, ix)[0::2], np.maximum.reduceat(a, ix)[0::2]

    kmin, kmax = lo_hi(recs["kind"])
    thmin, thmax = lo_hi(recs["thread"])
    smin, smax = lo_hi(recs["flags"] & 0xF)
    tmin, tmax = lo_hi(recs["t_ns"])
    lo, hi = time_bounds(start)
    pure = ((kmin == REC_BEAT) & (kmax == REC_BEAT) & (thmin == thmax) & (smin == smax) & (tmin >= lo)
            & (tmax <= hi))
    p = np.flatnonzero(pure)
    if p.size:
        tp = thmin[p].astype(np.int64)
        runs.append({"chunk": cid[p], "thread": np.where(tp >= 0, tp, slot[p]), "source": smin[p].astype(np.int64),
                     "pos": np.ones(p.size, dtype=np.int64), "beats": n[p], "tmin": tmin[p], "tmax": tmax[p]})
    if p.size == n.size:
        return 0
    q = np.flatnonzero(~pure)
    # the others record by record, some chunks at a time: their temporaries (about 200 bytes a
    # record) follow MIXED_RECORDS, not the window
    ends = np.cumsum(n[q])
    bad, a = 0, 0
    while a < q.size:
        b = max(a + 1, int(np.searchsorted(ends, (ends[a - 1] if a else 0) + MIXED_RECORDS, side="right")))
        bad += _mixed_records(recs, f[q[a:b]], n[q[a:b]], cid[q[a:b]], slot[q[a:b]], start, runs, others, waits)
        a = b
    return bad


#: records of mixed chunks (beats beside waits and other records) summarised at a time
MIXED_RECORDS = 1 << 16


def _mixed_records(recs, f, n, cid, slot, start, runs, others, waits) -> int:
    """_window_records' part for chunks that are not pure, record by record."""
    seg = np.cumsum(n) - n
    ridx = np.arange(int(n.sum()), dtype=np.int64) - np.repeat(seg, n) + np.repeat(f + 1, n)
    # field by field: a gather of whole structured records costs about 30 times as much
    kind, t = recs["kind"][ridx], recs["t_ns"][ridx]
    th, fl = recs["thread"][ridx].astype(np.int64), recs["flags"][ridx].astype(np.int64)
    ci = np.repeat(np.arange(n.size), n)  # the record's chunk, among these
    th = np.where(th >= 0, th, slot[ci])
    bad = bad_times(kind, t, start)
    beat = (kind == REC_BEAT) & ~bad
    if beat.any():
        bc, bth, bsrc, tb = ci[beat], th[beat], fl[beat] & 0xF, t[beat]
        brk = np.r_[True, (bc[1:] != bc[:-1]) | (bth[1:] != bth[:-1]) | (bsrc[1:] != bsrc[:-1])]
        st = np.flatnonzero(brk)
        runs.append({"chunk": cid[bc[st]], "thread": bth[st], "source": bsrc[st],
                     "pos": ridx[beat][st] - f[bc[st]], "beats": np.diff(np.r_[st, bc.size]),
                     "tmin": np.minimum.reduceat(tb, st), "tmax": np.maximum.reduceat(tb, st)})
    w = (kind == REC_WAIT) & ~bad
    if w.any():  # waits summed per chunk, thread, source and kind (an OpenMP program has about
        # as many as beats, of two or three kinds in turn: summed as they come, they would not shrink)
        wc, wth, wfl = ci[w], th[w], fl[w]
        g = np.lexsort((wfl, wth, wc))
        at = ridx[w][g]
        wc, wth, wfl = wc[g], wth[g], wfl[g]
        ns = (recs["iter"][at].astype(np.uint32).astype(np.int64) << 32) | recs["aux"][at].astype(np.int64)
        end = recs["t_ns"][at].astype(np.int64)
        brk = np.r_[True, (wc[1:] != wc[:-1]) | (wth[1:] != wth[:-1]) | (wfl[1:] != wfl[:-1])]
        st = np.flatnonzero(brk)
        waits.append({"chunk": cid[wc[st]], "thread": wth[st], "source": wfl[st] & 0xF, "sync": wfl[st] >> 4,
                      "waits": np.diff(np.r_[st, wc.size]), "wait_ns": np.add.reduceat(ns, st),
                      "start": np.minimum.reduceat(end - ns, st), "end": np.maximum.reduceat(end, st),
                      "wmin": np.minimum.reduceat(ns, st)})
    o = (kind != REC_BEAT) & (kind != REC_WAIT) & ~bad
    if o.any():
        others.append((cid[ci[o]], ridx[o] - f[ci[o]], recs[ridx[o]]))
    return int(bad.sum())


def _beat_runs(runs: list[dict], heads, tid) -> dict:
    keys = ["chunk", "thread", "source", "pos", "beats", "tmin", "tmax"]
    if not runs:
        out = {k: np.zeros(0, dtype=np.uint64 if k in ("tmin", "tmax") else np.int64) for k in keys}
    else:
        out = {k: np.concatenate([r[k] for r in runs]) for k in keys}
    c = out["chunk"]
    out["slot"] = heads["thread_slot"][c].astype(np.int64)
    out["seq"] = heads["chunk_seq"][c].astype(np.int64)
    out["os_tid"] = tid[c]
    return out


def _other_records(others: list, heads, tid, rdt) -> dict:
    if others:
        chunk = np.concatenate([o[0] for o in others])
        pos = np.concatenate([o[1] for o in others])
        recs = np.concatenate([o[2] for o in others])
    else:
        chunk = pos = np.zeros(0, dtype=np.int64)
        recs = np.zeros(0, dtype=rdt)
    slot = heads["thread_slot"][chunk].astype(np.int64)
    order = np.lexsort((pos, heads["chunk_seq"][chunk], slot))
    out = {name: recs[name][order] for name in rdt.names}
    out["os_tid"] = tid[chunk][order]
    out["thread_slot"] = slot[order]
    return out


# --------------------------------------------------------------------------- the run


class HbtStream:
    """The scanned files of one run, and how to read a thread's beat times again."""

    def __init__(self, scans: list[FileScan], run: str):
        self.scans = scans
        self.run = run
        parsed = [{"header": s.header, "meta": s.meta} for s in scans]
        self.offsets, self.zero_mono = run_offsets(parsed)
        self.order = process_order(parsed, self.offsets)
        #: process number -> index in scans
        self.proc_index: dict[int, int] = {}
        #: (process, thread, sources) -> whether its beats are one sequence (_one_sequence), once
        self._sequence: dict[tuple, bool] = {}

    def close(self) -> None:
        for s in self.scans:
            if s.fh is not None:
                s.fh.close()

    def materialize(self) -> HeartbeatTrace:
        """The whole trace, as hbt.read_hbt reads it (every beat in memory)."""
        return hbt.read_hbt([s.path for s in self.scans], self.run, files=[s.fh for s in self.scans])

    def load_times(self, run: str, process: int, thread: int, sources: list[str], loops: bool = False):
        """The beat times (s) of one thread's beats of the given sources, in the order the
        trace's beats table has them (by seq, then time); loops: also each beat's construct id
        (the loop field of an automatic beat, 0 for the program's own), as (times, ids)."""
        s, t, seq, groups, fields = self._collect(process, thread, sources, ("loop", "aux", "flags") if loops else ())
        _, order = _beat_order(seq, groups, t)
        out = (t if order is None else t[order]).astype(np.float64)
        out /= 1e9
        if not loops:
            return out
        # the program's own beats: their loop field is the program's, no construct
        auto = (np.mod(_group_column(groups), 16) != 0) if "api" in sources else np.ones(t.size, dtype=bool)
        ids = construct_keys(fields["loop"], key_aux(fields["aux"], fields["flags"]), auto)
        return out, ids if order is None else ids[order]

    def load_beats(self, run: str, process: int, thread: int, sources: list[str],
                   aux: bool = False) -> dict[str, np.ndarray]:
        """One thread's beats of the given sources with every field the whole reader gives
        them, in beats-table order: t_ns (on the run's clock), seq (unwrapped), loop, iteration,
        tag, os_tid, source (the code); `aux`: the aux that names an automatic beat's construct
        too (key_aux: the sections a sections beat's thread was given), and each beat's
        `iterations` (chunk_iterations)."""
        s, t, seq, groups, fields = self._collect(process, thread, sources, ("loop", "iter", "aux", "flags"))
        group = _group_column(groups)
        seq, order = _beat_order(seq, groups, t, group)
        os_tid, source = np.floor_divide(group, 16), np.mod(group, 16)
        out = {"t_ns": t, "seq": seq, "loop": fields["loop"].astype(np.int64),
               "iteration": fields["iter"].astype(np.int64),
               "tag": beat_tag(fields["aux"], fields["flags"]), "os_tid": os_tid, "source": source}
        if aux:
            out["aux"] = key_aux(fields["aux"], fields["flags"]).astype(np.int64)
            out["iterations"] = chunk_iterations(fields["aux"], fields["flags"])
        return out if order is None else {k: v[order] for k, v in out.items()}

    def _plan(self, process: int, thread: int, sources: list[str]) -> dict:
        """Where one thread's beats of the given sources lie in its file: the scan, the
        source codes, their number, the chunks to read and how to shift their times."""
        i = self.proc_index[process]
        s = self.scans[i]
        codes = np.array([_SOURCE_CODES[x] if x in _SOURCE_CODES else int(x.split()[-1]) for x in sources],
                         dtype=np.int64)
        r = s.runs
        sel = (r["thread"] == thread) & np.isin(r["source"], codes)
        c = s.chunks
        mine = (c["pure_thread"] == thread) & np.isin(c["pure_source"], codes)
        others = (c["pure_thread"] >= 0) & ~mine  # pure chunks of another thread or source: not read
        pick = np.flatnonzero(np.isin(c["slot"], np.unique(r["slot"][sel])) & (c["nrec"] > 0) & ~others)
        start = int(s.header["start_mono_ns"])
        lo, hi = time_bounds(start)
        return {"s": s, "codes": codes, "total": int(r["beats"][sel].sum()), "mine": mine, "pick": pick,
                "shift": np.int64(self.offsets[i]) - np.int64(start), "lo": lo, "hi": hi}

    def _batch_beats(self, plan: dict, thread: int, names: tuple = ()):
        """Per batch of the planned chunks: (t_ns on the run's clock, raw seq, groups,
        {field: values}) of the thread's beats in it, in record order."""
        s, c = plan["s"], plan["s"].chunks
        rdt = record_dtype(s.order)
        with _opened(s) as fh:
            for part, buf in _batches(fh, s, c, plan["pick"]):
                room = int(c["nrec"][part].sum())   # beats are some of the records
                t_out = np.empty(room, dtype=np.int64)
                seq_out = np.empty(room, dtype=np.uint32)
                fields = {name: np.empty(room, dtype=rdt[name].newbyteorder("=")) for name in names}
                groups = []
                n = self._read_batch(s, part, buf, thread, plan["codes"], plan["mine"], plan["shift"], plan["lo"],
                                     plan["hi"], t_out, seq_out, groups, 0, room, fields)
                yield t_out[:n], seq_out[:n], groups, {k: v[:n] for k, v in fields.items()}

    def _collect(self, process: int, thread: int, sources: list[str], names: tuple = ()):
        """One thread's beats of the given sources read from its file, in record order:
        (scan, t_ns on the run's clock, raw seq, groups for _beat_order, {field: values} of
        the record fields `names`)."""
        plan = self._plan(process, thread, sources)
        s, total = plan["s"], plan["total"]
        rdt = record_dtype(s.order)
        t_out = np.empty(total, dtype=np.int64)
        seq_out = np.empty(total, dtype=np.uint32)
        fields = {name: np.empty(total, dtype=rdt[name].newbyteorder("=")) for name in names}
        groups = []  # per record: os_tid * 16 + source, for the unwrap of seq
        at = 0
        for t, seq, got_groups, got in self._batch_beats(plan, thread, names):
            if at + t.size > total:
                raise HbtoolError(f"{s.path}: the file changed while being read: read it again")
            t_out[at:at + t.size] = t
            seq_out[at:at + t.size] = seq
            for name, values in got.items():
                fields[name][at:at + t.size] = values
            groups += got_groups
            at += t.size
        if at != total:
            raise HbtoolError(f"{s.path}: the file changed while being read: read it again")
        return s, t_out, seq_out, groups, fields

    def _one_sequence(self, plan: dict, thread: int) -> bool:
        """Are the thread's planned beats one sequence counting up in record order (one OS
        thread, one source, each seq above the one before): then record order is the beats
        table's order. Read once more, a batch at a time."""
        s, c = plan["s"], plan["s"].chunks
        if plan["codes"].size != 1 or np.unique(c["os_tid"][plan["pick"]]).size > 1:
            return False
        last, seen = -1, 0
        for _, seq, _, _ in self._batch_beats(plan, thread):
            if seq.size:
                if int(seq[0]) <= last or (seq.size > 1 and not (np.diff(seq.astype(np.int64)) > 0).all()):
                    return False
                last = int(seq[-1])
                seen += seq.size
        return seen == plan["total"]

    def beat_pieces(self, run: str, process: int, thread: int, sources: list[str], rows: int,
                    times_only: bool = False, constructs: bool = False):
        """One thread's beats as load_beats gives them, in consecutive dicts of the same
        arrays: of at most `rows` beats each, read a batch of its chunks at a time, when record
        order is the beats table's order (the usual case: one OS thread, one source, seq
        counting up; each piece then in time order after the one before), so that memory
        follows the read window and `rows`, not the thread; else one dict of them all.
        times_only: the dicts hold t_ns alone (an eighth of the memory); constructs: t_ns,
        `construct`, each beat's construct id (0 for the program's own beats), and
        `iterations`, a loop chunk's count of iterations (0 for any other beat), and `first`,
        its first iteration (the iter field)."""
        plan = self._plan(process, thread, sources)
        key = (process, thread, tuple(sources))
        if plan["total"] > rows and key not in self._sequence:
            self._sequence[key] = self._one_sequence(plan, thread)
        if plan["total"] > rows and self._sequence[key]:
            source = int(plan["codes"][0])
            os_tid = int(plan["s"].chunks["os_tid"][plan["pick"][0]])
            names = () if times_only else ("loop", "iter", "aux", "flags")

            def batches():
                seen = 0
                for t, seq, _, fields in self._batch_beats(plan, thread, names):
                    seen += t.size
                    if t.size and times_only:
                        yield {"t_ns": t}
                    elif t.size and constructs:
                        yield {"t_ns": t, "construct": construct_keys(fields["loop"],
                                                                       key_aux(fields["aux"], fields["flags"]),
                                                                       np.full(t.size, source != 0)),
                               "iterations": chunk_iterations(fields["aux"], fields["flags"]),
                               "first": fields["iter"].astype(np.int64)}
                    elif t.size:
                        yield {"t_ns": t, "seq": seq.astype(np.int64), "loop": fields["loop"].astype(np.int64),
                               "iteration": fields["iter"].astype(np.int64),
                               "tag": beat_tag(fields["aux"], fields["flags"]),
                               "os_tid": np.full(t.size, os_tid, dtype=np.int64),
                               "source": np.full(t.size, source, dtype=np.int64)}
                if seen != plan["total"]:
                    raise HbtoolError(f"{plan['s'].path}: the file changed while being read: read it again")

            yield from cut_rows(batches(), rows)
            return
        b = self.load_beats(run, process, thread, sources, aux=constructs)
        if constructs:
            b = {"t_ns": b["t_ns"], "construct": construct_keys(b["loop"], b["aux"], b["source"] != 0),
                 "iterations": b["iterations"], "first": b["iteration"]}
        yield {"t_ns": b["t_ns"]} if times_only else b

    def process_wait_pieces(self, run: str, process: int, thread: int | None = None):
        """Every wait record of one process (WAIT_COLUMNS but t), in the order the whole
        reader has them (record order), read from the file again a batch of chunks at a time
        (memory follows the read window); of one thread only, given one."""
        i = self.proc_index[process]
        s = self.scans[i]
        shift = np.int64(self.offsets[i]) - np.int64(s.header["start_mono_ns"])
        has = np.zeros(s.chunk_at["nrec"].size, dtype=bool)
        has[s.waits["chunk"] if thread is None else s.waits["chunk"][s.waits["thread"] == thread]] = True
        chunks = s.chunks["id"][has[s.chunks["id"]]]  # in record order
        names = self.construct_names(run, process)
        for r in _wait_records(s, chunks):
            if thread is not None:
                r = {k: v[r["thread"] == thread] for k, v in r.items()}
                if not r["thread"].size:
                    continue
            auto = (r["flags"] & 0xF) != 0
            yield pd.DataFrame({
                "run": run, "process": process, "thread": r["thread"], "os_tid": r["os_tid"],
                "t_ns": r["t_ns"] + shift, "wait_ns": r["wait_ns"],
                "sync": _coded(r["flags"] >> 4, SYNC_KINDS, "sync"),
                "source": _coded(r["flags"] & 0xF, SOURCES, "source"),
                "construct": _construct_column(construct_keys(r["loop"], None, auto), names)})

    def construct_names(self, run: str, process: int) -> dict[int, str]:
        """Construct id -> name of one process (its NAME records), as the whole reader names them."""
        cache = self.__dict__.setdefault("_names", {})
        if process not in cache:
            s = self.scans[self.proc_index[process]]
            cache[process] = _construct_names(s.other, s.path, [], s.meta.get("exe"))
        return cache[process]

    def wait_pieces(self, run: str, process: int, thread: int, span: tuple | None = None):
        """One thread's waits read from the file again a batch of chunks at a time: (end t_ns
        on the run's clock, wait_ns, sync kind as a Categorical of names) per batch, in file
        order (memory follows the read window, not the thread). span (t0, t1), ns on the run's
        clock: only the chunks holding a wait of the thread that overlaps it are read (the scan
        kept each chunk's earliest start and latest end), so that a long thread read a segment
        at a time reads each chunk about once, not once per segment (a thread of 8 M beats:
        7 whole reads of its waits)."""
        i = self.proc_index[process]
        s = self.scans[i]
        w = s.waits
        shift = np.int64(self.offsets[i]) - np.int64(s.header["start_mono_ns"])
        mine = w["thread"] == thread
        if span is not None:
            mine &= (w["end"].astype(np.int64) + shift > span[0]) & (w["start"].astype(np.int64) + shift < span[1])
        chunks = np.unique(w["chunk"][mine])
        for w in _wait_records(s, chunks):
            keep = w["thread"] == thread
            yield w["t_ns"][keep] + shift, w["wait_ns"][keep], _coded(w["sync"][keep], SYNC_KINDS, "sync")

    def load_waits(self, run: str, process: int, thread: int) -> pd.DataFrame:
        """One thread's waits (wait records), read from the file again: t_ns (its end, on the
        run's clock), wait_ns, sync (the kind's name)."""
        i = self.proc_index[process]
        s = self.scans[i]
        w = s.waits
        chunks = np.unique(w["chunk"][w["thread"] == thread])
        shift = np.int64(self.offsets[i]) - np.int64(s.header["start_mono_ns"])
        ends, lens, kinds = [], [], []
        for w in _wait_records(s, chunks):
            keep = w["thread"] == thread
            ends.append(w["t_ns"][keep])
            lens.append(w["wait_ns"][keep])
            kinds.append(w["sync"][keep])
        end = np.concatenate(ends) if ends else np.empty(0, np.int64)
        order = np.argsort(end, kind="stable")
        return pd.DataFrame({"t_ns": end[order] + shift,
                             "wait_ns": (np.concatenate(lens) if lens else np.empty(0, np.int64))[order],
                             "sync": _coded((np.concatenate(kinds) if kinds else np.empty(0, np.int64))[order],
                                            SYNC_KINDS, "sync")})

    @staticmethod
    def _read_batch(s, part, buf, thread, codes, mine, shift, lo, hi, t_out, seq_out, groups, at, total, fields):
        """Append the beats of one batch of a thread's chunks (buf: each chunk's header and
        counted records, one after the other), and their record fields named in `fields`
        (name -> output array); returns where the next go."""
        c, rdt = s.chunks, record_dtype(s.order)
        n = c["nrec"][part]
        recs = buf.view(rdt)
        heads = np.cumsum(n + 1) - (n + 1)
        valid = np.ones(recs.size, dtype=bool)
        valid[heads] = False
        imp = ~mine[part]
        if codes.size == 1:
            # chunks of nothing but this thread's beats (their times checked by the scan) as they
            # are; in the others, the records that are this thread's beats of this source
            counts = n.copy()
            if imp.any():
                sub = np.flatnonzero(np.repeat(imp, n + 1))   # fields one by one, not whole records
                th = recs["thread"][sub].astype(np.int64)
                th = np.where(th >= 0, th, np.repeat(c["slot"][part][imp], n[imp] + 1))
                rt = recs["t_ns"][sub]
                keep = (valid[sub] & (recs["kind"][sub] == REC_BEAT) & (th == thread)
                        & ((recs["flags"][sub] & 0xF) == codes[0]) & (rt >= lo) & (rt <= hi))
                valid[sub] = keep
                counts[imp] = np.add.reduceat(keep, np.cumsum(n[imp] + 1) - (n[imp] + 1), dtype=np.int64)
            t, sq = recs["t_ns"][valid], recs["seq"][valid]
            got = {name: recs[name][valid] for name in fields}
            groups.append((c["os_tid"][part] * 16 + codes[0], counts))
        else:
            kind, t, th = recs["kind"][valid], recs["t_ns"][valid], recs["thread"][valid]
            src = (recs["flags"][valid] & 0xF).astype(np.int64)
            if (th < 0).any():
                th = np.where(th >= 0, th, np.repeat(c["slot"][part], n))
            keep = (kind == REC_BEAT) & (th == thread) & (t >= lo) & (t <= hi) & np.isin(src, codes)
            sq = recs["seq"][valid][keep]
            got = {name: recs[name][valid][keep] for name in fields}
            t = t[keep]
            groups.append((np.repeat(c["os_tid"][part], n)[keep] * 16 + src[keep], None))
        if at + t.size > total:
            raise HbtoolError(f"{s.path}: the file changed while being read: read it again")
        np.add(t.view(np.int64), shift, out=t_out[at:at + t.size])
        seq_out[at:at + t.size] = sq
        for name, values in got.items():
            fields[name][at:at + t.size] = values
        return at + t.size

    def wait_overlap(self, spans: pd.DataFrame) -> pd.DataFrame:
        """Per thread of `spans` (run, process, thread, first, last: t_ns of its first and
        last beat) with waits: off_ns, the ns of its waits that lie between the two. A chunk's
        waits of a thread that lie wholly inside count as the scan summed them; the chunks
        that hold others are read again, wait by wait."""
        rows = []
        for proc, g in spans.groupby("process", sort=False):
            i = self.proc_index.get(int(proc))
            if i is None:
                continue
            s = self.scans[i]
            shift = np.int64(self.offsets[i]) - np.int64(s.header["start_mono_ns"])
            threads = g["thread"].to_numpy(np.int64)
            lo = dict(zip(threads.tolist(), (g["first"].to_numpy(np.int64) - shift).tolist()))
            hi = dict(zip(threads.tolist(), (g["last"].to_numpy(np.int64) - shift).tolist()))
            w = s.waits
            known = np.isin(w["thread"], threads)
            first = np.array([lo.get(x, 0) for x in w["thread"].tolist()], dtype=np.int64)
            last = np.array([hi.get(x, 0) for x in w["thread"].tolist()], dtype=np.int64)
            inside = known & (w["start"] >= first) & (w["end"] <= last) & (w["wmin"] >= 0)
            again = np.unique(w["chunk"][known & ~inside])
            whole = inside & ~np.isin(w["chunk"], again)
            off: dict[int, int] = {}
            for th, ns in zip(w["thread"][whole].tolist(), w["wait_ns"][whole].tolist()):
                off[th] = off.get(th, 0) + ns
            if again.size:
                for th, ns in _waits_again(s, again, lo, hi):
                    off[th] = off.get(th, 0) + ns
            for th in sorted(set(w["thread"][known].tolist())):
                rows.append((g["run"].iloc[0], int(proc), th, off.get(th, 0)))
        return pd.DataFrame(rows, columns=["run", "process", "thread", "off_ns"])


def _joined(parts: list[dict]) -> dict:
    """Arrays of the same names, one after the other."""
    return parts[0] if len(parts) == 1 else {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def cut_rows(parts, rows: int):
    """Dicts of arrays of the same names (each dict's of one length, `t_ns` among them), cut
    into dicts of `rows` rows one after the other (views into the parts' arrays where they
    can be), then what is left; memory follows a part and `rows`, not the whole."""
    held, n = [], 0
    for p in parts:
        if not p["t_ns"].size:
            continue
        held.append(p)
        n += p["t_ns"].size
        while n >= rows:
            whole = _joined(held)
            yield {k: v[:rows] for k, v in whole.items()}
            n -= rows
            held = [{k: v[rows:] for k, v in whole.items()}] if n else []
    if held:
        yield _joined(held)


def _batches(fh, s: FileScan, c: dict, pick: np.ndarray):
    """(chunks, bytes) of the picked chunks (indices into c), read a window at a time: each
    chunk's header slot and its counted records, one chunk after the other."""
    wbytes = s.window_bytes()
    size = (c["nrec"][pick] + 1) * SLOT_SIZE
    buf = np.zeros(min(wbytes, int(size.sum()) if size.size else SLOT_SIZE), dtype=np.uint8)
    b0 = 0
    while b0 < pick.size:
        b1, used = b0, 0
        while b1 < pick.size and (b1 == b0 or used + int(size[b1]) <= buf.size):
            used += int(size[b1])
            b1 += 1
        if used > buf.size:  # one chunk larger than the window (a tiny window)
            buf = np.zeros(used, dtype=np.uint8)
        at = 0
        for ci, nb in zip(pick[b0:b1].tolist(), size[b0:b1].tolist()):
            if _pread_into(fh, buf[at:at + nb], int(c["offset"][ci])) < nb:
                raise HbtoolError(f"{s.path}: the file shrank while being read: read it again")
            at += nb
        yield pick[b0:b1], buf[:used]
        b0 = b1


def _wait_records(s: FileScan, chunks: np.ndarray):
    """Per batch of these chunks (numbers in file order), their wait records read from the
    file again: arrays thread, t_ns (the end, on the file's clock), wait_ns, sync (kind),
    flags, loop, os_tid."""
    at = s.chunk_at
    rdt = record_dtype(s.order)
    start = int(s.header["start_mono_ns"])
    c = {"offset": at["offset"], "nrec": at["nrec"]}
    with _opened(s) as fh:
        for part, buf in _batches(fh, s, c, chunks):
            n = at["nrec"][part]
            recs = buf.view(rdt)
            rec = np.ones(recs.size, dtype=bool)
            rec[np.cumsum(n + 1) - (n + 1)] = False
            slot = np.repeat(at["slot"][part], n + 1)
            w = rec & (recs["kind"] == REC_WAIT) & ~bad_times(recs["kind"], recs["t_ns"], start)
            w = np.flatnonzero(w)   # fields gathered one by one: whole records cost 30 times as much
            th = recs["thread"][w].astype(np.int64)
            flags = recs["flags"][w].astype(np.int64)
            yield {"thread": np.where(th >= 0, th, slot[w]), "t_ns": recs["t_ns"][w].astype(np.int64),
                   "wait_ns": (recs["iter"][w].astype(np.uint32).astype(np.int64) << 32) | recs["aux"][w].astype(np.int64),
                   "sync": flags >> 4, "flags": flags, "loop": recs["loop"][w],
                   "os_tid": np.repeat(at["os_tid"][part], n + 1)[w]}


def _waits_again(s: FileScan, chunks: np.ndarray, lo: dict, hi: dict):
    """(thread, ns within its first and last beat) of each wait in these chunks (numbers in
    file order) of a thread in lo and hi, read from the file again."""
    for w in _wait_records(s, chunks):
        for x, e, d in zip(w["thread"].tolist(), w["t_ns"].tolist(), w["wait_ns"].tolist()):
            if x in lo:
                over = min(e, hi[x]) - max(e - d, lo[x])
                if over > 0:
                    yield x, over


def _group_column(groups: list) -> np.ndarray:
    """Per beat read by _collect: os_tid * 16 + source."""
    if not groups:
        return np.zeros(0, dtype=np.int64)
    return np.concatenate([np.repeat(g, cnt) if cnt is not None else g for g, cnt in groups]).astype(np.int64)


def _beat_order(seq_out, groups: list, t_out, group=None):
    """A thread's beats (read by _collect, in record order) in beats-table order, by seq
    (unwrapped per OS thread and source), then time: (the unwrapped seq, or None when not
    needed and `group` not given; the order, or None when the records are in it already)."""
    if t_out.size > 1:
        vals = np.concatenate([g for g, _ in groups])
        one = vals.size > 0 and vals.min() == vals.max()
        if not (one and (np.subtract(seq_out[1:], seq_out[:-1], dtype=np.int64) > 0).all()):
            # not simply one sequence counting up: unwrap per OS thread and source, sort
            seq = _unwrap_seq(seq_out, group if group is not None else _group_column(groups))
            if not _sorted_by(seq, t_out):
                return seq, np.lexsort((t_out, seq))
            return seq, None
    return (seq_out.astype(np.int64) if group is not None else None), None


@contextlib.contextmanager
def _opened(s: FileScan):
    """The scan's file: kept open, or (a run of many files) opened again for this read."""
    if s.fh is not None:
        yield s.fh
        return
    try:
        fh = open(s.path, "rb")
    except OSError as exc:
        raise HbtoolError(f"{s.path}: cannot read ({exc.strerror or exc})") from exc
    with fh:
        yield fh


def _sorted_by(seq: np.ndarray, t: np.ndarray) -> bool:
    ds = np.diff(seq)
    if (ds < 0).any():
        return False
    return not ((ds == 0) & (np.diff(t) < 0)).any()


def read_hbt_stream(paths: list[str], run: str) -> StreamedTrace:
    """Read binary trace files of one run (one file per process) in bounded memory: a
    StreamedTrace whose beats stay in the files (see the module's docstring)."""
    scans = []
    many = len(paths) > KEEP_OPEN
    try:
        for p in paths:
            scans.append(scan_file(p))
            if many:  # files are opened again when read (descriptors are not unlimited)
                scans[-1].fh.close()
                scans[-1].fh = None
        return _assemble(HbtStream(scans, run))
    except BaseException:
        for s in scans:
            if s.fh is not None:
                s.fh.close()
        raise


def _assemble(stream: HbtStream) -> StreamedTrace:
    run = stream.run
    warnings = [w for s in stream.scans for w in s.warnings]
    stats, events, monitor, wstats, cpu, memory, sched, procmeta = [], [], [], [], [], [], [], []
    live = []
    for process, i in enumerate(stream.order):
        s = stream.scans[i]
        hdr, r, br = s.header, s.other, s.runs
        proc = hdr["rank"] if hdr["rank"] >= 0 else process
        stream.proc_index[proc] = i
        shift = np.int64(stream.offsets[i]) - np.int64(hdr["start_mono_ns"])
        stats.append(_stats(br, run, proc, shift))
        wstats.append(_wait_stats(s.waits, run, proc))
        # the user thread number of an OS thread: the one its first beat carries (record order)
        o = np.lexsort((br["pos"], br["seq"], br["slot"]))
        btid, first = np.unique(br["os_tid"][o], return_index=True)
        tid_thread = dict(zip(btid.tolist(), br["thread"][o][first].tolist()))
        t_ns = r["t_ns"].astype(np.int64) + shift
        thread = np.where(r["thread"] >= 0, r["thread"], r["thread_slot"]).astype(np.int64)
        source_code = (r["flags"] & 0xF).astype(np.int64)
        auto = source_code != 0
        need_names = (s.waits["source"] != 0).any() or (br["source"] != 0).any()
        if need_names:  # decoded (as the whole reader does) for its warnings; waits and beats are read later
            _construct_names(r, s.path, warnings, s.meta.get("exe"))
        construct = _construct_column(construct_keys(r["loop"], None, auto), {})
        sel = np.ones(r["kind"].size, dtype=bool)
        _, e, m, c = side_frames(r, sel, t_ns, thread, source_code, construct, tid_thread, run, proc, s.path, warnings)
        events.append(e)
        if m is not None:
            monitor.append(m)
        if c is not None:
            cpu.append(c)
        mem = memory_frame(r, sel, t_ns, thread, run, proc)
        if mem is not None:
            memory.append(mem)
        sc = sched_frame(r, sel, t_ns, thread, run, proc)
        if sc is not None:
            sched.append(sc)
        pm = process_meta(s.path, proc, hdr, s.meta, stream.offsets[i])
        if s.live:
            pm["live"] = True
            live.append(proc)
        procmeta.append(pm)
    meta = run_meta([s.path for s in stream.scans], stream.zero_mono, procmeta)
    if live:
        meta["live"] = live
    return StreamedTrace(
        source=stream,
        stats=pd.concat(stats, ignore_index=True),
        events=pd.concat(events, ignore_index=True),
        runs={run: meta},
        warnings=warnings,
        wait_stats=pd.concat(wstats, ignore_index=True),
        **joined_tables({"monitor": monitor, "cpu": cpu, "memory": memory, "sched": sched}),
    )


def _wait_stats(wr: dict, run: str, proc: int) -> pd.DataFrame:
    """Waits and their total time per (thread, OS thread, source, sync) of one process."""
    if not wr["waits"].size:
        return empty_frame(WAIT_STATS_COLUMNS)
    df = pd.DataFrame({k: wr[k] for k in ("thread", "os_tid", "source", "sync", "waits", "wait_ns")})
    g = df.groupby(["thread", "os_tid", "source", "sync"], sort=True).sum().reset_index()
    return pd.DataFrame({
        "run": run, "process": proc, "thread": g["thread"].to_numpy(np.int64), "os_tid": g["os_tid"].to_numpy(np.int64),
        "source": _coded(g["source"].to_numpy(np.int64), SOURCES, "source"),
        "sync": _coded(g["sync"].to_numpy(np.int64), SYNC_KINDS, "sync"),
        "waits": g["waits"].to_numpy(np.int64), "wait_ns": g["wait_ns"].to_numpy(np.int64),
    })


def _stats(br: dict, run: str, proc: int, shift: np.int64) -> pd.DataFrame:
    """Beats, first and last time per (thread, OS thread, source) of one process."""
    if not br["beats"].size:
        return empty_frame(STATS_COLUMNS)
    df = pd.DataFrame({"thread": br["thread"], "os_tid": br["os_tid"], "source": br["source"], "beats": br["beats"],
                       "tmin": br["tmin"], "tmax": br["tmax"]})
    g = df.groupby(["thread", "os_tid", "source"], sort=True).agg(
        beats=("beats", "sum"), tmin=("tmin", "min"), tmax=("tmax", "max")).reset_index()
    return pd.DataFrame({
        "run": run, "process": proc, "thread": g["thread"].to_numpy(np.int64), "os_tid": g["os_tid"].to_numpy(np.int64),
        "source": [SOURCES.get(int(c), f"source {int(c)}") for c in g["source"]],
        "beats": g["beats"].to_numpy(np.int64),
        "first_s": (g["tmin"].to_numpy(np.uint64).astype(np.int64) + shift) / 1e9,
        "last_s": (g["tmax"].to_numpy(np.uint64).astype(np.int64) + shift) / 1e9,
        "first_ns": g["tmin"].to_numpy(np.uint64).astype(np.int64) + shift,
        "last_ns": g["tmax"].to_numpy(np.uint64).astype(np.int64) + shift,
    })


__all__ = ["read_hbt_stream", "scan_file", "HbtStream", "FileScan", "process_is_live", "cut_rows"]
