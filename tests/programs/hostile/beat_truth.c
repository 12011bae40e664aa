/*
 * beat_truth.c -- 32 threads beat forever (a few microseconds of work
 * between beats) and keep their own count of the beats they made, for
 * counting what a SIGKILL costs the trace. TRUTH is a file of 32 slots of
 * two int64: the thread's Linux thread id and the number of its beats that
 * hbt_beat has returned from (stored after the call returns, release order).
 * The file is a shared mapping: what was stored survives the kill.
 *
 *   beat_truth TRUTH        runs until killed
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "beat.h"

#define THREADS 32

static int64_t *slots;

static void *worker(void *arg)
{
    long k = (long)arg;
    __atomic_store_n(&slots[2 * k], (int64_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
    volatile double x = 1.0;
    for (int64_t i = 0;; i++) {
        for (int w = 0; w < 2000; w++)
            x = x * 1.0000001 + 1e-9;
        beat((unsigned)i);
        __atomic_store_n(&slots[2 * k + 1], i + 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s TRUTH\n", argv[0]);
        return 2;
    }
    size_t size = THREADS * 2 * sizeof(int64_t);
    int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)size) != 0)
        return 1;
    slots = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (slots == MAP_FAILED)
        return 1;
    pthread_t t[THREADS];
    for (long k = 0; k < THREADS; k++)
        if (pthread_create(&t[k], NULL, worker, (void *)k) != 0)
            return 1;
    for (int k = 0; k < THREADS; k++)
        pthread_join(t[k], NULL);
    return 0;
}
