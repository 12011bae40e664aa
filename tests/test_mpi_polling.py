"""Polling calls under the profiler (class poll: MPI_Test*, Iprobe, ...): they read no clock
but on one call in 64, and the others are taken out of the computation at the sampled
mean cost. Real mpirun, 2 ranks: rank 1 sleeps 0.4 s before it sends, rank 0 polls for
the message, once with nothing else to do (all MPI time), once with about 20 us of work
between polls (mostly computation); then 4 M local queries (MPI_Comm_rank, MPI_Type_size:
the same sampled path) in a tight loop, MPI time too. The figure of what a poll costs is
benchmarks/bench_mpi_polling.py's (README).
"""

from __future__ import annotations

import re
import subprocess

import pytest
from test_mpi_profiler import M, built, mpirun, per_rank, read_run_file, run_file  # noqa: F401

POLL = r"""
#include <mpi.h>
#include <stdio.h>
#include <time.h>
static void nap(void) { struct timespec t = {0, 400000000L}; nanosleep(&t, 0); }
static double sink;
static long long work_ns;   /* the thread's CPU time in work(), as the program measures it */
static long long cpu(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}
static void work(void)
{
    long long t0 = cpu();
    for (int i = 0; i < 20000; i++) sink += 1e-9 * i;
    work_ns += cpu() - t0;
}
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int r, x = 0, flag;
    long polls[2] = {0, 0};
    long long local_ns = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    for (int phase = 0; phase < 2; phase++) {
        if (r == 1) {
            nap();
            MPI_Send(&x, 1, MPI_INT, 0, phase, MPI_COMM_WORLD);
        } else {
            MPI_Request rq;
            MPI_Irecv(&x, 1, MPI_INT, 1, phase, MPI_COMM_WORLD, &rq);
            for (flag = 0; !flag; polls[phase]++) {
                if (phase == 1)
                    work();
                MPI_Test(&rq, &flag, MPI_STATUS_IGNORE);
            }
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (r == 0) {   /* phase 2: local queries in a tight loop, MPI time too */
        long long t0 = cpu();
        for (int i = 0; i < 2000000; i++) {
            MPI_Comm_rank(MPI_COMM_WORLD, &x);
            MPI_Type_size(MPI_INT, &x);
        }
        local_ns = cpu() - t0;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (r == 0)
        printf("work_cpu_ns %lld local_cpu_ns %lld\n", work_ns, local_ns);
    MPI_Finalize();
    return !(r == 1 || (polls[0] > 1000 && polls[1] > 100));
}
"""


@pytest.mark.parametrize("source,inject", [("cputime", False), ("instructions", False), ("cputime", True)])
def test_polling_is_mpi_time_and_work_between_polls_is_computation(built, tmp_path, source, inject):
    src, exe = tmp_path / "poll.c", tmp_path / "poll"
    src.write_text(POLL)
    subprocess.run(["mpicc", "-O1", "-o", str(exe), str(src)], check=True)
    env = {"HBPROF_COMPUTATION": source}
    if inject:   # the injector on, delaying (almost surely) nothing: the calls it spares stay sampled
        env.update(HBPROF_INJECT="1000,0,1e-12", HBPROF_INJECT_CALLS="mpi")
    r = mpirun(tmp_path, str(exe), np_=2, env=env, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    run = read_run_file(run_file(tmp_path))
    if source == "instructions" and run["header"]["comp_source"] != 1:
        pytest.skip("no user-space instruction counter here")
    rec, val = per_rank(run)[0]
    comp = val[:, M["computation"]]
    # segment 0, a pure polling loop: its computation is what the loop does between polls,
    # next to nothing beside segment 1's work (as long as segment 0, half of it polls)
    assert comp[0] < 0.2 * comp[1], (comp[0], comp[1])
    if source == "cputime":
        dur = rec["duration_ns"].astype(float)
        assert dur[0] > 0.35e9 and dur[1] > 0.35e9
        # the work between polls stays computation: the CPU time the program itself measured
        # in it (on a loaded machine a rank runs only part of the wall time, so not that)
        work = int(re.search(r"work_cpu_ns (\d+)", r.stdout).group(1))
        assert 0.8 * work < comp[1] < 1.25 * work + 2e6, (comp[1], work)
        # segment 2: 4 M local calls (MPI_Comm_rank, MPI_Type_size), a few ns each, and the
        # loop around them: the calls are taken out at their sampled cost, not counted as work
        local = int(re.search(r"local_cpu_ns (\d+)", r.stdout).group(1))
        assert comp[2] < 0.5 * local, (comp[2], local)
