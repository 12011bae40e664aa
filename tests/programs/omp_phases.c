/*
 * omp_phases.c -- an OpenMP team's steps in PHASES phases, each phase a parallel region of its
 * own (a construct of its own: no construct recurs in half the run's windows, as NPB FT's
 * loops, each in 8 of its 20 windows of beats). No heartbeat call: the tracer's automatic
 * beats, one per region's end. Each thread burns MS milliseconds of its CPU time a step;
 * thread 0 FACTOR times that from step FROM on.
 *
 *   omp_phases STEPS MS PHASES FROM FACTOR
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "cpu_work.h"

/* a region of its own (the compiler outlines each into a function of its own) */
#define STEP(scale)                                                                   \
    do {                                                                              \
        _Pragma("omp parallel reduction(+ : total)")                                  \
        total += (scale) * work(omp_get_thread_num() == 0 ? ms * f : ms);             \
    } while (0)

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 40;
    double ms = argc > 2 ? atof(argv[2]) : 8.0;
    int phases = argc > 3 ? atoi(argv[3]) : 4;
    int from = argc > 4 ? atoi(argv[4]) : steps;
    double factor = argc > 5 ? atof(argv[5]) : 1.0;
    if (steps < 1 || phases < 1 || phases > 4)
        return 2;
    double total = 0;
    for (int s = 0; s < steps; s++) {
        double f = s >= from ? factor : 1.0;
        switch (s * phases / steps) {
        case 0: STEP(1.0); break;
        case 1: STEP(2.0); break;
        case 2: STEP(3.0); break;
        default: STEP(4.0); break;
        }
    }
    printf("done %.0f\n", total > 0 ? 1.0 : 0.0);
    return 0;
}
