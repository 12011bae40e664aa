"""The binary format: round trips, byte order, and every kind of damage."""

import numpy as np
import pandas as pd
import pytest

from hbtool.errors import TraceFormatError
from hbtool.io import read_heartbeats, write_heartbeats
from hbtool.io import hbt
from hbtool.model import HeartbeatTrace

from conftest import make_trace


def _with_events(tr: HeartbeatTrace) -> HeartbeatTrace:
    ev = pd.DataFrame({
        "run": "r", "process": 0, "os_tid": [1000, 1001, 1000], "thread": [0, 1, 0],
        "t_ns": [1_000, 2_000, 900_000_000], "t": [1e-6, 2e-6, 0.9],
        "kind": ["thread_start", "thread_end", "process_exit"], "detail": [-1 & 0xFFFFFFFF, 1, 3], "flags": [0, 0, 0],
    })
    return HeartbeatTrace(beats=tr.beats, events=ev, runs={"r": {"lifecycle": True}})


def test_round_trip_keeps_every_beat_field(tmp_path):
    tr = make_trace()
    out = tmp_path / "r.hbt"
    write_heartbeats(tr, str(out))
    back = read_heartbeats(out)
    cols = ["thread", "seq", "t_ns", "loop", "iteration", "tag", "os_tid"]
    pd.testing.assert_frame_equal(back.beats[cols], tr.beats[cols])
    assert back.warnings == []


def test_round_trip_keeps_events(tmp_path):
    tr = _with_events(make_trace())
    out = tmp_path / "r.hbt"
    write_heartbeats(tr, str(out))
    back = read_heartbeats(out)
    assert back.runs["r"]["lifecycle"] is True
    ev = back.events.sort_values("t_ns").reset_index(drop=True)
    assert ev["kind"].tolist() == ["thread_start", "thread_end", "process_exit"]
    assert ev["detail"].tolist() == [0xFFFFFFFF, 1, 3]
    assert ev["thread"].tolist() == [0, 1, 0]


def test_file_layout_constants(tmp_path):
    out = tmp_path / "r.hbt"
    write_heartbeats(make_trace(threads=1, beats=10), str(out))
    raw = out.read_bytes()
    assert raw[:8] == b"HBTRACE\0"
    assert int.from_bytes(raw[12:16], "little") == 0x01020304
    assert len(raw) == 4096 + 65536  # header page + one chunk
    assert int.from_bytes(raw[4096 + 28:4096 + 32], "little") == hbt.CHUNK_MAGIC


def _big_endian_copy(src: bytes) -> bytes:
    """Re-encode a little-endian file in big-endian order (as a big-endian writer would)."""
    out = bytearray(src)
    h = np.frombuffer(src, dtype=hbt.header_dtype("<"), count=1)
    out[:128] = h.astype(hbt.header_dtype(">")).tobytes()
    for off in range(4096, len(src), 65536):
        ch = np.frombuffer(src, dtype=hbt.chunk_header_dtype("<"), count=1, offset=off)
        out[off:off + 32] = ch.astype(hbt.chunk_header_dtype(">")).tobytes()
        recs = np.frombuffer(src, dtype=hbt.record_dtype("<"), count=2047, offset=off + 32)
        out[off + 32:off + 65536] = recs.astype(hbt.record_dtype(">")).tobytes()
    return bytes(out)


def test_big_endian_file_reads_the_same(tmp_path):
    tr = make_trace()
    le = tmp_path / "le.hbt"
    write_heartbeats(tr, str(le))
    be = tmp_path / "be.hbt"
    be.write_bytes(_big_endian_copy(le.read_bytes()))
    a, b = read_heartbeats(le).beats, read_heartbeats(be).beats
    pd.testing.assert_frame_equal(a.drop(columns="run"), b.drop(columns="run"))


def _written(tmp_path, **kw):
    out = tmp_path / "r.hbt"
    write_heartbeats(make_trace(**kw), str(out))
    return out, bytearray(out.read_bytes())


def test_bad_magic(tmp_path):
    out, raw = _written(tmp_path)
    raw[:8] = b"NOTHBTR\0"
    out.write_bytes(raw)
    with pytest.raises(TraceFormatError, match="bad magic"):
        hbt.read_hbt_file(out)


def test_metadata_length_past_end_of_file(tmp_path):
    out, raw = _written(tmp_path)
    raw = raw[:200]
    raw[36:40] = (3000).to_bytes(4, "little")  # meta_length
    out.write_bytes(raw)
    with pytest.raises(TraceFormatError, match="past the end of the file"):
        hbt.read_hbt_file(out)


def test_data_offset_past_end_of_file(tmp_path):
    out, raw = _written(tmp_path)
    raw[48:56] = (1 << 40).to_bytes(8, "little")
    out.write_bytes(raw)
    with pytest.raises(TraceFormatError):
        hbt.read_hbt_file(out)


def test_newer_version_says_upgrade(tmp_path):
    out, raw = _written(tmp_path)
    raw[8:12] = (hbt.VERSION + 1).to_bytes(4, "little")
    out.write_bytes(raw)
    with pytest.raises(TraceFormatError, match="upgrade hbtool"):
        hbt.read_hbt_file(out)


def test_too_short_and_empty(tmp_path):
    p = tmp_path / "x.hbt"
    p.write_bytes(b"HBTRACE\0" + b"\0" * 20)
    with pytest.raises(TraceFormatError, match="shorter than"):
        hbt.read_hbt_file(p)
    p.write_bytes(b"")
    with pytest.raises(TraceFormatError, match="empty"):
        hbt.read_hbt_file(p)


@pytest.mark.parametrize("cut_records,extra", [(5, 0), (5, 17), (0, 31)])
def test_half_written_last_record_reads_up_to_last_whole_record(tmp_path, cut_records, extra):
    out, raw = _written(tmp_path, threads=1, beats=20)
    # chunk header is slot 0; records follow; keep `cut_records` whole records and `extra` bytes
    keep = 4096 + 32 + 32 * cut_records + extra
    out.write_bytes(raw[:keep])
    parsed = hbt.read_hbt_file(out)
    assert int((parsed["records"]["kind"] == 1).sum()) == cut_records
    assert any("shorter than its header" in w for w in parsed["warnings"])
    assert (extra > 0) == any("half-written" in w for w in parsed["warnings"])


def test_corrupted_chunk_header(tmp_path):
    out, raw = _written(tmp_path)
    raw[4096 + 28:4096 + 32] = b"XXXX"
    out.write_bytes(raw)
    with pytest.raises(TraceFormatError, match="corrupted chunk header"):
        hbt.read_hbt_file(out)
    raw[4096 + 28:4096 + 32] = hbt.CHUNK_MAGIC.to_bytes(4, "little")
    raw[4096 + 24:4096 + 28] = (7).to_bytes(4, "little")  # capacity
    out.write_bytes(raw)
    with pytest.raises(TraceFormatError, match="capacity"):
        hbt.read_hbt_file(out)


def test_unknown_record_kind_is_skipped_with_warning(tmp_path):
    out, raw = _written(tmp_path, threads=1, beats=10)
    slot = 4096 + 32 * 3  # the third record
    raw[slot + 28:slot + 30] = (99).to_bytes(2, "little")
    out.write_bytes(raw)
    tr = read_heartbeats(out)
    assert len(tr.beats) == 9
    assert any("kinds this hbtool does not know" in w for w in tr.warnings)


def test_chunk_ends_at_first_empty_slot(tmp_path):
    """A record whose kind word was never stored (death mid-write) ends the chunk."""
    out, raw = _written(tmp_path, threads=1, beats=10)
    slot = 4096 + 32 * 6
    raw[slot + 28:slot + 32] = b"\0\0\0\0"
    out.write_bytes(raw)
    assert len(read_heartbeats(out).beats) == 5


def test_sequence_numbers_wrap_past_32_bits():
    seq = np.array([0xFFFFFFFE, 0xFFFFFFFF, 0, 1, 5, 6], dtype=np.uint32)
    grp = np.array([1, 1, 1, 1, 2, 2])
    out = hbt._unwrap_seq(seq, grp)
    assert out.tolist() == [0xFFFFFFFE, 0xFFFFFFFF, 1 << 32, (1 << 32) + 1, 5, 6]


def test_threads_spanning_many_chunks(tmp_path):
    tr = make_trace(threads=2, beats=5000, period=0.001)
    out = tmp_path / "big.hbt"
    write_heartbeats(tr, str(out))
    back = read_heartbeats(out)
    assert back.beats.groupby("thread").size().tolist() == [5000, 4995]
    assert (back.beats.groupby("thread")["seq"].diff().dropna() == 1).all()


def test_multi_process_run_needs_a_directory(tmp_path):
    tr = make_trace()
    b = tr.beats.copy()
    b.loc[b["thread"] == 2, "process"] = 1
    tr2 = HeartbeatTrace(beats=b)
    from hbtool.errors import HbtoolError

    with pytest.raises(HbtoolError, match="give a directory"):
        write_heartbeats(tr2, str(tmp_path / "x.hbt"))
    files = hbt.write_hbt(tr2, tmp_path / "rundir")
    assert len(files) == 2
    back = read_heartbeats(tmp_path / "rundir")
    assert sorted(back.beats["process"].unique().tolist()) == [0, 1]
    assert len(back.beats) == len(b)


def test_random_damage_never_escapes_as_another_error(tmp_path):
    """Trace files are untrusted: any corruption reads, or fails with TraceFormatError."""
    from conftest import SAMPLES

    src = next((SAMPLES / "pi-shutdown").glob("*.hbt")).read_bytes()
    rng = np.random.default_rng(12345)
    p = tmp_path / "fuzz.hbt"
    outcomes = {"read": 0, "refused": 0}
    for i in range(300):
        raw = bytearray(src)
        kind = i % 3
        if kind == 0:  # flip bytes anywhere, the header most often
            for _ in range(int(rng.integers(1, 8))):
                pos = int(rng.integers(0, 256)) if rng.random() < 0.6 else int(rng.integers(0, len(raw)))
                raw[pos] = int(rng.integers(0, 256))
        elif kind == 1:  # cut anywhere
            raw = raw[: int(rng.integers(0, len(raw)))]
        else:  # overwrite a random 32-byte slot with noise
            pos = 4096 + 32 * int(rng.integers(0, (len(raw) - 4096) // 32))
            raw[pos:pos + 32] = rng.integers(0, 256, 32, dtype=np.uint8).tobytes()
        p.write_bytes(bytes(raw))
        try:
            read_heartbeats(p)
            outcomes["read"] += 1
        except TraceFormatError:
            outcomes["refused"] += 1
    assert outcomes["read"] > 0 and outcomes["refused"] > 0
