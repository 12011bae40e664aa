/*
 * monitor_judge.c -- the monitor's detection (monitor.c describes it):
 * reading another thread's beat line and its task in /proc, judging it, and
 * the BEHAVIOR and MONITOR records.
 */
#define _GNU_SOURCE
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
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

#include "autobeat.h"
#include "monitor.h"

/* Built with -DHBT_MON_DEBUG: every late look and verdict on stderr (for
 * working on the rules; never in a normal build). */
#ifdef HBT_MON_DEBUG
#define HBT_DBG(...) fprintf(stderr, __VA_ARGS__)
#else
#define HBT_DBG(...) ((void)0)
#endif

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
 * *gone = 1 when the task no longer exists. 0 when it cannot be told. *cpu:
 * the CPU it last ran on (field 39), -1 when it cannot be told. */
static char hbt_task_state(int tid, int *gone, int *cpu)
{
    char path[64], buf[512];
    *gone = 0;
    *cpu = -1;
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
    /* fields 3 (the state) to 39, space-separated after the name */
    const char *q = p + 2;
    for (int field = 3; field < 39 && q; field++) {
        q = strchr(q, ' ');
        if (q)
            q++;
    }
    if (q && *q >= '0' && *q <= '9')
        *cpu = (int)strtol(q, NULL, 10);
    return p[2];
}

/* ------------------------------------------------------------------ */
/* the machine's CPUs, seen from outside                                */

/* The host of a virtual machine stops its virtual CPUs now and then (steal
 * time) -- here for 5-35 ms, one CPU or all of them, a few times a second
 * while NPB LU runs. A thread on a stopped CPU neither beats nor runs, but
 * its CPU clock, read from another CPU, goes on as if it ran (the guest
 * learns of the steal only when that CPU runs again), and its teammates
 * wait for it in the program's own code: by every other sign it spins. The
 * stopped CPU takes no timer interrupt, while a CPU that runs a thread
 * takes one every tick (1-10 ms): a busy-waiting verdict on such a machine
 * waits for a tick of the thread's CPU within its window. */

/* The machine's steal time so far (/proc/stat, clock ticks); 0 when unknown. */
uint64_t hbt_steal_ticks(void)
{
    char buf[256];
    int saved = errno;
    ssize_t r = hbt_read_small("/proc/stat", buf, sizeof buf);
    errno = saved;
    uint64_t f[8];
    return r > 0 && hbt_proc_stat_cpu(buf, f) ? f[7] : 0;
}

/* Does this machine run under a hypervisor? x86: the CPUID bit every
 * hypervisor sets (leaf 1, ECX bit 31); elsewhere: /sys/hypervisor/type
 * (Xen), else not known -- steal time then tells. A host may stop a vCPU
 * from the machine's first second on, and a machine booted a few minutes
 * ago may have no steal time counted yet: with the check below alone, the
 * monitor followed no CPU's ticks on such a machine, and a thread whose vCPU
 * the host stopped while its team waited for it was charged the stop as CPU
 * time: busy-waiting (omp_flag_pipeline's thread 1, silent 18.7 ms in a
 * loop of 0.1 ms units, called so in a CI run on a new machine). */
int hbt_under_hypervisor(void)
{
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c >> 31) & 1u;
#else
    return access("/sys/hypervisor/type", R_OK) == 0;
#endif
}

/* Can the host stop this machine's CPUs: a virtual machine, or one whose
 * host ever took CPU time from it (steal time since boot: none on bare
 * metal)? The stops come before their steal time is counted, the first ones
 * of a run too. (Read at most every 100 ms; once yes, for good.) */
static int hbt_machine_steals(void)
{
    if (__atomic_load_n(&hbt_mon.steals, __ATOMIC_RELAXED))
        return 1;
    uint64_t now = hbt_now_ns(), last = __atomic_load_n(&hbt_mon.steal_t, __ATOMIC_RELAXED);
    if (last && now - last < 100 * HBT_MS)
        return 0;
    __atomic_store_n(&hbt_mon.steal_t, now, __ATOMIC_RELAXED);
    if (hbt_steal_ticks() > 0) {
        __atomic_store_n(&hbt_mon.steals, 1, __ATOMIC_RELAXED);
        return 1;
    }
    return 0;
}

/* The monitor thread woke at `to` for a look due at `from`, and waited
 * `queued` ns for a CPU meanwhile (its run-queue delay): over
 * HBT_OVERSLEPT_NS late with no CPU to wait for, on a machine whose host
 * steals, its CPU was stopped (its timer could not fire): every thread's CPU
 * time over that span is counted afresh. (Late because a CPU hog held its
 * CPU, it was queued: counting that as a stop hid 2 of 16 injected spins
 * beside the hogs, their CPU time counted afresh again and again. Over 10 ms
 * until the twenty-first session: flag_buffer's threads, both silent 2.7 ms
 * while the host stopped the machine, the monitor woke 2 ms late, and the
 * CPU time one of them was charged for the stop was a busy-waiting report.) */
void hbt_mon_overslept(uint64_t from, uint64_t to, uint64_t queued)
{
    if (to > from + queued + HBT_OVERSLEPT_NS && hbt_machine_steals()) {
        __atomic_store_n(&hbt_mon.stop_from, from, __ATOMIC_RELAXED);
        __atomic_store_n(&hbt_mon.stop_to, to, __ATOMIC_RELAXED);
    }
}

/* Every online CPU's timer interrupts so far, mod 2^32, as the latest read
 * of /proc/interrupts left them (the "LOC" line on x86, "arch_timer" on
 * arm64). Read at most every HBT_TICKS_FRESH_NS: the kernel takes 60 us to
 * write that file on this 2-vCPU machine, and a pass that followed the
 * ticks of two late threads read it twice every 0.27 ms -- half a CPU, most
 * of it taken from the spinning thread that shared the monitor's CPU. */
#define HBT_TICK_COLS 1024
static struct {
    uint32_t lock;
    int      ok;            /* the latest read found the line */
    uint64_t t;             /* when it was read (0: never) */
    uint32_t cols;
    int32_t  cpu[HBT_TICK_COLS];
    uint32_t n[HBT_TICK_COLS];
    char     buf[16384];
} hbt_loc;

static void hbt_loc_read(void)
{
    char *buf = hbt_loc.buf;
    int saved = errno, first = 1;
    hbt_loc.ok = 0;
    hbt_loc.cols = 0;
    int fd = open("/proc/interrupts", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        errno = saved;
        return;
    }
    size_t have = 0;
    for (;;) {
        ssize_t r = read(fd, buf + have, sizeof hbt_loc.buf - 1 - have);
        if (r <= 0)
            break;
        have += (size_t)r;
        buf[have] = '\0';
        char *line = buf, *nl;
        while ((nl = strchr(line, '\n'))) {
            *nl = '\0';
            if (first) {
                /* "CPU0 CPU1 ...": the CPU of each column (only online CPUs are listed) */
                first = 0;
                uint32_t k = 0;
                for (char *t = strstr(line, "CPU"); t && k < HBT_TICK_COLS; t = strstr(t + 3, "CPU"))
                    hbt_loc.cpu[k++] = (int32_t)strtol(t + 3, NULL, 10);
                hbt_loc.cols = k;
                if (!k)
                    goto out;
            } else {
                char *lab = line;
                while (*lab == ' ')
                    lab++;
                if (!strncmp(lab, "LOC:", 4) || strstr(lab, "arch_timer")) {
                    char *q = strchr(lab, ':') + 1, *end;
                    for (uint32_t k = 0; k < hbt_loc.cols; k++) {
                        unsigned long long v = strtoull(q, &end, 10);
                        if (end == q) {
                            hbt_loc.cols = k;   /* the columns it has */
                            break;
                        }
                        hbt_loc.n[k] = (uint32_t)v;
                        q = end;
                    }
                    hbt_loc.ok = hbt_loc.cols > 0;
                    goto out;
                }
            }
            line = nl + 1;
        }
        have = strlen(line);
        if (have >= sizeof hbt_loc.buf - 1)
            break;   /* a line longer than the buffer */
        memmove(buf, line, have);
    }
out:
    close(fd);
    errno = saved;
}

/* Timer interrupts CPU `cpu` has taken so far, mod 2^32, as of at most
 * HBT_TICKS_FRESH_NS before `now`: 1. 0 when it cannot be told (another
 * architecture, a line longer than the buffer); -1 when another checker
 * reads them right now (never waited for: a checker holds a view lock, which
 * the final pass at exit waits for a bounded time only). */
static int hbt_cpu_ticks(int cpu, uint32_t *n, uint64_t now)
{
    if (__atomic_exchange_n(&hbt_loc.lock, 1, __ATOMIC_ACQUIRE))
        return -1;
    if (!hbt_loc.t || now > hbt_loc.t + HBT_TICKS_FRESH_NS || now < hbt_loc.t) {
        hbt_loc_read();
        hbt_loc.t = hbt_now_ns();
    }
    int found = 0;
    for (uint32_t k = 0; hbt_loc.ok && k < hbt_loc.cols; k++)
        if (hbt_loc.cpu[k] == cpu) {
            *n = hbt_loc.n[k];
            found = 1;
            break;
        }
    __atomic_store_n(&hbt_loc.lock, 0, __ATOMIC_RELEASE);
    return found;
}

/* Thread h runs (state R) on CPU `cpu`, late: follow that CPU's timer ticks
 * while it stays silent. A CPU seen with no tick for HBT_FROZEN_NS while the
 * thread was on it was stopped: its CPU time until then is no work of its
 * own (returns 1: count its CPU time afresh). */
static int hbt_follow_ticks(struct hbt_heart *h, int cpu, uint64_t now, uint64_t cpu_ns)
{
    struct hbt_dist *d = &h->d;
    uint32_t n;
    int got = cpu < 0 || !hbt_machine_steals() ? 0 : hbt_cpu_ticks(cpu, &n, now);
    if (got < 0)
        return 0;   /* not read this time: followed as before */
    if (!got) {
        d->tick_t = 0;
        d->tick_cpu = -1;
        return 0;
    }
    if (!d->tick_t || d->tick_cpu != cpu) {
        /* first read; or it moved to another CPU: it ran (a stopped CPU's
         * thread stays on it) */
        d->tick_new = d->tick_t && d->tick_cpu >= 0;
        d->tick_run = 0;
        d->tick_cpu1 = cpu_ns;
        d->tick_cpu = (int16_t)cpu;
        d->tick_n = n;
        d->tick_t = now;
        d->tick_same = 0;
        return 0;
    }
    if (n == d->tick_n) {
        /* read unchanged this long: stopped (a look that comes late proves
         * nothing: only reads that saw no tick do) */
        uint64_t same = now - d->tick_t;
        d->tick_same = same / 1000u > UINT16_MAX ? UINT16_MAX : (uint16_t)(same / 1000u);
        if (same > HBT_FROZEN_NS) {
            d->froze = 1;
            __atomic_store_n(&hbt_mon.stop_from, d->tick_t, __ATOMIC_RELAXED);
            __atomic_store_n(&hbt_mon.stop_to, now, __ATOMIC_RELAXED);
        }
        return 0;
    }
    int stopped = (uint64_t)d->tick_same * HBT_US > HBT_FROZEN_NS;
    if (d->tick_new) {
        uint64_t run = (uint64_t)d->tick_run + (now - d->tick_t) / (16 * HBT_US);
        d->tick_run = run > UINT16_MAX ? UINT16_MAX : (uint16_t)run;
    } else {
        d->tick_run = 0;   /* the first change */
        d->tick_cpu1 = cpu_ns;
    }
    d->tick_n = n;
    d->tick_t = now;
    d->tick_same = 0;
    if (d->tick_new < UINT8_MAX)
        d->tick_new++;
    return stopped;
}

/* When thread h's CPU was first seen to tick since it is followed (tick_new
 * set). */
static uint64_t hbt_tick_first(const struct hbt_dist *d)
{
    uint64_t back = (uint64_t)d->tick_run * 16 * HBT_US;
    return d->tick_t > back ? d->tick_t - back : 0;
}

static double hbt_usual(const struct hbt_heart *h);

/* How much CPU time thread h must use, silent, after its CPU was seen to
 * tick for the tick to say that it runs: a CPU the host stopped takes the
 * tick it missed as soon as it runs again, and its thread, at work again,
 * beats within its usual interval -- once it has a CPU (NPB LU: a thread
 * queued 1.5 ms behind another after such a stop was called busy-waiting
 * while it waited, when this was wall time). Twice that interval,
 * HBT_TICK_GRACE_NS at least, at most HBT_TICK_LOOK_NS * 2. (This VM's host stops one of its vCPUs for 2.9 ms
 * every 100 ms while both are busy -- a CPU quota; the thread on it is
 * charged the stop as CPU time, and the look that came as the CPU ran again
 * saw a tick: 2 false busy-waiting reports in 8 NPB LU runs with source
 * beats, each 4 us before the thread's next beat.) */
static uint64_t hbt_tick_grace(const struct hbt_heart *h)
{
    double g = 2.0 * hbt_usual(h);
    if (g < (double)HBT_TICK_GRACE_NS)
        g = (double)HBT_TICK_GRACE_NS;
    return g > (double)(2 * HBT_TICK_LOOK_NS) ? 2 * HBT_TICK_LOOK_NS : (uint64_t)g;
}

/* Did the monitor see a CPU of this machine stopped between t0 and t1? */
static int hbt_stop_within(uint64_t t0, uint64_t t1)
{
    uint64_t to = __atomic_load_n(&hbt_mon.stop_to, __ATOMIC_RELAXED);
    return to && to >= t0 && __atomic_load_n(&hbt_mon.stop_from, __ATOMIC_RELAXED) <= t1;
}

static int hbt_view_lock(struct hbt_view *v, uint8_t *wait);
static void hbt_view_unlock(struct hbt_view *v);

/* The first beat after thread p's latest gap (of its lateness limit or
 * more), us (mod 2^32): its beat line's, until a look takes it, then the
 * one that look kept. */
static uint32_t hbt_gap_end(const struct hbt_heart *p)
{
    uint64_t g = __atomic_load_n(&p->b.gap_t, __ATOMIC_ACQUIRE);
    return g ? (uint32_t)(g / 1000u) : __atomic_load_n(&p->d.gap_end, __ATOMIC_RELAXED);
}

/* Was thread p silent with a thread silent since `since` (whose intervals
 * are `base`), and at work again by `now`: a gap a full look saw (late_from,
 * late_at) that began within HBT_APART of those intervals of `since` (and
 * 0.5 ms) and ended after it. The two stopped together: a third took their
 * CPUs, or the host stopped them. (Two threads that a CPU hog takes turns
 * with fall silent at moments of their own.) */
static int hbt_silent_with(const struct hbt_heart *p, uint64_t since, double base, uint64_t now)
{
    uint32_t la = __atomic_load_n(&p->d.late_at, __ATOMIC_RELAXED);
    uint32_t lf = __atomic_load_n(&p->d.late_from, __ATOMIC_RELAXED);
    uint32_t ge = hbt_gap_end(p), since_us = (uint32_t)(since / 1000u);
    double apart = HBT_APART * base < (double)HBT_LATE_FLOOR_NS ? HBT_APART * base : (double)HBT_LATE_FLOOR_NS;
    return la && (int32_t)(ge - la) >= 0 && (int32_t)(ge - since_us) > 0 &&
           (int32_t)((uint32_t)(now / 1000u) - ge) >= 0 && fabs((double)(int32_t)(since_us - lf)) * 1000.0 <= apart;
}

/* Does a thread other than `self` beat on now: its latest beat after `t`
 * and within its usual interval (one and a half, HBT_LATE_FLOOR_NS at
 * least) of now? (A thread that beat once since and then fell silent too
 * says nothing: it may wait for a stopped one. Nor one that was silent
 * with the judged thread, `since` its latest beat: its beats say that its
 * own CPU runs again, not the judged thread's -- flag_buffer's threads,
 * both silent 3-4 ms, one of them called busy-waiting in the 0.3 ms
 * between the other's first beat and its own.) */
static int hbt_other_beating(uint32_t self, uint64_t t, uint64_t since, double base, uint64_t now)
{
    uint32_t n = hbt_nthreads();
    uint8_t nowait = 0;
    for (uint32_t k = 0; k < n; k++) {
        struct hbt_heart *p = &hbt_hearts[k];
        if (k == self || __atomic_load_n(&p->b.state, __ATOMIC_ACQUIRE) != HBT_HS_ACTIVE)
            continue;
        uint64_t bt = __atomic_load_n(&p->b.t_ns, __ATOMIC_ACQUIRE);
        if (bt <= t || now - bt > 10 * HBT_MS || !hbt_view_lock(&p->v, &nowait))
            continue;
        double usual = 1.5 * p->v.base;
        hbt_view_unlock(&p->v);
        if (hbt_silent_with(p, since, base, now))
            continue;   /* its CPU, not the judged thread's, runs again */
        if ((double)(now - bt) <= (usual > (double)HBT_LATE_FLOOR_NS ? usual : (double)HBT_LATE_FLOOR_NS))
            return 1;
    }
    return 0;
}

/* Was thread h's CPU seen to run (a tick) since its CPU time is counted
 * from? 1 also when that cannot be told (no steal, no tick count), and when
 * another thread beat meanwhile: the machine runs, and a thread whose CPU
 * alone was stopped while the others beat on was not seen here (pi_pthread,
 * whose threads beat on their own, had no false report in 16 normal runs
 * without this wait, and waiting for a tick of each CPU, every 4 ms here,
 * made its reports later by a tenth). */
static int hbt_cpu_seen_running(const struct hbt_heart *h, uint32_t j, uint64_t now, uint64_t cpu)
{
    const struct hbt_dist *d = &h->d;
    if (d->tick_cpu < 0 || !d->tick_t)
        return 1;
    if (d->tick_new && d->tick_t > h->v.probe_t && !d->froze && cpu >= d->tick_cpu1 + hbt_tick_grace(h))
        return 1;
    return !d->froze && hbt_other_beating(j, h->v.probe_t, h->v.seen_t, h->v.base, now);
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
    HBT_DBG("hbtmon REPORT j%u (tid %d thread %d) bhv=%u at=%.6f onset=%.6f\n", j, h->b.os_tid, h->b.thread, bhv, at / 1e9, onset / 1e9);
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

/* ---- a thread's own distributions ---- */

/* The first beat of thread h that ended a gap since the last look (0: none),
 * and the gap length from now on (its lateness limit). */
static uint64_t hbt_take_gap(struct hbt_heart *h, double lim)
{
    uint64_t t = 0;
    if (__atomic_load_n(&h->b.gap_t, __ATOMIC_RELAXED))
        t = __atomic_exchange_n(&h->b.gap_t, 0, __ATOMIC_ACQ_REL);
    uint32_t g = lim >= (double)UINT32_MAX ? UINT32_MAX : (uint32_t)lim;
    uint32_t old = __atomic_load_n(&h->b.gap_ns, __ATOMIC_RELAXED);
    if (g < old - old / 8 || g > old + old / 8)   /* its line is written only on a change */
        __atomic_store_n(&h->b.gap_ns, g, __ATOMIC_RELAXED);
    return t;
}

static void hbt_ring_put(uint32_t *x, uint32_t cap, uint32_t *n, uint32_t m)
{
    x[*n % cap] = m;
    if (*n < UINT32_MAX)
        (*n)++;
}

/* One value into a tail of the latest `cap` values: its third largest (the
 * largest while fewer than three): two unusual values do not make it, a
 * lasting change does within three looks. */
static uint32_t hbt_tail_put(uint32_t *x, uint32_t cap, uint32_t *n, uint32_t m)
{
    hbt_ring_put(x, cap, n, m);
    uint32_t k = *n < cap ? *n : cap, top[3] = { 0, 0, 0 };
    for (uint32_t i = 0; i < k; i++) {
        uint32_t v = x[i];
        if (v > top[0]) {
            top[2] = top[1];
            top[1] = top[0];
            top[0] = v;
        } else if (v > top[1]) {
            top[2] = top[1];
            top[1] = v;
        } else if (v > top[2]) {
            top[2] = v;
        }
    }
    return k >= 3 ? top[2] : top[0];
}

static void hbt_tail_add(struct hbt_tail *d, uint32_t m)
{
    d->tail = hbt_tail_put(d->x, HBT_LOOKS, &d->n, m);
}

/* The thread's usual worst interval: its baseline, or the tail of its latest
 * look maxima if longer, up to HBT_TAIL_MAX baselines (a stalled machine
 * does not blind it). */
static double hbt_usual(const struct hbt_heart *h)
{
    double q = h->v.base, t = (double)h->d.wall.tail;
    if (t > HBT_TAIL_MAX * q)
        t = HBT_TAIL_MAX * q;
    return t > q ? t : q;
}

/* Silent this long, an interval of thread h is a gap (its beat line keeps the
 * first beat after one): S times its usual worst interval, and at least
 * HBT_LATE_FLOOR_NS. */
static double hbt_gap_limit(const struct hbt_heart *h)
{
    double lim = hbt_mon.late * hbt_usual(h);
    return lim < (double)HBT_LATE_FLOOR_NS ? (double)HBT_LATE_FLOOR_NS : lim;
}

static int hbt_in_team(const struct hbt_heart *h);

/* Silent this long, thread h is late and looked at closely: its gap limit, or,
 * for a thread of a team judged by its automatic OpenMP beats (hbt_in_team), S
 * times its usual silence (d.gap_tail: the third longest of its latest silences,
 * up to HBT_GAP_USUAL_MAX_NS) if longer. A look's mean interval dilutes a long
 * unit among many short ones (GROMACS: two regions of 1.3-5 ms a step among 17
 * of 10 us); its silences are exact. Not for a thread judged by the program's
 * own beats: their silences are the program's, and a usual one can be a spin for
 * a teammate (NPB LU with source beats beside CPU hogs: its pipeline's flag spins, a
 * few ms, 20 a second and more; judged late only past 1.5 times those, its spins were
 * called busy-waiting, 54 false reports in 4 normal runs where there had been none:
 * benchmarks/eval_monitor.py --kernels LU --beats source --hog on) */
static double hbt_limit(const struct hbt_heart *h)
{
    double lim = hbt_gap_limit(h);
    if (!hbt_in_team(h) || !h->d.gap_often ||
        (uint32_t)(hbt_now_ns() / 1000000u) - h->d.gap_from_ms > 2 * HBT_GAP_OFTEN_MS)
        return lim;   /* its silences are rare now: the machine's, not its pace */
    double g = (double)h->d.gap_tail;
    if (g > (double)HBT_GAP_USUAL_MAX_NS)
        g = (double)HBT_GAP_USUAL_MAX_NS;
    g *= hbt_mon.late;
    return g > lim ? g : lim;
}

/* The CPU time a late thread must use without beating to be busy-waiting:
 * HBT_BUSY_FACTOR (or S if larger) times the most CPU time one of its beats
 * took lately -- more than its work between two beats needs, so that a thread
 * that is only late because it waits for a CPU (the machine is loaded) or
 * because this unit of its work is a long one beats before it gets there,
 * whatever the load; and at least HBT_BUSY_FLOOR_NS, the CPU time a short
 * unit of work can take now and then on a loaded machine. (S, 1.5, was the
 * factor: NPB LU's units of 1.2-6 ms came at up to 1.6 times the most of
 * the second before, a false busy-waiting report in one normal run of 2 to 4.) */
static double hbt_busy_need(const struct hbt_heart *h)
{
    double need = (hbt_mon.late > HBT_BUSY_FACTOR ? hbt_mon.late : HBT_BUSY_FACTOR) * h->d.cpu_max;
    return need < (double)HBT_BUSY_FLOOR_NS ? (double)HBT_BUSY_FLOOR_NS : need;
}

/* ... and while the CPU time of its beats is known from fewer than
 * HBT_CPU_WARM looks, that many times more, HBT_CPU_WARM / looks (none
 * before its first): a thread whose team waits for it early in the run is
 * judged on a short history only with a wide margin. (Before, nothing was
 * reported before HBT_CPU_WARM looks, and the spin that went unreported was
 * then learnt as a usual beat's CPU time: NPB FT, whose threads beat 83 times
 * with units of milliseconds, had 7 or 8 looks at its 40th beat, and every
 * injected spin was missed.) */
static double hbt_busy_bar(const struct hbt_heart *h)
{
    uint32_t n = h->d.cpu_n;
    if (n >= HBT_CPU_WARM)
        return hbt_busy_need(h);
    return n ? hbt_busy_need(h) * (double)HBT_CPU_WARM / (double)n : INFINITY;
}

/* The upper quartile of the latest looks' CPU time per beat. */
static uint32_t hbt_cpu_quartile(const struct hbt_cpu_tail *t)
{
    uint32_t k = t->n < HBT_CPU_LOOKS ? t->n : HBT_CPU_LOOKS, y[HBT_CPU_LOOKS];
    if (!k)
        return 0;
    for (uint32_t i = 0; i < k; i++) {   /* insertion sort: at most 32 */
        uint32_t v = t->x[i], q = i;
        for (; q > 0 && y[q - 1] > v; q--)
            y[q] = y[q - 1];
        y[q] = v;
    }
    return y[(3 * (k - 1)) / 4];
}

static double hbt_peer_slowness(uint32_t self, int probe, uint64_t since);

/* One look's CPU time per beat into the thread's most, which forgets by half
 * every HBT_CPU_HALF_NS (a phase of long units of work is remembered a while;
 * a change of the program's work is learnt), and into its latest looks (their
 * upper quartile is its usual, against which its teammates tell how slow the
 * machine runs: hbt_peer_slowness). The most learns every look: a tail there
 * (two unusual looks not learnt) was tried and called the isolated long units
 * of a normal pi_pthread run busy-waiting, in 3 of 4 runs -- but a look
 * that took more CPU time than its usual while the machine charged its
 * teammates' work as much more is learnt at the pace they kept (divided by
 * the lesser of the two factors): a stall of the virtual machine (every
 * thread 4-12 times its CPU time per unit for tens of ms,
 * benchmarks/vm_stalls.c) early in a run otherwise taught a most near 10 ms
 * to a thread whose beats take 1 ms, and a later spin of 9 ms per beat went
 * unreported. (Dividing by the teammates' factor alone left the usual work
 * of NPB LU, whose threads spin on flags in turn, unlearnt: 3 to 5 times the
 * false reports.) */
static void hbt_cpu_most(struct hbt_dist *d, uint32_t self, double x, double own, uint64_t now,
                         int capped)
{
    if (d->cpu_t && now > d->cpu_t) {
        double f = 1.0 - (double)(now - d->cpu_t) / (1.4427 * (double)HBT_CPU_HALF_NS);
        d->cpu_max *= f > 0.5 ? f : 0.5;
    }
    d->cpu_t = now;
    /* capped: it grows by at most half per look, so that a slowdown that
     * stays just under the verdict for a while does not raise the bar out of
     * its own reach (not for a team's thread: its units of work differ by
     * orders of magnitude, and its team says when it holds them up) */
    if (x > d->cpu_max && own > 1.0 && d->cpu_n >= HBT_CPU_WARM) {
        double slow = hbt_peer_slowness(self, 0, 0);
        x /= slow < own ? slow : own;
    }
    if (capped && d->cpu_n >= HBT_CPU_WARM && x > 1.5 * d->cpu_max)
        x = 1.5 * d->cpu_max;
    if (x > d->cpu_max)
        d->cpu_max = x;
}

static void hbt_cpu_learn(struct hbt_dist *d, uint32_t self, uint64_t per, uint64_t now,
                          int capped)
{
    double own = d->cpu.tail ? (double)per / (double)d->cpu.tail : 1.0;   /* against its usual */
    hbt_ring_put(d->cpu.x, HBT_CPU_LOOKS, &d->cpu.n,
                 per > UINT32_MAX ? UINT32_MAX : (uint32_t)per);
    d->cpu.tail = hbt_cpu_quartile(&d->cpu);
    hbt_cpu_most(d, self, (double)per, own, now, capped);
    if (d->cpu_n < UINT16_MAX)
        d->cpu_n++;
}

/* A thread that waits in the OpenMP runtime now and then is one of a team;
 * judged by its automatic OpenMP beats (HBTRACE_MONITOR_BEATS=openmp), its
 * team sets its pace: those beats end the constructs' chunks and regions,
 * units that differ by orders of magnitude, and a long one holds nobody up
 * until a teammate waits for it. Judged by the program's own beats (api),
 * placed in its work by whoever wrote it, its silence is judged as any
 * thread's: a thread of a static loop with no barrier until its end (NPB EP
 * with a beat per batch) that spins or blocks between two of its beats holds
 * nobody up for seconds, and is still the one thread whose beats stopped
 * (0 of 8 busy and cond faults reported on EP with the team's pace). */
static int hbt_in_team(const struct hbt_heart *h)
{
    return hbt_mon_hot.openmp &&
           (__atomic_load_n(&h->b.waited_us, __ATOMIC_RELAXED) != 0 ||
            __atomic_load_n(&h->b.waiting, __ATOMIC_RELAXED) != 0);
}

/* Its baseline is known well enough to judge it: HBT_WARM beats, or
 * HBT_WARM_TEAM for a thread of a team, which is blamed only while its team
 * waits for it (NPB FT beats 75-83 times per thread, in units of
 * milliseconds: a fault at its 8th beat, 70 ms into the run, went
 * unreported for its whole 300 ms). */
static int hbt_warm(const struct hbt_heart *h)
{
    return h->v.nbeats >= (hbt_in_team(h) ? HBT_WARM_TEAM : HBT_WARM);
}

/* Teammate k, marked waiting (`w`), released? Thread `self`, at work, is at `at` in its team
 * (HBT_PLACE): yes when k waits at a barrier of the same region that `self` has passed (it
 * entered it and is at work again: everyone there was let go), or in an earlier region while
 * `self`'s team counts k (its thread number below the team's size: a worker in the pool while
 * the master works a region of one thread alone waits on -- IQ-TREE's master spinning there
 * went unreported). A thread released that has not run since -- queued behind other threads --
 * still bears its mark. Places not known (a nested region, a wait that is no team barrier: a
 * critical section, a taskwait, a flag) tell nothing. */
static int hbt_wait_released(uint32_t self, uint32_t k, uint16_t w)
{
    if (w != HBT_SYNC_BARRIER && w != HBT_SYNC_OUTSIDE)
        return 0;
    const struct hbt_unit *us = &hbt_hearts[self].c.unit, *uk = &hbt_hearts[k].c.unit;
    uint64_t at = __atomic_load_n(&us->place, __ATOMIC_RELAXED), place = __atomic_load_n(&uk->place, __ATOMIC_RELAXED);
    if (!at || !place)
        return 0;
    uint32_t ai = (uint32_t)(at >> 32), pi = (uint32_t)(place >> 32), ab = (uint32_t)at, pb = (uint32_t)place;
    if (ai != pi) {
        int32_t num = __atomic_load_n(&hbt_hearts[k].b.thread, __ATOMIC_RELAXED);
        uint32_t team = __atomic_load_n(&us->team, __ATOMIC_RELAXED);
        return (uint32_t)(ai - pi) < 0x80000000u && num >= 0 && (uint32_t)num < team;   /* (mod 2^32) */
    }
    return pb != 0 && pb != HBT_PLACE_END && pb <= ab;
}

/* How long has the rest of its team waited for thread `self`: the longest
 * wait in progress of another thread in the OpenMP runtime (a barrier, a
 * taskwait, a lock, or a worker in the pool for the next parallel region,
 * which the master must start), ns; 0 when none waits. A thread of a team
 * that works on, silent, while nobody waits does the team's work: a long
 * unit, not an anomaly of its own. And it holds its team up only from when
 * a teammate began to wait: NPB LU's threads spin on each other's flags in
 * its pipeline (no runtime wait) and meet at a barrier after it, where the
 * one that spun longest came 0.02-0.5 ms after the other, silent 5-56 ms
 * by then -- judged by its silence, every such unit was busy-waiting (45 of
 * 50 reports of LU, 2 runs of each kind, were such). With libomp, a spin on
 * a flag of the program's own code (its `omp flush` called again and again,
 * ompt.c) is such a wait too, from its first flush. (A master in the
 * program's serial part is itself outside, not judged, and waits for
 * nobody: its mark holds no worker.) With `latest`: the
 * shortest such wait instead, how long all of those waiting have waited. */
static uint64_t hbt_team_wait_ns(uint32_t self, uint64_t now, int latest)
{
    uint32_t n = hbt_nthreads(), now_us = (uint32_t)(now / 1000u), most = 0, least = UINT32_MAX;
    int any = 0;
    for (uint32_t k = 0; k < n; k++) {
        if (k == self)
            continue;
        const struct hbt_beatline *b = &hbt_hearts[k].b;
        uint16_t w = __atomic_load_n(&b->waiting, __ATOMIC_ACQUIRE);
        if (w == HBT_SYNC_OUTSIDE && __atomic_load_n(&b->thread, __ATOMIC_RELAXED) == 0)
            continue;   /* the master in the program's serial part waits for nobody (cd-hit beside
                           CPU hogs: the master queued 4 ms on its way into a region, still so
                           marked, while a worker began a long unit of its own there -- called
                           busy-waiting 5 ms in) */
        if (w && hbt_wait_released(self, k, w)) {
            HBT_DBG("hbtmon released j%u: k%u w=%u place=%llx at=%llx\n", self, k, w,
                    (unsigned long long)hbt_hearts[k].c.unit.place, (unsigned long long)hbt_hearts[self].c.unit.place);
            continue;   /* released from a barrier thread `self` has passed, and not run since
                           (omp_flag_pipeline with libomp: its thread 1, queued at the loop's
                           barrier, held thread 0's 4 ms of work after it as though it waited
                           for them -- busy-waiting 4 ms in, 1 run of 100 alone) */
        }
        if (w && __atomic_load_n(&b->state, __ATOMIC_RELAXED) == HBT_HS_ACTIVE) {
            /* (mod 2^32 us: a wait of over 71 minutes reads as a shorter one) */
            uint32_t d = now_us - __atomic_load_n(&b->wait_us, __ATOMIC_RELAXED);
            any = 1;
            if (d < 0x80000000u && d > most)
                most = d;
            if (d < least)
                least = d;
        }
    }
    if (latest)
        return any ? (uint64_t)(least ? least : 1) * HBT_US : 0;
    return any ? (uint64_t)(most ? most : 1) * HBT_US : 0;
}

/* Thread p is registered and at work: not waiting in the OpenMP runtime,
 * not ended. */
static int hbt_at_work(const struct hbt_heart *p)
{
    return __atomic_load_n(&p->b.state, __ATOMIC_ACQUIRE) == HBT_HS_ACTIVE &&
           !__atomic_load_n(&p->b.waiting, __ATOMIC_RELAXED) && !__atomic_load_n(&p->v.final, __ATOMIC_RELAXED);
}

/* Thread `self`, silent since its latest beat at `last`, in a chunk of a loop begun at that
 * beat: how long its chunk has lasted past its bar (0: not so, or the loop's chunks not known
 * yet), and that bar: HBT_UNIT_OVER times the loop's second longest chunk lately, and at least
 * HBT_UNIT_USUAL times its longest. (8 times the longest, one 20 us chunk that waited 4-8 ms
 * for a CPU set the bar at 32-64 ms for the next second, and a thread that spun was reported
 * up to 108 ms in: tests/test_monitor.py, 1 run in 15.) Its team
 * need not wait for it: a thread of a dynamically scheduled loop that spins or blocks in
 * the middle of it was otherwise blamed only once the loop had no chunk left for its
 * teammates, or they reached the region's end (cd-hit: chunks of 5-25 us, its victims'
 * 300 ms faults found 1 in 4 (busy) and 60-190 ms late (blocked)). And, in `usualp`, until
 * when its chunk is no longer than HBT_UNIT_USUAL times that longest chunk (0: the loop's
 * chunks not known): as long as the loop's chunks lately, work even while its team waits;
 * in the loop's tail after its last chunk (hbt_unit_none), from that chunk's end. */
static uint64_t hbt_unit_overdue(uint32_t self, uint64_t now, uint64_t last, uint64_t *barp, uint64_t *usualp,
                                 int *unknownp)
{
    const struct hbt_unit *u = &hbt_hearts[self].c.unit;
    uint32_t loop = __atomic_load_n(&u->loop, __ATOMIC_ACQUIRE);
    if (!loop || loop > HBT_CT_MAX)
        return 0;
    uint64_t t0 = __atomic_load_n(&u->t, __ATOMIC_RELAXED);
    int task = __atomic_load_n(&u->kind, __ATOMIC_RELAXED) == HBT_UNIT_TASK;
    if (t0 < last && !task)
        return 0;   /* (a pair read across its latest beat) */
    if (task && __atomic_load_n(&hbt_ct_units[loop].n, __ATOMIC_RELAXED) < HBT_TASK_WARM) {
        /* a task of a construct whose tasks are not known yet: any length is its work (a
         * recursion's first merges, kalign's first tasks of 0.2-0.3 s, were busy-waiting
         * while a teammate waited in a taskwait for them) */
        *unknownp = 1;
        return 0;
    }
    if (__atomic_load_n(&u->ended, __ATOMIC_RELAXED)) {
        /* its chunk ended at t0 with no other for it: silent since then, not since its
         * latest beat, the chunk's start (and never overdue: a thread that then spins on a
         * teammate's flag, NPB LU's, is judged by its team's wait) */
        *usualp = t0;
        return 0;
    }
    const struct hbt_ct_unit *c = &hbt_ct_units[loop];
    uint32_t second = 0, most = hbt_unit_most(c, (uint32_t)(now / 1000000u), &second);
    if ((!task && __atomic_load_n(&c->n, __ATOMIC_RELAXED) < HBT_UNIT_WARM) || !most)
        return 0;
    *usualp = t0 + (uint64_t)(HBT_UNIT_USUAL * most);
    uint64_t bar = (uint64_t)(HBT_UNIT_OVER * second);
    if (bar < (uint64_t)(HBT_UNIT_USUAL * most))
        bar = (uint64_t)(HBT_UNIT_USUAL * most);
    if (now <= t0 + bar)
        return 0;
    *barp = bar;
    return now - (t0 + bar);
}

/* How much slower than usual the other threads go right now (1 when none can
 * tell): the median, over the threads at work (usual or busy-waiting, not
 * waiting in the runtime) that have a known CPU time per beat, of the largest
 * of their latest look's CPU time per beat, their unit in progress, both
 * against their usual (the upper quartile of their latest looks), and their silence against
 * their usual worst interval. Without probe: their latest look's CPU time per
 * beat only -- how much more CPU time the machine charged their work, not how
 * long they went without a CPU (a thread preempted by another process is
 * silent, and its teammates' work is not the less for it: counting that in
 * what a thread learns multiplied the false reports of NPB LU beside a CPU
 * hog by 5).
 *
 * On a virtual machine the host can make every vCPU do its work several
 * times slower for tens of milliseconds while the guest charges the time as
 * CPU time (here: 4-12x per unit of work, all threads of a compute loop at
 * once, in 24 of 40 runs of 0.5 s, with nothing else running and no tracer:
 * benchmarks/vm_stalls.c). A late thread that used much CPU time then is not busy-waiting:
 * its teammates are as slow or as late. (A fixed chain of arithmetic timed
 * by the checker does not tell: it slows 2x in those moments where the
 * program's work slows 9x.) A view another checker holds is passed.
 *
 * With `since`, the latest beat of thread `self`: a thread that went on
 * beating for HBT_APART of its intervals after it fell silent may be waiting
 * for it (NPB LU built with gcc: a thread spins on its neighbour's flag, no
 * call the tracer sees), and its lateness and its unit in progress say
 * nothing of the machine (with them, neither the thread that spun nor its
 * waiting neighbour was ever reported). */
static double hbt_peer_slowness(uint32_t self, int probe, uint64_t since)
{
    uint64_t now = hbt_now_ns();
    double r[16];
    uint32_t m = 0, n = hbt_nthreads();
    uint8_t nowait = 0;
    for (uint32_t k = 0; k < n && m < 16; k++) {
        if (k == self)
            continue;
        struct hbt_heart *p = &hbt_hearts[k];
        const struct hbt_beatline *b = &p->b;
        if (!hbt_at_work(p) || !hbt_view_lock(&p->v, &nowait))
            continue;
        const struct hbt_view *v = &p->v;
        const struct hbt_cpu_tail *t = &p->d.cpu;
        if ((v->cur == HBT_BHV_RUNNING || v->cur == HBT_BHV_BUSY_WAITING) && !v->soft &&
            p->d.cpu_n >= HBT_CPU_WARM && t->tail) {
            double x = (double)t->x[(t->n - 1) % HBT_CPU_LOOKS];
            uint64_t cpu;
            uint32_t nb = __atomic_load_n(&b->seq, __ATOMIC_ACQUIRE) - v->probe_seq;
            uint64_t bt = __atomic_load_n(&b->t_ns, __ATOMIC_ACQUIRE);
            int pr = probe && !(since && bt > since && (double)(bt - since) > HBT_APART * v->base);
            /* fell silent within a few of its intervals of thread `self` */
            int tie = since && (double)(bt > since ? bt - since : since - bt) <= HBT_APART * v->base;
            if (pr && v->probing && nb < 1024 && hbt_task_cpu(b->os_tid, &cpu) && cpu > v->probe_cpu) {
                /* since its checker's sample, per beat since (its unit in
                 * progress counted whole) */
                double y = (double)(cpu - v->probe_cpu) / (double)(nb ? nb : 1);
                if (y > x)
                    x = y;
            }
            double u = hbt_usual(p);
            double late = pr && u > 0 && now > bt ? (double)(now - bt) / u : 0.0;
            x /= (double)t->tail;
            x = late > x ? late : x;
            /* silent together with it, the two may spin for each other: the machine
             * is this much slower at most (silent before it, it is waited for) */
            r[m++] = tie && x > HBT_SLOW_MAX ? HBT_SLOW_MAX : x;
        }
        hbt_view_unlock(&p->v);
    }
    if (!m)
        return 1.0;
    for (uint32_t i = 1; i < m; i++)   /* insertion sort: at most 16 */
        for (uint32_t q = i; q > 0 && r[q - 1] > r[q]; q--) {
            double x = r[q];
            r[q] = r[q - 1];
            r[q - 1] = x;
        }
    double med = m % 2 ? r[m / 2] : 0.5 * (r[m / 2 - 1] + r[m / 2]);
    return med > 1.0 ? med : 1.0;
}

/* Did thread p (its view locked) hardly run since its checker's sample:
 * under a quarter of a CPU over at least HBT_LATE_FLOOR_NS? */
static int hbt_hardly_ran(const struct hbt_heart *p, uint64_t now)
{
    const struct hbt_view *v = &p->v;
    uint64_t cpu;
    if (!v->probing || now < v->probe_t + HBT_LATE_FLOOR_NS || !hbt_task_cpu(p->b.os_tid, &cpu))
        return 0;
    uint64_t used = cpu > v->probe_cpu ? cpu - v->probe_cpu : 0;
    return 4 * used < now - v->probe_t;
}

/* Is a teammate of thread `self` at work, making progress of its own (1): at
 * work (not waiting in the OpenMP runtime, not ended), beating (its latest
 * beat within its lateness limit), or runnable (state R: on a CPU, or queued
 * for one) and not still by its own samples -- or still when last sampled
 * but hardly run since, or seen to move on within HBT_STILL_RECENT_NS, or
 * blocked in the program's own code since about when thread `self` fell
 * silent at `self_t` (its latest beat `lim` before that or later; a helper
 * blocked in a read for long would hold every spinner for good), or waiting
 * in the runtime but queued for a CPU? Else 2 when another teammate at work
 * is still too, 0 when none. */
static int hbt_teammate_at_work(uint32_t self, uint64_t now, uint64_t self_t, double lim)
{
    uint32_t n = hbt_nthreads();
    uint8_t nowait = 0;
    int others_still = 0;
    for (uint32_t k = 0; k < n; k++) {
        if (k == self)
            continue;
        struct hbt_heart *p = &hbt_hearts[k];
        if (!hbt_at_work(p) || !__atomic_load_n(&p->b.seq, __ATOMIC_ACQUIRE)) {
            /* waiting in the runtime, but let out of its wait (a barrier the judged
             * thread has passed) and not run since: it is to go on, and the judged
             * thread may wait for it */
            uint16_t w = __atomic_load_n(&p->b.waiting, __ATOMIC_ACQUIRE);
            if (w && __atomic_load_n(&p->b.state, __ATOMIC_ACQUIRE) == HBT_HS_ACTIVE &&
                hbt_wait_released(self, k, w)) {
                HBT_DBG("hbtmon team j%u: k%u released, not run since\n", self, k);
                return 1;
            }
            /* waiting in the runtime, but runnable and hardly running: let out of
             * its wait, maybe, and queued for a CPU (its mark is cleared when it
             * runs again) */
            int gone = 0, cpu = -1;
            uint64_t used;
            if (__atomic_load_n(&p->b.state, __ATOMIC_ACQUIRE) == HBT_HS_ACTIVE &&
                __atomic_load_n(&p->b.waiting, __ATOMIC_RELAXED) && !__atomic_load_n(&p->v.final, __ATOMIC_RELAXED) &&
                hbt_mon.have_proc && hbt_task_state(p->b.os_tid, &gone, &cpu) == 'R' && !gone &&
                hbt_task_cpu(p->b.os_tid, &used) && hbt_still_waiter_queued(k, p->b.os_tid, now, used)) {
                HBT_DBG("hbtmon team j%u: k%u waits, queued\n", self, k);
                return 1;
            }
            continue;
        }
        uint64_t bt = __atomic_load_n(&p->b.t_ns, __ATOMIC_ACQUIRE);
        int still = hbt_still_known(k) == 1;
        if (hbt_view_lock(&p->v, &nowait)) {
            int beating = p->v.base > 0 && now > bt && (double)(now - bt) <= hbt_gap_limit(p);
            /* still when last sampled, but it hardly ran since: queued for a CPU,
             * and what it waited for may have come meanwhile (NPB LU at 4
             * threads on 2 CPUs: every thread still but one, queued) */
            int queued = still && hbt_hardly_ran(p, now);
            hbt_view_unlock(&p->v);
            if (beating || queued)
                return 1;
        }
        /* still now, but seen to move on lately: a pipeline of flag spins on fewer
         * CPUs than threads, whose thread that can go on waits for a CPU (NPB LU
         * at 4 threads on 2: three threads still and the fourth at the barrier,
         * each for a moment) */
        uint64_t moved = hbt_still_moved(k);
        if (moved && now < moved + HBT_STILL_RECENT_NS)
            return 1;
        HBT_DBG("hbtmon team j%u: k%u still=%d moved=%.3fms ago bt=%.3fms ago\n", self, k, still,
                moved ? (now - moved) / 1e6 : -1.0, (now - bt) / 1e6);
        if (still) {
            others_still = 1;
            continue;
        }
        int gone = 0, cpu = -1;
        char ps = hbt_mon.have_proc ? hbt_task_state(p->b.os_tid, &gone, &cpu) : 0;
        if (gone)
            continue;
        if (ps == 'R')
            return 1;
        /* blocked in its own code since about when the judged thread fell silent
         * (it beat then, or later): what the judged thread waits for, more likely
         * than not -- the blocked one is reported (NPB LU beside CPU hogs: the
         * teammate that spun on a blocked victim's flag was called busy-waiting
         * too). A helper blocked for long before does not hold it. */
        if ((ps == 'S' || ps == 'D') && (double)bt + lim >= (double)self_t)
            return 1;
    }
    return others_still ? 2 : 0;
}

/* Did thread `self`, silent since `since`, fall silent waiting for a
 * teammate? A teammate at work (not waiting in the OpenMP runtime) that
 * fell silent before it, by more than HBT_APART of its intervals (`base`: it
 * beat on meanwhile; within a few of them, who stopped first is chance) and
 * at most `lim` (its lateness limit), and is still silent and late: 1; that
 * was still silent, late, after `from`: 2. A teammate silent since about
 * the same moment (either first) on a CPU not seen to run since: 1; at work
 * again since `from`: 2. Else 0.
 * Its silence is then the teammate's doing, not its own: NPB LU's threads
 * wait for their neighbour's flag in the program's own code (with gcc no
 * call the tracer sees), spinning, and the thread that waited for a blocked
 * or stopped neighbour was the busy-waiting report, beside or instead of
 * the neighbour's (4 of 11 false reports in 12 runs with gcc). A thread
 * silent for long before, a helper blocked in a read, is not such a
 * teammate. Also 2: a teammate that beat lately and hardly ran since before
 * it fell silent; with `held` (it was held for a teammate in this silence
 * already), one silent and late again that hardly ran since. */
static int hbt_waits_for_peer(uint32_t self, uint64_t since, double lim, double base, uint64_t from,
                              uint64_t now, int held)
{
    uint32_t n = hbt_nthreads(), since_us = (uint32_t)(since / 1000u), from_us = (uint32_t)(from / 1000u);
    uint32_t lim_us = lim >= 4e15 ? 0xFFFFFFFFu : (uint32_t)(lim / 1000.0);
    uint8_t nowait = 0;
    int r = 0;
    for (uint32_t k = 0; k < n; k++) {
        if (k == self)
            continue;
        struct hbt_heart *p = &hbt_hearts[k];
        const struct hbt_beatline *b = &p->b;
        if (!hbt_at_work(p) || !__atomic_load_n(&b->seq, __ATOMIC_ACQUIRE))
            continue;
        uint64_t bt = __atomic_load_n(&b->t_ns, __ATOMIC_ACQUIRE);
        uint64_t apart = bt > since ? bt - since : since - bt;
        if ((bt > since || (double)apart <= lim) && hbt_view_lock(&p->v, &nowait)) {
            /* a teammate that beat lately and hardly ran since its sample, taken
             * before the thread fell silent (no look has seen it beat since: the
             * checker itself waited for a CPU), or silent again and late after the
             * thread was already held for a teammate in this silence: it waits for
             * that one, which lost its CPU (NPB LU with source beats, gcc: thread 1
             * queued 19.6 ms behind another process, the monitor too, and thread 0
             * spinning on its flag for as long, judged at the monitor's first look
             * after it, 0.4 ms after thread 1 ran again; thread 1 off a CPU 1.7 ms,
             * one beat, 3.2 ms more, thread 0 spinning through both: false
             * busy-waiting reports) */
            int idle = hbt_hardly_ran(p, now);
            if (idle && (((double)p->v.probe_t <= (double)since + HBT_APART * base && (double)(bt + lim) >= (double)since) ||
                         (held && bt > since && (double)(now - bt) > hbt_gap_limit(p)))) {
                hbt_view_unlock(&p->v);
                r = 2;
                continue;
            }
            if ((double)apart > lim) {
                hbt_view_unlock(&p->v);
                goto gaps;
            }
            /* still silent since before it, and late by its own measure? Or
             * silent since about when it fell silent, on a CPU not seen to
             * run since (the host stopped it, maybe: the thread waits for it,
             * whichever of the two beat last) */
            const struct hbt_dist *d = &p->d;
            /* (fell silent before it by less than HBT_APART of its intervals: who
             * stopped first is chance then; the two spin together, and the one that
             * stopped first is blamed, once its CPU time passes the bar a slow
             * machine sets -- HBT_SLOW_MAX times the usual -- not both) */
            int late = bt < since && p->v.base > 0 && now > bt && (double)(now - bt) > hbt_gap_limit(p);
            int stopped = d->tick_t && d->tick_cpu >= 0 && d->tick_t > bt && (!d->tick_new || d->froze);
            /* or blocked (reported conditional-waiting) since about when it fell
             * silent, either first: it waits for the blocked one, more likely
             * than the reverse (a thread that blocks for another's work blocks
             * first; NPB LU's spinning teammate of a blocked victim fell silent
             * 15 us before it, 5 of its beat intervals) */
            int blocked = p->v.cur == HBT_BHV_COND_WAITING ||
                          /* read blocked at a late look in this gap, its verdict due at the next
                           * (the teammate that spun on its counter, judged between the two looks,
                           * was called busy-waiting: flag_buffer, a CI run) */
                          (p->v.blocked_seen && __atomic_load_n(&d->late_from, __ATOMIC_RELAXED) == (uint32_t)(bt / 1000u));
            hbt_view_unlock(&p->v);
            if (late || stopped || blocked)
                return 1;
        }
    gaps:;
        uint32_t lf = __atomic_load_n(&p->d.late_from, __ATOMIC_RELAXED);
        uint32_t la = __atomic_load_n(&p->d.late_at, __ATOMIC_RELAXED);
        if (!la)
            continue;
        int32_t before = (int32_t)(since_us - lf);   /* (mod 2^32 us) */
        /* the lateness seen at la ended at `end` (a look saw the beat that
         * ended it, or none has yet: its beat line still holds it) */
        uint32_t end = hbt_gap_end(p);
        int ended = (int32_t)(end - la) >= 0;
        if (before >= 0 && (uint32_t)before <= lim_us && (double)before * 1000.0 > HBT_APART * base) {
            /* still silent after `from`: seen late since, or its gap ended since. A
             * look that comes between the beat that ends the teammate's gap and the
             * thread's own next beat, a few of its units later, would else count the
             * CPU time it spun for the teammate as its own (flag_buffer: thread 1
             * called busy-waiting at the end of thread 0's 300 ms spin) */
            if ((int32_t)(la - from_us) > 0 || (ended && (int32_t)(end - from_us) > 0))
                r = 2;
        } else if (hbt_silent_with(p, since, base, now) && (int32_t)(end - from_us) > 0) {
            /* silent since about the same moment, either first, and at work again
             * since the sample: the two stopped together (a third took their CPUs,
             * or the host stopped them) and it spins for the teammate until it
             * catches up (flag_buffer's thread 0, 8 units ahead, silent 22 us after
             * thread 1 for 4.3 ms while thread 1 waited for a CPU: busy-waiting in
             * the 0.2 ms between thread 1's first beat and its own) */
            r = 2;
        }
    }
    return r;
}

/* Its CPU time since the sample, less what of it went to the OpenMP
 * runtime's waits that ended since: its own work. A wait's CPU time is not
 * read (a clock read per barrier costs more than the barrier); it is taken
 * at the thread's CPU share over the window (its CPU time over the wall
 * time since the sample), as its waits were -- on a loaded machine a waiter
 * runs as little as the rest of its window, and counting each of its wall
 * seconds as a CPU second would leave its work near nothing (the most CPU
 * time per beat then under-read, and a unit of ordinary work called
 * busy-waiting). */
static uint64_t hbt_work_cpu(const struct hbt_heart *h, uint64_t cpu, uint32_t waited_us,
                             uint64_t now)
{
    uint64_t used = cpu > h->v.probe_cpu ? cpu - h->v.probe_cpu : 0;
    uint64_t waited = (uint64_t)(uint32_t)(waited_us - h->d.probe_waited) * HBT_US;
    uint64_t wall = now > h->v.probe_t ? now - h->v.probe_t : 0;
    if (!waited)
        return used;
    if (waited >= wall)
        return 0;
    return (uint64_t)((double)used * (double)(wall - waited) / (double)wall);
}

/* Sample thread h's CPU clock at beat count seq (a look that saw it beat,
 * or a late look): CPU time is counted from here while it stays silent.
 * Returns 1, *per, its CPU time per beat since the previous sample, and
 * *nbeats, its beats since, when it beat since. */
static int hbt_cpu_sample(struct hbt_heart *h, uint32_t seq, uint64_t span, uint64_t *per,
                          uint32_t *nbeats)
{
    struct hbt_view *v = &h->v;
    uint64_t cpu;
    if (!hbt_task_cpu(h->b.os_tid, &cpu)) {
        v->probing = 0;
        return 0;
    }
    uint64_t now = hbt_now_ns();
    uint32_t beats = seq - v->probe_seq;
    uint32_t waited = __atomic_load_n(&h->b.waited_us, __ATOMIC_ACQUIRE);
    int have = v->probing && beats && cpu >= v->probe_cpu;
    if (have) {
        /* the samples are not taken at beats: the window holds parts of the
         * intervals at its ends. Its CPU time at its rate over the beats'
         * own span (from the beat before the window to the latest) is what
         * those beats took */
        double work = (double)hbt_work_cpu(h, cpu, waited, now);
        if (span && now > v->probe_t && span < now - v->probe_t)
            work *= (double)span / (double)(now - v->probe_t);
        *per = (uint64_t)(work / beats);
        *nbeats = beats;
    }
    v->probing = 1;
    v->probe_t = now;
    v->probe_cpu = cpu;
    v->probe_seq = seq;
    h->d.probe_waited = waited;
    return have;
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
    hbt_still_end(j);
    return HBT_J_DEAD;
}

/* Did thread h beat after the triple s was read? The checker may have been
 * preempted between reading it and deciding (a ring checker is one of the
 * program's threads, on a machine with more threads than CPUs): no verdict
 * on stale beats then, just a new look at once. */
static int hbt_beat_since(struct hbt_heart *h, const struct hbt_seen *s, struct hbt_ctx *c)
{
    if (__atomic_load_n(&h->b.seq, __ATOMIC_ACQUIRE) == s->seq)
        return 0;
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

/* The next /proc read of a late thread: `gap` after now, doubling while
 * nothing changes (first: two baseline intervals, at least 1 ms). */
static uint64_t hbt_backoff(struct hbt_view *v, uint64_t gap, int changed, uint64_t now)
{
    gap = gap && !changed ? gap * 2 : (uint64_t)(2 * v->base) > HBT_MS ? (uint64_t)(2 * v->base) : HBT_MS;
    if (gap > HBT_PROC_MAX_NS)
        gap = HBT_PROC_MAX_NS;
    v->proc_gap = (uint16_t)(gap / (16 * HBT_US));
    v->proc_next = now + gap;
    return gap;
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
        memset(&h->d, 0, sizeof h->d);
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
        (void)hbt_take_gap(h, UINT32_MAX);   /* no limit known yet */
        v->seen_seq = s->seq;
        v->seen_t = s->t;
        uint64_t per;
        uint32_t nb;
        (void)hbt_cpu_sample(h, s->seq, 0, &per, &nb);
    } else if (fresh && s->t > v->seen_t) {
        double avg = (double)(s->t - v->seen_t) / fresh;
        /* the latest interval: exact for one new beat, else their mean */
        double last = avg;
        int warm = hbt_warm(h);
        int anomalous = v->cur == HBT_BHV_BUSY_WAITING || v->cur == HBT_BHV_COND_WAITING;
        double lim = hbt_limit(h);
        /* the first of the new beats that ended a gap: exactly when it was at
         * work again (the beat line keeps it) */
        uint64_t end_t = hbt_take_gap(h, warm ? hbt_gap_limit(h) : UINT32_MAX);
        int gap_first = end_t > v->seen_t && end_t <= s->t;
        uint32_t la = __atomic_load_n(&h->d.late_at, __ATOMIC_RELAXED);
        if (gap_first || (la && (int32_t)(__atomic_load_n(&h->d.gap_end, __ATOMIC_RELAXED) - la) < 0))
            /* at work again after a gap (or after the lateness a full look saw):
             * when, for its teammates (hbt_waits_for_peer, hbt_other_beating) */
            __atomic_store_n(&h->d.gap_end, (uint32_t)((gap_first ? end_t : s->t) / 1000u), __ATOMIC_RELAXED);
        if (!anomalous && !v->soft)
            hbt_tail_add(&h->d.wall, avg > UINT32_MAX ? UINT32_MAX : (uint32_t)avg);   /* the gap of a reported anomaly is not its usual */
        if (!warm || avg < S * v->base)
            hbt_fold(v, avg, fresh);
        if (v->soft) {
            /* said to have exited at Finished, and beats again */
            v->soft = 0;
            uint64_t onset = s->t > (uint64_t)v->base ? s->t - (uint64_t)v->base : s->t;
            hbt_report(h, j, HBT_BHV_RUNNING, onset, s->seq - 1, c);
        } else if (anomalous) {
            /* flowing again (below: when). Onset: the first beat after the gap -- the one seen last time
             * if it ended the slow interval; else exactly the beat that ended
             * the longest new interval when that interval began at the
             * latest beat seen (the beat line keeps it); else the one before
             * this interval when we saw one beat; else estimated from the
             * new beats at the baseline rate -- and for a thread that was
             * blocked one interval before that beat (it woke, worked, beat) */
            double after = last;
            if (!v->slow_end && gap_first) {
                /* it was reported late with no beat after seen_t: the gap is
                 * the first new interval, the others came after it */
                after = fresh > 1 ? (double)(s->t - end_t) / (fresh - 1) : -1;
                last = fresh > 1 ? after : (double)(end_t - v->seen_t);
            }
            /* a thread reported blocked runs again with its first beat
             * after the gap, however slowly it then works (a machine that
             * stretches its next intervals does not keep it blocked); a
             * busy-waiting one once its intervals are usual again */
            if (warm && (v->cur == HBT_BHV_COND_WAITING || (after >= 0 && after < lim))) {
                uint64_t onset;
                if (v->slow_end || (fresh == 1 && !gap_first))
                    onset = v->seen_t;
                else if (gap_first)
                    onset = end_t;
                else {
                    /* it was late at seen_t + lim at the earliest */
                    double back = (double)(fresh - 1) * v->base;
                    uint64_t least = v->seen_t + (uint64_t)lim;
                    onset = (double)s->t - back > (double)least ? s->t - (uint64_t)back : least;
                    if (onset > s->t)
                        onset = s->t;
                }
                /* one interval: the usual one, or the one seen after the
                 * gap if shorter (a loaded machine stretches the usual) */
                double w = after > 0 && after < v->base ? after : v->base;
                if (h->d.cpu_n >= HBT_CPU_WARM && h->d.cpu_max < w)
                    w = h->d.cpu_max;   /* at least its CPU time: a loaded machine
                                                    stretches the interval, not the work */
                uint64_t work = (uint64_t)w;
                if (v->cur == HBT_BHV_COND_WAITING && onset > work)
                    onset -= work;
                hbt_report(h, j, HBT_BHV_RUNNING, onset, s->seq - 1, c);
            }
        }
        v->proc_next = 0;   /* a beat came: the next lateness is judged at once */
        v->blocked_seen = 0;
        hbt_still_pause(j);   /* no register samples until it is late again */
        v->proc_gap = 0;
        /* (its CPU time in the gap is not its own; or its CPU, followed while
         * it was late, was never seen to run: stopped, maybe, up to the end) */
        uint64_t ended_at = gap_first ? end_t : s->t;
        int froze = h->d.froze || (h->d.tick_t && h->d.tick_cpu >= 0 &&
                                   (!h->d.tick_new || ended_at < hbt_tick_first(&h->d) + hbt_tick_grace(h)));
        h->d.froze = 0;
        h->d.tick_t = 0;
        h->d.tick_cpu = -1;
        /* a silence that ended with no verdict: its pace (less its runtime waits meanwhile,
         * which are not its own), unless its CPU was seen stopped in it */
        uint32_t waited_now = __atomic_load_n(&h->b.waited_us, __ATOMIC_ACQUIRE);
        if (gap_first && !anomalous && !v->soft && !froze) {
            double own = (double)(end_t - v->seen_t) - (double)(uint32_t)(waited_now - h->d.gap_waited) * HBT_US;
            if (own > 0) {
                uint32_t n = h->d.gap_n, now_ms = (uint32_t)(now / 1000000u);
                h->d.gap_tail = hbt_tail_put(h->d.gap_x, HBT_GAPS, &n, own > UINT32_MAX ? UINT32_MAX : (uint32_t)own);
                h->d.gap_n = (uint16_t)(n >= 2 * HBT_GAPS ? HBT_GAPS + n % HBT_GAPS : n);   /* (ring full) */
                if (n % HBT_GAPS == 1)
                    h->d.gap_from_ms = now_ms;   /* a batch begins */
                else if (n % HBT_GAPS == 0)
                    h->d.gap_often = now_ms - h->d.gap_from_ms <= HBT_GAP_OFTEN_MS;
            }
        }
        h->d.gap_waited = waited_now;
        v->slow_end = warm && last >= lim ? 1 : 0;
        /* its CPU time counts from here while it stays silent; its CPU share
         * is learnt from usual work only */
        /* its CPU time counts from here while it stays silent. Its CPU time
         * per beat since the last sample is learnt from its usual work --
         * unless it is more than S times its usual worst: then it spun
         * through that gap without beating (busy-waiting, found when the gap
         * ended: its checker did not look while it lasted, or it had not
         * used that much yet) */
        uint64_t per = 0;
        uint32_t nb = 0;
        uint32_t before = v->seen_seq;
        uint64_t before_t = v->seen_t;
        v->seen_seq = s->seq;
        v->seen_t = s->t;
        int hv = hbt_cpu_sample(h, s->seq, s->t - before_t, &per, &nb);
        /* its gap was a wait for a teammate silent before it: neither its
         * busy-waiting nor a unit of its work */
        int waited_peer = v->held_peer ||
                          ((gap_first || last >= lim) && !anomalous && !v->soft &&
                           (hbt_waits_for_peer(j, before_t, lim, v->base, before_t, now, 0) ||
                            hbt_stop_within(before_t, gap_first ? end_t : s->t)));
        v->held_peer = 0;
        if (hv && !anomalous && !v->soft && !froze) {
            /* (a thread of a team is judged while its team waits for it, at
             * its late looks only). Its CPU time per beat is learnt from its
             * first looks on, before its baseline is (HBT_WARM beats): a
             * thread with few beats has few looks. */
            int retro = !hbt_in_team(h);
            /* (one beat's most more: the CPU rate over the window stands in
             * for the rate over the beats' span) */
            if (retro && warm && h->d.cpu_n >= HBT_CPU_WARM &&
                (double)per * nb >= hbt_busy_need(h) * nb + h->d.cpu_max &&
                (double)per * nb >= (hbt_busy_need(h) * nb + h->d.cpu_max) * hbt_peer_slowness(j, 1, before_t)) {
                HBT_DBG("hbtmon retro j%u per=%llu nb=%u need=%.3f cpu_max=%.3f waited_peer=%d froze=%d\n", j,
                        (unsigned long long)per, nb, hbt_busy_need(h) / 1e6, h->d.cpu_max / 1e6, waited_peer, froze);
                if (!waited_peer) {
                    hbt_report(h, j, HBT_BHV_BUSY_WAITING, before_t, before, c);
                    v->slow_end = 1;   /* the beat seen last ended the gap */
                }
            } else if (!waited_peer) {
                hbt_cpu_learn(&h->d, j, per, now, retro);
            }
        }
        /* a late look saw it use this much CPU time in its unit of work in
         * progress, and it beat again with no verdict: one unit's CPU time,
         * which a look's mean over its beats dilutes (NPB LU with libomp:
         * beats 80 us apart, and 17 units of 1.5-6 ms a second, each with
         * quick ones in the look that saw it end; such a unit while its
         * teammate spun on a flag for it was a false busy-waiting report in
         * 3 of 4 normal runs) */
        if (h->d.late_cpu > 0 && !anomalous && !v->soft && h->d.cpu_n && !froze && !waited_peer) {
            /* the late look saw part of the unit: the rest at the CPU share
             * it saw, up to the beat that ended the gap */
            double x = h->d.late_cpu;
            uint64_t end = gap_first ? end_t : fresh == 1 ? s->t : 0;
            if (end > before_t) {
                double whole = (double)h->d.late_share * (double)(end - before_t);
                if (whole > x)
                    x = whole;
            }
            hbt_cpu_most(&h->d, j, x, h->d.cpu.tail ? x / (double)h->d.cpu.tail : 1.0, now,
                         !hbt_in_team(h));
        }
        h->d.late_cpu = 0;
    }

    /* ---- lateness ---- */
    uint64_t since = now > s->t ? now - s->t : 0;
    double base = v->base;
    if (v->soft) {
        c->look = now + HBT_SOFT_LOOK_NS;
        c->tol = HBT_SOFT_LOOK_NS / 2;
        goto final;
    }
    if (!hbt_warm(h) || base <= 0) {
        c->unwarm = 1;
        uint64_t w = base > 0 ? (uint64_t)(base / 2) : HBT_POLL_WARM_NS;
        c->look = now + (w < HBT_POLL_MIN_NS ? HBT_POLL_MIN_NS : w > HBT_POLL_WARM_NS ? HBT_POLL_WARM_NS : w);
        c->tol = 0;
        goto final;
    }
    double lim = hbt_limit(h);
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
    if (c->final == HBT_FIN_NONE && now < v->proc_next) {
        /* late, judged a moment ago: just watch for beats */
        c->look = now + again < v->proc_next ? now + again : v->proc_next;
        c->tol = (uint64_t)(HBT_BATCH * base);
        return HBT_J_ALIVE;
    }

    /* late: what is it doing? */
    int gone = 0, on_cpu = -1;
    char ps;
    if (j == c->self)
        ps = 'R';   /* a final pass judging its own caller */
    else if (hbt_mon.have_proc)
        ps = hbt_task_state(h->b.os_tid, &gone, &on_cpu);
    else {
        uint64_t cpu;
        gone = !hbt_task_cpu(h->b.os_tid, &cpu);
        ps = 0;     /* told by its CPU time below */
    }
    if (gone || ps == 'Z' || ps == 'X') {
        if (__atomic_load_n(&h->b.state, __ATOMIC_ACQUIRE) == HBT_HS_ENDED)
            return hbt_judge_ended(h, j, c);   /* it ended normally meanwhile */
        if (hbt_beat_since(h, s, c))
            return HBT_J_ALIVE;
        hbt_report(h, j, HBT_BHV_FAILED, s->t, s->seq, c);   /* vanished */
        __atomic_store_n(&v->final, 1, __ATOMIC_RELEASE);
        hbt_still_end(j);
        return HBT_J_DEAD;
    }
    if (c->final)
        goto final;   /* Finished, exit: only whether it is gone */
    if (__atomic_load_n(&h->b.waiting, __ATOMIC_ACQUIRE)) {
        /* it waits in the OpenMP runtime (a barrier, outside the parallel
         * regions) for the rest of its team: its silence is not its own --
         * spinning there is no busy-waiting, blocking there no conditional
         * waiting. Its CPU time counts from when it is at work again. */
        if (hbt_beat_since(h, s, c))
            return HBT_J_ALIVE;
        v->probing = 0;
        v->blocked_seen = 0;
        hbt_still_pause(j);
        __atomic_store_n(&h->d.late_at, 0u, __ATOMIC_RELAXED);   /* it waits for others */
        hbt_backoff(v, gap, 0, now);
        c->look = now + hbt_again(base, gap);
        c->tol = (uint64_t)(HBT_BATCH * base);
        return HBT_J_ALIVE;
    }

    int was_blocked = v->blocked_seen;
    v->blocked_seen = ps == 'S' || ps == 'D';
    /* busy-waiting: on a CPU without beating, judged by the CPU time it used
     * since its last beat (since the first look after it): more than any of
     * its usual beats needs. A thread that is only late because it waits
     * for a CPU (a loaded machine) beats before it uses that much. */
    /* late and at work: its teammates may be waiting for it */
    __atomic_store_n(&h->d.late_from, (uint32_t)(s->t / 1000u), __ATOMIC_RELAXED);
    __atomic_store_n(&h->d.late_at, (uint32_t)(now / 1000u) | 1u, __ATOMIC_RELAXED);
    uint8_t bhv;
    double need = hbt_busy_bar(h);
    uint64_t cpu = 0;
    int have_cpu = hbt_task_cpu(h->b.os_tid, &cpu);
    /* (only while it runs: the CPU a blocked thread left may sleep, tickless, and
     * read as stopped -- which let no thread's CPU time count while it overlapped:
     * ImageMagick's master, blocked in a unit begun at a lock while its teammate
     * waited, was reported 19-103 ms in, and once not in its 300 ms) */
    if (ps == 'R' && hbt_follow_ticks(h, on_cpu, now, have_cpu ? cpu : 0))
        v->probing = 0;   /* its CPU was stopped: its CPU time counts from here */
    if (v->probing && hbt_stop_within(v->probe_t, now))
        v->probing = 0;   /* a CPU was stopped meanwhile: so may its own have been */
    /* (a thread that blocks is not held: its blocking is its own, whoever fell
     * silent first -- LU's blocked victim, silent 20 us after its spinning
     * teammate, went unreported) */
    int waits = v->probing && (ps == 'R' || !ps) ? hbt_waits_for_peer(j, s->t, lim, v->base, v->probe_t, now, v->held_peer) : 0;
    /* still (its registers the same in every sample since it fell silent: it
     * spins on memory another thread writes) while a teammate is at work: it
     * waits for that one, as in the runtime (NPB LU at 4 threads on 2 CPUs,
     * gcc: the last thread of the pipeline spun 20-45 ms of CPU time on its
     * neighbour's flag while the neighbour waited for a CPU, and was called
     * busy-waiting in 11 of 11 false reports of 2 normal runs) */
    int still = ps == 'R' || !ps ? hbt_still_follow(j, h->b.os_tid) : HBT_STILL_NO;
    /* a spin of it ended since the sample: it went on, and spins or works
     * afresh -- its CPU time before that was a wait, not its own (NPB LU at 4
     * threads on 2 CPUs: the thread last in the pipeline works its last planes
     * with a spin on its neighbour's flag before each, silent 48 ms while its
     * team waits at the barrier) */
    if (v->probing && hbt_still_moved(j) > v->probe_t)
        waits = waits ? waits : 2;
    /* in a chunk of a loop far longer than the loop's chunks take, and not spinning on
     * memory: its own doing, whatever a teammate silent before it does (cd-hit: the master
     * worked 235 ms in its own code while its teammate spun in a chunk of the loop) */
    int unknown = 0;   /* in a task of a construct whose tasks are not known yet */
    uint64_t bar = 0, usual = 0, over = hbt_in_team(h) ? hbt_unit_overdue(j, now, s->t, &bar, &usual, &unknown) : 0;
    if (over && still != 1 && waits == 1)
        waits = 0;
    if (!waits && still == 1) {
        /* ... or while another thread of its team spins too, HBT_STILL_STUCK_NS
         * of its silence at most: NPB LU's pipeline at 4 threads on 2 CPUs crawls
         * with every thread but those at the barrier still for 40-90 ms (a step of
         * work between two spins takes less than a sample period, and is not
         * seen); a chain of spins that never ends is reported after that */
        int team = hbt_teammate_at_work(j, now, s->t, lim);
        if (team == 1 || (team == 2 && since < HBT_STILL_STUCK_NS))
            waits = 1;
    }
    if (waits)
        v->probing = 0;   /* it waits for a teammate, or one it waited for runs again: its own
                             CPU time counts from here */
    if (!v->probing) {
        /* no sample since its last beat (it was waiting in the runtime, or
         * the first look failed): from now */
        uint64_t per;
        uint32_t nb;
        (void)hbt_cpu_sample(h, s->seq, 0, &per, &nb);
        have_cpu = 0;
    }
    double used = have_cpu ? (double)hbt_work_cpu(h, cpu, __atomic_load_n(&h->b.waited_us,
                                                                           __ATOMIC_ACQUIRE), now) : 0.0;
    double unit = used;   /* of its unit in progress, since the sample */
    uint64_t sampled = now > v->probe_t ? now - v->probe_t : 0;

    /* a thread of a team is not blamed while nobody waits for it, nor before
     * its team has waited for it as long as it would be late (its silence
     * before that was the team's pace), and of its CPU time only what it used
     * while they waited counts (at its CPU share over the window); nor busy
     * before the CPU time of its beats is known */
    int held = 1;
    uint64_t until = 0;
    if (hbt_in_team(h)) {
        uint64_t hold = hbt_team_wait_ns(j, now, 0);
        if (hold) {
            /* ... counted from HBT_SHARE_OVER times the time the last of them to wait
             * took for its share of the work since the thread's latest beat, when later:
             * a share of a static split may be longer than another's (IQ-TREE's first
             * region of a kind: the master waited 45 ms for its teammate's share of 144
             * ms, its own 99 ms, and the teammate was called busy-waiting in 2 of 3 normal
             * runs, 120 ms into its share) */
            uint64_t least = hbt_team_wait_ns(j, now, 1);
            uint64_t begun = now > least ? now - least : 0;   /* the latest wait began */
            if (begun > s->t) {
                double share = (double)(begun - s->t);
                double from = (double)s->t + HBT_SHARE_OVER * share;
                uint64_t late = (double)now > from ? (uint64_t)((double)now - from) : 0;
                /* ... and, on a CPU, once it has used that much CPU time: its share took
                 * longer if it got less of a CPU than its teammate did (CI: a share of 130
                 * ms of CPU time took 227 ms beside the teammate's 100 ms, and was called
                 * busy-waiting). A blocked thread uses none: its silence counts. */
                if ((ps == 'R' || !ps) && have_cpu && used < HBT_SHARE_OVER * share)
                    late = 0;
                if (late < hold)
                    hold = late;
            }
        }
        if (usual) {
            /* ... and from when its chunk of a loop grew longer than the loop's chunks
             * lately, when later: a dynamic loop whose last iteration is 1000 times the
             * others, taken by one thread while its teammate waits at the loop's end, was
             * called busy-waiting at every step (tests/programs/omp_long_chunks.c) */
            uint64_t late = now > usual ? now - usual : 0;
            if (late < hold)
                hold = late;
        }
        /* (or its teammates passed it by in a loop whose chunks they take: as long as
         * they waited, since its chunk became overdue) */
        HBT_DBG("hbtmon unit j%u loop=%u t0=%.6f last=%.6f most=%u n=%u over=%.3f\n", j, h->c.unit.loop,
                h->c.unit.t / 1e9, s->t / 1e9, h->c.unit.loop <= HBT_CT_MAX ? hbt_unit_most(&hbt_ct_units[h->c.unit.loop], (uint32_t)(now / 1000000u), NULL) : 0,
                h->c.unit.loop <= HBT_CT_MAX ? hbt_ct_units[h->c.unit.loop].n : 0, over / 1e6);
        if (over > hold)
            hold = over;
        if (over) {
            /* its CPU time since then: busy-waiting past as much again as that bar (its
             * usual worst beat may be a unit of another construct, tens of times longer) */
            double b = bar < HBT_BUSY_FLOOR_NS ? (double)HBT_BUSY_FLOOR_NS : (double)bar;
            if (b < need)
                need = b;
        }
        if (hold > since)
            hold = since;
        held = (double)hold > lim;
        if (hold && !held)
            until = (uint64_t)(lim - (double)hold) + 1;
        if (held && sampled > hold)
            /* what it must have used while they waited: all it could have used
             * before is left out (taken at its CPU share over the window, a
             * thread that spun on a flag at full speed and was then preempted
             * while its team waited -- omp_flag_pipeline's thread 1, 3.4 ms
             * behind a CPU hog -- was busy-waiting) */
            used = used > (double)(sampled - hold) ? used - (double)(sampled - hold) : 0.0;
    }
    if (still == 1 && !waits) {
        /* still, and no teammate at work now (else it was held above): only what
         * it used since the latest of those that wait in the runtime began to
         * wait counts -- a teammate that spun too, or worked, until a moment ago
         * was what it waited for (NPB LU at 4 threads: called busy-waiting 44 us
         * before its beat, for its CPU time since the look before, 3.3 ms
         * earlier, while its neighbour spun until 80 us before it; with source
         * beats beside CPU hogs, the monitor queued 3.8 ms while both threads spun
         * in turn) */
        uint64_t alone = hbt_team_wait_ns(j, now, 1);
        if (alone && sampled > alone)
            used = used > (double)(sampled - alone) ? used - (double)(sampled - alone) : 0.0;
    }
    if (waits == 1) {
        held = 0;   /* it waits for a teammate, silent before it */
        v->held_peer = 1;   /* (nor is its gap busy-waiting when it ends) */
    }
    HBT_DBG("hbtmon look j%u t=%.6f since=%.3fms ps=%c cpu%d used=%.3f need=%.3f held=%d waits=%d "
            "tick_t=%.6f new=%u froze=%d probe_t=%.6f cur=%u still=%d\n", j, now / 1e9, since / 1e6, ps ? ps : '?',
            on_cpu, used / 1e6, need / 1e6, held, waits, h->d.tick_t / 1e9, h->d.tick_new, h->d.froze,
            v->probe_t / 1e9, v->cur, hbt_still_known(j));
    /* (a new verdict: not while the other threads' work is as much slower
     * than usual -- the machine runs slow; of a chunk overdue, their latest work
     * only: a teammate's silence in a unit of its own, of another construct, says
     * nothing of the machine -- cd-hit's master, 27 ms into 300 ms of its own work,
     * held its teammate's spin in a chunk unreported until it beat again) */
    /* (in a task of a construct whose tasks are not known yet, nothing is busy-waiting: its
     * CPU time may be any task's work, and a loop of work that reads a clock can look still
     * -- tests/programs/omp_long_tasks.c's first long task, 1 run in 8) */
    if (used >= need && held && !unknown &&
        (v->cur == HBT_BHV_BUSY_WAITING || used >= need * hbt_peer_slowness(j, !over, s->t))) {
        bhv = HBT_BHV_BUSY_WAITING;
        if (v->cur != HBT_BHV_BUSY_WAITING && still == HBT_STILL_UNKNOWN && used < 2.0 * need) {
            /* not sampled enough yet to tell a spin on memory (a wait for a
             * teammate at work) from work: a few samples more (up to twice the
             * bar: then judged by its CPU time alone, as where nothing is
             * sampled) */
            c->look = now + 2 * HBT_STILL_PERIOD_NS;
            c->tol = 0;
            return HBT_J_ALIVE;
        }
        if (v->cur != HBT_BHV_BUSY_WAITING && !hbt_cpu_seen_running(h, j, now, cpu)) {
            /* its CPU not seen to run since its CPU time counts (or only a
             * moment ago): stopped by the host, maybe (NPB LU with source beats:
             * 8 of 12 false reports in 12 runs were threads on a stopped CPU,
             * with gcc and clang) */
            uint64_t at = now + HBT_TICK_LOOK_NS;
            if (h->d.tick_new && h->d.tick_t > v->probe_t && !h->d.froze) {
                /* when it will have run that long, if it runs */
                uint64_t g = hbt_tick_grace(h), ran = cpu > h->d.tick_cpu1 ? cpu - h->d.tick_cpu1 : 0;
                g = ran < g ? now + (g - ran) : now;
                if (g > now && g < at)
                    at = g;
            }
            c->look = at;
            c->tol = 0;
            return HBT_J_ALIVE;
        }
    } else if (!held || ps == 'R' || !have_cpu || sampled < HBT_COND_FLOOR_NS ||
               2 * unit >= (double)sampled) {
        /* running or runnable, not enough CPU time yet to tell: look again
         * when it could have used it, at the latest after `again`. Blocked
         * (S, D) is believed of a thread that used under half a CPU over
         * HBT_COND_FLOOR_NS since the sample: a state read while a spinning
         * thread wrote a file (the injector writes its truth as the fault
         * begins) called NPB MG's busy victims at 4 threads
         * conditional-waiting first, and its master's blocks of 0.6 ms
         * (page faults, output) were reports while its team waited. */
        uint64_t wait = used < need && isfinite(need) ? (uint64_t)(need - used) : UINT64_MAX;   /* (slow machine: `again`) */
        if (ps != 'R' && have_cpu && sampled < HBT_COND_FLOOR_NS && HBT_COND_FLOOR_NS - sampled < wait)
            wait = HBT_COND_FLOOR_NS - sampled;   /* when it could be called blocked */
        if (wait < HBT_PROBE_MIN_NS)
            wait = HBT_PROBE_MIN_NS;
        uint64_t lookg = hbt_again(base, gap);
        if (until && until < lookg)
            lookg = until;   /* when its team will have waited long enough */
        c->look = now + (wait < lookg ? wait : lookg);
        c->tol = 0;
        if (unit > h->d.late_cpu && waits != 1) {
            h->d.late_cpu = unit;   /* learnt if it beats again with no verdict */
            h->d.late_share = sampled ? (float)(unit / (double)sampled) : 0.0f;
        }
        return HBT_J_ALIVE;
    } else {
        bhv = HBT_BHV_COND_WAITING;   /* blocked (S, D, ...), or no CPU time used */
        if (ps && v->cur != HBT_BHV_COND_WAITING && !was_blocked) {
            /* read blocked once, with under half a CPU used: a thread that shares its CPU
             * with another process gets half of one, and one that writes a file now and
             * then is read in D at one look of many (cd-hit's master writing its output
             * at the end, beside two CPU hogs: conditional waiting in 7 of 27 normal runs).
             * Blocked at the next look too: blocked */
            c->look = now + HBT_PROBE_MIN_NS;
            c->tol = 0;
            return HBT_J_ALIVE;
        }
    }
    /* a state read before a beat that came meanwhile says nothing of the
     * gap (the checker may have been preempted): the next look sees the
     * beat and the CPU time per beat of the gap */
    if (hbt_beat_since(h, s, c))
        return HBT_J_ALIVE;
    int changed = bhv != v->cur;
    if (changed)
        hbt_report(h, j, bhv, s->t, s->seq, c);
    v->slow_end = 0;   /* the gap begins after the latest beat seen */
    /* back off the /proc reads while it stays late; its CPU time is counted
     * afresh from here (a busy thread that blocks becomes conditional) */
    gap = hbt_backoff(v, gap, changed, now);
    uint64_t per;
    uint32_t nb;
    (void)hbt_cpu_sample(h, s->seq, 0, &per, &nb);
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
            (j == c->self || base <= 0 || (double)since > hbt_limit(h))) {
            hbt_report(h, j, HBT_BHV_EXITED, s->t, s->seq, c);
            v->soft = 1;
        }
        return HBT_J_ALIVE;
    case HBT_FIN_EXIT_OK:
        /* from its latest beat, or from the exit where it waits in the runtime (a barrier,
         * the pool, the master's serial part): alive until then. (A run that ends with one
         * thread's walk of tasks: its teammate, 1.2 s in the closing barrier, was reported
         * exited from its last task.) */
        if (v->cur != HBT_BHV_EXITED)
            hbt_report(h, j, HBT_BHV_EXITED,
                       __atomic_load_n(&h->b.waiting, __ATOMIC_ACQUIRE) && now > s->t ? now : s->t, s->seq, c);
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
