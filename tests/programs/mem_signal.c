/*
 * mem_signal.c -- a program for the memory signal's tests (tests/test_memory.py):
 * 4 threads, API beats, a barrier after every beat.
 *
 *   mem_signal leak T BYTES     thread T keeps BYTES (touched) at each of its beats
 *   mem_signal once T BYTES     thread T takes BYTES once, at its 5th beat, and keeps them
 *   mem_signal pipeline BYTES   thread 0 allocates BYTES per beat and hands each block
 *                               to thread 1, which frees it (nothing leaks)
 *   mem_signal handoff T BYTES  threads 0 and 3 allocate BYTES per beat each and hand the
 *                               blocks to thread 1, which frees them; thread T keeps BYTES
 *                               (touched) at each of its beats: a leak among threads that
 *                               free each other's blocks
 *   mem_signal late BYTES       thread 1 allocates BYTES per beat and keeps them; the main
 *                               thread frees them once the threads have ended
 *   mem_signal release T BYTES  thread 0 takes a block of BYTES per beat before its first
 *                               beat and frees one at each; thread T keeps BYTES at each
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
static char *handed[BEATS], *handed3[BEATS];

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
    if (!strcmp(mode, "release") && id == 0)
        for (int b = 0; b < BEATS; b++) {
            handed[b] = malloc(bytes);
            if (handed[b])
                memset(handed[b], 5, bytes);
        }
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
        if (!strcmp(mode, "release")) {
            if (id == 0)
                free(handed[b]);
            if (id == victim)
                keep(bytes);
        }
        if (!strcmp(mode, "late") && id == 1) {
            handed[b] = malloc(bytes);
            if (handed[b])
                memset(handed[b], 4, bytes);
        }
        if (!strcmp(mode, "handoff")) {
            if (id == 0 || id == 3) {
                char *p = malloc(bytes);
                if (p)
                    memset(p, 3, bytes);
                (id == 0 ? handed : handed3)[b] = p;
            }
            if (id == victim)
                keep(bytes);
        }
        pthread_barrier_wait(&bar);
        if (!strcmp(mode, "pipeline") && id == 1)
            free(handed[b]);
        if (!strcmp(mode, "handoff") && id == 1) {
            free(handed[b]);
            free(handed3[b]);
        }
        Heartbeat_OpenMP_Generate(id, 0, b);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        mode = argv[1];
    if ((!strcmp(mode, "pipeline") || !strcmp(mode, "late")) && argc > 2)
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
    if (!strcmp(mode, "late"))
        for (int b = 0; b < BEATS; b++)
            free(handed[b]);
    puts("done");
    return 0;
}
