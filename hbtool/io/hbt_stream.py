"""Bounded-memory reading of the tracer's binary files: the beats stay in the file.

`hbtool info` and `hbtool diagnose` need, per thread, a few numbers (beats, first and
last time, OS threads, time waited) and, for diagnose, one thread's beat times at a time.
This reader scans each file once in windows of config.HBT_READ_WINDOW_BYTES, keeping only
those per-thread numbers and the records that are neither beats nor waits (lifecycle,
the monitor's, names: a few per thread); a thread's beat times are read from the file
again when an analysis asks for them (:meth:`HbtStream.load_times`). Memory so follows
the window and the largest thread, not the trace.

The layout is docs/formats.md's (version 1): chunks of ``chunk_size`` bytes, each
owned by one thread slot, a chunk's records ending at its first empty slot, a thread's
records in (thread_slot, chunk_seq, slot) order. Nothing else is assumed: chunks of
one thread may lie anywhere in the chunk area, in any order.

A live trace (its process still runs on this host) is read as a snapshot: the chunk
area the header declared when the file was opened, each chunk's records up to its first
empty slot as first seen (the tracer stores a slot's kind last, with release ordering,
so a slot seen with a kind was complete when seen). A thread's chunk that a later chunk
of the same thread follows is counted again: it was seen while being filled, and was
full before its successor, seen later, began. The window is then read a second time and
the records' fields taken from that copy, which cannot hold a half-written record (a
record is never rewritten). Each thread's records are so a prefix of all it will write;
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
from ..model.heartbeats import MONITOR_COLUMNS, STATS_COLUMNS, WAIT_STATS_COLUMNS, StreamedTrace
from . import hbt
from .hbt import (HEADER_SIZE, REC_BEAT, REC_WAIT, SLOT_SIZE, SOURCES, SYNC_KINDS, _coded, _construct_column,
                  _construct_names, _unwrap_seq, bad_time_warning, bad_times, chunk_header_dtype,
                  metadata_text, time_bounds, used_chunks, process_meta, process_order, record_dtype, run_meta, run_offsets, side_frames)


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
    chunk_size: int
    chunks: dict = field(default_factory=dict)   # used chunks in record order: offset, slot, seq, os_tid, nrec
    runs: dict = field(default_factory=dict)     # beats per (chunk, thread, source): see _beat_runs
    other: dict = field(default_factory=dict)    # other records in record order (as hbt._parse_chunks)
    waits: dict = field(default_factory=dict)    # waits per (chunk, thread, source, sync): count, total ns
    warnings: list = field(default_factory=list)

    @property
    def spc(self) -> int:
        return self.chunk_size // SLOT_SIZE


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
    scan = FileScan(path, fh, header, meta, order, process_is_live(header, meta), int(hdr["chunk_size"]))
    _scan_chunks(scan, size)
    if header["lost_records"]:
        scan.warnings.append(f"{path}: the tracer dropped {header['lost_records']} records (file size cap reached)")
    return scan


def _scan_chunks(scan: FileScan, size: int) -> None:
    path, h, chunk, spc = scan.path, scan.header, scan.chunk_size, scan.spc
    do, claimed = int(h["data_offset"]), int(h["data_length"])
    if claimed % chunk:
        raise TraceFormatError(
            f"{path}: corrupted header (data length {claimed} is not a multiple of the chunk size {chunk})")
    avail = size - do
    if claimed > avail and not scan.live:
        scan.warnings.append(f"{path}: file is {claimed - avail} bytes shorter than its header says "
                             f"(cut short?): reading the records that are there")
    area = min(claimed, avail)
    nslots = area // SLOT_SIZE
    if area % SLOT_SIZE and not scan.live:
        scan.warnings.append(f"{path}: the last record is half-written ({area % SLOT_SIZE} of {SLOT_SIZE} bytes): "
                             f"read up to the last whole record")
    nchunks = -(-nslots // spc)
    rdt, hdt = record_dtype(scan.order), chunk_header_dtype(scan.order)
    per = max(1, config.HBT_READ_WINDOW_BYTES // chunk)
    buf = np.zeros(min(per, max(nchunks, 1)) * chunk, dtype=np.uint8)
    heads_all = np.zeros(nchunks, dtype=hdt)
    nrec_all = np.full(nchunks, -1, dtype=np.int64)  # -1: chunk not used (or not read)
    start = int(h["start_mono_ns"])
    runs, others, waits, bad_time = [], [], [], 0

    def windows(strict: bool):
        """(first chunk, chunks, bytes) of each window, read into buf."""
        for c0 in range(0, nchunks, per):
            nch = min(per, nchunks - c0)
            want = min(nch * spc, nslots - c0 * spc) * SLOT_SIZE
            got = _pread_into(scan.fh, buf[:want], do + c0 * chunk)
            if got < want and strict:
                # a live program's clean end cuts its file to the space used: no counted record is lost
                n = nrec_all[c0:c0 + nch]
                used = np.flatnonzero(n >= 0)
                if used.size and got < int(used[-1]) * chunk + (int(n[used[-1]]) + 1) * SLOT_SIZE:
                    raise HbtoolError(f"{path}: the file shrank while being read: read it again")
                buf[got:want] = 0
                got = want
            if got < want:
                if not scan.live:
                    scan.warnings.append(f"{path}: the file shrank while being read (cut short by another "
                                         f"program?): reading the records that were there")
                nch = -(-(got // SLOT_SIZE) // spc)
                want = got // SLOT_SIZE * SLOT_SIZE
            buf[want:nch * chunk] = 0  # a chunk cut short ends with empty slots
            if nch:
                yield c0, nch, buf[:nch * chunk]
            if got < want:
                return

    if scan.live:
        # first look: which slots hold a record (a slot with a kind was complete when seen)
        for c0, nch, raw in windows(strict=False):
            heads_all[c0:c0 + nch], nrec_all[c0:c0 + nch] = _chunk_counts(raw, nch, chunk, spc, hdt, rdt, path, do, c0)
        _complete_earlier_chunks(scan, heads_all, nrec_all, do, hdt, rdt)
    for c0, nch, raw in windows(strict=scan.live):
        if scan.live:  # the fields from a second copy, read after every counted slot was seen complete
            heads = np.ascontiguousarray(raw.reshape(nch, chunk)[:, :SLOT_SIZE]).view(hdt).reshape(nch)
            nrec = nrec_all[c0:c0 + nch]
        else:
            heads, nrec = _chunk_counts(raw, nch, chunk, spc, hdt, rdt, path, do, c0)
            nrec_all[c0:c0 + nch] = nrec
        heads_all[c0:c0 + nch] = heads
        bad_time += _window_records(raw.view(rdt).reshape(nch, spc), nrec, c0, spc, start, heads, runs, others,
                                    waits)
    if bad_time:
        scan.warnings.append(bad_time_warning(path, bad_time))
    used = np.flatnonzero(nrec_all >= 0)
    heads_used = heads_all[used]
    order = np.lexsort((heads_used["chunk_seq"], heads_used["thread_slot"]))
    idx = used[order]
    tid = heads_all["os_tid"].astype(np.int64)
    tid = np.where(tid == 0, -1, tid)  # 0: unknown (converted files)
    scan.chunks = {"offset": do + idx * chunk, "slot": heads_all["thread_slot"][idx].astype(np.int64),
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
    scan.other = _other_records(others, heads_all, tid, rdt)
    keys = ["chunk", "thread", "source", "sync", "waits", "wait_ns"]
    scan.waits = {k: np.concatenate([w[k] for w in waits]) if waits else np.zeros(0, dtype=np.int64) for k in keys}
    scan.waits["os_tid"] = tid[scan.waits["chunk"]]


def _complete_earlier_chunks(scan: FileScan, heads, nrec, do: int, hdt, rdt) -> None:
    """A live file is read over a while: a thread's chunk may have been seen while it was
    being filled, and its next chunk later, already in use. A chunk followed by another of
    the same thread was full before that one began, so it is read again and counted anew:
    each thread's records in the snapshot are then a prefix of all it will write."""
    chunk, spc = scan.chunk_size, scan.spc
    idx = np.flatnonzero(nrec >= 0)
    slot = heads["thread_slot"][idx]
    idx = idx[np.lexsort((heads["chunk_seq"][idx], slot))]
    slot = heads["thread_slot"][idx]
    followed = np.r_[slot[1:] == slot[:-1], False]
    one = np.zeros(chunk, dtype=np.uint8)
    for ci in idx[followed & (nrec[idx] < spc - 2)].tolist():
        if _pread_into(scan.fh, one, do + ci * chunk) < chunk:
            raise HbtoolError(f"{scan.path}: the file shrank while being read: read it again")
        nrec[ci] = _chunk_counts(one, 1, chunk, spc, hdt, rdt, scan.path, do, ci)[1][0]


def _chunk_counts(raw, nch, chunk, spc, hdt, rdt, path, do, c0):
    """Chunk headers of a window, and each chunk's records (-1: chunk not used)."""
    heads = np.ascontiguousarray(raw.reshape(nch, chunk)[:, :SLOT_SIZE]).view(hdt).reshape(nch)
    used = used_chunks(heads, spc, path, do + c0 * chunk, chunk)
    empty = raw.view(rdt).reshape(nch, spc)["kind"][:, 1:] == 0
    nrec = np.where(empty.any(axis=1), empty.argmax(axis=1), spc - 1)
    return heads, np.where(used, nrec, -1)


def _window_records(recs, nrec, c0, spc, start, heads, runs, others, waits) -> int:
    """Beats of a window (`recs`: chunks x slots, a view of our own buffer) summarised as
    runs, other records kept; returns the records skipped for a corrupted time stamp.

    Most chunks hold nothing but beats of one thread and source with plausible times
    ("pure"): those are summarised with whole-chunk reductions; the others record by
    record."""
    kind = recs["kind"]
    pos = np.arange(spc)
    kind[pos[None, :] > nrec[:, None]] = 0  # past a chunk's records (or in an unused chunk): nothing
    kind[:, 0] = 0                          # the chunk header
    isb = kind == REC_BEAT
    nb = isb.sum(axis=1)
    th, t = recs["thread"], recs["t_ns"]
    src = recs["flags"] & 0xF
    th1, src1 = th[:, 1], src[:, 1]
    notb = ~isb
    same = ((th == th1[:, None]) | notb).all(axis=1) & ((src == src1[:, None]) | notb).all(axis=1)
    tmin = np.where(isb, t, np.uint64(np.iinfo(np.uint64).max)).min(axis=1)
    tmax = np.where(isb, t, np.uint64(0)).max(axis=1)
    lo, hi = time_bounds(start)
    pure = (nb == nrec) & (nrec > 0) & same & (tmin >= lo) & (tmax <= hi)
    p = np.flatnonzero(pure)
    if p.size:
        slot = heads["thread_slot"][p].astype(np.int64)
        tp = th1[p].astype(np.int64)
        runs.append({"chunk": c0 + p, "thread": np.where(tp >= 0, tp, slot), "source": src1[p].astype(np.int64),
                     "pos": np.ones(p.size, dtype=np.int64), "beats": nrec[p].astype(np.int64),
                     "tmin": tmin[p], "tmax": tmax[p]})
    rest = np.flatnonzero(~pure & (nrec > 0))
    if not rest.size:
        return 0
    n = nrec[rest]
    idx = np.arange(int(n.sum()), dtype=np.int64) + np.repeat(rest * spc + 1 - (np.cumsum(n) - n), n)
    flat = recs.reshape(-1)
    kind = flat["kind"][idx]
    t = flat["t_ns"][idx]
    bad = bad_times(kind, t, start)
    beat = (kind == REC_BEAT) & ~bad
    b = idx[beat]
    if b.size:
        ci = b // spc
        th = flat["thread"][b].astype(np.int64)
        th = np.where(th >= 0, th, heads["thread_slot"][ci].astype(np.int64))
        src = (flat["flags"][b] & 0xF).astype(np.int64)
        tb = t[beat]
        brk = np.empty(b.size, dtype=bool)
        brk[0] = True
        brk[1:] = (ci[1:] != ci[:-1]) | (th[1:] != th[:-1]) | (src[1:] != src[:-1])
        st = np.flatnonzero(brk)
        runs.append({"chunk": c0 + ci[st], "thread": th[st], "source": src[st], "pos": b[st] % spc,
                     "beats": np.diff(np.r_[st, b.size]), "tmin": np.minimum.reduceat(tb, st),
                     "tmax": np.maximum.reduceat(tb, st)})
    w = idx[(kind == REC_WAIT) & ~bad]
    if w.size:  # waits summed (an OpenMP program has about as many as beats)
        ci = w // spc
        th = flat["thread"][w].astype(np.int64)
        th = np.where(th >= 0, th, heads["thread_slot"][ci].astype(np.int64))
        fl = flat["flags"][w].astype(np.int64)
        ns = (flat["iter"][w].astype(np.uint32).astype(np.int64) << 32) | flat["aux"][w].astype(np.int64)
        brk = np.empty(w.size, dtype=bool)
        brk[0] = True
        brk[1:] = (ci[1:] != ci[:-1]) | (th[1:] != th[:-1]) | (fl[1:] != fl[:-1])
        st = np.flatnonzero(brk)
        waits.append({"chunk": c0 + ci[st], "thread": th[st], "source": fl[st] & 0xF, "sync": fl[st] >> 4,
                      "waits": np.diff(np.r_[st, w.size]), "wait_ns": np.add.reduceat(ns, st)})
    o = idx[(kind != REC_BEAT) & (kind != REC_WAIT) & ~bad]
    if o.size:
        others.append((c0 + o // spc, o % spc, flat[o]))
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

    def close(self) -> None:
        for s in self.scans:
            if s.fh is not None:
                s.fh.close()

    def materialize(self) -> HeartbeatTrace:
        """The whole trace, as hbt.read_hbt reads it (every beat in memory)."""
        return hbt.read_hbt([s.path for s in self.scans], self.run, files=[s.fh for s in self.scans])

    def load_times(self, run: str, process: int, thread: int, sources: list[str]) -> np.ndarray:
        """The beat times (s) of one thread's beats of the given sources, in the order the
        trace's beats table has them (by seq, then time)."""
        i = self.proc_index[process]
        s = self.scans[i]
        names = {name: c for c, name in SOURCES.items()}
        codes = np.array([names[x] if x in names else int(x.split()[-1]) for x in sources], dtype=np.int64)
        r = s.runs
        sel = (r["thread"] == thread) & np.isin(r["source"], codes)
        total = int(r["beats"][sel].sum())
        c = s.chunks
        mine = (c["pure_thread"] == thread) & np.isin(c["pure_source"], codes)
        others = (c["pure_thread"] >= 0) & ~mine  # pure chunks of another thread or source: not read
        pick = np.flatnonzero(np.isin(c["slot"], np.unique(r["slot"][sel])) & (c["nrec"] > 0) & ~others)
        spc = s.spc
        per = max(1, config.HBT_READ_WINDOW_BYTES // s.chunk_size)
        buf = np.zeros(min(per, max(pick.size, 1)) * s.chunk_size, dtype=np.uint8)
        start = int(s.header["start_mono_ns"])
        shift = np.int64(self.offsets[i]) - np.int64(start)
        lo, hi = time_bounds(start)
        pos = np.arange(spc)
        t_out = np.empty(total, dtype=np.int64)
        seq_out = np.empty(total, dtype=np.uint32)
        groups = []  # per record: os_tid * 16 + source, for the unwrap of seq
        at = 0
        with _opened(s) as fh:
            for b0 in range(0, pick.size, per):
                at = self._read_batch(fh, s, pick[b0:b0 + per], buf, thread, codes, mine, shift, lo, hi, pos,
                                      t_out, seq_out, groups, at, total)
        return _finish(s, t_out, seq_out, groups, at, total)

    @staticmethod
    def _read_batch(fh, s, part, buf, thread, codes, mine, shift, lo, hi, pos, t_out, seq_out, groups, at, total):
        """Read one batch of a thread's chunks and append its beats; returns where the next go."""
        c, spc, rdt = s.chunks, s.spc, record_dtype(s.order)
        for k, ci in enumerate(part.tolist()):
            want = s.chunk_size
            got = _pread_into(fh, buf[k * want:(k + 1) * want], int(c["offset"][ci]))
            if got < (int(c["nrec"][ci]) + 1) * SLOT_SIZE:
                raise HbtoolError(f"{s.path}: the file shrank while being read: read it again")
            buf[k * want + got:(k + 1) * want] = 0
        recs = buf[:part.size * s.chunk_size].view(rdt).reshape(part.size, spc)
        n = c["nrec"][part]
        valid = (pos[None, :] >= 1) & (pos[None, :] <= n[:, None])
        imp = np.flatnonzero(~mine[part])
        if codes.size == 1:
            # chunks of nothing but this thread's beats (their times checked by the scan) as they
            # are; in the others, the records that are this thread's beats of this source
            if imp.size:
                sub = recs[imp]
                th = sub["thread"].astype(np.int64)
                th = np.where(th >= 0, th, c["slot"][part][imp][:, None])
                valid[imp] &= ((sub["kind"] == REC_BEAT) & (th == thread) & ((sub["flags"] & 0xF) == codes[0])
                               & (sub["t_ns"] >= lo) & (sub["t_ns"] <= hi))
            t, sq = recs["t_ns"][valid], recs["seq"][valid]
            groups.append((c["os_tid"][part] * 16 + codes[0], valid.sum(axis=1)))
        else:
            kind, t, th = recs["kind"][valid], recs["t_ns"][valid], recs["thread"][valid]
            src = (recs["flags"][valid] & 0xF).astype(np.int64)
            if (th < 0).any():
                th = np.where(th >= 0, th, np.repeat(c["slot"][part], n))
            keep = (kind == REC_BEAT) & (th == thread) & (t >= lo) & (t <= hi) & np.isin(src, codes)
            sq = recs["seq"][valid][keep]
            t = t[keep]
            groups.append((np.repeat(c["os_tid"][part], n)[keep] * 16 + src[keep], None))
        if at + t.size > total:
            raise HbtoolError(f"{s.path}: the file changed while being read: read it again")
        np.add(t.view(np.int64), shift, out=t_out[at:at + t.size])
        seq_out[at:at + t.size] = sq
        return at + t.size


def _finish(s: FileScan, t_out, seq_out, groups: list, at: int, total: int) -> np.ndarray:
    """A thread's beat times (s) in beats-table order: by seq (unwrapped), then time."""
    if at != total:
        raise HbtoolError(f"{s.path}: the file changed while being read: read it again")
    if total > 1:
        vals = np.concatenate([g for g, _ in groups])
        one = vals.size > 0 and vals.min() == vals.max()
        if not (one and (np.subtract(seq_out[1:], seq_out[:-1], dtype=np.int64) > 0).all()):
            # not simply one sequence counting up: unwrap per OS thread and source, sort
            group = np.concatenate([np.repeat(g, cnt) if cnt is not None else g for g, cnt in groups])
            seq = _unwrap_seq(seq_out, group)
            if not _sorted_by(seq, t_out):
                t_out = t_out[np.lexsort((t_out, seq))]
    out = t_out.astype(np.float64)
    out /= 1e9
    return out


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
    stats, events, monitor, wstats, procmeta = [], [], [], [], []
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
        construct = _construct_column(r["loop"], auto, {})
        sel = np.ones(r["kind"].size, dtype=bool)
        _, e, m = side_frames(r, sel, t_ns, thread, source_code, construct, tid_thread, run, proc, s.path, warnings)
        events.append(e)
        if m is not None:
            monitor.append(m)
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
        monitor=pd.concat(monitor, ignore_index=True) if monitor else empty_frame(MONITOR_COLUMNS),
        wait_stats=pd.concat(wstats, ignore_index=True),
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
    })


__all__ = ["read_hbt_stream", "scan_file", "HbtStream", "FileScan", "process_is_live"]
