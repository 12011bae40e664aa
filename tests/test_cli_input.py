"""Input and output at the command line's edges (issue 17): bare `hbtool`, commands given a
trace without what they report on, `convert -o`, standard input in every format, and the
legacy sample trace."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

from hbtool import config
from hbtool.io import write_heartbeats

from conftest import ROOT, SAMPLES, make_trace, run_cli, run_hbtool

NO_STATUS = ("no status samples in this trace (record them with 'hbtool record --status' or "
             "HBTRACE_STATUS=1)")
NO_QUEUES = "no instrumented queues in this trace (instrument them with hbtrace_queue.h, or give a sample table)"
NO_PROBES = ("no probe statistics in this trace (no HBT_PROBE_BEGIN/END ran, or no thread lived to merge "
             "its statistics)")


def _stdin(monkeypatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


@pytest.fixture
def csv_trace(tmp_path):
    p = tmp_path / "run1.csv"
    p.write_text("thread,seq,t\n0,0,0.0\n0,1,0.5\n0,2,1.0\n1,0,0.0\n1,1,1.0\n")
    return p


# --------------------------------------------------------------------------- bare hbtool, help


def test_bare_hbtool_prints_help_on_stdout_and_exits_0():
    bare, helped = run_hbtool(), run_hbtool("--help")
    assert (bare.returncode, bare.stderr) == (0, "")
    assert bare.stdout == helped.stdout
    assert bare.stdout.startswith("Usage: hbtool [OPTIONS] COMMAND [ARGS]...\n")


def test_bare_hbtool_in_process(capsys):
    code, out, err = run_cli(capsys)
    assert (code, err) == (0, "")
    assert "Commands:" in out


def test_config_one_line_help():
    out = run_hbtool("--help").stdout.splitlines()
    assert "  config        Where the tracer is, its build flags and its environment." in out


# --------------------------------------------------------------------------- nothing to report


@pytest.mark.parametrize("fmt", ["text", "json", "csv"])
@pytest.mark.parametrize("cmd, msg", [("status", NO_STATUS), ("probes", NO_PROBES), ("service-rate", NO_QUEUES)])
def test_nothing_to_report_is_one_line_exit_2(capsys, cmd, msg, fmt):
    trace = SAMPLES / "pi-normal"
    code, out, err = run_cli(capsys, cmd, "--format", fmt, trace)
    assert (code, out) == (2, "")
    assert err == f"hbtool: error: {trace}: {msg}\n"


def test_status_without_samples_as_a_process():
    r = run_hbtool("status", SAMPLES / "pi-normal")
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == f"hbtool: error: {SAMPLES / 'pi-normal'}: {NO_STATUS}\n"


# --------------------------------------------------------------------------- convert -o


def test_convert_dash_o(capsys, tmp_path, csv_trace):
    out = tmp_path / "out.parquet"
    code, stdout, err = run_cli(capsys, "convert", csv_trace, "-o", out)
    assert (code, stdout, err) == (0, "", f"hbtool: wrote 5 beats of 1 run(s) to {out}\n")
    code, o2, _ = run_cli(capsys, "info", "--format", "json", out)
    assert [t["beats"] for t in json.loads(o2)["threads"]] == [3, 2]


def test_convert_long_output_option_and_to(capsys, tmp_path, csv_trace):
    out = tmp_path / "noext"
    code, _, err = run_cli(capsys, "convert", csv_trace, "--output", out, "--to", "hbt")
    assert code == 0, err
    assert out.read_bytes()[:8] == b"HBTRACE\0"


def test_convert_refuses_to_overwrite_without_force(capsys, tmp_path, csv_trace):
    out = tmp_path / "out.csv"
    out.write_text("keep me\n")
    for args in (["-o", out], [out]):
        code, stdout, err = run_cli(capsys, "convert", csv_trace, *args)
        assert (code, stdout) == (2, "")
        assert err == f"hbtool: error: {out}: exists; give --force to replace it\n"
        assert out.read_text() == "keep me\n"
    code, _, err = run_cli(capsys, "convert", csv_trace, "-o", out, "--force")
    assert code == 0, err
    assert out.read_text().startswith("run,process,thread,seq,")


def test_convert_bad_suffix_is_refused_before_reading(capsys, tmp_path):
    out = tmp_path / "out.foo"
    code, stdout, err = run_cli(capsys, "convert", tmp_path / "missing.csv", "-o", out)
    assert (code, stdout) == (2, "")
    assert err == (f"hbtool: error: {out}: cannot tell the output format from the name: use a .csv, .xlsx, "
                   f".parquet or .hbt suffix, or --to\n")
    assert not out.exists()


def test_convert_to_a_directory(capsys, tmp_path, csv_trace):
    code, _, err = run_cli(capsys, "convert", csv_trace, "-o", tmp_path, "--to", "csv")
    assert code == 2
    assert err == f"hbtool: error: {tmp_path}: is a directory; give a file name\n"


@pytest.mark.parametrize("args, msg", [
    ([], "no output: give OUT or -o FILE (- for csv on stdout)"),
    (["a.csv", "-o", "b.csv"], "the output is given twice (a.csv and -o b.csv): give one"),
    (["-o", "-", "--to", "xlsx"], "- (stdout) takes csv only; give a file name for xlsx"),
])
def test_convert_output_usage_errors(capsys, tmp_path, csv_trace, args, msg):
    code, out, err = run_cli(capsys, "convert", csv_trace, *args)
    assert (code, out) == (2, "")
    assert err == f"hbtool: error: {msg} (see 'hbtool convert --help')\n"


def test_convert_dash_o_dash_writes_csv_to_stdout(capsys, csv_trace):
    code, out, err = run_cli(capsys, "convert", csv_trace, "-o", "-")
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == "run,process,thread,seq,t_s,t_ns,loop,iteration,tag,os_tid,label,source,construct"
    assert len(out.splitlines()) == 6


# --------------------------------------------------------------------------- standard input


def _converted(tmp_path, suffix: str):
    p = tmp_path / f"t.{suffix}"
    write_heartbeats(make_trace(), str(p))
    return p


@pytest.mark.parametrize("kind", ["hbt", "xlsx", "parquet", "csv", "legacy", "tracer-hbt"])
def test_info_reads_every_format_from_stdin(capsys, monkeypatch, tmp_path, kind):
    src = {"legacy": SAMPLES / "legacy-shutdown" / "2020-02",
           "tracer-hbt": next((SAMPLES / "pi-segv").glob("*.hbt"))}.get(kind) or _converted(tmp_path, kind)
    code, want, _ = run_cli(capsys, "info", "--format", "json", src)
    assert code == 0
    _stdin(monkeypatch, src.read_bytes())
    code, got, err = run_cli(capsys, "info", "--format", "json", "-")
    assert code == 0, err
    want, got = json.loads(want), json.loads(got)
    assert [(t["thread"], t["beats"], t["duration_s"], t["ending"]) for t in got["threads"]] == \
        [(t["thread"], t["beats"], t["duration_s"], t["ending"]) for t in want["threads"]]
    assert got["runs"][0]["format"] == want["runs"][0]["format"]
    assert got["runs"][0]["source"] == "stdin"


def test_stdin_through_a_real_pipe_for_diagnose():
    hbt = next((SAMPLES / "pi-shutdown").glob("*.hbt"))
    want = run_hbtool("diagnose", "--format", "csv", hbt)
    with open(hbt, "rb") as fh:
        got = subprocess.run([sys.executable, "-m", "hbtool", "diagnose", "--format", "csv", "-"], stdin=fh,
                             capture_output=True, timeout=300)
    assert (got.returncode, got.stderr) == (0, b"")
    # the run is called stdin; every other column is the same
    assert got.stdout.decode().replace("stdin", hbt.stem) == want.stdout


def test_convert_from_stdin(capsys, monkeypatch, tmp_path):
    src = _converted(tmp_path, "parquet")
    _stdin(monkeypatch, src.read_bytes())
    out = tmp_path / "back.hbt"
    code, _, err = run_cli(capsys, "convert", "-", "-o", out)
    assert (code, err) == (0, f"hbtool: wrote {len(make_trace().beats)} beats of 1 run(s) to {out}\n")


def test_profile_from_stdin(capsys, monkeypatch, tmp_path):
    from test_profile_reader import _synthetic

    path, _ = _synthetic(tmp_path)
    code, want, _ = run_cli(capsys, "interference", "--format", "json", path)
    assert code == 0
    _stdin(monkeypatch, path.read_bytes())
    code, got, err = run_cli(capsys, "interference", "--format", "json", "-")
    assert code == 0, err
    a, b = json.loads(want)["runs"][0], json.loads(got)["runs"][0]
    assert b["run"] == "stdin"
    for key in ("interference_percent", "class", "segments", "segments_interfered"):
        assert a[key] == b[key], key


def test_status_model_from_stdin(capsys, monkeypatch):
    _stdin(monkeypatch, next((SAMPLES / "pi-normal").glob("*.hbt")).read_bytes())
    code, out, err = run_cli(capsys, "status", "-")
    assert (code, out, err) == (2, "", f"hbtool: error: -: {NO_STATUS}\n")


def test_empty_stdin(capsys, monkeypatch):
    _stdin(monkeypatch, b"")
    code, out, err = run_cli(capsys, "info", "-")
    assert (code, out) == (2, "")
    assert err == "hbtool: error: stdin: standard input is empty (pipe a trace into hbtool, or give a file)\n"


def test_stdin_beyond_the_cap_is_refused_and_nothing_is_left_behind(capsys, monkeypatch, tmp_path):
    import tempfile

    monkeypatch.setattr(config, "MAX_STDIN_BYTES", 3 << 20)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    _stdin(monkeypatch, b"thread,t\n" + b"0,1\n" * (1 << 20))
    code, out, err = run_cli(capsys, "info", "-")
    assert (code, out) == (2, "")
    assert err == ("hbtool: error: stdin: standard input holds more than 3 MiB, the most hbtool copies from it: "
                   "give the trace as a file instead\n")
    assert list(tmp_path.iterdir()) == []


def test_garbage_on_stdin_names_stdin_not_a_temporary_file(capsys, monkeypatch, tmp_path):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    _stdin(monkeypatch, bytes(range(256)) * 4)
    code, out, err = run_cli(capsys, "info", "-")
    assert (code, out) == (2, "")
    assert err.startswith("hbtool: error: stdin: unknown heartbeat trace format (expected ")
    assert err.count("\n") == 1 and str(tmp_path) not in err
    assert list(tmp_path.iterdir()) == []


def test_stdin_in_a_terminal_is_refused():
    import pty

    leader, follower = pty.openpty()
    try:
        r = subprocess.run([sys.executable, "-m", "hbtool", "info", "-"], stdin=follower, capture_output=True,
                           text=True, timeout=60)
    finally:
        import os

        os.close(leader)
        os.close(follower)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == ("hbtool: error: stdin: '-' reads a trace from standard input, which is a terminal: "
                        "pipe a trace into hbtool, or give a file\n")


# --------------------------------------------------------------------------- the legacy sample


LEGACY = SAMPLES / "legacy-shutdown"


def test_legacy_sample_info_exact(capsys):
    code, out, err = run_cli(capsys, "info", LEGACY)
    assert (code, err) == (0, "")
    ended = "unknown (the trace has no lifecycle records)"
    assert out.splitlines() == [
        f"run legacy-shutdown: legacy ({LEGACY}), 4 threads, 1350 api beats",
        "  note: legacy traces time each thread from its own first beat",
        "",
        "run              thread  beats  first_s  last_s  duration_s  beats/s  ended",
        f"legacy-shutdown       0    400   0.0000  0.7986      0.7986    499.6  {ended}",
        f"legacy-shutdown       1    400   0.0000  0.8175      0.8175    488.1  {ended}",
        f"legacy-shutdown       2    150   0.0000  0.3081      0.3081    483.6  {ended}",
        f"legacy-shutdown       3    400   0.0000  0.8489      0.8489    470.0  {ended}",
    ]


def test_legacy_sample_diagnose_finds_the_stopped_thread(capsys):
    code, out, err = run_cli(capsys, "diagnose", "--format", "json", LEGACY)
    assert (code, err) == (0, "")
    threads = json.loads(out)["threads"]
    assert [(t["thread"], t["status"]) for t in threads] == [
        (0, "normal"), (1, "normal"), (2, "shutdown"), (3, "normal")]
    truth = json.loads((LEGACY / "truth.json").read_text())
    assert (truth["inject"], truth["thread"]) == ("shutdown", 2)


def test_legacy_sample_is_what_its_script_writes(tmp_path):
    r = subprocess.run([sys.executable, str(SAMPLES / "make_legacy.py"), str(tmp_path / "again")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    names = sorted(p.name for p in LEGACY.iterdir())
    assert names == ["2020-00", "2020-01", "2020-02", "2020-03", "truth.json"]
    for name in names:
        assert (tmp_path / "again" / name).read_bytes() == (LEGACY / name).read_bytes(), name


def test_readme_tours_the_legacy_sample():
    readme = (ROOT / "README.md").read_text()
    assert "\nhbtool diagnose sample_traces/legacy-shutdown" in readme
    assert "`legacy-shutdown`" in readme
