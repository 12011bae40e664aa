/*
 * omp_serial_sync.c -- an OpenMP program whose serial part takes a critical
 * section and waits for its tasks (`taskwait`) outside any parallel region,
 * as cd-hit's master does, and then works or sleeps there: each step, a
 * region of two threads with a dynamically scheduled loop of 40 units (a
 * beat each), then in the serial part a critical section, a taskwait, and
 * every 4th step SERIAL_MS of CPU work and SLEEP_MS asleep. The master is
 * in the program's serial part, not in its team's work, the whole time.
 *
 *   OMP_NUM_THREADS=2 omp_serial_sync STEPS UNIT_MS SERIAL_MS SLEEP_MS
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
    if (argc != 5) {
        fprintf(stderr, "usage: omp_serial_sync STEPS UNIT_MS SERIAL_MS SLEEP_MS\n");
        return 2;
    }
    int steps = atoi(argv[1]);
    double unit = atof(argv[2]), serial = atof(argv[3]), sleep_ms = atof(argv[4]);
    long taken = 0;
    for (int s = 1; s <= steps; s++) {
#pragma omp parallel num_threads(2)
        {
#pragma omp for schedule(dynamic, 1)
            for (int i = 0; i < 40; i++)
                work(unit);
        }
#pragma omp critical
        taken++;
#pragma omp taskwait
        if (s % 4 == 0) {
            work(serial);
            struct timespec ts = { 0, (long)(sleep_ms * 1e6) };
            nanosleep(&ts, NULL);
        }
    }
    printf("done %ld\n", taken);
    return 0;
}
