"""The tracer's pre-faulter never makes the program wait (native_tracer/src/prefault.c).

It takes the page faults of the trace file's pages ahead of the beating threads. At nice 19,
inside madvise(MADV_POPULATE_WRITE) of 256 KiB, it held the process's mmap lock while the program's
threads kept it off the CPU, and a program thread that grew its heap (brk: any large
malloc) waited for it: 0.4-1.2 s per call here, and 0.2-0.4 s stops of an NPB LU thread
that leaked memory, which `hbtool behavior` rightly called conditional waiting."""

from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest
from conftest import ROOT, build_traced

from hbtool.io import read_heartbeats


@pytest.mark.alone   # fills every CPU and judges a real run's timing
def test_a_thread_growing_its_heap_never_waits_for_the_prefaulter(tracer_built, tmp_path):
    exe = build_traced(ROOT / "tests" / "programs" / "heap_grower.c", tmp_path / "heap_grower")
    spinners = 2 * (os.cpu_count() or 2)   # more beating threads than CPUs
    env = dict(os.environ, HBTRACE_DIR=str(tmp_path / "trace"))
    env.pop("LD_PRELOAD", None)
    r = subprocess.run([str(exe), str(spinners), "200"], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    words = r.stdout.split()
    got = {words[i]: float(words[i + 1]) for i in range(0, len(words), 2)}
    assert got["prefault"] == 1, r.stdout   # it ran: the beaters took many chunks
    # an sbrk takes tens of microseconds, a few ms when the pre-faulter is preempted in its one
    # page's fault; 0.38-1.2 s with the old pre-faulter
    assert got["longest_ms"] < 100, r.stdout
    assert got["nice_diff"] == 0, r.stdout   # at the program's priority
    beats = read_heartbeats(tmp_path / "trace")
    per = beats.beats.groupby("os_tid")["seq"]
    assert len(per) == spinners
    assert all((np.diff(s.to_numpy()) == 1).all() for _, s in per)   # every beat, in order
