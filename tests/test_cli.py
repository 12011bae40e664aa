"""The command line: exact output, formats, and bad input."""

import json
import os
import subprocess
import sys

import pytest

from hbtool.cli import COMMANDS
from hbtool.io import write_heartbeats

from conftest import ROOT, make_trace, run_cli, run_hbtool


@pytest.fixture
def csv_trace(tmp_path):
    p = tmp_path / "run1.csv"
    p.write_text("thread,seq,t\n0,0,0.0\n0,1,0.5\n0,2,1.0\n1,0,0.0\n1,1,1.0\n")
    return p


def test_info_text_exact(capsys, csv_trace):
    code, out, err = run_cli(capsys, "info", csv_trace)
    assert code == 0
    assert err == ""
    assert out.splitlines() == [
        f"run run1: csv ({csv_trace}), 2 threads, 5 api beats",
        "",
        "run   thread  beats  first_s  last_s  duration_s  beats/s  ended",
        "run1       0      3   0.0000  1.0000      1.0000      2.0  unknown (the trace has no lifecycle records)",
        "run1       1      2   0.0000  1.0000      1.0000      1.0  unknown (the trace has no lifecycle records)",
    ]


def test_info_json_contract(capsys, csv_trace):
    code, out, _ = run_cli(capsys, "info", "--format", "json", csv_trace)
    doc = json.loads(out)
    assert code == 0
    assert [(t["run"], t["thread"], t["beats"], t["duration_s"]) for t in doc["threads"]] == [
        ("run1", 0, 3, 1.0), ("run1", 1, 2, 1.0)]
    assert doc["runs"][0]["format"] == "csv"
    assert doc["threads"][0]["mean_rate"] == 2.0


def test_info_csv(capsys, csv_trace):
    code, out, _ = run_cli(capsys, "info", "--format", "csv", csv_trace)
    lines = out.splitlines()
    assert lines[0] == "run,process,thread,beats,first_s,last_s,duration_s,mean_rate,ended,ending,os_tids"
    assert lines[1].startswith("run1,0,0,3,0.0,1.0,1.0,2.0,")


def test_info_reads_stdin(capsys, monkeypatch):
    code, out, _ = run_cli(capsys, "info", "--format", "json", "-",
                           stdin_text="thread,t\n0,0.1\n0,0.2\n", monkeypatch=monkeypatch)
    assert code == 0
    assert json.loads(out)["threads"][0]["beats"] == 2


def test_one_beat_thread_has_no_rate(capsys, tmp_path):
    p = tmp_path / "one.csv"
    p.write_text("thread,t\n0,0.1\n")
    code, out, _ = run_cli(capsys, "info", "--format", "json", p)
    t = json.loads(out)["threads"][0]
    assert (code, t["beats"], t["mean_rate"]) == (0, 1, None)


@pytest.mark.parametrize("suffix", ["csv", "xlsx", "parquet", "hbt"])
def test_convert_every_format(capsys, tmp_path, csv_trace, suffix):
    out = tmp_path / f"out.{suffix}"
    code, _, err = run_cli(capsys, "convert", csv_trace, out)
    assert code == 0, err
    assert "wrote 5 beats of 1 run(s)" in err
    code, o2, _ = run_cli(capsys, "info", "--format", "json", out)
    assert [t["beats"] for t in json.loads(o2)["threads"]] == [3, 2]


def test_convert_to_stdout(capsys, csv_trace):
    code, out, _ = run_cli(capsys, "convert", csv_trace, "-")
    assert code == 0
    assert out.splitlines()[0] == "run,process,thread,seq,t_s,t_ns,loop,iteration,tag,os_tid,label,source,construct"
    assert len(out.splitlines()) == 6


def test_convert_unknown_suffix(capsys, tmp_path, csv_trace):
    code, _, err = run_cli(capsys, "convert", csv_trace, tmp_path / "out.foo")
    assert code == 2
    assert "cannot tell the output format" in err


def test_convert_csv_warns_about_dropped_events(capsys, tmp_path):
    from test_hbt_format import _with_events

    src = tmp_path / "ev.hbt"
    write_heartbeats(_with_events(make_trace()), str(src))
    code, _, err = run_cli(capsys, "convert", src, tmp_path / "x.csv")
    assert code == 0
    assert "3 lifecycle records not written" in err


def test_plot_writes_png(capsys, tmp_path):
    src = tmp_path / "t.csv"
    write_heartbeats(make_trace(beats=200), str(src))
    out = tmp_path / "hr.png"
    code, _, err = run_cli(capsys, "plot", src, "-o", out)
    assert code == 0, err
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_config_prints_flags(capsys):
    code, out, _ = run_cli(capsys, "config", "--cflags")
    assert code == 0
    assert out.strip() == f"-I{ROOT / 'native_tracer' / 'include'}"


def test_config_env_lists_every_variable(capsys):
    import re

    code, out, _ = run_cli(capsys, "config", "--env")
    assert code == 0
    listed = re.findall(r"^  (\w+)  ", out, flags=re.M)
    tables = [(ROOT / "native_tracer/include/hbtrace_env.def", "HBT_ENV"),
              (ROOT / "native_tracer/mpi/include/hbprof_env.def", "HBP_ENV")]
    in_c = [n for f, macro in tables for n in re.findall(rf"^{macro}\((\w+),", f.read_text(), flags=re.M)]
    assert listed == ["HBTOOL_TRACER_DIR"] + in_c
    assert "HBTRACE_STATUS_NET_DEV" in in_c and "HBPROF_INJECT_CALLS" in in_c


def test_config_says_where_the_tracer_is(capsys):
    code, out, _ = run_cli(capsys, "config")
    assert code == 0
    assert f"tracer folder:  {ROOT / 'native_tracer'} (source checkout)" in out
    assert f"library:        {ROOT / 'native_tracer' / 'lib' / 'libhbtrace.so'}" in out
    assert "absent" not in out


@pytest.mark.parametrize("args", [[], ["--cflags"], ["--include-dir"], ["--libs"], ["--preload"], ["--mpi-preload"]])
def test_config_exits_2_when_what_it_would_print_does_not_exist(tmp_path, args):
    r = run_hbtool("config", *args, env={**os.environ, "HBTOOL_TRACER_DIR": str(tmp_path / "nothing")})
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert str(tmp_path / "nothing") in r.stderr
    assert "-I" not in r.stdout


def _one_line_error(r: subprocess.CompletedProcess, *needles):
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("hbtool: error: ")
    for n in needles:
        assert n in lines[0]
    assert r.stdout == ""


@pytest.mark.parametrize("cmd", [["info"], ["plot", "-o", "/tmp/hbtool-never.png"], ["convert", "@", "/tmp/never.csv"]])
def test_bad_input_is_one_line_exit_2(tmp_path, cmd):
    missing = tmp_path / "missing.hbt"
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(bytes(range(256)) * 4)
    badmagic = tmp_path / "bad.hbt"
    badmagic.write_bytes(b"XBTRACE\0" + bytes(300))
    past = tmp_path / "past.hbt"
    write_heartbeats(make_trace(), str(past))
    raw = bytearray(past.read_bytes()[:300])
    raw[36:40] = (3000).to_bytes(4, "little")
    past.write_bytes(raw)
    nocols = tmp_path / "nocols.xlsx"
    import pandas as pd

    pd.DataFrame({"a": [1]}).to_excel(nocols, index=False)
    cases = [(missing, "no such file"), (garbage, "unknown heartbeat trace format"), (badmagic, "bad magic"),
             (past, "past the end of the file"), (nocols, "no sheet has a time column")]
    for path, needle in cases:
        args = [a if a != "@" else path for a in cmd] if "@" in cmd else [*cmd, path]
        _one_line_error(run_hbtool(*args), needle)


def test_bad_hbt_suffix_named_file_is_corrupt_not_unknown(tmp_path):
    p = tmp_path / "x.hbt"
    p.write_bytes(b"\0" * 500)
    _one_line_error(run_hbtool("info", p), "not an hbtrace file")


def test_usage_errors_are_one_line_exit_2():
    _one_line_error(run_hbtool("info", "--format", "yaml", "x"), "--format", "hbtool info --help")
    _one_line_error(run_hbtool("nosuchcommand"), "No such command")
    _one_line_error(run_hbtool("info"), "Missing argument")


def test_help_does_not_import_heavy_packages():
    code = ("import sys, hbtool.cli; from hbtool.cli import cli; "
            "print(sorted(m for m in ('pandas', 'numpy', 'matplotlib', 'numba') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.stdout.strip() == "[]"


def test_every_command_has_help_with_example_and_is_in_readme():
    readme = (ROOT / "README.md").read_text()
    for name in COMMANDS:
        r = run_hbtool(name, "--help")
        assert r.returncode == 0
        assert "Example" in r.stdout, name
        assert f"hbtool {name}" in readme, f"README does not show 'hbtool {name}'"


def test_pipe_closed_early_is_quiet(tmp_path):
    src = tmp_path / "big.csv"
    write_heartbeats(make_trace(threads=3, beats=20000, period=0.001), str(src))
    r = subprocess.run(f"{sys.executable} -m hbtool convert {src} - | head -1", shell=True,
                       capture_output=True, text=True)
    assert r.stdout.startswith("run,process")
    assert "Traceback" not in r.stderr and "error" not in r.stderr
