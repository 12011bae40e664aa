"""Profile format versions: version 2 (how each rank ended) is written; version 1 files
(no end fields) still read; an unknown version is one line and exit 2. No MPI needed:
the files are written by hbtool.io.hbprof's writer and patched byte by byte."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from conftest import run_hbtool

from hbtool.errors import TraceFormatError
from hbtool.io import hbprof as H


def _run_file(tmp_path, version: int | None = None, end_how: int | None = None):
    S, R = 40, 2
    seg = np.repeat(np.arange(S), R)
    rank = np.tile(np.arange(R), S)
    dur = np.full(S * R, 1_000_000, dtype=np.int64)
    vals = np.column_stack([np.full(S * R, 5e5), np.full(S * R, 2.0)])
    path = tmp_path / "hbprof-test-1.hbp"
    H.write_run_file(str(path), rank, seg, dur, vals, ["computation", "p2p_blocking"], run_ns=S * 1_000_000)
    raw = bytearray(path.read_bytes())
    if version is not None:
        struct.pack_into("<I", raw, 8, version)
    if end_how is not None:   # every rank entry's end_how (offset 56 in each 128-byte entry)
        rto = struct.unpack_from("<Q", raw, 112)[0]
        for r in range(R):
            struct.pack_into("<I", raw, rto + 128 * r + 56, end_how)
    path.write_bytes(bytes(raw))
    return path


def test_version_2_is_written_and_says_how_ranks_ended(tmp_path):
    p = H.read_hbprof(str(_run_file(tmp_path)))
    assert H.VERSION == 2 and p.meta["failure"] is None
    assert [e["how"] for e in p.meta["rank_ends"]] == ["finalized", "finalized"]


def test_version_1_still_reads(tmp_path):
    p = H.read_hbprof(str(_run_file(tmp_path, version=1, end_how=0)))
    # a version 1 run file exists only when every rank reached MPI_Finalize (flag OK)
    assert p.meta["failure"] is None and [e["complete"] for e in p.meta["rank_ends"]] == [True, True]
    r = run_hbtool("interference", tmp_path / "hbprof-test-1.hbp", "--format", "json")
    assert r.returncode == 0 and '"class": "failed"' not in r.stdout


def test_an_unknown_version_is_one_line_and_exit_2(tmp_path):
    path = _run_file(tmp_path, version=3)
    with pytest.raises(TraceFormatError, match="version 3; this hbtool reads versions 1, 2"):
        H.read_hbprof(str(path))
    r = run_hbtool("interference", path)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_an_unknown_end_code_reads_as_no_trace(tmp_path):
    """A rank entry with an end code this hbtool does not know (a later version, or damage)
    is not trusted as finalized, and nothing breaks."""
    p = H.read_hbprof(str(_run_file(tmp_path, end_how=77)))
    assert all(e["how"] == "finalized" for e in p.meta["rank_ends"])   # flag OK says it finalized
    e = H.rank_end(0, 77, 5, False, False, 10, 2)
    assert e["how"] == "unknown" and not e["complete"]
