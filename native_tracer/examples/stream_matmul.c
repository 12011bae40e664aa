/*
 * stream_matmul -- dense C = A x B (N x N doubles) as a stream pipeline
 * through instrumented queues (hbtrace_queue.h):
 *
 *   reader --"reader->dot<k>"--> dot<k> --"dot<k>->reduce"--> reduce
 *
 * The reader streams the index pairs (i, j) of C, 8-byte items, round robin
 * to --workers dot-product stages; dot<k> computes row i of A times column j
 * of B (B is kept transposed, so both are contiguous) and sends (i, j,
 * value), 16-byte items, to the reduce stage through its own queue; reduce
 * takes them round robin (the order the reader dealt them) and stores them
 * into C. The reader repeats the whole product until --duration seconds
 * have passed (or --reps times). C is checked entry by entry against a
 * serial product computed with the same kernel (bit-identical).
 *
 * --solo dot|reduce measures one kernel's service rate alone, the seed's
 * ground truth: the kernel runs on resident in-memory inputs (every pair of
 * one product; for reduce, every result) with its output into a resident
 * sink that never blocks, without queue operations, for --solo-time
 * seconds; items/s is printed and written into the truth file.
 */
#include "stream_common.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

struct pair { uint32_t i, j; };                  /* reader -> dot */
struct dres { uint32_t i, j; double v; };        /* dot -> reduce */

enum { SOLO_NONE, SOLO_DOT, SOLO_REDUCE };
static const char *const solo_names[] = { "none", "dot", "reduce" };

static struct mm {
    long n, workers, capacity, reps;
    double duration, solo_time;
    int solo;
    uint64_t seed;
    const char *truth;

    double *A, *BT, *C;
    hbt_queue_t **in, **out;
    char (*in_name)[32], (*out_name)[32], (*dot_name)[32];
    uint64_t items, reduced, reps_done;
    uint64_t start_ns, end_ns;
} mm = {
    .n = 256, .workers = 2, .capacity = 256, .reps = 0, .duration = 2.0,
    .solo_time = 1.0, .solo = SOLO_NONE, .seed = 1, .truth = NULL,
};

/* ---------------------------------------------------------------- kernels */

/* one copy of the code for the pipeline, --solo and the check: bit-identical */
__attribute__((noinline)) static double dot_kernel(const double *a, const double *b, long n)
{
    double s = 0.0;
    for (long k = 0; k < n; k++)
        s += a[k] * b[k];
    return s;
}

static inline void dot_item(const struct pair *p, struct dres *r)
{
    r->i = p->i;
    r->j = p->j;
    r->v = dot_kernel(mm.A + (size_t)p->i * (size_t)mm.n, mm.BT + (size_t)p->j * (size_t)mm.n, mm.n);
}

static inline void reduce_item(const struct dres *r)
{
    mm.C[(size_t)r->i * (size_t)mm.n + r->j] = r->v;
}

/* ----------------------------------------------------------------- stages */

static void *reader_main(void *unused)
{
    (void)unused;
    long n = mm.n, K = mm.workers;
    uint64_t t_end = mm.start_ns + (uint64_t)(mm.duration * 1e9), idx = 0, rep = 0;
    for (;; rep++) {
        if (mm.reps > 0 ? rep >= (uint64_t)mm.reps : rep > 0 && ex_now_ns() >= t_end)
            break;
        for (long i = 0; i < n; i++)
            for (long j = 0; j < n; j++, idx++) {
                struct pair p = { (uint32_t)i, (uint32_t)j };
                hbt_queue_push(mm.in[idx % (uint64_t)K], &p);
            }
    }
    mm.items = idx;
    mm.reps_done = rep;
    for (long k = 0; k < K; k++)
        hbt_queue_close(mm.in[k]);
    return NULL;
}

static void *dot_main(void *arg)
{
    long k = (long)(intptr_t)arg;
    struct pair p;
    struct dres r;
    while (hbt_queue_pop(mm.in[k], &p) == 1) {
        dot_item(&p, &r);
        hbt_queue_push(mm.out[k], &r);
    }
    hbt_queue_close(mm.out[k]);
    return NULL;
}

static void *reduce_main(void *unused)
{
    (void)unused;
    uint64_t K = (uint64_t)mm.workers, idx = 0;
    struct dres r;
    while (hbt_queue_pop(mm.out[idx % K], &r) == 1) {
        reduce_item(&r);
        idx++;
    }
    mm.reduced = idx;
    mm.end_ns = ex_now_ns();
    return NULL;
}

/* ------------------------------------------------------------------- solo */

static volatile double solo_seen;   /* the solo outputs are used: nothing is optimised away */

static void solo_run(struct sc_solo *s)
{
    size_t np = (size_t)mm.n * (size_t)mm.n;
    struct pair *pairs = ex_xmalloc(np * sizeof *pairs);
    struct dres *res = ex_xmalloc(np * sizeof *res);
    struct dres *sink = ex_xmalloc(1024 * sizeof *sink);
    for (size_t x = 0; x < np; x++) {
        pairs[x].i = (uint32_t)(x / (size_t)mm.n);
        pairs[x].j = (uint32_t)(x % (size_t)mm.n);
    }
    if (mm.solo == SOLO_REDUCE)
        for (size_t x = 0; x < np; x++)
            dot_item(&pairs[x], &res[x]);
    uint64_t t0 = ex_now_ns(), limit = (uint64_t)(mm.solo_time * 1e9), items = 0, now;
    size_t x = 0;
    double acc = 0.0;
    do {
        for (int b = 0; b < 256; b++, items++) {
            if (mm.solo == SOLO_DOT) {
                dot_item(&pairs[x], &sink[items & 1023]);
                acc += sink[items & 1023].v;
            } else {
                reduce_item(&res[x]);
            }
            if (++x == np)
                x = 0;
        }
        now = ex_now_ns();
    } while (now - t0 < limit);
    solo_seen = acc + mm.C[0];
    s->kernel = solo_names[mm.solo];
    s->items = items;
    s->seconds = (double)(now - t0) * 1e-9;
    s->in_item_size = mm.solo == SOLO_DOT ? sizeof(struct pair) : sizeof(struct dres);
    s->out_item_size = mm.solo == SOLO_DOT ? sizeof(struct dres) : 0;
    free(pairs);
    free(res);
    free(sink);
}

/* ------------------------------------------------------------------- main */

int main(int argc, char **argv)
{
    ex_prog = "stream_matmul";
    struct sc_opt opts[] = {
        SC_NUM("--size", SC_LONG, &mm.n, 1, 4096, "N", "order of the matrices (default 256)"),
        SC_NUM("--workers", SC_LONG, &mm.workers, 1, 64, "K", "dot-product stages (default 2)"),
        SC_NUM("--duration", SC_DOUBLE, &mm.duration, 0.0, 86400, "S",
               "repeat the product until S seconds have passed (default 2)"),
        SC_NUM("--reps", SC_LONG, &mm.reps, 1, 1e9, "R", "instead: compute the product R times"),
        SC_NUM("--capacity", SC_LONG, &mm.capacity, 1, 1 << 24, "C",
               "capacity of every queue, items (default 256)"),
        SC_PICK("--solo", &mm.solo, solo_names, 3, "dot|reduce",
                "measure that kernel's service rate alone, no pipeline (default none)"),
        SC_NUM("--solo-time", SC_DOUBLE, &mm.solo_time, 0.01, 3600, "S",
               "seconds a --solo measurement runs (default 1)"),
        SC_NUM("--seed", SC_U64, &mm.seed, 0, 0, "S", "seed of the matrix entries (default 1)"),
        SC_NUM("--truth", SC_STR, &mm.truth, 0, 0, "FILE", "write the ground truth as JSON to FILE"),
    };
    int nopt = (int)(sizeof opts / sizeof opts[0]);
    sc_parse(argc, argv,
             "C = A x B streamed: reader -> K dot-product stages -> reduce, through\n"
             "instrumented queues; or one kernel's service rate alone (--solo).",
             opts, nopt);
    if (sc_given(opts, nopt, "--reps") && sc_given(opts, nopt, "--duration"))
        ex_die(SC_EXIT_USAGE, "give --duration or --reps, not both");
    sc_truth_running(mm.truth, mm.seed, opts, nopt);

    size_t n = (size_t)mm.n, K = (size_t)mm.workers;
    mm.A = ex_xmalloc(n * n * sizeof(double));
    mm.BT = ex_xmalloc(n * n * sizeof(double));
    mm.C = ex_xmalloc(n * n * sizeof(double));
    uint64_t rng = sc_rand_stream(mm.seed, 2);
    for (size_t x = 0; x < n * n; x++)
        mm.A[x] = 2.0 * ex_rand_double(&rng) - 1.0;
    for (size_t x = 0; x < n * n; x++)
        mm.BT[x] = 2.0 * ex_rand_double(&rng) - 1.0;   /* BT[j][k] = B[k][j] */
    memset(mm.C, 0, n * n * sizeof(double));

    struct sc_solo solo = { 0 };
    int verified = 1;
    double checksum = 0.0;
    if (mm.solo != SOLO_NONE) {
        solo_run(&solo);
        sc_print_solo(&solo);
    } else {
        mm.in = ex_xmalloc(K * sizeof *mm.in);
        mm.out = ex_xmalloc(K * sizeof *mm.out);
        mm.in_name = ex_xmalloc(K * sizeof *mm.in_name);
        mm.out_name = ex_xmalloc(K * sizeof *mm.out_name);
        mm.dot_name = ex_xmalloc(K * sizeof *mm.dot_name);
        for (size_t k = 0; k < K; k++) {
            unsigned w = (unsigned)k;   /* below 64 */
            snprintf(mm.dot_name[k], sizeof mm.dot_name[k], "dot%u", w);
            snprintf(mm.in_name[k], sizeof mm.in_name[k], "reader->dot%u", w);
            snprintf(mm.out_name[k], sizeof mm.out_name[k], "dot%u->reduce", w);
            mm.in[k] = sc_queue(mm.in_name[k], sizeof(struct pair), (size_t)mm.capacity);
            mm.out[k] = sc_queue(mm.out_name[k], sizeof(struct dres), (size_t)mm.capacity);
        }
        pthread_t rt, ut, *dt = ex_xmalloc(K * sizeof *dt);
        mm.start_ns = ex_now_ns();
        ex_thread(&ut, reduce_main, NULL);
        for (size_t k = 0; k < K; k++)
            ex_thread(&dt[k], dot_main, (void *)(intptr_t)k);
        ex_thread(&rt, reader_main, NULL);
        pthread_join(rt, NULL);
        for (size_t k = 0; k < K; k++)
            pthread_join(dt[k], NULL);
        pthread_join(ut, NULL);
        free(dt);

        /* every entry against the serial product with the same kernel */
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++) {
                double v = dot_kernel(mm.A + i * n, mm.BT + j * n, mm.n);
                if (mm.items > 0 && mm.C[i * n + j] != v)
                    verified = 0;
                checksum += mm.C[i * n + j];
            }
        if (mm.reduced != mm.items)
            verified = 0;
    }

    char *tmp;
    uint64_t t0;
    FILE *f = sc_truth_begin(mm.truth, mm.seed, &tmp, &t0);
    if (f) {
        fprintf(f, ", \"size\": %ld, \"workers\": %ld, \"items\": %" PRIu64 ", \"reduced\": %" PRIu64
                   ", \"reps\": %" PRIu64 ", ", mm.n, mm.workers, mm.items, mm.reduced, mm.reps_done);
        if (mm.solo == SOLO_NONE) {
            sc_json_time(f, "start", mm.start_ns, t0);
            fputs(", ", f);
            sc_json_time(f, "end", mm.end_ns, t0);
            fprintf(f, ", \"checksum\": %.17g, \"verified\": %s", checksum,
                    verified ? "true" : "false");
        } else {
            fputs("\"checksum\": null, \"verified\": null", f);
        }
        fputs(", \"queues\": [", f);
        for (size_t k = 0; mm.solo == SOLO_NONE && k < K; k++) {
            fputs(k ? ", " : "", f);
            sc_json_queue(f, mm.in_name[k], mm.in[k], "reader", mm.dot_name[k]);
            fputs(", ", f);
            sc_json_queue(f, mm.out_name[k], mm.out[k], mm.dot_name[k], "reduce");
        }
        fputs("], ", f);
        sc_json_solo(f, mm.solo == SOLO_NONE ? NULL : &solo);
        fputs(", ", f);
        sc_json_params(f, opts, nopt);
        fputs("}\n", f);
    }
    for (size_t k = 0; mm.solo == SOLO_NONE && k < K; k++) {
        hbt_queue_destroy(mm.in[k]);
        hbt_queue_destroy(mm.out[k]);
    }
    sc_truth_commit(f, mm.truth, tmp);

    if (mm.solo == SOLO_NONE) {
        printf("%s checksum %.17g items %" PRIu64 " reps %" PRIu64 " elapsed_s %.3f\n", ex_prog,
               checksum, mm.items, mm.reps_done, (double)(mm.end_ns - mm.start_ns) * 1e-9);
        if (!verified) {
            fprintf(stderr, "%s: C differs from the serial product (%" PRIu64 " of %" PRIu64
                            " items reduced)\n", ex_prog, mm.reduced, mm.items);
            return SC_EXIT_RUNTIME;
        }
    }
    return SC_EXIT_OK;
}
