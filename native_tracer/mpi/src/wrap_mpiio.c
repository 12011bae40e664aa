/*
 * wrap_mpiio.c -- PMPI wrappers: MPI-IO.
 *
 * Counted: MPI_File_open (mpiio_open), MPI_File_close (mpiio_close), every
 * read and write call -- blocking, individual or collective, explicit
 * offset, shared or ordered pointer, nonblocking (iread/iwrite...) and the
 * _begin half of split collectives -- once each, with count x type size
 * bytes when it returned MPI_SUCCESS. The _end halves, File_sync,
 * File_set_view, File_set_size, File_preallocate and File_seek(_shared)
 * are intercepted for time only. The MPI-IO implementation's own POSIX
 * calls happen inside these wrappers and are not counted again.
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

#define IO HBP_INJ_MPIIO

static inline void io(unsigned m, unsigned mbytes, int rc, int n, MPI_Datatype dt)
{
    hbp_add(m, 1);
    int s = 0;
    if (rc == MPI_SUCCESS && n > 0 && dt != MPI_DATATYPE_NULL &&
        PMPI_Type_size(dt, &s) == MPI_SUCCESS && s > 0)
        hbp_add(mbytes, (uint64_t)n * (uint64_t)s);
}

#define RD(n, dt) io(HBP_M_MPIIO_READ, HBP_M_MPIIO_READ_BYTES, rc, n, dt)
#define WR(n, dt) io(HBP_M_MPIIO_WRITE, HBP_M_MPIIO_WRITE_BYTES, rc, n, dt)

HBP_WRAP(IO, File_open, (MPI_Comm comm, const char *name, int amode, MPI_Info info, MPI_File *fh),
         (comm, name, amode, info, fh), hbp_add(HBP_M_MPIIO_OPEN, 1))
HBP_WRAP(IO, File_close, (MPI_File *fh), (fh), hbp_add(HBP_M_MPIIO_CLOSE, 1))

/* reads */
HBP_WRAP(IO, File_read, (MPI_File fh, void *buf, int n, MPI_Datatype dt, MPI_Status *st),
         (fh, buf, n, dt, st), RD(n, dt))
HBP_WRAP(IO, File_read_all, (MPI_File fh, void *buf, int n, MPI_Datatype dt, MPI_Status *st),
         (fh, buf, n, dt, st), RD(n, dt))
HBP_WRAP(IO, File_read_at,
         (MPI_File fh, MPI_Offset off, void *buf, int n, MPI_Datatype dt, MPI_Status *st),
         (fh, off, buf, n, dt, st), RD(n, dt))
HBP_WRAP(IO, File_read_at_all,
         (MPI_File fh, MPI_Offset off, void *buf, int n, MPI_Datatype dt, MPI_Status *st),
         (fh, off, buf, n, dt, st), RD(n, dt))
HBP_WRAP(IO, File_read_shared, (MPI_File fh, void *buf, int n, MPI_Datatype dt, MPI_Status *st),
         (fh, buf, n, dt, st), RD(n, dt))
HBP_WRAP(IO, File_read_ordered, (MPI_File fh, void *buf, int n, MPI_Datatype dt, MPI_Status *st),
         (fh, buf, n, dt, st), RD(n, dt))
HBP_WRAP(IO, File_iread, (MPI_File fh, void *buf, int n, MPI_Datatype dt, MPI_Request *rq),
         (fh, buf, n, dt, rq), RD(n, dt))
HBP_WRAP(IO, File_iread_all, (MPI_File fh, void *buf, int n, MPI_Datatype dt, MPI_Request *rq),
         (fh, buf, n, dt, rq), RD(n, dt))
HBP_WRAP(IO, File_iread_at,
         (MPI_File fh, MPI_Offset off, void *buf, int n, MPI_Datatype dt, MPI_Request *rq),
         (fh, off, buf, n, dt, rq), RD(n, dt))
HBP_WRAP(IO, File_iread_at_all,
         (MPI_File fh, MPI_Offset off, void *buf, int n, MPI_Datatype dt, MPI_Request *rq),
         (fh, off, buf, n, dt, rq), RD(n, dt))
HBP_WRAP(IO, File_iread_shared, (MPI_File fh, void *buf, int n, MPI_Datatype dt, MPI_Request *rq),
         (fh, buf, n, dt, rq), RD(n, dt))
HBP_WRAP(IO, File_read_all_begin, (MPI_File fh, void *buf, int n, MPI_Datatype dt),
         (fh, buf, n, dt), RD(n, dt))
HBP_WRAP(IO, File_read_at_all_begin, (MPI_File fh, MPI_Offset off, void *buf, int n, MPI_Datatype dt),
         (fh, off, buf, n, dt), RD(n, dt))
HBP_WRAP(IO, File_read_ordered_begin, (MPI_File fh, void *buf, int n, MPI_Datatype dt),
         (fh, buf, n, dt), RD(n, dt))

/* writes */
HBP_WRAP(IO, File_write, (MPI_File fh, const void *buf, int n, MPI_Datatype dt, MPI_Status *st),
         (fh, buf, n, dt, st), WR(n, dt))
HBP_WRAP(IO, File_write_all, (MPI_File fh, const void *buf, int n, MPI_Datatype dt, MPI_Status *st),
         (fh, buf, n, dt, st), WR(n, dt))
HBP_WRAP(IO, File_write_at,
         (MPI_File fh, MPI_Offset off, const void *buf, int n, MPI_Datatype dt, MPI_Status *st),
         (fh, off, buf, n, dt, st), WR(n, dt))
HBP_WRAP(IO, File_write_at_all,
         (MPI_File fh, MPI_Offset off, const void *buf, int n, MPI_Datatype dt, MPI_Status *st),
         (fh, off, buf, n, dt, st), WR(n, dt))
HBP_WRAP(IO, File_write_shared,
         (MPI_File fh, const void *buf, int n, MPI_Datatype dt, MPI_Status *st),
         (fh, buf, n, dt, st), WR(n, dt))
HBP_WRAP(IO, File_write_ordered,
         (MPI_File fh, const void *buf, int n, MPI_Datatype dt, MPI_Status *st),
         (fh, buf, n, dt, st), WR(n, dt))
HBP_WRAP(IO, File_iwrite, (MPI_File fh, const void *buf, int n, MPI_Datatype dt, MPI_Request *rq),
         (fh, buf, n, dt, rq), WR(n, dt))
HBP_WRAP(IO, File_iwrite_all,
         (MPI_File fh, const void *buf, int n, MPI_Datatype dt, MPI_Request *rq),
         (fh, buf, n, dt, rq), WR(n, dt))
HBP_WRAP(IO, File_iwrite_at,
         (MPI_File fh, MPI_Offset off, const void *buf, int n, MPI_Datatype dt, MPI_Request *rq),
         (fh, off, buf, n, dt, rq), WR(n, dt))
HBP_WRAP(IO, File_iwrite_at_all,
         (MPI_File fh, MPI_Offset off, const void *buf, int n, MPI_Datatype dt, MPI_Request *rq),
         (fh, off, buf, n, dt, rq), WR(n, dt))
HBP_WRAP(IO, File_iwrite_shared,
         (MPI_File fh, const void *buf, int n, MPI_Datatype dt, MPI_Request *rq),
         (fh, buf, n, dt, rq), WR(n, dt))
HBP_WRAP(IO, File_write_all_begin, (MPI_File fh, const void *buf, int n, MPI_Datatype dt),
         (fh, buf, n, dt), WR(n, dt))
HBP_WRAP(IO, File_write_at_all_begin,
         (MPI_File fh, MPI_Offset off, const void *buf, int n, MPI_Datatype dt),
         (fh, off, buf, n, dt), WR(n, dt))
HBP_WRAP(IO, File_write_ordered_begin, (MPI_File fh, const void *buf, int n, MPI_Datatype dt),
         (fh, buf, n, dt), WR(n, dt))

/* time only */
HBP_WRAP(IO, File_read_all_end, (MPI_File fh, void *buf, MPI_Status *st), (fh, buf, st), (void)0)
HBP_WRAP(IO, File_read_at_all_end, (MPI_File fh, void *buf, MPI_Status *st), (fh, buf, st), (void)0)
HBP_WRAP(IO, File_read_ordered_end, (MPI_File fh, void *buf, MPI_Status *st), (fh, buf, st),
         (void)0)
HBP_WRAP(IO, File_write_all_end, (MPI_File fh, const void *buf, MPI_Status *st), (fh, buf, st),
         (void)0)
HBP_WRAP(IO, File_write_at_all_end, (MPI_File fh, const void *buf, MPI_Status *st), (fh, buf, st),
         (void)0)
HBP_WRAP(IO, File_write_ordered_end, (MPI_File fh, const void *buf, MPI_Status *st), (fh, buf, st),
         (void)0)
HBP_WRAP(IO, File_sync, (MPI_File fh), (fh), (void)0)
HBP_WRAP(IO, File_set_view,
         (MPI_File fh, MPI_Offset disp, MPI_Datatype etype, MPI_Datatype ftype, const char *rep,
          MPI_Info info),
         (fh, disp, etype, ftype, rep, info), (void)0)
HBP_WRAP(IO, File_set_size, (MPI_File fh, MPI_Offset size), (fh, size), (void)0)
HBP_WRAP(IO, File_preallocate, (MPI_File fh, MPI_Offset size), (fh, size), (void)0)
HBP_WRAP(IO, File_seek, (MPI_File fh, MPI_Offset off, int whence), (fh, off, whence), (void)0)
HBP_WRAP(IO, File_seek_shared, (MPI_File fh, MPI_Offset off, int whence), (fh, off, whence), (void)0)
