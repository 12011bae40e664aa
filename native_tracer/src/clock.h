/*
 * clock.h -- the one monotonic clock read both libraries use off their hot
 * paths' own clocks: CLOCK_MONOTONIC in integer nanoseconds (vDSO, no system
 * call); and the calling thread's CPU clock. Included by src/internal.h (libhbtrace) and mpi/src/internal.h
 * (libhbprof).
 */
#ifndef HB_CLOCK_H
#define HB_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t hb_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The calling thread's CPU time in nanoseconds (a system call), 0 where it cannot be read. */
static inline uint64_t hb_thread_cpu_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
