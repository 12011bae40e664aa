"""An independent walk over the chunks of a little-endian trace file, for the tests that read
the tracer's files with their own small readers (docs/formats.md: version 2 chunks are runs of
unit_size-byte units; version 1 chunks were all chunk_size bytes)."""

from __future__ import annotations

import struct

import numpy as np

CHUNK_HEAD = np.dtype([("os_tid", "<u8"), ("thread_slot", "<u4"), ("chunk_seq", "<u4"), ("user_thread", "<i4"),
                       ("reserved", "<u4"), ("capacity", "<u4"), ("magic", "<u4")])
RECORD = np.dtype([("t_ns", "<u8"), ("seq", "<u4"), ("thread", "<i4"), ("loop", "<i4"), ("iter", "<i4"),
                   ("aux", "<u4"), ("kind", "<u2"), ("flags", "<u2")])


def walk_chunks(buf: bytes) -> list[tuple[np.void, np.ndarray]]:
    """(chunk header, its records up to the first empty slot) of every used chunk, in file order."""
    version, = struct.unpack_from("<I", buf, 8)
    chunk, = struct.unpack_from("<I", buf, 24)
    unit, = struct.unpack_from("<I", buf, 92)
    unit = unit if version >= 2 else chunk
    data_off, data_len = struct.unpack_from("<QQ", buf, 48)
    end = data_off + min(data_len, len(buf) - data_off) // unit * unit
    out = []
    off = data_off
    while off < end:
        head = np.frombuffer(buf, CHUNK_HEAD, count=1, offset=off)[0]
        if int(head["magic"]) == 0:
            off += unit
            continue
        assert int(head["magic"]) == 0x4B434248, f"bad chunk magic at byte {off}"
        cap = int(head["capacity"])
        assert cap > 0 and cap * 32 % unit == 0 and cap * 32 <= chunk, f"bad capacity {cap} at byte {off}"
        rec = np.frombuffer(buf, RECORD, count=min(cap - 1, (end - off) // 32 - 1), offset=off + 32)
        empty = np.flatnonzero(rec["kind"] == 0)
        out.append((head, rec[: empty[0]] if empty.size else rec))
        off += cap * 32
    return out
