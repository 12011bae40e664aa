/*
 * cpu_stops.c -- does this machine's host stop a virtual CPU while a thread runs
 * on it, and is the thread charged the stop as CPU time? With no tracer.
 *
 *   gcc -O2 -pthread benchmarks/cpu_stops.c -o cpu_stops
 *   ./cpu_stops [SECONDS] [THREADS]        (default 6 s, 2 threads)
 *
 * THREADS threads spin on arithmetic, reading the monotonic clock and their own
 * CPU clock between pieces of about 0.5 us. Every gap of the monotonic clock over
 * 0.8 ms is printed with the thread's CPU time over it (a stop charged as CPU time
 * reads as much CPU time as the gap), its run-queue delay over it
 * (/proc/thread-self/schedstat: a thread preempted by another reads as much delay)
 * and the CPU it is on; then the gaps that recur at the same phase of a 100 ms
 * period (a host CPU quota), and the cost of one read of /proc/interrupts, which the
 * online monitor follows the CPUs' timer ticks with (docs/methods.md, "Stopped
 * CPUs").
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define MAX_GAPS 4096

struct gap {
    double at_ms, gap_us, cpu_us, queued_us;
    int thread, cpu;
};

static struct gap gaps[MAX_GAPS];
static int ngaps;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int stop;
static uint64_t t_start;

static uint64_t clk(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t run_delay(void)
{
    char b[128];
    unsigned long long run = 0, delay = 0;
    int fd = open("/proc/thread-self/schedstat", O_RDONLY);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, b, sizeof b - 1);
    close(fd);
    b[n > 0 ? n : 0] = '\0';
    if (sscanf(b, "%llu %llu", &run, &delay) != 2)
        return 0;
    return delay;
}

static void *spin(void *arg)
{
    int id = (int)(long)arg;
    volatile double x = 1.0;
    uint64_t last = clk(CLOCK_MONOTONIC), last_cpu = clk(CLOCK_THREAD_CPUTIME_ID), rd = run_delay();
    while (!stop) {
        for (int i = 0; i < 200; i++)
            x = x * 1.0000001 + 1e-9;
        uint64_t t = clk(CLOCK_MONOTONIC), c = clk(CLOCK_THREAD_CPUTIME_ID);
        if (t - last > 800000) {
            uint64_t r = run_delay();
            pthread_mutex_lock(&lock);
            if (ngaps < MAX_GAPS)
                gaps[ngaps++] = (struct gap){ (double)(last - t_start) / 1e6, (double)(t - last) / 1e3,
                                              (double)(c - last_cpu) / 1e3, (double)(r - rd) / 1e3, id,
                                              sched_getcpu() };
            pthread_mutex_unlock(&lock);
            rd = r;
        }
        last = t;
        last_cpu = c;
    }
    return NULL;
}

static int by_time(const void *a, const void *b)
{
    double d = ((const struct gap *)a)->at_ms - ((const struct gap *)b)->at_ms;
    return (d > 0) - (d < 0);
}

int main(int argc, char **argv)
{
    int secs = argc > 1 ? atoi(argv[1]) : 6, nt = argc > 2 ? atoi(argv[2]) : 2;
    if (secs <= 0 || nt <= 0 || nt > 64) {
        fprintf(stderr, "usage: cpu_stops [SECONDS] [THREADS (1-64)]\n");
        return 2;
    }
    pthread_t th[64];
    t_start = clk(CLOCK_MONOTONIC);
    for (long i = 0; i < nt; i++)
        pthread_create(&th[i], NULL, spin, (void *)i);
    sleep((unsigned)secs);
    stop = 1;
    for (int i = 0; i < nt; i++)
        pthread_join(th[i], NULL);

    qsort(gaps, (size_t)ngaps, sizeof gaps[0], by_time);
    int charged = 0, queued = 0, away = 0;
    printf("gaps over 0.8 ms (%d threads, %d s):\n  at ms      thread cpu  gap us   cpu us  queued us\n", nt, secs);
    for (int i = 0; i < ngaps; i++) {
        struct gap *g = &gaps[i];
        const char *what = g->cpu_us > 0.8 * g->gap_us ? "charged" : g->queued_us > 0.5 * g->gap_us ? "queued" : "away";
        charged += what[0] == 'c';
        queued += what[0] == 'q';
        away += what[0] == 'a';
        printf("  %9.3f  %6d %3d  %7.0f  %7.0f  %9.0f  %s\n", g->at_ms, g->thread, g->cpu, g->gap_us, g->cpu_us,
               g->queued_us, what);
    }
    /* recurring at one phase of 100 ms: gaps whose start lies within 0.5 ms of
     * another's, a whole number of 100 ms apart */
    int periodic = 0;
    for (int i = 0; i < ngaps; i++)
        for (int k = 0; k < ngaps; k++) {
            double d = gaps[k].at_ms - gaps[i].at_ms;
            double off = d - 100.0 * (double)(long)(d / 100.0 + 0.5);
            if (k != i && d >= 99.5 && off > -0.5 && off < 0.5) {
                periodic++;
                break;
            }
        }
    printf("%d gaps: %d charged as CPU time, %d queued for a CPU, %d neither (the CPU stopped, not charged); "
           "%d recur at one phase of a 100 ms period\n", ngaps, charged, queued, away, periodic);

    char buf[16384];
    uint64_t t0 = clk(CLOCK_MONOTONIC);
    int reads = 0;
    for (; reads < 2000; reads++) {
        int fd = open("/proc/interrupts", O_RDONLY);
        if (fd < 0)
            break;
        while (read(fd, buf, sizeof buf) > 0)
            ;
        close(fd);
    }
    if (reads)
        printf("one read of /proc/interrupts: %.1f us\n", (double)(clk(CLOCK_MONOTONIC) - t0) / reads / 1e3);
    return 0;
}
