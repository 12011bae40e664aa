/*
 * beat_burst.c -- write a large heartbeat trace with the real tracer, fast.
 *
 *   beat_burst THREADS BEATS_PER_THREAD [PAUSE_US [STOP_FILE]]
 *
 * Starts THREADS threads; each names itself (hbt_set_thread) and calls hbt_beat(0)
 * BEATS_PER_THREAD times as fast as it can (with PAUSE_US: sleeping that many
 * microseconds after every 100 beats, for a trace that is written over a while),
 * then returns. With STOP_FILE (and BEATS_PER_THREAD 0), each beats until STOP_FILE
 * exists, looked for at each pause, or 120 s have passed: a trace written for as long
 * as a reader needs, whatever the machine's load. The trace goes to
 * HBTRACE_DIR as usual. benchmarks/bench_big_trace.py builds and runs it
 * (16 x 1,250,000 beats: 20 M beats, about 640 MB, in about a second).
 *
 * Build:  gcc -O2 -pthread -I native_tracer/include benchmarks/beat_burst.c \
 *             -L native_tracer/lib -lhbtrace -Wl,-rpath,$PWD/native_tracer/lib
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "hbtrace.h"

static long nbeats;
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
    for (long i = 0; stop_file || i < nbeats; i++) {
        hbt_beat(0);
        if (pause_us && i % 100 == 99) {
            nanosleep(&nap, NULL);
            if (stop_file && told())
                break;
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 5) {
        fprintf(stderr, "usage: beat_burst THREADS BEATS_PER_THREAD [PAUSE_US [STOP_FILE]]\n");
        return 2;
    }
    int n = atoi(argv[1]);
    nbeats = atol(argv[2]);
    pause_us = argc >= 4 ? atol(argv[3]) : 0;
    stop_file = argc == 5 ? argv[4] : NULL;
    if (n < 1 || n > 4096 || nbeats < 0 || pause_us < 0 || (stop_file && (nbeats || pause_us < 1))) {
        fprintf(stderr, "beat_burst: THREADS 1..4096, BEATS_PER_THREAD >= 0, PAUSE_US >= 0; "
                        "with STOP_FILE, BEATS_PER_THREAD 0 and PAUSE_US >= 1\n");
        return 2;
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    hbt_init("beat_burst");
    pthread_t *t = calloc((size_t)n, sizeof *t);
    if (!t)
        return 1;
    for (int k = 0; k < n; k++)
        if (pthread_create(&t[k], NULL, work, (void *)(long)k) != 0) {
            perror("pthread_create");
            return 1;
        }
    for (int k = 0; k < n; k++)
        pthread_join(t[k], NULL);
    free(t);
    hbt_finish();
    return 0;
}
