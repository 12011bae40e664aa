"""Programs the tracer was not written for, and faults of the trace's folder and file (issue 20):
each real program run as it is and under `hbtool record`, its exit status, output and files
the same, its trace readable; a 32-thread program killed with SIGKILL at seeded moments loses
no beat older than 100 ms; a full, read-only or removed folder, two runs into one folder and a
trace cut while `info` reads it leave the program's fate as it was and say what happened.
The cases live in tests/hostile.py; benchmarks/hostile_programs.py runs them all for the
README's table. The heavy ones are slow: python -m pytest -m slow tests/test_hostile_programs.py"""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

import hostile


@pytest.fixture(scope="module")
def bins(tracer_built, tmp_path_factory):
    return hostile.build(tmp_path_factory.mktemp("hostile"))


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return tmp_path_factory.mktemp("data")


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name, marks=[pytest.mark.slow] if c.slow else [])
                                  for c in hostile.CASES])
def test_a_program_keeps_its_fate_under_the_tracer(case, bins, data, tmp_path):
    res = hostile.run_case(case, bins, tmp_path, data)
    assert res.problems == [], res.problems
    assert not res.fate_changed and res.tracebacks == 0 and res.hangs == 0


def test_the_cases_compare_what_could_differ(bins, tmp_path):
    """The comparison is not blind: a run that changes its output or status is caught."""
    flip = hostile.Case("status differs", lambda b, d: ["/bin/sh", "-c", 'test -n "$LD_PRELOAD" && exit 4; exit 0'])
    res = hostile.run_case(flip, bins, tmp_path, tmp_path)
    assert res.fate_changed and res.problems[0] == "exit status 0 without the tracer, 4 with it"
    says = hostile.Case("stderr differs", lambda b, d: ["/bin/sh", "-c", 'test -n "$LD_PRELOAD" && echo x >&2; :'])
    res = hostile.run_case(says, bins, tmp_path, tmp_path)
    assert res.fate_changed and res.problems[0].startswith("stderr differs")
    writes = hostile.Case("file differs", lambda b, d: ["/bin/sh", "-c", 'echo "${LD_PRELOAD:-none}" > f'])
    res = hostile.run_case(writes, bins, tmp_path, tmp_path)
    assert res.fate_changed and res.problems[0] == "the files it wrote differ: ['f']"


def test_a_child_left_with_no_descriptor_is_counted_by_record(bins, tmp_path):
    """rlimits nofile: the program takes every descriptor RLIMIT_NOFILE (32) allows, then
    forks a beating child, which can open neither a trace file nor the report file: it
    reports through the report descriptor the tracer held since it started, and record
    says the process is missing from the trace and why."""
    (tmp_path / "out").mkdir()
    r = subprocess.run([*hostile.HBTOOL, "record", "-o", tmp_path / "trace", "--", bins["rlimits"], "nofile", "out"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "the child with no descriptor left exited with status 4" in r.stdout
    assert (f"hbtool: warning: the tracer could not create its trace file in {tmp_path / 'trace'}: Too many open "
            f"files: those processes are missing from the trace") in r.stderr.splitlines(), r.stderr
    assert "(1 file, 5 threads (4 with beats), 80000 api beats)" in r.stderr


def test_an_address_space_limit_loses_no_record(bins, tmp_path):
    """rlimits as: RLIMIT_AS = what is mapped + 256 MiB, 4 threads beat 200,000 times. The
    tracer gave each new thread a malloc arena (64 MiB of address space: it freed the start
    record there), and the trace's mappings then failed (278,371 records dropped); now every
    beat is in the trace."""
    (tmp_path / "out").mkdir()
    r = subprocess.run([*hostile.HBTOOL, "record", "-o", tmp_path / "trace", "--", bins["rlimits"], "as", "out"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "malloc failed at the limit, cleanly" in r.stdout
    assert "(1 file, 5 threads (4 with beats), 800000 api beats)" in r.stderr, r.stderr
    assert "dropped" not in r.stderr and "Cannot allocate" not in r.stderr


@pytest.mark.alone  # races with a running program: its timing matters
def test_sigkill_at_seeded_moments_loses_no_beat_older_than_100ms(bins, tmp_path):
    res = hostile.run_kills(bins, tmp_path, kills=2, seed=20)
    assert res.problems == [] and res.beats_lost == 0
    assert res.beats_checked > 32 * 100  # every thread had beaten by the first moment (0.3 s at the earliest)


@pytest.mark.slow
def test_sigkill_at_30_seeded_moments_loses_no_beat_older_than_100ms(bins, tmp_path):
    res = hostile.run_kills(bins, tmp_path, kills=30, seed=1)
    assert res.problems == [] and res.beats_lost == 0 and res.beats_checked > 0


def test_a_read_only_folder_keeps_the_fate_and_says_so(tracer_built, tmp_path):
    # (a full disk at start and mid-run: tests/test_trace_size.py; the runner runs them too)
    res = hostile.read_only_folder(tmp_path)
    if res is None:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    assert res.problems == [], res.problems


@pytest.mark.alone  # races with a running program: its timing matters
def test_a_folder_removed_during_the_run_is_said_so(tracer_built, tmp_path):
    res = hostile.folder_removed(tmp_path)
    assert res.problems == [], res.problems


@pytest.mark.alone  # races with a running program: its timing matters
def test_a_folder_removed_and_made_again_is_said_so(bins, tmp_path):
    """The trace files written before the removal are gone; the ones there are the later ones."""
    trace, go, first = tmp_path / "again", tmp_path / "go", tmp_path / "first-done"
    os.mkfifo(go)
    forks = f"{bins['idle_threads']} fork 3 2"  # 3 children with threads: 3 files
    # the folder is removed once the first three children have ended (the shell says so in a
    # file outside it): removing it while they still write their files races with them
    p = hostile._record(trace, "/bin/sh", "-c", f"{forks} && echo > {first} && read line < {go} && {forks}")
    while not first.exists() and p.poll() is None:
        time.sleep(0.005)
    assert len(list(trace.glob("*.hbt"))) >= 3
    shutil.rmtree(trace)
    trace.mkdir()
    go.write_text("removed and made again\n")
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert (f"hbtool: warning: {trace}/ was removed and made again while the program ran: the trace files written "
            f"before that are lost, the ones there now were written after") in err, err
    assert f"hbtool: trace written to {trace}/ (" in err, err
    assert len(list(trace.glob("*.hbt"))) >= 3  # the second three children's


@pytest.mark.alone  # races with a running program: its timing matters
def test_two_runs_into_one_folder_at_once_record_one_and_refuse_the_other(tracer_built, tmp_path):
    res = hostile.two_runs_at_once(tmp_path)
    assert res.problems == [], res.problems


@pytest.mark.alone  # races with a running program: its timing matters
def test_force_never_deletes_a_trace_a_running_program_writes(tracer_built, tmp_path):
    trace = tmp_path / "live"
    env = dict(hostile.plain_env(), LD_PRELOAD=str(hostile.LIB), HBTRACE_DIR=str(trace))
    p = subprocess.Popen([str(hostile.EXAMPLES / "probe_demo"), "--threads", "2", "--seconds", "3"], env=env,
                         stdout=subprocess.DEVNULL)
    try:
        while not list(trace.glob("*.hbt")) and p.poll() is None:
            time.sleep(0.005)
        (f,) = trace.glob("*.hbt")
        r = subprocess.run([*hostile.HBTOOL, "record", "--force", "-o", str(trace), "--", "/bin/true"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and r.stderr == (
            f"hbtool: error: {trace} holds a trace that a running program is writing now ({f.name}): --force "
            f"deletes no live trace; record into another folder with -o\n")
        assert f.exists()
    finally:
        p.kill()
        p.wait()
    # once its writer is gone, --force deletes it as before
    r = subprocess.run([*hostile.HBTOOL, "record", "-q", "--force", "-o", str(trace), "--", "/bin/true"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and not f.exists(), r.stderr


@pytest.mark.alone  # races with a running program: its timing matters
def test_a_trace_cut_while_info_reads_it_reads_what_is_there(tracer_built, tmp_path):
    res = hostile.truncated_while_read(tmp_path, moments=3, seed=20)
    assert res.problems == [], res.problems
