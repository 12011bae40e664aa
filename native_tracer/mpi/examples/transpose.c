/*
 * transpose -- a bulk-synchronous transpose-style program: every rank owns a
 * slab of P blocks of M = HALO/8 doubles; one iteration is
 *
 *   MPI_Bcast of one double (a step parameter) from rank 0     one-to-all
 *   W sweeps over the slab (3 W in a heavy iteration)
 *   MPI_Allreduce(SUM) of one double on a half-size communicator
 *       (ranks of equal parity; only with P > 1)                all-to-all,
 *                                                               not a boundary
 *   a checkpoint every C iterations (POSIX or MPI-IO, see common.h)
 *   MPI_Alltoall of the slab, block j to rank j                 <- ends the segment
 *   a local reordering of the received blocks
 *
 * At the end: MPI_Reduce(SUM) of the local sums to rank 0, which prints
 *   "transpose: ranks=P iterations=I time=T s checksum=C".
 */
#include "common.h"

static const char usage_head[] =
    "usage: mpirun -np P transpose [options]\n"
    "Transpose-style iterations: Bcast, sweeps, a sub-communicator Allreduce,\n"
    "optional checkpoint, MPI_Alltoall ending every iteration (--halo = bytes per\n"
    "peer in the Alltoall).\n";

int main(int argc, char **argv)
{
    int rank, size;
    struct opts o;
    example_init(&argc, &argv, "transpose", 0, usage_head, &o, &rank, &size);
    if (o.vary_halo) {
        if (rank == 0)
            fprintf(stderr, "transpose: --vary-halo is not supported\n");
        MPI_Finalize();
        return 2;
    }

    const long m = o.halo / 8, len = m * size;
    double *a = malloc((size_t)len * sizeof *a), *b = malloc((size_t)len * sizeof *b);
    if (!a || !b) {
        fprintf(stderr, "transpose: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (long i = 0; i < len; i++)
        a[i] = urand(o.seed, 0x61000000ull + (uint64_t)rank, (uint64_t)i);
    MPI_Comm half = MPI_COMM_NULL;
    if (size > 1)
        MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    double t0 = now_s();

    for (long it = 0; it < o.iterations; it++) {
        maybe_die(&o, it, rank);
        double step = 0.0;
        if (rank == 0)
            step = 0.5 + urand(o.seed, 0x73746570ull, (uint64_t)it);
        MPI_Bcast(&step, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);

        long sweeps = sweeps_of(&o, it, rank);
        double local = 0.0;
        for (long s = 0; s < sweeps; s++) {
            double c = 0.999 - 1e-4 * step;
            for (long i = 0; i < len; i++)
                a[i] = c * a[i] + 1e-3 * a[(i * 7 + 1) % len] * step;
        }
        for (long i = 0; i < len; i++)
            local += a[i];
        if (half != MPI_COMM_NULL) {
            double g;
            MPI_Allreduce(&local, &g, 1, MPI_DOUBLE, MPI_SUM, half);
        }
        if (do_checkpoint(&o, it))
            checkpoint(&o, a, len, rank);
        MPI_Alltoall(a, (int)m, MPI_DOUBLE, b, (int)m, MPI_DOUBLE, MPI_COMM_WORLD);
        /* reorder: block j, element k -> element k, block j */
        for (long j = 0; j < size; j++)
            for (long k = 0; k < m; k++)
                a[(k * size + j) % len] = b[j * m + k];
    }

    double sum = 0.0, total = 0.0;
    for (long i = 0; i < len; i++)
        sum += a[i] * (double)((i % 5) + 1);
    MPI_Reduce(&sum, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    double t = now_s() - t0;
    if (rank == 0)
        printf("transpose: ranks=%d iterations=%ld time=%.3f s checksum=%.12e\n", size,
               o.iterations, t, total);
    if (half != MPI_COMM_NULL)
        MPI_Comm_free(&half);
    free(a);
    free(b);
    MPI_Finalize();
    return 0;
}
