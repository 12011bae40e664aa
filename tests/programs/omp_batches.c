/*
 * omp_batches.c -- a static loop of equal batches of work, one beat of the
 * program's own at the top of each (hbtool's heartbeat API), as NPB EP's
 * source beats: each batch burns MS milliseconds of the thread's CPU time.
 * Run with more threads than CPUs, each batch takes longer in wall time than
 * in CPU time, and how much longer depends on how the machine shares its CPUs
 * (tests/test_blame.py).
 *
 *   omp_batches BATCHES MS
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "hbtrace.h"
#include "cpu_work.h"

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 240;
    double ms = argc > 2 ? atof(argv[2]) : 12.0;
    double total = 0;
#pragma omp parallel for schedule(static) reduction(+ : total)
    for (long i = 0; i < n; i++) {
        hbt_beat_ex(omp_get_thread_num(), 1, (int)i);
        total += work(ms);
    }
    printf("done %.0f\n", total > 0 ? 1.0 : 0.0);
    return 0;
}
