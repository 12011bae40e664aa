/*
 * omp_long_tasks.c -- a construct of long tasks that comes after many short ones, the way
 * kalign's run goes: one thread of the team (single nowait) first makes SHORT tasks of
 * SHORT_MS milliseconds of CPU time each and waits for them (taskwait), then, LONG times,
 * makes one task of LONG_MS and waits for it. Whichever thread runs a long task, its
 * teammate waits for it (in the taskwait, or in the region's closing barrier), and the
 * first long tasks are longer than any unit of work either thread did before.
 *
 *   omp_long_tasks SHORT SHORT_MS LONG LONG_MS
 *
 * Prints "done N" (N: the tasks run) and exits 0.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "cpu_work.h"

static long ran;

static void short_task(double ms)
{
    work(ms);
    __atomic_add_fetch(&ran, 1, __ATOMIC_RELAXED);
}

static void long_task(double ms)
{
    work(ms);
    __atomic_add_fetch(&ran, 1, __ATOMIC_RELAXED);
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: %s SHORT SHORT_MS LONG LONG_MS\n", argv[0]);
        return 2;
    }
    int nshort = atoi(argv[1]), nlong = atoi(argv[3]);
    double short_ms = atof(argv[2]), long_ms = atof(argv[4]);
#pragma omp parallel
#pragma omp single nowait
    {
        for (int i = 0; i < nshort; i++) {
#pragma omp task
            short_task(short_ms);
        }
#pragma omp taskwait
        for (int i = 0; i < nlong; i++) {
#pragma omp task
            long_task(long_ms);
#pragma omp taskwait
        }
    }
    printf("done %ld\n", ran);
    return 0;
}
