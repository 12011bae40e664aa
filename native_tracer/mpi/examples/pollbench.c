/*
 * pollbench.c -- the cost of MPI's polling calls, in ns per call.
 *
 *   mpirun -np 1 examples/bin/pollbench [--calls N] [--repeat R]
 *
 * Posts a receive that nothing matches, then times N calls of each polling
 * function on it (MPI_Test, Testany, Testall, Testsome, Iprobe, Improbe,
 * Request_get_status), of two local queries (MPI_Comm_rank, MPI_Type_size), of
 * MPI_Wait on MPI_REQUEST_NULL (a call the profiler measures every time: its full
 * path) and of MPI_Barrier (N / 100 calls: with one rank a boundary collective
 * that returns at once, so the profiler's full path and the end of a segment);
 * prints one line per function:
 *     pollbench MPI_Test ns_per_call 41.3
 * the best of R repetitions (the least disturbed). benchmarks/bench_mpi_polling.py
 * runs it with and without the profiler and prints the ratio. At the end the
 * receive is cancelled and completed, so the program ends cleanly.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

enum { T_TEST, T_TESTANY, T_TESTALL, T_TESTSOME, T_IPROBE, T_IMPROBE, T_GETSTATUS, T_COMMRANK,
       T_TYPESIZE, T_WAIT, T_BARRIER, T_COUNT };
static const char *names[T_COUNT] = {
    "MPI_Test", "MPI_Testany", "MPI_Testall", "MPI_Testsome", "MPI_Iprobe", "MPI_Improbe",
    "MPI_Request_get_status", "MPI_Comm_rank", "MPI_Type_size", "MPI_Wait", "MPI_Barrier",
};

static int poll_once(int which, MPI_Request *rq)
{
    int flag = 0, idx = 0, outc = 0, ind[1];
    MPI_Message msg;
    MPI_Request none = MPI_REQUEST_NULL;
    switch (which) {
    case T_TEST:      MPI_Test(rq, &flag, MPI_STATUS_IGNORE); break;
    case T_TESTANY:   MPI_Testany(1, rq, &idx, &flag, MPI_STATUS_IGNORE); break;
    case T_TESTALL:   MPI_Testall(1, rq, &flag, MPI_STATUSES_IGNORE); break;
    case T_TESTSOME:  MPI_Testsome(1, rq, &outc, ind, MPI_STATUSES_IGNORE); flag = outc > 0; break;
    case T_IPROBE:    MPI_Iprobe(MPI_ANY_SOURCE, 77, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE); break;
    case T_IMPROBE:   MPI_Improbe(MPI_ANY_SOURCE, 77, MPI_COMM_WORLD, &flag, &msg, MPI_STATUS_IGNORE); break;
    case T_GETSTATUS: MPI_Request_get_status(*rq, &flag, MPI_STATUS_IGNORE); break;
    case T_COMMRANK:  MPI_Comm_rank(MPI_COMM_WORLD, &idx); flag = idx < 0; break;
    case T_TYPESIZE:  MPI_Type_size(MPI_DOUBLE, &idx); flag = idx != 8; break;
    case T_WAIT:      MPI_Wait(&none, MPI_STATUS_IGNORE); flag = none != MPI_REQUEST_NULL; break;
    default:          MPI_Barrier(MPI_COMM_WORLD); break;
    }
    return flag;
}

int main(int argc, char **argv)
{
    long calls = 2000000;
    int repeat = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--calls") && i + 1 < argc)
            calls = atol(argv[++i]);
        else if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
            repeat = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: pollbench [--calls N] [--repeat R]\n");
            return 2;
        }
    }
    if (calls < 1 || repeat < 1) {
        fprintf(stderr, "pollbench: --calls and --repeat must be positive\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int buf = 0, hits = 0;
    MPI_Request rq;
    MPI_Irecv(&buf, 1, MPI_INT, MPI_ANY_SOURCE, 78, MPI_COMM_WORLD, &rq);
    for (int w = 0; w < T_COUNT; w++) {
        double best = 1e30;
        long n = w == T_BARRIER ? (calls / 100 > 0 ? calls / 100 : 1) : calls;
        for (int r = 0; r < repeat; r++) {
            double t0 = now_s();
            for (long i = 0; i < n; i++)
                hits += poll_once(w, &rq);
            double dt = now_s() - t0;
            if (dt < best)
                best = dt;
        }
        if (rank == 0)
            printf("pollbench %s ns_per_call %.2f\n", names[w], 1e9 * best / (double)n);
    }
    MPI_Cancel(&rq);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        printf("pollbench completed %d\n", hits);
    MPI_Finalize();
    return hits != 0;
}
