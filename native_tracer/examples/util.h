/*
 * util.h -- what every example program shares: its name in messages, the
 * clock, the seeded random numbers, dying with one line on stderr, memory,
 * threads, and JSON strings for the truth files (util.c).
 */
#ifndef HB_EXAMPLES_UTIL_H
#define HB_EXAMPLES_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

/* Exit statuses shared by every example. */
#define EX_EXIT_OK       0
#define EX_EXIT_USAGE    2   /* bad argument, or the truth file cannot be written */
#define EX_EXIT_RUNTIME  3   /* out of memory, thread creation failed, ... */

extern const char *ex_prog;     /* the program's name in messages ("example") */
extern uint64_t ex_start_ns;    /* CLOCK_MONOTONIC at program start, before main() */

static inline uint64_t ex_clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t ex_now_ns(void)
{
    return ex_clock_ns(CLOCK_MONOTONIC);
}

/* splitmix64: every random choice of a run comes from its seed through this. */
static inline uint64_t ex_rand_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform double in [0, 1). */
static inline double ex_rand_double(uint64_t *state)
{
    return (double)(ex_rand_next(state) >> 11) * 0x1.0p-53;
}

/* "<prog>: <message>" on stderr (with " (try --help)" for EX_EXIT_USAGE),
 * then exit(status). */
__attribute__((format(printf, 2, 3), noreturn))
void ex_die(int status, const char *fmt, ...);

/* malloc, 64-byte aligned; dies (EX_EXIT_RUNTIME) when out of memory. */
void *ex_xmalloc(size_t n);

/* pthread_create; dies (EX_EXIT_RUNTIME) when it fails. */
void ex_thread(pthread_t *th, void *(*fn)(void *), void *arg);

/* s as a JSON string, or null. */
void ex_json_str(FILE *f, const char *s);

#endif /* HB_EXAMPLES_UTIL_H */
