/*
 * monitor.c -- the online thread-behavior monitor of the HBTM paper (seed
 * 001): the heart table, the detection of running / busy-waiting /
 * conditional-waiting / exited / failed threads, the central monitor thread,
 * the ring checks of the decentralized mode, and Heartbeat_HeartRate_Adjust.
 *
 * The heart table. Every registered thread owns one entry of a fixed,
 * static table (HBT_HEARTS entries, indexed by thread_slot; later threads
 * are not monitored, only counted). An entry is five cache lines:
 *   b  the thread's beat line (struct hbt_beatline, internal.h): written by
 *      the thread itself -- on every recorded beat its count and time (no
 *      lock, no system call, nothing shared), its waits in the OpenMP
 *      runtime, at registration and THREAD_END its state -- but for gap_ns,
 *      which its checkers write when its lateness limit changes;
 *   c  its counters as a ring checker (messages, checks), written only by
 *      itself, summed when a MONITOR record is written;
 *   v, d  the checkers' view of the thread (baseline, what was reported, its
 *      distributions): written by whichever checker judges the thread, under
 *      v's try-lock; a checker that finds the lock taken skips the thread (nobody ever waits, except
 *      the final passes at Finished and exit, for at most a few ms).
 * The table is never freed: reading the entry of a dead thread is safe.
 *
 * Detection (hbt_judge): per monitored thread j at time now, with S the
 * lateness factor (HBTRACE_MONITOR_LATE, default 1.5):
 *   - baseline B_j: mean of the first HBT_WARM (HBT_WARM_TEAM for a thread of
 *     an OpenMP team) inter-beat intervals (nothing
 *     is judged before), then an EWMA (weight 1/8 per beat) of intervals
 *     below S*B_j only, so slow intervals never pollute it;
 *   - its own interval distribution (struct hbt_dist): U_j, its usual worst
 *     interval, is the third longest of its latest HBT_LOOKS per-look mean
 *     intervals, between B_j and HBT_TAIL_MAX*B_j; late = silent for
 *     max(S*U_j, HBT_LATE_FLOOR_NS);
 *   - its CPU time per beat: the checker samples its CPU clock at each look
 *     that sees it beat; between two samples, the CPU time less its time
 *     waiting in the OpenMP runtime (beat line: waited_us) per beat, at the
 *     window's CPU rate over the beats' own span, gives C_j, the most of it
 *     lately (halved each HBT_CPU_HALF_NS; outside a team growing by at most
 *     half per look);
 *   - THREAD_END recorded: EXITED, or FAILED if it was cancelled; onset = its
 *     last beat (the end time if it never beat);
 *   - late: /proc/self/task/<tid>/stat is read. Missing or Z/X without
 *     THREAD_END -> FAILED (vanished). Waiting in the OpenMP runtime (beat
 *     line: waiting, marked by gomp.c and ompt.c from a barrier's arrival to
 *     its end, and outside the parallel regions) -> nothing: it waits for its
 *     team. Used 2*C_j (HBT_BUSY_FACTOR) of CPU time since the sample after its last beat
 *     without beating (HBT_CPU_WARM/n times that after n < HBT_CPU_WARM
 *     looks, none before the first) -> BUSY_WAITING: more than
 *     any of its beats needed, so a thread that only waits for a CPU beats
 *     first. Else blocked (S, D, ...) -> COND_WAITING; running -> looked at
 *     again when it could have used that much. A thread of an OpenMP team
 *     (it has waited in the runtime) is blamed only while another thread of
 *     the team waits in the runtime (for it), and is late by how long that
 *     wait has lasted (beat line: wait_us), with only its CPU time over it
 *     counted. Onset = the last beat, seq = its
 *     beat count;
 *   - a look that sees beats after a window of more CPU time than S*C_j per
 *     beat plus C_j (not for a team's thread): it spun through that gap,
 *     unseen -> BUSY_WAITING, onset = the beat before the window;
 *   - after BUSY/COND, a beat interval below the limit again: RUNNING, onset
 *     = the first beat after the gap (exactly: the beat line keeps gap_t, its
 *     first beat that ended an interval of gap_ns -- the limit, written by the
 *     checkers -- since a checker took it), minus one interval (at most C_j)
 *     when the thread was blocked (COND_WAITING: it woke, worked, beat);
 *   - only changes are recorded, one BEHAVIOR record each, into the chunk of
 *     the thread that detected it; t_ns = when it was detected, iter = the
 *     lag t_ns - onset in us;
 *   - final passes: at Finished, threads that stopped beating (late, or the
 *     caller itself) are EXITED (onset = last beat) but judged again if they
 *     beat again (RUNNING); at exit (status 0) every thread still at work is
 *     EXITED (onset = its last beat, or the exit for a thread that waits in
 *     the OpenMP runtime then), at exit with another status FAILED
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
 *
 * The files: monitor.h lists them.
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

struct hbt_heart hbt_hearts[HBT_HEARTS];

struct hbt_mon_hot hbt_mon_hot = { .every = 1 };

struct hbt_mon hbt_mon = { .mode = HBT_MON_NONE, .env_mode = HBT_MON_NONE,
                           .late = HBT_LATE_DEFAULT };

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
    hbt_mon.env_mode = HBT_MON_NONE;
    if (v && *v) {
        if (strcmp(v, "central") == 0 || strcmp(v, "0") == 0)
            hbt_mon.env_mode = HBT_MON_CENTRAL;
        else if (strcmp(v, "ring") == 0 || strcmp(v, "1") == 0)
            hbt_mon.env_mode = HBT_MON_RING;
        else if (strcmp(v, "off") == 0 || strcmp(v, "none") == 0)
            hbt_mon.env_mode = HBT_MON_OFF;
        else
            hbt_warn("hbtrace: %s=%s: expected central, ring or off; ignored",
                     hbt_env_name(HBT_ENV_HBTRACE_MONITOR), v);
    }

    hbt_mon.late = HBT_LATE_DEFAULT;
    v = hbt_getenv(HBT_ENV_HBTRACE_MONITOR_LATE);
    if (v && *v) {
        char *end;
        double x = strtod(v, &end);
        if (*end || !isfinite(x) || x <= 1.0 || x > 1000.0)
            hbt_warn("hbtrace: %s=%s: expected a number above 1 "
                     "(at most 1000); using %g",
                     hbt_env_name(HBT_ENV_HBTRACE_MONITOR_LATE), v, HBT_LATE_DEFAULT);
        else
            hbt_mon.late = x;
    }

    hbt_mon.period_ns = 0;
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
            hbt_mon.period_ns = us * HBT_US;
    }

    hbt_mon_hot.openmp = 0;
    v = hbt_getenv(HBT_ENV_HBTRACE_MONITOR_BEATS);
    if (v && *v) {
        if (strcmp(v, "openmp") == 0)
            hbt_mon_hot.openmp = 1;
        else if (strcmp(v, "api") != 0)
            hbt_warn("hbtrace: %s=%s: expected api or openmp; using api",
                     hbt_env_name(HBT_ENV_HBTRACE_MONITOR_BEATS), v);
    }

    hbt_mon.heart_rate = 0;
    v = hbt_getenv(HBT_ENV_HBTRACE_HEART_RATE);
    if (v && *v) {
        char *end;
        double x = strtod(v, &end);
        if (*end || !isfinite(x) || x <= 0)
            hbt_warn("hbtrace: %s=%s: expected beats per second above 0; "
                     "ignored", hbt_env_name(HBT_ENV_HBTRACE_HEART_RATE), v);
        else
            hbt_mon.heart_rate = x;
    }

    hbt_mon.have_proc = access("/proc/self/task", R_OK) == 0;
    hbt_mon.steals = hbt_under_hypervisor() || hbt_steal_ticks() > 0;
}

/* The monitor's lines of the metadata, once per file. */
static void hbt_mon_note_meta(int mode)
{
    char num[64];
    hbt_meta_append_once("monitor", hbt_mode_name(mode));
    if (mode == HBT_MON_OFF)
        return;
    hbt_meta_append_once("monitor_source", hbt_mon.from_env ?
    hbt_env_name(HBT_ENV_HBTRACE_MONITOR) : "Init");
    snprintf(num, sizeof num, "%g", hbt_mon.late);
    hbt_meta_append_once("monitor_late", num);
    hbt_meta_append_once("monitor_beats", hbt_mon_hot.openmp ? "openmp" : "api");
    if (mode == HBT_MON_RING)
        hbt_meta_append_once("monitor_still", "off: ring mode (no monitor thread to open the events)");
    if (mode == HBT_MON_CENTRAL) {
        if (hbt_mon.period_ns)
            snprintf(num, sizeof num, "%llu", (unsigned long long)(hbt_mon.period_ns / HBT_US));
        else
            snprintf(num, sizeof num, "adaptive");
        hbt_meta_append_once("monitor_period_us", num);
    }
}

/* ------------------------------------------------------------------ */
/* the heart table, owner side                                          */

/* The monitor's fields of a thread's TLS, as in a thread that never beat
 * (registration, and the forking thread in a fork child). */
void hbt_mon_reset_tls(struct hbt_tls *t)
{
    t->next_check = 0;
    t->calls = 0;
    t->ring_valid = 0;
    t->ring_skipped = 0;
    t->ring_count = 0;
}

/* Registration of thread t (core.c), by the thread itself; also from a
 * signal handler: only stores and gettid. */
void hbt_mon_register(struct hbt_tls *t)
{
    hbt_mon_reset_tls(t);
    if (t->thread_slot >= HBT_HEARTS || t->monitor) {
        memset(&t->sink, 0, sizeof t->sink);
        t->beat = &t->sink;
        t->unit = NULL;
        if (!t->monitor)
            __atomic_fetch_add(&hbt_mon.unwatched, 1, __ATOMIC_RELAXED);
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
    b->gap_ns = UINT32_MAX;   /* no gap until a checker knows its rate */
    b->gap_t = 0;
    b->waiting = 0;
    b->wait_us = 0;
    b->waited_us = 0;
    /* the number its beats record; -1 (as in its lifecycle records) until
     * it beats or sets one */
    b->thread = t->user_set ? t->user_thread : -1;
    b->os_tid = (int32_t)syscall(SYS_gettid);
    __atomic_store_n(&h->c.unit.loop, 0u, __ATOMIC_RELAXED);
    h->c.unit.t = 0;
    h->c.unit.ended = 0;
    h->c.unit.kind = HBT_UNIT_CHUNK;
    __atomic_store_n(&h->c.unit.place, t->place, __ATOMIC_RELAXED);
    __atomic_store_n(&h->c.unit.team, t->team, __ATOMIC_RELAXED);
    __atomic_store_n(&b->state, HBT_HS_ACTIVE, __ATOMIC_RELEASE);
    t->beat = b;
    t->unit = &h->c.unit;
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
    b->end_how = (uint8_t)how;
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
    hbt_still_after_fork_child();
    memset(hbt_hearts, 0, (size_t)n * sizeof hbt_hearts[0]);
    memset(hbt_mon.snap, 0, (size_t)n * sizeof hbt_mon.snap[0]);
    __atomic_store_n(&hbt_mon.started, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&hbt_mon.stop, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&hbt_mon.rate_noted, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&hbt_mon.next_adjust, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&hbt_mon.adjust_lock, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&hbt_mon.unwatched, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&hbt_mon.central_msgs, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&hbt_mon.central_passes, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&hbt_mon.central_period_ns, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&hbt_mon.api_msgs, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&hbt_mon.api_passes, 0, __ATOMIC_RELAXED);
    int mode = __atomic_load_n(&hbt_mon.mode, __ATOMIC_RELAXED);
    __atomic_store_n(&hbt_mon.pending, mode == HBT_MON_CENTRAL || mode == HBT_MON_RING,
                     __ATOMIC_RELEASE);
}

/* The counters of checker t: its own check line, or the shared ones. */
void hbt_account(struct hbt_tls *t, uint64_t msgs, uint64_t passes)
{
    if (t->registered && t->beat && t->thread_slot < HBT_HEARTS &&
        t->beat == &hbt_hearts[t->thread_slot].b) {
        struct hbt_checkline *c = &hbt_hearts[t->thread_slot].c;
        __atomic_store_n(&c->msgs, c->msgs + msgs, __ATOMIC_RELAXED);
        __atomic_store_n(&c->checks, c->checks + passes, __ATOMIC_RELAXED);
    } else {
        __atomic_fetch_add(&hbt_mon.api_msgs, msgs, __ATOMIC_RELAXED);
        __atomic_fetch_add(&hbt_mon.api_passes, passes, __ATOMIC_RELAXED);
    }
}

/* ------------------------------------------------------------------ */
/* activation                                                           */

/* Make `want` the monitor mode of the process, once. */
static void hbt_mon_activate(int want, int from_env)
{
    int none = HBT_MON_NONE;
    if (!__atomic_compare_exchange_n(&hbt_mon.mode, &none, want, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        return;
    hbt_mon.from_env = from_env;
    hbt_mon.start_ns = hbt_now_ns();
    hbt_mon_note_meta(want);
    if (want == HBT_MON_CENTRAL)
        hbt_mon_start_thread();
}

/* A fork child's first use: its own metadata, its own monitor thread. */
static void hbt_mon_child_start(void)
{
    if (!__atomic_load_n(&hbt_mon.pending, __ATOMIC_ACQUIRE) ||
        !__atomic_exchange_n(&hbt_mon.pending, 0, __ATOMIC_ACQ_REL))
        return;
    int mode = __atomic_load_n(&hbt_mon.mode, __ATOMIC_ACQUIRE);
    hbt_mon.start_ns = hbt_now_ns();
    hbt_mon_note_meta(mode);
    if (mode == HBT_MON_CENTRAL)
        hbt_mon_start_thread();
}

/* ------------------------------------------------------------------ */
/* heart-rate adjustment (seed 001, Algorithm 2)                        */

void hbt_mon_auto(uint64_t now)
{
    uint64_t due = __atomic_load_n(&hbt_mon.next_adjust, __ATOMIC_ACQUIRE);
    if (due == 0) {
        /* the first window begins */
        if (__atomic_compare_exchange_n(&hbt_mon.next_adjust, &due, now + HBT_SEC, 0,
                                        __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) &&
            !__atomic_exchange_n(&hbt_mon.rate_noted, 1, __ATOMIC_ACQ_REL)) {
            char num[32];
            snprintf(num, sizeof num, "%g", hbt_mon.heart_rate);
            hbt_meta_append_once("heart_rate", num);
        }
        return;
    }
    if (now < due || !__atomic_compare_exchange_n(&hbt_mon.next_adjust, &due, now + HBT_SEC, 0,
                                                  __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return;   /* not yet, or another thread does it */
    (void)hbt_mon_adjust(hbt_mon.heart_rate, 1);
}

int hbt_mon_adjust(double expected, int automatic)
{
    if (!(expected > 0) || !isfinite(expected) || !hbt_ensure_open())
        return 1;
    if (__atomic_exchange_n(&hbt_mon.adjust_lock, 1, __ATOMIC_ACQUIRE))
        return 1;   /* another thread is adjusting right now */
    uint64_t now = hbt_now_ns();
    uint32_t n = hbt_nthreads();
    double sum = 0;
    uint32_t count = 0;
    for (uint32_t j = 0; j < n; j++) {
        struct hbt_beatline *b = &hbt_hearts[j].b;
        if (__atomic_load_n(&b->state, __ATOMIC_ACQUIRE) != HBT_HS_ACTIVE) {
            hbt_mon.snap[j].valid = 0;
            continue;
        }
        struct hbt_seen s;
        hbt_read_beat(b, &s);
        double rate = 0;
        if (hbt_mon.snap[j].valid && hbt_mon.snap[j].seq != 0) {
            /* beats per second over the window since the last adjustment */
            if (s.seq != hbt_mon.snap[j].seq && now > hbt_mon.snap[j].t)
                rate = (double)(uint32_t)(s.seq - hbt_mon.snap[j].seq) * 1e9 /
                       (double)(now - hbt_mon.snap[j].t);
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
        hbt_mon.snap[j].t = now;
        hbt_mon.snap[j].seq = s.seq;
        hbt_mon.snap[j].valid = 1;
    }
    if (!count) {
        __atomic_store_n(&hbt_mon.adjust_lock, 0, __ATOMIC_RELEASE);
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
    __atomic_store_n(&hbt_mon.adjust_lock, 0, __ATOMIC_RELEASE);
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
    if (b->thread != t->beat_thread && !hbt_mon_hot.openmp)
        __atomic_store_n(&b->thread, t->beat_thread, __ATOMIC_RELAXED);
    if (!b->first_t) {
        /* atomic: a checker loads it even when it finds no first_t yet */
        __atomic_store_n(&b->first_seq, b->seq, __ATOMIC_RELAXED);
        __atomic_store_n(&b->first_t, now, __ATOMIC_RELEASE);
        hbt_mon_wake();
    }
    if (t->monitor || t->internal) {
        t->next_check = UINT64_MAX;
        return;
    }
    int mode = __atomic_load_n(&hbt_mon.mode, __ATOMIC_ACQUIRE);
    if (mode == HBT_MON_NONE && hbt_mon.env_mode != HBT_MON_NONE) {
        /* HBTRACE_MONITOR in a program that called no typed Init */
        hbt_mon_activate(hbt_mon.env_mode, 1);
        mode = __atomic_load_n(&hbt_mon.mode, __ATOMIC_ACQUIRE);
    }
    if (__atomic_load_n(&hbt_mon.pending, __ATOMIC_RELAXED))
        hbt_mon_child_start();
    uint64_t next = now + HBT_COLD_MAX_NS;
    if (hbt_mon.heart_rate > 0) {
        hbt_mon_auto(now);
        uint64_t due = __atomic_load_n(&hbt_mon.next_adjust, __ATOMIC_RELAXED);
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
    int want, env = hbt_mon.env_mode != HBT_MON_NONE;
    if (env) {
        want = hbt_mon.env_mode;
    } else if (type == HBT_MON_CENTRAL || type == HBT_MON_RING) {
        want = type;
    } else {
        if (!__atomic_exchange_n(&hbt_mon.type_warned, 1, __ATOMIC_ACQ_REL))
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
    int mode = __atomic_load_n(&hbt_mon.mode, __ATOMIC_ACQUIRE);
    if (mode == HBT_MON_NONE && hbt_mon.env_mode != HBT_MON_NONE) {
        hbt_mon_activate(hbt_mon.env_mode, 1);
        mode = __atomic_load_n(&hbt_mon.mode, __ATOMIC_ACQUIRE);
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
    int mode = __atomic_load_n(&hbt_mon.mode, __ATOMIC_ACQUIRE);
    if (mode != HBT_MON_CENTRAL && mode != HBT_MON_RING)
        return;
    if (__atomic_load_n(&hbt_mon.pending, __ATOMIC_ACQUIRE))
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
    uint64_t period = __atomic_load_n(&hbt_mon.central_period_ns, __ATOMIC_RELAXED);
    uint64_t passes = __atomic_load_n(&hbt_mon.central_passes, __ATOMIC_RELAXED);
    if (mode == HBT_MON_CENTRAL && passes && hbt_mon.start_ns) {
        uint64_t now = hbt_now_ns();
        period = now > hbt_mon.start_ns ? (now - hbt_mon.start_ns) / passes : period;
    }
    hbt_mon_record(mode, period, rec_mode);
    uint32_t unwatched = __atomic_load_n(&hbt_mon.unwatched, __ATOMIC_RELAXED);
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
    __atomic_store_n(&hbt_mon.stop, 1, __ATOMIC_RELEASE);   /* the monitor thread stops judging */
    hbt_mon_final(status == 0 ? HBT_FIN_EXIT_OK : HBT_FIN_EXIT_FAIL,
                  HBT_MODE_END & ~HBT_M_RESERVE);
}
