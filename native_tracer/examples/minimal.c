/*
 * minimal.c -- the smallest program that calls the heartbeat API: three
 * threads, 300 beats each. The README builds it against an installed tracer:
 *
 *   gcc -O2 -pthread $(hbtool config --cflags) minimal.c $(hbtool config --libs) -o minimal
 *   HBTRACE_DIR=mytrace ./minimal && hbtool info mytrace
 */
#include <hbtrace.h>
#include <pthread.h>

enum { THREADS = 3, BEATS = 300 };

static void *work(void *arg)
{
    int me = (int)(long)arg;
    volatile double x = 0;
    for (int i = 0; i < BEATS; i++) {
        for (int k = 0; k < 20000; k++)
            x += k * 1e-9;          /* the work of one beat */
        Heartbeat_MultiPthread_Generate(me, 0, i);
    }
    return NULL;
}

int main(void)
{
    pthread_t t[THREADS];
    Heartbeat_MultiPthread_Init(0);
    for (long i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, work, (void *)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    Heartbeat_MultiPthread_Finished();
    return 0;
}
