"""A wheel built from this checkout, installed into a fresh virtual environment, gives a
working tracer: `hbtool config` finds what the wheel ships, a program builds against it,
and `hbtool record` traces it. Nothing of the checkout is used after the build."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT

PROG = r"""
#include <hbtrace.h>
#include <pthread.h>
static void *work(void *a) { int me = (int)(long)a; for (int i = 0; i < 300; i++) Heartbeat_MultiPthread_Generate(me, 0, i); return 0; }
int main(void) {
    pthread_t t[3];
    Heartbeat_MultiPthread_Init(0);
    for (long i = 0; i < 3; i++) pthread_create(&t[i], 0, work, (void *)i);
    for (int i = 0; i < 3; i++) pthread_join(t[i], 0);
    Heartbeat_MultiPthread_Finished();
    return 0;
}
"""


def sh(*args, **kw) -> subprocess.CompletedProcess:
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=900, **kw)
    assert r.returncode == 0, f"{args}: {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("install")
    sh(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", tmp / "dist", ROOT)
    wheels = list((tmp / "dist").glob("hbtool-*.whl"))
    assert len(wheels) == 1
    sh(sys.executable, "-m", "venv", tmp / "venv")
    # without byte code: pip would compile every module of numpy, pandas, scipy and numba (23 of
    # its 40 s here); the tour's first commands write the byte code of the modules they import
    # (run_readme_commands lets them, where PYTHONDONTWRITEBYTECODE is set, as in CI: else every
    # process compiled numpy, pandas and numba again, and the tour took 145 s, not 65)
    sh(tmp / "venv" / "bin" / "python", "-m", "pip", "install", "-q", "--no-compile", "--disable-pip-version-check",
       wheels[0])
    return tmp, wheels[0]


def test_the_wheel_ships_the_tracer_for_its_platform(installed):
    _, wheel = installed
    assert "linux" in wheel.name and "none-any" not in wheel.name  # it holds shared libraries
    names = set(zipfile.ZipFile(wheel).namelist())
    for f in ("hbtool/native/include/hbtrace.h", "hbtool/native/include/hbtrace_env.def",
              "hbtool/native/lib/libhbtrace.so", "hbtool/native/mpi/lib/libhbprof.so"):
        assert f in names, f
    assert not any(n.endswith(".o") or "/build/" in n for n in names)


def test_a_fresh_venv_builds_and_traces_a_program(installed):
    tmp, _ = installed
    hbtool = tmp / "venv" / "bin" / "hbtool"
    env = {k: v for k, v in os.environ.items() if k not in ("HBTOOL_TRACER_DIR", "PYTHONPATH", "LD_PRELOAD")}
    work = tmp / "work"
    work.mkdir()
    out = sh(hbtool, "config", cwd=work, env=env).stdout
    site = str(tmp / "venv")
    assert "(installed with hbtool)" in out and site in out and "absent" not in out, out
    cflags = sh(hbtool, "config", "--cflags", cwd=work, env=env).stdout.split()
    libs = sh(hbtool, "config", "--libs", cwd=work, env=env).stdout.split()
    assert cflags[0].startswith(f"-I{site}") and Path(cflags[0][2:], "hbtrace.h").is_file()
    (work / "prog.c").write_text(PROG)
    sh("gcc", "-O2", *cflags, work / "prog.c", *libs, "-o", work / "prog", cwd=work, env=env)
    sh(hbtool, "record", "-o", work / "trace", "--", work / "prog", cwd=work, env=env)
    info = sh(hbtool, "info", "--format", "json", work / "trace", cwd=work, env=env).stdout
    import json

    doc = json.loads(info)
    assert sorted(t["beats"] for t in doc["threads"]) == [0, 300, 300, 300]  # the main thread made none
    mpi = sh(hbtool, "config", "--mpi-preload", cwd=work, env=env).stdout.strip()
    assert mpi.startswith(site) and Path(mpi).is_file()


def test_the_readme_tour_runs_with_only_what_the_wheel_installed(installed, tracer_built, tmp_path):
    """The README's commands, in order, in a fresh folder, with the fresh venv's hbtool and
    the tracer it ships (the example programs come from the checkout). This is the README
    tour's run: the set-up command's editable install holds the same code, and the wheel
    is the stricter of the two (what it does not ship is missing)."""
    from test_readme import LINKED, run_readme_commands

    venv, _ = installed
    failed = run_readme_commands(tmp_path, venv / "venv" / "bin")
    assert not failed, "\n".join(failed)
    # what the tour writes, run in the checkout, is ignored by git
    written = sorted(p.name + "/" * p.is_dir() for p in tmp_path.iterdir() if p.name not in LINKED)
    assert written, "the tour wrote nothing"
    r = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "--no-index", *written], capture_output=True,
                       text=True)
    assert sorted(r.stdout.split()) == written, f"not in .gitignore: {set(written) - set(r.stdout.split())}"
