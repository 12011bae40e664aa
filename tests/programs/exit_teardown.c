/*
 * exit_teardown.c -- a thread calls exit(1) while another still works on a buffer that
 * the program's exit handler unmaps: the worker then dies of SIGSEGV during the exit (a
 * thread of cd-hit that called exit() in the middle of a loop did this to its teammate;
 * tests/test_behavior.py).
 *
 *   exit_teardown
 *
 * Thread 0 reads the buffer and beats; thread 1 beats every millisecond and calls
 * exit(1) at its 50th beat. The exit handler (atexit, registered by main after the
 * tracer's) unmaps the buffer and sleeps 2 s, in which thread 0 touches it. The process
 * dies of SIGSEGV, with thread 0's signal after thread 1's exit() call.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#include "hbtrace.h"

#define LEN (1u << 20)

static volatile unsigned char *buf;
static volatile int started;

static void unmap(void)
{
    munmap((void *)buf, LEN);
    struct timespec t = {2, 0};
    nanosleep(&t, NULL);
}

static void *reader(void *arg)
{
    (void)arg;
    hbt_set_thread(0);
    unsigned sum = 0;
    for (;;) {
        for (unsigned i = 0; i < LEN; i += 4096)
            sum += buf[i];
        hbt_beat(sum & 1);
        __atomic_store_n(&started, 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

static void *exiter(void *arg)
{
    (void)arg;
    hbt_set_thread(1);
    while (!__atomic_load_n(&started, __ATOMIC_ACQUIRE))
        ;
    struct timespec ms = {0, 1000000};
    for (int i = 1;; i++) {
        hbt_beat(0);
        if (i == 50)
            exit(1);
        nanosleep(&ms, NULL);
    }
    return NULL;
}

int main(void)
{
    hbt_init("exit_teardown");
    buf = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED)
        return 3;
    atexit(unmap);
    pthread_t a, b;
    if (pthread_create(&a, NULL, reader, NULL) || pthread_create(&b, NULL, exiter, NULL))
        return 3;
    pthread_join(b, NULL);
    return 0;
}
