/*
 * omp_lock_queue.c -- a team that shares its work out by hand under an OpenMP lock, as
 * MUSCLE 5 does (tests/test_lock_beats.py): one parallel region whose threads each take
 * the next item of a shared counter under a lock, work on it, and add their result to a
 * shared sum under the lock again; one item in ten also takes a nest lock twice (the second
 * time as its owner already).
 *
 *   omp_lock_queue ITEMS US
 *
 * Each item is US microseconds of CPU work. Prints, per thread, "locks T N NEST" (the
 * omp_set_lock and omp_set_nest_lock calls it made), then "sum S" and exits 0.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "cpu_work.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: omp_lock_queue ITEMS US\n");
        return 2;
    }
    int items = atoi(argv[1]);
    double ms = atof(argv[2]) / 1e3;
    omp_lock_t lock;
    omp_nest_lock_t nest;
    omp_init_lock(&lock);
    omp_init_nest_lock(&nest);
    int next = 0;
    double sum = 0;
    int locks[64] = { 0 }, nests[64] = { 0 };
#pragma omp parallel
    {
        int me = omp_get_thread_num() & 63;
        for (;;) {
            omp_set_lock(&lock);
            locks[me]++;
            int item = next < items ? next++ : -1;
            omp_unset_lock(&lock);
            if (item < 0)
                break;
            double r = work(ms);
            omp_set_lock(&lock);
            locks[me]++;
            sum += r;
            omp_unset_lock(&lock);
            if (item % 10 == 0) {
                omp_set_nest_lock(&nest);
                omp_set_nest_lock(&nest);
                nests[me] += 2;
                omp_unset_nest_lock(&nest);
                omp_unset_nest_lock(&nest);
            }
        }
    }
    omp_destroy_lock(&lock);
    omp_destroy_nest_lock(&nest);
    for (int t = 0; t < 64; t++)
        if (locks[t] || nests[t])
            printf("locks %d %d %d\n", t, locks[t], nests[t]);
    printf("sum %s\n", sum < 0 ? "negative" : "ok");
    return 0;
}
