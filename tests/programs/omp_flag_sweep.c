/*
 * omp_flag_sweep.c -- an OpenMP team of two that waits for itself in its own
 * code, as the pipelined sweeps of NPB LU do: each step, a sweep over PLANES
 * planes, each plane a statically scheduled loop with nowait (with GCC scheduled at
 * run time, OMP_SCHEDULE=static: GCC makes no runtime call at the end of a static
 * loop with nowait, so its tracer sees no end there) in which each thread works UNIT_MS, thread 1 after thread 0 has done that plane and thread
 * 0 after thread 1 has done the plane before (flags: no runtime call, so a
 * thread waiting on one is, to the tracer, at work); then three statically
 * scheduled loops with their closing barriers, SHARE_MS each per thread.
 * When one thread slows down, the other's sweep units grow as much as its own
 * (it waits on the flags); its shares do not (it waits at the barriers).
 *
 *   OMP_NUM_THREADS=2 OMP_SCHEDULE=static omp_flag_sweep STEPS PLANES UNIT_MS SHARE_MS
 *
 * Work is timed in the thread's own CPU time. Prints "done" and exits 0.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cpu_work.h"

#ifdef __clang__
#define PLANE_SCHEDULE schedule(static)
#else
#define PLANE_SCHEDULE schedule(runtime)
#endif

static void wait_for(int *flag, int value)
{
    while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) < value)
        ;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: omp_flag_sweep STEPS PLANES UNIT_MS SHARE_MS\n");
        return 2;
    }
    int steps = atoi(argv[1]), planes = atoi(argv[2]);
    double unit = atof(argv[3]), share = atof(argv[4]);
    int done[2] = {0, 0};   /* planes each thread has done, over all steps */
#pragma omp parallel num_threads(2)
    for (int s = 0; s < steps; s++) {
        for (int k = 1; k <= planes; k++) {
            int plane = s * planes + k;
#pragma omp for PLANE_SCHEDULE nowait
            for (int i = 0; i < 2; i++) {
                wait_for(&done[1 - i], i == 0 ? plane - 1 : plane);
                work(unit);
                __atomic_store_n(&done[i], plane, __ATOMIC_RELEASE);
            }
        }
#pragma omp for schedule(static)
        for (int i = 0; i < 2; i++)
            work(share);
#pragma omp for schedule(static)
        for (int i = 0; i < 2; i++)
            work(share);
#pragma omp for schedule(static)
        for (int i = 0; i < 2; i++)
            work(share);
    }
    printf("done\n");
    return 0;
}
