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
 * Environment:
 *   HBPROF_DISABLE=1         pure pass-through: no file, no collective, no delay
 *   HBPROF_DIR=dir           where files go (default: the working directory)
 *   HBPROF_QUIET=1           no warning on stderr
 *   HBPROF_BOUNDARIES=list   comma list of collectives that end segments, from
 *                            Alltoall Alltoallv Alltoallw Allreduce Allgather
 *                            Allgatherv Barrier Reduce_scatter Reduce_scatter_block
 *                            (case-insensitive, "MPI_" prefix optional; default:
 *                            all nine; unknown names are warned about and skipped)
 *   HBPROF_COMPUTATION=instructions|cputime
 *                            force the computation source (default: instructions
 *                            if perf_event_open allows a user-space instruction
 *                            counter on every rank, else cputime; forcing
 *                            instructions where it cannot be opened warns and
 *                            falls back to cputime)
 *   HBPROF_KEEP_RANK_FILES=1 keep the per-rank files after the run file is written
 *   HBPROF_INJECT=MEAN_US,SD_US,PROB
 *                            inject delays: before each intercepted call of the
 *                            chosen families, with probability PROB, sleep
 *                            max(0, N(MEAN_US, SD_US)) microseconds
 *                            (clock_nanosleep on CLOCK_MONOTONIC)
 *   HBPROF_INJECT_SEED=n     seed of the delays (default 1); rank r draws from
 *                            its own stream derived from (n, r)
 *   HBPROF_INJECT_CALLS=list comma list of mpi, posix, mpiio (default: all three)
 */
#ifndef HBPROF_H
#define HBPROF_H

#define HBPROF_VERSION_STRING "0.1.0"

#define HBPROF_ENV_DISABLE     "HBPROF_DISABLE"
#define HBPROF_ENV_DIR         "HBPROF_DIR"
#define HBPROF_ENV_QUIET       "HBPROF_QUIET"
#define HBPROF_ENV_BOUNDARIES  "HBPROF_BOUNDARIES"
#define HBPROF_ENV_COMPUTATION "HBPROF_COMPUTATION"
#define HBPROF_ENV_KEEP        "HBPROF_KEEP_RANK_FILES"
#define HBPROF_ENV_INJECT      "HBPROF_INJECT"
#define HBPROF_ENV_INJECT_SEED "HBPROF_INJECT_SEED"
#define HBPROF_ENV_INJECT_CALLS "HBPROF_INJECT_CALLS"

#endif /* HBPROF_H */
