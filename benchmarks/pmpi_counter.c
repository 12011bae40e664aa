/* An independent MPI call counter, for benchmarks/eval_interference.py.
 *
 * Loaded first in LD_PRELOAD (before libhbprof.so), it counts the calls of the functions
 * below in the categories of the profiler's metrics (docs/profile-format.md) and forwards
 * each call to the next definition (dlsym RTLD_NEXT: the profiler's wrapper if it is
 * loaded, else the MPI library), so both see the same calls in the same run. It shares no
 * code with the profiler. At MPI_Finalize every rank writes
 * $PMPI_COUNTER_DIR/count-<rank>.txt: one "name value" line per category.
 *
 *   segments         boundary collectives on an intra-communicator as large as
 *                    MPI_COMM_WORLD, plus one (the segment MPI_Finalize ends)
 *   p2p_blocking     Send Ssend Rsend Bsend Recv Sendrecv Sendrecv_replace Probe
 *   p2p_nonblocking  Isend Issend Irsend Ibsend Irecv
 *   coll_one_to_all  Bcast Scatter Scatterv
 *   coll_all_to_one  Reduce Gather Gatherv
 *   coll_all_to_all  the boundary collectives on smaller communicators, Scan Exscan
 *   polling          Test Testany Testall Testsome Iprobe (timing-dependent: shown only)
 *   completion       Wait Waitany Waitall Waitsome (shown only)
 *
 * Build: mpicc -shared -fPIC -O2 -o pmpi_counter.so pmpi_counter.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

enum { SEGMENTS, P2P_B, P2P_NB, ONE_TO_ALL, ALL_TO_ONE, ALL_TO_ALL, POLLING, COMPLETION, NCAT };
static const char *const NAMES[NCAT] = {"segments", "p2p_blocking", "p2p_nonblocking", "coll_one_to_all",
                                        "coll_all_to_one", "coll_all_to_all", "polling", "completion"};
static unsigned long long counts[NCAT];

static void *next_of(const char *name) {
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) {
        fprintf(stderr, "pmpi_counter: no next definition of %s\n", name);
        abort();
    }
    return f;
}

#define FORWARD(name, PARAMS, ARGS)                                   \
    static int (*next)PARAMS;                                         \
    if (!next) next = (int(*)PARAMS)next_of(#name);                   \
    return next ARGS;

#define COUNT(cat, name, PARAMS, ARGS) \
    int name PARAMS {                  \
        counts[cat]++;                 \
        FORWARD(name, PARAMS, ARGS)    \
    }

/* a boundary collective: a segment if its communicator is an intra-communicator as large
 * as MPI_COMM_WORLD, else an all-to-all collective */
static void boundary(MPI_Comm comm) {
    int inter = 0, size = 0, world = 0;
    PMPI_Comm_test_inter(comm, &inter);
    PMPI_Comm_size(comm, &size);
    PMPI_Comm_size(MPI_COMM_WORLD, &world);
    counts[!inter && size == world ? SEGMENTS : ALL_TO_ALL]++;
}

#define BOUNDARY(name, PARAMS, ARGS) \
    int name PARAMS {                \
        boundary(comm);              \
        FORWARD(name, PARAMS, ARGS)  \
    }

COUNT(P2P_B, MPI_Send, (const void *b, int c, MPI_Datatype t, int d, int g, MPI_Comm comm), (b, c, t, d, g, comm))
COUNT(P2P_B, MPI_Ssend, (const void *b, int c, MPI_Datatype t, int d, int g, MPI_Comm comm), (b, c, t, d, g, comm))
COUNT(P2P_B, MPI_Rsend, (const void *b, int c, MPI_Datatype t, int d, int g, MPI_Comm comm), (b, c, t, d, g, comm))
COUNT(P2P_B, MPI_Bsend, (const void *b, int c, MPI_Datatype t, int d, int g, MPI_Comm comm), (b, c, t, d, g, comm))
COUNT(P2P_B, MPI_Recv, (void *b, int c, MPI_Datatype t, int s, int g, MPI_Comm comm, MPI_Status *st),
      (b, c, t, s, g, comm, st))
COUNT(P2P_B, MPI_Sendrecv,
      (const void *sb, int sc, MPI_Datatype st, int d, int sg, void *rb, int rc, MPI_Datatype rt, int s, int rg,
       MPI_Comm comm, MPI_Status *status),
      (sb, sc, st, d, sg, rb, rc, rt, s, rg, comm, status))
COUNT(P2P_B, MPI_Sendrecv_replace,
      (void *b, int c, MPI_Datatype t, int d, int sg, int s, int rg, MPI_Comm comm, MPI_Status *status),
      (b, c, t, d, sg, s, rg, comm, status))
COUNT(P2P_B, MPI_Probe, (int s, int g, MPI_Comm comm, MPI_Status *st), (s, g, comm, st))
COUNT(P2P_NB, MPI_Isend, (const void *b, int c, MPI_Datatype t, int d, int g, MPI_Comm comm, MPI_Request *r),
      (b, c, t, d, g, comm, r))
COUNT(P2P_NB, MPI_Issend, (const void *b, int c, MPI_Datatype t, int d, int g, MPI_Comm comm, MPI_Request *r),
      (b, c, t, d, g, comm, r))
COUNT(P2P_NB, MPI_Irsend, (const void *b, int c, MPI_Datatype t, int d, int g, MPI_Comm comm, MPI_Request *r),
      (b, c, t, d, g, comm, r))
COUNT(P2P_NB, MPI_Ibsend, (const void *b, int c, MPI_Datatype t, int d, int g, MPI_Comm comm, MPI_Request *r),
      (b, c, t, d, g, comm, r))
COUNT(P2P_NB, MPI_Irecv, (void *b, int c, MPI_Datatype t, int s, int g, MPI_Comm comm, MPI_Request *r),
      (b, c, t, s, g, comm, r))
COUNT(ONE_TO_ALL, MPI_Bcast, (void *b, int c, MPI_Datatype t, int root, MPI_Comm comm), (b, c, t, root, comm))
COUNT(ONE_TO_ALL, MPI_Scatter,
      (const void *sb, int sc, MPI_Datatype st, void *rb, int rc, MPI_Datatype rt, int root, MPI_Comm comm),
      (sb, sc, st, rb, rc, rt, root, comm))
COUNT(ONE_TO_ALL, MPI_Scatterv,
      (const void *sb, const int sc[], const int dis[], MPI_Datatype st, void *rb, int rc, MPI_Datatype rt, int root,
       MPI_Comm comm),
      (sb, sc, dis, st, rb, rc, rt, root, comm))
COUNT(ALL_TO_ONE, MPI_Reduce,
      (const void *sb, void *rb, int c, MPI_Datatype t, MPI_Op op, int root, MPI_Comm comm),
      (sb, rb, c, t, op, root, comm))
COUNT(ALL_TO_ONE, MPI_Gather,
      (const void *sb, int sc, MPI_Datatype st, void *rb, int rc, MPI_Datatype rt, int root, MPI_Comm comm),
      (sb, sc, st, rb, rc, rt, root, comm))
COUNT(ALL_TO_ONE, MPI_Gatherv,
      (const void *sb, int sc, MPI_Datatype st, void *rb, const int rc[], const int dis[], MPI_Datatype rt, int root,
       MPI_Comm comm),
      (sb, sc, st, rb, rc, dis, rt, root, comm))
COUNT(ALL_TO_ALL, MPI_Scan, (const void *sb, void *rb, int c, MPI_Datatype t, MPI_Op op, MPI_Comm comm),
      (sb, rb, c, t, op, comm))
COUNT(ALL_TO_ALL, MPI_Exscan, (const void *sb, void *rb, int c, MPI_Datatype t, MPI_Op op, MPI_Comm comm),
      (sb, rb, c, t, op, comm))
COUNT(POLLING, MPI_Test, (MPI_Request *r, int *f, MPI_Status *s), (r, f, s))
COUNT(POLLING, MPI_Testany, (int n, MPI_Request r[], int *i, int *f, MPI_Status *s), (n, r, i, f, s))
COUNT(POLLING, MPI_Testall, (int n, MPI_Request r[], int *f, MPI_Status s[]), (n, r, f, s))
COUNT(POLLING, MPI_Testsome, (int n, MPI_Request r[], int *o, int i[], MPI_Status s[]), (n, r, o, i, s))
COUNT(POLLING, MPI_Iprobe, (int src, int g, MPI_Comm comm, int *f, MPI_Status *s), (src, g, comm, f, s))
COUNT(COMPLETION, MPI_Wait, (MPI_Request *r, MPI_Status *s), (r, s))
COUNT(COMPLETION, MPI_Waitany, (int n, MPI_Request r[], int *i, MPI_Status *s), (n, r, i, s))
COUNT(COMPLETION, MPI_Waitall, (int n, MPI_Request r[], MPI_Status s[]), (n, r, s))
COUNT(COMPLETION, MPI_Waitsome, (int n, MPI_Request r[], int *o, int i[], MPI_Status s[]), (n, r, o, i, s))

BOUNDARY(MPI_Barrier, (MPI_Comm comm), (comm))
BOUNDARY(MPI_Allreduce, (const void *sb, void *rb, int c, MPI_Datatype t, MPI_Op op, MPI_Comm comm),
         (sb, rb, c, t, op, comm))
BOUNDARY(MPI_Alltoall,
         (const void *sb, int sc, MPI_Datatype st, void *rb, int rc, MPI_Datatype rt, MPI_Comm comm),
         (sb, sc, st, rb, rc, rt, comm))
BOUNDARY(MPI_Alltoallv,
         (const void *sb, const int sc[], const int sd[], MPI_Datatype st, void *rb, const int rc[], const int rd[],
          MPI_Datatype rt, MPI_Comm comm),
         (sb, sc, sd, st, rb, rc, rd, rt, comm))
BOUNDARY(MPI_Allgather,
         (const void *sb, int sc, MPI_Datatype st, void *rb, int rc, MPI_Datatype rt, MPI_Comm comm),
         (sb, sc, st, rb, rc, rt, comm))
BOUNDARY(MPI_Allgatherv,
         (const void *sb, int sc, MPI_Datatype st, void *rb, const int rc[], const int dis[], MPI_Datatype rt,
          MPI_Comm comm),
         (sb, sc, st, rb, rc, dis, rt, comm))
BOUNDARY(MPI_Reduce_scatter,
         (const void *sb, void *rb, const int rc[], MPI_Datatype t, MPI_Op op, MPI_Comm comm),
         (sb, rb, rc, t, op, comm))
BOUNDARY(MPI_Reduce_scatter_block, (const void *sb, void *rb, int rc, MPI_Datatype t, MPI_Op op, MPI_Comm comm),
         (sb, rb, rc, t, op, comm))

int MPI_Finalize(void) {
    int rank = -1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *dir = getenv("PMPI_COUNTER_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/count-%d.txt", dir ? dir : ".", rank);
    FILE *f = fopen(path, "w");
    if (f) {
        counts[SEGMENTS]++; /* the segment MPI_Finalize ends */
        for (int i = 0; i < NCAT; i++) fprintf(f, "%s %llu\n", NAMES[i], counts[i]);
        fclose(f);
        counts[SEGMENTS]--;
    }
    FORWARD(MPI_Finalize, (void), ())
}
