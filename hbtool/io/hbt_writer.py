"""Writer of the tracer's binary format (docs/formats.md), for `hbtool convert`: one file
per process, one set of chunks per thread, the names of automatic beats' constructs in a
chunk of their own. hbtool.io.hbt reads what this writes."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import numpy as np
import pandas as pd

from ..model import WAIT_COLUMNS, HeartbeatTrace, empty_frame
from .hbt import (CHUNK_MAGIC, CHUNK_SIZE, DATA_OFFSET, ENDIAN_MARK, FLAG_CONVERTED, HEADER_SIZE, KIND_CODES, MAGIC,
                  MAX_NAME_FRAGMENTS, META_CAPACITY, NAME_CONSTRUCT, NAME_FRAGMENT_BYTES, NAME_LAST, REC_BEAT, REC_NAME,
                  REC_WAIT, SLOT_SIZE, SOURCES, SUFFIX, SYNC_KINDS, UNIT_SIZE, VERSION, chunk_header_dtype, header_dtype,
                  record_dtype)

_STANDIN = 1 << 40  # grouping key for threads whose OS id is unknown (written as 0)


def _file_bytes(beats: pd.DataFrame, events: pd.DataFrame, meta: dict[str, str], pid: int, rank: int,
                waits: pd.DataFrame | None = None) -> bytes:
    """Build one process's file: one set of chunks per OS thread (or user thread); the
    names of automatic beats' constructs in a chunk of their own."""
    rdt, hdt = record_dtype("<"), chunk_header_dtype("<")
    spc = CHUNK_SIZE // SLOT_SIZE
    # an OS thread id for every row: the recorded one, else a stand-in from the user thread
    def tids(df):
        return np.where(df["os_tid"].to_numpy() > 0, df["os_tid"].to_numpy(), _STANDIN + df["thread"].to_numpy())

    waits = waits if waits is not None else empty_frame(WAIT_COLUMNS)
    # automatic beats and waits: source codes, construct ids (from 1) for their names
    codes = {v: k for k, v in SOURCES.items()}
    names = sorted({str(c) for df in (beats, waits) for c in df["construct"].astype(str).unique() if c})
    ids = {c: k + 1 for k, c in enumerate(names)}

    def src(df):
        return df["source"].astype(str).map(codes).fillna(0).astype(np.int64).to_numpy()

    def construct(df, fallback):
        own = df["construct"].astype(str).map(ids).fillna(0).astype(np.int64).to_numpy()
        return np.where(src(df) != 0, own, fallback)

    def records(df, **fields):
        return pd.DataFrame({"tid": tids(df), "t_ns": df["t_ns"].to_numpy(), "thread": df["thread"].to_numpy(),
                             **fields})

    rows = []
    if len(beats):
        auto = src(beats) != 0
        rows.append(records(beats, seq=beats["seq"].to_numpy() & 0xFFFFFFFF, loop=construct(beats, beats["loop"].to_numpy()),
                            iter=beats["iteration"].to_numpy(),
                            aux=np.where(auto, 0, beats["tag"].to_numpy() & 0xFFFFFFFF), kind=REC_BEAT,
                            flags=src(beats)))
    if len(waits):
        sync = waits["sync"].astype(str).map({v: k for k, v in SYNC_KINDS.items()}).fillna(0).astype(np.int64)
        w = waits["wait_ns"].to_numpy().astype(np.int64)
        rows.append(records(waits, seq=0, loop=construct(waits, 0), iter=(w >> 32).astype(np.int64),
                            aux=w & 0xFFFFFFFF, kind=REC_WAIT, flags=src(waits) | (sync.to_numpy() << 4)))
    if len(events):
        rows.append(records(events, seq=0, loop=0, iter=0, aux=events["detail"].to_numpy() & 0xFFFFFFFF,
                            kind=events["kind"].map(KIND_CODES).fillna(0).astype(int).to_numpy(),
                            flags=events["flags"].to_numpy() & 0xFFFF))
    allrows = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=["tid", "t_ns", "kind"])
    allrows = allrows[allrows["kind"] != 0]  # event kinds the format has no code for
    t0 = int(allrows["t_ns"].min()) if len(allrows) else 0
    t0 = min(t0, 0)
    chunks = []
    if len(allrows):
        allrows = allrows.sort_values(["tid", "t_ns"], kind="stable")
        for slot, (tid, grp) in enumerate(allrows.groupby("tid", sort=False)):
            recs = np.zeros(len(grp), dtype=rdt)
            recs["t_ns"] = (grp["t_ns"].to_numpy() - t0).astype(np.uint64)
            for name in ("seq", "thread", "loop", "iter", "aux", "kind", "flags"):
                recs[name] = grp[name].to_numpy()
            user = int(grp["thread"].iloc[0])
            for cseq, start in enumerate(range(0, len(recs), spc - 1)):
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
                chunks.append(bytes(raw))
    if names:
        chunks += _name_chunks(names, ids, slot=len(chunks) and int(allrows["tid"].nunique()), spc=spc)
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
    hdr["data_length"] = len(chunks) * CHUNK_SIZE
    hdr["start_mono_ns"] = np.uint64(-t0)
    hdr["pid"] = pid
    hdr["rank"] = rank
    first = bytearray(DATA_OFFSET)
    first[:HEADER_SIZE] = hdr.tobytes()
    first[HEADER_SIZE : HEADER_SIZE + len(text)] = text
    return bytes(first) + b"".join(chunks)


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
    procs = sorted(set(trace.beats["process"].tolist()) | set(trace.events["process"].tolist())) or [0]
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
        b = trace.beats[trace.beats["process"] == p]
        e = trace.events[trace.events["process"] == p]
        w = trace.waits[trace.waits["process"] == p]
        data = _file_bytes(b, e, meta, pid=0, rank=p if len(procs) > 1 else -1, waits=w)
        dest = out / f"hbtrace-converted-p{p}{SUFFIX}" if len(procs) > 1 else out
        tmp = dest.with_name(dest.name + f".tmp{os.getpid()}")
        try:
            tmp.write_bytes(data)
            os.replace(tmp, dest)
        finally:
            if tmp.exists():
                tmp.unlink()
        written.append(str(dest))
    return written
