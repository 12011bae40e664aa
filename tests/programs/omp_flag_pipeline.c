/*
 * omp_flag_pipeline.c -- an OpenMP team of two whose second thread waits for
 * the first in the program's own code, as NPB LU's pipeline does: each step,
 * a dynamic loop of 40 short units (a beat each), then thread 0 works LONG ms
 * while thread 1 spins on a flag (no runtime call: invisible to the tracer),
 * and once the flag is set works TAIL ms and meets thread 0 at the region's
 * closing barrier; every 4th step thread 0 works SPIKE_MS instead (a unit
 * the machine stretched, say). Thread 1 is silent LONG + TAIL ms (SPIKE_MS +
 * TAIL), on a CPU, while its team waits for it TAIL ms only.
 *
 *   OMP_NUM_THREADS=2 omp_flag_pipeline STEPS UNIT_MS LONG_MS TAIL_MS SPIKE_MS
 *
 * Work is timed in the thread's own CPU time. Prints "done" and exits 0.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cpu_work.h"

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: omp_flag_pipeline STEPS UNIT_MS LONG_MS TAIL_MS SPIKE_MS\n");
        return 2;
    }
    int steps = atoi(argv[1]);
    double unit = atof(argv[2]), lng = atof(argv[3]), tail = atof(argv[4]), spike = atof(argv[5]);
    int flag = 0;
    for (int s = 1; s <= steps; s++) {
#pragma omp parallel num_threads(2)
        {
#pragma omp for schedule(dynamic, 1)
            for (int i = 0; i < 40; i++)
                work(unit);
            if (omp_get_thread_num() == 0) {
                work(s % 4 ? lng : spike);
                __atomic_store_n(&flag, s, __ATOMIC_RELEASE);
            } else {
                while (__atomic_load_n(&flag, __ATOMIC_ACQUIRE) != s)
                    ;
                work(tail);
            }
        }
    }
    printf("done\n");
    return 0;
}
