/*
 * alloc_cost.c -- the cost of malloc + free pairs (sizes drawn from 16 B to
 * 64 KiB, a few live at a time, as allocation-heavy code does), for the
 * memory signal's benchmark (bench_alloc.py): run it bare and with the tracer
 * preloaded, side by side. Prints "pair_ns <nanoseconds per pair>" and a
 * checksum, so that nothing is optimised away.
 *
 *   alloc_cost [--threads N] [--pairs P]
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long pairs = 2000000;
static int threads = 1;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *body(void *arg)
{
    uint64_t x = 88172645463325252ull ^ (uint64_t)(uintptr_t)arg, sum = 0;
    char *live[16] = {0};
    for (long i = 0; i < pairs; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        size_t n = (size_t)16 << (x % 13);   /* 16 B .. 64 KiB */
        unsigned k = (unsigned)(x >> 40) % 16;
        free(live[k]);
        live[k] = malloc(n);
        if (live[k]) {
            live[k][0] = (char)i;
            sum += (uint64_t)(unsigned char)live[k][0];
        }
    }
    for (int k = 0; k < 16; k++)
        free(live[k]);
    return (void *)(uintptr_t)sum;
}

int main(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads"))
            threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--pairs"))
            pairs = atol(argv[i + 1]);
    }
    if (threads < 1 || threads > 64 || pairs < 1) {
        fprintf(stderr, "alloc_cost: --threads 1..64, --pairs > 0\n");
        return 2;
    }
    pthread_t t[64];
    uint64_t t0 = now_ns(), sum = 0;
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, body, (void *)(uintptr_t)(i + 1));
    for (int i = 0; i < threads; i++) {
        void *r;
        pthread_join(t[i], &r);
        sum += (uint64_t)(uintptr_t)r;
    }
    double ns = (double)(now_ns() - t0) / (double)pairs;
    printf("pair_ns %.2f\nchecksum %llu\n", ns, (unsigned long long)sum);
    return 0;
}
