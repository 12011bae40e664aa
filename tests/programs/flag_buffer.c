/*
 * flag_buffer.c -- two threads in a pipeline through flags they spin on, as NPB LU's
 * sweeps are: thread 0 makes STEPS units of UNIT_MS of CPU time, a beat of the
 * program's own after each, and may run at most AHEAD units ahead of thread 1; thread 1
 * makes each unit once thread 0 has made it, twice as long, a beat after each. Both
 * wait in loops on the counters (no runtime call: invisible to the tracer). Thread 0 is
 * the faster: it runs AHEAD units ahead and waits for thread 1 a little each unit.
 *
 *   flag_buffer STEPS UNIT_MS AHEAD
 *
 * Prints "done" and exits 0.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "cpu_work.h"
#include "hbtrace.h"

static int steps = 20000, ahead = 8;
static double unit_ms = 0.02;
static volatile int made, used;   /* units thread 0 made, units thread 1 made */

static void *run(void *arg)
{
    int me = (int)(long)arg;
    for (int i = 0; i < steps; i++) {
        if (me == 0) {
            while (i - __atomic_load_n(&used, __ATOMIC_ACQUIRE) >= ahead)
                ;
            work(unit_ms);
            Heartbeat_MultiPthread_Generate(0, 0, i);
            __atomic_store_n(&made, i + 1, __ATOMIC_RELEASE);
        } else {
            while (__atomic_load_n(&made, __ATOMIC_ACQUIRE) <= i)
                ;
            work(2 * unit_ms);
            Heartbeat_MultiPthread_Generate(1, 0, i);
            __atomic_store_n(&used, i + 1, __ATOMIC_RELEASE);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: flag_buffer STEPS UNIT_MS AHEAD\n");
        return 2;
    }
    steps = atoi(argv[1]);
    unit_ms = atof(argv[2]);
    ahead = atoi(argv[3]);
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
