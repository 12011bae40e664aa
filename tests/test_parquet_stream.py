"""A parquet table of beats read in bounded memory (hbtool.io.parquet_stream): on tables
`convert` wrote from real traces, every answer is what the reader that loads every row gives;
a table laid out otherwise is read whole, with the same answers as before."""

from __future__ import annotations

import subprocess

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hbtool import config
from hbtool.analyzers.diagnosis import features_table
from hbtool.io import read_heartbeats
from hbtool.model.heartbeats import StreamedTrace

from conftest import ROOT, SAMPLES, run_cli, run_hbtool
from test_hbt_stream import _same_trace

HBT_SAMPLES = sorted(p.name for p in SAMPLES.iterdir() if p.is_dir() and list(p.glob("*.hbt")))
COMMANDS = (["info"], ["info", "--format", "json"], ["diagnose"], ["diagnose", "--format", "json"], ["behavior"],
            ["features"])


@pytest.fixture
def every_table_streams(monkeypatch):
    monkeypatch.setattr(config, "TABLE_STREAM_ROWS", 0)


@pytest.fixture(scope="module")
def omp_table(tmp_path_factory, tracer_built):
    """tests/programs/omp_beats.c under `hbtool record --beats openmp` (automatic beats of
    every construct, their names, waits), converted to run.parquet and run.waits.parquet."""
    d = tmp_path_factory.mktemp("omptable")
    exe = d / "omp_beats"
    subprocess.run(["gcc", "-fopenmp", "-O2", str(ROOT / "tests" / "programs" / "omp_beats.c"), "-o", str(exe)],
                   check=True)
    run_hbtool("record", "-q", "-o", d / "trace", "--beats", "openmp", "--", exe, "all")
    out = d / "run.parquet"
    assert run_hbtool("convert", d / "trace", out).returncode == 0
    assert out.with_name("run.waits.parquet").exists()
    return out


def _table(src, dest):
    assert run_hbtool("convert", src, dest).returncode == 0
    return dest


def _cli_both(capsys, monkeypatch, path):
    """Each command's (exit, stdout, stderr), the table streamed, then read whole."""
    out = []
    for cmd in COMMANDS:
        monkeypatch.setattr(config, "TABLE_STREAM_ROWS", 0)
        streamed = run_cli(capsys, *cmd, path)
        monkeypatch.setattr(config, "TABLE_STREAM_ROWS", 1 << 62)
        out.append((cmd, streamed, run_cli(capsys, *cmd, path)))
    return out


@pytest.mark.parametrize("name", HBT_SAMPLES)
def test_a_table_convert_wrote_streams_with_the_answers_of_the_whole_reader(name, tmp_path, every_table_streams):
    path = _table(SAMPLES / name, tmp_path / f"{name}.parquet")
    eager, streamed = read_heartbeats(path), read_heartbeats(path, stream=True)
    assert isinstance(streamed, StreamedTrace) and not isinstance(eager, StreamedTrace)
    _same_trace(eager, streamed)
    pd.testing.assert_frame_equal(features_table(eager), features_table(streamed))
    pd.testing.assert_frame_equal(eager.beats, streamed.beats)   # asked for, read whole: the same table


def test_info_diagnose_and_behavior_print_the_same_streamed(capsys, monkeypatch, tmp_path, omp_table):
    for path in (omp_table, _table(SAMPLES / "jacobi-leak", tmp_path / "jacobi.parquet")):
        for cmd, streamed, whole in _cli_both(capsys, monkeypatch, path):
            assert streamed == whole, cmd
            assert streamed[0] == 0 and streamed[1], cmd
    monkeypatch.setattr(config, "TABLE_STREAM_ROWS", 0)
    trace = read_heartbeats(omp_table, stream=True)
    assert isinstance(trace, StreamedTrace) and len(trace.wait_stats)
    assert "waiting %" in run_cli(capsys, "info", omp_table)[1]


def test_diagnose_keeps_no_beats_table_of_a_streamed_table(monkeypatch, tmp_path, every_table_streams):
    """diagnose reads a thread at a time: the whole reader is never asked for the table."""
    path = _table(SAMPLES / "jacobi-leak", tmp_path / "t.parquet")
    whole = pq.read_table
    asked = []
    monkeypatch.setattr(pq, "read_table", lambda *a, **k: asked.append(a) or whole(*a, **k))
    from hbtool.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["diagnose", str(path)])
    assert exc.value.code == 0 and not asked


def _rewrite(path, change):
    """The table at `path` with its rows changed by `change` (a DataFrame -> DataFrame), its
    metadata kept."""
    table = pq.read_table(path)
    df = change(table.to_pandas())
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False).replace_schema_metadata(table.schema.metadata),
                   path)


@pytest.mark.parametrize("change", [
    pytest.param(lambda df: pd.concat([df.iloc[len(df) // 2:], df.iloc[: len(df) // 2]]), id="threads-in-two-places"),
    pytest.param(lambda df: df.assign(t_ns=df["t_ns"] + 1_700_000_000 * 10**9), id="absolute-times"),
    pytest.param(lambda df: df.assign(label="worker"), id="labels"),
    pytest.param(lambda df: df.assign(source=df["source"].astype(str).str.upper()), id="sources-in-capitals"),
    pytest.param(lambda df: df.assign(thread=df["thread"].astype(float)), id="threads-as-floats"),
    pytest.param(lambda df: df.drop(columns=["os_tid"]), id="no-os-tid"),
])
def test_a_table_laid_out_otherwise_is_read_whole_alike(change, capsys, monkeypatch, tmp_path):
    path = _table(SAMPLES / "pi-segv", tmp_path / "t.parquet")
    _rewrite(path, change)
    monkeypatch.setattr(config, "TABLE_STREAM_ROWS", 0)
    assert not isinstance(read_heartbeats(path, stream=True), StreamedTrace)
    for cmd, streamed, whole in _cli_both(capsys, monkeypatch, path):
        assert streamed == whole, cmd


def test_a_thread_out_of_order_is_read_whole_and_sorted(tmp_path, every_table_streams):
    """Rows of a thread not in seq order: still streamed (its rows in one place), the thread
    read whole and put in the beats table's order."""
    path = _table(SAMPLES / "pi-segv", tmp_path / "t.parquet")
    _rewrite(path, lambda df: df.sort_values(["run", "process", "thread", "seq"], ascending=[True, True, True, False]))
    eager, streamed = read_heartbeats(path), read_heartbeats(path, stream=True)
    assert isinstance(streamed, StreamedTrace)
    _same_trace(eager, streamed)
    for key, n, load in streamed.thread_loaders():
        pieces = list(streamed.thread_time_pieces(key, rows=7))
        assert len(pieces) == 1 and np.array_equal(pieces[0], load())


def test_a_long_thread_comes_in_pieces_in_order(tmp_path, every_table_streams, monkeypatch):
    monkeypatch.setattr(config, "STREAM_PIECE_ROWS", 100)   # batches of 100 rows
    path = _table(SAMPLES / "jacobi-leak", tmp_path / "t.parquet")
    streamed = read_heartbeats(path, stream=True)
    eager = read_heartbeats(path)
    for key, n, load in streamed.thread_loaders():
        pieces = list(streamed.thread_time_pieces(key, rows=37))
        assert len(pieces) == -(-n // 37) and all(len(p) == 37 for p in pieces[:-1])
        np.testing.assert_array_equal(np.concatenate(pieces), load())
        rows = pd.concat(list(streamed.thread_row_pieces(key, rows=37)), ignore_index=True)
        mine = eager.beats[(eager.beats["run"] == key[0]) & (eager.beats["process"] == key[1])
                           & (eager.beats["thread"] == key[2])].reset_index(drop=True)
        pd.testing.assert_frame_equal(rows.astype({c: str for c in rows.select_dtypes("category")}),
                                      mine.astype({c: str for c in mine.select_dtypes("category")}))


def test_bad_waits_are_left_out_alike(capsys, monkeypatch, omp_table, tmp_path):
    table = tmp_path / "run.parquet"
    table.write_bytes(omp_table.read_bytes())
    waits = pq.read_table(omp_table.with_name("run.waits.parquet"))
    w = waits.to_pandas()
    w.loc[w.index[:3], "wait_ns"] = -5
    pq.write_table(pa.Table.from_pandas(w, preserve_index=False).replace_schema_metadata(waits.schema.metadata),
                   tmp_path / "run.waits.parquet")
    monkeypatch.setattr(config, "TABLE_STREAM_ROWS", 0)
    streamed = read_heartbeats(table, stream=True)
    assert isinstance(streamed, StreamedTrace)
    assert [x for x in streamed.warnings if "3 of" in x and "left out" in x]
    _same_trace(read_heartbeats(table), streamed)
    for cmd, s, whole in _cli_both(capsys, monkeypatch, table):
        assert s == whole, cmd


def test_a_table_changed_after_the_first_pass_is_one_line(capsys, monkeypatch, tmp_path, every_table_streams):
    """The beats stay in the file: one rewritten (shorter) before a thread is read again is
    said in one line, exit status 2, no traceback."""
    from hbtool.errors import HbtoolError

    path = _table(SAMPLES / "jacobi-leak", tmp_path / "t.parquet")
    trace = read_heartbeats(path, stream=True)
    key, n, load = trace.thread_loaders()[0]
    path.write_bytes(path.read_bytes()[: 2000])
    with pytest.raises(HbtoolError, match="changed while being read"):
        load()
