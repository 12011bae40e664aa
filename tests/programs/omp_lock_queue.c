/*
 * omp_lock_queue.c -- a team that shares its work out by hand under an OpenMP lock, as
 * MUSCLE 5 does (tests/test_lock_beats.py): one parallel region whose threads each take
 * the next item of a shared counter under a lock, work on it, and add their result to a
 * shared sum under the lock again; one item in five also takes a nest lock twice (the second
 * time as its owner already).
 *
 *   omp_lock_queue queue|dealt ITEMS US [ITEMS2 US2]
 *
 * Each item is US microseconds of CPU work. `dealt`: thread t takes items t, t + T, t + 2T...
 * (T threads), still asking for the lock each time, so that every thread makes as many
 * beats as its teammates, as MUSCLE's do; `queue`: whichever thread asks first gets the next. With ITEMS2, a second region then shares out
 * ITEMS2 items of US2 microseconds the same way, from another call site: a light phase
 * after the heavy one, as MUSCLE's (its alignments, then a pass of a few microseconds a
 * pair). Prints, per thread, "locks T N NEST" (the omp_set_lock and omp_set_nest_lock calls
 * it made in the parallel regions; the master takes the lock once before them too), then
 * "sum ok" and exits 0.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "cpu_work.h"

static omp_lock_t lock;
static omp_nest_lock_t nest;
static int next, dealt;
static double sum;
static int locks[64], nests[64];

/* One phase: ITEMS items of MS milliseconds shared out under the lock; with NEST, items 0, 1,
 * 10, 11... (every thread's, dealt) also take the nest lock twice. A macro, so that each
 * phase has call sites of its own, as MUSCLE's two phases have. */
#define SHARE_OUT(ITEMS, MS, NEST)                                                         \
    do {                                                                                   \
        next = 0;                                                                          \
        _Pragma("omp parallel")                                                            \
        {                                                                                  \
            int me = omp_get_thread_num() & 63, mine = omp_get_thread_num();               \
            for (;;) {                                                                     \
                omp_set_lock(&lock);                                                       \
                locks[me]++;                                                               \
                int item = dealt ? (mine < (ITEMS) ? mine : -1) : next < (ITEMS) ? next++ : -1; \
                mine += omp_get_num_threads();                                             \
                omp_unset_lock(&lock);                                                     \
                if (item < 0)                                                              \
                    break;                                                                 \
                double r = work(MS);                                                       \
                omp_set_lock(&lock);                                                       \
                locks[me]++;                                                               \
                sum += r;                                                                  \
                omp_unset_lock(&lock);                                                     \
                if ((NEST) && item / 2 % 5 == 0) {                                         \
                    omp_set_nest_lock(&nest);                                              \
                    omp_set_nest_lock(&nest);                                              \
                    nests[me] += 2;                                                        \
                    omp_unset_nest_lock(&nest);                                            \
                    omp_unset_nest_lock(&nest);                                            \
                }                                                                          \
            }                                                                              \
        }                                                                                  \
    } while (0)

int main(int argc, char **argv)
{
    if (argc != 4 && argc != 6) {
        fprintf(stderr, "usage: omp_lock_queue queue|dealt ITEMS US [ITEMS2 US2]\n");
        return 2;
    }
    dealt = argv[1][0] == 'd';
    int items = atoi(argv[2]), items2 = argc == 6 ? atoi(argv[4]) : 0;
    double ms = atof(argv[3]) / 1e3, ms2 = argc == 6 ? atof(argv[5]) / 1e3 : 0;
    omp_init_lock(&lock);
    omp_init_nest_lock(&nest);
    omp_set_lock(&lock);   /* in the serial part: no team, no beat */
    omp_unset_lock(&lock);
    SHARE_OUT(items, ms, 1);
    if (items2 > 0)
        SHARE_OUT(items2, ms2, 0);
    omp_destroy_lock(&lock);
    omp_destroy_nest_lock(&nest);
    for (int t = 0; t < 64; t++)
        if (locks[t] || nests[t])
            printf("locks %d %d %d\n", t, locks[t], nests[t]);
    printf("sum %s\n", sum < 0 ? "negative" : "ok");
    return 0;
}
