"""Shared fixtures: run the CLI in-process, build the native tracer once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hbtool.cli import main
from hbtool.model import HeartbeatTrace

#: test modules that judge real programs by their timing or CPU time (verdicts, latencies,
#: overheads, races with a running program): they run with the machine to themselves.
#: scripts/test.sh runs the other modules two at a time first (pytest-xdist), then these
#: one at a time; marked `alone` here, so `pytest -m alone` selects them. A test of another
#: module that races with a running program carries the mark itself; a test of these modules
#: marked `analysis_only` (what it asserts does not hang on timing) runs with the others.
ALONE = {
    "test_blame", "test_inject", "test_lock_beats", "test_memory", "test_monitor", "test_mpi_polling", "test_mpi_profiler",
    "test_npb_openmp", "test_probes_status", "test_queue_tracer", "test_sanitizers", "test_starved_team",
    "test_task_waits",
}


#: the longest modules, started first (scripts/test.sh keeps this order: --no-loadscope-reorder;
#: pytest-xdist would start the modules of most tests first): run two at a time, a module that
#: starts last leaves the other CPU idle until it ends (test_install, the wheel and the README
#: tour, 190 s, ran last and made the parallel part's last 110 s one module alone)
FIRST = ("test_install", "test_hbt_stream", "test_stream_writers", "test_hostile_input", "test_cli")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.module.__name__ in ALONE and not item.get_closest_marker("analysis_only"):
            item.add_marker(pytest.mark.alone)
    rank = {name: i for i, name in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(item.module.__name__, len(FIRST)))  # stable: else as collected


ROOT = Path(__file__).resolve().parent.parent
TRACER = ROOT / "native_tracer"
EXAMPLES = TRACER / "examples" / "bin"
SAMPLES = ROOT / "sample_traces"


def damaged_copies(data: bytes, kind: int, seed: int, n: int = 40):
    """n copies of a tracer file's bytes, each with one record of `kind` damaged: a bit flipped,
    its fields or its flags set at random, or the whole record random but its kind (the
    fuzzing of one record kind's reader). Asserts the file holds 10 such records at least."""
    import random
    import struct

    at = [i for i in range(4096, len(data) - 32, 32) if struct.unpack_from("<H", data, i + 28)[0] == kind]
    assert len(at) >= 10, f"{len(at)} records of kind {kind}"
    rng = random.Random(seed)
    for k in range(n):
        b = bytearray(data)
        i = rng.choice(at)
        op = k % 4
        if op == 0:
            b[i + rng.randrange(32)] ^= 1 << rng.randrange(8)
        elif op == 1:
            b[i + 8:i + 28] = rng.randbytes(20)
        elif op == 2:
            struct.pack_into("<H", b, i + 30, rng.randrange(65536))   # flags: any value
        else:
            b[i:i + 28] = rng.randbytes(28)
        yield bytes(b)


def check_damaged_records(capsys, tmp_path: Path, out: Path, kind: int, seed: int,
                          commands=("info", "diagnose")) -> None:
    """Every command on each of damaged_copies of the trace in `out` (one file) gives a
    result, or one line and exit status 2: never a traceback."""
    f = next(out.glob("*.hbt"))
    for k, b in enumerate(damaged_copies(f.read_bytes(), kind, seed)):
        case = tmp_path / f"case{kind}-{k}"
        case.mkdir()
        (case / f.name).write_bytes(b)
        for cmd in commands:
            code, _, err = run_cli(capsys, cmd, case)
            assert code in (0, 2) and "Traceback" not in err, (k, cmd, err)
            if code == 2:
                assert len(err.strip().splitlines()) == 1, err


def run_cli(capsys, *args, stdin_text: str | None = None, monkeypatch=None):
    """Run `hbtool ARGS` in-process: (exit status, stdout, stderr)."""
    if stdin_text is not None:
        import io

        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin_text.encode())))
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    out, err = capsys.readouterr()
    code = exc.value.code
    return (0 if code is None else code), out, err


def run_hbtool(*args, **kw) -> subprocess.CompletedProcess:
    """Run the real `hbtool` as a separate process (for exit status and stderr checks)."""
    return subprocess.run([sys.executable, "-m", "hbtool", *map(str, args)], capture_output=True,
                          text=True, timeout=300, **kw)


def hbtool_here(*args) -> subprocess.CompletedProcess:
    """Run `hbtool ARGS` through the console entry point in this process, its output captured:
    what run_hbtool gives (exit status, stdout, stderr), without a process's start (1.5-3.5 s
    here, most of it importing pandas and numba and loading numba's cached machine code). For
    the analysis of traces the tests' own runs wrote; hostile input keeps run_hbtool, where a
    crash stays in its own process."""
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main([str(a) for a in args])
        except SystemExit as exc:
            code = 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 1
    return subprocess.CompletedProcess(["hbtool", *map(str, args)], code, out.getvalue(), err.getvalue())


def spy_on_reader(monkeypatch) -> list:
    """Replace hbtool.io.read_heartbeats by itself, noting the type of every trace it returns
    (HeartbeatTrace read whole, or StreamedTrace): the list it fills."""
    import hbtool.io

    whole = hbtool.io.read_heartbeats
    kinds: list = []

    def spy(p, stream=False):
        tr = whole(p, stream=stream)
        kinds.append(type(tr))
        return tr

    monkeypatch.setattr(hbtool.io, "read_heartbeats", spy)
    return kinds


def make_trace(threads=3, beats=40, period=0.01, run="r") -> HeartbeatTrace:
    """A small synthetic trace: thread k beats every period*(1+k/10) seconds."""
    rows = []
    for k in range(threads):
        n = beats - 5 * k
        t_ns = np.round(np.arange(1, n + 1) * period * (1 + k / 10) * 1e9).astype(np.int64)
        rows.append(pd.DataFrame({"run": run, "process": 0, "thread": k, "seq": np.arange(n),
                                  "t_ns": t_ns, "t": t_ns / 1e9, "loop": 1, "iteration": np.arange(n),
                                  "tag": 0, "os_tid": 1000 + k}))
    return HeartbeatTrace(beats=pd.concat(rows, ignore_index=True))


def assert_tasks_are_not_inside_waits(trace: HeartbeatTrace) -> None:
    """A thread's waits never overlap each other nor a task it ran (a task's beat comes at its
    end): the runtime runs queued tasks inside a taskwait or a barrier, and the tracer cuts the
    wait there."""
    tasks = trace.beats[trace.beats["construct"].str.startswith("task ")]
    assert len(tasks), "no task beats"
    for key, w in trace.waits.groupby(["run", "process", "thread"]):
        end = np.sort(w["t_ns"].to_numpy(np.int64))
        start = np.sort((w["t_ns"] - w["wait_ns"]).to_numpy(np.int64))
        assert (start[1:] >= end[:-1]).all(), f"thread {key}: its waits overlap"
        b = tasks.loc[(tasks["run"] == key[0]) & (tasks["process"] == key[1]) & (tasks["thread"] == key[2]),
                      "t_ns"].to_numpy(np.int64)
        k = np.minimum(np.searchsorted(end, b), len(end) - 1)   # the first wait that ends at or after it
        inside = (start[k] < b) & (b < end[k])
        assert not inside.any(), f"thread {key}: {inside.sum()} tasks ended inside a wait"


@pytest.fixture(scope="session")
def tracer_built():
    """Build libhbtrace.so, the tools and the examples once per test session."""
    r = subprocess.run(["make", "-C", str(TRACER), "-j2"], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        pytest.fail(f"building the tracer failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return TRACER


def build_traced(src: Path, exe: Path, *flags: str, cc: str = "gcc", opt: str = "-O1") -> Path:
    """Compile one C program against native_tracer/include and lib/libhbtrace.so."""
    lib = TRACER / "lib"
    subprocess.run([cc, opt, "-Wall", "-Wextra", "-pthread", f"-I{TRACER / 'include'}", str(src),
                    f"-L{lib}", f"-Wl,-rpath,{lib}", "-lhbtrace", *flags, "-o", str(exe)], check=True)
    return exe


@pytest.fixture
def traced_env(tmp_path, tracer_built):
    """Environment that writes traces of linked programs into tmp_path/trace."""
    env = dict(os.environ)
    env["HBTRACE_DIR"] = str(tmp_path / "trace")
    env.pop("LD_PRELOAD", None)
    return env
