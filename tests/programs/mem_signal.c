/*
 * mem_signal.c -- a program for the memory signal's tests (tests/test_memory.py):
 * 4 threads, API beats, a barrier after every beat.
 *
 *   mem_signal leak T BYTES     thread T keeps BYTES (touched) at each of its beats
 *   mem_signal once T BYTES     thread T takes BYTES once, at its 5th beat, and keeps them
 *   mem_signal pipeline BYTES   thread 0 allocates BYTES per beat and hands each block
 *                               to thread 1, which frees it (nothing leaks)
 *   mem_signal apis             every allocation function, each block freed by its
 *                               allocating thread (thread 0): a balance of 0
 *
 * Prints "done" and exits 0.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hbtrace.h"

#define THREADS 4
#define BEATS 150
#define SLOTS 4096

static const char *mode = "leak";
static int victim = 1;
static size_t bytes = 1 << 20;
static pthread_barrier_t bar;
static char *handed[BEATS];

static void work(void)
{
    volatile double x = 0;
    for (int i = 0; i < 200000; i++)
        x += i * 0.5;
}

static void keep(size_t n)
{
    char *p = malloc(n);
    if (p)
        memset(p, 1, n);
    __asm__ volatile("" : : "r"(p) : "memory");
}

static void *volatile seen[10];   /* every block escapes: the compiler keeps each call */

static void apis(void)
{
    void *p[10] = {0};
    p[0] = malloc(100);
    p[1] = calloc(10, 100);
    p[2] = realloc(malloc(50), 5000);
    p[3] = reallocarray(NULL, 20, 30);
    if (posix_memalign(&p[4], 64, 1000))
        p[4] = NULL;
    p[5] = aligned_alloc(256, 2048);
    p[6] = memalign(128, 3000);
    p[7] = valloc(100);
    p[8] = pvalloc(100);
    p[9] = realloc(NULL, 700);
    for (int i = 0; i < 10; i++) {
        if (!p[i])
            abort();
        memset(p[i], 2, 10);
        seen[i] = p[i];
        free(seen[i]);
    }
}

static void *run(void *arg)
{
    int id = (int)(long)arg;
    for (int b = 0; b < BEATS; b++) {
        work();
        if (!strcmp(mode, "leak") && id == victim)
            keep(bytes);
        else if (!strcmp(mode, "once") && id == victim && b == 5)
            keep(bytes);
        else if (!strcmp(mode, "pipeline") && id == 0) {
            handed[b] = malloc(bytes);
            memset(handed[b], 3, bytes);
        } else if (!strcmp(mode, "apis") && id == 0)
            apis();
        pthread_barrier_wait(&bar);
        if (!strcmp(mode, "pipeline") && id == 1)
            free(handed[b]);
        Heartbeat_OpenMP_Generate(id, 0, b);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        mode = argv[1];
    if (!strcmp(mode, "pipeline") && argc > 2)
        bytes = (size_t)atol(argv[2]);
    else if (argc > 3) {
        victim = atoi(argv[2]);
        bytes = (size_t)atol(argv[3]);
    }
    pthread_barrier_init(&bar, NULL, THREADS);
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, run, (void *)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    puts("done");
    return 0;
}
