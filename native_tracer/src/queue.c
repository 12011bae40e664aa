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
 * and exit), then, holding hbt_qreg.lock, takes both ends' counters of every
 * queue whose deadline has passed and writes two QUEUE_SAMPLE records each
 * into its own chunk. Deadlines lie on the grid of multiples of each
 * queue's T, so queues with equal (or nested) periods share one wake-up:
 * on a busy machine every wake-up costs the stages a preemption (one thread
 * per queue cost a 3-queue compute-bound pipeline +3.85 % of its run time,
 * one shared thread +1.09 %: benchmarks/eval_service_rate.py --parts
 * overhead, README). Destroy unlinks a queue under
 * hbt_qreg.lock, so the monitor never touches it again; the destroy of the last
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

#include "queue.h"

struct q_kern hbt_q_kern[Q_KMAX];
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
    return s != Q_KNONE ? &hbt_q_kern[s - 1] : NULL;
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
/* Spinning before sleeping (round i, first clock value in *t0): 1 once
 * Q_SPIN_NS have passed; the clock is read every 16th round. */
static inline int q_spun_out(unsigned i, uint64_t *t0)
{
    if ((i & 15) != 15)
        return 0;
    uint64_t now = hbt_now_ns();
    if (!*t0) {
        *t0 = now;
        return 0;
    }
    return now - *t0 > Q_SPIN_NS;
}

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
        __atomic_store_n(&hbt_q_kern[s - 1].waiting, 0, __ATOMIC_RELAXED);
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
        if (q_spun_out(i, &t0))
            break;
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
        if (q_spun_out(i, &t0))
            break;
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
        hbt_futex_wake(&q->tail.v, 1);
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
        hbt_futex_wake(&q->head.v, 1);
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
    hbt_futex_wake(&q->tail.v, INT_MAX);
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
