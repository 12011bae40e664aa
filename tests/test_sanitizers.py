"""The sanitizer targets (issue 20): the tracer and the examples built with ASan+UBSan and with
TSan, run over the examples and the hostile programs by native_tracer/tools/run_sanitized.sh,
report nothing and change no exit status; the same for the PMPI profiler when mpicc is there.
Slow (a build and a run each): python -m pytest -m slow tests/test_sanitizers.py"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from conftest import TRACER


def run_target(folder, target: str) -> str:
    r = subprocess.run(["make", "-C", str(folder), target], capture_output=True, text=True, timeout=1800)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    return out


@pytest.mark.slow
@pytest.mark.parametrize("target,runs", [("asan", 43), ("tsan", 26)])
def test_tracer_under_sanitizers_reports_nothing(target, runs):
    out = run_target(TRACER, target)
    assert f"{target}: {runs} runs, 0 wrong exit statuses, 0 sanitizer reports" in out, out[-4000:]
    assert not re.search(r"^FAIL ", out, re.M)


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which("mpicc") or not shutil.which("mpirun"), reason="needs mpicc and mpirun")
@pytest.mark.parametrize("target", ["asan", "tsan"])
def test_mpi_profiler_under_sanitizers_reports_nothing(target):
    out = run_target(TRACER / "mpi", target)
    assert f"{target}: 2 runs, 0 wrong exit statuses, 0 sanitizer reports" in out, out[-4000:]
