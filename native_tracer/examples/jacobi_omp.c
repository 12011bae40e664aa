/*
 * jacobi_omp -- OpenMP Jacobi relaxation, instrumented with the seed paper's
 * legacy OpenMP heartbeat API (L_Heartbeat_OpenMP_*).
 *
 * Every OpenMP thread relaxes its own private N x N Poisson problem
 * (-laplace u = f on the unit square, u fixed on the boundary), so threads
 * never synchronise between beats: an anomaly injected into one thread
 * changes only that thread's heartbeats. One beat per --work sweeps.
 *
 * Built twice: jacobi_omp (traced) and jacobi_omp_nohb (-DHBT_NO_HEARTBEAT:
 * every heartbeat call compiles away, the baseline for overhead).
 */
#include "common.h"

#include <math.h>
#include <string.h>

#include <omp.h>

#ifdef HBT_NO_HEARTBEAT
#define PROGRAM_NAME "jacobi_omp_nohb"
#else
#define PROGRAM_NAME "jacobi_omp"
#endif

static const struct hb_program program = {
    .name = PROGRAM_NAME,
    .summary = "Jacobi relaxation of a private N x N Poisson problem per OpenMP thread,\n"
               "one heartbeat (L_Heartbeat_OpenMP_Generate) per --work sweeps.",
    .work_help = "Jacobi sweeps per beat (alias --sweeps-per-beat)",
    .work_alias = "--sweeps-per-beat",
    .work_default = 6,
    .size_help = "side N of each thread's N x N grid",
    .size_default = 256,
    .size_min = 3,
    .openmp = 1,
};

/* One thread's grid: two N*N arrays (current and next iterate) and the
 * separable source term h^2 f(x,y) = fy[i] * fx[j]. */
struct block {
    double *u, *v, *fx, *fy;
};

static void block_init(struct block *bk, long n, int tid)
{
    size_t cells = (size_t)n * (size_t)n;
    bk->u = ex_xmalloc(cells * sizeof(double));
    bk->v = ex_xmalloc(cells * sizeof(double));
    bk->fx = ex_xmalloc((size_t)n * sizeof(double));
    bk->fy = ex_xmalloc((size_t)n * sizeof(double));
    uint64_t rng = hb_rand_stream(2, (uint64_t)tid);
    double h = 1.0 / (double)(n - 1);
    double top = 1.0 + ex_rand_double(&rng);          /* boundary value of this thread */
    double amp = 0.5 + ex_rand_double(&rng);          /* amplitude of the source */
    for (long i = 0; i < n; i++) {
        bk->fx[i] = h * h * amp * sin(3.0 * (double)i * h + 1.0);
        bk->fy[i] = cos(2.0 * (double)i * h);
        for (long j = 0; j < n; j++) {
            size_t k = (size_t)i * (size_t)n + (size_t)j;
            bk->u[k] = i == 0 ? top : 0.0;        /* u = top on the upper edge, 0 elsewhere */
            bk->v[k] = bk->u[k];
        }
    }
}

/* One Jacobi sweep: v = average of u's four neighbours (+ source), interior only. */
static void sweep(const double *restrict u, double *restrict v,
                  const double *restrict fx, const double *restrict fy, long n)
{
    for (long i = 1; i < n - 1; i++) {
        const double *up = u + (i - 1) * n, *mid = u + i * n, *dn = u + (i + 1) * n;
        double *out = v + i * n;
        double fi = fy[i];
        for (long j = 1; j < n - 1; j++)
            out[j] = 0.25 * (up[j] + dn[j] + mid[j - 1] + mid[j + 1] + fi * fx[j]);
    }
}

int main(int argc, char **argv)
{
    struct hb_opts *o = hb_setup(argc, argv, &program);
    long n = o->size;
    struct block *blocks = ex_xmalloc(sizeof *blocks * (size_t)o->threads);
    memset(blocks, 0, sizeof *blocks * (size_t)o->threads);
    int team_error = 0;

    omp_set_dynamic(0);
    L_Heartbeat_OpenMP_Init();

    #pragma omp parallel num_threads(o->threads)
    {
        int tid = omp_get_thread_num();
        if (omp_get_num_threads() != o->threads) {
            #pragma omp atomic write
            team_error = 1;
        } else {
            struct block *bk = &blocks[tid];
            block_init(bk, n, tid);             /* first touch by the owning thread */
            struct hb_thread ts;
            hb_thread_init(&ts, tid);
            for (int iter = 0; iter < o->beats; iter++) {
                hb_work_begin(&ts);
                for (long s = 0; s < o->work; s++) {
                    sweep(bk->u, bk->v, bk->fx, bk->fy, n);
                    double *t = bk->u; bk->u = bk->v; bk->v = t;
                }
                hb_work_end(&ts);
                L_Heartbeat_OpenMP_Generate(omp_get_thread_num(), 1, iter);
                /* earlyexit and shutdown/thread both leave the loop: a thread
                 * must not pthread_exit inside an OpenMP region. */
                if (hb_after_beat(&ts, iter) != HB_CONTINUE)
                    break;
            }
        }
    }

    Heartbeat_OpenMP_Finished();
    if (team_error) {
        fprintf(stderr, "%s: OpenMP gave fewer than %d threads\n", program.name, o->threads);
        return HB_EXIT_RUNTIME;
    }

    /* Checksum: sum of every thread's current solution. */
    double checksum = 0.0;
    for (int t = 0; t < o->threads; t++)
        for (long k = 0; k < n * n; k++)
            checksum += blocks[t].u[k];
    printf("%s checksum %.12e elapsed_s %.3f\n", program.name, checksum, hb_elapsed_s());
    hb_finish_run();
    return HB_EXIT_OK;
}
