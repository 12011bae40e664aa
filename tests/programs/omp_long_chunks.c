/*
 * omp_long_chunks.c -- a dynamic loop whose last iteration is long: at each step, the
 * thread that takes it works alone while its teammates wait at the loop's barrier, as
 * cd-hit's loops do (tests/test_behavior.py).
 *
 *   omp_long_chunks STEPS ITERATIONS LONG_MS [US]
 *
 * Each step is `#pragma omp parallel for schedule(dynamic, 1)` over ITERATIONS
 * iterations of US microseconds of CPU work each (20 if not given), but the last, which
 * takes LONG_MS milliseconds of CPU work. Prints "done" and exits 0. With LONG_MS as
 * short as the others, steps of a dynamic loop whose chunks go to whichever thread is
 * free: a thread that slows down takes fewer of them, one that stops takes none, and the
 * threads make different numbers of beats (tests/test_blame.py).
 */
#include <stdio.h>
#include <stdlib.h>

#include "cpu_work.h"

int main(int argc, char **argv)
{
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: omp_long_chunks STEPS ITERATIONS LONG_MS [US]\n");
        return 2;
    }
    int steps = atoi(argv[1]), n = atoi(argv[2]);
    double long_ms = atof(argv[3]), ms = argc == 5 ? atof(argv[4]) / 1e3 : 0.02;
    double sum = 0;
    for (int s = 0; s < steps; s++) {
#pragma omp parallel for schedule(dynamic, 1) reduction(+ : sum)
        for (int i = 0; i < n; i++)
            sum += work(i == n - 1 ? long_ms : ms);
    }
    printf("done%s\n", sum < 0 ? "!" : "");
    return 0;
}
