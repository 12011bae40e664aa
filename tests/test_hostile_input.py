"""The CLI on hostile or degenerate input: a result, or one line on stderr and exit status 2."""

import json

import numpy as np
import pandas as pd
import pytest

from conftest import SAMPLES, run_hbtool


def one_line_exit_2(r, needle=""):
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and needle in r.stderr


def test_reference_too_short_for_features(tmp_path):
    ref = tmp_path / "one.csv"
    ref.write_text("time,thread\n1.0,0\n")
    r = run_hbtool("diagnose", "--format", "json", SAMPLES / "pi-shutdown", "--reference", ref)
    assert r.returncode == 0, r.stderr
    threads = json.loads(r.stdout)["threads"]
    assert {t["status"] for t in threads} == {"unknown"}
    assert all("no reference thread" in t["reason"] for t in threads)


@pytest.mark.parametrize("field", ["window", "max_degree", "dtw_max_points"])
def test_model_with_zero_window_is_refused(tmp_path, field):
    m = tmp_path / "m.json"
    r = run_hbtool("train", "--normal", SAMPLES / "jacobi-normal", "-o", m)
    assert r.returncode == 0, r.stderr
    doc = json.loads(m.read_text())
    doc["settings"][field] = 0
    m.write_text(json.dumps(doc))
    one_line_exit_2(run_hbtool("diagnose", "--model", m, SAMPLES / "pi-shutdown"), "bad feature settings")


def test_outputs_to_impossible_places(tmp_path):
    src = SAMPLES / "pi-shutdown.csv"
    one_line_exit_2(run_hbtool("convert", src, "/nonexistent-dir/x.csv"))
    d = tmp_path / "adir"
    d.mkdir()
    one_line_exit_2(run_hbtool("convert", src, d, "--to", "hbt"))
    assert list(tmp_path.iterdir()) == [d] and list(d.iterdir()) == []  # no stray temporary file
    one_line_exit_2(run_hbtool("train", "--normal", SAMPLES / "jacobi-normal", "-o", "/nonexistent-dir/m.json"))
    one_line_exit_2(run_hbtool("plot", SAMPLES / "pi-segv", "-o", tmp_path / "p.txt"), ".png")
    one_line_exit_2(run_hbtool("plot", SAMPLES / "pi-segv", "-o", "/nonexistent-dir/p.png"))
    one_line_exit_2(run_hbtool("convert", src, "-", "--to", "hbt"), "csv only")


def test_thread_ids_too_large(tmp_path):
    p = tmp_path / "huge.csv"
    p.write_text("time,thread\n1,99999999999999999999\n2,99999999999999999999\n")
    one_line_exit_2(run_hbtool("info", p), "too large")


def test_a_blank_thread_cell_keeps_the_other_numbers(tmp_path):
    p = tmp_path / "blank.csv"
    p.write_text("time,thread\n1,3\n2,3\n3,5\n4,5\n5,\n")
    r = run_hbtool("info", "--format", "json", p)
    assert r.returncode == 0, r.stderr
    assert [(t["thread"], t["beats"]) for t in json.loads(r.stdout)["threads"]] == [(3, 2), (5, 2)]
    assert "1 rows without a thread skipped" in r.stderr


@pytest.mark.parametrize("kind", ["datetime", "timedelta"])
def test_clock_typed_time_columns(tmp_path, kind):
    t = (pd.date_range("2026-01-01", periods=20, freq="10ms") if kind == "datetime"
         else pd.to_timedelta(np.arange(20) * 10, unit="ms"))
    df = pd.DataFrame({"time": t, "thread": 0})
    p = tmp_path / f"{kind}.parquet"
    df.to_parquet(p)
    r = run_hbtool("info", "--format", "json", p)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["threads"][0]["duration_s"] == pytest.approx(0.19)


def test_info_on_a_table_with_no_valid_row(tmp_path):
    p = tmp_path / "empty.csv"
    p.write_text("time,thread\n")
    one_line_exit_2(run_hbtool("info", p), "no heartbeats")
