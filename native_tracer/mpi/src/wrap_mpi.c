/*
 * wrap_mpi.c -- PMPI wrappers: start and end, point-to-point, completion,
 * collectives.
 *
 * Every wrapper has the same shape (HBP_WRAP): pass through unless this is
 * the profiled thread's outermost call while profiling; otherwise account
 * the computation up to here, maybe inject a delay, call the PMPI function,
 * count, return its result. The prototypes come from the PARAMS lists below
 * and are checked by the compiler against the installed mpi.h.
 *
 * Counting rules (docs/profile-format.md):
 *  - a call counts once, whether it succeeds or not; bytes count only when
 *    it returned MPI_SUCCESS, as count x MPI_Type_size of the arguments that
 *    are significant on this rank (a receive counts what it posted);
 *  - Wait/Test/Iprobe families, Comm_dup/split/create and the like are
 *    intercepted for time only: they are outside the computation metric and
 *    can be delayed, but count in no metric (polling counts depend on timing);
 *  - persistent requests: MPI_Start counts one nonblocking call, Startall
 *    one per request, without bytes;
 *  - collectives by class: Bcast/Scatter(v) one-to-all, Reduce/Gather(v)
 *    all-to-one, the all-to-all family all-to-all unless the call ends a
 *    segment (then it counts in no class); Scan/Exscan all-to-all; the
 *    nonblocking forms (Ibcast, ...) in the class of their blocking form,
 *    never as a boundary.
 */
#include "internal.h"

#define HBP_WRAP(FAM, NAME, PARAMS, ARGS, HOOK)                                \
    HBP_EXPORT int MPI_##NAME PARAMS                                           \
    {                                                                          \
        if (!hbp_enter(FAM))                                                   \
            return PMPI_##NAME ARGS;                                           \
        int rc = PMPI_##NAME ARGS;                                             \
        HOOK;                                                                  \
        hbp_leave();                                                           \
        return rc;                                                             \
    }

#define MPI_FAM HBP_INJ_MPI
/* a byte count evaluated only after a successful call */
#define OK(expr) (rc == MPI_SUCCESS ? (uint64_t)(expr) : 0u)

static inline uint64_t tsize(MPI_Datatype dt)
{
    int s = 0;
    if (dt == MPI_DATATYPE_NULL || PMPI_Type_size(dt, &s) != MPI_SUCCESS || s < 0)
        return 0;
    return (uint64_t)s;
}

static inline uint64_t nbytes(int count, MPI_Datatype dt)
{
    return count > 0 ? (uint64_t)count * tsize(dt) : 0;
}

static inline int csize(MPI_Comm c)
{
    int n = 0;
    PMPI_Comm_size(c, &n);
    return n;
}

static inline int crank(MPI_Comm c)
{
    int r = -1;
    PMPI_Comm_rank(c, &r);
    return r;
}

static inline uint64_t vsum(const int *counts, int n, MPI_Datatype dt)
{
    uint64_t s = 0;
    for (int i = 0; counts && i < n; i++)
        if (counts[i] > 0)
            s += (uint64_t)counts[i];
    return s * tsize(dt);
}

static inline uint64_t wsum(const int *counts, const MPI_Datatype *types, int n)
{
    uint64_t s = 0;
    for (int i = 0; counts && types && i < n; i++)
        if (counts[i] > 0)
            s += (uint64_t)counts[i] * tsize(types[i]);
    return s;
}

static inline void count(unsigned m, uint64_t sent, uint64_t received)
{
    hbp_add(m, 1);
    hbp_add(HBP_M_BYTES_SENT, sent);
    hbp_add(HBP_M_BYTES_RECEIVED, received);
}

/* the end of an all-to-all collective: a segment boundary or a class count */
static inline void all_to_all(unsigned code, MPI_Comm comm, int rc, uint64_t sent,
                              uint64_t received)
{
    hbp_add(HBP_M_BYTES_SENT, sent);
    hbp_add(HBP_M_BYTES_RECEIVED, received);
    if (rc == MPI_SUCCESS && (hbp_g.boundary_mask & (1u << code))) {
        int inter = 1;
        if (PMPI_Comm_test_inter(comm, &inter) == MPI_SUCCESS && !inter &&
            csize(comm) == hbp_g.nranks) {
            hbp_segment_end(code);
            return;
        }
    }
    hbp_add(HBP_M_COLL_ALL_TO_ALL, 1);
}

/* ------------------------------------------------------------------ */
/* start and end                                                        */

HBP_EXPORT int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS)
        hbp_start();
    return rc;
}

HBP_EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS)
        hbp_start();
    return rc;
}

HBP_EXPORT int MPI_Finalize(void)
{
    hbp_finalize();   /* collective: every participating rank must join */
    return PMPI_Finalize();
}

/* ------------------------------------------------------------------ */
/* point-to-point                                                       */

HBP_WRAP(MPI_FAM, Send, (const void *buf, int n, MPI_Datatype dt, int dest, int tag, MPI_Comm comm),
         (buf, n, dt, dest, tag, comm), count(HBP_M_P2P_BLOCKING, OK(nbytes(n, dt)), 0))
HBP_WRAP(MPI_FAM, Ssend, (const void *buf, int n, MPI_Datatype dt, int dest, int tag, MPI_Comm comm),
         (buf, n, dt, dest, tag, comm), count(HBP_M_P2P_BLOCKING, OK(nbytes(n, dt)), 0))
HBP_WRAP(MPI_FAM, Rsend, (const void *buf, int n, MPI_Datatype dt, int dest, int tag, MPI_Comm comm),
         (buf, n, dt, dest, tag, comm), count(HBP_M_P2P_BLOCKING, OK(nbytes(n, dt)), 0))
HBP_WRAP(MPI_FAM, Bsend, (const void *buf, int n, MPI_Datatype dt, int dest, int tag, MPI_Comm comm),
         (buf, n, dt, dest, tag, comm), count(HBP_M_P2P_BLOCKING, OK(nbytes(n, dt)), 0))
HBP_WRAP(MPI_FAM, Recv,
         (void *buf, int n, MPI_Datatype dt, int src, int tag, MPI_Comm comm, MPI_Status *st),
         (buf, n, dt, src, tag, comm, st), count(HBP_M_P2P_BLOCKING, 0, OK(nbytes(n, dt))))
HBP_WRAP(MPI_FAM, Sendrecv,
         (const void *sbuf, int sn, MPI_Datatype sdt, int dest, int stag, void *rbuf, int rn,
          MPI_Datatype rdt, int src, int rtag, MPI_Comm comm, MPI_Status *st),
         (sbuf, sn, sdt, dest, stag, rbuf, rn, rdt, src, rtag, comm, st),
         count(HBP_M_P2P_BLOCKING, OK(nbytes(sn, sdt)), OK(nbytes(rn, rdt))))
HBP_WRAP(MPI_FAM, Sendrecv_replace,
         (void *buf, int n, MPI_Datatype dt, int dest, int stag, int src, int rtag, MPI_Comm comm,
          MPI_Status *st),
         (buf, n, dt, dest, stag, src, rtag, comm, st),
         count(HBP_M_P2P_BLOCKING, OK(nbytes(n, dt)), OK(nbytes(n, dt))))
HBP_WRAP(MPI_FAM, Probe, (int src, int tag, MPI_Comm comm, MPI_Status *st), (src, tag, comm, st),
         count(HBP_M_P2P_BLOCKING, 0, 0))
HBP_WRAP(MPI_FAM, Mprobe, (int src, int tag, MPI_Comm comm, MPI_Message *msg, MPI_Status *st),
         (src, tag, comm, msg, st), count(HBP_M_P2P_BLOCKING, 0, 0))
HBP_WRAP(MPI_FAM, Mrecv, (void *buf, int n, MPI_Datatype dt, MPI_Message *msg, MPI_Status *st),
         (buf, n, dt, msg, st), count(HBP_M_P2P_BLOCKING, 0, OK(nbytes(n, dt))))

HBP_WRAP(MPI_FAM, Isend,
         (const void *buf, int n, MPI_Datatype dt, int dest, int tag, MPI_Comm comm, MPI_Request *rq),
         (buf, n, dt, dest, tag, comm, rq), count(HBP_M_P2P_NONBLOCKING, OK(nbytes(n, dt)), 0))
HBP_WRAP(MPI_FAM, Issend,
         (const void *buf, int n, MPI_Datatype dt, int dest, int tag, MPI_Comm comm, MPI_Request *rq),
         (buf, n, dt, dest, tag, comm, rq), count(HBP_M_P2P_NONBLOCKING, OK(nbytes(n, dt)), 0))
HBP_WRAP(MPI_FAM, Irsend,
         (const void *buf, int n, MPI_Datatype dt, int dest, int tag, MPI_Comm comm, MPI_Request *rq),
         (buf, n, dt, dest, tag, comm, rq), count(HBP_M_P2P_NONBLOCKING, OK(nbytes(n, dt)), 0))
HBP_WRAP(MPI_FAM, Ibsend,
         (const void *buf, int n, MPI_Datatype dt, int dest, int tag, MPI_Comm comm, MPI_Request *rq),
         (buf, n, dt, dest, tag, comm, rq), count(HBP_M_P2P_NONBLOCKING, OK(nbytes(n, dt)), 0))
HBP_WRAP(MPI_FAM, Irecv,
         (void *buf, int n, MPI_Datatype dt, int src, int tag, MPI_Comm comm, MPI_Request *rq),
         (buf, n, dt, src, tag, comm, rq), count(HBP_M_P2P_NONBLOCKING, 0, OK(nbytes(n, dt))))
HBP_WRAP(MPI_FAM, Imrecv, (void *buf, int n, MPI_Datatype dt, MPI_Message *msg, MPI_Request *rq),
         (buf, n, dt, msg, rq), count(HBP_M_P2P_NONBLOCKING, 0, OK(nbytes(n, dt))))
HBP_WRAP(MPI_FAM, Start, (MPI_Request *rq), (rq), count(HBP_M_P2P_NONBLOCKING, 0, 0))
HBP_WRAP(MPI_FAM, Startall, (int n, MPI_Request rqs[]), (n, rqs),
         hbp_add(HBP_M_P2P_NONBLOCKING, n > 0 ? (uint64_t)n : 0))

/* completion and polling: time only */
HBP_WRAP(MPI_FAM, Wait, (MPI_Request *rq, MPI_Status *st), (rq, st), (void)0)
HBP_WRAP(MPI_FAM, Waitall, (int n, MPI_Request rqs[], MPI_Status sts[]), (n, rqs, sts), (void)0)
HBP_WRAP(MPI_FAM, Waitany, (int n, MPI_Request rqs[], int *idx, MPI_Status *st), (n, rqs, idx, st),
         (void)0)
HBP_WRAP(MPI_FAM, Waitsome, (int n, MPI_Request rqs[], int *out, int idx[], MPI_Status sts[]),
         (n, rqs, out, idx, sts), (void)0)
HBP_WRAP(MPI_FAM, Test, (MPI_Request *rq, int *flag, MPI_Status *st), (rq, flag, st), (void)0)
HBP_WRAP(MPI_FAM, Testall, (int n, MPI_Request rqs[], int *flag, MPI_Status sts[]),
         (n, rqs, flag, sts), (void)0)
HBP_WRAP(MPI_FAM, Testany, (int n, MPI_Request rqs[], int *idx, int *flag, MPI_Status *st),
         (n, rqs, idx, flag, st), (void)0)
HBP_WRAP(MPI_FAM, Testsome, (int n, MPI_Request rqs[], int *out, int idx[], MPI_Status sts[]),
         (n, rqs, out, idx, sts), (void)0)
HBP_WRAP(MPI_FAM, Iprobe, (int src, int tag, MPI_Comm comm, int *flag, MPI_Status *st),
         (src, tag, comm, flag, st), (void)0)
HBP_WRAP(MPI_FAM, Improbe,
         (int src, int tag, MPI_Comm comm, int *flag, MPI_Message *msg, MPI_Status *st),
         (src, tag, comm, flag, msg, st), (void)0)

/* communicator set-up: collective and possibly slow, time only */
HBP_WRAP(MPI_FAM, Comm_dup, (MPI_Comm comm, MPI_Comm *out), (comm, out), (void)0)
HBP_WRAP(MPI_FAM, Comm_split, (MPI_Comm comm, int color, int key, MPI_Comm *out),
         (comm, color, key, out), (void)0)
HBP_WRAP(MPI_FAM, Comm_create, (MPI_Comm comm, MPI_Group group, MPI_Comm *out), (comm, group, out),
         (void)0)
HBP_WRAP(MPI_FAM, Comm_free, (MPI_Comm *comm), (comm), (void)0)

/* ------------------------------------------------------------------ */
/* collectives: one-to-all, all-to-one                                  */

HBP_WRAP(MPI_FAM, Bcast, (void *buf, int n, MPI_Datatype dt, int root, MPI_Comm comm),
         (buf, n, dt, root, comm),
         count(HBP_M_COLL_ONE_TO_ALL, OK(crank(comm) == root ? nbytes(n, dt) : 0),
               OK(crank(comm) == root ? 0 : nbytes(n, dt))))
HBP_WRAP(MPI_FAM, Scatter,
         (const void *sbuf, int sn, MPI_Datatype sdt, void *rbuf, int rn, MPI_Datatype rdt, int root,
          MPI_Comm comm),
         (sbuf, sn, sdt, rbuf, rn, rdt, root, comm),
         count(HBP_M_COLL_ONE_TO_ALL,
               OK(crank(comm) == root ? (uint64_t)csize(comm) * nbytes(sn, sdt) : 0),
               OK(rbuf == MPI_IN_PLACE ? 0 : nbytes(rn, rdt))))
HBP_WRAP(MPI_FAM, Scatterv,
         (const void *sbuf, const int scounts[], const int displs[], MPI_Datatype sdt, void *rbuf,
          int rn, MPI_Datatype rdt, int root, MPI_Comm comm),
         (sbuf, scounts, displs, sdt, rbuf, rn, rdt, root, comm),
         count(HBP_M_COLL_ONE_TO_ALL, OK(crank(comm) == root ? vsum(scounts, csize(comm), sdt) : 0),
               OK(rbuf == MPI_IN_PLACE ? 0 : nbytes(rn, rdt))))
HBP_WRAP(MPI_FAM, Reduce,
         (const void *sbuf, void *rbuf, int n, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm),
         (sbuf, rbuf, n, dt, op, root, comm),
         count(HBP_M_COLL_ALL_TO_ONE, OK(nbytes(n, dt)), OK(crank(comm) == root ? nbytes(n, dt) : 0)))
HBP_WRAP(MPI_FAM, Gather,
         (const void *sbuf, int sn, MPI_Datatype sdt, void *rbuf, int rn, MPI_Datatype rdt, int root,
          MPI_Comm comm),
         (sbuf, sn, sdt, rbuf, rn, rdt, root, comm),
         count(HBP_M_COLL_ALL_TO_ONE,
               OK(sbuf == MPI_IN_PLACE ? nbytes(rn, rdt) : nbytes(sn, sdt)),
               OK(crank(comm) == root ? (uint64_t)csize(comm) * nbytes(rn, rdt) : 0)))
HBP_WRAP(MPI_FAM, Gatherv,
         (const void *sbuf, int sn, MPI_Datatype sdt, void *rbuf, const int rcounts[],
          const int displs[], MPI_Datatype rdt, int root, MPI_Comm comm),
         (sbuf, sn, sdt, rbuf, rcounts, displs, rdt, root, comm),
         count(HBP_M_COLL_ALL_TO_ONE,
               OK(sbuf == MPI_IN_PLACE ? (rcounts && crank(comm) >= 0 ? nbytes(rcounts[crank(comm)], rdt) : 0)
                                       : nbytes(sn, sdt)),
               OK(crank(comm) == root ? vsum(rcounts, csize(comm), rdt) : 0)))

/* ------------------------------------------------------------------ */
/* collectives: all-to-all (segment boundaries)                         */

HBP_WRAP(MPI_FAM, Alltoall,
         (const void *sbuf, int sn, MPI_Datatype sdt, void *rbuf, int rn, MPI_Datatype rdt,
          MPI_Comm comm),
         (sbuf, sn, sdt, rbuf, rn, rdt, comm),
         all_to_all(HBP_COLL_ALLTOALL, comm, rc,
                    OK((uint64_t)csize(comm) * (sbuf == MPI_IN_PLACE ? nbytes(rn, rdt) : nbytes(sn, sdt))),
                    OK((uint64_t)csize(comm) * nbytes(rn, rdt))))
HBP_WRAP(MPI_FAM, Alltoallv,
         (const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype sdt, void *rbuf,
          const int rcounts[], const int rdispls[], MPI_Datatype rdt, MPI_Comm comm),
         (sbuf, scounts, sdispls, sdt, rbuf, rcounts, rdispls, rdt, comm),
         all_to_all(HBP_COLL_ALLTOALLV, comm, rc,
                    OK(sbuf == MPI_IN_PLACE ? vsum(rcounts, csize(comm), rdt)
                                            : vsum(scounts, csize(comm), sdt)),
                    OK(vsum(rcounts, csize(comm), rdt))))
HBP_WRAP(MPI_FAM, Alltoallw,
         (const void *sbuf, const int scounts[], const int sdispls[], const MPI_Datatype sdts[],
          void *rbuf, const int rcounts[], const int rdispls[], const MPI_Datatype rdts[],
          MPI_Comm comm),
         (sbuf, scounts, sdispls, sdts, rbuf, rcounts, rdispls, rdts, comm),
         all_to_all(HBP_COLL_ALLTOALLW, comm, rc,
                    OK(sbuf == MPI_IN_PLACE ? wsum(rcounts, rdts, csize(comm))
                                            : wsum(scounts, sdts, csize(comm))),
                    OK(wsum(rcounts, rdts, csize(comm)))))
HBP_WRAP(MPI_FAM, Allreduce,
         (const void *sbuf, void *rbuf, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm comm),
         (sbuf, rbuf, n, dt, op, comm),
         all_to_all(HBP_COLL_ALLREDUCE, comm, rc, OK(nbytes(n, dt)), OK(nbytes(n, dt))))
HBP_WRAP(MPI_FAM, Allgather,
         (const void *sbuf, int sn, MPI_Datatype sdt, void *rbuf, int rn, MPI_Datatype rdt,
          MPI_Comm comm),
         (sbuf, sn, sdt, rbuf, rn, rdt, comm),
         all_to_all(HBP_COLL_ALLGATHER, comm, rc,
                    OK(sbuf == MPI_IN_PLACE ? nbytes(rn, rdt) : nbytes(sn, sdt)),
                    OK((uint64_t)csize(comm) * nbytes(rn, rdt))))
HBP_WRAP(MPI_FAM, Allgatherv,
         (const void *sbuf, int sn, MPI_Datatype sdt, void *rbuf, const int rcounts[],
          const int displs[], MPI_Datatype rdt, MPI_Comm comm),
         (sbuf, sn, sdt, rbuf, rcounts, displs, rdt, comm),
         all_to_all(HBP_COLL_ALLGATHERV, comm, rc,
                    OK(sbuf == MPI_IN_PLACE ? (rcounts && crank(comm) >= 0 ? nbytes(rcounts[crank(comm)], rdt) : 0)
                                            : nbytes(sn, sdt)),
                    OK(vsum(rcounts, csize(comm), rdt))))
HBP_WRAP(MPI_FAM, Barrier, (MPI_Comm comm), (comm), all_to_all(HBP_COLL_BARRIER, comm, rc, 0, 0))
HBP_WRAP(MPI_FAM, Reduce_scatter,
         (const void *sbuf, void *rbuf, const int rcounts[], MPI_Datatype dt, MPI_Op op,
          MPI_Comm comm),
         (sbuf, rbuf, rcounts, dt, op, comm),
         all_to_all(HBP_COLL_REDUCE_SCATTER, comm, rc, OK(vsum(rcounts, csize(comm), dt)),
                    OK(rcounts && crank(comm) >= 0 ? nbytes(rcounts[crank(comm)], dt) : 0)))
HBP_WRAP(MPI_FAM, Reduce_scatter_block,
         (const void *sbuf, void *rbuf, int rn, MPI_Datatype dt, MPI_Op op, MPI_Comm comm),
         (sbuf, rbuf, rn, dt, op, comm),
         all_to_all(HBP_COLL_REDUCE_SCATTER_BLOCK, comm, rc,
                    OK((uint64_t)csize(comm) * nbytes(rn, dt)), OK(nbytes(rn, dt))))
HBP_WRAP(MPI_FAM, Scan,
         (const void *sbuf, void *rbuf, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm comm),
         (sbuf, rbuf, n, dt, op, comm),
         count(HBP_M_COLL_ALL_TO_ALL, OK(nbytes(n, dt)), OK(nbytes(n, dt))))
HBP_WRAP(MPI_FAM, Exscan,
         (const void *sbuf, void *rbuf, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm comm),
         (sbuf, rbuf, n, dt, op, comm),
         count(HBP_M_COLL_ALL_TO_ALL, OK(nbytes(n, dt)), OK(nbytes(n, dt))))

/* ------------------------------------------------------------------ */
/* nonblocking collectives: counted at initiation, never boundaries     */

HBP_WRAP(MPI_FAM, Ibcast,
         (void *buf, int n, MPI_Datatype dt, int root, MPI_Comm comm, MPI_Request *rq),
         (buf, n, dt, root, comm, rq),
         count(HBP_M_COLL_ONE_TO_ALL, OK(crank(comm) == root ? nbytes(n, dt) : 0),
               OK(crank(comm) == root ? 0 : nbytes(n, dt))))
HBP_WRAP(MPI_FAM, Iscatter,
         (const void *sbuf, int sn, MPI_Datatype sdt, void *rbuf, int rn, MPI_Datatype rdt, int root,
          MPI_Comm comm, MPI_Request *rq),
         (sbuf, sn, sdt, rbuf, rn, rdt, root, comm, rq),
         count(HBP_M_COLL_ONE_TO_ALL,
               OK(crank(comm) == root ? (uint64_t)csize(comm) * nbytes(sn, sdt) : 0),
               OK(rbuf == MPI_IN_PLACE ? 0 : nbytes(rn, rdt))))
HBP_WRAP(MPI_FAM, Ireduce,
         (const void *sbuf, void *rbuf, int n, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm,
          MPI_Request *rq),
         (sbuf, rbuf, n, dt, op, root, comm, rq),
         count(HBP_M_COLL_ALL_TO_ONE, OK(nbytes(n, dt)), OK(crank(comm) == root ? nbytes(n, dt) : 0)))
HBP_WRAP(MPI_FAM, Igather,
         (const void *sbuf, int sn, MPI_Datatype sdt, void *rbuf, int rn, MPI_Datatype rdt, int root,
          MPI_Comm comm, MPI_Request *rq),
         (sbuf, sn, sdt, rbuf, rn, rdt, root, comm, rq),
         count(HBP_M_COLL_ALL_TO_ONE,
               OK(sbuf == MPI_IN_PLACE ? nbytes(rn, rdt) : nbytes(sn, sdt)),
               OK(crank(comm) == root ? (uint64_t)csize(comm) * nbytes(rn, rdt) : 0)))
HBP_WRAP(MPI_FAM, Iallreduce,
         (const void *sbuf, void *rbuf, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
          MPI_Request *rq),
         (sbuf, rbuf, n, dt, op, comm, rq),
         count(HBP_M_COLL_ALL_TO_ALL, OK(nbytes(n, dt)), OK(nbytes(n, dt))))
HBP_WRAP(MPI_FAM, Ialltoall,
         (const void *sbuf, int sn, MPI_Datatype sdt, void *rbuf, int rn, MPI_Datatype rdt,
          MPI_Comm comm, MPI_Request *rq),
         (sbuf, sn, sdt, rbuf, rn, rdt, comm, rq),
         count(HBP_M_COLL_ALL_TO_ALL,
               OK((uint64_t)csize(comm) * (sbuf == MPI_IN_PLACE ? nbytes(rn, rdt) : nbytes(sn, sdt))),
               OK((uint64_t)csize(comm) * nbytes(rn, rdt))))
HBP_WRAP(MPI_FAM, Iallgather,
         (const void *sbuf, int sn, MPI_Datatype sdt, void *rbuf, int rn, MPI_Datatype rdt,
          MPI_Comm comm, MPI_Request *rq),
         (sbuf, sn, sdt, rbuf, rn, rdt, comm, rq),
         count(HBP_M_COLL_ALL_TO_ALL, OK(sbuf == MPI_IN_PLACE ? nbytes(rn, rdt) : nbytes(sn, sdt)),
               OK((uint64_t)csize(comm) * nbytes(rn, rdt))))
HBP_WRAP(MPI_FAM, Ibarrier, (MPI_Comm comm, MPI_Request *rq), (comm, rq),
         count(HBP_M_COLL_ALL_TO_ALL, 0, 0))
