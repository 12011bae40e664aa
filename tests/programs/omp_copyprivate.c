/*
 * omp_copyprivate.c -- a team of two that shares a value by `single
 * copyprivate` each step: the thread that runs the single meets the others
 * in GOMP_single_copy_end (libgomp), the others wait in
 * GOMP_single_copy_start.
 *
 *   OMP_NUM_THREADS=2 omp_copyprivate STEPS
 *
 * Prints "done SUM" (every thread's copy of each step's value summed: 3 * STEPS *
 * (STEPS + 1) with two threads) and exits 0.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: omp_copyprivate STEPS\n");
        return 2;
    }
    int steps = atoi(argv[1]);
    long sum = 0;
    for (int s = 1; s <= steps; s++) {
#pragma omp parallel num_threads(2) reduction(+ : sum)
        {
            int v;
#pragma omp single copyprivate(v)
            v = 3 * s;
            sum += v;
        }
    }
    printf("done %ld\n", sum);
    return 0;
}
