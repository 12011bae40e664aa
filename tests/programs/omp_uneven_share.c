/*
 * omp_uneven_share.c -- many short steps of an OpenMP team, then one long region whose
 * work is split unevenly: thread 0 works MS milliseconds of CPU time, every other thread
 * FACTOR times that, as a static split of unequal iterations does (IQ-TREE's first long
 * region: 99 ms against 144 ms). Then short steps again. No heartbeat call: the tracer's
 * automatic beats (tests/test_monitor.py).
 *
 *   omp_uneven_share STEPS MS FACTOR
 *
 * Each short step is a parallel region of 20 us of work per thread. Prints "done".
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "cpu_work.h"

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: omp_uneven_share STEPS MS FACTOR\n");
        return 2;
    }
    int steps = atoi(argv[1]);
    double ms = atof(argv[2]), factor = atof(argv[3]), sum = 0;
    for (int s = 0; s < 2 * steps + 1; s++) {
        int uneven = s == steps;
#pragma omp parallel reduction(+ : sum)
        sum += work(!uneven ? 0.02 : omp_get_thread_num() == 0 ? ms : ms * factor);
    }
    printf("done%s\n", sum < 0 ? "!" : "");
    return 0;
}
