/*
 * internal.h -- private state and the hot path of libhbtrace.
 *
 * Layout of the code:
 *   internal.h   this file: shared state, declarations, the beat hot path
 *   file.c       the trace file: name, creation or take-over, header, growth
 *   chunks.c     the chunk area in units: handing out chunks, free runs of
 *                units, the units an ended thread gives back
 *   core.c       thread registration, records off the hot path,
 *                fork handling of the file, the trim at exit
 *   meta.c       the metadata text block
 *   env.c        the environment variables, named once in
 *                include/hbtrace_env.def
 *   background.c what the tracer's own threads share: starting one,
 *                sleeping until a deadline, the orphan check, the
 *                after-fork registry
 *   prefault.c   the background pre-faulter: keeps the chunk area ahead of
 *                the allocation point populated, so that beating threads do
 *                not take the page faults of fresh file pages
 *   api.c        the public API (hbtrace.h)
 *   lifecycle.c  pthread_create/pthread_exit/_exit interposition, on_exit,
 *                the constructor
 *   signals.c    fatal-signal records, sigaction/signal interposition
 *   monitor.h    the online behavior monitor (HBTM), shared by:
 *   monitor.c      configuration, the heart table, entry points, final
 *                  passes, Heartbeat_HeartRate_Adjust
 *   monitor_judge.c    detection of a thread's behavior, BEHAVIOR and
 *                      MONITOR records
 *   monitor_central.c  the central monitor thread
 *   monitor_ring.c     the ring checks
 *   queue.h      the instrumented queues (hbtrace_queue.h), shared by:
 *   queue.c        the ring and its operations
 *   queue_monitor.c    samples, the queue monitor thread, configuration
 *   queue_registry.c   creation, names, destroy, exit, fork
 *   probe.c      the timing probes (hbtrace_probe.h)
 *   status.c     the machine-status sampler
 *   autobeat.h   automatic beats and waits (issue 15), shared by:
 *   autobeat.c     HBTRACE_BEATS, the construct table and its names, the
 *                  beat and wait records, the MPI profiler's entry
 *   gomp.c         the libgomp (GCC OpenMP) wrappers
 *   gomp_known.c   the libgomp entry points gomp.c knows; the check, at the
 *                  first wrapped call, of those the loaded libgomp exports
 *   ompt.c         the OMPT tool for LLVM's libomp (clang), and its
 *                  wrappers of libomp's loop dispatcher; ompt_abi.h the
 *                  OMPT declarations it uses
 *   inject.h     the thread fault injector (docs/inject.md), in inject.c:
 *                HBTRACE_INJECT*, the faults, the truth file; its hooks are
 *                one line each behind hbt_inject_armed (the beat paths here
 *                and in autobeat.c, gomp.c's loop _next, process exit)
 *
 * Concurrency model: each OS thread writes only into chunks it owns, through
 * its initial-exec TLS block (struct hbt_tls), and into its own line of the
 * monitor's heart table (struct hbt_beatline). Shared state (struct hbt_global)
 * is touched only on rare paths: taking a chunk (one atomic add), growing the
 * file and appending metadata (under g.lock, with a timeout), counting lost
 * records (one atomic add into the mapped header). The pre-faulter thread
 * only reads the allocation point, takes g.lock with trylock to grow the
 * file ahead, and is woken (futex) from the rare path of taking a chunk.
 */
#ifndef HBT_INTERNAL_H
#define HBT_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "clock.h"
#include "hbtrace_format.h"
#include "inject.h"

#define HBT_EXPORT __attribute__((visibility("default")))
#define HBT_HIDDEN __attribute__((visibility("hidden")))
#define HBT_COLD   __attribute__((noinline, cold))
/* Not instrumented by ThreadSanitizer (make tsan): the libc interposers that
 * the sanitizer's own start-up reaches (its sigaction interceptor calls the
 * next sigaction, ours) before it can run instrumented code, and what they
 * call. Nothing in a normal build. */
#if defined(__SANITIZE_THREAD__)
#define HBT_NO_TSAN __attribute__((no_sanitize_thread, noinline))
#else
#define HBT_NO_TSAN
#endif

#define HBT_TRACER_VERSION "0.1.0"
#define HBT_NO_SLOT        UINT32_MAX
#define HBT_NO_CREATOR     UINT32_MAX   /* THREAD_START aux when the creator is unknown */

/*
 * A record slot as the writer sees it: the same 32 bytes as struct
 * hbt_record, with kind and flags as one 32-bit word so that they can be
 * published by one release store (see hbtrace_format.h). core.c checks that
 * the layouts agree.
 */
struct hbt_slot {
    uint64_t t_ns;
    uint32_t seq;
    int32_t  thread;
    int32_t  loop;
    int32_t  iter;
    uint32_t aux;
    uint32_t kindflags;   /* kind in the first two bytes, flags in the last two */
};

/* The 32-bit word holding kind at offset 28 and flags at offset 30, in the
 * byte order of this machine. */
static inline uint32_t hbt_kindflags(uint16_t kind, uint16_t flags)
{
    union { struct { uint16_t kind, flags; } s; uint32_t w; } u;
    u.s.kind = kind;
    u.s.flags = flags;
    return u.w;
}

static inline uint16_t hbt_kind_of(uint32_t kindflags)
{
    union { struct { uint16_t kind, flags; } s; uint32_t w; } u;
    u.w = kindflags;
    return u.s.kind;
}

/*
 * One thread's line of the heart table (monitor.c), written only by that
 * thread: the beat path stores its latest beat into it, so that a checker
 * (the central monitor thread, a ring neighbour, Heartbeat_*_Monitor) can
 * judge the thread from one cache line without touching its chunk. 64 bytes.
 */
struct hbt_beatline {
    uint32_t seq;         /* beats recorded so far (release store, last) */
    int32_t  thread;      /* thread number its beats record (as of its first
                             beat, hbt_set_thread, or its latest cold path) */
    uint64_t t_ns;        /* time of its latest beat (release store) */
    uint8_t  state;       /* HBT_HS_* (release store) */
    uint8_t  end_how;     /* HBT_END_* once ENDED */
    uint16_t waiting;     /* HBT_SYNC_* (autobeat.h) while it waits in the OpenMP runtime
                             (a barrier, a taskwait, outside any parallel region), 0 at
                             work: set by gomp.c and ompt.c (hbt_wait_mark) */
    uint32_t wait_us;     /* when its current such wait began: the clock in us, mod
                             2^32 (stored before `waiting`), so that a checker knows
                             how long its team has waited for a thread */
    uint64_t end_ns;      /* time of its THREAD_END, once ENDED */
    int32_t  os_tid;
    uint32_t waited_us;   /* its time in those waits so far, us, mod 2^32 */
    uint64_t first_t;     /* time of its first beat that took the cold path */
    uint32_t first_seq;   /* its beat count then */
    uint32_t gap_ns;      /* written by its checkers: an interval this long (ns) is a gap */
    uint64_t gap_t;       /* the time of its first beat that ended a gap since a checker
                             last took it (and set it to 0); 0: none */
};

/* The unit of work a thread of an OpenMP team is in, for the online monitor judging
 * automatic beats: a chunk of a loop whose chunks it takes one by one, the work since the
 * OpenMP lock it last asked for, or an explicit task it runs (construct id `loop`, of the
 * kind `kind`, begun at `t`: the clock of the beat before it, or for a task its start or
 * the end of its latest wait), `loop` 0 in none. Written by the thread itself (t, then loop
 * with release), read by the monitor (loop with acquire, then t): a pair read across a
 * change has a later t, which makes the unit shorter, never longer. */
enum hbt_unit_kind { HBT_UNIT_CHUNK = 0, HBT_UNIT_LOCK = 1, HBT_UNIT_TASK = 2 };
struct hbt_unit_saved;
struct hbt_unit {
    uint32_t loop;
    uint32_t team;    /* the threads of the outermost team it was last in (hbt_team_mark), 0: not known */
    uint64_t t;
    uint64_t place;   /* where it is in that team's work (hbt_place_mark), 0: not known */
    uint32_t kind;    /* HBT_UNIT_*: what `loop` names (hbt_unit_beat, hbt_unit_task_begin) */
    uint32_t ended;   /* its chunk ended at `t` and the loop gave it no other (libomp:
                         hbt_unit_none); it is in the loop's tail until its next beat */
};

/* A thread's place in the work of its outermost OpenMP team: the team's region instance
 * (hbt_region_instance: a number the master draws for each outermost parallel region) in the
 * high 32 bits, in the low 32 the team barriers of that region it has entered (1 at the first,
 * HBT_PLACE_END at the region's closing barrier and the pool after it). A thread marked
 * waiting at a barrier whose place a teammate at work has passed (or in the pool while a
 * later region's team counts it) was released and has not run since (queued): its mark is
 * stale, and nobody waits for that teammate. */
#define HBT_PLACE_END 0xFFFFFFFFu
#define HBT_PLACE(inst, bar) ((inst) ? ((uint64_t)(inst) << 32 | (uint32_t)(bar)) : 0)

/* Per-thread state. Zero-initialised for every new thread, which means
 * "not registered, no chunk": the first record takes the rare path. The
 * fields the beat path touches come first. */
struct hbt_tls {
    struct hbt_slot *slots;   /* current chunk; slot 0 is its header */
    uint32_t next;            /* next free slot */
    uint32_t limit;           /* the normal path may use slots below this; the
                                 last slot of a chunk is kept for a record that
                                 cannot take a new chunk (signal handler) */
    uint32_t seq;             /* beats recorded by this OS thread */
    int32_t  beat_thread;     /* thread number hbt_beat() records */
    struct hbt_beatline *beat;/* this thread's line of the heart table (or
                                 `sink` beyond the table); set on registration */
    uint64_t next_check;      /* a beat at or after this clock value takes the
                                 monitor's cold path (monitor.c); 0 = at once */
    uint32_t calls;           /* calls since the last recorded one, while the
                                 heart-rate divisor is above 1 */
    int32_t  user_thread;     /* number set by the program, if user_set */
    uint32_t thread_slot;     /* registration order, valid if registered */
    uint32_t chunk_seq;       /* chunks taken so far */
    uint64_t chunk_first;     /* unit number of the current chunk (slots) */
    int      cancel_state;    /* saved by hbt_lock, restored by hbt_unlock */
    uint8_t  registered;
    uint8_t  user_set;
    uint8_t  end_recorded;    /* THREAD_END written (pthread_exit before unwinding) */
    uint8_t  resolving;       /* inside dlsym: do not recurse */
    uint8_t  internal;        /* the tracer's own pre-faulter thread */
    uint8_t  monitor;         /* the tracer's central monitor thread */
    uint8_t  ring_valid;      /* ring checker: ring_slot is the neighbour found last */
    uint8_t  ring_skipped;    /* ... and threads that did not beat yet lay before it */
    uint32_t ring_slot;
    uint32_t ring_n;          /* threads registered when ring_slot was found */
    uint32_t ring_count;      /* ring checks done (rescan every 16th) */
    uint64_t wait_from;       /* when its current wait in the OpenMP runtime began
                                 (hbt_wait_mark) */
    struct hbt_beatline sink; /* `beat` of a thread beyond the heart table */
    struct hbt_unit *unit;    /* this thread's unit of work in its line of the heart
                                 table; NULL beyond the table */
    const struct hbt_unit_saved *unit_end;   /* a task ends: its beat ends its unit and
                                 brings this one back (autobeat.h, hbt_unit_task_end) */
    uint64_t place;           /* its place in its outermost team's work (HBT_PLACE),
                                 copied into unit->place */
    uint32_t team;            /* that team's threads, copied into unit->team */
    uint16_t wait_under;      /* the mark under its current wait in the runtime
                                 (hbt_wait_begin) */
    uint32_t auto_seq;        /* automatic beats recorded by this OS thread
                                 (autobeat.c); seq counts the API's only */
    uint64_t last_ns;         /* clock of its latest beat or automatic record */
    uint64_t cpu_at_ns;       /* when its CPU clock was last read (0: never) */
    uint64_t cpu_ns;          /* what it read then (hbt_cpu_track) */
    uint64_t rq_ns;           /* its run-queue delay then (schedstat), if rq_known */
    uint8_t  rq_known;
    uint64_t sched_at_ns;     /* end of its last sched span (0: no reading yet) */
    uint64_t sched_first_ns;  /* its first sched reading */
    uint64_t sched_cpu_ns;    /* its CPU clock and run-queue delay then */
    uint64_t sched_rq_ns;
    uint64_t mem_allocated;   /* bytes this thread allocated (memory.c: usable sizes) */
    uint64_t mem_freed;       /* bytes it freed, whoever allocated them */
    uint64_t mem_rec_allocated, mem_rec_freed;   /* as of its last memory record */
    uint64_t mem_at_ns;       /* when it last looked whether to write one */
    uint32_t mem_depth;       /* inside an allocator wrapper: nested calls count once */
    int32_t  mem_thread;      /* thread number of its memory records */
    uint8_t  mem_recorded;    /* it wrote a memory record */
    uint8_t  spin_on;         /* a flag spin of HBT_SPIN_MIN_NS or more is open (ompt.c) */
    uint8_t  spin_marked;     /* ... and it set the monitor's wait mark */
    int32_t  spin_thread;     /* the spin's OpenMP thread number */
    uint32_t spin_calls;      /* flushes of the spin after its first */
    uint64_t spin_cpu_ns;     /* its CPU clock as the spin was last looked at (0: unread) */
    uint64_t spin_cpu_at;     /* when */
    const void *spin_ra;      /* code address of the flush the spin repeats */
    uint64_t spin_first_ns;   /* its first call */
    uint64_t spin_last_ns;    /* its latest call */
    uint64_t spin_first_cpu;  /* its CPU clock at its first call, read only in a victim of the
                                 injector's slow (hbt_inject_times_spins; 0: unread) */
};

/* A thread's CPU time in the gaps between its records (HBT_REC_CPU): every
 * record passes its clock value here; at most every HBT_CPU_READ_NS, and at the
 * end of a gap of HBT_CPU_GAP_NS or more, the cold path reads the thread's CPU
 * clock (one system call) and, for a gap, records what the thread used in it:
 * CPU time since the last reading, less the time from that reading to the gap's
 * start (the thread was recording then, so at work: at most HBT_CPU_READ_NS of
 * CPU time over- or under-counted). It tells a thread that spun through a gap
 * (busy-waiting) from one that slept (blocked). */
#define HBT_CPU_READ_NS 1000000ull   /* 1 ms: a system call of under 1 us, at most 0.1 % */
/* The memory signal (memory.c): at most every 20 ms from the cold path below, and at
 * a thread's end (final 1) or the process's (final 2). */
HBT_HIDDEN void hbt_memory_track(struct hbt_tls *t, uint64_t now, int32_t thread, uint16_t source,
                                 int final);
HBT_HIDDEN void hbt_memory_config(void);
HBT_HIDDEN void hbt_memory_fork_child(void);
HBT_HIDDEN void hbt_cpu_gap(struct hbt_tls *t, uint64_t last, uint64_t now, int32_t thread,
                            uint32_t construct, uint16_t source);

static inline __attribute__((always_inline))
void hbt_cpu_track(struct hbt_tls *t, uint64_t now, int32_t thread, uint32_t construct,
                   uint16_t source)
{
    uint64_t last = t->last_ns;
    t->last_ns = now;
    if (__builtin_expect(now - t->cpu_at_ns >= HBT_CPU_READ_NS, 0))
        hbt_cpu_gap(t, last, now, thread, construct, source);
}

extern __thread struct hbt_tls hbt_tls
    __attribute__((tls_model("initial-exec"))) HBT_HIDDEN;

/* Global state of the tracer (g.state). */
enum {
    HBT_UNINIT = 0,   /* constructor not run yet */
    HBT_ON     = 1,   /* trace file open and mapped */
    HBT_OFF    = 2,   /* disabled or failed: every call is a no-op */
    HBT_LAZY   = 3,   /* fork child: the file is opened by the first record
                         that needs it, so a child that only execs or _exits
                         leaves no file behind */
};

/* Modes of a record that does not fit in the current chunk: what its rare
 * path may do (HBT_M_*), and the combinations the callers use (HBT_MODE_*). */
enum {
    HBT_M_OPEN    = 1u << 0,  /* may open the trace file (first use, fork child) */
    HBT_M_GROW    = 1u << 1,  /* may lock g.lock and grow the file */
    HBT_M_LOST    = 1u << 2,  /* count in lost_records if it cannot be stored */
    HBT_M_RESERVE = 1u << 3,  /* may use the chunk's last, reserved slot */
    HBT_M_SIGNAL  = 1u << 4,  /* async-signal context: no lock, no malloc */
    HBT_M_AHEAD   = 1u << 5,  /* growth ahead by the pre-faulter: a failure
                                 does not stop the tracer (a thread that
                                 really needs the chunk will find out) */

    HBT_MODE_BEAT   = HBT_M_OPEN | HBT_M_GROW | HBT_M_LOST,
    HBT_MODE_API    = HBT_M_OPEN | HBT_M_GROW | HBT_M_LOST | HBT_M_RESERVE,
    HBT_MODE_END    = HBT_M_GROW | HBT_M_LOST | HBT_M_RESERVE,
    HBT_MODE_SIGNAL = HBT_M_LOST | HBT_M_RESERVE | HBT_M_SIGNAL,
};

#define HBT_MAX_EXTENTS 1024
#define HBT_MAX_PIECES  256   /* free runs of units kept for reuse */

struct hbt_extent {
    char     *base;           /* mapping of units [first, first + count) */
    uint64_t  first;
    uint64_t  count;
};

/* The pre-faulter (prefault.c). */
enum {
    HBT_PF_IDLE    = 0,   /* not started (yet) in this process */
    HBT_PF_RUNNING = 1,
    HBT_PF_DEAD    = 2,   /* stopped or failed: never restarted in this process */
};

struct hbt_prefault {
    int       enabled;            /* HBTRACE_PREFAULT, set when the file opens */
    uint64_t  ahead;              /* headroom in units (HBTRACE_PREFAULT_MB) */
    uint64_t  done;               /* atomic: units below this are populated
                                     (or were handed out before the
                                     pre-faulter reached them) */
    uint64_t  claim;              /* atomic: the pre-faulter may be touching
                                     the page of unit claim-1 right now;
                                     0 = none */
    int       run;                /* atomic: HBT_PF_* */
    int       stop;               /* atomic: asks the thread to return */
    int       waiting;            /* atomic: the thread sleeps on word */
    uint32_t  word;               /* futex word, bumped by every wake-up */
    int       have_thread;        /* a joinable thread exists (under lock) */
    pthread_t thread;
    pthread_mutex_t lock;         /* start and stop only, never the hot path */
};

struct hbt_global {
    int state;                          /* HBT_*, atomic */
    int quiet;
    int fd;
    pid_t pid;                          /* process that owns the file */
    uint64_t dev, ino;                  /* identity of the file, to notice a
                                           program that closed or reused fd */
    struct hbt_file_header *hdr;        /* mapping of the first page */
    /* The chunk area is counted in units of HBT_UNIT_SIZE bytes; a chunk
     * is a run of units (hbtrace_format.h). */
    uint32_t unit_slots;                /* slots per unit */
    uint32_t chunk_units;               /* units of the largest chunk */
    uint64_t max_units;                 /* from HBTRACE_MAX_MB */
    uint64_t max_mb;
    uint64_t next_unit;                 /* atomic: the allocation point: units
                                           below it were handed out */
    uint64_t mapped_units;              /* atomic: units backed by a mapping */
    uint64_t file_units;                /* atomic: units inside the allocated
                                           file; below mapped_units only after
                                           the trim at exit */
    uint32_t n_extents;                 /* atomic */
    uint32_t nthreads;                  /* atomic: threads registered */
    int full;                           /* atomic: cap reached or no space */
    int free_lock;                      /* atomic spin lock of `pieces`, only
                                           ever tried, never waited for */
    uint32_t n_pieces;                  /* under free_lock */
    struct hbt_piece { uint64_t first; uint64_t count; } pieces[HBT_MAX_PIECES];
                                        /* unused runs of units below next_unit
                                           (given back by ended threads, gaps
                                           before a chunk that would have
                                           crossed a chunk_units boundary) */
    int full_warned;                    /* atomic */
    int closing;                        /* atomic: trimmed at exit */
    pthread_mutex_t lock;               /* init, growth, metadata, trim */
    struct hbt_prefault pf;
    struct hbt_extent ext[HBT_MAX_EXTENTS];
    char dir[4096];
    char path[4096];
};

extern struct hbt_global hbt_g HBT_HIDDEN;

/* ---- file.c ---- */
HBT_HIDDEN int  hbt_open_trace(void);
HBT_HIDDEN int  hbt_grow_locked(uint64_t need, unsigned mode);
HBT_HIDDEN void hbt_reset_counters(void);
HBT_HIDDEN void hbt_trim_locked(void);

/* ---- chunks.c ---- */
HBT_HIDDEN char *hbt_unit_span(uint64_t i, uint64_t *ext_end);
HBT_HIDDEN struct hbt_slot *hbt_unit_addr(uint64_t i);
HBT_HIDDEN uint64_t hbt_units_handed_out(void);
/* A new chunk for the calling thread (its size: see chunks.c); 0 if none. */
HBT_HIDDEN int  hbt_new_chunk(struct hbt_tls *t, unsigned mode);
/* At a thread's end: give back the unused units of its current chunk. */
HBT_HIDDEN void hbt_release_chunk(struct hbt_tls *t);

/* ---- file.c ---- */
/* The descriptor duplicated to a high number (out of the program's way), the old one closed. */
HBT_HIDDEN int  hbt_move_fd_high(int fd);

/* ---- core.c ---- */
HBT_HIDDEN int  hbt_ensure_open(void);
HBT_HIDDEN void hbt_set_full(unsigned mode, const char *why, int err);
/* One line into HBTRACE_REPORT, if set (core.c says the format). */
HBT_HIDDEN void hbt_report_line(const char *what, const char *where, int err);
/* Hold HBTRACE_REPORT open from now on, for a process left with no descriptor. */
HBT_HIDDEN void hbt_report_hold(void);
HBT_HIDDEN int  hbt_chunk_is_bystander(const struct hbt_slot *chunk, uint32_t max_slots,
                                        int allow_signal);
/* Every chunk handed out so far is a bystander's (see hbt_unlink_if_empty). */
HBT_HIDDEN int  hbt_chunks_are_bystander(int allow_signal);
HBT_HIDDEN int  hbt_file_is_bystander(const char *m, uint64_t size, pid_t pid);
HBT_HIDDEN uint32_t hbt_refill(struct hbt_tls *t, unsigned mode) HBT_COLD;
HBT_HIDDEN void hbt_event(uint16_t kind, uint16_t flags, uint32_t aux, unsigned mode);
HBT_HIDDEN void hbt_emit(uint16_t kind, uint16_t flags, uint32_t seq, int32_t thread,
                         int32_t loop, int32_t iter, uint32_t aux, uint64_t now,
                         unsigned mode);
HBT_HIDDEN int  hbt_put_plain(uint16_t kind, uint16_t flags, uint32_t seq, int32_t thread,
                              int32_t loop, int32_t iter, uint32_t aux, uint64_t t_ns,
                              unsigned mode);
HBT_HIDDEN void hbt_register_thread(struct hbt_tls *t, uint32_t creator, unsigned mode);
HBT_HIDDEN int  hbt_self_slot(uint32_t *slot);
HBT_HIDDEN void hbt_after_fork_child(void);
HBT_HIDDEN int  hbt_unlink_if_empty(int allow_signal);

HBT_HIDDEN void hbt_trim_at_exit(void);
HBT_HIDDEN void hbt_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
HBT_HIDDEN int  hbt_lock(void);
HBT_HIDDEN int  hbt_lock_for_ms(long ms);
HBT_HIDDEN void hbt_unlock(void);

HBT_HIDDEN void hbt_register_quiet(struct hbt_tls *t);
/* A name as NAME records of name space `space` (fragments of 24 bytes, the
 * last with HBT_NAME_LAST), cut at max bytes on a UTF-8 boundary, through
 * hbt_put_plain. 0 when a fragment could not be stored. */
HBT_HIDDEN int  hbt_put_name(uint32_t space, uint32_t id, const char *text, size_t max,
                             unsigned mode);

/* ---- background.c: what the tracer's own threads share ---- */

/* Start a tracer thread with the real pthread_create: every signal blocked,
 * named `name` (at most 15 bytes, "hbt-..." so that hbt_orphaned knows it)
 * before fn runs, stack at least `stack` bytes, detached unless joinable
 * (then its handle goes to *thread). 0 or an errno value; never waits. */
HBT_HIDDEN int  hbt_bg_start(pthread_t *thread, const char *name, size_t stack,
                             int joinable, void *(*fn)(void *), void *arg);
/* Called by a tracer thread that must wake on time (1 us timer slack, a
 * short scheduler slice where the kernel has one). */
HBT_HIDDEN void hbt_bg_wake_on_time(void);
/* Sleep until `when` (CLOCK_MONOTONIC, absolute ns); with a word, also until
 * it differs from val or a hbt_futex_wake of it. 1 if the deadline passed. */
HBT_HIDDEN int  hbt_sleep_until(uint64_t when, uint32_t *word, uint32_t val);
HBT_HIDDEN void hbt_futex_wake(uint32_t *word, int n);
/* The leader (main thread) has exited: state Z, X or x in /proc/self/stat. */
HBT_HIDDEN int  hbt_main_thread_gone(void);
/* The main thread is gone and no thread is left but dead ones and the
 * tracer's own ("hbt-*"): the calling tracer thread must end (background.c
 * says the rule in full). */
HBT_HIDDEN int  hbt_orphaned(void);
/* Read a small file (one read(2)), NUL-terminated; bytes or -1 with errno. */
HBT_HIDDEN ssize_t hbt_read_small(const char *path, char *buf, size_t size);
HBT_HIDDEN int hbt_proc_stat_cpu(const char *text, uint64_t f[8]);
HBT_HIDDEN uint64_t hbt_run_delay(int *ok);
/* Run fn in every fork child, after the handlers added before it (once per
 * fn; one pthread_atfork for all). */
HBT_HIDDEN void hbt_fork_child_add(void (*fn)(void));

/* ---- env.c: the environment variables, named once in hbtrace_env.def ---- */
enum hbt_env {
#define HBT_ENV(name, description) HBT_ENV_##name,
#include "hbtrace_env.def"
#undef HBT_ENV
    HBT_ENV_COUNT
};

extern const char *const hbt_env_names[HBT_ENV_COUNT] HBT_HIDDEN;

static inline const char *hbt_env_name(enum hbt_env e)
{
    return hbt_env_names[e];
}

HBT_HIDDEN const char *hbt_getenv(enum hbt_env e);   /* getenv of that name */
HBT_HIDDEN int  hbt_env_flag(enum hbt_env e);        /* set, and not "" or "0" */

/* ---- meta.c ---- */
HBT_HIDDEN void hbt_meta_append_once(const char *key, const char *value);
HBT_HIDDEN void hbt_meta_write_initial(void);
/* Longest prefix of s (len bytes), at most max bytes, that does not split a
 * UTF-8 sequence: for the metadata and the NAME records. */
HBT_HIDDEN size_t hbt_utf8_prefix(const char *s, size_t len, size_t max);

/* ---- lifecycle.c ---- */
HBT_HIDDEN void *hbt_real(void **cache, const char *name) HBT_NO_TSAN;
HBT_HIDDEN void *hbt_real_pthread_create(void);

/* ---- prefault.c ---- */
HBT_HIDDEN void hbt_prefault_config(void);
HBT_HIDDEN void hbt_prefault_kick(const struct hbt_tls *t, uint64_t chunk, unsigned mode);
HBT_HIDDEN void hbt_prefault_stop(void);
HBT_HIDDEN uint64_t hbt_prefault_settle(uint64_t keep);
HBT_HIDDEN void hbt_prefault_after_fork_child(void);

/* ---- monitor*.c ---- */

#define HBT_HEARTS 1024u   /* threads the online monitor can watch (by thread_slot) */

/* hbt_beatline.state */
enum {
    HBT_HS_FREE   = 0,    /* no thread registered in this entry (yet) */
    HBT_HS_ACTIVE = 1,    /* registered, no THREAD_END */
    HBT_HS_ENDED  = 2,    /* THREAD_END recorded: end_how, end_ns */
};

/* Read on every beat: the heart-rate divisor k (every k-th call of a thread
 * is recorded; Heartbeat_HeartRate_Adjust). A line of its own, written only
 * when k changes. */
struct hbt_mon_hot {
    uint32_t every;
    uint32_t openmp;      /* HBTRACE_MONITOR_BEATS=openmp: the automatic OpenMP beats,
                             not the API's, feed the heart table */
} __attribute__((aligned(64)));

extern struct hbt_mon_hot hbt_mon_hot HBT_HIDDEN;


HBT_HIDDEN void hbt_mon_config(void);
HBT_HIDDEN void hbt_mon_reset_tls(struct hbt_tls *t);
HBT_HIDDEN void hbt_mon_register(struct hbt_tls *t);
HBT_HIDDEN void hbt_mon_set_thread(struct hbt_tls *t);
HBT_HIDDEN void hbt_mon_beat(struct hbt_tls *t, uint64_t now) HBT_COLD;
HBT_HIDDEN void hbt_mon_thread_end(struct hbt_tls *t, uint32_t how);
HBT_HIDDEN void hbt_mon_init_type(int type);
HBT_HIDDEN void hbt_mon_api_pass(void);
HBT_HIDDEN void hbt_mon_finished(void);
HBT_HIDDEN void hbt_mon_at_exit(int status);
HBT_HIDDEN int  hbt_mon_adjust(double expected, int automatic);
HBT_HIDDEN void hbt_mon_after_fork_child(void);

/* ---- queue*.c, probe.c, status.c (service-rate queues, timing probes, the
 * machine-status sampler). Declared weak so that each can be built without
 * the others; the callers go through HBT_HOOK. Their fork-child handlers
 * are registered with hbt_fork_child_add when they are first used. ---- */
HBT_HIDDEN void hbt_status_config(void) __attribute__((weak));      /* file open: HBTRACE_STATUS */
HBT_HIDDEN void hbt_probe_thread_end(struct hbt_tls *t) __attribute__((weak)); /* before THREAD_END */
HBT_HIDDEN void hbt_probe_at_exit(void) __attribute__((weak));      /* process exit */
HBT_HIDDEN void hbt_queue_at_exit(void) __attribute__((weak));      /* process exit */
HBT_HIDDEN void hbt_status_at_exit(void) __attribute__((weak));     /* process exit */

#define HBT_HOOK(fn, ...) do { if (fn) fn(__VA_ARGS__); } while (0)

/* ---- signals.c ---- */
HBT_HIDDEN void hbt_signals_resolve(void);
HBT_HIDDEN void hbt_signals_init(void);

/* Units up to the end of the page holding unit u-1: the file ends on a
 * page boundary. */
#define HBT_PAGE_UNITS (4096u / HBT_UNIT_SIZE)   /* units in a 4 KiB page */
static inline uint64_t hbt_page_units(uint64_t u)
{
    return (u + HBT_PAGE_UNITS - 1) / HBT_PAGE_UNITS * HBT_PAGE_UNITS;
}

static inline int hbt_state(void)
{
    return __atomic_load_n(&hbt_g.state, __ATOMIC_ACQUIRE);
}

static inline uint64_t hbt_now_ns(void)
{
    return hb_mono_ns();
}

/*
 * Store one record into slot i of the calling thread's chunk. The kind word
 * goes last with release ordering, so a reader (or a post-mortem decoder)
 * never sees a half-written record. `next` is advanced only after that
 * store, and the signal fence keeps the compiler from moving it earlier: a
 * signal handler that interrupts us then finds either a free slot at `next`
 * or a complete record it must step over (see hbt_event in core.c).
 */
static inline void hbt_store(struct hbt_tls *t, uint32_t i, uint64_t now,
                             uint32_t kindflags, uint32_t seq, int32_t thread,
                             int32_t loop, int32_t iter, uint32_t aux)
{
    struct hbt_slot *s = &t->slots[i];
    s->t_ns = now;
    s->seq = seq;
    s->thread = thread;
    s->loop = loop;
    s->iter = iter;
    s->aux = aux;
    __atomic_store_n(&s->kindflags, kindflags, __ATOMIC_RELEASE);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t->next = i + 1;
}

/* The slot the calling thread's next record goes to, taking a new chunk if
 * needed; HBT_NO_SLOT when it cannot be stored. */
static inline __attribute__((always_inline))
uint32_t hbt_take_slot(struct hbt_tls *t, unsigned mode)
{
    uint32_t i = t->next;
    if (__builtin_expect(i >= t->limit, 0))
        i = hbt_refill(t, mode);
    return i;
}

/* The calling thread waits in the OpenMP runtime from now on (sync: HBT_SYNC_*,
 * autobeat.h), or is at work again (0): the monitor does not call a thread that
 * waits for its team busy-waiting or stuck (its own line: one store). */
static inline __attribute__((always_inline)) void hbt_wait_mark(uint32_t sync)
{
    struct hbt_tls *t = &hbt_tls;
    struct hbt_beatline *b = t->beat;
    if (!b)
        return;
    uint16_t was = b->waiting;
    if (sync && !was) {
        t->wait_from = hbt_now_ns();
        __atomic_store_n(&b->wait_us, (uint32_t)(t->wait_from / 1000u), __ATOMIC_RELAXED);
    } else if (!sync && was) {
        /* the CPU time it spun away there is no work of its own (rounded up: a
         * thread whose every wait took under 1 us has waited in the runtime too,
         * and is judged as a thread of its team -- the monitor tells so by a
         * waited_us above 0) */
        uint64_t d = t->wait_from ? hbt_now_ns() - t->wait_from : 0;
        __atomic_store_n(&b->waited_us, b->waited_us + (uint32_t)((d + 999u) / 1000u), __ATOMIC_RELEASE);
    }
    if (sync != was)
        __atomic_store_n(&b->waiting, (uint16_t)sync, __ATOMIC_RELEASE);
}

/* The calling thread's place in its outermost team's work (HBT_PLACE), stored before
 * the wait mark that goes with it (hbt_wait_mark's release store publishes it). */
static inline __attribute__((always_inline)) void hbt_place_mark(uint64_t place)
{
    struct hbt_tls *t = &hbt_tls;
    t->place = place;
    if (t->unit)
        __atomic_store_n(&t->unit->place, place, __ATOMIC_RELAXED);
}

/* The calling thread is in an outermost team of n threads (0: not known). */
static inline __attribute__((always_inline)) void hbt_team_mark(uint32_t n)
{
    struct hbt_tls *t = &hbt_tls;
    t->team = n;
    if (t->unit)
        __atomic_store_n(&t->unit->team, n, __ATOMIC_RELAXED);
}

/* A number for an outermost parallel region that begins, drawn by its master (never 0). */
HBT_HIDDEN uint32_t hbt_region_instance(void);

/* 1 when the tracer is the OpenMP runtime's OMPT tool (libomp): what it reports through
 * OMPT, the libgomp wrappers leave alone (ompt.c). */
HBT_HIDDEN int hbt_ompt_on(void);

/* At the process's exit, in the thread that ends it: the time since that thread left its
 * last outermost parallel region (a master's serial part to the end: writing the output,
 * say), recorded as the OpenMP runtimes' wrappers record it at the next region's start,
 * which never comes (gomp.c, ompt.c). Once: a later call records nothing. */
HBT_HIDDEN void hbt_gomp_at_exit(void);
HBT_HIDDEN void hbt_ompt_at_exit(void);

/* A beat's update of the thread's line of the heart table (below). */
static inline __attribute__((always_inline))
void hbt_beatline_update(struct hbt_tls *t, uint64_t now, uint32_t seq)
{
    struct hbt_beatline *b = t->beat;
    uint64_t d = now - b->t_ns;   /* its interval (its own line: no miss) */
    __atomic_store_n(&b->t_ns, now, __ATOMIC_RELEASE);
    __atomic_store_n(&b->seq, seq + 1, __ATOMIC_RELEASE);
    if (__builtin_expect(d >= __atomic_load_n(&b->gap_ns, __ATOMIC_RELAXED), 0) &&
        !__atomic_load_n(&b->gap_t, __ATOMIC_RELAXED))
        /* the first beat after a gap since a checker looked: the exact moment it
         * was at work again */
        __atomic_store_n(&b->gap_t, now, __ATOMIC_RELEASE);
    if (__builtin_expect(now >= t->next_check, 0))
        hbt_mon_beat(t, now);
}

/*
 * The hot path: one beat of the calling thread. No lock, no system call
 * (clock_gettime(CLOCK_MONOTONIC) is served by the vDSO), writes only into
 * this thread's own chunk and its own line of the heart table. Everything
 * unusual -- first use, full chunk, tracing off, a heart-rate divisor above
 * 1, the monitor's periodic work -- is behind predicted-not-taken branches.
 *
 * tagged != 0: hbt_beat(tag): thread = the thread's number, loop 0, iter = seq.
 * tagged == 0: explicit thread/loop/iter; the thread number is remembered.
 *
 * The heart-table line gets t_ns (release), then seq (release): a checker
 * that reads seq, then t_ns, sees a t_ns at least as new as that beat.
 */
static inline __attribute__((always_inline))
void hbt_beat_inline(int tagged, int32_t thread, int32_t loop, int32_t iter,
                     uint32_t aux)
{
    struct hbt_tls *t = &hbt_tls;
    if (!tagged) {
        t->user_thread = thread;
        t->beat_thread = thread;
        t->user_set = 1;
    }
    uint32_t every = __atomic_load_n(&hbt_mon_hot.every, __ATOMIC_RELAXED);
    if (__builtin_expect(every != 1, 0)) {
        if (++t->calls < every)
            return;
        t->calls = 0;
    }
    if (__builtin_expect(hbt_inject_armed, 0))   /* slow: the unit's spin, before its beat */
        (void)hbt_inject_before_beat(tagged ? t->beat_thread : thread, 0);
    uint32_t i = hbt_take_slot(t, HBT_MODE_BEAT);
    if (i == HBT_NO_SLOT)
        return;
    uint32_t seq = t->seq;
    t->seq = seq + 1;
    uint64_t now = hbt_now_ns();
    if (tagged)
        hbt_store(t, i, now, hbt_kindflags(HBT_REC_BEAT, 0), seq, t->beat_thread,
                  0, (int32_t)seq, aux);
    else
        hbt_store(t, i, now, hbt_kindflags(HBT_REC_BEAT, 0), seq, thread, loop,
                  iter, 0);
    if (__builtin_expect(!hbt_mon_hot.openmp, 1))
        hbt_beatline_update(t, now, seq);
    hbt_cpu_track(t, now, tagged ? t->beat_thread : thread, 0, HBT_BEATSRC_API);
    if (__builtin_expect(hbt_inject_armed, 0))
        hbt_inject_point(0 /* api */, tagged ? t->beat_thread : thread, now);
}

#endif /* HBT_INTERNAL_H */
