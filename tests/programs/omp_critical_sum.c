/*
 * omp_critical_sum.c -- regions whose work ends in a critical section, as a reduction
 * written by hand or by a compiler does (IQ-TREE's likelihood loops): each thread burns
 * MS milliseconds of its CPU time, then adds its part to a shared sum in a critical
 * section, then the region ends.
 *
 *   omp_critical_sum STEPS MS
 */
#include <stdio.h>
#include <stdlib.h>

#include "cpu_work.h"

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 100;
    double ms = argc > 2 ? atof(argv[2]) : 1.0;
    double sum = 0;
    for (int s = 0; s < steps; s++) {
#pragma omp parallel
        {
            double part = work(ms);
#pragma omp critical
            sum += part;
        }
    }
    printf("omp_critical_sum done %d %.1f\n", steps, sum > 0 ? 1.0 : 0.0);
    return 0;
}
