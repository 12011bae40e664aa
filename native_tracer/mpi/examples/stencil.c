/*
 * stencil -- a bulk-synchronous 1-D stencil (a smoothing sweep with a
 * seeded source term) on a periodic ring of ranks.
 *
 * One iteration:
 *   halo exchange with both neighbours: HALO bytes each way
 *       nonblocking (default): 2 x MPI_Irecv, 2 x MPI_Isend, MPI_Waitall
 *       --p2p blocking:        2 x MPI_Sendrecv
 *   W sweeps over the N local points (3 W in a heavy iteration)
 *   a checkpoint every C iterations (POSIX or MPI-IO, see common.h)
 *   MPI_Allreduce(SUM) of the local change, 1 double  <- ends the segment
 * At the end: MPI_Reduce(SUM) of the local sums to rank 0, which prints
 *   "stencil: ranks=P iterations=I time=T s checksum=C".
 * The checksum depends only on the options, not on timing or profiling.
 */
#include "common.h"

static const char usage_head[] =
    "usage: mpirun -np P stencil [options]\n"
    "A 1-D stencil on a ring of ranks: halo exchange, sweeps, optional checkpoint,\n"
    "MPI_Allreduce ending every iteration.\n"
    "  --n POINTS            local points per rank (4096)\n"
    "  --p2p nonblocking|blocking  Isend/Irecv/Waitall or Sendrecv (nonblocking)\n";

int main(int argc, char **argv)
{
    int rank, size;
    struct opts o;
    example_init(&argc, &argv, "stencil", 1, usage_head, &o, &rank, &size);

    const long n = o.n;
    const long hmax = o.halo / 8;
    double *u = malloc((size_t)(n + 2) * sizeof *u);
    double *v = malloc((size_t)(n + 2) * sizeof *v);
    double *f = malloc((size_t)n * sizeof *f);
    double *sl = malloc((size_t)hmax * sizeof *sl), *sr = malloc((size_t)hmax * sizeof *sr);
    double *gl = malloc((size_t)hmax * sizeof *gl), *gr = malloc((size_t)hmax * sizeof *gr);
    if (!u || !v || !f || !sl || !sr || !gl || !gr) {
        fprintf(stderr, "stencil: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (long i = 0; i < n; i++) {
        u[i + 1] = urand(o.seed, 0x75000000ull + (uint64_t)rank, (uint64_t)i);
        f[i] = 1e-3 * (urand(o.seed, 0x66000000ull + (uint64_t)rank, (uint64_t)i) - 0.5);
    }
    const int left = (rank + size - 1) % size, right = (rank + 1) % size;
    double t0 = now_s(), change = 0.0;

    for (long it = 0; it < o.iterations; it++) {
        maybe_die(&o, it, rank);
        long h = halo_of(&o, it) / 8;
        if (h > n)
            h = n;
        for (long k = 0; k < h; k++) {
            sl[k] = u[1 + k];
            sr[k] = u[n - h + 1 + k];
        }
        if (o.blocking) {
            MPI_Sendrecv(sl, (int)h, MPI_DOUBLE, left, 1, gr, (int)h, MPI_DOUBLE, right, 1,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Sendrecv(sr, (int)h, MPI_DOUBLE, right, 2, gl, (int)h, MPI_DOUBLE, left, 2,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Request rq[4];
            MPI_Irecv(gl, (int)h, MPI_DOUBLE, left, 2, MPI_COMM_WORLD, &rq[0]);
            MPI_Irecv(gr, (int)h, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, &rq[1]);
            MPI_Isend(sl, (int)h, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &rq[2]);
            MPI_Isend(sr, (int)h, MPI_DOUBLE, right, 2, MPI_COMM_WORLD, &rq[3]);
            MPI_Waitall(4, rq, MPI_STATUSES_IGNORE);
        }
        /* the ghost cells: the mean of what the neighbours sent */
        double a = 0, b = 0;
        for (long k = 0; k < h; k++) {
            a += gl[k];
            b += gr[k];
        }
        u[0] = a / (double)h;
        u[n + 1] = b / (double)h;

        long sweeps = sweeps_of(&o, it, rank);
        double local = 0.0;
        for (long s = 0; s < sweeps; s++) {
            v[0] = u[0];
            v[n + 1] = u[n + 1];
            for (long i = 1; i <= n; i++)
                v[i] = 0.999 * (0.25 * u[i - 1] + 0.5 * u[i] + 0.25 * u[i + 1]) + f[i - 1];
            double *t = u;
            u = v;
            v = t;
        }
        for (long i = 1; i <= n; i++)
            local += fabs(u[i] - v[i]);
        if (do_checkpoint(&o, it))
            checkpoint(&o, u + 1, n, rank);
        MPI_Allreduce(&local, &change, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }

    double sum = 0.0, total = 0.0;
    for (long i = 1; i <= n; i++)
        sum += u[i] * (double)((i % 7) + 1);
    MPI_Reduce(&sum, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    double t = now_s() - t0;
    if (rank == 0)
        printf("stencil: ranks=%d iterations=%ld time=%.3f s last_change=%.6e checksum=%.12e\n",
               size, o.iterations, t, change, total);
    free(u);
    free(v);
    free(f);
    free(sl);
    free(sr);
    free(gl);
    free(gr);
    MPI_Finalize();
    return 0;
}
