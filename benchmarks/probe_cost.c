/*
 * probe_cost.c -- cost of one timing-probe use (HBT_PROBE_BEGIN + HBT_PROBE_END,
 * hbtrace_probe.h) beside the cost of one clock read.
 *
 * In one run, interleaved rounds (default 15 rounds x 2,000,000 calls) of
 *   probe_clock   one read of the probe clock (hbt_probe_clock(): rdtsc when
 *                 the tracer chose the TSC, else clock_gettime(MONOTONIC)),
 *   two_reads     two reads of it and their difference: the floor of a use,
 *   monotonic     clock_gettime(CLOCK_MONOTONIC),
 *   monotonic_raw clock_gettime(CLOCK_MONOTONIC_RAW),
 *   rdtsc         a bare rdtsc (x86 only),
 *   probe         one probe use with an empty body, inline hot path,
 *   probe_call    the same through the library's out-of-line functions,
 * with the order rotated from round to round, so that a noisy machine
 * disturbs all alike. Prints the median ns per call over the rounds as
 * "key value" lines:
 *
 *   probe_clock tsc           (the clock the tracer chose)
 *   rounds 15
 *   calls 2000000
 *   probe_clock_ns 9.90
 *   two_reads_ns 19.50
 *   monotonic_ns 25.80
 *   monotonic_raw_ns 26.10
 *   rdtsc_ns 9.90
 *   probe_ns 21.00
 *   probe_call_ns 24.00
 *   ratio 2.121               (probe_ns / probe_clock_ns: a use reads the clock twice)
 *   floor_ratio 1.970         (two_reads_ns / probe_clock_ns)
 *   ratio_monotonic 0.814     (probe_ns / monotonic_ns)
 *   call_ratio 2.424          (probe_call_ns / probe_clock_ns)
 *   counted 30000000          (uses the probe counted in the timed rounds: must be
 *                              rounds x calls, else the tracer was off)
 *
 * HBTRACE_PROBE_CLOCK=monotonic measures the probes on CLOCK_MONOTONIC.
 * Tracing must be on (the probes are no-ops otherwise: counted is then 0).
 *
 * Build:  gcc -O2 -pthread -I native_tracer/include benchmarks/probe_cost.c \
 *             -L native_tracer/lib -lhbtrace -Wl,-rpath,$PWD/native_tracer/lib
 * (benchmarks/bench_probes.py builds and runs it.) The trace file is removed
 * at the end unless --keep-trace is given.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_harness.h"
#include "hbtrace.h"
#include "hbtrace_probe.h"

enum { K_PCLOCK, K_TWO, K_MONO, K_RAW, K_RDTSC, K_PROBE, K_CALL, NKINDS };
static const char *const kind_key[NKINDS] = {
    "probe_clock_ns", "two_reads_ns", "monotonic_ns", "monotonic_raw_ns", "rdtsc_ns", "probe_ns",
    "probe_call_ns",
};

static struct bench_args args = {
    .name = "probe_cost",
    .usage = "probe_cost [--rounds R] [--calls C] [--keep-trace]",
    .help = "Median ns per call of a probe-clock read, clock_gettime (MONOTONIC,\n"
            "MONOTONIC_RAW), rdtsc and one probe use (inline, out of line), in\n"
            "interleaved rounds (defaults: 15 rounds, 2000000 calls).",
};
static int  nrounds;
static long ncalls;
static double *samples;                /* [round][kind] ns per call */
static volatile uint64_t sink;

static inline uint64_t rdtsc_now(void)
{
#if defined(__x86_64__) || defined(__i386__)
    uint32_t lo, hi;
    __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi) : : "memory");
    return ((uint64_t)hi << 32) | lo;
#else
    return 0;
#endif
}

/* the probes of the loops: one static site each */
static __attribute__((noinline)) void probe_loop(long n)
{
    for (long i = 0; i < n; i++) {
        hbt_probe_t p = HBT_PROBE_BEGIN("probe_cost inline");
        HBT_PROBE_END(p);
    }
}

static struct hbt_probe_site call_site = { 0, __LINE__, __FILE__, "probe_cost call" };

static __attribute__((noinline)) void probe_call_loop(long n)
{
    for (long i = 0; i < n; i++) {
        hbt_probe_t p = hbt_probe_begin_call(&call_site);
        hbt_probe_end_call(p);
    }
}

/* One timed loop of n calls of kind k; ns per call. */
static double run_loop(int k, long n)
{
    uint64_t acc = 0;
    uint64_t t0 = bench_now_ns();
    switch (k) {
    case K_PCLOCK:
        for (long i = 0; i < n; i++)
            acc += hbt_probe_clock();
        break;
    case K_TWO:   /* the floor of a use: two reads and a difference, nothing kept */
        for (long i = 0; i < n; i++) {
            uint64_t t = hbt_probe_clock();
            acc += hbt_probe_clock() - t;
        }
        break;
    case K_MONO:
        for (long i = 0; i < n; i++) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            acc += (uint64_t)ts.tv_nsec;
        }
        break;
    case K_RAW:
        for (long i = 0; i < n; i++) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
            acc += (uint64_t)ts.tv_nsec;
        }
        break;
    case K_RDTSC:
        for (long i = 0; i < n; i++)
            acc += rdtsc_now();
        break;
    case K_PROBE:
        probe_loop(n);
        break;
    case K_CALL:
        probe_call_loop(n);
        break;
    }
    uint64_t t1 = bench_now_ns();
    sink += acc;
    return (double)(t1 - t0) / (double)n;
}

static double median_of(int k)
{
    double *v = bench_xcalloc(&args, (size_t)nrounds, sizeof *v);
    for (int r = 0; r < nrounds; r++)
        v[r] = samples[(size_t)r * NKINDS + (size_t)k];
    double m = bench_median(v, (size_t)nrounds);
    free(v);
    return m;
}

int main(int argc, char **argv)
{
    bench_parse_args(&args, argc, argv);
    nrounds = args.rounds;
    ncalls = args.calls;
    samples = bench_xcalloc(&args, (size_t)nrounds * NKINDS, sizeof *samples);
    hbt_init("probe_cost");

    /* warm-up: the probes' first uses (ids, names, this thread's table),
     * caches, the clocks */
    for (int k = 0; k < NKINDS; k++)
        (void)run_loop(k, ncalls / 20 + 1);
    uint64_t before = hbt_probe_stats ? hbt_probe_stats[0].count + hbt_probe_stats[1].count : 0;

    for (int r = 0; r < nrounds; r++)
        for (int j = 0; j < NKINDS; j++) {
            int k = bench_kind(r, j, NKINDS);
            samples[(size_t)r * NKINDS + (size_t)k] = run_loop(k, ncalls);
        }
    uint64_t after = hbt_probe_stats ? hbt_probe_stats[0].count + hbt_probe_stats[1].count : 0;

    double m[NKINDS];
    for (int k = 0; k < NKINDS; k++)
        m[k] = median_of(k);
    const char *path = hbt_trace_path();
    printf("probe_clock %s\n", hbt_probe_use_tsc ? "tsc" : "monotonic");
    printf("rounds %d\n", nrounds);
    printf("calls %ld\n", ncalls);
    for (int k = 0; k < NKINDS; k++)
        printf("%s %.2f\n", kind_key[k], m[k]);
    printf("ratio %.3f\n", m[K_PROBE] / m[K_PCLOCK]);
    printf("floor_ratio %.3f\n", m[K_TWO] / m[K_PCLOCK]);
    printf("ratio_monotonic %.3f\n", m[K_PROBE] / m[K_MONO]);
    printf("call_ratio %.3f\n", m[K_CALL] / m[K_PCLOCK]);
    /* both loops' probes (ids 0 and 1: the only probes of this program) */
    printf("counted %llu\n", (unsigned long long)(after - before) / 2);
    printf("trace %s\n", path ? path : "none");
    fflush(stdout);
    if (after - before != 2ull * (unsigned long long)nrounds * (unsigned long long)ncalls)
        fprintf(stderr, "probe_cost: warning: the probes counted %llu uses, not %llu "
                "(tracing off?): the probe figures are not the cost of counting\n",
                (unsigned long long)(after - before),
                2ull * (unsigned long long)nrounds * (unsigned long long)ncalls);
    bench_done(&args, path);
    return 0;
}
