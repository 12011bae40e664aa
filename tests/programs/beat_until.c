/*
 * beat_until.c -- threads that beat until they are told to stop: a trace being written for
 * as long as a test needs to read it, whatever the machine's load.
 *
 *   beat_until THREADS PAUSE_US STOP_FILE
 *
 * Starts THREADS threads; each names itself (hbt_set_thread) and calls hbt_beat(0), sleeping
 * PAUSE_US microseconds after every 100 beats, until STOP_FILE exists (looked for at each
 * pause) or 120 s have passed; then returns, and the program exits 0.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "hbtrace.h"

static long pause_us;
static const char *stop_file;
static struct timespec t0;

static int told(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return access(stop_file, F_OK) == 0 || now.tv_sec - t0.tv_sec > 120;
}

static void *work(void *arg)
{
    hbt_set_thread((int)(long)arg);
    struct timespec nap = { pause_us / 1000000, (pause_us % 1000000) * 1000 };
    for (long i = 0;; i++) {
        hbt_beat(0);
        if (i % 100 == 99) {
            nanosleep(&nap, NULL);
            if (told())
                break;
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: beat_until THREADS PAUSE_US STOP_FILE\n");
        return 2;
    }
    int n = atoi(argv[1]);
    pause_us = atol(argv[2]);
    stop_file = argv[3];
    if (n < 1 || n > 64 || pause_us < 1) {
        fprintf(stderr, "beat_until: THREADS 1..64, PAUSE_US >= 1\n");
        return 2;
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    hbt_init("beat_until");
    pthread_t t[64];
    for (int k = 0; k < n; k++)
        if (pthread_create(&t[k], NULL, work, (void *)(long)k) != 0) {
            perror("pthread_create");
            return 1;
        }
    for (int k = 0; k < n; k++)
        pthread_join(t[k], NULL);
    return 0;
}
