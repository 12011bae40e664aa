/*
 * omp_batches.c -- a static loop of equal batches of work, one beat of the
 * program's own at the top of each (hbtool's heartbeat API), as NPB EP's
 * source beats: each batch burns MS milliseconds of the thread's CPU time.
 * Run with more threads than CPUs, each batch takes longer in wall time than
 * in CPU time, and how much longer depends on how the machine shares its CPUs
 * (tests/test_blame.py).
 *
 * Built with -DTLS_MIB=N, each thread also has N MiB of `omp threadprivate`
 * data (as NPB EP's 1 MiB array), which glibc places in every thread's
 * static TLS, carved out of its stack, written in a parallel region before
 * the loop (tests/test_monitor.py).
 *
 *   omp_batches BATCHES MS
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "hbtrace.h"
#include "cpu_work.h"

#ifdef TLS_MIB
static double scratch[TLS_MIB * 131072];
#pragma omp threadprivate(scratch)
#endif

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 240;
    double ms = argc > 2 ? atof(argv[2]) : 12.0;
    double total = 0;
#ifdef TLS_MIB
    /* each thread's data first, in a region of its own (as NPB EP): its
     * threads have met at a barrier before the loop */
#pragma omp parallel
    for (size_t k = 0; k < sizeof scratch / sizeof *scratch; k += 512)
        scratch[k] = (double)k;
#endif
#pragma omp parallel for schedule(static) reduction(+ : total)
    for (long i = 0; i < n; i++) {
        hbt_beat_ex(omp_get_thread_num(), 1, (int)i);
        total += work(ms);
#ifdef TLS_MIB
        scratch[(size_t)i % (sizeof scratch / sizeof *scratch)] += 1.0;
        total += scratch[0] * 0.0;
#endif
    }
    printf("done %.0f\n", total > 0 ? 1.0 : 0.0);
    return 0;
}
