"""features / train / diagnose / evaluate on real traces from the tracer."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


from conftest import ROOT, SAMPLES, run_cli, run_hbtool, spy_on_reader


def _status(doc):
    return {(t["run"], t["thread"]): t["status"] for t in doc["threads"]}


def test_diagnose_sample_traces_without_model(capsys):
    code, out, err = run_cli(capsys, "diagnose", "--format", "json", SAMPLES / "jacobi-leak",
                             SAMPLES / "pi-shutdown", SAMPLES / "matmul-exit1", SAMPLES / "jacobi-normal")
    assert code == 0, err
    st = _status(json.loads(out))
    assert st[("jacobi-leak", 1)] == "memoryleak"
    assert st[("pi-shutdown", 3)] == "shutdown"
    assert all(st[("matmul-exit1", t)] == "shutdown" for t in range(4))
    assert all(st[("jacobi-normal", t)] == "normal" for t in range(4))
    doc = json.loads(out)
    t = next(x for x in doc["threads"] if (x["run"], x["thread"]) == ("jacobi-leak", 1))
    assert "LTRmax" in t["outside"] and "GTR" in t["outside"] and t["reference"].startswith("team median")
    assert doc["reference"] == "team-median" and doc["ranges"]["source"] == "default"


def test_diagnose_text_says_which_reference(capsys):
    code, out, _ = run_cli(capsys, "diagnose", SAMPLES / "pi-shutdown")
    assert code == 0
    assert out.splitlines()[:2] == ["beats: api (the program's own)",
                                    "ranges: built-in default ranges (no --model); compared with each run's own median thread"]
    assert "completed 301 beats" in out


MATMUL_EXIT1 = """\
beats: api (the program's own)
ranges: built-in default ranges (no --model); compared with each run's own median thread
found: 4 shutdown

run           thread  status    beats  GTR   GHR   DTW   progress  compared with      reason
matmul-exit1       0  shutdown    337  1.03  1.03  39.8      1.12  thread 2 (median)  the process ended abnormally before this thread finished (ended by exit(1) in another thread)
matmul-exit1       1  shutdown    281  1.01  0.75  65.2      0.93  thread 2 (median)  the process ended abnormally before this thread finished (ended by exit(1) in another thread)
matmul-exit1       2  shutdown    301  1.00  1.00   0.0      1.00  itself (median)    the process ended abnormally before this thread finished (called exit(1))
matmul-exit1       3  shutdown    299  0.99  0.96  34.9      0.99  thread 2 (median)  the process ended abnormally before this thread finished (ended by exit(1) in another thread)

GTR: the time the thread took for its beats / the reference's (1 = as fast, 2 = twice as slow);
GHR: its mean heart rate / the reference's; DTW: distance between its heart-rate curve and the
reference's (0 = the same shape); progress: its beats / the reference's (or the model's count).
shutdown: stopped early, or its process died around it.
"""


def test_diagnose_text_exactly(capsys):
    """Each thread says what it was compared with; numbers have one format per column; the
    words are explained under the table; the thread that called exit(1) is told apart."""
    code, out, _ = run_cli(capsys, "diagnose", SAMPLES / "matmul-exit1")
    assert code == 0
    assert out == MATMUL_EXIT1


def test_diagnose_explains_memoryleak_and_names_the_other_thread(capsys):
    code, out, _ = run_cli(capsys, "diagnose", SAMPLES / "jacobi-busywait")
    lines = out.splitlines()
    assert code == 0
    row = next(x for x in lines if x.startswith("jacobi-busywait       2"))
    assert row.split()[2:10] == ["memoryleak", "1000", "1.73", "0.75", "134.5", "1.00", "thread", "0"]
    assert "memoryleak: slowed down over the run" in out and "'hbtool behavior' tells them apart" in out


def test_diagnose_csv_has_every_json_field_with_the_same_rounded_values(capsys):
    code, out, _ = run_cli(capsys, "diagnose", "--format", "json", SAMPLES / "jacobi-leak")
    threads = json.loads(out)["threads"]
    code, out, _ = run_cli(capsys, "diagnose", "--format", "csv", SAMPLES / "jacobi-leak")
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(out)))
    assert list(rows[0]) == list(threads[0])
    for j, c in zip(threads, rows):
        for f in ("GTR", "LTR", "GHR", "LHR", "DTW", "LB", "LTRmax", "progress"):
            assert float(c[f]) == j[f]
            assert round(j[f], 4) == j[f]  # no 16 digits of noise
        assert c["ending"] == j["ending"] and c["compared_with"] == j["compared_with"]
    assert [t["ending"] for t in threads] == ["exit", "process_exit", "process_exit", "process_exit"]
    assert not any(t["died"] for t in threads)


def test_diagnose_shows_the_process_when_a_run_has_several(capsys, tmp_path):
    from conftest import make_trace
    from hbtool.io import write_heartbeats

    a, b = make_trace(threads=3, run="r"), make_trace(threads=3, run="r")
    b.beats["process"] = 1
    import pandas as pd

    a.beats = pd.concat([a.beats, b.beats], ignore_index=True)
    write_heartbeats(a, str(tmp_path / "two.csv"))
    code, out, _ = run_cli(capsys, "diagnose", tmp_path / "two.csv")
    lines = out.splitlines()
    assert code == 0
    assert lines[4].split()[:4] == ["run", "process", "thread", "status"]
    assert [x.split()[1:3] for x in lines[5:11]] == [["0", "0"], ["0", "1"], ["0", "2"], ["1", "0"], ["1", "1"], ["1", "2"]]
    code, out, _ = run_cli(capsys, "diagnose", SAMPLES / "pi-normal")
    assert out.splitlines()[4].split()[:3] == ["run", "thread", "status"]


def test_diagnose_legacy_csv_xlsx(capsys):
    for p in (SAMPLES / "pi-shutdown.csv", SAMPLES / "jacobi-normal.xlsx"):
        code, out, err = run_cli(capsys, "diagnose", "--format", "json", p)
        assert code == 0, err
        assert len(json.loads(out)["threads"]) == 4


def test_diagnose_with_reference(capsys):
    code, out, _ = run_cli(capsys, "diagnose", "--format", "json", SAMPLES / "jacobi-leak",
                           "--reference", SAMPLES / "jacobi-normal")
    doc = json.loads(out)
    assert code == 0 and doc["reference"].endswith("jacobi-normal")
    assert {t["reference"] for t in doc["threads"]} == {f"reference jacobi-normal thread {k}" for k in range(4)}


def test_unknown_for_too_few_beats_never_crash(capsys, tmp_path):
    p = tmp_path / "odd.csv"
    rows = ["thread,t"]
    rows += [f"0,{i * 0.001}" for i in range(1, 200)]        # normal
    rows += [f"1,{i * 0.001}" for i in range(1, 200)]
    rows += [f"2,{i * 0.001}" for i in range(1, 200)]
    rows += ["3,0.5"]                                          # one beat
    rows += ["4,0.1"] * 30                                     # repeated timestamps: NaN rates
    p.write_text("\n".join(rows) + "\n")
    code, out, err = run_cli(capsys, "diagnose", "--format", "json", p)
    assert code == 0, err
    by = {t["thread"]: t for t in json.loads(out)["threads"]}
    assert by[3]["status"] == "unknown" and "too few" in by[3]["reason"]
    assert by[4]["status"] == "unknown" and "no elapsed time" in by[4]["reason"]
    assert by[3]["GTR"] is None
    assert by[0]["status"] == "normal"


@pytest.mark.parametrize("cmd", ["diagnose", "features"])
def test_empty_trace_is_bad_input(tmp_path, cmd):
    p = tmp_path / "empty.csv"
    p.write_text("thread,t\n")
    r = run_hbtool(cmd, p)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip() == f"hbtool: error: {p}: the trace holds no heartbeats: nothing to analyse"


def test_features_command(capsys):
    code, out, _ = run_cli(capsys, "features", "--format", "csv", SAMPLES / "pi-shutdown")
    lines = out.splitlines()
    assert code == 0
    assert lines[0] == "run,process,thread,beats,GTR,LTR,GHR,LHR,DTW,LB,progress,reference,na_reason"
    assert len(lines) == 5


def test_train_then_diagnose(capsys, tmp_path):
    model = tmp_path / "m.json"
    code, _, err = run_cli(capsys, "train", "--normal", SAMPLES / "jacobi-normal", SAMPLES / "pi-normal",
                           "-o", model)
    assert code == 0, err
    assert "level 0.95" in err
    doc = json.loads(model.read_text())
    assert doc["expected_beats"] == 1000 and doc["training"]["sequences"]["normal"] == 8
    code, out, err = run_cli(capsys, "diagnose", "--format", "json", "--model", model, SAMPLES / "pi-shutdown")
    assert code == 0, err
    assert _status(json.loads(out))[("pi-shutdown", 3)] == "shutdown"


def test_train_usage_errors(capsys, tmp_path):
    code, _, err = run_cli(capsys, "train", "-o", tmp_path / "m.json")
    assert code == 2 and "--normal" in err
    code, _, err = run_cli(capsys, "train", SAMPLES / "jacobi-normal", "-o", tmp_path / "m.json")
    assert code == 2 and "say which label" in err


@pytest.mark.parametrize("content", ["{}", "garbage", '{"format": "hbtool-hsa-model", "model_version": 7}'])
def test_diagnose_bad_model_one_line_exit_2(tmp_path, content):
    m = tmp_path / "m.json"
    m.write_text(content)
    r = run_hbtool("diagnose", "--model", m, SAMPLES / "pi-shutdown")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("hbtool: error:")


def test_a_model_trained_against_a_reference_keeps_it_and_diagnose_uses_it(capsys, tmp_path):
    model = tmp_path / "m.json"
    code, _, err = run_cli(capsys, "train", "--reference", SAMPLES / "jacobi-normal", "-o", model,
                           "--normal", SAMPLES / "jacobi-normal", "--memoryleak", SAMPLES / "jacobi-leak")
    assert code == 0, err
    doc = json.loads(model.read_text())
    assert sorted(doc["reference"]) == ["0", "1", "2", "3"] and len(doc["reference"]["0"]) == 1000
    code, out, _ = run_cli(capsys, "diagnose", "--model", model, "--format", "json", SAMPLES / "jacobi-leak")
    stored = json.loads(out)
    assert code == 0 and stored["reference"] == "model"
    assert {t["compared_with"] for t in stored["threads"]} == {f"model reference thread {k}" for k in range(4)}
    # the same as giving the reference with the model
    code, out, _ = run_cli(capsys, "diagnose", "--model", model, "--reference", SAMPLES / "jacobi-normal",
                           "--format", "json", SAMPLES / "jacobi-leak")
    given = json.loads(out)
    assert code == 0
    assert [(t["status"], t["GTR"]) for t in given["threads"]] == [(t["status"], t["GTR"]) for t in stored["threads"]]
    code, out, _ = run_cli(capsys, "diagnose", "--model", model, SAMPLES / "jacobi-leak")
    assert out.splitlines()[1].endswith(f"compared with the reference stored in the model (trace {SAMPLES / 'jacobi-normal'})")


def test_a_damaged_stored_reference_is_one_line_exit_2(capsys, tmp_path):
    model = tmp_path / "m.json"
    run_cli(capsys, "train", "--reference", SAMPLES / "pi-normal", "-o", model, "--normal", SAMPLES / "pi-normal")
    doc = json.loads(model.read_text())
    doc["reference"]["1"] = doc["reference"]["1"][::-1]
    model.write_text(json.dumps(doc))
    code, out, err = run_cli(capsys, "diagnose", "--model", model, SAMPLES / "pi-normal")
    assert (code, out) == (2, "")
    assert err == f"hbtool: error: {model}: the stored reference is damaged (thread 1: times go backwards): train the model again\n"


def test_stopping_short_inside_the_progress_range_is_not_called_normal():
    from hbtool.analyzers.hsa import classify_row, default_model

    m = default_model()
    row = {"na_reason": "", "died": False, "ended": "", "beats": 97, "GTR": 0.5, "LTR": 1.0, "GHR": 1.0, "LHR": 1.0,
           "DTW": 10.0, "LB": 1.0, "LTRmax": 1.0, "progress": 0.97}
    assert classify_row(row, m)[0] == "shutdown"  # Algorithm 1: GTR below its range
    assert classify_row({**row, "beats": 100, "progress": 1.0}, m)[0] == "normal"  # it did all its work, sooner


def test_a_thread_of_automatic_beats_that_made_as_many_as_its_team_did_not_end_early():
    """Automatic OpenMP beats count no progress (progress n/a): a thread whose GTR is below a
    model's range (a whole run a few per cent faster than the three runs the model learned
    from) but that made as many beats as the most of its team is normal; one that made fewer
    is a shutdown, as Algorithm 1 has it; a thread alone in its process has no team to go by."""
    from hbtool.analyzers.hsa import HsaModel, classify_row, default_model

    ranges = {**default_model().ranges, "GTR": (0.98, 1.02)}
    m = HsaModel(ranges, level=0.95)
    row = {"na_reason": "", "died": False, "ended": "", "beats": 4342, "GTR": 0.97, "LTR": float("nan"),
           "GHR": 1.0, "LHR": float("nan"), "DTW": float("nan"), "LB": float("nan"), "LTRmax": float("nan"),
           "progress": float("nan"), "progress_counts": False, "team_beats": 4342.0}
    status, why = classify_row(row, m)
    assert status == "normal" and "as many beats as the most of its team (4342)" in why, why
    assert classify_row({**row, "beats": 4000}, m)[0] == "shutdown"
    assert classify_row({**row, "team_beats": float("nan")}, m)[0] == "shutdown"
    assert classify_row({**row, "progress_counts": True}, m)[0] == "shutdown"


@pytest.fixture(scope="module")
def tiny_dataset(tmp_path_factory, tracer_built):
    out = tmp_path_factory.mktemp("ds")
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "make_dataset.py"), str(out), "--runs", "4",
                        "--beats", "150", "--benchmarks", "pi_pthread", "--leak-bytes", str(1 << 20)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return out


def test_dataset_layout_and_labels(tiny_dataset):
    runs = sorted(p.relative_to(tiny_dataset).parts[:2] for p in tiny_dataset.glob("*/*/run*"))
    assert runs.count(("pi_pthread", "normal")) == 4 and runs.count(("pi_pthread", "shutdown")) == 4
    labels = json.loads((tiny_dataset / "pi_pthread" / "memoryleak" / "run000" / "labels.json").read_text())
    assert sorted(labels["threads"].values()) == ["memoryleak", "normal", "normal", "normal"]
    process_stop = json.loads((tiny_dataset / "pi_pthread" / "shutdown" / "run000" / "labels.json").read_text())
    assert set(process_stop["threads"].values()) == {"shutdown"} and process_stop["mode"] == "exit"


def test_evaluate_says_which_folders_it_passed_over(capsys, tiny_dataset):
    (tiny_dataset / "pi_pthread" / "busywait").mkdir(exist_ok=True)
    try:
        code, _, err = run_cli(capsys, "evaluate", "--format", "json", tiny_dataset)
    finally:
        (tiny_dataset / "pi_pthread" / "busywait").rmdir()
    assert code == 0
    assert (f"hbtool: warning: {tiny_dataset}: 1 folder passed over: pi_pthread/busywait (a label folder is named "
            f"normal, memoryleak or shutdown)") in err.splitlines()


def test_evaluate_tiny_dataset(capsys, tiny_dataset):
    code, out, err = run_cli(capsys, "evaluate", "--format", "json", tiny_dataset)
    assert code == 0, err
    doc = json.loads(out)
    b = doc["benchmarks"][0]
    assert b["benchmark"] == "pi_pthread" and len(b["macro_f1_runs"]) == 3
    assert b["n_normal"] + b["n_memoryleak"] + b["n_shutdown"] == 48
    assert 0 <= b["macro_f1"] <= 1
    total = sum(sum(r.values()) for r in b["confusion"].values())
    test_rows = 48 - sum(round(0.3 * n) or 1 for n in (b["n_normal"], b["n_memoryleak"], b["n_shutdown"]))
    assert total == 3 * test_rows
    assert doc["dataset"]["leak_bytes_per_beat"] == 1 << 20
    code, out, _ = run_cli(capsys, "evaluate", tiny_dataset)
    assert "confusion matrix, pi_pthread" in out
    assert "memory leak 1 MiB per beat" in out.splitlines()[1]


def test_evaluate_streams_the_traces_and_prints_what_the_whole_reader_gives(capsys, monkeypatch, tiny_dataset):
    """evaluate reads each tracer trace in bounded memory (its beats one thread at a time):
    the same figures as when every trace is read whole."""
    import hbtool.io
    from hbtool.model.heartbeats import StreamedTrace

    whole = hbtool.io.read_heartbeats
    kinds = spy_on_reader(monkeypatch)
    streamed = run_cli(capsys, "evaluate", "--format", "json", tiny_dataset)
    assert kinds and set(kinds) == {StreamedTrace}
    monkeypatch.setattr(hbtool.io, "read_heartbeats", lambda p, stream=False: whole(p, stream=False))
    assert streamed == run_cli(capsys, "evaluate", "--format", "json", tiny_dataset)
    assert streamed[0] == 0 and json.loads(streamed[1])["benchmarks"][0]["n_normal"] > 0


def test_evaluate_not_a_dataset(tmp_path):
    r = run_hbtool("evaluate", tmp_path)
    assert r.returncode == 2 and "no runs found" in r.stderr


def test_train_takes_thread_labels_from_the_examples_truth_files(capsys, tmp_path):
    model = tmp_path / "m.json"
    code, _, err = run_cli(capsys, "train", "--normal", SAMPLES / "jacobi-normal", SAMPLES / "pi-normal",
                           "--memoryleak", SAMPLES / "jacobi-leak", "--shutdown", SAMPLES / "pi-shutdown",
                           SAMPLES / "matmul-exit1", "-o", model)
    assert code == 0, err
    seq = json.loads(model.read_text())["training"]["sequences"]
    # jacobi-leak: thread 1 leaks, 3 normal; pi-shutdown: thread 3 stops, 3 normal;
    # matmul-exit1: the whole process went down, 4 shutdown
    assert seq == {"normal": 8 + 3 + 3, "memoryleak": 1, "shutdown": 1 + 4}


def test_two_threads_compared_with_each_other_are_warned_about(capsys, tmp_path):
    from conftest import make_trace
    from hbtool.io import write_heartbeats

    for n, warned in ((2, True), (3, False)):
        p = tmp_path / f"t{n}.csv"
        write_heartbeats(make_trace(threads=n, beats=80), str(p))
        code, _, err = run_cli(capsys, "diagnose", p)
        assert code == 0
        assert (f"hbtool: warning: r: 2 threads, each compared with the other: the median of two is one of them, "
                f"so a sick thread can be the reference; give --reference (a normal run) or a model trained with one"
                in err.splitlines()) is warned
