/*
 * hbprof.h -- libhbprof: PMPI segment profiler and interference injector.
 *
 * There is no API: the library works by interposition. Either preload it,
 *
 *     mpirun -x LD_PRELOAD=/path/to/libhbprof.so -np 4 ./app
 *
 * or link it before the MPI library (mpicc ... -L<dir> -lhbprof). It wraps
 * the MPI calls through the PMPI profiling interface and the POSIX I/O calls
 * of libc (resolved with dlsym(RTLD_NEXT)).
 *
 * What it measures (seed 004, SPEC 6): the run is cut into segments at the
 * end of every blocking all-to-all collective on a communicator of the size
 * of MPI_COMM_WORLD (the boundary set, HBPROF_BOUNDARIES). Segment k is the
 * k-th such collective on every rank; segment 0 starts when MPI_Init returns,
 * the last one ends when MPI_Finalize is called. Per segment and rank: the
 * exact wall duration and 20 metrics (hbprof_format.h, HBP_M_*), quantised
 * into at most 256 bins per metric and rank. See docs/profile-format.md.
 *
 * Only the thread that called MPI_Init is profiled (MPI_THREAD_FUNNELED or
 * SERIALIZED from that thread is fine): MPI and I/O calls of other threads
 * pass through uncounted and undelayed, and the computation metric counts
 * that thread alone. Calls made inside an intercepted call (the MPI library's
 * own I/O, an MPI-IO implementation's pwrite) are not counted again.
 *
 * Files: every rank streams hbprof-<host>-<pid>-r<rank>.hbp into HBPROF_DIR
 * while it runs. In MPI_Finalize every rank finishes its file, rank 0 writes
 * the run file hbprof-<host>-<pid of rank 0>.hbp (and, with the injector,
 * <run file>.inject.csv), and the per-rank files are removed. All ranks must
 * see the same HBPROF_DISABLE (the finalize step is collective).
 *
 * Failure policy: the profiler never ends the program nor changes its exit
 * status. Any failure prints one warning on stderr ("hbprof: ...") and turns
 * profiling off on that rank (its calls pass through); that rank still takes
 * part in the collective finalize step, as a rank without records.
 *
 * Environment: every variable, with its meaning and default, is one line
 * of hbprof_env.def.
 */
#ifndef HBPROF_H
#define HBPROF_H

#define HBPROF_VERSION_STRING "0.1.0"

/* the environment variables: the enumerator is the variable's name */
enum hbprof_env {
#define HBP_ENV(name, description) name,
#include "hbprof_env.def"
#undef HBP_ENV
    HBPROF_ENV_COUNT
};

/* "HBPROF_DIR" for HBPROF_DIR, ... */
static inline const char *hbprof_env_name(enum hbprof_env e)
{
    switch (e) {
#define HBP_ENV(name, description) case name: return #name;
#include "hbprof_env.def"
#undef HBP_ENV
    case HBPROF_ENV_COUNT:
        break;
    }
    return "HBPROF_?";
}

#endif /* HBPROF_H */
