/*
 * omp_team_of_one.c -- an OpenMP program whose master works most of its
 * units in parallel regions of one thread (`if` false) between regions of
 * two: each step, a region of two threads with a statically scheduled loop
 * of 2 units, then a region of the master alone with a dynamically
 * scheduled loop of 40 units (a beat each). The worker waits in the pool
 * meanwhile, for the master.
 *
 *   OMP_NUM_THREADS=2 omp_team_of_one STEPS UNIT_MS
 *
 * Work is timed in the thread's own CPU time. Prints "done" and exits 0.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "cpu_work.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: omp_team_of_one STEPS UNIT_MS\n");
        return 2;
    }
    int steps = atoi(argv[1]);
    double unit = atof(argv[2]);
    volatile int alone = 0;   /* (not known to the compiler: a region it must start) */
    for (int s = 1; s <= steps; s++) {
#pragma omp parallel num_threads(2)
        {
#pragma omp for schedule(static)
            for (int i = 0; i < 2; i++)
                work(unit);
        }
#pragma omp parallel if (alone)
        {
#pragma omp for schedule(dynamic, 1)
            for (int i = 0; i < 40; i++)
                work(unit);
        }
    }
    printf("done\n");
    return 0;
}
