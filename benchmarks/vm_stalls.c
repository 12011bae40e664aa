/*
 * vm_stalls.c -- how often this machine makes every thread's work take several
 * times its usual CPU time at once, with no tracer and nothing else of ours.
 *
 *   gcc -O2 -pthread benchmarks/vm_stalls.c -o vm_stalls -lm
 *   ./vm_stalls [RUNS] [THREADS] [UNITS]      (default 40 runs, 2 threads, 500 units)
 *
 * Each run: THREADS threads each do UNITS units of the same arithmetic (about 1 ms
 * of CPU each, the work of pi_pthread's beats), timing every unit in its own
 * thread CPU time (CLOCK_THREAD_CPUTIME_ID). A unit is stalled when it took more
 * than 4 times the run's median unit of that thread. Printed: per run, the
 * longest unit of each thread against its median, and whether every thread had a
 * stalled unit within the same 20 ms (a stall of the machine, not of one thread);
 * then how many runs had one. The online monitor's busy-waiting verdict is judged
 * by CPU time (docs/methods.md): such stalls are what it must not call spinning.
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int units = 500;
static volatile double sink;

static uint64_t clk(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct th {
    pthread_t id;
    uint64_t *cpu;   /* per unit: CPU ns */
    uint64_t *end;   /* per unit: wall time at its end */
};

static void *work(void *arg)
{
    struct th *t = arg;
    for (int u = 0; u < units; u++) {
        uint64_t c0 = clk(CLOCK_THREAD_CPUTIME_ID);
        double s = 0;
        for (int i = 0; i < 640000; i++) {
            double x = (i + 0.5) / 640000.0;
            s += 4.0 / (1.0 + x * x);
        }
        sink = s;
        t->cpu[u] = clk(CLOCK_THREAD_CPUTIME_ID) - c0;
        t->end[u] = clk(CLOCK_MONOTONIC);
    }
    return NULL;
}

static int cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 40, nt = argc > 2 ? atoi(argv[2]) : 2;
    units = argc > 3 ? atoi(argv[3]) : 500;
    if (runs < 1 || nt < 1 || nt > 64 || units < 10) {
        fprintf(stderr, "usage: vm_stalls [RUNS>=1] [THREADS 1-64] [UNITS>=10]\n");
        return 2;
    }
    struct th *t = calloc((size_t)nt, sizeof *t);
    uint64_t *tmp = malloc(sizeof(uint64_t) * (size_t)units);
    int together = 0;
    for (int k = 0; k < nt; k++) {
        t[k].cpu = malloc(sizeof(uint64_t) * (size_t)units);
        t[k].end = malloc(sizeof(uint64_t) * (size_t)units);
    }
    printf("run  longest unit / median, per thread        all threads stalled within 20 ms\n");
    for (int r = 0; r < runs; r++) {
        for (int k = 0; k < nt; k++)
            pthread_create(&t[k].id, NULL, work, &t[k]);
        for (int k = 0; k < nt; k++)
            pthread_join(t[k].id, NULL);
        uint64_t first_stall[64];
        printf("%3d ", r);
        for (int k = 0; k < nt; k++) {
            memcpy(tmp, t[k].cpu, sizeof(uint64_t) * (size_t)units);
            qsort(tmp, (size_t)units, sizeof *tmp, cmp);
            uint64_t med = tmp[units / 2], top = tmp[units - 1];
            printf(" %6.1fx", (double)top / (double)med);
            first_stall[k] = 0;
            for (int u = 0; u < units; u++)
                if (t[k].cpu[u] > 4 * med) {
                    first_stall[k] = t[k].end[u];
                    break;
                }
        }
        int all = 1;
        uint64_t lo = UINT64_MAX, hi = 0;
        for (int k = 0; k < nt; k++) {
            if (!first_stall[k])
                all = 0;
            lo = first_stall[k] < lo ? first_stall[k] : lo;
            hi = first_stall[k] > hi ? first_stall[k] : hi;
        }
        int yes = all && hi - lo < 20000000ull;
        together += yes;
        printf("   %s\n", yes ? "yes" : "no");
        fflush(stdout);
    }
    printf("runs with every thread stalled (a unit > 4x its median CPU time) within 20 ms: %d of %d\n",
           together, runs);
    return 0;
}
