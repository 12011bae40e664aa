/*
 * omp_guided_rows.c -- an image filter's shape (GraphicsMagick's): a few passes, each a
 * parallel region whose one loop over the rows is scheduled guided, so that its first chunk
 * holds half the rows (with 2 threads) and its last one row, and the team makes few beats.
 * No heartbeat call: the tracer's automatic beats (tests/test_blame.py).
 *
 *   omp_guided_rows PASSES ROWS US SHAPE
 *
 * A row costs US microseconds of CPU time (SHAPE flat), or US times its row number over
 * the rows' mean (SHAPE rising: a triangular loop, the first rows cheap, the last dear: a
 * guided loop's first chunk is then a third of the mean cost per row). Prints "done".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_work.h"

int main(int argc, char **argv)
{
    if (argc != 5 || (strcmp(argv[4], "flat") && strcmp(argv[4], "rising"))) {
        fprintf(stderr, "usage: omp_guided_rows PASSES ROWS US flat|rising\n");
        return 2;
    }
    int passes = atoi(argv[1]), rows = atoi(argv[2]);
    double us = atof(argv[3]), sum = 0;
    int rising = strcmp(argv[4], "rising") == 0;
    for (int p = 0; p < passes; p++) {
#pragma omp parallel reduction(+ : sum)
        {
#pragma omp for schedule(guided)
            for (int r = 0; r < rows; r++)
                sum += work((rising ? us * 2.0 * (r + 0.5) / rows : us) / 1000.0);
        }
    }
    printf("done%s\n", sum < 0 ? "!" : "");
    return 0;
}
