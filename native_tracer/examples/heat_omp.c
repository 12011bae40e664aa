/*
 * heat_omp -- a plain OpenMP program that knows nothing of hbtool: explicit heat
 * diffusion on an N x N plate, each step a dynamically scheduled loop over the rows
 * and a statically scheduled copy. No heartbeat call anywhere: under
 * `hbtool record` the tracer's OpenMP wrappers give it beats (one per chunk of rows,
 * one per finished copy loop) and the time each thread waited at the barriers.
 *
 *   heat_omp [--threads N] [--size N] [--steps S] [--chunk C]
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long arg(int argc, char **argv, const char *name, long dflt)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0) {
            char *end;
            long v = strtol(argv[i + 1], &end, 10);
            if (*end || v <= 0) {
                fprintf(stderr, "heat_omp: %s needs a positive number, not '%s'\n", name, argv[i + 1]);
                exit(2);
            }
            return v;
        }
    return dflt;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i += 2)
        if (strcmp(argv[i], "--threads") && strcmp(argv[i], "--size") && strcmp(argv[i], "--steps") &&
            strcmp(argv[i], "--chunk")) {
            fprintf(stderr, "usage: heat_omp [--threads N] [--size N] [--steps S] [--chunk C]\n");
            return 2;
        }
    int threads = (int)arg(argc, argv, "--threads", 4);
    long n = arg(argc, argv, "--size", 512), steps = arg(argc, argv, "--steps", 100);
    int chunk = (int)arg(argc, argv, "--chunk", 8);
    double *u = calloc((size_t)(n * n), sizeof *u), *v = calloc((size_t)(n * n), sizeof *v);
    if (!u || !v) {
        fprintf(stderr, "heat_omp: out of memory\n");
        return 1;
    }
    for (long j = 0; j < n; j++)
        u[j] = v[j] = 100.0;   /* a hot edge */
    omp_set_num_threads(threads);
    for (long s = 0; s < steps; s++) {
#pragma omp parallel
        {
#pragma omp for schedule(dynamic, chunk)
            for (long i = 1; i < n - 1; i++)
                for (long j = 1; j < n - 1; j++)
                    v[i * n + j] = u[i * n + j] + 0.2 * (u[(i - 1) * n + j] + u[(i + 1) * n + j] +
                                                         u[i * n + j - 1] + u[i * n + j + 1] - 4 * u[i * n + j]);
#pragma omp for schedule(static)
            for (long i = 1; i < n - 1; i++)
                memcpy(&u[i * n + 1], &v[i * n + 1], (size_t)(n - 2) * sizeof *u);
        }
    }
    double total = 0;
    for (long k = 0; k < n * n; k++)
        total += u[k];
    printf("heat_omp: %ld steps on %ld x %ld, %d threads, heat %.6e\n", steps, n, n, threads, total);
    free(u);
    free(v);
    return 0;
}
