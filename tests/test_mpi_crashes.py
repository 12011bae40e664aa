"""MPI runs that fail, under the profiler, with real mpirun and real ranks: MPI_Abort, a
segfaulting rank, exit without MPI_Finalize, mpirun killed. Each rank's file says how it
ended (format version 2); `hbtool interference` says in one line that the run failed,
which rank, how, and gives no verdict; `hbtool record` names the per-rank files it left;
`hbtool info` gives each process its rank and names the rank that died. Every run has a
timeout: nothing may hang.
"""

from __future__ import annotations

import json
import os
import re
import signal
import struct
import subprocess
import time

import pytest
from conftest import hbtool_here, run_hbtool
from test_mpi_profiler import EXBIN, LIB, built, mpirun  # noqa: F401

END = {"unknown": 0, "finalized": 1, "abort": 2, "signal": 3, "exit": 4}
FLAG_COMPLETE, FLAG_ORPHANED = 0x4, 0x40


def ends(d) -> dict[int, tuple[int, int, int]]:
    """{rank: (end_how, end_detail, flags)} from the per-rank files' headers (docs/profile-format.md)."""
    out = {}
    for p in d.glob("hbprof-*-r*.hbp"):
        b = p.read_bytes()[:256]
        assert struct.unpack_from("<I", b, 8)[0] == 2
        flags, rank = struct.unpack_from("<Ii", b, 20)
        how, detail = struct.unpack_from("<Ii", b, 184)
        out[rank] = (how, detail, flags)
    return out


def verdict(d) -> tuple[str, dict]:
    text = hbtool_here("interference", d)
    js = hbtool_here("interference", d, "--format", "json")
    assert text.returncode == 0 and js.returncode == 0, text.stderr + js.stderr
    return text.stdout, json.loads(js.stdout)["runs"][0]


STENCIL = ("stencil", "--iterations", 200, "--work", 20, "--die-at", 40, "--die-rank", 1)


def test_mpi_abort(built, tmp_path):
    r = mpirun(tmp_path, *STENCIL, "--die-how", "abort", timeout=120)
    assert r.returncode == 3, r.stderr
    e = ends(tmp_path)
    assert sorted(e) == [0, 1, 2, 3]
    assert e[1][:2] == (END["abort"], 3) and not e[1][2] & FLAG_COMPLETE
    assert all(how != END["finalized"] for how, _, _ in e.values())
    out, run = verdict(tmp_path)
    assert out.count("\n") == 1, out                  # one line
    assert out.startswith(f"{tmp_path.name}: the run failed: rank 1: called MPI_Abort (error code 3)")
    assert "LOW" not in out and "MEDIUM" not in out and "HIGH" not in out
    assert run["class"] == "failed" and not run["judged"] and run["failure"].startswith("rank 1: called MPI_Abort")
    assert run["interference_percent"] is None and run["probability_high"] is None   # no figure from partial data


def test_segfault_through_record_and_info(built, tmp_path):
    out = tmp_path / "rec"
    r = run_hbtool("record", "--mpi", "-o", out, "--", "mpirun", "--oversubscribe", "--allow-run-as-root", "-np", 4,
                   EXBIN / "stencil", "--iterations", 200, "--work", 20, "--die-at", 40, "--die-how", "segv",
                   cwd=tmp_path)
    assert r.returncode == 128 + signal.SIGSEGV or r.returncode == 139, r.stderr
    e = ends(out)
    assert e[1][:2] == (END["signal"], signal.SIGSEGV)
    said = [x for x in r.stderr.splitlines() if x.startswith("hbtool: the MPI run did not finish")]
    assert len(said) == 1, r.stderr
    assert "rank 1: killed by SIGSEGV" in said[0] and "left 4 per-rank files" in said[0]
    text, run = verdict(out)
    assert "the run failed: rank 1: killed by SIGSEGV" in text and "LOW" not in text
    # info: the processes and threads record counted, each rank's number, the rank that died
    recorded = next(x for x in r.stderr.splitlines() if x.startswith("hbtool: trace written"))
    info = hbtool_here("info", out)
    assert info.returncode == 0, info.stderr
    head = info.stdout.splitlines()[0]
    counts = re.compile(r"(\d+) processes, (\d+) threads")
    assert counts.search(recorded).groups() == counts.search(head).groups(), (recorded, head)
    assert counts.search(head).group(1) == "5"     # mpirun and 4 ranks
    assert "MPI: 4 ranks" in info.stdout and "the run failed: rank 1: killed by SIGSEGV" in info.stdout
    js = json.loads(hbtool_here("info", out, "--format", "json").stdout)
    ranks = {t["rank"] for t in js["threads"]}
    assert ranks == {-1, 0, 1, 2, 3}
    assert js["runs"][0]["mpi"]["failure"].startswith("rank 1: killed by SIGSEGV")


def test_exit_without_finalize(built, tmp_path):
    r = mpirun(tmp_path, *STENCIL, "--die-how", "exit", timeout=120)
    assert r.returncode != 0
    e = ends(tmp_path)
    assert e[1][:2] == (END["exit"], 4)
    text, run = verdict(tmp_path)
    assert "the run failed: rank 1: exited with status 4 without calling MPI_Finalize" in text
    assert run["class"] == "failed"


def test_a_whole_run_is_still_judged(built, tmp_path):
    """The same program, nobody dies: every rank ends 'finalized', and a verdict is given."""
    r = mpirun(tmp_path, "stencil", "--iterations", 60, "--work", 20, env={"HBPROF_KEEP_RANK_FILES": "1"}, timeout=120)
    assert r.returncode == 0, r.stderr
    assert {how for how, _, _ in ends(tmp_path).values()} == {END["finalized"]}
    text, run = verdict(tmp_path)
    assert run["class"] in ("low", "medium", "high") and run["failure"] is None
    assert "failed" not in text


@pytest.mark.alone  # races with a running program: its timing matters
def test_mpirun_killed(built, tmp_path):
    """mpirun dies (SIGKILL), its ranks go on orphaned and finish: the run file says so."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HBPROF_")}
    cmd = ["mpirun", "--oversubscribe", "--allow-run-as-root", "-np", "2", "-x", f"LD_PRELOAD={LIB}",
           "-x", f"HBPROF_DIR={tmp_path}", str(EXBIN / "stencil"), "--iterations", "4000", "--work", "100"]
    p = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kids: list[str] = []
    t0 = time.time()
    while (len(kids) < 2 or len(list(tmp_path.glob("hbprof-*-r*.hbp"))) < 2) and time.time() - t0 < 30:
        time.sleep(0.1)
        kids = subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True).stdout.split()
    assert len(kids) == 2, "the ranks did not start"
    time.sleep(0.3)   # both ranks are past MPI_Init (their files exist), far from the end
    p.kill()
    p.wait(timeout=30)
    deadline = time.time() + 90
    while time.time() < deadline and any(os.path.exists(f"/proc/{k}") for k in kids):
        time.sleep(0.3)
    left = [k for k in kids if os.path.exists(f"/proc/{k}")]
    for k in left:   # our own orphans: never leave them behind
        os.kill(int(k), signal.SIGKILL)
    assert not left, "orphaned ranks still running after 90 s"
    runs = [f for f in tmp_path.glob("hbprof-*.hbp") if not re.search(r"-r\d+$", f.stem)]
    # Open MPI's ranks either end at once when they lose mpirun (no trace: _exit), or go on
    # orphaned and finish; a run file then exists, and it says so
    if runs:
        flags = struct.unpack_from("<I", runs[0].read_bytes(), 20)[0]
        assert flags & FLAG_ORPHANED
    else:      # they ended when they lost it (Open MPI: _exit from a progress thread), orphaned
        assert all(flags & FLAG_ORPHANED for _, _, flags in ends(tmp_path).values())
    text, run = verdict(tmp_path)
    assert run["class"] == "failed" and "LOW" not in text
    assert text.startswith(f"{tmp_path.name}: the run failed: mpirun (the launcher) died during the run; then "), text


SURVIVE = r"""
#include <mpi.h>
#include <signal.h>
static volatile sig_atomic_t got;
static void on_int(int s) { (void)s; got = 1; }
int main(int argc, char **argv)
{
    signal(SIGINT, on_int);       /* the program's own handler: it goes on */
    signal(SIGPIPE, SIG_IGN);     /* ignored */
    MPI_Init(&argc, &argv);
    MPI_Barrier(MPI_COMM_WORLD);
    raise(SIGINT);
    raise(SIGPIPE);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return got ? 0 : 1;
}
"""


def test_a_signal_the_program_survives_is_not_its_end(built, tmp_path):
    """The profiler's handler runs the program's own (or respects SIG_IGN), and a rank that
    goes on to MPI_Finalize ends 'finalized', with a verdict-capable whole profile."""
    src, exe = tmp_path / "survive.c", tmp_path / "survive"
    src.write_text(SURVIVE)
    subprocess.run(["mpicc", "-o", str(exe), str(src)], check=True)
    r = mpirun(tmp_path, str(exe), np_=2, env={"HBPROF_KEEP_RANK_FILES": "1"}, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr      # the program's handler ran
    assert {how for how, _, _ in ends(tmp_path).values()} == {END["finalized"]}
    _, run = verdict(tmp_path)
    assert run["failure"] is None and run["class"] != "failed"


def test_which_rank_failed_first():
    """The rule of hbtool.io.hbprof.run_failure on hand-made ends (format version 2 codes)."""
    from hbtool.io.hbprof import rank_end, run_failure

    def e(rank, how, detail=0, t=1.0, orphaned=False):
        return rank_end(rank, how, detail, how == 1, orphaned, int(t * 1e9) if how else 0, 2, 100 + rank)

    fin = [e(r, 1) for r in range(3)]
    assert run_failure(fin) is None
    # a rank's own crash goes before the launcher's SIGTERMs, even when they came earlier
    assert run_failure([e(0, 3, 15, 0.5), e(1, 3, 11, 0.9), e(2, 3, 15, 0.6)]) == \
        "rank 1: killed by SIGSEGV after 0.900 s; ranks 0, 2: killed by SIGTERM"
    # then the earliest of several aborts
    assert run_failure([e(0, 2, 7, 0.4), e(1, 2, 9, 0.2), e(2, 0)]).startswith("rank 1: called MPI_Abort (error code 9)")
    # one rank without a trace (SIGKILL) beside SIGTERMs: that one
    assert run_failure([e(0, 3, 15), e(1, 0), e(2, 3, 15)]).startswith("rank 1: ended without a trace")
    # several without a trace: not one of them named first
    assert run_failure([e(0, 0), e(1, 0), e(2, 3, 15)]) == \
        "ranks 0, 1: ended without a trace (SIGKILL or _exit; which first cannot be told); rank 2: killed by SIGTERM"
    # mpirun died: said first, whatever the ranks did then
    assert run_failure([e(0, 5, -61, orphaned=True), e(1, 1, orphaned=True)]) == \
        "mpirun (the launcher) died during the run; then rank 0: called _exit(-61) without calling MPI_Finalize; " \
        "rank 1: reached MPI_Finalize"
    # a version 1 file says only that the rank did not finish
    assert "version 1" in rank_end(0, 0, 0, False, False, 0, 1, 1)["ended"]
