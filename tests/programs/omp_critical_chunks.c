/*
 * omp_critical_chunks.c -- a loop of one long chunk per thread that enters a critical
 * section again and again, as Clustal Omega's does (tests/test_behavior.py): no beat for
 * the whole chunk, and a record of the tracer every fraction of a millisecond.
 *
 *   omp_critical_chunks STEPS CHUNK_MS EVERY_MS
 *
 * Each step is a dynamic loop of 400 iterations of 20 us of CPU work (the thread's usual
 * units), then `#pragma omp parallel for schedule(static, 1)` over as many iterations as
 * threads, each CHUNK_MS milliseconds of CPU work that enters `#pragma omp critical` every
 * EVERY_MS. Prints "done" and exits 0.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "cpu_work.h"

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: omp_critical_chunks STEPS CHUNK_MS EVERY_MS\n");
        return 2;
    }
    int steps = atoi(argv[1]);
    double chunk = atof(argv[2]), every = atof(argv[3]);
    long entered = 0;
    for (int s = 0; s < steps; s++) {
#pragma omp parallel for schedule(dynamic, 1)
        for (int i = 0; i < 400; i++)
            work(0.02);
        int n = omp_get_max_threads();
#pragma omp parallel for schedule(static, 1)
        for (int i = 0; i < n; i++)
            for (double done = 0; done < chunk; done += every) {
                work(every);
#pragma omp critical
                entered++;
            }
    }
    printf("done%s\n", entered < 0 ? "!" : "");
    return 0;
}
