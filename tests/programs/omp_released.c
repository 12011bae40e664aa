/*
 * omp_released.c -- an OpenMP team of two in which a thread released from a
 * barrier does not run again for a while, as a thread queued behind others
 * on a busy machine: one parallel region of STEPS steps, each a dynamic loop
 * of 40 short units (a beat each), then a barrier; every EVERY-th step
 * thread 0 waits until thread 1 is in that barrier, sends it a signal whose
 * handler sleeps SLEEP_MS (in the barrier: released when thread 0 arrives,
 * it stays where it was), and after the barrier works LONG_MS of its own
 * while thread 1 sleeps on. Nobody waits for thread 0 then: thread 1 meets it
 * at the next loop's end (SLEEP_MS is the longer). One region, not one a
 * step: a thread's beats are its chunks (and, with gcc, the barrier's), and a
 * fault injected at any of them but the last lands inside the region, not
 * at a region's end where the master leaves for the serial part (libomp: a
 * spin there holds nobody, the worker waits for the next region).
 *
 *   OMP_NUM_THREADS=2 omp_released STEPS UNIT_MS LONG_MS SLEEP_MS EVERY
 *
 * Work is timed in the thread's own CPU time. Prints "done" and exits 0.
 */
#define _GNU_SOURCE
#include <omp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_work.h"

static double sleep_ms;

static void nap(int sig)
{
    (void)sig;
    struct timespec ts = { (time_t)(sleep_ms / 1e3), (long)((sleep_ms - 1e3 * (long)(sleep_ms / 1e3)) * 1e6) };
    while (nanosleep(&ts, &ts) != 0)
        ;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: omp_released STEPS UNIT_MS LONG_MS SLEEP_MS EVERY\n");
        return 2;
    }
    int steps = atoi(argv[1]), every = atoi(argv[5]);
    double unit = atof(argv[2]), lng = atof(argv[3]);
    sleep_ms = atof(argv[4]);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = nap;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    pthread_t second;
    int arrived = 0;
#pragma omp parallel num_threads(2)
    for (int s = 1; s <= steps; s++) {
        int me = omp_get_thread_num(), odd = every > 0 && s % every == 0;
#pragma omp for schedule(dynamic, 1)
        for (int i = 0; i < 40; i++)
            work(unit);
        if (me == 1) {
            second = pthread_self();
            __atomic_store_n(&arrived, s, __ATOMIC_RELEASE);
        } else if (odd) {
            while (__atomic_load_n(&arrived, __ATOMIC_ACQUIRE) != s)
                ;
            work(0.5);   /* thread 1 is in the barrier by now */
            pthread_kill(second, SIGUSR1);
        }
#pragma omp barrier
        if (me == 0 && odd)
            work(lng);
    }
    printf("done\n");
    return 0;
}
