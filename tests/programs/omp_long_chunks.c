/*
 * omp_long_chunks.c -- a dynamic loop whose last iteration is long: at each step, the
 * thread that takes it works alone while its teammates wait at the loop's barrier, as
 * cd-hit's loops do (tests/test_behavior.py).
 *
 *   omp_long_chunks STEPS ITERATIONS LONG_MS
 *
 * Each step is `#pragma omp parallel for schedule(dynamic, 1)` over ITERATIONS
 * iterations of about 20 us of CPU work each, but the last, which takes LONG_MS
 * milliseconds of CPU work. Prints "done" and exits 0.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cpu_work.h"

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: omp_long_chunks STEPS ITERATIONS LONG_MS\n");
        return 2;
    }
    int steps = atoi(argv[1]), n = atoi(argv[2]);
    double long_ms = atof(argv[3]);
    double sum = 0;
    for (int s = 0; s < steps; s++) {
#pragma omp parallel for schedule(dynamic, 1) reduction(+ : sum)
        for (int i = 0; i < n; i++)
            sum += work(i == n - 1 ? long_ms : 0.02);
    }
    printf("done%s\n", sum < 0 ? "!" : "");
    return 0;
}
