/*
 * monitor.c -- the online thread-behaviour monitor of the HBTM paper (seed
 * 001): the heart table, the detection of running / busy-waiting /
 * conditional-waiting / exited / failed threads, the central monitor thread,
 * the ring checks of the decentralized mode, and Heartbeat_HeartRate_Adjust.
 *
 * The heart table. Every registered thread owns one entry of a fixed,
 * static table (HBT_HEARTS entries, indexed by thread_slot; later threads
 * are not monitored, only counted). An entry is three cache lines:
 *   b  the thread's beat line (struct hbt_beatline, internal.h): written only
 *      by the thread itself -- on every recorded beat its count and time (no
 *      lock, no system call, nothing shared), and at registration and
 *      THREAD_END its state;
 *   c  its counters as a ring checker (messages, checks), written only by
 *      itself, summed when a MONITOR record is written;
 *   v  the checkers' view of the thread (baseline, what was reported): written
 *      by whichever checker judges the thread, under a try-lock; a checker
 *      that finds the lock taken skips the thread (nobody ever waits, except
 *      the final passes at Finished and exit, for at most a few ms).
 * The table is never freed: reading the entry of a dead thread is safe.
 *
 * Detection (hbt_judge): per monitored thread j at time now, with S the
 * lateness factor (HBTRACE_MONITOR_LATE, default 1.5):
 *   - baseline B_j: mean of the first HBT_WARM inter-beat intervals (nothing
 *     is judged before), then an EWMA (weight 1/8 per beat) of intervals
 *     below S*B_j only, so slow intervals never pollute it;
 *   - THREAD_END recorded: EXITED, or FAILED if it was cancelled; onset = its
 *     last beat (the end time if it never beat);
 *   - late, now - last beat > S*B_j: /proc/self/task/<tid>/stat is read (only
 *     then): S/D/other -> COND_WAITING, missing or Z/X without THREAD_END ->
 *     FAILED (vanished); R -> BUSY_WAITING (on the CPU but not beating) once
 *     it is seen to use CPU time: R also means "waiting for a CPU" (another
 *     thread shares its CPU, it was preempted), so its CPU clock is sampled
 *     at the first late look (with its run-queue wait from schedstat) and
 *     BUSY_WAITING reported once it used 3/4 B_j of CPU time since without
 *     waiting for a CPU (1.2 B_j, more than a beat needs, if it waited),
 *     still without a beat (so busy-waiting is reported about (S + 1) B_j
 *     after its last beat, the rest about S B_j after); onset = the last
 *     beat, seq = its beat count;
 *   - after BUSY/COND, a beat interval below S*B_j again: RUNNING, onset =
 *     the first beat after the gap (the beat that began that interval when
 *     the checker saw the beats one by one; estimated from the new beats at
 *     the baseline rate when it saw several at once), minus one baseline
 *     interval when the thread was blocked (COND_WAITING: it woke and worked
 *     about one interval before that beat);
 *   - only changes are recorded, one BEHAVIOR record each, into the chunk of
 *     the thread that detected it; t_ns = when it was detected, iter = the
 *     lag t_ns - onset in us;
 *   - final passes: at Finished, threads that stopped beating (late, or the
 *     caller itself) are EXITED (onset = last beat) but judged again if they
 *     beat again (RUNNING); at exit (status 0) every thread still at work is
 *     EXITED (onset = its last beat), at exit with another status FAILED
 *     (onset = the exit); a thread found gone at either is FAILED.
 * A thread that never beat is not judged, except that its THREAD_END is
 * reported (EXITED/FAILED, onset = the end time, thread = -1 unless it set
 * a number). One message = one read of another thread's beat line.
 *
 * Central mode: one monitor thread, made with the real pthread_create (no
 * lifecycle records, never a beating thread, detached, every signal blocked,
 * it ends when the program's threads are gone), judges every thread. It
 * sleeps until the earliest moment a thread could become late (its last
 * beat + S*B_j), batching threads whose deadlines lie within 0.3 B_j of
 * each other, at least 100 us and at most 100 ms apart; 1 ms while some
 * thread has no baseline yet, 50 ms with no thread to watch; or a fixed
 * HBTRACE_MONITOR_PERIOD_US; a thread's first beat wakes it when idle. It
 * asks for a short scheduler slice so that it gets a CPU soon after it
 * wakes even when the program keeps every CPU busy. It writes a MONITOR
 * record every second.
 *
 * Ring mode: each beating thread, on the cold path of its own beats (one
 * compare of the beat's clock value with next_check on the hot path),
 * judges its neighbour, the next beating thread after it in slot order,
 * walking past dead ones (every read of another thread's entry is one
 * message) at most once round the ring, and schedules its next check for the
 * neighbour's deadline (its last beat + S*B_j).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define HBT_US              1000ull
#define HBT_MS              1000000ull
#define HBT_SEC             1000000000ull

#define HBT_WARM            8u              /* beats before a thread is judged */
#define HBT_LATE_DEFAULT    1.5
#define HBT_POLL_MIN_NS     (100 * HBT_US)
#define HBT_POLL_MAX_NS     (100 * HBT_MS)
#define HBT_POLL_WARM_NS    HBT_MS
#define HBT_POLL_IDLE_NS    (50 * HBT_MS)
#define HBT_BATCH           0.3             /* central: slack, in baseline intervals */
#define HBT_PROC_MAX_NS     (100 * HBT_MS)  /* /proc re-reads while late: back-off cap */
#define HBT_LATE_LOOK_MAX_NS (4 * HBT_MS)   /* looks for its next beat meanwhile: cap */
#define HBT_RING_IDLE_NS    (10 * HBT_MS)   /* ring with no live neighbour: look again */
#define HBT_COLD_MAX_NS     HBT_SEC         /* every thread's cold path, at least */
#define HBT_SOFT_LOOK_NS    (100 * HBT_MS)
#define HBT_PROBE_MIN_NS    (50 * HBT_US)
#define HBT_BUSY_WAIT       1.0             /* busy: looked at again this many baseline intervals
                                               after the first late look ... */
#define HBT_BUSY_CPU        0.75            /* ... and used this much CPU time since, in
                                               baseline intervals, without beating */
#define HBT_BUSY_CPU_WAITED 1.2             /* ... or this much if it waited for a CPU
                                               meanwhile: more than a beat needs */
#define HBT_WAITED          0.25            /* waited: for more than this many intervals */
#define HBT_LOCK_WAIT_NS    (5 * HBT_MS)    /* final passes: wait for a view this long */
#define HBT_K_MAX           (1u << 20)
#define HBT_MON_STACK       (256u * 1024u)

/* mon.mode: HBT_MON_CENTRAL or HBT_MON_RING (hbtrace_format.h), or one of
 * these two, which are never recorded */
enum {
    HBT_MON_NONE = -1,   /* no monitor asked for (yet) */
    HBT_MON_OFF  = 2,    /* HBTRACE_MONITOR=off */
};

/* judge results */
enum { HBT_J_FREE, HBT_J_SILENT, HBT_J_ALIVE, HBT_J_DEAD };

/* final passes */
enum { HBT_FIN_NONE, HBT_FIN_FINISHED, HBT_FIN_EXIT_OK, HBT_FIN_EXIT_FAIL };

/* The checkers' view of one thread, under `lock`. 64 bytes. */
struct hbt_view {
    uint32_t lock;        /* try-lock: 0 free, 1 taken */
    uint8_t  final;       /* atomic: exited or failed for good, never judged again */
    uint8_t  soft;        /* EXITED by a Finished pass: judged again if it beats */
    uint8_t  cur;         /* behaviour last reported (RUNNING before any) */
    uint8_t  probing;     /* late in state R: CPU clock sampled at probe_t */
    uint32_t seen_seq;    /* beat count at the latest beat seen */
    uint16_t nbeats;      /* beats folded into the baseline (saturating) */
    uint16_t proc_gap;    /* late: current back-off between /proc reads, 16 us units */
    uint64_t seen_t;      /* time of the latest beat seen, 0 before the first look */
    double   base;        /* baseline inter-beat interval B_j, ns */
    uint64_t proc_next;   /* late: no /proc read before this */
    uint64_t probe_t;     /* probing: when its CPU clock was sampled */
    uint64_t probe_cpu;   /* ... its CPU time then */
    uint32_t k : 24;      /* heart-rate divisor the baseline belongs to */
    uint32_t slow_end : 1;/* the latest beat seen ended a slow interval */
    uint32_t has_wait : 1;/* probe_wait is known */
    uint32_t probe_wait;  /* probing: its run-queue wait (schedstat) then, us, mod 2^32 */
};

/* A thread's counters as a checker (ring checks, Monitor calls, final
 * passes), written only by that thread. */
struct hbt_checkline {
    uint64_t msgs;
    uint64_t checks;
    uint64_t last_ns;     /* its latest ring check */
    uint64_t period_ns;   /* EWMA of the time between its ring checks */
};

struct hbt_heart {
    struct hbt_beatline  b __attribute__((aligned(64)));
    struct hbt_checkline c __attribute__((aligned(64)));
    struct hbt_view      v __attribute__((aligned(64)));
};

_Static_assert(sizeof(struct hbt_beatline) == 64, "beat line is one cache line");
_Static_assert(sizeof(struct hbt_view) <= 64, "view is one cache line");
_Static_assert(sizeof(struct hbt_heart) == 192, "three lines per heart");

static struct hbt_heart hbt_hearts[HBT_HEARTS];

struct hbt_mon_hot hbt_mon_hot = { .every = 1 };

/* Global monitor state. The configuration is written when the trace file
 * opens (single-threaded or under g.lock), everything else atomically. */
static struct hbt_mon {
    int      mode;            /* atomic: HBT_MON_NONE, HBT_MON_CENTRAL, HBT_MON_RING, HBT_MON_OFF */
    int      env_mode;        /* HBTRACE_MONITOR: HBT_MON_NONE when unset */
    double   late;            /* S */
    uint64_t period_ns;       /* HBTRACE_MONITOR_PERIOD_US, 0: adaptive */
    double   heart_rate;      /* HBTRACE_HEART_RATE, 0: none */
    int      have_proc;       /* /proc/self/task is readable */
    int      from_env;        /* the mode came from HBTRACE_MONITOR */
    int      type_warned;     /* atomic */
    int      pending;         /* atomic: a fork child still has to write its
                                 metadata and (central) start its thread */
    int      started;         /* atomic: the monitor thread was started in this process */
    int      stop;            /* atomic: the process is exiting */
    int      rate_noted;      /* atomic: heart_rate is in the metadata */
    uint64_t start_ns;        /* when the monitor became active */
    uint64_t next_adjust;     /* atomic: HBTRACE_HEART_RATE: next automatic adjustment */
    uint32_t adjust_lock;     /* atomic try-lock of the adjustment */
    uint32_t unwatched;       /* atomic: threads beyond the heart table */
    uint32_t wake;            /* futex word the monitor thread sleeps on */
    int      idle;            /* atomic: it sleeps with no thread to watch: wake
                                 it when a thread beats for the first time */
    uint64_t central_msgs;    /* written by the monitor thread only */
    uint64_t central_passes;
    uint64_t central_period_ns;
    uint64_t api_msgs;        /* atomic: checks by threads without a heart entry */
    uint64_t api_passes;      /* atomic */
    struct { uint64_t t; uint32_t seq; uint32_t valid; } snap[HBT_HEARTS];  /* adjustment windows */
} mon = { .mode = HBT_MON_NONE, .env_mode = HBT_MON_NONE, .late = HBT_LATE_DEFAULT };

/* One checker's pass. */
struct hbt_ctx {
    uint64_t msgs;        /* entries of other threads read */
    uint64_t look;        /* ALIVE: when this thread should be looked at next, 0: no wish */
    uint64_t tol;         /* ... and how much later is still fine */
    uint32_t self;        /* the checker's own slot, UINT32_MAX if none */
    uint16_t flags;       /* HBT_MON_* of the records */
    uint8_t  final;       /* HBT_FIN_* */
    uint8_t  wait;        /* may wait (bounded) for a view lock */
    int      unwarm;      /* a live thread has no baseline yet */
};

struct hbt_seen {
    uint32_t seq;
    uint64_t t;
};

static inline uint32_t hbt_nthreads(void)
{
    uint32_t n = __atomic_load_n(&hbt_g.nthreads, __ATOMIC_ACQUIRE);
    return n < HBT_HEARTS ? n : HBT_HEARTS;
}

static inline int32_t hbt_sat32(double x)
{
    if (!(x > 0))
        return 0;
    return x >= (double)INT32_MAX ? INT32_MAX : (int32_t)x;
}

static const char *hbt_mode_name(int mode)
{
    return mode == HBT_MON_CENTRAL ? "central" : mode == HBT_MON_RING ? "ring" : "off";
}

/* ------------------------------------------------------------------ */
/* configuration                                                        */

/* HBTRACE_MONITOR*, HBTRACE_HEART_RATE; called when the trace file opens,
 * g.lock held: no metadata here (see hbt_mon_note_meta). */
void hbt_mon_config(void)
{
    const char *v = hbt_getenv(HBT_ENV_HBTRACE_MONITOR);
    mon.env_mode = HBT_MON_NONE;
    if (v && *v) {
        if (strcmp(v, "central") == 0 || strcmp(v, "0") == 0)
            mon.env_mode = HBT_MON_CENTRAL;
        else if (strcmp(v, "ring") == 0 || strcmp(v, "1") == 0)
            mon.env_mode = HBT_MON_RING;
        else if (strcmp(v, "off") == 0 || strcmp(v, "none") == 0)
            mon.env_mode = HBT_MON_OFF;
        else
            hbt_warn("hbtrace: %s=%s: expected central, ring or off; ignored",
                     hbt_env_name(HBT_ENV_HBTRACE_MONITOR), v);
    }

    mon.late = HBT_LATE_DEFAULT;
    v = hbt_getenv(HBT_ENV_HBTRACE_MONITOR_LATE);
    if (v && *v) {
        char *end;
        double x = strtod(v, &end);
        if (*end || !isfinite(x) || x <= 1.0 || x > 1000.0)
            hbt_warn("hbtrace: %s=%s: expected a number above 1 "
                     "(at most 1000); using %g",
                     hbt_env_name(HBT_ENV_HBTRACE_MONITOR_LATE), v, HBT_LATE_DEFAULT);
        else
            mon.late = x;
    }

    mon.period_ns = 0;
    v = hbt_getenv(HBT_ENV_HBTRACE_MONITOR_PERIOD_US);
    if (v && *v) {
        char *end;
        errno = 0;
        unsigned long long us = strtoull(v, &end, 10);
        if (errno || *end || v[0] == '-' || us < 1 || us > 10000000ull)
            hbt_warn("hbtrace: %s=%s: expected 1..10000000; "
                     "using the adaptive period",
                     hbt_env_name(HBT_ENV_HBTRACE_MONITOR_PERIOD_US), v);
        else
            mon.period_ns = us * HBT_US;
    }

    mon.heart_rate = 0;
    v = hbt_getenv(HBT_ENV_HBTRACE_HEART_RATE);
    if (v && *v) {
        char *end;
        double x = strtod(v, &end);
        if (*end || !isfinite(x) || x <= 0)
            hbt_warn("hbtrace: %s=%s: expected beats per second above 0; "
                     "ignored", hbt_env_name(HBT_ENV_HBTRACE_HEART_RATE), v);
        else
            mon.heart_rate = x;
    }

    mon.have_proc = access("/proc/self/task", R_OK) == 0;
}

/* The monitor's lines of the metadata, once per file. */
static void hbt_mon_note_meta(int mode)
{
    char num[64];
    hbt_meta_append_once("monitor", hbt_mode_name(mode));
    if (mode == HBT_MON_OFF)
        return;
    hbt_meta_append_once("monitor_source", mon.from_env ?
    hbt_env_name(HBT_ENV_HBTRACE_MONITOR) : "Init");
    snprintf(num, sizeof num, "%g", mon.late);
    hbt_meta_append_once("monitor_late", num);
    if (mode == HBT_MON_CENTRAL) {
        if (mon.period_ns)
            snprintf(num, sizeof num, "%llu", (unsigned long long)(mon.period_ns / HBT_US));
        else
            snprintf(num, sizeof num, "adaptive");
        hbt_meta_append_once("monitor_period_us", num);
    }
}

/* ------------------------------------------------------------------ */
/* the heart table, owner side                                          */

/* Registration of thread t (core.c), by the thread itself; also from a
 * signal handler: only stores and gettid. */
void hbt_mon_register(struct hbt_tls *t)
{
    t->next_check = 0;
    t->calls = 0;
    t->ring_valid = 0;
    t->ring_skipped = 0;
    t->ring_count = 0;
    if (t->thread_slot >= HBT_HEARTS || t->monitor) {
        memset(&t->sink, 0, sizeof t->sink);
        t->beat = &t->sink;
        if (!t->monitor)
            __atomic_fetch_add(&mon.unwatched, 1, __ATOMIC_RELAXED);
        return;
    }
    struct hbt_heart *h = &hbt_hearts[t->thread_slot];
    struct hbt_beatline *b = &h->b;
    b->seq = 0;
    b->t_ns = 0;
    b->end_how = 0;
    b->end_ns = 0;
    b->first_t = 0;
    b->first_seq = 0;
    /* the number its beats record; -1 (as in its lifecycle records) until
     * it beats or sets one */
    b->thread = t->user_set ? t->user_thread : -1;
    b->os_tid = (int32_t)syscall(SYS_gettid);
    b->slot = t->thread_slot;
    __atomic_store_n(&b->state, HBT_HS_ACTIVE, __ATOMIC_RELEASE);
    t->beat = b;
}

/* hbt_set_thread: the number its beats record from now on. */
void hbt_mon_set_thread(struct hbt_tls *t)
{
    if (t->registered && t->beat)
        __atomic_store_n(&t->beat->thread, t->beat_thread, __ATOMIC_RELAXED);
}

/* THREAD_END was recorded (lifecycle.c). */
void hbt_mon_thread_end(struct hbt_tls *t, uint32_t how)
{
    struct hbt_beatline *b = t->beat;
    if (!t->registered || !b)
        return;
    b->end_how = how;
    __atomic_store_n(&b->end_ns, hbt_now_ns(), __ATOMIC_RELAXED);
    __atomic_store_n(&b->state, HBT_HS_ENDED, __ATOMIC_RELEASE);
}

/* fork child: the parent's threads and its monitor thread are gone; the
 * mode stays, the child's first beat writes its metadata and starts its
 * own monitor thread. Runs in the only thread of the child, before core.c's
 * handler resets the thread count (lifecycle.c registers it first). */
void hbt_mon_after_fork_child(void)
{
    uint32_t n = hbt_nthreads();
    memset(hbt_hearts, 0, (size_t)n * sizeof hbt_hearts[0]);
    memset(mon.snap, 0, (size_t)n * sizeof mon.snap[0]);
    __atomic_store_n(&mon.started, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&mon.stop, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&mon.rate_noted, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&mon.next_adjust, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&mon.adjust_lock, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&mon.unwatched, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&mon.central_msgs, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&mon.central_passes, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&mon.central_period_ns, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&mon.api_msgs, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&mon.api_passes, 0, __ATOMIC_RELAXED);
    int mode = __atomic_load_n(&mon.mode, __ATOMIC_RELAXED);
    __atomic_store_n(&mon.pending, mode == HBT_MON_CENTRAL || mode == HBT_MON_RING,
                     __ATOMIC_RELEASE);
}

/* The counters of checker t: its own check line, or the shared ones. */
static void hbt_account(struct hbt_tls *t, uint64_t msgs, uint64_t passes)
{
    if (t->registered && t->beat && t->thread_slot < HBT_HEARTS &&
        t->beat == &hbt_hearts[t->thread_slot].b) {
        struct hbt_checkline *c = &hbt_hearts[t->thread_slot].c;
        __atomic_store_n(&c->msgs, c->msgs + msgs, __ATOMIC_RELAXED);
        __atomic_store_n(&c->checks, c->checks + passes, __ATOMIC_RELAXED);
    } else {
        __atomic_fetch_add(&mon.api_msgs, msgs, __ATOMIC_RELAXED);
        __atomic_fetch_add(&mon.api_passes, passes, __ATOMIC_RELAXED);
    }
}

/* ------------------------------------------------------------------ */
/* reading a thread from outside                                        */

/* Beat count and time of the latest beat, as one consistent pair when the
 * owner is not storing right now (otherwise the time may belong to the
 * beat after the count: a beat newer by a few nanoseconds). */
static void hbt_read_beat(const struct hbt_beatline *b, struct hbt_seen *s)
{
    for (int k = 0; k < 4; k++) {
        uint32_t s1 = __atomic_load_n(&b->seq, __ATOMIC_ACQUIRE);
        uint64_t t = __atomic_load_n(&b->t_ns, __ATOMIC_ACQUIRE);
        uint32_t s2 = __atomic_load_n(&b->seq, __ATOMIC_ACQUIRE);
        s->seq = s1;
        s->t = t;
        if (s1 == s2)
            return;
    }
}

static size_t hbt_utoa(char *out, unsigned long v)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    out[n] = '\0';
    return n;
}

/* State letter of task `tid` of this process from /proc (R, S, D, Z, ...);
 * *gone = 1 when the task no longer exists. 0 when it cannot be told. */
static char hbt_task_state(int tid, int *gone)
{
    char path[64], buf[512];
    *gone = 0;
    if (tid <= 0)
        return 0;
    memcpy(path, "/proc/self/task/", 16);
    size_t n = 16 + hbt_utoa(path + 16, (unsigned long)tid);
    memcpy(path + n, "/stat", 6);
    ssize_t r = hbt_read_small(path, buf, sizeof buf);
    if (r < 0) {
        *gone = errno == ENOENT || errno == ESRCH;
        return 0;
    }
    const char *p = strrchr(buf, ')');   /* the name may contain ')' */
    if (!p || p[1] != ' ' || !p[2])
        return 0;
    return p[2];
}

/* CPU time used by task `tid` of this process (its thread CPU clock, read
 * precisely even while it runs). 0 if it cannot be read (gone). */
static int hbt_task_cpu(int tid, uint64_t *ns)
{
    if (tid <= 0)
        return 0;
    /* MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED), as pthread_getcpuclockid */
    clockid_t id = (clockid_t)((~(unsigned int)tid << 3) | 6u);
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0)
        return 0;
    *ns = (uint64_t)ts.tv_sec * HBT_SEC + (uint64_t)ts.tv_nsec;
    return 1;
}

/* ------------------------------------------------------------------ */
/* detection                                                            */

/* Take v's lock; with *wait, for up to HBT_LOCK_WAIT_NS (a checker holds it
 * for microseconds), and not again in this pass once that ran out (a
 * checker that died holding it: its thread is simply not judged). */
static int hbt_view_lock(struct hbt_view *v, uint8_t *wait)
{
    if (!__atomic_exchange_n(&v->lock, 1, __ATOMIC_ACQUIRE))
        return 1;
    if (!*wait)
        return 0;
    uint64_t until = hbt_now_ns() + HBT_LOCK_WAIT_NS;
    do {
        sched_yield();
        if (!__atomic_load_n(&v->lock, __ATOMIC_RELAXED) &&
            !__atomic_exchange_n(&v->lock, 1, __ATOMIC_ACQUIRE))
            return 1;
    } while (hbt_now_ns() < until);
    *wait = 0;
    return 0;
}

static void hbt_view_unlock(struct hbt_view *v)
{
    __atomic_store_n(&v->lock, 0, __ATOMIC_RELEASE);
}

/* One BEHAVIOR record into the checker's chunk. */
static void hbt_report(struct hbt_heart *h, uint32_t j, uint8_t bhv, uint64_t onset,
                       uint32_t seq, const struct hbt_ctx *c)
{
    uint64_t at = hbt_now_ns();
    double lag_us = at > onset ? (double)(at - onset) / 1e3 : 0.0;
    hbt_emit(HBT_REC_BEHAVIOR, c->flags, seq, __atomic_load_n(&h->b.thread, __ATOMIC_RELAXED),
             (int32_t)bhv, hbt_sat32(lag_us), j, at, HBT_MODE_BEAT);
    h->v.cur = bhv;
}

/* (7/8)^n for n < 64, without libm */
static double pow_78(uint32_t n)
{
    double r = 1.0;
    for (uint32_t i = 0; i < n; i++)
        r *= 0.875;
    return r;
}

/* Fold `n` intervals of mean `avg` ns into the baseline. */
static void hbt_fold(struct hbt_view *v, double avg, uint32_t n)
{
    if (v->nbeats < HBT_WARM || v->base <= 0) {
        /* warm-up: plain mean */
        double m = v->nbeats;
        v->base = (v->base * m + avg * n) / (m + n);
    } else {
        double w = n >= 64 ? 1.0 : 1.0 - pow_78(n);
        v->base += w * (avg - v->base);
    }
    v->nbeats = (uint16_t)(v->nbeats + n > UINT16_MAX ? UINT16_MAX : v->nbeats + n);
}

/* Thread j recorded THREAD_END: EXITED, or FAILED when cancelled. */
static int hbt_judge_ended(struct hbt_heart *h, uint32_t j, struct hbt_ctx *c)
{
    struct hbt_view *v = &h->v;
    struct hbt_seen s;
    hbt_read_beat(&h->b, &s);   /* final: it beats no more */
    uint8_t bhv = h->b.end_how == HBT_END_CANCELLED ? HBT_BHV_FAILED : HBT_BHV_EXITED;
    /* a thread already reported exited by a Finished pass gets no second
     * EXITED; the end time stands in for the last beat of one that never beat */
    if (!(v->soft && v->cur == bhv))
        hbt_report(h, j, bhv, s.seq ? s.t : __atomic_load_n(&h->b.end_ns, __ATOMIC_RELAXED),
                   s.seq, c);
    __atomic_store_n(&v->final, 1, __ATOMIC_RELEASE);
    return HBT_J_DEAD;
}

/* The time task `tid` waited on a run queue so far (schedstat, us, mod
 * 2^32); 0 when it cannot be read. */
static int hbt_task_wait(int tid, uint32_t *us)
{
    char path[64], buf[128];
    memcpy(path, "/proc/self/task/", 16);
    size_t n = 16 + hbt_utoa(path + 16, (unsigned long)tid);
    memcpy(path + n, "/schedstat", 11);
    if (hbt_read_small(path, buf, sizeof buf) <= 0)
        return 0;
    const char *p = strchr(buf, ' ');
    if (!p)
        return 0;
    *us = (uint32_t)(strtoull(p + 1, NULL, 10) / HBT_US);
    return 1;
}

/*
 * Late and in state R: spinning, or only waiting for a CPU (another thread
 * shares its CPU, it was preempted)? At the first late look its CPU clock
 * and its run-queue wait are sampled; at the next looks (one baseline
 * interval apart) it is busy once it used more CPU time since than 3/4 of
 * a baseline interval without beating, having waited for no CPU meanwhile
 * (a quarter interval at most: the monitor thread itself may take its CPU
 * for a moment) -- or 1.2 intervals if it did wait: more than a whole beat's work needs
 * (a beat's CPU time is at most its wall-clock interval), so a thread that
 * was preempted in the middle of a beat beats before it gets there.
 * 1: busy, 0: undecided yet.
 */
static int hbt_on_cpu(struct hbt_heart *h)
{
    struct hbt_view *v = &h->v;
    uint64_t cpu;
    uint32_t wait = 0;
    if (!hbt_task_cpu(h->b.os_tid, &cpu))
        return 0;   /* gone: the next look finds out */
    int has_wait = hbt_task_wait(h->b.os_tid, &wait);
    if (!v->probing) {
        v->probing = 1;
        v->probe_t = hbt_now_ns();   /* the time of the sample, not of the look */
        v->probe_cpu = cpu;
        v->probe_wait = wait;
        v->has_wait = has_wait ? 1 : 0;
        return 0;
    }
    /* waiting for a CPU briefly (for the monitor thread itself, say) is no
     * preemption that could explain the lateness */
    int waited = !has_wait || !v->has_wait ||
                 (double)(uint32_t)(wait - v->probe_wait) * 1e3 > HBT_WAITED * v->base;
    double need = (waited ? HBT_BUSY_CPU_WAITED : HBT_BUSY_CPU) * v->base;
    if (need < (double)HBT_PROBE_MIN_NS)
        need = (double)HBT_PROBE_MIN_NS;
    return (double)(cpu - v->probe_cpu) >= need;
}

/* Without /proc: state from the thread CPU clock over a probe window.
 * Returns R, S, or 0 while undecided; *gone when the thread is gone. */
static char hbt_state_by_cpu(struct hbt_heart *h, uint64_t now, int *gone)
{
    struct hbt_view *v = &h->v;
    uint64_t cpu;
    *gone = 0;
    if (!hbt_task_cpu(h->b.os_tid, &cpu)) {
        *gone = 1;
        return 0;
    }
    if (!v->probing) {
        v->probing = 1;
        v->probe_t = hbt_now_ns();
        v->probe_cpu = cpu;
        return 0;
    }
    now = hbt_now_ns();
    uint64_t el = now > v->probe_t ? now - v->probe_t : 0;
    if (el < HBT_PROBE_MIN_NS)
        return 0;
    return (cpu - v->probe_cpu) * 2 >= el ? 'R' : 'S';
}

/* Did thread h beat after the triple s was read? The checker may have been
 * preempted between reading it and deciding (a ring checker is one of the
 * program's threads, on a machine with more threads than CPUs): no verdict
 * on stale beats then, just a new look at once. */
static int hbt_beat_since(struct hbt_heart *h, const struct hbt_seen *s, struct hbt_ctx *c)
{
    if (__atomic_load_n(&h->b.seq, __ATOMIC_ACQUIRE) == s->seq)
        return 0;
    h->v.probing = 0;
    h->v.proc_next = 0;
    c->look = hbt_now_ns();
    c->tol = 0;
    return 1;
}

/* A late thread, whose /proc reads are `gap` apart, is looked at again
 * after this long: one baseline interval, up to 4 ms while it stays late. */
static uint64_t hbt_again(double base, uint64_t gap)
{
    uint64_t g = gap / 8 < HBT_LATE_LOOK_MAX_NS ? gap / 8 : HBT_LATE_LOOK_MAX_NS;
    return (uint64_t)base > g ? (uint64_t)base : g;
}

/*
 * Judge thread j (its view is locked by us). st: its state as read before
 * the beat triple s. Returns HBT_J_ALIVE (c->look, c->tol: when to look
 * again), HBT_J_DEAD or HBT_J_SILENT.
 */
static int hbt_judge_locked(struct hbt_heart *h, uint32_t j, uint32_t st,
                            const struct hbt_seen *s, struct hbt_ctx *c)
{
    struct hbt_view *v = &h->v;
    uint64_t now = hbt_now_ns();
    double S = mon.late;

    uint32_t k = __atomic_load_n(&hbt_mon_hot.every, __ATOMIC_RELAXED);
    if (v->k != k) {
        /* the heart-rate divisor changed: so did the beat interval; the
         * interval across the change is mixed and not used */
        if (v->k && v->base > 0)
            v->base *= (double)k / (double)v->k;
        v->k = k;
        if (v->seen_t) {
            v->seen_seq = s->seq;
            v->seen_t = s->t;
        }
    }

    if (st == HBT_HS_ENDED)
        return hbt_judge_ended(h, j, c);
    if (s->seq == 0)
        return HBT_J_SILENT;   /* never beat: not monitored */

    /* ---- new beats since the last look ---- */
    uint32_t fresh = s->seq - v->seen_seq;
    if (!v->seen_t) {
        /* first look: the beats since its first one (a checker may start
         * looking long after the thread began) give the first baseline */
        uint64_t ft = __atomic_load_n(&h->b.first_t, __ATOMIC_ACQUIRE);
        uint32_t fs = __atomic_load_n(&h->b.first_seq, __ATOMIC_RELAXED);
        if (ft && s->seq > fs && s->t > ft && !v->nbeats)
            hbt_fold(v, (double)(s->t - ft) / (double)(s->seq - fs), s->seq - fs);
        v->seen_seq = s->seq;
        v->seen_t = s->t;
    } else if (fresh && s->t > v->seen_t) {
        double avg = (double)(s->t - v->seen_t) / fresh;
        /* the latest interval: exact for one new beat, else their mean */
        double last = avg;
        int warm = v->nbeats >= HBT_WARM;
        if (!warm || avg < S * v->base)
            hbt_fold(v, avg, fresh);
        if (v->soft) {
            /* said to have exited at Finished, and beats again */
            v->soft = 0;
            uint64_t onset = s->t > (uint64_t)v->base ? s->t - (uint64_t)v->base : s->t;
            hbt_report(h, j, HBT_BHV_RUNNING, onset, s->seq - 1, c);
        } else if (v->cur == HBT_BHV_BUSY_WAITING || v->cur == HBT_BHV_COND_WAITING) {
            if (warm && last < S * v->base) {
                /* flowing again. Onset: the first beat after the gap, i.e.
                 * the beat that ended the last slow interval -- the one
                 * before this interval when we saw one beat, the one seen
                 * last time if it ended a slow interval, else estimated
                 * from the new beats at the baseline rate -- and for a
                 * thread that was blocked one interval before that beat
                 * (it woke, worked, beat) */
                uint64_t onset;
                if (fresh == 1 || v->slow_end)
                    onset = v->seen_t;
                else {
                    /* it was late at seen_t + S*B at the earliest */
                    double back = (double)(fresh - 1) * v->base;
                    uint64_t least = v->seen_t + (uint64_t)(S * v->base);
                    onset = (double)s->t - back > (double)least ? s->t - (uint64_t)back : least;
                    if (onset > s->t)
                        onset = s->t;
                }
                if (v->cur == HBT_BHV_COND_WAITING && onset > (uint64_t)v->base)
                    onset -= (uint64_t)v->base;
                hbt_report(h, j, HBT_BHV_RUNNING, onset, s->seq - 1, c);
            }
        }
        v->proc_next = 0;   /* a beat came: the next lateness is judged at once */
        v->proc_gap = 0;
        v->probing = 0;
        v->slow_end = warm && last >= S * v->base ? 1 : 0;
        v->seen_seq = s->seq;
        v->seen_t = s->t;
    }

    /* ---- lateness ---- */
    uint64_t since = now > s->t ? now - s->t : 0;
    double base = v->base;
    if (v->soft) {
        c->look = now + HBT_SOFT_LOOK_NS;
        c->tol = HBT_SOFT_LOOK_NS / 2;
        goto final;
    }
    if (v->nbeats < HBT_WARM || base <= 0) {
        c->unwarm = 1;
        uint64_t w = base > 0 ? (uint64_t)(base / 2) : HBT_POLL_WARM_NS;
        c->look = now + (w < HBT_POLL_MIN_NS ? HBT_POLL_MIN_NS : w > HBT_POLL_WARM_NS ? HBT_POLL_WARM_NS : w);
        c->tol = 0;
        goto final;
    }
    double lim = S * base;
    uint64_t gap = (uint64_t)v->proc_gap * 16 * HBT_US;
    /* while it stays late, look for its next beat less and less often */
    uint64_t again = hbt_again(base, gap);
    if ((double)since <= lim) {
        if (v->cur == HBT_BHV_RUNNING)
            c->look = s->t + (uint64_t)lim + 1;   /* the moment it would be late */
        else
            c->look = now + (uint64_t)base;       /* for the second beat after a gap */
        c->tol = (uint64_t)(HBT_BATCH * base);
        goto final;
    }
    /* while it is probed for busy-waiting: its CPU clock every `step`
     * (a thread that shares its CPU needs longer to use the CPU time that
     * makes it busy), less and less often after 16 steps */
    uint64_t step = (uint64_t)(HBT_BUSY_WAIT * base);
    if (step < 2 * HBT_PROBE_MIN_NS)
        step = 2 * HBT_PROBE_MIN_NS;
    if (v->probing && now - v->probe_t > 16 * step)
        step = (now - v->probe_t) / 8;
    uint8_t bhv = HBT_BHV_COND_WAITING;
    if (c->final == HBT_FIN_NONE && now < v->proc_next) {
        if (v->probing && mon.have_proc) {
            /* between /proc reads: only the (cheaper) CPU clock */
            if (hbt_on_cpu(h)) {
                bhv = HBT_BHV_BUSY_WAITING;
                goto decided;
            }
            c->look = now + step;
            c->tol = 0;
            return HBT_J_ALIVE;
        }
        /* late, judged a moment ago: just watch for beats */
        c->look = now + again < v->proc_next ? now + again : v->proc_next;
        c->tol = (uint64_t)(HBT_BATCH * base);
        return HBT_J_ALIVE;
    }

    /* late: what is it doing? */
    int gone = 0;
    char ps;
    if (j == c->self)
        ps = 'R';   /* a final pass judging its own caller */
    else if (mon.have_proc)
        ps = hbt_task_state(h->b.os_tid, &gone);
    else if (c->final) {
        uint64_t cpu;
        gone = !hbt_task_cpu(h->b.os_tid, &cpu);
        ps = 'S';
    } else
        ps = hbt_state_by_cpu(h, now, &gone);
    if (gone || ps == 'Z' || ps == 'X') {
        if (__atomic_load_n(&h->b.state, __ATOMIC_ACQUIRE) == HBT_HS_ENDED)
            return hbt_judge_ended(h, j, c);   /* it ended normally meanwhile */
        if (hbt_beat_since(h, s, c))
            return HBT_J_ALIVE;
        hbt_report(h, j, HBT_BHV_FAILED, s->t, s->seq, c);   /* vanished */
        __atomic_store_n(&v->final, 1, __ATOMIC_RELEASE);
        return HBT_J_DEAD;
    }
    if (c->final)
        goto final;   /* Finished, exit: only whether it is gone */
    if (ps == 'R' && v->cur != HBT_BHV_BUSY_WAITING && !hbt_on_cpu(h))
        ps = 0;
    if (ps == 0) {
        /* undecided (state R, or no /proc): its CPU clock every step, /proc
         * again after 4 steps, then less and less often */
        gap = !mon.have_proc ? step : gap ? gap * 2 : 4 * step;
        if (gap > HBT_PROC_MAX_NS)
            gap = HBT_PROC_MAX_NS;
        v->proc_gap = (uint16_t)(gap / (16 * HBT_US));
        v->proc_next = now + gap;
        c->look = now + step;
        c->tol = 0;
        return HBT_J_ALIVE;
    }
    if (ps == 'R')
        bhv = HBT_BHV_BUSY_WAITING;
decided:
    if (hbt_beat_since(h, s, c))
        return HBT_J_ALIVE;
    int changed = bhv != v->cur;
    if (changed)
        hbt_report(h, j, bhv, s->t, s->seq, c);
    v->slow_end = 0;   /* the gap begins after the latest beat seen */
    v->probing = 0;
    /* back off the /proc reads while it stays late */
    gap = gap && !changed ? gap * 2 : (uint64_t)(2 * base) > HBT_MS ? (uint64_t)(2 * base) : HBT_MS;
    if (gap > HBT_PROC_MAX_NS)
        gap = HBT_PROC_MAX_NS;
    v->proc_gap = (uint16_t)(gap / (16 * HBT_US));
    v->proc_next = now + gap;
    again = hbt_again(base, gap);
    c->look = now + again;
    c->tol = (uint64_t)(HBT_BATCH * base);
    return HBT_J_ALIVE;

final:
    switch (c->final) {
    case HBT_FIN_FINISHED:
        /* threads that stopped beating end here; those still beating are
         * left alone */
        if (v->cur != HBT_BHV_EXITED &&
            (j == c->self || base <= 0 || (double)since > S * base)) {
            hbt_report(h, j, HBT_BHV_EXITED, s->t, s->seq, c);
            v->soft = 1;
        }
        return HBT_J_ALIVE;
    case HBT_FIN_EXIT_OK:
        if (v->cur != HBT_BHV_EXITED)
            hbt_report(h, j, HBT_BHV_EXITED, s->t, s->seq, c);
        __atomic_store_n(&v->final, 1, __ATOMIC_RELEASE);
        return HBT_J_DEAD;
    case HBT_FIN_EXIT_FAIL:
        if (!v->soft)
            hbt_report(h, j, HBT_BHV_FAILED, now, s->seq, c);
        __atomic_store_n(&v->final, 1, __ATOMIC_RELEASE);
        return HBT_J_DEAD;
    default:
        return HBT_J_ALIVE;
    }
}

/* Judge thread j: one message (a read of its entry) unless it is known to
 * be finished with. */
static int hbt_judge(uint32_t j, struct hbt_ctx *c)
{
    struct hbt_heart *h = &hbt_hearts[j];
    c->look = 0;
    c->tol = 0;
    if (__atomic_load_n(&h->v.final, __ATOMIC_ACQUIRE))
        return HBT_J_DEAD;
    uint32_t st = __atomic_load_n(&h->b.state, __ATOMIC_ACQUIRE);
    if (st == HBT_HS_FREE)
        return HBT_J_FREE;
    c->msgs++;
    struct hbt_seen s;
    hbt_read_beat(&h->b, &s);
    if (s.seq == 0 && st == HBT_HS_ACTIVE)
        return HBT_J_SILENT;
    if (!hbt_view_lock(&h->v, &c->wait))
        return st == HBT_HS_ENDED ? HBT_J_DEAD : HBT_J_ALIVE;   /* another checker has it */
    int r = __atomic_load_n(&h->v.final, __ATOMIC_RELAXED)
        ? HBT_J_DEAD : hbt_judge_locked(h, j, st, &s, c);
    hbt_view_unlock(&h->v);
    return r;
}

/* Judge every thread but the checker (all of them in a final pass).
 * Returns when the earliest of them should be looked at again
 * (UINT64_MAX: none); *active: threads alive and beating. */
static uint64_t hbt_pass_all(struct hbt_ctx *c, uint32_t *active)
{
    uint32_t n = hbt_nthreads();
    uint64_t wake = UINT64_MAX;
    uint32_t alive = 0;
    for (uint32_t j = 0; j < n; j++) {
        if (j == c->self && c->final == HBT_FIN_NONE)
            continue;
        int r = hbt_judge(j, c);
        if (r != HBT_J_ALIVE)
            continue;
        alive++;
        if (c->look && c->look + c->tol < wake)
            wake = c->look + c->tol;
    }
    if (active)
        *active = alive;
    return wake;
}

/* ------------------------------------------------------------------ */
/* MONITOR records                                                      */

static void hbt_mon_record(int mode, uint64_t period_ns, unsigned rec_mode)
{
    uint32_t n = hbt_nthreads();
    uint64_t msgs = __atomic_load_n(&mon.central_msgs, __ATOMIC_RELAXED) +
                    __atomic_load_n(&mon.api_msgs, __ATOMIC_RELAXED);
    uint64_t passes = __atomic_load_n(&mon.central_passes, __ATOMIC_RELAXED) +
                      __atomic_load_n(&mon.api_passes, __ATOMIC_RELAXED);
    uint32_t watched = 0, checkers = 0;
    double ring_period = 0;
    for (uint32_t j = 0; j < n; j++) {
        struct hbt_heart *h = &hbt_hearts[j];
        msgs += __atomic_load_n(&h->c.msgs, __ATOMIC_RELAXED);
        passes += __atomic_load_n(&h->c.checks, __ATOMIC_RELAXED);
        if (__atomic_load_n(&h->b.state, __ATOMIC_ACQUIRE) == HBT_HS_ACTIVE &&
            __atomic_load_n(&h->b.seq, __ATOMIC_RELAXED) != 0 &&
            !__atomic_load_n(&h->v.final, __ATOMIC_RELAXED))
            watched++;
        uint64_t p = __atomic_load_n(&h->c.period_ns, __ATOMIC_RELAXED);
        if (p) {
            ring_period += (double)p;
            checkers++;
        }
    }
    if (mode == HBT_MON_RING)
        period_ns = checkers ? (uint64_t)(ring_period / checkers) : 0;
    hbt_emit(HBT_REC_MONITOR, (uint16_t)mode, (uint32_t)msgs,
             (int32_t)(watched > INT32_MAX ? INT32_MAX : watched),
             hbt_sat32((double)passes), hbt_sat32((double)period_ns / 1e3),
             (uint32_t)(msgs >> 32), 0, rec_mode);
}

/* ------------------------------------------------------------------ */
/* ring mode                                                            */

/* Thread t's ring check at time now, from the cold path of its beat (or
 * Heartbeat_*_Monitor). Returns when to check next. */
static uint64_t hbt_ring_check(struct hbt_tls *t, uint64_t now)
{
    uint32_t self = t->thread_slot;
    uint32_t n = hbt_nthreads();
    uint64_t next = now + HBT_RING_IDLE_NS;
    if (self >= HBT_HEARTS)
        return next;
    struct hbt_ctx c = { .self = self, .flags = HBT_MON_RING };
    int old;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);   /* /proc reads are cancellation points */
    if (n > 1) {
        /* the neighbour found last, unless threads joined since; where
         * threads that did not beat yet lay in between, walk from ourselves
         * every 16th check to notice when they start */
        int cached = t->ring_valid && t->ring_n == n && t->ring_slot < n &&
                     t->ring_slot != self && !(t->ring_skipped && (++t->ring_count & 15) == 0);
        uint32_t j = cached ? t->ring_slot : (self + 1 == n ? 0 : self + 1);
        int skipped = 0, found = 0;
        /* at most once round the ring: a ring whose other threads all died
         * ends here with no neighbour */
        for (uint32_t step = 0; step < n && j != self; step++) {
            int r = hbt_judge(j, &c);
            if (r == HBT_J_ALIVE) {
                found = 1;
                break;
            }
            if (r != HBT_J_DEAD)
                skipped = 1;
            j = j + 1 == n ? 0 : j + 1;
        }
        if (found) {
            t->ring_skipped = (uint8_t)(cached ? (t->ring_skipped | skipped) : skipped);
            t->ring_valid = 1;
            t->ring_slot = j;
            t->ring_n = n;
            next = c.look > now ? c.look : now + 1;
        } else {
            t->ring_valid = 0;
        }
    }
    struct hbt_checkline *cl = &hbt_hearts[self].c;
    if (cl->last_ns && now > cl->last_ns) {
        uint64_t d = now - cl->last_ns;
        uint64_t p = cl->period_ns ? cl->period_ns - cl->period_ns / 8 + d / 8 : d;
        __atomic_store_n(&cl->period_ns, p, __ATOMIC_RELAXED);
    }
    cl->last_ns = now;
    hbt_account(t, c.msgs, 1);
    pthread_setcancelstate(old, NULL);
    return next;
}

/* ------------------------------------------------------------------ */
/* the central monitor thread                                           */

/* A thread beat for the first time: an idle monitor thread looks at once. */
static void hbt_mon_wake(void)
{
    if (__atomic_load_n(&mon.idle, __ATOMIC_ACQUIRE) &&
        __atomic_exchange_n(&mon.idle, 0, __ATOMIC_ACQ_REL)) {
        __atomic_fetch_add(&mon.wake, 1, __ATOMIC_SEQ_CST);
        hbt_futex_wake(&mon.wake, 1);
    }
}

static void hbt_mon_auto(uint64_t now);

static void *hbt_mon_main(void *unused)
{
    (void)unused;
    struct hbt_tls *t = &hbt_tls;
    /* a tracer thread whose chunk holds only the monitor's records: no
     * THREAD_START, no heart entry, never beating */
    t->monitor = 1;
    hbt_register_quiet(t);
    hbt_bg_wake_on_time();

    uint64_t now = hbt_now_ns();
    uint64_t next_stat = now + HBT_SEC, last_stat = now, passes_at_stat = 0;
    uint64_t next_life = now + HBT_POLL_IDLE_NS;
    while (!__atomic_load_n(&mon.stop, __ATOMIC_ACQUIRE) && hbt_state() == HBT_ON) {
        struct hbt_ctx c = { .self = UINT32_MAX, .flags = HBT_MON_CENTRAL };
        uint32_t active = 0;
        uint64_t wake = hbt_pass_all(&c, &active);
        uint64_t passes = mon.central_passes + 1;
        __atomic_store_n(&mon.central_msgs, mon.central_msgs + c.msgs, __ATOMIC_RELAXED);
        __atomic_store_n(&mon.central_passes, passes, __ATOMIC_RELAXED);

        now = hbt_now_ns();
        if (mon.period_ns) {
            wake = now + mon.period_ns;
        } else if (!active) {
            wake = now + HBT_POLL_IDLE_NS;
        } else {
            if (c.unwarm && wake > now + HBT_POLL_WARM_NS)
                wake = now + HBT_POLL_WARM_NS;
            if (wake < now + HBT_POLL_MIN_NS)
                wake = now + HBT_POLL_MIN_NS;
            if (wake > now + HBT_POLL_MAX_NS)
                wake = now + HBT_POLL_MAX_NS;
        }
        if (now >= next_stat) {
            uint64_t period = (now - last_stat) / (passes - passes_at_stat ? passes - passes_at_stat : 1);
            __atomic_store_n(&mon.central_period_ns, period, __ATOMIC_RELAXED);
            hbt_mon_record(HBT_MON_CENTRAL, period, HBT_MODE_BEAT);
            last_stat = now;
            passes_at_stat = passes;
            next_stat = now + HBT_SEC;
        }
        if (wake > next_stat)
            wake = next_stat;
        if (mon.heart_rate > 0) {
            hbt_mon_auto(now);
            uint64_t due = __atomic_load_n(&mon.next_adjust, __ATOMIC_RELAXED);
            if (due > now && wake > due)
                wake = due;
        }
        if (!active && now >= next_life) {
            next_life = now + HBT_POLL_IDLE_NS;
            if (hbt_orphaned())
                break;   /* do not keep the process alive */
        }
        /* idle: the first beat of a thread wakes us (`idle` is set before
         * the word is read, and the waker bumps the word after clearing it) */
        uint32_t word = __atomic_load_n(&mon.wake, __ATOMIC_SEQ_CST);
        __atomic_store_n(&mon.idle, !active || c.unwarm, __ATOMIC_SEQ_CST);
        (void)hbt_sleep_until(wake, &mon.wake, word);
        __atomic_store_n(&mon.idle, 0, __ATOMIC_RELAXED);
    }
    return NULL;
}

/* Start the monitor thread once per process; never waits. */
static void hbt_mon_start_thread(void)
{
    if (__atomic_load_n(&mon.started, __ATOMIC_ACQUIRE) || getpid() != hbt_g.pid)
        return;   /* getpid: never from a vfork child */
    if (__atomic_exchange_n(&mon.started, 1, __ATOMIC_ACQ_REL))
        return;
    int rc = hbt_bg_start(NULL, "hbt-monitor", HBT_MON_STACK, 0, hbt_mon_main, NULL);
    if (rc != 0)
        hbt_warn("hbtrace: cannot start the monitor thread: %s; behaviours are detected "
                 "only by Heartbeat_*_Monitor calls and at Finished/exit", strerror(rc));
}

/* Make `want` the monitor mode of the process, once. */
static void hbt_mon_activate(int want, int from_env)
{
    int none = HBT_MON_NONE;
    if (!__atomic_compare_exchange_n(&mon.mode, &none, want, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        return;
    mon.from_env = from_env;
    mon.start_ns = hbt_now_ns();
    hbt_mon_note_meta(want);
    if (want == HBT_MON_CENTRAL)
        hbt_mon_start_thread();
}

/* A fork child's first use: its own metadata, its own monitor thread. */
static void hbt_mon_child_start(void)
{
    if (!__atomic_load_n(&mon.pending, __ATOMIC_ACQUIRE) ||
        !__atomic_exchange_n(&mon.pending, 0, __ATOMIC_ACQ_REL))
        return;
    int mode = __atomic_load_n(&mon.mode, __ATOMIC_ACQUIRE);
    mon.start_ns = hbt_now_ns();
    hbt_mon_note_meta(mode);
    if (mode == HBT_MON_CENTRAL)
        hbt_mon_start_thread();
}

/* ------------------------------------------------------------------ */
/* heart-rate adjustment (seed 001, Algorithm 2)                        */

static void hbt_mon_auto(uint64_t now)
{
    uint64_t due = __atomic_load_n(&mon.next_adjust, __ATOMIC_ACQUIRE);
    if (due == 0) {
        /* the first window begins */
        if (__atomic_compare_exchange_n(&mon.next_adjust, &due, now + HBT_SEC, 0,
                                        __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) &&
            !__atomic_exchange_n(&mon.rate_noted, 1, __ATOMIC_ACQ_REL)) {
            char num[32];
            snprintf(num, sizeof num, "%g", mon.heart_rate);
            hbt_meta_append_once("heart_rate", num);
        }
        return;
    }
    if (now < due || !__atomic_compare_exchange_n(&mon.next_adjust, &due, now + HBT_SEC, 0,
                                                  __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return;   /* not yet, or another thread does it */
    (void)hbt_mon_adjust(mon.heart_rate, 1);
}

int hbt_mon_adjust(double expected, int automatic)
{
    if (!(expected > 0) || !isfinite(expected) || !hbt_ensure_open())
        return 1;
    if (__atomic_exchange_n(&mon.adjust_lock, 1, __ATOMIC_ACQUIRE))
        return 1;   /* another thread is adjusting right now */
    uint64_t now = hbt_now_ns();
    uint32_t n = hbt_nthreads();
    double sum = 0;
    uint32_t count = 0;
    for (uint32_t j = 0; j < n; j++) {
        struct hbt_beatline *b = &hbt_hearts[j].b;
        if (__atomic_load_n(&b->state, __ATOMIC_ACQUIRE) != HBT_HS_ACTIVE) {
            mon.snap[j].valid = 0;
            continue;
        }
        struct hbt_seen s;
        hbt_read_beat(b, &s);
        double rate = 0;
        if (mon.snap[j].valid && mon.snap[j].seq != 0) {
            /* beats per second over the window since the last adjustment */
            if (s.seq != mon.snap[j].seq && now > mon.snap[j].t)
                rate = (double)(uint32_t)(s.seq - mon.snap[j].seq) * 1e9 /
                       (double)(now - mon.snap[j].t);
        } else {
            /* no window yet: since its first beat */
            uint64_t ft = __atomic_load_n(&b->first_t, __ATOMIC_ACQUIRE);
            uint32_t fs = __atomic_load_n(&b->first_seq, __ATOMIC_RELAXED);
            if (ft && s.seq > fs && s.t > ft)
                rate = (double)(s.seq - fs) * 1e9 / (double)(s.t - ft);
        }
        if (rate > 0) {
            sum += rate;
            count++;
        }
        mon.snap[j].t = now;
        mon.snap[j].seq = s.seq;
        mon.snap[j].valid = 1;
    }
    if (!count) {
        __atomic_store_n(&mon.adjust_lock, 0, __ATOMIC_RELEASE);
        return 1;   /* no heart rate observed yet */
    }
    double observed = sum / count;
    uint32_t k_old = __atomic_load_n(&hbt_mon_hot.every, __ATOMIC_RELAXED);
    double want = (double)k_old * observed / expected;
    uint32_t k_new = want >= (double)HBT_K_MAX ? HBT_K_MAX
                   : want < 1.5 ? 1u : (uint32_t)(want + 0.5);
    if (k_new != k_old) {
        __atomic_store_n(&hbt_mon_hot.every, k_new, __ATOMIC_RELAXED);
        struct hbt_tls *t = &hbt_tls;
        hbt_emit(HBT_REC_ADJUST, (uint16_t)(automatic ? 1 : 0), k_old,
                 t->user_set ? t->user_thread : -1, hbt_sat32(observed * 1e3),
                 hbt_sat32(expected * 1e3), k_new, 0, HBT_MODE_API & ~HBT_M_RESERVE);
    }
    __atomic_store_n(&mon.adjust_lock, 0, __ATOMIC_RELEASE);
    return 0;
}

/* ------------------------------------------------------------------ */
/* entry points                                                         */

/* The cold path of a beat: at most once a second per thread, and at every
 * ring check. */
void hbt_mon_beat(struct hbt_tls *t, uint64_t now)
{
    struct hbt_beatline *b = t->beat;
    /* the number its beats record: the beat path does not store it */
    if (b->thread != t->beat_thread)
        __atomic_store_n(&b->thread, t->beat_thread, __ATOMIC_RELAXED);
    if (!b->first_t) {
        b->first_seq = b->seq;
        __atomic_store_n(&b->first_t, now, __ATOMIC_RELEASE);
        hbt_mon_wake();
    }
    if (t->monitor || t->internal) {
        t->next_check = UINT64_MAX;
        return;
    }
    int mode = __atomic_load_n(&mon.mode, __ATOMIC_ACQUIRE);
    if (mode == HBT_MON_NONE && mon.env_mode != HBT_MON_NONE) {
        /* HBTRACE_MONITOR in a program that called no typed Init */
        hbt_mon_activate(mon.env_mode, 1);
        mode = __atomic_load_n(&mon.mode, __ATOMIC_ACQUIRE);
    }
    if (__atomic_load_n(&mon.pending, __ATOMIC_RELAXED))
        hbt_mon_child_start();
    uint64_t next = now + HBT_COLD_MAX_NS;
    if (mon.heart_rate > 0) {
        hbt_mon_auto(now);
        uint64_t due = __atomic_load_n(&mon.next_adjust, __ATOMIC_RELAXED);
        if (due > now && due < next)
            next = due;
    }
    if (mode == HBT_MON_RING && b != &t->sink) {
        uint64_t r = hbt_ring_check(t, now);
        if (r < next)
            next = r;
    }
    t->next_check = next;
}

/* Heartbeat_*_Init(type): the mode (HBTRACE_MONITOR wins over type). */
void hbt_mon_init_type(int type)
{
    int want, env = mon.env_mode != HBT_MON_NONE;
    if (env) {
        want = mon.env_mode;
    } else if (type == HBT_MON_CENTRAL || type == HBT_MON_RING) {
        want = type;
    } else {
        if (!__atomic_exchange_n(&mon.type_warned, 1, __ATOMIC_ACQ_REL))
            hbt_warn("hbtrace: Init type %d: expected 0 (centralized) or 1 (decentralized); "
                     "using 0", type);
        want = HBT_MON_CENTRAL;
    }
    hbt_mon_activate(want, env);
    hbt_mon_child_start();
}

/* Heartbeat_*_Monitor(): one detection pass by the caller. */
void hbt_mon_api_pass(void)
{
    uint32_t slot;
    if (!hbt_self_slot(&slot))
        return;
    int mode = __atomic_load_n(&mon.mode, __ATOMIC_ACQUIRE);
    if (mode == HBT_MON_NONE && mon.env_mode != HBT_MON_NONE) {
        hbt_mon_activate(mon.env_mode, 1);
        mode = __atomic_load_n(&mon.mode, __ATOMIC_ACQUIRE);
    }
    if (mode == HBT_MON_OFF)
        return;
    struct hbt_tls *t = &hbt_tls;
    if (mode == HBT_MON_RING && t->beat && t->beat != &t->sink) {
        (void)hbt_ring_check(t, hbt_now_ns());
        return;
    }
    int old;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    struct hbt_ctx c = { .self = slot < HBT_HEARTS ? slot : UINT32_MAX,
                         .flags = mode == HBT_MON_RING ? HBT_MON_RING : HBT_MON_CENTRAL };
    (void)hbt_pass_all(&c, NULL);
    hbt_account(t, c.msgs, 1);
    pthread_setcancelstate(old, NULL);
}

/* A final pass and a MONITOR record, at Finished and at exit. */
static void hbt_mon_final(int fin, unsigned rec_mode)
{
    int mode = __atomic_load_n(&mon.mode, __ATOMIC_ACQUIRE);
    if (mode != HBT_MON_CENTRAL && mode != HBT_MON_RING)
        return;
    if (__atomic_load_n(&mon.pending, __ATOMIC_ACQUIRE))
        return;   /* a fork child that never beat: nothing was monitored here */
    struct hbt_tls *t = &hbt_tls;
    if (t->internal)
        return;   /* the pre-faulter running the exit handlers: records nothing */
    int old;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    struct hbt_ctx c = { .self = UINT32_MAX, .flags = (uint16_t)mode, .final = (uint8_t)fin,
                         .wait = 1 };
    if (t->registered && t->beat && t->thread_slot < HBT_HEARTS &&
        t->beat == &hbt_hearts[t->thread_slot].b)
        c.self = t->thread_slot;
    (void)hbt_pass_all(&c, NULL);
    hbt_account(t, c.msgs, 1);
    uint64_t period = __atomic_load_n(&mon.central_period_ns, __ATOMIC_RELAXED);
    uint64_t passes = __atomic_load_n(&mon.central_passes, __ATOMIC_RELAXED);
    if (mode == HBT_MON_CENTRAL && passes && mon.start_ns) {
        uint64_t now = hbt_now_ns();
        period = now > mon.start_ns ? (now - mon.start_ns) / passes : period;
    }
    hbt_mon_record(mode, period, rec_mode);
    uint32_t unwatched = __atomic_load_n(&mon.unwatched, __ATOMIC_RELAXED);
    if (unwatched) {
        char num[16];
        snprintf(num, sizeof num, "%u", unwatched);
        hbt_meta_append_once("monitor_unwatched_threads", num);
    }
    pthread_setcancelstate(old, NULL);
}

void hbt_mon_finished(void)
{
    if (!hbt_ensure_open())
        return;
    hbt_mon_final(HBT_FIN_FINISHED, HBT_MODE_API & ~HBT_M_RESERVE);
}

/* At process exit (exit, return from main, _exit; not in a signal
 * handler): threads still at work end with the process. */
void hbt_mon_at_exit(int status)
{
    __atomic_store_n(&mon.stop, 1, __ATOMIC_RELEASE);   /* the monitor thread stops judging */
    hbt_mon_final(status == 0 ? HBT_FIN_EXIT_OK : HBT_FIN_EXIT_FAIL,
                  HBT_MODE_END & ~HBT_M_RESERVE);
}
