/*
 * internal.h -- private state and the hot path of libhbprof.
 *
 * Layout of the code (one file per intercepted API, DESIGN.md):
 *   core.c        state, configuration, MPI_Init/Finalize glue, segment ends,
 *                 the computation counter, warnings
 *   bins.c        the per-rank online bin tables and the program-wide merge
 *   rankfile.c    the per-rank stream: growing MAP_SHARED file, publication of
 *                 records, reading it back (backward and forward) at Finalize
 *   runfile.c     the collective finalize step: gather bins, merge, stream
 *                 every rank's records to rank 0, write the run file and the
 *                 injection truth CSV
 *   wrap_mpi.list   the PMPI wrappers (MPI and MPI-IO), one line each, and
 *   wrap_mpi.h      what they count; tools/gen_wrappers.py generates
 *                   build/wrap_mpi.gen.c from them and the installed mpi.h
 *   wrap_posix.list the libc wrappers (open/close/read/write/... and stdio)
 *   wrap_posix.h    and what they share -> build/wrap_posix.gen.c
 *   inject.c      the interference injector (Gaussian sleeps)
 *   ending.c      how the rank ended (signals, exit, _exit, MPI_Abort), and the
 *                 end-of-process check for MPI calls not seen
 *   fortran.c     what the generated Fortran wrappers need
 *   beats.c       heartbeats of the rank through libhbtrace when it is loaded
 *                 too (blocking collectives, or HBTRACE_MPI_BEATS's functions)
 *
 * Concurrency model: everything is done by the thread that called MPI_Init
 * (the "main" thread, hbp_tls.main). Other threads pass through every
 * wrapper after one TLS load. Within the main thread, hbp_tls.depth makes
 * nested calls (an MPI call's own I/O, the profiler's own work) pass through.
 * The hot path takes no lock; its system calls are the clock reads
 * (vDSO) and the computation counter (one read() or clock_gettime of the
 * thread CPU clock) on entry and on exit of an intercepted call.
 */
#ifndef HBP_INTERNAL_H
#define HBP_INTERNAL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "../../src/clock.h"
#include "hbprof.h"
#include "hbprof_format.h"

#define HBP_EXPORT __attribute__((visibility("default")))
#define HBP_HIDDEN __attribute__((visibility("hidden")))
#define HBP_COLD   __attribute__((noinline, cold))

/* hbp_g.state */
enum {
    HBP_S_UNINIT = 0,  /* before MPI_Init (or HBPROF_DISABLE: stays here) */
    HBP_S_ON     = 1,  /* profiling the main thread */
    HBP_S_OFF    = 2,  /* failed: pass-through, but takes part in Finalize */
    HBP_S_FINAL  = 3,  /* inside or after MPI_Finalize: pass-through */
};

/* Bytes of one per-rank extent: a whole number of records and of pages. */
#define HBP_EXTENT_SIZE (HBP_RANK_RECORD_SIZE * 4096u * 2u)

/* A per-rank record as the writer sees it: 44 bytes of body, then the
 * kind/flags word that publishes it (same bytes as the structs of
 * hbprof_format.h; core.c checks the layouts agree). */
struct hbp_slot {
    unsigned char body[44];
    uint32_t kindflags;
};

/* the kind of a record from its kind/flags word (kind in the first two
 * bytes, in this machine's byte order) */
static inline uint16_t hbp_kind_of(uint32_t kindflags)
{
    union { struct { uint16_t kind, flags; } s; uint32_t w; } u;
    u.w = kindflags;
    return u.s.kind;
}

struct hbp_tls {
    int depth;     /* >0: inside an intercepted call (or the profiler) */
    int main;      /* this is the thread that called MPI_Init */
    int beating;   /* inside a call that beats (any thread): nested calls do not */
};

extern __thread struct hbp_tls hbp_tls
    __attribute__((tls_model("initial-exec"))) HBP_HIDDEN;

/* One metric's per-rank bins. */
struct hbp_bins {
    double   value[HBP_RANK_BINS];
    uint64_t count[HBP_RANK_BINS];   /* 0: free slot */
    uint16_t order[HBP_RANK_BINS];   /* used slots by ascending value */
    double   gap[HBP_RANK_BINS];     /* gap[i]: relative distance of order[i]
                                        and order[i+1] (i < n-1) */
    uint16_t n;                      /* used slots */
};

struct hbp_writer {
    int      fd;
    struct hbp_file_header *hdr;     /* mapping of the first page */
    char    *ext;                    /* mapping of the current extent */
    uint64_t ext_index;              /* its number, from 0 */
    uint32_t ext_used;               /* bytes used in it */
    uint64_t records;                /* records published */
    uint64_t segments;               /* SEGMENT records published */
};

struct hbp_inject {
    unsigned families;               /* HBP_INJ_*; 0: injector off */
    double   mean_ns, sd_ns, prob;
    uint64_t seed;
    uint64_t s[4];                   /* xoshiro256** state of this rank */
    uint64_t seg_ns;                 /* current segment: slept ns */
    uint32_t seg_calls;              /* current segment: delayed calls */
};

struct hbp_global {
    int      state;                  /* HBP_S_*, atomic */
    int      participating;          /* took part in the collective start:
                                        must take part in Finalize */
    int      quiet;
    int      warned;                 /* atomic: one warning per process */
    int      keep;
    int      preload;
    int      rank, nranks;
    MPI_Comm comm;                   /* duplicate of MPI_COMM_WORLD for us */
    uint32_t boundary_mask;
    uint32_t comp_source;            /* HBP_COMP_* */
    int      perf_fd;
    pid_t    pid;
    uint64_t t0;                     /* CLOCK_MONOTONIC when MPI_Init returned */
    int64_t  t0_real;
    uint64_t run_ns;
    uint64_t seg_start;              /* start of the current segment */
    uint32_t segment;                /* number of the current segment */
    uint64_t acc[HBP_METRIC_COUNT];  /* current segment's raw values */
    uint64_t comp_mark;              /* counter when the main thread last left
                                        an intercepted call */
    uint64_t cpu_val, cpu_wall;      /* last real CPU-time reading and the
                                        CLOCK_MONOTONIC time it was taken */
    /* the sampled path (hbp_poll_enter): */
    double   poll_pending;           /* estimated cost of the unsampled calls
                                        since comp_mark, counter units */
    uint64_t poll_c0;                /* counter at the sampled call's entry */
    double   sample_bias;            /* what measuring a call adds to it */
    /* how the process met MPI (the end-of-run check of core.c) */
    int      saw_init, saw_finalize;
    pid_t    ppid;                   /* parent (launcher daemon) at MPI_Init */
    struct hbp_bins bins[HBP_METRIC_COUNT];
    struct hbp_writer w;
    struct hbp_inject inj;
    char     host[HBP_HOST_SIZE];
    char     dir[4096];
    char     path[4352];             /* this rank's file */
};

extern struct hbp_global hbp_g HBP_HIDDEN;

/* ---- core.c ---- */
HBP_HIDDEN void hbp_start(void);                 /* after PMPI_Init* returned */
HBP_HIDDEN void hbp_finalize(void);              /* before PMPI_Finalize */
/* ---- ending.c ---- */
/* How this rank ended (HBP_END_*), into its file's header at once; the first
 * call wins (but MPI_Finalize). Async-signal-safe. */
HBP_HIDDEN void hbp_end_set(uint32_t how, int32_t detail);
HBP_HIDDEN void hbp_abort_seen(int errorcode);   /* before PMPI_Abort */
HBP_HIDDEN void hbp_end_hooks_install(void);     /* once the rank file is open */
HBP_HIDDEN void hbp_segment_end(unsigned coll);  /* inside a boundary wrapper */
HBP_HIDDEN uint64_t hbp_comp_read(void);
HBP_HIDDEN void hbp_fail(const char *what, int err) HBP_COLD;
HBP_HIDDEN void hbp_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
HBP_HIDDEN const char *hbp_getenv(enum hbprof_env e);
/* The next word of a comma or space separated list: skips the separators,
 * leaves *s at the word, returns its length (0: the list is over). */
HBP_HIDDEN size_t hbp_list_word(const char **s);
/* w[0..len) names the MPI function `name` (given without MPI_): any case,
 * the MPI_ prefix optional */
HBP_HIDDEN int  hbp_mpi_name_is(const char *w, size_t len, const char *name);
HBP_HIDDEN int  hbp_env_flag(enum hbprof_env e);   /* set, not empty, not "0" */
HBP_HIDDEN void hbp_fill_header(struct hbp_file_header *h, int run_file);
HBP_HIDDEN void hbp_fill_metric_table(struct hbp_metric_entry *t, uint32_t comp_source);
HBP_HIDDEN ssize_t hbp_pwrite_all(int fd, const void *buf, size_t n, uint64_t off);
HBP_HIDDEN ssize_t hbp_pread_all(int fd, void *buf, size_t n, uint64_t off);

/* ---- bins.c ---- */
HBP_HIDDEN void hbp_bins_reset(struct hbp_bins *b);
HBP_HIDDEN double hbp_reldist(double a, double b);
/* Place v in metric m's table; logs the changes; returns the slot or -1
 * if writing a log record failed. */
HBP_HIDDEN int  hbp_bins_add(unsigned m, uint64_t v);
/* Program-wide merge: n input bins (value, count > 0) -> at most maxbins
 * output bins sorted by value; map[i] = output index of input i. Returns
 * the number of output bins, or -1 (no memory). */
HBP_HIDDEN int  hbp_bins_merge_offline(const double *value, const uint64_t *count,
                                       size_t n, unsigned maxbins, double *out_value,
                                       uint64_t *out_count, uint16_t *map);

/* ---- rankfile.c ---- */
HBP_HIDDEN int  hbp_file_open(void);
HBP_HIDDEN int  hbp_file_put(const void *record);   /* 48 bytes, kind at 44 */
HBP_HIDDEN int  hbp_file_finish(void);
typedef int (*hbp_visit_fn)(const struct hbp_slot *rec, uint16_t kind, void *arg);
/* Visit the records of this rank's finished file, last to first (backward)
 * or first to last; fn gets each record and its kind. Returns 0, or -1 on a
 * read error. */
HBP_HIDDEN int  hbp_file_visit(int backward, hbp_visit_fn fn, void *arg);
HBP_HIDDEN void hbp_file_close(int unlink_it);

/* ---- runfile.c ---- */
HBP_HIDDEN void hbp_run_finalize(int ok);   /* ok: this rank's file is complete */

/* ---- beats.c (the tables: build/wrap_mpi.gen.c, by wrapper number) ---- */
extern const unsigned hbp_wrap_count HBP_HIDDEN;
extern const char *const hbp_wrap_name[] HBP_HIDDEN;
extern const unsigned char hbp_wrap_collective[] HBP_HIDDEN;
enum { HBP_KIND_COLLECTIVE = 1, HBP_KIND_P2P = 2, HBP_KIND_POLLING = 3, HBP_KIND_OTHER = 4 };
extern const unsigned char hbp_wrap_kind[] HBP_HIDDEN;   /* HBP_KIND_* */
extern unsigned char hbp_beat_on[] HBP_HIDDEN;   /* 0, or the event of its beats */
HBP_HIDDEN void hbp_beats_init(void);            /* after PMPI_Init* succeeded */
HBP_HIDDEN int  hbp_beat_enter(void);
HBP_HIDDEN void hbp_beat_done(unsigned i, const void *fn, uint64_t t0);

/*
 * Wrapper number i is about to call MPI: 1 if the call beats (then the wrapper
 * calls hbp_beat_done after it). A function that does not beat pays one byte
 * load; hbp_beat_on is all zero unless libhbtrace's hbtrace_mpi_beat was found.
 */
static inline int hbp_beat_want(unsigned i)
{
    return __builtin_expect(hbp_beat_on[i] != 0, 0) && hbp_beat_enter();
}

/* ---- inject.c ---- */
HBP_HIDDEN void hbp_inject_config(void);
HBP_HIDDEN void hbp_inject_delay(void) HBP_COLD;   /* hbp_inject_hit(), then if so hbp_inject_sleep() */
HBP_HIDDEN int hbp_inject_hit(void);               /* one draw: is this call delayed? */
HBP_HIDDEN void hbp_inject_sleep(void) HBP_COLD;   /* two draws: the delay, then the sleep */

static inline int hbp_state(void)
{
    return __atomic_load_n(&hbp_g.state, __ATOMIC_RELAXED);
}

static inline uint64_t hbp_now_ns(void)
{
    return hb_mono_ns();
}

/*
 * The computation counter now. The instruction counter is read every time.
 * Thread CPU time costs a system call (about 1 us in a VM), so it is read
 * only when at least HBP_CPU_GATE_NS of wall time passed since the last real
 * reading; within that window wall time stands in for CPU time (the thread
 * is assumed to have run all along: the error is below the window, and only
 * if it was descheduled inside it). Any interval that contains a longer
 * call or a longer stretch of computation is therefore measured exactly at
 * both ends.
 */
#define HBP_CPU_GATE_NS 10000u

static inline uint64_t hbp_comp_now(void)
{
    if (hbp_g.comp_source == HBP_COMP_CPUTIME) {
        uint64_t w = hbp_now_ns();
        if (w - hbp_g.cpu_wall < HBP_CPU_GATE_NS)
            return hbp_g.cpu_val + (w - hbp_g.cpu_wall);
        hbp_g.cpu_val = hbp_comp_read();
        hbp_g.cpu_wall = w;
        return hbp_g.cpu_val;
    }
    return hbp_comp_read();
}

/* close the current stretch of computation (an estimate may have run ahead
 * of the next real reading: never count backwards); the polls made in it
 * without a clock reading are taken out at their sampled mean cost */
static inline void hbp_comp_pause(void)
{
    uint64_t c = hbp_comp_now();
    if (c > hbp_g.comp_mark) {
        uint64_t d = c - hbp_g.comp_mark;
        if (hbp_g.poll_pending > 0) {
            double est = hbp_g.poll_pending;
            d = est >= (double)d ? 0 : d - (uint64_t)est;
        }
        hbp_g.acc[HBP_M_COMPUTATION] += d;
    }
    hbp_g.poll_pending = 0.0;
    hbp_g.comp_mark = c;
}

/*
 * Entry of an intercepted call of family `fam` (HBP_INJ_*). Returns 1 if the
 * call is the main thread's outermost one while profiling: then the caller
 * counts it and must call hbp_leave() after the real call. Returns 0 for a
 * pass-through call (nothing else to do).
 */
static inline int hbp_enter(unsigned fam)
{
    struct hbp_tls *t = &hbp_tls;
    if (!t->main || t->depth || hbp_state() != HBP_S_ON)
        return 0;
    t->depth = 1;
    hbp_comp_pause();
    if (__builtin_expect((hbp_g.inj.families & fam) != 0, 0))
        hbp_inject_delay();
    return 1;
}

static inline void hbp_leave(void)
{
    uint64_t c = hbp_comp_now();
    if (c > hbp_g.comp_mark)
        hbp_g.comp_mark = c;
    hbp_tls.depth = 0;
}

/*
 * The sampled path (classes poll and local: MPI_Test*, Iprobe, Improbe,
 * Request_get_status, Win_test; MPI_Comm_rank, MPI_Type_size and the other
 * local calls). Such a call costs 5-30 ns in MPI; two clock reads would cost
 * 60-100. So wrapper i reads no clock but on its first call and one call in
 * HBP_POLL_SAMPLE after, which go the full way and measure what the call cost
 * in computation-counter units (hbp_call_mean[i], a moving mean); each other
 * call adds that mean to hbp_g.poll_pending, which the next hbp_comp_pause
 * takes out of the computation. With the injector on, a call it delays goes
 * the full way; the others stay on the sampled path (measuring every call
 * would put the measurement's own cost into the computation: in HPCC's
 * millions of MPI_Test it tripled the work the profile records).
 * Returns 0: pass through; 1: unsampled; 2: full (hbp_enter); 3: sampled.
 */
#define HBP_POLL_SAMPLE 64u

extern uint32_t hbp_call_n[] HBP_HIDDEN;     /* generated, by wrapper number */
extern double hbp_call_mean[] HBP_HIDDEN;
HBP_HIDDEN int hbp_poll_sample_enter(void);
HBP_HIDDEN void hbp_poll_sample_leave(unsigned i);

static inline __attribute__((always_inline)) int hbp_poll_enter(unsigned i)
{
    struct hbp_tls *t = &hbp_tls;
    if (!t->main || t->depth || hbp_state() != HBP_S_ON)
        return 0;
    if (__builtin_expect((hbp_g.inj.families & HBP_INJ_MPI) != 0, 0) && hbp_inject_hit()) {
        t->depth = 1;   /* a delayed call: the full way, the sleep outside the computation */
        hbp_comp_pause();
        hbp_inject_sleep();
        return 2;
    }
    if (__builtin_expect((++hbp_call_n[i] & (HBP_POLL_SAMPLE - 1)) != 1, 1)) {
        t->depth = 1;
        hbp_g.poll_pending += hbp_call_mean[i];
        return 1;
    }
    return hbp_poll_sample_enter();
}

/*
 * The lean front of the sampled path (gen_wrappers.py, emit_mpi): the polling
 * calls and the pure local queries (MPI_Comm_rank, MPI_Type_size, ...:
 * _PURE_QUERY, they read the library's state and call nothing back) go through
 * this before the full wrapper, which only the calls that need it reach: the
 * sampled one in HBP_POLL_SAMPLE, any call while the injector is on for MPI, one
 * that beats. Returns
 *   1: nothing to do after the call: the wrapper tail-calls the real function
 *      (not profiling this call; or an unsampled pure query, counted here);
 *   2: an unsampled polling call, counted here, depth marked (mark != 0): the
 *      wrapper calls the real function, then clears hbp_tls.depth (a poll may
 *      progress the library, which may call wrapped functions: read, write);
 *   0: the full wrapper (hbp_poll_enter decides again, counting once).
 * Counted like hbp_poll_enter's unsampled calls: hbp_call_n, and the mean cost
 * into hbp_g.poll_pending, so that their time stays MPI time.
 */
static inline __attribute__((always_inline)) int hbp_lean_enter(unsigned i, int mark)
{
    if (__builtin_expect(hbp_beat_on[i] != 0, 0))
        return 0;
    struct hbp_tls *t = &hbp_tls;
    if (!t->main || t->depth || hbp_state() != HBP_S_ON)
        return 1;
    uint32_t n = hbp_call_n[i] + 1;
    if (__builtin_expect((hbp_g.inj.families & HBP_INJ_MPI) != 0 || (n & (HBP_POLL_SAMPLE - 1)) == 1, 0))
        return 0;
    hbp_call_n[i] = n;
    hbp_g.poll_pending += hbp_call_mean[i];
    if (mark) {
        t->depth = 1;
        return 2;
    }
    return 1;
}

static inline __attribute__((always_inline)) void hbp_poll_leave(int how, unsigned i)
{
    if (how == 3)
        hbp_poll_sample_leave(i);
    else if (how == 2)
        hbp_leave();
    else
        hbp_tls.depth = 0;
}

static inline void hbp_add(unsigned m, uint64_t v)
{
    hbp_g.acc[m] += v;
}

#endif /* HBP_INTERNAL_H */
