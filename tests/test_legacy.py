"""The seed tracer's legacy per-thread files (text and xlsx)."""

import numpy as np
import pandas as pd
import pytest

from hbtool.io import read_heartbeats

HEADER = "Beat    ThreadNum   iter    Timestamp    Heartbeat Rate\n"


def legacy_text(thread: int, n: int, period_ns: int) -> str:
    """What the seed tracer writes: Beat restarts at 1 after 999, Timestamp counts
    from the last beat before the restart."""
    lines = [HEADER]
    base = 0
    beat = 0
    for i in range(n):
        t = i * period_ns
        beat += 1
        if beat == 1000:
            beat = 1
            base = (i - 1) * period_ns
        ts = t - base
        rate = 1e9 / period_ns
        lines.append(f"{beat}    {thread}    {i}    {ts}    {rate:.3f}\n")
    return "".join(lines)


def test_restart_after_999_rebuilds_one_sequence(tmp_path):
    run = tmp_path / "run1"
    run.mkdir()
    (run / "2020-00").write_text(legacy_text(0, 2500, 1_000_000))
    (run / "2020-01").write_text(legacy_text(1, 1200, 2_000_000))
    tr = read_heartbeats(run)
    assert tr.runs["run1"]["format"] == "legacy"
    assert tr.warnings == []
    t0 = tr.beats[tr.beats["thread"] == 0]
    assert len(t0) == 2500
    np.testing.assert_array_equal(t0["t_ns"].to_numpy(), np.arange(2500) * 1_000_000)
    np.testing.assert_array_equal(t0["seq"].to_numpy(), np.arange(2500))
    t1 = tr.beats[tr.beats["thread"] == 1]
    np.testing.assert_array_equal(t1["t_ns"].to_numpy(), np.arange(1200) * 2_000_000)
    assert t1["iteration"].tolist()[:3] == [0, 1, 2]


def test_malformed_lines_are_skipped_with_file_and_line(tmp_path):
    text = legacy_text(0, 20, 1_000_000).splitlines(keepends=True)
    text[5] = "5    0    4    4000"  # cut off by a crash (no rate, no newline run-on)
    text[5] += "\n"
    text[9] = text[9].rstrip("\n") + text[10]  # two records run together
    del text[10]
    p = tmp_path / "2020-00"
    p.write_text("".join(text))
    tr = read_heartbeats(p)
    assert len(tr.beats) == 20 - 3
    assert any(w.endswith(":6: malformed record skipped") for w in tr.warnings)
    assert any(w.endswith(":10: malformed record skipped") for w in tr.warnings)
    assert len(tr.warnings) == 2


def test_legacy_xlsx_per_thread_with_leading_spaces(tmp_path):
    run = tmp_path / "xrun"
    run.mkdir()
    for k in range(3):
        n = 30
        df = pd.DataFrame({"Beat": np.arange(1, n + 1), " ThreadNum": k, " iter": np.arange(n),
                           " Timestamp": np.arange(n) * 500_000 * (k + 1), " Heartbeat Rate": 1.0})
        df.to_excel(run / f"2020-0{k}.xlsx", index=False)
    tr = read_heartbeats(run)
    assert sorted(tr.beats["thread"].unique().tolist()) == [0, 1, 2]
    t2 = tr.beats[tr.beats["thread"] == 2]
    assert t2["t_ns"].iloc[-1] == 29 * 1_500_000
    assert tr.runs["xrun"]["lifecycle"] is False


def test_single_legacy_xlsx_file(tmp_path):
    df = pd.DataFrame({"Beat": [1, 2, 3], "ThreadNum": 4, "iter": [0, 1, 2],
                       "Timestamp": [0, 10, 20], "Heartbeat Rate": 0.0})
    p = tmp_path / "2020-04.xlsx"
    df.to_excel(p, index=False)
    tr = read_heartbeats(p)
    assert tr.beats["thread"].unique().tolist() == [4]
    assert tr.beats["t_ns"].tolist() == [0, 10, 20]


def test_legacy_file_with_only_garbage_is_an_error(tmp_path):
    from hbtool.errors import TraceFormatError

    p = tmp_path / "2020-00"
    p.write_text(HEADER + "x y z\n")
    with pytest.raises(TraceFormatError, match="no heartbeat records"):
        read_heartbeats(p)
