/*
 * queue.c -- instrumented single-producer single-consumer ring queues and
 * their monitor thread (hbtrace_queue.h; seed 002: online
 * service-rate estimation of stream stages).
 *
 * The ring. Indices count items modulo 2^31 (bit 31 of the producer's
 * published word is the "closed" mark, so that close changes the word a
 * waiting consumer sleeps on and can never be missed). Five groups of
 * fields, each on cache lines of its own (128 bytes, so that the adjacent-
 * line prefetcher does not pair them):
 *   tail   the producer's published index | Q_CLOSED: written by the
 *          producer (release) once per push, read by the consumer only when
 *          its cached copy says the queue is empty;
 *   head   the consumer's published index, the same the other way round;
 *   p, c   each end's private state: its own index and slot, its cached
 *          copy of the other end's index, and the counters the monitor
 *          samples (non-blocking transactions, transactions that waited,
 *          waits begun, a flag while waiting). Only the end's own thread
 *          writes them (relaxed atomic stores of its own values, no
 *          read-modify-write), the monitor reads them once per period;
 *   pwant, cwait  the sleepers' flags: written only when an end goes to
 *          sleep, read by the other end once per transaction (so they stay
 *          shared in both caches and cost one cache hit).
 * Counters are cumulative; the monitor keeps the values of its previous
 * sample and writes the differences, so no count is ever lost or counted
 * twice, with no atomic exchange on the hot path.
 *
 * Waiting. An end that cannot proceed spins (pause) for about Q_SPIN_NS,
 * then sets its flag (seq_cst), reads the other index again (seq_cst) and
 * sleeps with FUTEX_WAIT on the other end's published index word, which the
 * kernel compares with the value it saw. The other end, after publishing its
 * index, reads the flag (relaxed, no fence) and, if set, clears it and
 * wakes. Without a fence on the fast path, the flag can be read before the
 * index store is visible; the sleeper then still finds the index changed
 * when the kernel compares it (the store has long drained by the time the
 * futex call gets there), and in the worst case the wait ends by its
 * timeout, Q_BACKSTOP_NS, and the sleeper looks again. A producer that
 * waits on a full queue asks to be woken when capacity/8 slots are free, so
 * that a consumer draining a full queue makes one wake-up call per
 * capacity/8 pops, not one per pop.
 *
 * The monitor thread (one per process, "hbt-queues", while tracing is on
 * and a monitored queue exists): sleeps toward the earliest deadline of its
 * queues (FUTEX_WAIT_BITSET with an absolute CLOCK_MONOTONIC timeout, the
 * clock of clock_nanosleep(TIMER_ABSTIME), but wakeable by create, destroy
 * and exit), then, holding qreg.lock, takes both ends' counters of every
 * queue whose deadline has passed and writes two QUEUE_SAMPLE records each
 * into its own chunk. Deadlines lie on the grid of multiples of each
 * queue's T, so queues with equal (or nested) periods share one wake-up:
 * on a busy machine every wake-up costs the stages a preemption (one thread
 * per queue cost a 3-queue compute-bound pipeline +3.85 % of its run time,
 * one shared thread +1.09 %: benchmarks/eval_service_rate.py --parts
 * overhead, README). Destroy unlinks a queue under
 * qreg.lock, so the monitor never touches it again; the destroy of the last
 * monitored queue stops and joins the thread. A per-queue sampling flag
 * (try-lock) keeps samples and the final samples (destroy, exit) apart. The
 * sampling-period policy is in hbtrace_queue.h.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hbtrace_queue.h"
#include "internal.h"

#define Q_LINE            128u
#define Q_MASK            0x7fffffffu      /* indices modulo 2^31 */
#define Q_CLOSED          0x80000000u      /* in the tail word: closed */
#define Q_WANT            0x80000000u      /* in pwant: a producer sleeps */
#define Q_MAX_CAP         (1u << 30)
#define Q_MAX_ITEM        (16u << 20)
#define Q_NAME_MAX        255u             /* bytes of a name that are recorded */
#define Q_FRAG            24u              /* text bytes per NAME record */

#define Q_NS_US           1000ull
#define Q_NS_MS           1000000ull
#define Q_NS_S            1000000000ull
#define Q_SPIN_NS         (2 * Q_NS_US)    /* spin before sleeping */
#define Q_BACKSTOP_NS     (4 * Q_NS_MS)    /* longest futex sleep before looking again */

/* sampling period policy (hbtrace_queue.h) */
#define Q_PERIOD_US       1000u            /* default first period */
#define Q_PERIOD_MAX_US   16000u           /* default longest period: 4 doublings */
#define Q_PERIOD_FLOOR_US 100u             /* shortest period accepted */
#define Q_PERIOD_CEIL_US  10000000u        /* longest period accepted */
#define Q_STABLE_K        8u               /* good periods in a row before T doubles */
#define Q_TOL_PCT         10u              /* realized period within this % of T */
#define Q_ALIGN_WAIT      4u               /* periods T may wait for a deadline on the new grid */

#define Q_ORPHAN_NS       (100 * Q_NS_MS)  /* how often the monitor checks that the
                                              program still has threads */
#define Q_FINAL_WAIT_NS   (50 * Q_NS_MS)   /* final sample: wait for a sampling monitor */
#define Q_EXIT_LOCK_MS    100              /* at exit: wait for the registry */
#define Q_STACK           (128u * 1024u)
#define Q_KMAX            1024u            /* threads whose blocking is seen per stage */
#define Q_KNONE           UINT32_MAX       /* kslot: the thread has no q_kern slot */

/* One end's private state. */
struct hbt_qend {
    uint32_t mine;        /* own index (mod 2^31) */
    uint32_t cache;       /* the other end's index as last seen */
    uint32_t pos;         /* own slot in buf */
    uint32_t waiting;     /* atomic: 1 while the end waits */
    uint32_t closed;      /* producer: closed */
    uint32_t kslot;       /* atomic: 1 + q_kern slot of the thread at this end
                             (0: none yet, Q_KNONE: the table was full) */
    uint64_t nb;          /* atomic: transactions that did not wait */
    uint64_t blk;         /* atomic: transactions that waited, then completed */
    uint64_t waits;       /* atomic: waits begun, failed try_* calls */
} __attribute__((aligned(Q_LINE)));

struct hbt_qword {
    uint32_t v;
} __attribute__((aligned(Q_LINE)));

struct hbt_qmon {
    int      slock;       /* atomic: sampling in progress */
    int      final_done;  /* atomic, set under slock: the final samples are written */
    uint32_t period_us;   /* atomic: T now */
    uint64_t open_ns;     /* QUEUE_OPEN time */
    /* the period policy, kept by the monitor thread under qreg.lock */
    uint64_t T;           /* ns */
    uint64_t deadline;    /* CLOCK_MONOTONIC ns of the next sample; UINT64_MAX: none */
    unsigned streak;      /* good periods in a row */
    unsigned lost;        /* periods in a row in which both ends' stages blocked */
    uint64_t last_ns;     /* under slock: time of the previous sample */
    uint64_t prev_nb[2], prev_blk[2], prev_waits[2];   /* under slock */
    uint32_t prev_kslot[2];                            /* under slock */
    uint64_t prev_kblk[2];                             /* under slock */
} __attribute__((aligned(Q_LINE)));

struct hbt_queue {
    /* read-only after creation */
    char     *buf;
    size_t    isz;
    uint32_t  cap;
    uint32_t  hyst;       /* a sleeping producer wants this many more free slots */
    uint32_t  id;
    pid_t     pid;        /* creating process: only it samples */
    int       monitored;  /* samples are recorded */
    uint32_t  name_len;
    struct hbt_queue *next;   /* registry list, under qreg.lock */
    char      name[Q_NAME_MAX + 1];

    struct hbt_qword tail;    /* producer's index | Q_CLOSED */
    struct hbt_qword head;    /* consumer's index */
    struct hbt_qend  p;       /* producer (HBT_QEND_PRODUCER) */
    struct hbt_qend  c;       /* consumer (HBT_QEND_CONSUMER) */
    struct hbt_qword pwant;   /* Q_WANT | head index a sleeping producer waits for */
    struct hbt_qword cwait;   /* 1: the consumer sleeps */
    struct hbt_qmon  m;
};

/* The queues of this process, and the configuration read once. */
static struct {
    pthread_mutex_t lock;
    struct hbt_queue *head;   /* atomic for the quick look at exit */
    uint32_t next_id;
    int configured;
    int monitor_on;
    uint32_t period_us, period_max_us;
    int noted;                /* metadata written into this process's file */
    int start_warned;
    /* the monitor thread (one per process, for every monitored queue) */
    int mon_running;          /* a monitor thread of generation mon_gen samples */
    uint32_t mon_gen;         /* bumped to stop it */
    int mon_joinable;         /* mon_thread is still to be joined */
    pthread_t mon_thread;
    uint32_t mwake;           /* atomic: futex word of its sleep, bumped to wake it */
} qreg = { .lock = PTHREAD_MUTEX_INITIALIZER };

/*
 * Blocking per stage. Seed 002 keeps a sample only when the kernel (the
 * thread at that end) blocked on none of its queues, in-bound or out-bound,
 * in the period: a stage that waited on its output queue served fewer items
 * from its input queue than it could, though that input end never blocked.
 * Each thread that uses a queue takes a slot of q_kern the first time (never
 * reused, so the monitor may read a slot after its thread ended) and counts
 * there every wait on any queue; each end remembers the slot of the thread
 * that used it last. Only the slot's thread writes it.
 */
struct q_kern {
    uint64_t blocked;     /* atomic: waits begun and failed try_* calls, any queue */
    uint32_t waiting;     /* atomic: 1 while the thread waits on a queue */
} __attribute__((aligned(64)));

static struct q_kern q_kern[Q_KMAX];
static uint32_t q_knext;   /* atomic: slots handed out */
static __thread uint32_t q_kslot __attribute__((tls_model("initial-exec")));

static HBT_COLD uint32_t q_kslot_take(void)
{
    uint32_t s = __atomic_fetch_add(&q_knext, 1, __ATOMIC_RELAXED);
    q_kslot = s < Q_KMAX ? s + 1 : Q_KNONE;
    return q_kslot;
}

/* This thread is the one at end e: one TLS read and one compare when it
 * was already. Returns this thread's slot, or NULL. */
static inline struct q_kern *q_kown(struct hbt_qend *e)
{
    uint32_t s = q_kslot;
    if (__builtin_expect(s == 0, 0))
        s = q_kslot_take();
    if (__builtin_expect(e->kslot != s, 0))
        __atomic_store_n(&e->kslot, s, __ATOMIC_RELAXED);
    return s != Q_KNONE ? &q_kern[s - 1] : NULL;
}

/* ------------------------------------------------------------------ */
/* small helpers                                                       */

static inline void q_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#else
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
#endif
}

/* The owner's counter + 1: a relaxed store of its own value (single writer). */
static inline void q_bump(uint64_t *c)
{
    __atomic_store_n(c, *c + 1, __ATOMIC_RELAXED);
}

/* The thread at end e begins a wait (wait = 1), or failed a try_* call
 * (wait = 0): counted for the end and for the thread (any of its queues). */
static HBT_COLD void q_wait_begin(struct hbt_qend *e, int wait)
{
    struct q_kern *k = q_kown(e);
    q_bump(&e->waits);
    if (k)
        q_bump(&k->blocked);
    if (wait) {
        __atomic_store_n(&e->waiting, 1, __ATOMIC_RELAXED);
        if (k)
            __atomic_store_n(&k->waiting, 1, __ATOMIC_RELAXED);
    }
}

static void q_wait_end(struct hbt_qend *e)
{
    __atomic_store_n(&e->waiting, 0, __ATOMIC_RELAXED);
    uint32_t s = q_kslot;
    if (s != 0 && s != Q_KNONE)
        __atomic_store_n(&q_kern[s - 1].waiting, 0, __ATOMIC_RELAXED);
}

/* Index h is at or past index want (mod 2^31; they are at most 2^30 apart). */
static inline int q_reached(uint32_t h, uint32_t want)
{
    return ((h - want) & Q_MASK) < Q_MAX_CAP;
}

static inline void q_copy(void *dst, const void *src, size_t n)
{
    switch (n) {   /* constant sizes become plain moves */
    case 4:  memcpy(dst, src, 4); break;
    case 8:  memcpy(dst, src, 8); break;
    case 16: memcpy(dst, src, 16); break;
    default: memcpy(dst, src, n); break;
    }
}

static void q_futex_wait(uint32_t *word, uint32_t val, uint64_t rel_ns)
{
    struct timespec ts = { .tv_sec = (time_t)(rel_ns / Q_NS_S),
                           .tv_nsec = (long)(rel_ns % Q_NS_S) };
    int saved = errno;
    (void)syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, val, &ts, NULL, 0);
    errno = saved;   /* never disturb the program's errno */
}

static void q_futex_wake(uint32_t *word, int n)
{
    hbt_futex_wake(word, n);
}

/* ------------------------------------------------------------------ */
/* the ring                                                            */

/* Producer: wait for room after slot t was found taken. Spins, then sleeps
 * until capacity/8 more slots are free. Only the consumer frees slots, and
 * it pops until the queue is empty, so the wait ends. */
static HBT_COLD void q_wait_room(struct hbt_queue *q, uint32_t t)
{
    struct hbt_qend *e = &q->p;
    q_wait_begin(e, 1);
    uint32_t need = (t + 1u - q->cap) & Q_MASK;   /* head index that frees slot t */
    uint32_t h;
    uint64_t t0 = 0;
    for (unsigned i = 0;; i++) {
        h = __atomic_load_n(&q->head.v, __ATOMIC_ACQUIRE);
        if (q_reached(h, need))
            goto done;
        if ((i & 15) == 15) {
            uint64_t now = hbt_now_ns();
            if (!t0)
                t0 = now;
            else if (now - t0 > Q_SPIN_NS)
                break;
        }
        q_pause();
    }
    uint32_t want = (need + q->hyst) & Q_MASK;   /* at most t: reached when empty */
    for (;;) {
        __atomic_store_n(&q->pwant.v, Q_WANT | want, __ATOMIC_SEQ_CST);
        h = __atomic_load_n(&q->head.v, __ATOMIC_SEQ_CST);
        if (q_reached(h, want))
            break;
        q_futex_wait(&q->head.v, h, Q_BACKSTOP_NS);
    }
    __atomic_store_n(&q->pwant.v, 0, __ATOMIC_RELAXED);
done:
    e->cache = h;
    q_wait_end(e);
}

/* Consumer: wait for an item after finding the queue empty at index h.
 * 1: there is one; 0: closed and drained. */
static HBT_COLD int q_wait_item(struct hbt_queue *q, uint32_t h)
{
    struct hbt_qend *e = &q->c;
    q_wait_begin(e, 1);
    uint32_t tw;
    int got;
    uint64_t t0 = 0;
    for (unsigned i = 0;; i++) {
        tw = __atomic_load_n(&q->tail.v, __ATOMIC_ACQUIRE);
        if ((tw & Q_MASK) != h) { got = 1; goto done; }
        if (tw & Q_CLOSED)      { got = 0; goto done; }
        if ((i & 15) == 15) {
            uint64_t now = hbt_now_ns();
            if (!t0)
                t0 = now;
            else if (now - t0 > Q_SPIN_NS)
                break;
        }
        q_pause();
    }
    for (;;) {
        __atomic_store_n(&q->cwait.v, 1, __ATOMIC_SEQ_CST);
        tw = __atomic_load_n(&q->tail.v, __ATOMIC_SEQ_CST);
        if ((tw & Q_MASK) != h) { got = 1; break; }
        if (tw & Q_CLOSED)      { got = 0; break; }
        q_futex_wait(&q->tail.v, tw, Q_BACKSTOP_NS);
    }
    __atomic_store_n(&q->cwait.v, 0, __ATOMIC_RELAXED);
done:
    e->cache = tw & Q_MASK;
    q_wait_end(e);
    return got;
}

static inline void q_put(struct hbt_queue *q, const void *item, int waited)
{
    struct hbt_qend *e = &q->p;
    q_kown(e);
    q_copy(q->buf + (size_t)e->pos * q->isz, item, q->isz);
    e->pos = e->pos + 1 == q->cap ? 0 : e->pos + 1;
    uint32_t t = (e->mine + 1u) & Q_MASK;
    e->mine = t;
    __atomic_store_n(&q->tail.v, t, __ATOMIC_RELEASE);
    q_bump(waited ? &e->blk : &e->nb);
    if (__builtin_expect(__atomic_load_n(&q->cwait.v, __ATOMIC_RELAXED) != 0, 0) &&
        __atomic_exchange_n(&q->cwait.v, 0, __ATOMIC_ACQ_REL))
        q_futex_wake(&q->tail.v, 1);
}

static inline void q_take(struct hbt_queue *q, void *item, int waited)
{
    struct hbt_qend *e = &q->c;
    q_kown(e);
    q_copy(item, q->buf + (size_t)e->pos * q->isz, q->isz);
    e->pos = e->pos + 1 == q->cap ? 0 : e->pos + 1;
    uint32_t h = (e->mine + 1u) & Q_MASK;
    e->mine = h;
    __atomic_store_n(&q->head.v, h, __ATOMIC_RELEASE);
    q_bump(waited ? &e->blk : &e->nb);
    uint32_t pw = __atomic_load_n(&q->pwant.v, __ATOMIC_RELAXED);
    if (__builtin_expect(pw != 0, 0) && q_reached(h, pw & Q_MASK) &&
        __atomic_exchange_n(&q->pwant.v, 0, __ATOMIC_ACQ_REL))
        q_futex_wake(&q->head.v, 1);
}

HBT_EXPORT int hbt_queue_push(hbt_queue_t *q, const void *item)
{
    if (__builtin_expect(!q || q->p.closed, 0))
        return -1;
    struct hbt_qend *e = &q->p;
    int waited = 0;
    if (__builtin_expect(((e->mine - e->cache) & Q_MASK) >= q->cap, 0)) {
        e->cache = __atomic_load_n(&q->head.v, __ATOMIC_ACQUIRE);
        if (((e->mine - e->cache) & Q_MASK) >= q->cap) {
            q_wait_room(q, e->mine);
            waited = 1;
        }
    }
    q_put(q, item, waited);
    return 0;
}

HBT_EXPORT int hbt_queue_try_push(hbt_queue_t *q, const void *item)
{
    if (__builtin_expect(!q || q->p.closed, 0))
        return -1;
    struct hbt_qend *e = &q->p;
    if (((e->mine - e->cache) & Q_MASK) >= q->cap) {
        e->cache = __atomic_load_n(&q->head.v, __ATOMIC_ACQUIRE);
        if (((e->mine - e->cache) & Q_MASK) >= q->cap) {
            q_wait_begin(e, 0);
            return 0;
        }
    }
    q_put(q, item, 0);
    return 1;
}

HBT_EXPORT int hbt_queue_pop(hbt_queue_t *q, void *item)
{
    if (__builtin_expect(!q, 0))
        return 0;
    struct hbt_qend *e = &q->c;
    int waited = 0;
    if (__builtin_expect(e->cache == e->mine, 0)) {
        uint32_t tw = __atomic_load_n(&q->tail.v, __ATOMIC_ACQUIRE);
        e->cache = tw & Q_MASK;
        if (e->cache == e->mine) {
            if (tw & Q_CLOSED)
                return 0;
            if (!q_wait_item(q, e->mine))
                return 0;
            waited = 1;
        }
    }
    q_take(q, item, waited);
    return 1;
}

HBT_EXPORT int hbt_queue_try_pop(hbt_queue_t *q, void *item)
{
    if (__builtin_expect(!q, 0))
        return -1;
    struct hbt_qend *e = &q->c;
    if (e->cache == e->mine) {
        uint32_t tw = __atomic_load_n(&q->tail.v, __ATOMIC_ACQUIRE);
        e->cache = tw & Q_MASK;
        if (e->cache == e->mine) {
            if (tw & Q_CLOSED)
                return -1;
            q_wait_begin(e, 0);
            return 0;
        }
    }
    q_take(q, item, 0);
    return 1;
}

HBT_EXPORT void hbt_queue_close(hbt_queue_t *q)
{
    if (!q || q->p.closed)
        return;
    q->p.closed = 1;
    /* changes the word a sleeping consumer waits on: it cannot miss it */
    __atomic_store_n(&q->tail.v, q->p.mine | Q_CLOSED, __ATOMIC_SEQ_CST);
    q_futex_wake(&q->tail.v, INT_MAX);
}

HBT_EXPORT int hbt_queue_stats(const hbt_queue_t *q, struct hbt_queue_stats *out)
{
    if (!q || !out) {
        errno = EINVAL;
        return -1;
    }
    memset(out, 0, sizeof *out);
    out->id = q->id;
    out->capacity = q->cap;
    out->item_size = q->isz;
    out->push_nonblocking = __atomic_load_n(&q->p.nb, __ATOMIC_RELAXED);
    out->push_blocked = __atomic_load_n(&q->p.blk, __ATOMIC_RELAXED);
    out->push_waits = __atomic_load_n(&q->p.waits, __ATOMIC_RELAXED);
    out->pop_nonblocking = __atomic_load_n(&q->c.nb, __ATOMIC_RELAXED);
    out->pop_blocked = __atomic_load_n(&q->c.blk, __ATOMIC_RELAXED);
    out->pop_waits = __atomic_load_n(&q->c.waits, __ATOMIC_RELAXED);
    out->monitored = (uint32_t)q->monitored;
    out->period_us = q->monitored ? __atomic_load_n(&q->m.period_us, __ATOMIC_RELAXED) : 0;
    return 0;
}

/* ------------------------------------------------------------------ */
/* samples                                                             */

/* Take the sampling flag; wait up to wait_ns for a sampler that has it. */
static int q_slock(struct hbt_queue *q, uint64_t wait_ns)
{
    if (!__atomic_exchange_n(&q->m.slock, 1, __ATOMIC_ACQUIRE))
        return 1;
    if (!wait_ns)
        return 0;
    uint64_t t0 = hbt_now_ns();
    do {
        sched_yield();
        if (!__atomic_load_n(&q->m.slock, __ATOMIC_RELAXED) &&
            !__atomic_exchange_n(&q->m.slock, 1, __ATOMIC_ACQUIRE))
            return 1;
    } while (hbt_now_ns() - t0 < wait_ns);
    return 0;
}

static void q_sunlock(struct hbt_queue *q)
{
    __atomic_store_n(&q->m.slock, 0, __ATOMIC_RELEASE);
}

struct q_obs {
    uint64_t realized;   /* ns since the previous sample */
    int blocked;         /* both ends' stages blocked: no end ran unhindered */
    int active;          /* either end completed a transaction without waiting */
};

enum { Q_SAMPLED = 1, Q_BUSY = 0, Q_FINISHED = -1 };

/* Under slock: the thread at end k blocked on any of its queues since the
 * previous sample, or waits now. A change of thread, or its first sample,
 * counts as blocked: what it did before is not known. A thread without a
 * slot is judged by this end alone. */
static int q_stage_blocked(struct hbt_queue *q, int k, struct hbt_qend *e)
{
    uint32_t s = __atomic_load_n(&e->kslot, __ATOMIC_RELAXED);
    if (s == 0 || s == Q_KNONE)
        return 0;
    struct q_kern *kr = &q_kern[s - 1];
    uint64_t blk = __atomic_load_n(&kr->blocked, __ATOMIC_RELAXED);
    int b = s != q->m.prev_kslot[k] || blk != q->m.prev_kblk[k] ||
            __atomic_load_n(&kr->waiting, __ATOMIC_RELAXED);
    q->m.prev_kslot[k] = s;
    q->m.prev_kblk[k] = blk;
    return b;
}

/*
 * One sample of both ends: producer, then consumer, both with the clock
 * value read right before the counters. final: flag HBT_QFLAG_FINAL, and
 * no sample is taken after it. Returns Q_SAMPLED, Q_BUSY (another thread is
 * sampling) or Q_FINISHED (the final samples were written before).
 */
static int q_sample(struct hbt_queue *q, int final, unsigned mode, struct q_obs *o)
{
    if (!q_slock(q, final ? Q_FINAL_WAIT_NS : 0))
        return Q_BUSY;
    if (__atomic_load_n(&q->m.final_done, __ATOMIC_RELAXED)) {
        q_sunlock(q);
        return Q_FINISHED;
    }
    struct hbt_qend *ends[2] = { &q->p, &q->c };   /* HBT_QEND_PRODUCER, _CONSUMER */
    uint64_t nb[2], blk[2], waits[2];
    uint32_t waiting[2];
    uint64_t now = hbt_now_ns();
    for (int k = 0; k < 2; k++) {
        nb[k] = __atomic_load_n(&ends[k]->nb, __ATOMIC_RELAXED);
        blk[k] = __atomic_load_n(&ends[k]->blk, __ATOMIC_RELAXED);
        waits[k] = __atomic_load_n(&ends[k]->waits, __ATOMIC_RELAXED);
        waiting[k] = __atomic_load_n(&ends[k]->waiting, __ATOMIC_RELAXED);
    }
    int32_t period = (int32_t)__atomic_load_n(&q->m.period_us, __ATOMIC_RELAXED);
    int any_clear = 0, any_active = 0;
    for (int k = 0; k < 2; k++) {
        uint64_t n = nb[k] - q->m.prev_nb[k];
        int b = blk[k] != q->m.prev_blk[k] || waits[k] != q->m.prev_waits[k] || waiting[k];
        int sb = q_stage_blocked(q, k, ends[k]) || b;
        uint16_t flags = (uint16_t)((b ? HBT_QFLAG_BLOCKED : 0) | (sb ? HBT_QFLAG_STAGE_BLOCKED : 0) |
                                    (final ? HBT_QFLAG_FINAL : 0));
        hbt_emit(HBT_REC_QUEUE_SAMPLE, flags, n > UINT32_MAX ? UINT32_MAX : (uint32_t)n,
                 (int32_t)q->id, k, period, (uint32_t)q->isz, now, mode);
        q->m.prev_nb[k] = nb[k];
        q->m.prev_blk[k] = blk[k];
        q->m.prev_waits[k] = waits[k];
        any_clear |= !sb;
        any_active |= n != 0;
    }
    if (o) {
        o->realized = now - q->m.last_ns;
        o->blocked = !any_clear;
        o->active = any_active;
    }
    q->m.last_ns = now;
    if (final)
        __atomic_store_n(&q->m.final_done, 1, __ATOMIC_RELAXED);
    q_sunlock(q);
    return Q_SAMPLED;
}

/* ------------------------------------------------------------------ */
/* the monitor thread                                                  */

static void q_wake_monitor(void)
{
    __atomic_fetch_add(&qreg.mwake, 1, __ATOMIC_SEQ_CST);
    q_futex_wake(&qreg.mwake, INT_MAX);
}

/* The first deadline of a queue opened at open_ns with period T: on the
 * grid of multiples of T (CLOCK_MONOTONIC), at least T after the open, so
 * that the queues' deadlines coincide and one wake-up samples them all. */
static uint64_t q_first_deadline(uint64_t open_ns, uint64_t T)
{
    return ((open_ns + T + T - 1) / T) * T;
}

/*
 * qreg.lock held, q's deadline has passed: sample it and apply the period
 * policy (hbtrace_queue.h; seed 002, IV-A). Lengthen T after K periods
 * without blocking whose realized length stayed within the tolerance.
 * Blocking is judged per end (per kernel, as in the seed): a period is lost
 * only when both ends' stages blocked, because in a pipeline one end of a
 * queue usually waits (a fast producer keeps it full) while the other runs
 * unhindered and is observable. A period in which no item moved (a long
 * service in progress) neither counts nor breaks the streak. Both stages
 * blocked K periods in a row: nothing can be learned of this queue at this
 * period (seed 002: the method fails there), so it is sampled less often.
 * T changes only at a deadline that is a multiple of the new T, so that
 * queues with the same T keep sharing their wake-ups (at most one more
 * period at the old T for a power-of-two ratio).
 */
static void q_tick(struct hbt_queue *q, uint64_t now, uint64_t max_ns)
{
    struct q_obs o;
    int rc = q_sample(q, 0, HBT_M_GROW | HBT_M_LOST, &o);
    if (rc == Q_FINISHED) {
        q->m.deadline = UINT64_MAX;
        return;
    }
    uint64_t T = q->m.T, d = q->m.deadline;
    uint64_t tol = T * Q_TOL_PCT / 100;
    int stable = rc == Q_SAMPLED && o.realized + tol >= T && o.realized <= T + tol;
    if (rc != Q_SAMPLED || o.blocked || !stable)
        q->m.streak = 0;
    else if (o.active)
        q->m.streak++;
    q->m.lost = rc == Q_SAMPLED && o.blocked ? q->m.lost + 1 : 0;
    unsigned run = q->m.streak > q->m.lost ? q->m.streak : q->m.lost;
    if (run >= Q_STABLE_K && T < max_ns) {
        uint64_t T2 = 2 * T < max_ns ? 2 * T : max_ns;
        if (d % T2 == 0 || run >= Q_STABLE_K + Q_ALIGN_WAIT) {
            T = T2;
            q->m.T = T;
            __atomic_store_n(&q->m.period_us, (uint32_t)(T / Q_NS_US), __ATOMIC_RELAXED);
            q->m.streak = 0;
            q->m.lost = 0;
        }
    }
    uint64_t next = d + T;
    if (next <= now)   /* late by more than a period: the next one on the grid */
        next = d + T * ((now - d) / T + 1);
    q->m.deadline = next;
}

static void *q_main(void *arg)
{
    uint32_t gen = (uint32_t)(uintptr_t)arg;
    struct hbt_tls *t = &hbt_tls;
    /* a tracer thread whose chunks hold only queue samples: no
     * THREAD_START, no heart entry, never beating */
    t->monitor = 1;
    hbt_register_quiet(t);
    hbt_bg_wake_on_time();
    pid_t pid = getpid();
    uint64_t next_orphan = hbt_now_ns() + Q_ORPHAN_NS;
    for (;;) {
        uint32_t word = __atomic_load_n(&qreg.mwake, __ATOMIC_SEQ_CST);
        pthread_mutex_lock(&qreg.lock);
        if (qreg.mon_gen != gen) {   /* stopped: the last queue went, or exit */
            pthread_mutex_unlock(&qreg.lock);
            break;
        }
        if (hbt_state() != HBT_ON) {
            pthread_mutex_unlock(&qreg.lock);
            goto ended;
        }
        uint64_t max_ns = (uint64_t)qreg.period_max_us * Q_NS_US;
        uint64_t now = hbt_now_ns(), until = next_orphan;
        for (struct hbt_queue *q = qreg.head; q; q = q->next) {
            if (!q->monitored || q->pid != pid)
                continue;
            if (q->m.deadline <= now) {
                q_tick(q, now, max_ns);
                now = hbt_now_ns();
            }
            if (q->m.deadline < until)
                until = q->m.deadline;
        }
        pthread_mutex_unlock(&qreg.lock);
        if (now >= next_orphan) {
            next_orphan = now + Q_ORPHAN_NS;
            if (hbt_orphaned())   /* never keep the process alive; exit writes the final samples */
                goto ended;
            continue;
        }
        if (now < until)
            (void)hbt_sleep_until(until, &qreg.mwake, word);
    }
    return NULL;
ended:   /* on its own (tracing off, orphaned): the next queue starts another */
    pthread_mutex_lock(&qreg.lock);
    if (qreg.mon_gen == gen)
        qreg.mon_running = 0;
    pthread_mutex_unlock(&qreg.lock);
    return NULL;
}

/* qreg.lock held: start the monitor thread unless one runs. A thread that
 * ended on its own (tracing off, orphaned) is joined first: it takes the
 * lock no more. */
static void q_start_monitor(void)
{
    if (qreg.mon_running)
        return;
    if (qreg.mon_joinable) {
        pthread_join(qreg.mon_thread, NULL);
        qreg.mon_joinable = 0;
    }
    uint32_t gen = ++qreg.mon_gen;
    /* joinable, for the destroy of the last queue; a joinable thread keeps
     * no process alive */
    int rc = hbt_bg_start(&qreg.mon_thread, "hbt-queues", Q_STACK, 1, q_main,
                          (void *)(uintptr_t)gen);
    qreg.mon_running = qreg.mon_joinable = rc == 0;
    if (rc != 0 && !qreg.start_warned) {
        qreg.start_warned = 1;
        hbt_warn("hbtrace: cannot start the queue monitor thread: %s; queue samples are "
                 "written only when a queue is destroyed and at exit", strerror(rc));
    }
}

/* ------------------------------------------------------------------ */
/* creation, names, configuration                                      */

static uint32_t q_env_us(enum hbt_env name, uint32_t def, uint32_t lo, uint32_t hi, int *given)
{
    const char *v = hbt_getenv(name);
    if (given)
        *given = 0;
    if (!v || !*v)
        return def;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || end == v || *end || v[0] == '-' || x < lo || x > hi) {
        hbt_warn("hbtrace: %s=%s: expected an integer in %u..%u (microseconds); using %u",
                 hbt_env_name(name), v, lo, hi, def);
        return def;
    }
    if (given)
        *given = 1;
    return (uint32_t)x;
}

/* qreg.lock held */
static void q_configure(void)
{
    if (qreg.configured)
        return;
    qreg.configured = 1;
    const char *m = hbt_getenv(HBT_ENV_HBTRACE_QUEUE_MONITOR);
    qreg.monitor_on = 1;
    if (m && *m) {
        if (strcmp(m, "off") == 0 || strcmp(m, "0") == 0)
            qreg.monitor_on = 0;
        else if (strcmp(m, "on") != 0 && strcmp(m, "1") != 0)
            hbt_warn("hbtrace: %s=%s: expected on or off; using on",
                     hbt_env_name(HBT_ENV_HBTRACE_QUEUE_MONITOR), m);
    }
    int max_given = 0;
    uint32_t t0 = q_env_us(HBT_ENV_HBTRACE_QUEUE_PERIOD_US, Q_PERIOD_US, Q_PERIOD_FLOOR_US,
                           Q_PERIOD_CEIL_US, NULL);
    uint32_t tmax = q_env_us(HBT_ENV_HBTRACE_QUEUE_PERIOD_MAX_US, Q_PERIOD_MAX_US, Q_PERIOD_FLOOR_US,
                             Q_PERIOD_CEIL_US, &max_given);
    if (tmax < t0) {
        if (max_given)
            hbt_warn("hbtrace: %s=%u is below the first period %u us; "
                     "the period stays %u us",
                     hbt_env_name(HBT_ENV_HBTRACE_QUEUE_PERIOD_MAX_US), tmax, t0, t0);
        tmax = t0;
    }
    qreg.period_us = t0;
    qreg.period_max_us = tmax;
}

static void q_atfork_child(void)
{
    /* the parent's queues are not this process's: no monitors, no samples
     * (their pid says so); ids start again in the child's own file */
    pthread_mutex_init(&qreg.lock, NULL);
    __atomic_store_n(&qreg.head, NULL, __ATOMIC_RELAXED);
    qreg.next_id = 0;
    qreg.noted = 0;
    qreg.mon_running = 0;   /* threads do not survive fork */
    qreg.mon_joinable = 0;
    qreg.mwake = 0;
}

/* Longest prefix of s of at most max bytes that does not split a UTF-8
 * sequence. */
static size_t q_utf8_prefix(const char *s, size_t len, size_t max)
{
    if (len <= max)
        return len;
    while (max > 0 && ((unsigned char)s[max] & 0xC0) == 0x80)
        max--;
    return max;
}

/* The name as NAME records: 24 bytes of text in bytes 0..23 of each slot.
 * Every fragment starts with a non-NUL byte of the name, so t_ns is never 0
 * (which hbt_emit would take as "read the clock"). */
static void q_emit_name(const struct hbt_queue *q, unsigned mode)
{
    uint32_t n = q->name_len;
    for (uint32_t off = 0, k = 0; off < n; off += Q_FRAG, k++) {
        char frag[Q_FRAG];
        memset(frag, 0, sizeof frag);
        memcpy(frag, q->name + off, n - off < Q_FRAG ? n - off : Q_FRAG);
        uint64_t t_ns;
        uint32_t seq;
        int32_t thread, loop, iter;
        memcpy(&t_ns, frag, 8);
        memcpy(&seq, frag + 8, 4);
        memcpy(&thread, frag + 12, 4);
        memcpy(&loop, frag + 16, 4);
        memcpy(&iter, frag + 20, 4);
        uint16_t flags = (uint16_t)(k | (off + Q_FRAG >= n ? HBT_NAME_LAST : 0));
        hbt_emit(HBT_REC_NAME, flags, seq, thread, loop, iter,
                 HBT_NAME_QUEUE << 24 | (q->id & 0xFFFFFFu), t_ns, mode);
    }
}

HBT_EXPORT hbt_queue_t *hbt_queue_create(const char *name, size_t item_size, size_t capacity)
{
    if (item_size == 0 || item_size > Q_MAX_ITEM || capacity == 0 || capacity > Q_MAX_CAP) {
        errno = EINVAL;
        return NULL;
    }
    void *mem = NULL, *buf = NULL;
    if (posix_memalign(&mem, Q_LINE, sizeof(struct hbt_queue)) != 0) {
        errno = ENOMEM;
        return NULL;
    }
    if (posix_memalign(&buf, 64, item_size * capacity) != 0) {
        free(mem);
        errno = ENOMEM;
        return NULL;
    }
    struct hbt_queue *q = mem;
    memset(q, 0, sizeof *q);
    q->buf = buf;
    q->isz = item_size;
    q->cap = (uint32_t)capacity;
    q->hyst = q->cap / 8;   /* below cap: a sleeping producer is woken by an empty queue */
    q->pid = getpid();

    int old;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    uint32_t slot;
    int tracing = hbt_self_slot(&slot);   /* opens the trace if it is enabled */

    pthread_mutex_lock(&qreg.lock);
    q_configure();
    hbt_fork_child_add(q_atfork_child);
    q->id = qreg.next_id++;
    int note = tracing && !qreg.noted;
    if (note)
        qreg.noted = 1;
    pthread_mutex_unlock(&qreg.lock);

    if (name && *name) {
        q->name_len = (uint32_t)q_utf8_prefix(name, strlen(name), Q_NAME_MAX);
        memcpy(q->name, name, q->name_len);
    } else {
        q->name_len = (uint32_t)snprintf(q->name, sizeof q->name, "queue%u", q->id);
    }
    q->name[q->name_len] = '\0';

    if (tracing) {
        if (note) {
            char num[16];
            hbt_meta_append_once("queue_monitor", qreg.monitor_on ? "on" : "off");
            snprintf(num, sizeof num, "%u", qreg.period_us);
            hbt_meta_append_once("queue_period_us", num);
            snprintf(num, sizeof num, "%u", qreg.period_max_us);
            hbt_meta_append_once("queue_period_max_us", num);
        }
        q->monitored = qreg.monitor_on;
        q->m.period_us = qreg.period_us;
        q->m.open_ns = hbt_now_ns();
        q->m.last_ns = q->m.open_ns;
        q->m.T = (uint64_t)qreg.period_us * Q_NS_US;
        q->m.deadline = q_first_deadline(q->m.open_ns, q->m.T);
        hbt_emit(HBT_REC_QUEUE_OPEN, 0, q->cap, (int32_t)q->id, 0, (int32_t)qreg.period_us,
                 (uint32_t)q->isz, q->m.open_ns, HBT_MODE_API);
        q_emit_name(q, HBT_MODE_API);
    }

    pthread_mutex_lock(&qreg.lock);
    q->next = qreg.head;
    __atomic_store_n(&qreg.head, q, __ATOMIC_RELEASE);
    if (q->monitored) {
        if (qreg.mon_running)
            q_wake_monitor();   /* it sleeps toward the other queues' deadlines */
        else
            q_start_monitor();
    }
    pthread_mutex_unlock(&qreg.lock);
    pthread_setcancelstate(old, NULL);
    return q;
}

HBT_EXPORT void hbt_queue_destroy(hbt_queue_t *q)
{
    if (!q)
        return;
    int old;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    pid_t self = getpid();
    int join = 0;
    pthread_t thread;
    pthread_mutex_lock(&qreg.lock);
    /* unlinked under the lock: the monitor thread, which samples only under
     * it, never touches q again */
    int monitored_left = 0;
    for (struct hbt_queue **pp = &qreg.head; *pp;) {
        if (*pp == q) {
            __atomic_store_n(pp, q->next, __ATOMIC_RELEASE);
            continue;
        }
        monitored_left |= (*pp)->monitored && (*pp)->pid == self;
        pp = &(*pp)->next;
    }
    if (q->monitored && q->pid == self && !monitored_left && qreg.mon_running) {
        qreg.mon_gen++;   /* the last monitored queue: the monitor thread ends */
        qreg.mon_running = 0;
        q_wake_monitor();
    }
    if (!qreg.mon_running && qreg.mon_joinable) {
        join = 1;
        thread = qreg.mon_thread;
        qreg.mon_joinable = 0;
    }
    pthread_mutex_unlock(&qreg.lock);
    /* a fork child never samples its parent's queues */
    if (q->pid == self && q->monitored && hbt_state() == HBT_ON)
        (void)q_sample(q, 1, HBT_MODE_API & ~HBT_M_RESERVE, NULL);
    if (join)
        pthread_join(thread, NULL);
    free(q->buf);
    free(q);
    pthread_setcancelstate(old, NULL);
}

/* Process exit (exit, return from main, _exit): the last samples of every
 * queue still open; the monitors stop writing. Never waits long. */
void hbt_queue_at_exit(void)
{
    if (!__atomic_load_n(&qreg.head, __ATOMIC_ACQUIRE))
        return;
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_nsec += Q_EXIT_LOCK_MS * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    if (pthread_mutex_timedlock(&qreg.lock, &dl) != 0)
        return;
    pid_t self = getpid();
    for (struct hbt_queue *q = qreg.head; q; q = q->next) {
        if (q->pid == self && q->monitored && hbt_state() == HBT_ON)
            (void)q_sample(q, 1, HBT_MODE_END & ~HBT_M_RESERVE, NULL);
    }
    if (qreg.mon_running) {   /* the monitor thread writes no more */
        qreg.mon_gen++;
        qreg.mon_running = 0;
        q_wake_monitor();
    }
    pthread_mutex_unlock(&qreg.lock);
}
