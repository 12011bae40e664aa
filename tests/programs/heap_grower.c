/*
 * heap_grower.c -- a thread that grows the heap while other threads beat and
 * fill every CPU, for tests/test_prefault.py: the tracer's pre-faulter must
 * never make a program's brk (or mmap, munmap, mprotect: every call that
 * changes the address space) wait for it.
 *
 *   heap_grower SPINNERS GROWS
 *
 * SPINNERS threads beat (hbt_beat) every few microseconds of work until the
 * main thread is done; the main thread grows the heap GROWS times by 64 KiB
 * with sbrk, 5 ms apart, and prints on stdout
 *
 *   grows N longest_ms X total_over_5ms_ms Y prefault P nice_diff D
 *
 * where X is the longest sbrk call in wall time, Y the sum of the calls
 * that took more than 5 ms, P the number of the tracer's pre-faulter threads
 * seen ("hbt-prefault" in /proc/self/task) and D its nice value less the
 * main thread's. Exit status 0 (2: bad arguments).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hbtrace.h"

static volatile int done;
static volatile unsigned long sink;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void *spinner(void *arg)
{
    (void)arg;
    unsigned long acc = 0;
    for (unsigned i = 0; !done; i++) {
        for (int k = 0; k < 8000; k++)   /* some microseconds of work */
            acc = acc * 6364136223846793005ul + 1442695040888963407ul;
        hbt_beat(i);
    }
    sink = acc;
    return NULL;
}

/* The nice value of task `tid` (field 19 of its stat), or 99. */
static int nice_of(const char *tid)
{
    char path[300], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%s/stat", tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 99;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');   /* the name may hold spaces */
    int field = 2, nice = 99;
    for (; p && *p; p++)
        if (*p == ' ' && ++field == 19) {
            nice = atoi(p + 1);
            break;
        }
    return nice;
}

/* How many "hbt-prefault" tasks, and the nice value of the last one seen. */
static int prefaulters(int *nice)
{
    int n = 0;
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], comm[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fgets(comm, sizeof comm, f) && strncmp(comm, "hbt-prefault", 12) == 0) {
            n++;
            *nice = nice_of(e->d_name);
        }
        fclose(f);
    }
    closedir(d);
    return n;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    long spinners = atol(argv[1]), grows = atol(argv[2]);
    if (spinners < 1 || spinners > 64 || grows < 1)
        return 2;
    pthread_t t[64];
    for (long i = 0; i < spinners; i++)
        if (pthread_create(&t[i], NULL, spinner, NULL) != 0)
            return 1;
    usleep(100000);   /* the spinners are beating, the pre-faulter started */
    double longest = 0, over = 0;
    for (long g = 0; g < grows; g++) {
        double t0 = now_ms();
        if (sbrk(64 * 1024) == (void *)-1)
            return 1;
        double d = now_ms() - t0;
        if (d > longest)
            longest = d;
        if (d > 5)
            over += d;
        usleep(5000);
    }
    int pf_nice = 99;
    int pf = prefaulters(&pf_nice);
    char self[32];
    snprintf(self, sizeof self, "%ld", (long)getpid());
    done = 1;
    for (long i = 0; i < spinners; i++)
        pthread_join(t[i], NULL);
    printf("grows %ld longest_ms %.3f total_over_5ms_ms %.3f prefault %d nice_diff %d\n", grows,
           longest, over, pf, pf ? pf_nice - nice_of(self) : 0);
    return 0;
}
