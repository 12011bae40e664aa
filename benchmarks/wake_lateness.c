/*
 * wake_lateness.c -- how late a sleeping thread wakes on this machine when it
 * did not wait for a CPU: the online monitor's sign that the host stopped the
 * machine's CPUs (docs/methods.md, "Stopped CPUs").
 *
 *   gcc -O2 -pthread benchmarks/wake_lateness.c -o wake_lateness
 *   ./wake_lateness [SECONDS] [SPINNERS] [PERIOD_US]   (default 20 s, 2, 500 us)
 *
 * SPINNERS threads spin (the CPUs are busy, as under a program the tracer watches);
 * one thread sleeps to absolute CLOCK_MONOTONIC deadlines PERIOD_US apart, as the
 * central monitor does, and at each wake takes its lateness less its run-queue delay
 * since the previous wake (/proc/thread-self/schedstat, field 2): time it was late
 * for no CPU it waited for. Printed: how many wakes fell in each band of that, and
 * the machine's steal time over the run (/proc/stat).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile int stop;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t run_delay(void)
{
    char buf[128];
    int fd = open("/proc/thread-self/schedstat", O_RDONLY);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    unsigned long long run, wait;
    return sscanf(buf, "%llu %llu", &run, &wait) == 2 ? wait : 0;
}

static unsigned long long steal_ticks(void)
{
    FILE *f = fopen("/proc/stat", "r");
    unsigned long long v[8] = {0};
    if (!f)
        return 0;
    if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
               &v[6], &v[7]) != 8)
        v[7] = 0;
    fclose(f);
    return v[7];
}

static void *spin(void *arg)
{
    (void)arg;
    volatile uint64_t x = 0;
    while (!stop)
        x++;
    return NULL;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 20;
    int spinners = argc > 2 ? atoi(argv[2]) : 2;
    uint64_t period = (uint64_t)(argc > 3 ? atof(argv[3]) : 500) * 1000u;
    pthread_t t[64];
    if (spinners > 64)
        spinners = 64;
    for (int i = 0; i < spinners; i++)
        pthread_create(&t[i], NULL, spin, NULL);
    static const double band_ms[] = {0.1, 0.5, 1, 2, 5, 10, 1e9};
    long count[7] = {0}, wakes = 0;
    unsigned long long st0 = steal_ticks();
    uint64_t end = now_ns() + (uint64_t)(seconds * 1e9), rq0 = run_delay(), worst = 0;
    for (uint64_t due = now_ns() + period; due < end; due += period) {
        struct timespec ts = {.tv_sec = (time_t)(due / 1000000000u), .tv_nsec = (long)(due % 1000000000u)};
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
        uint64_t woke = now_ns(), rq = run_delay();
        uint64_t late = woke > due ? woke - due : 0, queued = rq - rq0;
        uint64_t own = late > queued ? late - queued : 0;
        rq0 = rq;
        for (int b = 0; b < 7; b++)
            if ((double)own / 1e6 < band_ms[b]) {
                count[b]++;
                break;
            }
        if (own > worst)
            worst = own;
        wakes++;
        if (woke > due + period)
            due = woke - woke % period;   /* do not run to catch up */
    }
    stop = 1;
    for (int i = 0; i < spinners; i++)
        pthread_join(t[i], NULL);
    printf("%ld wakes, %d spinning threads, steal %.1f%% of the CPUs\n", wakes, spinners,
           100.0 * (double)(steal_ticks() - st0) / (double)sysconf(_SC_CLK_TCK) / seconds /
               (double)sysconf(_SC_NPROCESSORS_ONLN));
    const char *names[] = {"< 0.1 ms", "0.1-0.5 ms", "0.5-1 ms", "1-2 ms", "2-5 ms", "5-10 ms", ">= 10 ms"};
    for (int b = 0; b < 7; b++)
        printf("late, not queued, %-10s %8ld\n", names[b], count[b]);
    printf("worst %.2f ms\n", (double)worst / 1e6);
    return 0;
}
