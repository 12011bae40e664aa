"""Long-format csv, xlsx and parquet tables."""

import pandas as pd
import pytest

from hbtool.errors import TraceFormatError
from hbtool.io import read_heartbeats, write_heartbeats

from conftest import make_trace


def test_csv_aliases_case_insensitive(tmp_path):
    p = tmp_path / "a.csv"
    p.write_text("Thread_ID,Beat,Time_NS,Iter\n0,0,1000,7\n0,1,2000,8\n1,0,1500,9\n")
    tr = read_heartbeats(p)
    b = tr.beats
    assert b["thread"].tolist() == [0, 0, 1]
    assert b["t_ns"].tolist() == [1000, 2000, 1500]
    assert b["iteration"].tolist() == [7, 8, 9]
    assert b["run"].unique().tolist() == ["a"]


def test_seconds_column_and_derived_seq(tmp_path):
    p = tmp_path / "b.csv"
    p.write_text("tid,time\n3,0.5\n3,0.25\n3,1.0\n")
    b = read_heartbeats(p).beats
    assert b["t_ns"].tolist() == [250_000_000, 500_000_000, 1_000_000_000]
    assert b["seq"].tolist() == [0, 1, 2]


def test_absolute_times_are_rebased(tmp_path):
    p = tmp_path / "c.csv"
    p.write_text("thread,timestamp_ns\n0,1700000000000000000\n0,1700000000500000000\n")
    tr = read_heartbeats(p)
    assert tr.beats["t_ns"].tolist() == [0, 500_000_000]
    assert any("absolute" in w for w in tr.warnings)


def test_thread_names_become_numbers_with_labels(tmp_path):
    p = tmp_path / "d.csv"
    p.write_text("thread,t\nworker-a,0.1\nworker-b,0.2\nworker-a,0.3\n")
    b = read_heartbeats(p).beats
    assert sorted(zip(b["thread"], b["label"])) == [(0, "worker-a"), (0, "worker-a"), (1, "worker-b")]


def test_rows_without_time_are_dropped_with_warning(tmp_path):
    p = tmp_path / "e.csv"
    p.write_text("thread,t\n0,0.1\n0,\n0,abc\n0,0.4\n")
    tr = read_heartbeats(p)
    assert len(tr.beats) == 2
    assert any("2 rows without a valid time" in w for w in tr.warnings)


def test_no_usable_columns(tmp_path):
    p = tmp_path / "f.csv"
    p.write_text("alpha,beta\n1,2\n")
    with pytest.raises(TraceFormatError, match="no time column"):
        read_heartbeats(p)
    x = tmp_path / "g.xlsx"
    pd.DataFrame({"foo": [1, 2], "bar": [3, 4]}).to_excel(x, index=False)
    with pytest.raises(TraceFormatError, match="no sheet has a time column"):
        read_heartbeats(x)


def test_xlsx_one_run_per_sheet(tmp_path):
    p = tmp_path / "runs.xlsx"
    with pd.ExcelWriter(p) as w:
        pd.DataFrame({"thread": [0, 0, 1], "t": [0.1, 0.2, 0.15]}).to_excel(w, sheet_name="run-a", index=False)
        pd.DataFrame({"thread": [0, 0], "t": [0.3, 0.6]}).to_excel(w, sheet_name="run-b", index=False)
        pd.DataFrame({"note": ["x"]}).to_excel(w, sheet_name="notes", index=False)
    tr = read_heartbeats(p)
    assert tr.run_names == ["run-a", "run-b"]
    assert tr.beats.groupby("run").size().to_dict() == {"run-a": 3, "run-b": 2}
    assert any("sheet 'notes' has no usable columns" in w for w in tr.warnings)


@pytest.mark.parametrize("suffix", [".csv", ".xlsx", ".parquet"])
def test_round_trip(tmp_path, suffix):
    tr = make_trace()
    out = tmp_path / f"t{suffix}"
    write_heartbeats(tr, str(out))
    back = read_heartbeats(out)
    cols = ["thread", "seq", "t_ns", "loop", "iteration", "tag", "os_tid"]
    pd.testing.assert_frame_equal(back.beats[cols], tr.beats[cols])


def test_parquet_and_xlsx_keep_events(tmp_path):
    from test_hbt_format import _with_events

    tr = _with_events(make_trace())
    for suffix in (".parquet", ".xlsx"):
        out = tmp_path / f"ev{suffix}"
        write_heartbeats(tr, str(out))
        back = read_heartbeats(out)
        assert sorted(back.events["kind"].tolist()) == ["process_exit", "thread_end", "thread_start"], suffix
        assert back.runs[next(iter(back.runs))]["lifecycle"] is True


def test_garbage_files_are_format_errors(tmp_path):
    x = tmp_path / "bad.xlsx"
    x.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(TraceFormatError):
        read_heartbeats(x)
    q = tmp_path / "bad.parquet"
    q.write_bytes(b"PAR1garbage")
    with pytest.raises(TraceFormatError):
        read_heartbeats(q)


def test_directory_of_runs_reads_every_run(tmp_path):
    root = tmp_path / "runs"
    (root / "a").mkdir(parents=True)
    (root / "b" / "deeper").mkdir(parents=True)
    (root / "empty").mkdir()
    write_heartbeats(make_trace(run="a"), str(root / "a" / "x.hbt"))
    write_heartbeats(make_trace(threads=2), str(root / "b" / "deeper" / "y.hbt"))
    write_heartbeats(make_trace(threads=1), str(root / "table.csv"))
    (root / "notes.txt").write_text("not a trace\n")
    (root / "script.sh").write_text("echo hi\n")
    tr = read_heartbeats(root)
    assert sorted(tr.run_names) == ["a", "deeper", "r"]
    assert tr.beats.groupby("run", observed=True)["thread"].nunique().to_dict() == {"a": 3, "deeper": 2, "r": 1}


def test_directory_with_nothing_readable(tmp_path):
    from hbtool.errors import UnknownFormatError

    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "readme").write_text("hello\n")
    with pytest.raises(UnknownFormatError, match="holds no trace files"):
        read_heartbeats(tmp_path / "x")


def test_text_columns_are_read_per_distinct_value_as_before(tmp_path):
    """run, source and construct are made per distinct value (categoricals in text order):
    runs sort as text whatever order the table or a parquet dictionary has them in, a
    source is stripped and lowercased, blank or missing is the program's own (api), and
    numbers in a text column read as their text."""
    df = pd.DataFrame({"run": ["b", "b", "a", "a", "10", "10"], "thread": [0, 0, 0, 0, 0, 0],
                       "t_ns": [1, 2, 3, 4, 5, 6], "source": [" OpenMP", "openmp", "", None, "API", "api"],
                       "construct": ["for f", "for f", "", "", "", ""]})
    df["run"] = pd.Categorical(df["run"], categories=["b", "a", "10"])   # not in text order
    path = tmp_path / "runs.parquet"
    df.to_parquet(path)
    b = read_heartbeats(path).beats
    assert b["run"].astype(str).tolist() == ["10", "10", "a", "a", "b", "b"]
    assert b["source"].astype(str).tolist() == ["api", "api", "api", "api", "openmp", "openmp"]
    assert b["construct"].astype(str).tolist() == ["", "", "", "", "for f", "for f"]
    csv = tmp_path / "nums.csv"
    pd.DataFrame({"run": [7, 7], "thread": [0, 1], "t_ns": [1, 2], "label": [3.5, None]}).to_csv(csv, index=False)
    b = read_heartbeats(csv).beats
    assert b["run"].astype(str).tolist() == ["7", "7"] and b["label"].astype(str).tolist() == ["3.5", ""]
