/*
 * bench_harness.h -- the timing harness that beat_cost.c and probe_cost.c
 * share: the clock, medians, the command line (--threads, --rounds,
 * --calls, --keep-trace, --help) and removing the trace at the end.
 * Static functions in a header, so that each benchmark stays one source
 * file that bench_tracer.py and bench_probes.py compile with one gcc call.
 */
#ifndef HBT_BENCH_HARNESS_H
#define HBT_BENCH_HARNESS_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* What a benchmark's command line sets (defaults: 1 thread, 15 rounds,
 * 2,000,000 calls per timed loop). */
struct bench_args {
    const char *name;      /* the program, in messages */
    const char *usage;     /* its usage line */
    const char *help;      /* what it measures, for --help */
    int  allow_threads;    /* accepts --threads */
    int  threads;
    int  rounds;
    long calls;
    int  keep_trace;
};

static inline uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of v[0..n) (sorts v). */
static double bench_median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void *bench_xcalloc(const struct bench_args *a, size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        fprintf(stderr, "%s: out of memory\n", a->name);
        exit(1);
    }
    return p;
}

static long bench_parse_long(const struct bench_args *a, const char *opt, const char *s,
                             long lo, long hi)
{
    char *end;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "%s: %s needs an integer in %ld..%ld (usage: %s)\n", a->name, opt, lo,
                hi, a->usage);
        exit(2);
    }
    return v;
}

/* Parse the command line into *a (name, usage, help and allow_threads set
 * by the caller); exits after --help (status 0) or on a bad argument (2). */
static void bench_parse_args(struct bench_args *a, int argc, char **argv)
{
    a->threads = 1;
    a->rounds = 15;
    a->calls = 2000000;
    a->keep_trace = 0;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (a->allow_threads && strcmp(o, "--threads") == 0) {
            a->threads = (int)bench_parse_long(a, o, v, 1, 1024);
            i++;
        } else if (strcmp(o, "--rounds") == 0) {
            a->rounds = (int)bench_parse_long(a, o, v, 1, 100000);
            i++;
        } else if (strcmp(o, "--calls") == 0) {
            a->calls = bench_parse_long(a, o, v, 1, 1L << 40);
            i++;
        } else if (strcmp(o, "--keep-trace") == 0) {
            a->keep_trace = 1;
        } else if (strcmp(o, "--help") == 0 || strcmp(o, "-h") == 0) {
            printf("usage: %s\n%s\n", a->usage, a->help);
            exit(0);
        } else {
            fprintf(stderr, "%s: unknown argument '%s' (usage: %s)\n", a->name, o, a->usage);
            exit(2);
        }
    }
}

/* The order of the kinds is rotated from round to round, so that a noisy,
 * shared machine disturbs all alike: the j-th loop of round r times kind
 * bench_kind(r, j, nkinds). */
static inline int bench_kind(int r, int j, int nkinds)
{
    return (r + j) % nkinds;
}

/* The end of a run: the figures are out; remove the trace unless kept. */
static void bench_done(const struct bench_args *a, const char *path)
{
    fflush(stdout);
    if (path && !a->keep_trace)
        unlink(path);
}

#endif /* HBT_BENCH_HARNESS_H */
