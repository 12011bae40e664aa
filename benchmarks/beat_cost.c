/*
 * beat_cost.c -- cost of one heartbeat beside the cost of one clock read.
 *
 * In one run, interleaved rounds (default 15 rounds x 2,000,000 calls) of
 *   (a) clock_gettime(CLOCK_MONOTONIC) alone,
 *   (b) hbt_beat(0),
 *   (c) Heartbeat_OpenMP_Generate(tid, 1, i)   (the seed paper's entry point),
 * with the order of (a), (b), (c) rotated from round to round, so that a
 * noisy, shared machine disturbs all three alike. Prints the median ns per
 * call of each over the rounds as "key value" lines:
 *
 *   threads 1
 *   rounds 15
 *   calls 2000000
 *   clock_ns 25.80
 *   beat_ns 31.20
 *   legacy_beat_ns 31.50
 *   ratio 1.209              (beat_ns / clock_ns)
 *   legacy_ratio 1.221       (legacy_beat_ns / clock_ns)
 *   lost_records 0           (beats the tracer dropped; > 0 spoils the figures)
 *
 * --threads N runs every round in N threads at once (a barrier starts each
 * measurement in all threads together); the figures above are then medians
 * over all threads and rounds, and one line per thread follows:
 *   thread 0 clock_ns 25.9 beat_ns 31.4 legacy_beat_ns 31.7
 *
 * Build:  gcc -O2 -pthread -I native_tracer/include benchmarks/beat_cost.c \
 *             -L native_tracer/lib -lhbtrace -Wl,-rpath,$PWD/native_tracer/lib
 * Run with HBTRACE_DIR pointing at scratch space: the defaults record
 * 2 x 15 x 2,000,000 beats (about 1.9 GB) per thread. The trace file is
 * removed at the end unless --keep-trace is given.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_harness.h"
#include "hbtrace.h"
#include "hbtrace_format.h"

enum { K_CLOCK, K_BEAT, K_LEGACY, NKINDS };
static const char *const kind_key[NKINDS] = { "clock_ns", "beat_ns", "legacy_beat_ns" };

static struct bench_args args = {
    .name = "beat_cost",
    .usage = "beat_cost [--threads N] [--rounds R] [--calls C] [--keep-trace]",
    .help = "Median ns per call of clock_gettime(CLOCK_MONOTONIC), hbt_beat(0) and\n"
            "Heartbeat_OpenMP_Generate, in interleaved rounds (defaults: 1 thread,\n"
            "15 rounds, 2000000 calls).",
    .allow_threads = 1,
};
static int  nthreads;
static int  nrounds;
static long ncalls;

static pthread_barrier_t barrier;
static double *samples;                /* [thread][round][kind] ns per call */
static volatile uint64_t sink;         /* keeps every clock read observable */

static double *sample(int t, int r, int k)
{
    return &samples[((size_t)t * (size_t)nrounds + (size_t)r) * NKINDS + (size_t)k];
}

/* One timed loop of `n` calls of kind k; returns ns per call. */
static double run_loop(int k, int tid, long n)
{
    uint64_t acc = 0;
    uint64_t t0 = bench_now_ns();
    switch (k) {
    case K_CLOCK:
        for (long i = 0; i < n; i++) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            acc += (uint64_t)ts.tv_nsec;
        }
        break;
    case K_BEAT:
        for (long i = 0; i < n; i++)
            hbt_beat(0);
        break;
    case K_LEGACY:
        for (long i = 0; i < n; i++)
            Heartbeat_OpenMP_Generate(tid, 1, (int)i);
        break;
    }
    uint64_t t1 = bench_now_ns();
    sink += acc;
    return (double)(t1 - t0) / (double)n;
}

static void *worker(void *arg)
{
    int tid = (int)(intptr_t)arg;
    hbt_set_thread(tid);
    /* warm-up: first use of the tracer in this thread, caches, clock */
    for (int k = 0; k < NKINDS; k++)
        (void)run_loop(k, tid, ncalls / 20 + 1);
    for (int r = 0; r < nrounds; r++) {
        for (int j = 0; j < NKINDS; j++) {
            int k = bench_kind(r, j, NKINDS);
            pthread_barrier_wait(&barrier);
            *sample(tid, r, k) = run_loop(k, tid, ncalls);
        }
    }
    return NULL;
}

/* Median of kind k over the rounds of thread t (t < 0: over all threads). */
static double median_of(int t, int k)
{
    size_t n = 0;
    double *v = bench_xcalloc(&args, (size_t)nthreads * (size_t)nrounds, sizeof *v);
    for (int i = 0; i < nthreads; i++)
        if (t < 0 || i == t)
            for (int r = 0; r < nrounds; r++)
                v[n++] = *sample(i, r, k);
    double m = bench_median(v, n);
    free(v);
    return m;
}

/* lost_records from the header of the trace file, -1 if it cannot be read. */
static long long lost_records(const char *path)
{
    struct hbt_file_header h;
    if (!path)
        return -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t got = pread(fd, &h, sizeof h, 0);
    close(fd);
    if (got != (ssize_t)sizeof h || memcmp(h.magic, HBT_MAGIC, sizeof h.magic) != 0)
        return -1;
    return (long long)h.lost_records;
}

int main(int argc, char **argv)
{
    bench_parse_args(&args, argc, argv);
    nthreads = args.threads;
    nrounds = args.rounds;
    ncalls = args.calls;

    samples = bench_xcalloc(&args, (size_t)nthreads * (size_t)nrounds * NKINDS, sizeof *samples);
    hbt_init("beat_cost");
    Heartbeat_OpenMP_Init(0);
    pthread_barrier_init(&barrier, NULL, (unsigned)nthreads);

    if (nthreads == 1) {
        worker((void *)(intptr_t)0);
    } else {
        pthread_t *th = malloc(sizeof *th * (size_t)nthreads);
        if (!th) { perror("beat_cost: malloc"); return 1; }
        for (int t = 0; t < nthreads; t++) {
            int rc = pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t);
            if (rc) { fprintf(stderr, "beat_cost: pthread_create: %s\n", strerror(rc)); return 1; }
        }
        for (int t = 0; t < nthreads; t++)
            pthread_join(th[t], NULL);
        free(th);
    }
    Heartbeat_OpenMP_Finished();
    hbt_finish();

    double m[NKINDS];
    for (int k = 0; k < NKINDS; k++)
        m[k] = median_of(-1, k);
    const char *path = hbt_trace_path();
    long long lost = lost_records(path);

    printf("threads %d\n", nthreads);
    printf("rounds %d\n", nrounds);
    printf("calls %ld\n", ncalls);
    for (int k = 0; k < NKINDS; k++)
        printf("%s %.2f\n", kind_key[k], m[k]);
    printf("ratio %.3f\n", m[K_BEAT] / m[K_CLOCK]);
    printf("legacy_ratio %.3f\n", m[K_LEGACY] / m[K_CLOCK]);
    printf("lost_records %lld\n", lost);
    if (nthreads > 1)
        for (int t = 0; t < nthreads; t++)
            printf("thread %d clock_ns %.2f beat_ns %.2f legacy_beat_ns %.2f\n", t,
                   median_of(t, K_CLOCK), median_of(t, K_BEAT), median_of(t, K_LEGACY));
    printf("trace %s\n", path ? path : "none");
    if (lost > 0)
        fprintf(stderr, "beat_cost: warning: the tracer dropped %lld records "
                "(HBTRACE_MAX_MB or disk space): beat figures are not the cost of recording\n", lost);
    bench_done(&args, path);
    return 0;
}
