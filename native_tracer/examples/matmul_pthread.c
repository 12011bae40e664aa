/*
 * matmul_pthread -- dense C = A x B with POSIX threads, instrumented with
 * the modern hbtrace API (hbt_init, hbt_set_thread, hbt_beat, hbt_finish).
 *
 * B is one shared N x N matrix (read only). Each thread owns a block of
 * ROWS rows of A and C and computes them over and over, --work rows of C
 * per beat (row by row, cycling through its block), so a run of any length
 * keeps its data in cache and threads never share written data.
 */
#include "common.h"

#include <stdlib.h>
#include <string.h>

#define ROWS 64   /* rows of A and C owned by each thread */

static const struct hb_program program = {
    .name = "matmul_pthread",
    .summary = "C = A x B with A, C split into per-thread row blocks and a shared N x N B,\n"
               "one heartbeat (hbt_beat) per --work rows of C.",
    .work_help = "rows of C computed per beat",
    .work_default = 8,
    .size_help = "order N of B (rows of A and C have N columns)",
    .size_default = 256,
    .size_min = 1,
};

struct worker {
    pthread_t thread;
    int tid;
    const double *b;   /* shared N x N */
    double *a, *c;     /* ROWS x N, owned */
    double checksum;
    char pad[64];
};

/* c_row = a_row x B */
static void row_times_matrix(const double *restrict a, const double *restrict b,
                             double *restrict c, long n)
{
    for (long j = 0; j < n; j++)
        c[j] = 0.0;
    for (long k = 0; k < n; k++) {
        double ak = a[k];
        const double *brow = b + k * n;
        for (long j = 0; j < n; j++)
            c[j] += ak * brow[j];
    }
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    const struct hb_opts *o = &hb_run.o;
    long n = o->size;
    hbt_set_thread(w->tid);
    struct hb_thread ts;
    hb_thread_init(&ts, w->tid);

    /* first touch of the thread's own rows by the thread itself */
    size_t cells = (size_t)ROWS * (size_t)n;
    w->a = ex_xmalloc(cells * sizeof(double));
    w->c = ex_xmalloc(cells * sizeof(double));
    uint64_t rng = hb_rand_stream(3, (uint64_t)w->tid);
    for (size_t k = 0; k < cells; k++) {
        w->a[k] = ex_rand_double(&rng) - 0.5;
        w->c[k] = 0.0;
    }

    long row = 0;
    double diag = 0.0;
    for (int iter = 0; iter < o->beats; iter++) {
        hb_work_begin(&ts);
        for (long r = 0; r < o->work; r++) {
            row_times_matrix(w->a + row * n, w->b, w->c + row * n, n);
            diag += w->c[row * n + (row % n)];
            row = row + 1 == ROWS ? 0 : row + 1;
        }
        hb_work_end(&ts);
        hbt_beat(0);
        int act = hb_after_beat(&ts, iter);
        if (act != HB_CONTINUE) {
            w->checksum = diag;
            hb_stop(act);
            return NULL;
        }
    }
    w->checksum = diag;
    return NULL;
}

int main(int argc, char **argv)
{
    struct hb_opts *o = hb_setup(argc, argv, &program);
    long n = o->size;
    struct worker *ws = ex_xmalloc(sizeof *ws * (size_t)o->threads);
    double *b = ex_xmalloc((size_t)n * (size_t)n * sizeof(double));
    uint64_t rng = hb_rand_stream(4, 0);
    for (long k = 0; k < n * n; k++)
        b[k] = ex_rand_double(&rng) - 0.5;

    hbt_init("matmul");
    for (int t = 0; t < o->threads; t++) {
        ws[t] = (struct worker){ .tid = t, .b = b };
        ex_thread(&ws[t].thread, worker_main, &ws[t]);
    }
    for (int t = 0; t < o->threads; t++)
        pthread_join(ws[t].thread, NULL);
    hbt_finish();

    /* checksum: every row of C as it stands, plus the sampled diagonal sums */
    double checksum = 0.0;
    for (int t = 0; t < o->threads; t++) {
        checksum += ws[t].checksum;
        for (size_t k = 0; k < (size_t)ROWS * (size_t)n; k++)
            checksum += ws[t].c[k];
    }
    printf("%s checksum %.12e elapsed_s %.3f\n", program.name, checksum, hb_elapsed_s());
    hb_finish_run();
    return HB_EXIT_OK;
}
