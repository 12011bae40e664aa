/*
 * omp_sections.c -- sections of different lengths, each taken by whichever thread asks
 * first, as FastTree's are (tests/test_blame.py).
 *
 *   omp_sections ROUNDS MS
 *
 * Each round runs `#pragma omp parallel sections` of three sections of 4, 1 and 2 times
 * MS milliseconds of CPU work, then a `#pragma omp parallel` region with a `#pragma omp
 * sections` of two sections of 3 and 1 times MS. At the end it prints, per round, which
 * thread ran each section ("took CONSTRUCT ROUND SECTION THREAD", construct 0 or 1,
 * sections from 1, thread -1 for a section nobody ran), then "done", and exits 0.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "cpu_work.h"

/* Section s (from 1) of a construct: note the thread that runs it, then its work. */
static double ran(signed char *who, int s, double ms)
{
    who[s - 1] = (signed char)omp_get_thread_num();
    return work(ms);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: omp_sections ROUNDS MS\n");
        return 2;
    }
    int rounds = atoi(argv[1]);
    double ms = atof(argv[2]);
    if (rounds < 1 || !(ms > 0)) {
        fprintf(stderr, "omp_sections: ROUNDS must be a positive count and MS a positive time\n");
        return 2;
    }
    signed char (*by)[2][3] = calloc((size_t)rounds, sizeof *by);
    if (!by)
        return 1;
    for (int r = 0; r < rounds; r++)   /* -1: a section nobody ran (a stopped thread skipped it) */
        for (int c = 0; c < 2; c++)
            for (int s = 0; s < 3; s++)
                by[r][c][s] = -1;
    double sum = 0;
    for (int r = 0; r < rounds; r++) {
#pragma omp parallel sections reduction(+ : sum)
        {
#pragma omp section
            sum += ran(by[r][0], 1, 4 * ms);
#pragma omp section
            sum += ran(by[r][0], 2, ms);
#pragma omp section
            sum += ran(by[r][0], 3, 2 * ms);
        }
#pragma omp parallel reduction(+ : sum)
        {
#pragma omp sections
            {
#pragma omp section
                sum += ran(by[r][1], 1, 3 * ms);
#pragma omp section
                sum += ran(by[r][1], 2, ms);
            }
        }
    }
    for (int r = 0; r < rounds; r++)
        for (int c = 0; c < 2; c++)
            for (int s = 0; s < (c ? 2 : 3); s++)
                printf("took %d %d %d %d\n", c, r, s + 1, by[r][c][s]);
    printf("done%s\n", sum < 0 ? "!" : "");
    free(by);
    return 0;
}
