/*
 * queue_monitor.c -- the samples of the instrumented queues and the one
 * monitor thread that takes them every period T (queue.c describes it; the
 * period policy is in hbtrace_queue.h), and the configuration.
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

/* ------------------------------------------------------------------ */
/* samples                                                             */

/* Take the sampling flag; wait up to wait_ns for a sampler that has it. */
int q_slock(struct hbt_queue *q, uint64_t wait_ns)
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

void q_sunlock(struct hbt_queue *q)
{
    __atomic_store_n(&q->m.slock, 0, __ATOMIC_RELEASE);
}

/* Under slock: the thread at end k blocked on any of its queues since the
 * previous sample, or waits now. A change of thread, or its first sample,
 * counts as blocked: what it did before is not known. A thread without a
 * slot is judged by this end alone. */
static int q_stage_blocked(struct hbt_queue *q, int k, struct hbt_qend *e)
{
    uint32_t s = __atomic_load_n(&e->kslot, __ATOMIC_RELAXED);
    if (s == 0 || s == Q_KNONE)
        return 0;
    struct q_kern *kr = &hbt_q_kern[s - 1];
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
int q_sample(struct hbt_queue *q, int final, unsigned mode, struct q_obs *o)
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

void q_wake_monitor(void)
{
    __atomic_fetch_add(&hbt_qreg.mwake, 1, __ATOMIC_SEQ_CST);
    hbt_futex_wake(&hbt_qreg.mwake, INT_MAX);
}

/* The first deadline of a queue opened at open_ns with period T: on the
 * grid of multiples of T (CLOCK_MONOTONIC), at least T after the open, so
 * that the queues' deadlines coincide and one wake-up samples them all. */
uint64_t q_first_deadline(uint64_t open_ns, uint64_t T)
{
    return ((open_ns + T + T - 1) / T) * T;
}

/*
 * hbt_qreg.lock held, q's deadline has passed: sample it and apply the period
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
        uint32_t word = __atomic_load_n(&hbt_qreg.mwake, __ATOMIC_SEQ_CST);
        pthread_mutex_lock(&hbt_qreg.lock);
        if (hbt_qreg.mon_gen != gen) {   /* stopped: the last queue went, or exit */
            pthread_mutex_unlock(&hbt_qreg.lock);
            break;
        }
        if (hbt_state() != HBT_ON) {
            pthread_mutex_unlock(&hbt_qreg.lock);
            goto ended;
        }
        uint64_t max_ns = (uint64_t)hbt_qreg.period_max_us * Q_NS_US;
        uint64_t now = hbt_now_ns(), until = next_orphan;
        for (struct hbt_queue *q = hbt_qreg.head; q; q = q->next) {
            if (!q->monitored || q->pid != pid)
                continue;
            if (q->m.deadline <= now) {
                q_tick(q, now, max_ns);
                now = hbt_now_ns();
            }
            if (q->m.deadline < until)
                until = q->m.deadline;
        }
        pthread_mutex_unlock(&hbt_qreg.lock);
        if (now >= next_orphan) {
            next_orphan = now + Q_ORPHAN_NS;
            if (hbt_orphaned())   /* never keep the process alive; exit writes the final samples */
                goto ended;
            continue;
        }
        if (now < until)
            (void)hbt_sleep_until(until, &hbt_qreg.mwake, word);
    }
    return NULL;
ended:   /* on its own (tracing off, orphaned): the next queue starts another */
    pthread_mutex_lock(&hbt_qreg.lock);
    if (hbt_qreg.mon_gen == gen)
        hbt_qreg.mon_running = 0;
    pthread_mutex_unlock(&hbt_qreg.lock);
    return NULL;
}

/* hbt_qreg.lock held: start the monitor thread unless one runs. A thread that
 * ended on its own (tracing off, orphaned) is joined first: it takes the
 * lock no more. */
void q_start_monitor(void)
{
    if (hbt_qreg.mon_running)
        return;
    if (hbt_qreg.mon_joinable) {
        pthread_join(hbt_qreg.mon_thread, NULL);
        hbt_qreg.mon_joinable = 0;
    }
    uint32_t gen = ++hbt_qreg.mon_gen;
    /* joinable, for the destroy of the last queue; a joinable thread keeps
     * no process alive */
    int rc = hbt_bg_start(&hbt_qreg.mon_thread, "hbt-queues", Q_STACK, 1, q_main,
                          (void *)(uintptr_t)gen);
    hbt_qreg.mon_running = hbt_qreg.mon_joinable = rc == 0;
    if (rc != 0 && !hbt_qreg.start_warned) {
        hbt_qreg.start_warned = 1;
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

/* hbt_qreg.lock held */
void q_configure(void)
{
    if (hbt_qreg.configured)
        return;
    hbt_qreg.configured = 1;
    const char *m = hbt_getenv(HBT_ENV_HBTRACE_QUEUE_MONITOR);
    hbt_qreg.monitor_on = 1;
    if (m && *m) {
        if (strcmp(m, "off") == 0 || strcmp(m, "0") == 0)
            hbt_qreg.monitor_on = 0;
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
    hbt_qreg.period_us = t0;
    hbt_qreg.period_max_us = tmax;
}
