/*
 * omp_flush_pipeline.c -- an OpenMP team that waits for itself in its own code
 * the way NPB LU's pipelined sweeps do: over PLANES planes, each a statically
 * scheduled loop with nowait of one iteration per thread, thread i spins on
 * `#pragma omp flush` until its left neighbour has done the plane, flushes, works
 * UNIT_MS (its own CPU time), spins until its right neighbour has done the plane
 * before, marks the plane done and flushes again: its unit of work ends in a
 * spin, as LU's do. With libomp the tracer sees the flushes (OMPT):
 * a spin of 0.1 ms or more is a recorded wait. More threads than CPUs (taskset)
 * take the CPU from the spinning threads: a spin of several milliseconds of
 * wall time uses a part of that in CPU time.
 *
 *   omp_flush_pipeline PLANES UNIT_MS [LAST_MS]
 *
 * LAST_MS: the last thread's work per plane (default UNIT_MS): a slower last
 * thread keeps the others spinning after their work, on it.
 *
 * Prints "done" and exits 0.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "cpu_work.h"

#define MAX_THREADS 64

int main(int argc, char **argv)
{
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: omp_flush_pipeline PLANES UNIT_MS [LAST_MS]\n");
        return 2;
    }
    int planes = atoi(argv[1]);
    double unit = atof(argv[2]), last = argc > 3 ? atof(argv[3]) : unit;
    static volatile int done[MAX_THREADS + 2];   /* planes done by thread i, at i + 1 */
#pragma omp parallel
    {
        int n = omp_get_num_threads();
        if (n > MAX_THREADS)
            n = MAX_THREADS;
        for (int k = 1; k <= planes; k++) {
#pragma omp for schedule(static) nowait
            for (int i = 0; i < n; i++) {
                while (i > 0 && done[i] < k) {
#pragma omp flush
                }
#pragma omp flush
                work(i == n - 1 ? last : unit);
                while (i < n - 1 && done[i + 2] < k - 1) {
#pragma omp flush
                }
                done[i + 1] = k;
#pragma omp flush
            }
        }
    }
    printf("done\n");
    return 0;
}
