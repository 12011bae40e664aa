/*
 * cpu_work.h -- work timed in the calling thread's own CPU time, for the test
 * programs: a thread the machine preempts still does the same work.
 */
#ifndef CPU_WORK_H
#define CPU_WORK_H

#include <time.h>

static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Burn ms milliseconds of this thread's CPU time. */
static double work(double ms)
{
    volatile double x = 0;
    double until = cpu_ms() + ms;
    while (cpu_ms() < until)
        for (int k = 0; k < 200; k++)
            x += k * 0.5;
    return x;
}

#endif
