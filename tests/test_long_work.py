"""Long work tells the user what is going on (issue 17): benchmarks/make_dataset.py says
what it will write, shows a bar on a terminal and nothing when piped, and stops cleanly
on Ctrl-C; `hbtool evaluate` shows a bar over all of its long part; probe_demo prints
nothing a user did not ask for.

Terminals are real pseudo-terminals (the pty module), Ctrl-C a real ^C typed into one."""

from __future__ import annotations

import fcntl
import os
import re
import select
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from conftest import EXAMPLES, ROOT, SAMPLES

MAKE_DATASET = ROOT / "benchmarks" / "make_dataset.py"
#: only against hangs: every wait below ends as soon as what it waits for happens
HANG = 300


def dataset_cmd(out: Path, *args) -> list[str]:
    return [sys.executable, str(MAKE_DATASET), str(out), "--benchmarks", "pi_pthread", *map(str, args)]


def env_without_tracing() -> dict:
    env = dict(os.environ)
    for k in ("HBTRACE_DIR", "LD_PRELOAD"):
        env.pop(k, None)
    return env


def _interruptible():
    """In the child: SIGINT at its default, as a shell's foreground command has it. A test run
    started in the background of a non-interactive shell inherits SIGINT ignored, and Python
    then installs no KeyboardInterrupt handler: the command would not see the ^C at all."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _controlling_terminal():
    """In the child, after setsid: make its stdin (the pty) its controlling terminal, so that
    ^C typed into the pty signals its process group, as in a shell."""
    _interruptible()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def run_on_terminal(cmd, *, when: bytes | None = None, type_: bytes = b"\x03", cwd=None) -> tuple[int, bytes]:
    """Run cmd with stdin and stderr on a new pseudo-terminal (stdout to /dev/null); once the
    terminal shows the pattern `when`, type `type_` into it. (exit status, what it showed)."""
    master, slave = os.openpty()
    proc = subprocess.Popen(cmd, stdin=slave, stdout=subprocess.DEVNULL, stderr=slave, cwd=cwd,
                            env=env_without_tracing(), start_new_session=True, preexec_fn=_controlling_terminal)
    os.close(slave)
    shown, typed = b"", when is None
    deadline = time.monotonic() + HANG
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                continue
            try:
                data = os.read(master, 4096)
            except OSError:   # EIO: every writer of the terminal is gone
                break
            if not data:
                break
            shown += data
            if not typed and re.search(when, shown):
                os.write(master, type_)
                typed = True
        return proc.wait(timeout=HANG), shown
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)


def run_dirs(out: Path) -> list[Path]:
    return sorted(p for p in out.glob("*/*/run*") if p.is_dir())


def assert_only_complete_runs(out: Path) -> list[Path]:
    """Every run folder left is complete: its trace, its truth and its labels."""
    runs = run_dirs(out)
    for d in runs:
        names = {p.name for p in d.iterdir()}
        assert {"truth.json", "labels.json"} <= names and any(n.endswith(".hbt") for n in names), (d, names)
    return runs


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# --------------------------------------------------------------------------- make_dataset


@pytest.mark.usefixtures("tracer_built")
def test_make_dataset_says_what_it_will_write_and_shows_no_bar_when_piped(tmp_path):
    out = tmp_path / "ds"
    r = subprocess.run(dataset_cmd(out, "--runs", 2, "--labels", "normal,shutdown", "--beats", 100),
                       capture_output=True, text=True, timeout=HANG, env=env_without_tracing())
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    m = re.fullmatch(rf"make_dataset: 4 runs of 4 threads, 100 beats each, about ([\d.]+) (KiB|MiB) -> {out}",
                     lines[0])
    assert m, lines
    # the estimate is one: within a factor of 1.5 of what was written
    estimate = float(m.group(1)) * {"KiB": 1 << 10, "MiB": 1 << 20}[m.group(2)]
    written = sum(f.stat().st_size for f in out.rglob("*") if f.is_file() and f.name != "dataset.json")
    assert written / 1.5 <= estimate <= written * 1.5, (estimate, written)
    # nothing of a bar: the size line, then the summary, and no carriage return
    assert len(lines) == 2 and re.fullmatch(rf"4 runs in \d+ s -> {out}", lines[1]), lines
    assert "\r" not in r.stderr and "[" not in r.stderr
    assert len(assert_only_complete_runs(out)) == 4


@pytest.mark.usefixtures("tracer_built")
def test_make_dataset_shows_a_bar_on_a_terminal(tmp_path):
    out = tmp_path / "ds"
    code, shown = run_on_terminal(dataset_cmd(out, "--runs", 2, "--labels", "normal", "--beats", 100))
    text = shown.decode(errors="replace")
    assert code == 0, text
    assert text.startswith(f"make_dataset: 2 runs of 4 threads, 100 beats each, about ")
    assert re.search(r"runs\s+\[#+\]\s+2/2", text), text   # click's bar, full
    assert "Traceback" not in text


@pytest.mark.usefixtures("tracer_built")
def test_make_dataset_sigint_mid_run_stops_cleanly(tmp_path):
    """SIGINT while the second run is being written: exit 130, one line, the first run kept,
    the second's folder removed and its program stopped, no dataset.json."""
    out = tmp_path / "ds"
    proc = subprocess.Popen(dataset_cmd(out, "--runs", 3, "--labels", "normal", "--beats", 1000),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env_without_tracing(),
                            preexec_fn=_interruptible)
    second = out / "pi_pthread" / "normal" / "run001"
    deadline = time.monotonic() + HANG
    traces: list[Path] = []
    while not traces and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
        traces = list(second.glob("*.hbt"))   # its program has started writing
    assert traces, "the second run never started"
    pid = int(traces[0].stem.rsplit("-", 1)[1])   # hbtrace-<host>-<pid>.hbt
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=HANG)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and stdout == ""
    lines = stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith("make_dataset: 3 runs"), lines
    assert re.fullmatch(rf"make_dataset: interrupted: [12] of 3 runs complete in {out}.*, no dataset\.json",
                        lines[1]), lines
    runs = assert_only_complete_runs(out)
    assert runs[0].name == "run000"
    assert not (out / "dataset.json").exists()
    assert not alive(pid)


@pytest.mark.usefixtures("tracer_built")
def test_make_dataset_ctrl_c_on_a_terminal(tmp_path):
    """^C typed into the terminal (the whole foreground group gets SIGINT) after the first run."""
    out = tmp_path / "ds"
    code, shown = run_on_terminal(dataset_cmd(out, "--runs", 3, "--labels", "normal", "--beats", 1000),
                                  when=rb"1/3")
    text = shown.decode(errors="replace")
    assert code == 130, text
    assert "Traceback" not in text
    # the message starts a line; the terminal's own echo of ^C may land just before it (the
    # kernel sends the signal, then echoes: the program can write its new line in between)
    assert re.search(r"\n(\^C)?make_dataset: interrupted: [1-3] of 3 runs complete in ", text), text
    assert len(assert_only_complete_runs(out)) >= 1


# --------------------------------------------------------------------------- evaluate


@pytest.fixture
def small_dataset(tmp_path) -> Path:
    """A labelled data set of five sample traces (links), laid out as evaluate wants it."""
    ds = tmp_path / "ds"
    for label, sample in [("normal", "pi-normal"), ("normal", "jacobi-normal"), ("memoryleak", "jacobi-leak"),
                          ("shutdown", "pi-shutdown"), ("shutdown", "matmul-exit1")]:
        (ds / "samples" / label).mkdir(parents=True, exist_ok=True)
        (ds / "samples" / label / sample).symlink_to(SAMPLES / sample)
    return ds


def test_evaluate_bar_covers_reading_and_training_on_a_terminal_and_nothing_when_piped(small_dataset):
    code, shown = run_on_terminal([sys.executable, "-m", "hbtool", "evaluate", str(small_dataset)], cwd=ROOT)
    text = shown.decode(errors="replace")
    assert code == 0, text
    assert re.search(r"reading runs\s+\[#+\]\s+5/5", text), text
    # training and testing is most of evaluate's time: 1 benchmark x 3 repetitions
    assert re.search(r"training\s+\[#+\]\s+3/3", text), text
    r = subprocess.run([sys.executable, "-m", "hbtool", "evaluate", str(small_dataset)], capture_output=True,
                       text=True, timeout=HANG, cwd=ROOT)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert "mean macro-F1" in r.stdout


# --------------------------------------------------------------------------- probe_demo


@pytest.mark.usefixtures("tracer_built")
def test_probe_demo_is_quiet_unless_asked(tmp_path):
    env = dict(env_without_tracing(), HBTRACE_DIR=str(tmp_path / "trace"))
    args = [str(EXAMPLES / "probe_demo"), "--threads", "4", "--uses", "10", "--fork"]
    quiet = subprocess.run(args, capture_output=True, text=True, timeout=HANG, env=env)
    assert quiet.returncode == 0 and quiet.stdout == "" and quiet.stderr == ""
    loud = subprocess.run([*args, "--expect"], capture_output=True, text=True, timeout=HANG, env=env)
    assert loud.returncode == 0
    assert "expect -1 sleep 2ms 5" in loud.stdout.splitlines()
    assert "child expect -1 child 10" in loud.stdout.splitlines()
