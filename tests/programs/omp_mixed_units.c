/*
 * omp_mixed_units.c -- GROMACS's pace: each step, SMALL parallel regions of a few
 * microseconds of work per thread and two of LONG milliseconds (no heartbeat call: the
 * tracer's automatic beats, one per region's end); every EVERY-th step thread 1's share of
 * the first long region is FACTOR times as long, and thread 0 waits for it at the region's
 * end (a long unit of real work, as GROMACS's 8 ms of CPU time where its units took up to 3).
 *
 *   omp_mixed_units STEPS SMALL LONG_MS EVERY FACTOR
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "cpu_work.h"

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 300;
    int small = argc > 2 ? atoi(argv[2]) : 17;
    double long_ms = argc > 3 ? atof(argv[3]) : 1.5;
    int every = argc > 4 ? atoi(argv[4]) : 50;
    double factor = argc > 5 ? atof(argv[5]) : 3.0;
    double total = 0;
    for (int s = 0; s < steps; s++) {
        for (int r = 0; r < small; r++) {
#pragma omp parallel reduction(+ : total)
            total += work(0.005);
        }
#pragma omp parallel reduction(+ : total)
        {
            int me = omp_get_thread_num();
            total += work(me == 1 && every > 0 && s % every == every - 1 ? long_ms * factor : long_ms);
        }
#pragma omp parallel reduction(+ : total)
        total += work(long_ms);
    }
    printf("done %.0f\n", total > 0 ? 1.0 : 0.0);
    return 0;
}
