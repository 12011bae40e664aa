/*
 * omp_dynamic.c -- steps of a dynamic loop whose chunks go to whichever thread is free, as
 * cd-hit's do: a thread that slows down takes fewer of them, one that stops takes none, and
 * the threads make different numbers of beats (tests/test_blame.py).
 *
 *   omp_dynamic STEPS ITERATIONS US
 *
 * Each step is `#pragma omp parallel for schedule(dynamic, 1)` over ITERATIONS iterations
 * of US microseconds of CPU work each. Prints "done" and exits 0.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cpu_work.h"

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: omp_dynamic STEPS ITERATIONS US\n");
        return 2;
    }
    int steps = atoi(argv[1]), n = atoi(argv[2]);
    double us = atof(argv[3]);
    double sum = 0;
    for (int s = 0; s < steps; s++) {
#pragma omp parallel for schedule(dynamic, 1) reduction(+ : sum)
        for (int i = 0; i < n; i++)
            sum += work(us / 1000);
    }
    printf("done%s\n", sum < 0 ? "!" : "");
    return 0;
}
