/*
 * omp_regions.c -- many small OpenMP parallel regions, each thread beating and
 * waiting at each one, for tests of the readers on a thread of many beats and
 * waits (tests/test_hbt_stream.py, benchmarks/bench_big_trace.py --program
 * regions). Each thread does UNITS of work per region (default 2000); from
 * region N/2 on, thread 1 does four times as much: a shift in its own work.
 * With STATUS, it ends with exit(STATUS) after its regions, as a program that
 * stops on a failed check does (tests/test_blame.py), instead of returning
 * (STATUS "-": it returns). With TAIL, the master does TAIL units of serial work
 * after its last region first, as a program that writes its output does; with MID, as
 * many between region N/2 - 1 and region N/2 (a serial part in the middle of the run).
 *
 *   omp_regions N [UNITS [STATUS [TAIL [MID]]]]
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

static double work(long units)
{
    volatile double s = 0;
    for (long i = 0; i < units; i++)
        s += (double)i * 1e-9;
    return s;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000;
    long base = argc > 2 ? atol(argv[2]) : 2000;
    double total = 0;
    long mid = argc > 5 ? atol(argv[5]) : 0;
    for (long r = 0; r < n; r++) {
        if (r == n / 2 && mid)
            total += work(mid);
#pragma omp parallel reduction(+ : total)
        {
            long units = base;
            if (omp_get_thread_num() == 1 && r >= n / 2)
                units *= 4;
            total += work(units);
        }
    }
    if (argc > 4)
        total += work(atol(argv[4]));
    printf("%.3f\n", total);
    if (argc > 3 && argv[3][0] != '-') {
        fflush(stdout);
        exit(atoi(argv[3]));
    }
    return 0;
}
