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
#include <time.h>

static double cpu_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static double work(double us)
{
    volatile double x = 0;
    double until = cpu_us() + us;
    while (cpu_us() < until)
        for (int k = 0; k < 20; k++)
            x += k * 0.5;
    return x;
}

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
            sum += work(us);
    }
    printf("done%s\n", sum < 0 ? "!" : "");
    return 0;
}
