/*
 * probe_demo.c -- timing probes (hbtrace_probe.h) in threads that end in
 * every way a thread can, and a run long enough for the status sampler.
 *
 *   probe_demo [--threads N] [--uses K] [--idle M] [--seconds S] [--fork]
 *              [--beat] [--main-exit] [--exit STATUS] [--expect]
 *
 * Worker w (0 <= w < N, user thread number w) does, by w % 4:
 *   0: K times "outer" with two nested "inner" inside, then returns;
 *   1: the same K/2 times (ends early), then returns;
 *   2: the same K times, then one "pexit" and pthread_exit() from inside a
 *      nested call;
 *   3: K times a scoped probe "scoped" (HBT_PROBE_SCOPE), then returns.
 * M idle threads (user numbers 100, 101, ...) each use "idle" K times and
 * then block until the process exits: their statistics are written at exit.
 * The main thread (user number -1) times five sleeps of 2 ms ("sleep 2ms"),
 * busies itself for S seconds in 10 ms steps ("step"), with --fork lets a
 * child use "child" 10 times, and exits with STATUS -- or, with
 * --main-exit, leaves by pthread_exit() right after starting the workers
 * (the process ends with its last thread). --beat: workers beat once per
 * "outer" use (so that the behavior monitor has threads to watch).
 *
 * It prints nothing. With --expect it prints on stdout what it did, one line
 * per thread and probe, for tests to compare with the trace:
 *   expect <user thread> <label> <count>
 * (the child prints its own lines with "child" in front). Build:
 *   gcc -O2 -Wall -Wextra -pthread -I../include probe_demo.c -o probe_demo \
 *       -L../lib -lhbtrace -Wl,-rpath,$PWD/../lib
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hbtrace.h"
#include "hbtrace_probe.h"

static int uses = 1000;
static int beat;
static int show_expect;   /* --expect */
static volatile unsigned long sink;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

static void expect(int thread, const char *label, long count)
{
    if (!show_expect)
        return;
    pthread_mutex_lock(&out_lock);
    printf("expect %d %s %ld\n", thread, label, count);
    fflush(stdout);
    pthread_mutex_unlock(&out_lock);
}

static void work(int n)
{
    for (int i = 0; i < n; i++)
        sink += (unsigned long)i * 2654435761u;
}

static void outer_inner(int n)
{
    for (int i = 0; i < n; i++) {
        hbt_probe_t o = HBT_PROBE_BEGIN("outer");
        if (beat)
            hbt_beat(0);
        for (int j = 0; j < 2; j++) {
            hbt_probe_t in = HBT_PROBE_BEGIN("inner");
            work(50);
            HBT_PROBE_END(in);
        }
        HBT_PROBE_END(o);
    }
}

static void leave_from_inside(void)
{
    hbt_probe_t p = HBT_PROBE_BEGIN("pexit");
    work(10);
    HBT_PROBE_END(p);
    pthread_exit(NULL);
}

static void *worker(void *arg)
{
    int w = (int)(long)arg;
    hbt_set_thread(w);
    switch (w % 4) {
    case 0:
        outer_inner(uses);
        expect(w, "outer", uses);
        expect(w, "inner", 2L * uses);
        break;
    case 1:
        outer_inner(uses / 2);
        expect(w, "outer", uses / 2);
        expect(w, "inner", 2L * (uses / 2));
        break;
    case 2:
        outer_inner(uses);
        expect(w, "outer", uses);
        expect(w, "inner", 2L * uses);
        expect(w, "pexit", 1);
        leave_from_inside();
        break;
    case 3:
        for (int i = 0; i < uses; i++) {
            HBT_PROBE_SCOPE("scoped");
            work(20);
        }
        expect(w, "scoped", uses);
        break;
    }
    return NULL;
}

static pthread_mutex_t idle_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle_cond = PTHREAD_COND_INITIALIZER;
static int idle_ready;

static void *idler(void *arg)
{
    int u = (int)(long)arg;
    hbt_set_thread(u);
    for (int i = 0; i < uses; i++) {
        hbt_probe_t p = HBT_PROBE_BEGIN("idle");
        work(10);
        HBT_PROBE_END(p);
    }
    expect(u, "idle", uses);
    pthread_mutex_lock(&idle_lock);
    idle_ready++;
    pthread_cond_broadcast(&idle_cond);
    for (;;)
        pthread_cond_wait(&idle_cond, &idle_lock);   /* until the process exits */
    return NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    int nthreads = 8, nidle = 0, status = 0, do_fork = 0, main_exit = 0;
    double seconds = 0;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : "0";
        if (strcmp(argv[i], "--threads") == 0) { nthreads = atoi(v); i++; }
        else if (strcmp(argv[i], "--uses") == 0) { uses = atoi(v); i++; }
        else if (strcmp(argv[i], "--idle") == 0) { nidle = atoi(v); i++; }
        else if (strcmp(argv[i], "--seconds") == 0) { seconds = atof(v); i++; }
        else if (strcmp(argv[i], "--exit") == 0) { status = atoi(v); i++; }
        else if (strcmp(argv[i], "--fork") == 0) do_fork = 1;
        else if (strcmp(argv[i], "--beat") == 0) beat = 1;
        else if (strcmp(argv[i], "--main-exit") == 0) main_exit = 1;
        else if (strcmp(argv[i], "--expect") == 0) show_expect = 1;
        else {
            fprintf(stderr, "usage: probe_demo [--threads N] [--uses K] [--idle M] "
                    "[--seconds S] [--fork] [--beat] [--main-exit] [--exit STATUS] [--expect]\n");
            return 2;
        }
    }

    for (int i = 0; i < 5; i++) {
        hbt_probe_t p = HBT_PROBE_BEGIN("sleep 2ms");
        struct timespec ts = { 0, 2000000 };
        nanosleep(&ts, NULL);
        HBT_PROBE_END(p);
    }
    expect(-1, "sleep 2ms", 5);

    pthread_t *th = calloc((size_t)(nthreads + nidle), sizeof *th);
    for (int w = 0; w < nthreads; w++)
        pthread_create(&th[w], NULL, worker, (void *)(long)w);
    for (int k = 0; k < nidle; k++)
        pthread_create(&th[nthreads + k], NULL, idler, (void *)(long)(100 + k));
    if (main_exit) {
        fflush(stdout);
        pthread_exit(NULL);
    }

    long steps = 0;
    double end = now_s() + seconds;
    while (now_s() < end) {
        hbt_probe_t p = HBT_PROBE_BEGIN("step");
        double until = now_s() + 0.01;
        while (now_s() < until)
            work(100);
        HBT_PROBE_END(p);
        steps++;
    }
    if (steps)
        expect(-1, "step", steps);

    for (int w = 0; w < nthreads; w++)
        pthread_join(th[w], NULL);
    free(th);
    pthread_mutex_lock(&idle_lock);
    while (idle_ready < nidle)
        pthread_cond_wait(&idle_cond, &idle_lock);
    pthread_mutex_unlock(&idle_lock);

    if (do_fork) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            for (int i = 0; i < 10; i++) {
                hbt_probe_t p = HBT_PROBE_BEGIN("child");
                work(10);
                HBT_PROBE_END(p);
            }
            if (show_expect)
                printf("child expect -1 child 10\n");
            fflush(stdout);
            exit(0);
        }
        if (pid > 0)
            waitpid(pid, NULL, 0);
    }
    fflush(stdout);
    return status;   /* idle threads still blocked: merged at exit */
}
