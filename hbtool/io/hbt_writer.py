"""Writer of the tracer's binary format (docs/formats.md), for `hbtool convert`: one file
per process, one set of chunks per thread, the names of automatic beats' constructs in a
chunk of their own. hbtool.io.hbt reads what this writes."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import numpy as np
import pandas as pd

from ..model import BEAT_COLUMNS, WAIT_COLUMNS, HeartbeatTrace, empty_frame
from ..model.heartbeats import StreamedTrace, chunk_iterations_of
from .hbt import (CHUNK_MAGIC, CHUNK_SIZE, DATA_OFFSET, ENDIAN_MARK, FLAG_CONVERTED, HEADER_SIZE, KIND_CODES, MAGIC,
                  MAX_NAME_FRAGMENTS, META_CAPACITY, NAME_CONSTRUCT, NAME_FRAGMENT_BYTES, NAME_LAST, REC_BEAT, REC_NAME,
                  REC_WAIT, SLOT_SIZE, SOURCES, SUFFIX, SYNC_KINDS, UNIT_SIZE, VERSION, chunk_header_dtype, header_dtype,
                  record_dtype)

_STANDIN = 1 << 40  # grouping key for threads whose OS id is unknown (written as 0)


class _Names:
    """Construct ids (from 1) of a process's automatic beats and waits, given as they come."""

    def __init__(self):
        self.ids: dict[str, int] = {}

    def add(self, *frames: pd.DataFrame) -> None:
        for df in frames:
            for c in df["construct"].astype(str).unique():
                if c and c not in self.ids:
                    self.ids[c] = len(self.ids) + 1


def _lookup(col: pd.Series, mapping: dict) -> np.ndarray:
    """mapping[str(value)] for each value of col (0 where it has none), per distinct value
    rather than per row."""
    codes, uniques = pd.factorize(col, use_na_sentinel=True)
    vals = np.array([mapping.get(str(u), 0) for u in uniques] + [0], dtype=np.int64)
    return vals[codes]   # the sentinel -1 takes the appended 0


class _Chunks:
    """Chunks of one process's records, one set per OS thread (or user thread, when the OS
    thread is unknown), slots numbered as the threads first come, each chunk passed to
    `out` as it is filled. A thread's records may come in pieces, in time order: the
    records that do not fill a chunk wait for the next piece, or for close()."""

    def __init__(self, ids: dict[str, int], t0: int, first_slot: int, out):
        self.ids, self.t0, self.out = ids, t0, out
        self.slots = first_slot
        self.chunks = 0
        self.open: dict[int, list] = {}   # tid -> [slot, next chunk seq, user thread, records left over]
        self.spc = CHUNK_SIZE // SLOT_SIZE

    def add(self, beats: pd.DataFrame, events: pd.DataFrame, waits: pd.DataFrame) -> None:
        rdt = record_dtype("<")
        # an OS thread id for every row: the recorded one, else a stand-in from the user thread
        def tids(df):
            return np.where(df["os_tid"].to_numpy() > 0, df["os_tid"].to_numpy(), _STANDIN + df["thread"].to_numpy())

        codes = {v: k for k, v in SOURCES.items()}

        def src(df):
            return _lookup(df["source"], codes)

        def construct(df, fallback):
            return np.where(src(df) != 0, _lookup(df["construct"], self.ids), fallback)

        def records(df, **fields):
            return pd.DataFrame({"tid": tids(df), "t_ns": df["t_ns"].to_numpy(), "thread": df["thread"].to_numpy(),
                                 **fields})

        rows = []
        if len(beats):
            auto = src(beats) != 0
            # a loop chunk's beat keeps its count of iterations (its tag) as the tracer wrote
            # it: event 1 of the openmp source; the other automatic beats' aux is in their
            # construct's name
            tag = beats["tag"].to_numpy()
            chunk = chunk_iterations_of(beats) > 0
            rows.append(records(beats, seq=beats["seq"].to_numpy() & 0xFFFFFFFF,
                                loop=construct(beats, beats["loop"].to_numpy()), iter=beats["iteration"].to_numpy(),
                                aux=np.where(auto & ~chunk, 0, tag & 0xFFFFFFFF), kind=REC_BEAT,
                                flags=src(beats) | np.where(chunk, 1 << 4, 0)))
        if len(waits):
            sync = _lookup(waits["sync"], {v: k for k, v in SYNC_KINDS.items()})
            w = waits["wait_ns"].to_numpy().astype(np.int64)
            rows.append(records(waits, seq=0, loop=construct(waits, 0), iter=(w >> 32).astype(np.int64),
                                aux=w & 0xFFFFFFFF, kind=REC_WAIT, flags=src(waits) | (sync << 4)))
        if len(events):
            rows.append(records(events, seq=0, loop=0, iter=0, aux=events["detail"].to_numpy() & 0xFFFFFFFF,
                                kind=_lookup(events["kind"], KIND_CODES),
                                flags=events["flags"].to_numpy() & 0xFFFF))
        if not rows:
            return
        allrows = pd.concat(rows, ignore_index=True) if len(rows) > 1 else rows[0]
        allrows = allrows[allrows["kind"] != 0]  # event kinds the format has no code for
        allrows = allrows.sort_values(["tid", "t_ns"], kind="stable")
        for tid, grp in allrows.groupby("tid", sort=False):
            if tid not in self.open:
                self.open[tid] = [self.slots, 0, int(grp["thread"].iloc[0]), np.zeros(0, dtype=rdt)]
                self.slots += 1
            recs = np.zeros(len(grp), dtype=rdt)
            recs["t_ns"] = (grp["t_ns"].to_numpy() - self.t0).astype(np.uint64)
            for name in ("seq", "thread", "loop", "iter", "aux", "kind", "flags"):
                recs[name] = grp[name].to_numpy()
            state = self.open[tid]
            recs = np.concatenate([state[3], recs]) if len(state[3]) else recs
            full = len(recs) // (self.spc - 1) * (self.spc - 1)
            self._put(tid, recs[:full])
            state[3] = recs[full:].copy()

    def close(self) -> None:
        """The records left over, in each thread's last chunk; the threads' sets end here."""
        for tid in list(self.open):
            self._put(tid, self.open[tid][3])
        self.open.clear()

    def _put(self, tid: int, recs: np.ndarray) -> None:
        slot, cseq, user, _ = self.open[tid]
        rdt, hdt, spc = record_dtype("<"), chunk_header_dtype("<"), self.spc
        for start in range(0, len(recs), spc - 1):
            part = recs[start : start + spc - 1]
            block = np.zeros(spc, dtype=rdt)
            block[1 : 1 + len(part)] = part
            head = np.zeros(1, dtype=hdt)
            head["os_tid"] = tid if 0 <= tid < _STANDIN else 0  # 0: unknown
            head["thread_slot"] = slot
            head["chunk_seq"] = cseq
            head["user_thread"] = user
            head["capacity"] = spc
            head["magic"] = CHUNK_MAGIC
            raw = bytearray(block.tobytes())
            raw[:SLOT_SIZE] = head.tobytes()
            self.out(bytes(raw))
            self.chunks += 1
            cseq += 1
        self.open[tid][1] = cseq


def _first_block(meta: dict[str, str], t0: int, nchunks: int, pid: int, rank: int) -> bytes:
    """The file's header and metadata, padded to DATA_OFFSET."""
    text = "".join(f"{k}={str(v).replace(chr(10), ' ')}\n" for k, v in meta.items()).encode()
    text = text[:META_CAPACITY].rsplit(b"\n", 1)[0] + b"\n" if len(text) > META_CAPACITY else text
    hdr = np.zeros(1, dtype=header_dtype("<"))
    hdr["magic"] = MAGIC
    hdr["version"] = VERSION
    hdr["endian"] = ENDIAN_MARK
    hdr["header_size"] = HEADER_SIZE
    hdr["slot_size"] = SLOT_SIZE
    hdr["chunk_size"] = CHUNK_SIZE
    hdr["unit_size"] = UNIT_SIZE
    hdr["flags"] = FLAG_CONVERTED
    hdr["meta_offset"] = HEADER_SIZE
    hdr["meta_length"] = len(text)
    hdr["meta_capacity"] = META_CAPACITY
    hdr["clock_id"] = 255
    hdr["data_offset"] = DATA_OFFSET
    hdr["data_length"] = nchunks * CHUNK_SIZE
    hdr["start_mono_ns"] = np.uint64(-t0)
    hdr["pid"] = pid
    hdr["rank"] = rank
    first = bytearray(DATA_OFFSET)
    first[:HEADER_SIZE] = hdr.tobytes()
    first[HEADER_SIZE : HEADER_SIZE + len(text)] = text
    return bytes(first)


def _file_bytes(beats: pd.DataFrame, events: pd.DataFrame, meta: dict[str, str], pid: int, rank: int,
                waits: pd.DataFrame | None = None) -> bytes:
    """Build one process's file: one set of chunks per OS thread (or user thread); the
    names of automatic beats' constructs in a chunk of their own."""
    waits = waits if waits is not None else empty_frame(WAIT_COLUMNS)
    names = _Names()
    names.add(beats, waits)
    names.ids = {c: k + 1 for k, c in enumerate(sorted(names.ids))}   # in name order
    events = events[events["kind"].map(KIND_CODES).notna()]   # kinds the format has no code for
    t0 = min([0] + [int(df["t_ns"].min()) for df in (beats, waits, events) if len(df)])
    chunks: list[bytes] = []
    threads = _Chunks(names.ids, t0, 0, chunks.append)
    threads.add(beats, events, waits)
    threads.close()
    if names.ids:
        chunks += _name_chunks(list(names.ids), names.ids, slot=threads.slots, spc=CHUNK_SIZE // SLOT_SIZE)
    return _first_block(meta, t0, len(chunks), pid, rank) + b"".join(chunks)


def _write_streamed(trace, run: str, process: int, meta: dict[str, str], rank: int, dest: Path) -> None:
    """One process's file from a trace whose beats stay in their files (StreamedTrace),
    written a thread at a time, each thread's beats and waits a piece at a time: memory
    follows the pieces, not the trace (a process's waits read whole took 2.5 GB at 20 M beats)."""
    st = trace.stats[(trace.stats["run"].astype(str) == run) & (trace.stats["process"] == process)]
    events = trace.events[(trace.events["run"].astype(str) == run) & (trace.events["process"] == process)]
    events = events[events["kind"].map(KIND_CODES).notna()]   # kinds the format has no code for
    ws = trace.wait_stats
    ws = ws[(ws["run"].astype(str) == run) & (ws["process"] == process)]
    waiting = sorted(set(ws["thread"].astype(int).tolist()))
    # the waits' first time and construct names, read a piece at a time
    wait_t0, wait_names = [], set()
    if waiting:
        for w in trace.process_wait_pieces(run, process):
            wait_t0.append(int(w["t_ns"].min()))
            wait_names |= set(w["construct"].astype(str).unique().tolist())
    t0 = min([0] + [int(v.min()) for v in (st["first_ns"], events["t_ns"]) if len(v)] + wait_t0)
    names = _Names()
    # the process's construct names numbered in name order, as the whole-trace writer numbers
    # them (not in the order the threads' beats come: that changed with the run)
    known = set(trace.construct_names(run, process).values()) | wait_names
    names.ids = {c: k + 1 for k, c in enumerate(sorted(known - {""}))}
    keys = [k for k in trace.thread_keys() if str(k[0]) == run and int(k[1]) == process]
    no_waits = empty_frame(WAIT_COLUMNS)

    def thread_waits(th: int):
        return trace.process_wait_pieces(run, process, th) if th in waiting else iter(())

    with open(dest, "wb") as f:
        f.write(bytes(DATA_OFFSET))
        threads = _Chunks(names.ids, t0, 0, f.write)

        def put(beats, ev, wt):
            names.add(beats, wt)
            threads.add(beats, ev, wt)

        for key in keys:
            th = int(key[2])
            ev = events[events["thread"] == th]
            ev_t = ev["t_ns"].to_numpy()
            waits, state = thread_waits(th), {"held": no_waits, "read": False}

            def waits_until(last: int) -> pd.DataFrame:
                """The thread's waits not yet written that end by `last`, read on as needed
                (a thread writes its records in time order: they come so, a batch at a time)."""
                parts = [state["held"]]
                top = int(state["held"]["t_ns"].max()) if len(state["held"]) else None
                while not state["read"] and (top is None or top <= last):
                    w = next(waits, None)
                    if w is None:
                        state["read"] = True
                    elif len(w):
                        parts.append(w)
                        top = int(w["t_ns"].max())
                w = _joined(parts)
                t = w["t_ns"].to_numpy()
                state["held"] = w[t > last]
                return w[t <= last]

            pieces = trace.thread_row_pieces(key)
            piece = next(pieces)
            for after in pieces:   # a piece's events and waits: up to its last beat
                last = int(piece["t_ns"].max()) if len(piece) else -1
                put(piece, ev[ev_t <= last], waits_until(last))
                ev = ev[ev_t > last]
                ev_t = ev["t_ns"].to_numpy()
                piece = after
            put(piece, ev, _joined([state["held"], *waits]))
            threads.close()
        done = {int(k[2]) for k in keys}
        rest = [w for th in waiting if th not in done for w in thread_waits(th)]
        put(empty_frame(BEAT_COLUMNS), events[~events["thread"].isin(done)], _joined(rest))
        threads.close()
        nchunks = threads.chunks
        if names.ids:
            chunks = _name_chunks(list(names.ids), names.ids, slot=threads.slots, spc=CHUNK_SIZE // SLOT_SIZE)
            for c in chunks:
                f.write(c)
            nchunks += len(chunks)
        f.seek(0)
        f.write(_first_block(meta, t0, nchunks, 0, rank))


def _joined(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Waits frames one after the other (an empty WAIT_COLUMNS frame for none)."""
    frames = [f for f in frames if len(f)]
    if not frames:
        return empty_frame(WAIT_COLUMNS)
    return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)


def _name_chunks(names: list[str], ids: dict[str, int], slot: int, spc: int) -> list[bytes]:
    """Chunks of NAME records (name space 3) for constructs named "<kind> <symbol>"."""
    rdt, hdt = record_dtype("<"), chunk_header_dtype("<")
    recs = []
    for name in names:
        kind, _, symbol = name.partition(" ")
        text = f"{kind}\t{symbol}\t".encode()[: NAME_FRAGMENT_BYTES * MAX_NAME_FRAGMENTS]
        frags = [text[k:k + NAME_FRAGMENT_BYTES] for k in range(0, max(len(text), 1), NAME_FRAGMENT_BYTES)]
        for fi, frag in enumerate(frags):
            r = np.zeros(1, dtype=rdt)
            raw = bytearray(r.tobytes())
            raw[:NAME_FRAGMENT_BYTES] = frag.ljust(NAME_FRAGMENT_BYTES, b"\0")
            r = np.frombuffer(bytes(raw), dtype=rdt).copy()
            r["aux"] = (NAME_CONSTRUCT << 24) | ids[name]
            r["kind"] = REC_NAME
            r["flags"] = fi | (NAME_LAST if fi == len(frags) - 1 else 0)
            recs.append(r)
    recs = np.concatenate(recs)
    out = []
    for cseq, start in enumerate(range(0, len(recs), spc - 1)):
        block = np.zeros(spc, dtype=rdt)
        part = recs[start:start + spc - 1]
        block[1:1 + len(part)] = part
        head = np.zeros(1, dtype=hdt)
        head["thread_slot"], head["chunk_seq"], head["user_thread"] = slot, cseq, -1
        head["capacity"], head["magic"] = spc, CHUNK_MAGIC
        raw = bytearray(block.tobytes())
        raw[:SLOT_SIZE] = head.tobytes()
        out.append(bytes(raw))
    return out


def write_hbt(trace: HeartbeatTrace, out: str | os.PathLike) -> list[str]:
    """Write a trace of ONE run in the binary format.

    One process: ``out`` is the file (``.hbt``). Several processes: ``out`` is a
    directory that receives one file per process. Returns the paths written.
    """
    from ..errors import HbtoolError

    out = Path(out)
    runs = list(trace.runs)
    if len(runs) != 1:
        raise HbtoolError(
            f"the binary format holds one run per file or directory, and the input has {len(runs)} "
            f"runs ({', '.join(map(str, runs[:5]))}{', ...' if len(runs) > 5 else ''}): convert to csv, xlsx or parquet instead"
        )
    run = runs[0]
    streamed = isinstance(trace, StreamedTrace)
    beat_procs = trace.stats["process"] if streamed else trace.beats["process"]
    procs = sorted(set(beat_procs.tolist()) | set(trace.events["process"].tolist())) or [0]
    meta = {"format": "hbtrace", "converted_from": trace.runs[run].get("source", ""), "run": run,
            "host": socket.gethostname(), "lifecycle": "1" if trace.runs[run].get("lifecycle") else "0"}
    written = []
    if len(procs) > 1 and out.suffix == SUFFIX:
        raise HbtoolError(
            f"the run has {len(procs)} processes: give a directory (not a {SUFFIX} file) as the output"
        )
    if len(procs) > 1:
        out.mkdir(parents=True, exist_ok=True)
    for p in procs:
        rank = p if len(procs) > 1 else -1
        dest = out / f"hbtrace-converted-p{p}{SUFFIX}" if len(procs) > 1 else out
        tmp = dest.with_name(dest.name + f".tmp{os.getpid()}")
        try:
            if streamed:   # a thread at a time
                _write_streamed(trace, str(run), p, meta, rank, tmp)
            else:
                b = trace.beats[trace.beats["process"] == p]
                e = trace.events[trace.events["process"] == p]
                w = trace.waits[trace.waits["process"] == p]
                tmp.write_bytes(_file_bytes(b, e, meta, pid=0, rank=rank, waits=w))
            os.replace(tmp, dest)
        finally:
            if tmp.exists():
                tmp.unlink()
        written.append(str(dest))
    return written
