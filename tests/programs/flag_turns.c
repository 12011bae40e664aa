/*
 * flag_turns.c -- two threads take turns through a flag they spin on, as NPB LU's
 * pipeline does (tests/test_starved_team.py): a thread waits for its turn in a loop on
 * the flag (no runtime call: invisible to the tracer), works about MS milliseconds of
 * CPU, beats, and hands the turn over.
 *
 *   flag_turns TURNS MS
 *
 * Prints "done" and exits 0.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "hbtrace.h"

static int turns = 200;
static double work_ms = 10.0;
static volatile int turn;

static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void *run(void *arg)
{
    int me = (int)(long)arg;
    volatile double x = 0;
    for (int i = 0; i < turns; i++) {
        while (__atomic_load_n(&turn, __ATOMIC_ACQUIRE) != me)
            ;
        double until = cpu_ms() + work_ms;
        while (cpu_ms() < until)
            for (int k = 0; k < 1000; k++)
                x += k * 0.5;
        Heartbeat_MultiPthread_Generate(me, 0, i);
        __atomic_store_n(&turn, 1 - me, __ATOMIC_RELEASE);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 2) {
        turns = atoi(argv[1]);
        work_ms = atof(argv[2]);
    }
    Heartbeat_MultiPthread_Init(0);
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, run, (void *)i);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    Heartbeat_MultiPthread_Finished();
    puts("done");
    return 0;
}
