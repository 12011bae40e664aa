"""convert and plot on tracer traces read in bounded memory (hbtool.io.hbt_stream): the
beats are written, or reduced to the figure's points, one thread at a time, and the output
is what the code that loads every beat first gave -- on traces of real traced programs."""

from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hbtool import config
from hbtool.analyzers.heartrate import heart_rate_pieces, heart_rate_series
from hbtool.cli import plotting
from hbtool.io import read_heartbeats
from hbtool.io.hbt_stream import HbtStream
from hbtool.io.hbt_writer import write_hbt
from hbtool.io.tabular import PARQUET_EVENTS_KEY, PARQUET_RUNS_KEY, WAITS_TABLE, beat_table, event_table
from hbtool.model.heartbeats import StreamedTrace

from conftest import ROOT, build_traced, run_cli, run_hbtool


@pytest.fixture(scope="module")
def burst(tmp_path_factory, tracer_built):
    """beat_burst (benchmarks/beat_burst.c), built against the real tracer."""
    d = tmp_path_factory.mktemp("burst")
    return build_traced(ROOT / "benchmarks" / "beat_burst.c", d / "beat_burst", opt="-O2")


def _burst_trace(burst, where, threads, beats):
    env = dict(os.environ, HBTRACE_DIR=str(where))
    env.pop("LD_PRELOAD", None)
    subprocess.run([str(burst), str(threads), str(beats)], env=env, check=True, timeout=120)
    return where


@pytest.fixture(scope="module")
def omp_fork(tmp_path_factory, tracer_built):
    """tests/programs/omp_beats.c in `fork` mode under `hbtool record --beats openmp`: two
    processes' files, automatic beats of every construct with their names, waits."""
    d = tmp_path_factory.mktemp("ompfork")
    exe = d / "omp_beats"
    subprocess.run(["gcc", "-fopenmp", "-O2", str(ROOT / "tests" / "programs" / "omp_beats.c"), "-o", str(exe)],
                   check=True)
    r = run_hbtool("record", "-q", "-o", d / "trace", "--beats", "openmp", "--", exe, "fork")
    assert len(list((d / "trace").glob("*.hbt"))) == 2, r.stderr
    return d / "trace"


def _text(df):
    return df.astype({c: str for c in df.select_dtypes("category")})


def _old_outputs(src, tmp_path):
    """What convert wrote before it streamed (its code: the whole beats table at once)."""
    whole = read_heartbeats(src)
    assert not isinstance(whole, StreamedTrace)
    csv = beat_table(whole.beats).to_csv(index=False)
    table = pa.Table.from_pandas(beat_table(whole.beats), preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[PARQUET_EVENTS_KEY] = event_table(whole).to_json(orient="records").encode()
    meta[PARQUET_RUNS_KEY] = json.dumps(whole.runs, default=str).encode()
    pq.write_table(table.replace_schema_metadata(meta), tmp_path / "old.parquet")
    return whole, csv, pq.read_table(tmp_path / "old.parquet")


def _assert_converts_as_before(capsys, monkeypatch, src, tmp_path):
    whole, old_csv, old_parquet = _old_outputs(src, tmp_path)
    # the streamed path must not fall back to reading every beat
    monkeypatch.setattr(HbtStream, "materialize", lambda self: pytest.fail("convert read the whole trace"))
    for suffix in ("csv", "parquet", "xlsx"):
        code, _, err = run_cli(capsys, "convert", src, tmp_path / f"new.{suffix}")
        assert code == 0, err
        assert f"wrote {len(whole.beats)} beats" in err
    assert (tmp_path / "new.csv").read_bytes() == old_csv.encode()
    code, out, _ = run_cli(capsys, "convert", src, "-")
    assert code == 0 and out == old_csv
    new = pq.read_table(tmp_path / "new.parquet")
    assert new.schema.equals(old_parquet.schema, check_metadata=False)  # the same columns and types
    pd.testing.assert_frame_equal(_text(new.to_pandas()), _text(old_parquet.to_pandas()))
    for key in (PARQUET_EVENTS_KEY, PARQUET_RUNS_KEY):
        assert new.schema.metadata.get(key) == old_parquet.schema.metadata.get(key), key
    # the waits, in a table of their own beside the beats', as the whole trace has them
    beside = tmp_path / "new.waits.parquet"
    assert beside.exists() == bool(len(whole.waits))
    if len(whole.waits):
        names = [n for n, _ in WAITS_TABLE]
        pd.testing.assert_frame_equal(pd.read_parquet(beside), _text(whole.waits[names]), check_dtype=False)
        back = read_heartbeats(tmp_path / "new.parquet")
        pd.testing.assert_frame_equal(_text(back.waits[names]), _text(whole.waits[names]), check_dtype=False)
    # xlsx: one sheet per run holding the whole beats table's rows, and the events
    new_sheets = pd.read_excel(tmp_path / "new.xlsx", sheet_name=None, engine="calamine")
    runs = list(whole.runs)
    assert list(new_sheets) == runs + ["_events"]
    for run in runs:
        expected = _text(beat_table(whole.beats[whole.beats["run"] == run]).reset_index(drop=True))
        got = new_sheets[run]
        text = [c for c in got.columns if expected[c].dtype == object or str(expected[c].dtype) == "str"]
        for c in text:  # an empty cell reads back as NaN
            got[c] = got[c].astype(object).where(got[c].notna(), "").astype(str)
        pd.testing.assert_frame_equal(got, expected, check_dtype=False)
    assert len(new_sheets["_events"]) == len(whole.events)
    # and hbtool reads every output back as the beats it was given
    for suffix in ("csv", "parquet", "xlsx"):
        back = read_heartbeats(tmp_path / f"new.{suffix}")
        np.testing.assert_array_equal(back.beats["t_ns"].to_numpy(), whole.beats["t_ns"].to_numpy())
    # the binary format, written a thread at a time, reads back as what the whole trace's
    # writer gave: beats, lifecycle records and waits
    procs = whole.beats["process"].nunique()
    old_hbt, new_hbt = (tmp_path / n / ("run" if procs > 1 else "run.hbt") for n in ("old", "new"))  # one run name
    old_hbt.parent.mkdir()
    new_hbt.parent.mkdir()
    write_hbt(whole, old_hbt)
    code, _, err = run_cli(capsys, "convert", src, new_hbt, "--to", "hbt")
    assert code == 0, err
    old_back, new_back = read_heartbeats(old_hbt), read_heartbeats(new_hbt)
    np.testing.assert_array_equal(new_back.beats["t_ns"].to_numpy(), whole.beats["t_ns"].to_numpy())
    for name in ("beats", "events", "waits"):
        a, b = getattr(old_back, name), getattr(new_back, name)
        assert len(a) == len(getattr(whole, name)), name
        if name != "beats":   # records that are not beats come in the order of the threads' chunks
            a, b = (_text(x).sort_values(list(x.columns), kind="stable") for x in (a, b))
        pd.testing.assert_frame_equal(_text(b).reset_index(drop=True), _text(a).reset_index(drop=True),
                                      check_categorical=False, obj=name)
    return whole


def test_convert_writes_an_openmp_run_of_two_processes_as_before(capsys, monkeypatch, omp_fork, tmp_path):
    whole = _assert_converts_as_before(capsys, monkeypatch, omp_fork, tmp_path)
    assert whole.beats["process"].nunique() == 2 and len(whole.waits) > 0
    assert (whole.beats["construct"].astype(str) != "").all()


def test_convert_writes_threads_spread_over_many_windows_as_before(capsys, monkeypatch, burst, tmp_path):
    src = _burst_trace(burst, tmp_path / "trace", 4, 12000)   # 1.5 MB: a dozen windows of 128 KiB
    monkeypatch.setattr(config, "HBT_READ_WINDOW_BYTES", 2 * 65536)
    whole = _assert_converts_as_before(capsys, monkeypatch, src, tmp_path)
    assert len(whole.beats) == 48000


def test_convert_writes_a_long_thread_a_piece_at_a_time_as_before(capsys, monkeypatch, burst, tmp_path):
    """One thread of more beats than a piece (config.STREAM_PIECE_ROWS) is never read whole:
    every output is written a piece at a time, and is what the whole trace gave."""
    src = _burst_trace(burst, tmp_path / "trace", 1, 30000)
    monkeypatch.setattr(config, "HBT_READ_WINDOW_BYTES", 2 * 65536)
    monkeypatch.setattr(config, "STREAM_PIECE_ROWS", 4096)
    sizes = []
    pieces = HbtStream.beat_pieces

    def counted(self, *args):
        for b in pieces(self, *args):
            sizes.append(b["t_ns"].size)
            yield b

    monkeypatch.setattr(HbtStream, "beat_pieces", counted)
    monkeypatch.setattr(HbtStream, "load_beats", lambda *a, **k: pytest.fail("a thread's beats read whole"))
    whole = _assert_converts_as_before(capsys, monkeypatch, src, tmp_path)
    assert len(whole.beats) == 30000
    assert max(sizes) == 4096 and sum(sizes) == 30000 * (len(sizes) // 8)   # 8 pieces per output written


def test_xlsx_of_a_run_too_big_for_a_sheet_fails_before_any_beat_is_read(capsys, monkeypatch, burst, tmp_path):
    src = _burst_trace(burst, tmp_path / "trace", 2, 530000)  # 1,060,000 beats, one run: more than a sheet
    monkeypatch.setattr(HbtStream, "load_beats", lambda *a, **k: pytest.fail("beats read for a refused xlsx"))
    code, out, err = run_cli(capsys, "convert", src, tmp_path / "big.xlsx")
    assert code == 2 and not out
    assert err.strip().splitlines() == ["hbtool: error: run 'trace' has 1060000 beats, more than one xlsx sheet "
                                        "holds (1048575): convert to parquet or csv instead"]
    assert not list(tmp_path.glob("big.xlsx*"))


def test_plot_reads_one_thread_at_a_time_and_draws_what_it_drew(capsys, monkeypatch, burst, tmp_path):
    """A thread of 60,000 beats is drawn as at most PLOT_MAX_POINTS points: the faint line
    as before (block means), the bold line (a rolling median over 2 % of the beats, from
    the blocks' medians) between the exact rolling quartiles -- a median of block medians has
    a quarter of its window's values at least on either side -- and within a few per cent of
    the exact rolling median's decimation. (Asserted within 1 % of it, the test failed once in
    a full run: 4.1 %, a burst thread under load, whose rates are bimodal.)"""
    src = _burst_trace(burst, tmp_path / "trace", 3, 60000)
    trace = read_heartbeats(src, stream=True)
    for key, t, hr in heart_rate_series(trace, 10):
        curve = plotting.thread_curve(t, hr)
        x, y = plotting._break_gaps(*plotting._decimate(t, hr, config.PLOT_MAX_POINTS))
        xs, ys = plotting._break_gaps(*plotting._decimate(t, plotting._smooth(hr), config.PLOT_MAX_POINTS))
        assert len(curve.ys) <= config.PLOT_MAX_POINTS + 50 and len(t) == 60000
        np.testing.assert_array_equal(curve.x, x)
        np.testing.assert_array_equal(curve.y, y)
        np.testing.assert_array_equal(curve.xs, xs)
        both = np.isfinite(ys) & np.isfinite(curve.ys)
        assert both.sum() > 0.95 * np.isfinite(ys).sum()
        rel = np.abs(curve.ys[both] - ys[both]) / ys[both]
        assert np.median(rel) < 0.05, key
        k = max(5, int(len(hr) * plotting.SMOOTH_SHARE))
        window = pd.Series(hr).rolling(k, center=True, min_periods=max(1, k // 2))
        lo, hi = (plotting._break_gaps(*plotting._decimate(t, window.quantile(q).to_numpy(), config.PLOT_MAX_POINTS))[1]
                  for q in (0.25, 0.75))
        # (2 % of slack: a block straddles the window's edges, and the decimation takes means)
        inside = both & (curve.ys >= 0.98 * lo) & (curve.ys <= 1.02 * hi)
        assert inside.sum() >= 0.99 * both.sum(), (key, both.sum() - inside.sum())
        assert curve.last_t == t[-1] and curve.last_hr == hr[-1]
    monkeypatch.setattr(HbtStream, "materialize", lambda self: pytest.fail("plot read the whole trace"))
    code, _, err = run_cli(capsys, "plot", src, "-o", tmp_path / "p.png")
    assert code == 0, err
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"


def test_plot_draws_a_long_thread_a_piece_at_a_time(capsys, monkeypatch, burst, tmp_path):
    """A thread of more beats than a piece is drawn from its pieces (its beat times never
    held whole): the same points as from the whole thread, exactly."""
    src = _burst_trace(burst, tmp_path / "trace", 1, 60000)
    monkeypatch.setattr(config, "HBT_READ_WINDOW_BYTES", 2 * 65536)
    monkeypatch.setattr(config, "STREAM_PIECE_ROWS", 4096)
    trace = read_heartbeats(src, stream=True)
    ((key, t, hr),) = heart_rate_series(trace, 10)
    whole = plotting.thread_curve(t, hr)
    pieces = list(trace.thread_time_pieces(key))
    assert len(pieces) == 15 and max(map(len, pieces)) == 4096
    got = plotting.thread_curve_pieces(len(t), heart_rate_pieces(iter(pieces), 10))
    for name in ("x", "y", "xs", "ys"):
        np.testing.assert_array_equal(getattr(got, name), getattr(whole, name), err_msg=name)
    assert (got.last_t, got.last_hr) == (whole.last_t, whole.last_hr) and got.top == whole.top
    assert len(got.x) <= config.PLOT_MAX_POINTS + 50
    monkeypatch.setattr(HbtStream, "load_times", lambda *a, **k: pytest.fail("plot read a thread whole"))
    monkeypatch.setattr(HbtStream, "load_beats", lambda *a, **k: pytest.fail("plot read a thread whole"))
    code, _, err = run_cli(capsys, "plot", src, "-o", tmp_path / "p.png")
    assert code == 0, err
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG" and "Warning" not in err


def test_parquet_waits_travel_in_a_table_beside_the_beats(capsys, omp_fork, tmp_path):
    """A trace's waits go to run.waits.parquet, named in run.parquet's metadata (inline, a
    million waits made a 155 MB footer that pyarrow refused to read back: "Exceeded size
    limit"): read with it, from a folder of runs as one run, never taken for beats; without
    it, the beats are read and a warning says what is missing; an existing waits table is
    kept unless --force."""
    whole = read_heartbeats(omp_fork)
    out = tmp_path / "runs" / "run.parquet"
    out.parent.mkdir()
    code, _, err = run_cli(capsys, "convert", omp_fork, out)
    assert code == 0 and "run.waits.parquet" in err, err
    beside = out.with_name("run.waits.parquet")
    assert pq.read_table(beside).num_rows == len(whole.waits) > 0
    meta = pq.read_schema(out).metadata
    assert meta[b"hbtool.waits_file"] == b"run.waits.parquet" and b"hbtool.waits" not in meta
    folder = read_heartbeats(out.parent)   # the folder: one run, its waits with it
    assert folder.beat_count() == len(whole.beats) and len(folder.waits) == len(whole.waits)
    code, _, err = run_cli(capsys, "info", beside)
    assert code == 2 and err.count("\n") == 1 and "give run.parquet" in err, err
    code, _, err = run_cli(capsys, "convert", omp_fork, out.with_name("other.parquet"))
    assert code == 0, err
    out.unlink()
    code, _, err = run_cli(capsys, "convert", omp_fork, out)
    assert code == 2 and "run.waits.parquet: exists" in err and "--force" in err, err
    assert not out.exists()
    out.with_name("other.waits.parquet").unlink()
    alone = read_heartbeats(out.with_name("other.parquet").rename(out))
    assert len(alone.beats) == len(whole.beats) and len(alone.waits) == 0
    assert any("its waits table other.waits.parquet is not beside it" in w for w in alone.warnings)
    # a name in the metadata that leads out of the folder is not followed
    table = pq.read_table(out)
    pq.write_table(table.replace_schema_metadata({**table.schema.metadata,
                                                  b"hbtool.waits_file": b"../runs/other.waits.parquet"}), out)
    crafted = read_heartbeats(out)
    assert len(crafted.waits) == 0 and any("is not a file name" in w for w in crafted.warnings)


def test_a_waits_table_s_bad_rows_are_left_out_with_a_warning(tmp_path):
    """A waits table is untrusted input too: a negative or unreadable length, time, process or
    thread leaves that wait out, said once; the good ones are kept."""
    beats = pa.Table.from_pandas(pd.DataFrame({"t_ns": [1000, 2000, 3000, 4000], "thread": [0, 0, 1, 1]}),
                                 preserve_index=False)
    pq.write_table(beats.replace_schema_metadata({b"hbtool.waits_file": b"r.waits.parquet"}), tmp_path / "r.parquet")
    pd.DataFrame({"run": ["r"] * 4, "process": ["0", "0", "0", "0"], "thread": ["x", "0", "1", "1"],
                  "os_tid": [1, 1, 2, 2], "t_ns": [1500, 1600, 3500, 3600], "wait_ns": ["100", "100", "-5", "1e300"],
                  "sync": ["barrier"] * 4, "source": ["openmp"] * 4, "construct": [""] * 4}
                 ).to_parquet(tmp_path / "r.waits.parquet")
    trace = read_heartbeats(tmp_path / "r.parquet")
    assert trace.waits[["thread", "t_ns", "wait_ns"]].values.tolist() == [[0, 1600, 100]]
    assert [w for w in trace.warnings if "3 of 4 waits without a valid" in w], trace.warnings
