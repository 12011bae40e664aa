/*
 * omp_guided_rows.c -- an image filter's shape (GraphicsMagick's): a few passes, each a
 * parallel region whose one loop over the rows is scheduled guided, so that its first chunk
 * holds half the rows (with 2 threads) and its last one row, and the team makes few beats.
 * No heartbeat call: the tracer's automatic beats (tests/test_blame.py).
 *
 *   omp_guided_rows PASSES ROWS US SHAPE [TAIL_MS]
 *
 * A row costs US microseconds of CPU time (SHAPE flat), or US times its row number over
 * the rows' mean (SHAPE rising: a triangular loop, the first rows cheap, the last dear: a
 * guided loop's first chunk is then a third of the mean cost per row), or US in the first
 * half of the passes and a quarter of it in the others (SHAPE halves: one loop that two
 * filters call, a blur and then a sharpening, at different costs). TAIL_MS: then that much
 * serial work (GraphicsMagick's last filters and its PNG encoding: most of its run, and its
 * chunks all in the first quarter). Prints "done".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_work.h"

int main(int argc, char **argv)
{
    if ((argc != 5 && argc != 6) || (strcmp(argv[4], "flat") && strcmp(argv[4], "rising") && strcmp(argv[4], "halves"))) {
        fprintf(stderr, "usage: omp_guided_rows PASSES ROWS US flat|rising|halves [TAIL_MS]\n");
        return 2;
    }
    int passes = atoi(argv[1]), rows = atoi(argv[2]);
    double us = atof(argv[3]), sum = 0;
    int rising = strcmp(argv[4], "rising") == 0, halves = strcmp(argv[4], "halves") == 0;
    for (int p = 0; p < passes; p++) {
        double row_us = halves && 2 * p >= passes ? us / 4 : us;
#pragma omp parallel reduction(+ : sum)
        {
#pragma omp for schedule(guided)
            for (int r = 0; r < rows; r++)
                sum += work((rising ? row_us * 2.0 * (r + 0.5) / rows : row_us) / 1000.0);
        }
    }
    if (argc == 6)
        sum += work(atof(argv[5]));
    printf("done%s\n", sum < 0 ? "!" : "");
    return 0;
}
