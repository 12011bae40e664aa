/*
 * wrap_mpi.h -- what the generated MPI and MPI-IO wrappers count.
 *
 * build/wrap_mpi.gen.c (tools/gen_wrappers.py, from wrap_mpi.list) includes
 * this file and nothing else. Every wrapper has the same shape: pass through
 * unless this is the profiled thread's outermost call while profiling
 * (hbp_enter); otherwise the PMPI function, the counting call of its class
 * below, hbp_leave(), its result.
 *
 * Counting rules (docs/profile-format.md):
 *  - a call counts once, whether it succeeds or not; bytes count only when
 *    it returned MPI_SUCCESS, as count x MPI_Type_size of the arguments that
 *    are significant on this rank (a receive counts what it posted);
 *  - Wait/Test/Iprobe families, Comm_dup/split/create and the like, and the
 *    blocking neighbourhood collectives (MPI_Neighbor_*) are
 *    intercepted for time only: they are outside the computation metric and
 *    can be delayed, but count in no metric (polling counts depend on timing);
 *  - persistent requests: MPI_Start counts one nonblocking call, Startall
 *    one per request, without bytes;
 *  - collectives by class: Bcast/Scatter(v) one-to-all, Reduce/Gather(v)
 *    all-to-one, the all-to-all family all-to-all unless the call ends a
 *    segment (then it counts in no class); Scan/Exscan all-to-all; the
 *    nonblocking forms (Ibcast, ...) in the class of their blocking form,
 *    never as a boundary;
 *  - MPI-IO: MPI_File_open and _close, every read and write call (blocking,
 *    individual or collective, explicit offset, shared or ordered pointer,
 *    nonblocking, the _begin half of split collectives) once each with
 *    count x type size bytes; the _end halves, File_sync, set_view,
 *    set_size, preallocate and seek(_shared) for time only. The MPI-IO
 *    implementation's own POSIX calls happen inside these wrappers and are
 *    not counted again.
 */
#ifndef HBP_WRAP_MPI_H
#define HBP_WRAP_MPI_H

#include "internal.h"

#include <stdlib.h>

/* ---- the Fortran wrappers (tools/gen_fortran.py; src/fortran.c) ---- */

/* the real Fortran function `name` (dlsym RTLD_NEXT, cached in *cache);
 * NULL, with one warning, if the MPI library has none */
HBP_HIDDEN void *hbp_fortran_real(void **cache, const char *name);
/* a Fortran choice buffer as C sees it: Fortran's MPI_IN_PLACE becomes MPI_IN_PLACE */
HBP_HIDDEN const void *hbp_fortran_buf(const void *p);
/* n Fortran datatype handles as a malloc'ed C array (NULL if none or no memory) */
HBP_HIDDEN MPI_Datatype *hbp_fortran_types(const void *f, int n);

/* ---- sizes of the arguments, for the byte expressions of the list ---- */

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

/* bytes of n counts of one type */
static inline uint64_t vsum(const int *counts, int n, MPI_Datatype dt)
{
    uint64_t s = 0;
    for (int i = 0; counts && i < n; i++)
        if (counts[i] > 0)
            s += (uint64_t)counts[i];
    return s * tsize(dt);
}

/* bytes of n counts, each of its own type */
static inline uint64_t wsum(const int *counts, const MPI_Datatype *types, int n)
{
    uint64_t s = 0;
    for (int i = 0; counts && types && i < n; i++)
        if (counts[i] > 0)
            s += (uint64_t)counts[i] * tsize(types[i]);
    return s;
}

/* bytes of this rank's own entry of a counts array */
static inline uint64_t own_count(const int *counts, MPI_Comm comm, MPI_Datatype dt)
{
    int r = counts ? crank(comm) : -1;
    return r >= 0 ? nbytes(counts[r], dt) : 0;
}

/* ---- the counting call of each class ---- */

static inline void hbp_count_mpi(unsigned m, uint64_t calls, uint64_t sent, uint64_t received)
{
    hbp_add(m, calls);
    hbp_add(HBP_M_BYTES_SENT, sent);
    hbp_add(HBP_M_BYTES_RECEIVED, received);
}

/* the end of an all-to-all collective: a segment boundary or a class count */
static inline void hbp_boundary(unsigned code, MPI_Comm comm, int rc, uint64_t sent,
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

static inline void hbp_count_mpiio(unsigned m, unsigned m_bytes, uint64_t bytes)
{
    hbp_add(m, 1);
    hbp_add(m_bytes, bytes);
}

#endif /* HBP_WRAP_MPI_H */
