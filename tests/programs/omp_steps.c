/*
 * omp_steps.c -- an OpenMP team's steps, each two units of work between
 * barriers (no heartbeat call: the tracer's automatic beats, one per barrier).
 * Each thread burns MS milliseconds of its CPU time in a step's first unit and
 * MS/2 in its second; thread 0 burns FACTOR times that from step FROM on (its
 * own work grew: what the work shift is for), up to step UNTIL (default: to the end).
 * With CHUNKS, each step is instead a dynamically scheduled loop of CHUNKS iterations of
 * MS milliseconds each (thread 0's FACTOR times that in steps FROM..UNTIL-1): its threads
 * make different numbers of beats, the slow one fewer.
 *
 *   omp_steps STEPS MS FROM FACTOR [UNTIL [CHUNKS]]
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "cpu_work.h"

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 20;
    double ms = argc > 2 ? atof(argv[2]) : 4.0;
    int from = argc > 3 ? atoi(argv[3]) : steps;
    double factor = argc > 4 ? atof(argv[4]) : 1.0;
    int until = argc > 5 ? atoi(argv[5]) : steps;
    int chunks = argc > 6 ? atoi(argv[6]) : 0;
    double total = 0;
    if (chunks > 0) {
#pragma omp parallel reduction(+ : total)
        {
            int me = omp_get_thread_num();
            for (int s = 0; s < steps; s++) {
                double f = me == 0 && s >= from && s < until ? factor : 1.0;
#pragma omp for schedule(dynamic, 1)
                for (int i = 0; i < chunks; i++)
                    total += work(ms * f);
            }
        }
        printf("done %.0f\n", total > 0 ? 1.0 : 0.0);
        return 0;
    }
#pragma omp parallel reduction(+ : total)
    {
        int me = omp_get_thread_num();
        for (int s = 0; s < steps; s++) {
            double f = me == 0 && s >= from && s < until ? factor : 1.0;
            total += work(ms * f);
#pragma omp barrier
            total += work(ms * f / 2);
#pragma omp barrier
        }
    }
    printf("done %.0f\n", total > 0 ? 1.0 : 0.0);
    return 0;
}
