/*
 * monitor_judge.c -- the monitor's detection (monitor.c describes it):
 * reading another thread's beat line and its task in /proc, judging it, and
 * the BEHAVIOR and MONITOR records.
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

#include "monitor.h"

/* ------------------------------------------------------------------ */
/* reading a thread from outside                                        */

/* Beat count and time of the latest beat, as one consistent pair when the
 * owner is not storing right now (otherwise the time may belong to the
 * beat after the count: a beat newer by a few nanoseconds). */
void hbt_read_beat(const struct hbt_beatline *b, struct hbt_seen *s)
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
    double S = hbt_mon.late;

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
        if (v->probing && hbt_mon.have_proc) {
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
    else if (hbt_mon.have_proc)
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
        gap = !hbt_mon.have_proc ? step : gap ? gap * 2 : 4 * step;
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
int hbt_judge(uint32_t j, struct hbt_ctx *c)
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
uint64_t hbt_pass_all(struct hbt_ctx *c, uint32_t *active)
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

void hbt_mon_record(int mode, uint64_t period_ns, unsigned rec_mode)
{
    uint32_t n = hbt_nthreads();
    uint64_t msgs = __atomic_load_n(&hbt_mon.central_msgs, __ATOMIC_RELAXED) +
                    __atomic_load_n(&hbt_mon.api_msgs, __ATOMIC_RELAXED);
    uint64_t passes = __atomic_load_n(&hbt_mon.central_passes, __ATOMIC_RELAXED) +
                      __atomic_load_n(&hbt_mon.api_passes, __ATOMIC_RELAXED);
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
