/*
 * probe.c -- timing probes (hbtrace_probe.h, seed 003): probe ids and names,
 * the per-thread tables, the clock, and the merge of the statistics into
 * HBT_REC_PROBE records.
 *
 * Ids. A call site's static struct hbt_probe_site gets its id on its first
 * use by any thread: that thread claims the site with a CAS of id1 from 0 to
 * HBT_SITE_BUSY | pid, takes the next id from a process-wide counter
 * (from 0), writes the name as HBT_REC_NAME fragments into its own chunk,
 * and only then publishes id1 = id + 1 (release). Every PROBE record of the
 * id is written later than its name, so a trace cut short at any point has
 * the name of every probe it has statistics of. Threads that meet a claimed
 * site wait (yield) until the id is published; the pid in the claim tells a
 * fork child that the claimant was a thread of its parent (the site is
 * claimed again). Ids at or beyond HBT_PROBE_MAX are not given: the site
 * becomes HBT_SITE_OVER and its uses are counted as dropped.
 *
 * Tables. A thread's statistics live in one table (HBT_PROBE_MAX entries of
 * 32 bytes, mmap'ed, pages touched only for the ids it uses), reached by
 * the initial-exec TLS pointer hbt_probe_stats, taken on the thread's first
 * probe use. Every table ever made is on one push-only list and never
 * unmapped (a fork child drops the copies of its parent's other threads);
 * its state says who may touch it:
 *   FREE     -> TAKING  a thread takes it (CAS), zeroes the entries the
 *                       previous owner may have used, fills in the owner
 *   TAKING   -> LIVE    counted into by its owner only
 *   LIVE     -> MERGING the owner at its thread end, or process exit for a
 *                       thread still running (CAS: one of them writes it)
 *   MERGING  -> FREE    written by its owner: reusable by a new thread
 *   MERGING  -> DONE    written at exit: never reused
 * An owner whose table is being merged at exit waits until that is done
 * before it leaves (its TLS must stay readable meanwhile). So memory stays
 * bounded by the number of threads alive at once, and a table is written
 * exactly once.
 *
 * Clock. Chosen once per program image, on the first id handed out (before
 * any id is published, so no probe use ever mixes two clocks): the TSC when
 * CPUID leaf 0x80000007 (EDX bit 8, invariant TSC) and the kernel's
 * /proc/cpuinfo flags (constant_tsc and nonstop_tsc) both say it is
 * invariant, else CLOCK_MONOTONIC; HBTRACE_PROBE_CLOCK=tsc|monotonic
 * overrides. CLOCK_MONOTONIC rather than CLOCK_MONOTONIC_RAW: it is the
 * clock of every other time stamp in the trace, it is served by the vDSO on
 * every kernel (MONOTONIC_RAW only since Linux 5.3), and its NTP slew (at
 * most 500 ppm) does not matter for durations. TSC ticks are converted to
 * nanoseconds at each merge against CLOCK_MONOTONIC, from the pair
 * (TSC, CLOCK_MONOTONIC) taken when the clock was chosen to a pair taken at
 * the merge (each pair read between two rdtsc, the narrowest of several);
 * a merge less than 2 ms after the choice first waits for 2 ms to pass
 * (on the development VM the rate from 2 ms came within 1.1e-5 of the rate
 * at exit). probe_tsc_hz in the metadata is the rate at process exit.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define HBT_HAVE_TSC 1
#else
#define HBT_HAVE_TSC 0
#endif

#include "hbtrace_probe.h"
#include "internal.h"

#define HBT_SITE_BUSY   0x80000000u   /* | pid of the claimant */
#define HBT_SITE_OVER   0x7FFFFFFFu   /* beyond HBT_PROBE_MAX: uses are dropped */
#define HBT_NAME_MAX    255u          /* bytes of a probe name */
#define HBT_CAL_MIN_NS  2000000u      /* shortest calibration interval */

_Static_assert(HBT_PROBE_MAX < HBT_SITE_OVER, "probe ids below the markers");
_Static_assert(HBT_PROBE_MAX <= 0xFFFFFFu, "probe ids fit in the 24 bits of a NAME aux");

enum { T_FREE = 0, T_TAKING = 1, T_LIVE = 2, T_MERGING = 3, T_DONE = 4 };

struct hbt_probe_table {
    struct hbt_probe_table *next;   /* the list of all tables */
    uint32_t state;                 /* T_*, atomic */
    int32_t tid;                    /* owner's OS thread id */
    struct hbt_tls *owner;          /* owner's tracer TLS (valid while it lives) */
    uint32_t slot;                  /* owner's thread_slot when it took the table */
    uint32_t reserved[9];
    struct hbt_probe_stat st[HBT_PROBE_MAX];
};
_Static_assert(offsetof(struct hbt_probe_table, st) == 64, "table header is one line");

/* ---- exported to the inline hot path ---- */
HBT_EXPORT __thread struct hbt_probe_stat *hbt_probe_stats
    __attribute__((tls_model("initial-exec")));
HBT_EXPORT __thread uint32_t hbt_probe_lim __attribute__((tls_model("initial-exec")));
HBT_EXPORT int hbt_probe_use_tsc;

/* ---- process-wide state ---- */
static struct {
    uint32_t n;                          /* atomic: ids handed out (may pass MAX) */
    struct hbt_probe_site *site[HBT_PROBE_MAX];
    uint8_t named[HBT_PROBE_MAX];        /* atomic: 0 no name in this file,
                                            1 being written, 2 written */
    struct hbt_probe_table *tables;      /* atomic: head of the list */
    int exiting;                         /* atomic: merged at exit, no new tables */
    int meta_done;                       /* atomic: probe_clock in this file */
    uint64_t dropped;                    /* atomic: uses beyond the cap */
    int dropped_warned;                  /* atomic */
    /* the clock, chosen once per image */
    int clock_state;                     /* atomic: 0 not yet, 1 being chosen, 2 chosen */
    int forced;                          /* HBTRACE_PROBE_CLOCK given */
    uint64_t cal_tsc, cal_ns;            /* the pair at the choice */
} P;

static void hbt_probe_after_fork_child(void);

/* ------------------------------------------------------------------ */
/* the clock                                                           */

#if HBT_HAVE_TSC
static inline uint64_t hbt_rdtsc(void)
{
    uint32_t lo, hi;
    __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi) : : "memory");
    return ((uint64_t)hi << 32) | lo;
}

/* CPUID leaf 0x80000007, EDX bit 8: invariant TSC. */
static int hbt_cpuid_invariant(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u)
        return 0;
    if (!__get_cpuid(0x80000007u, &a, &b, &c, &d))
        return 0;
    return (d >> 8) & 1u;
}

static int hbt_has_word(const char *line, const char *end, const char *w)
{
    size_t n = strlen(w);
    for (const char *p = line; p + n <= end; p++)
        if (memcmp(p, w, n) == 0 && (p == line || p[-1] == ' ' || p[-1] == '\t') &&
            (p + n == end || p[n] == ' ' || p[n] == '\n'))
            return 1;
    return 0;
}

/* The first "flags" line of /proc/cpuinfo has constant_tsc and nonstop_tsc. */
static int hbt_kernel_invariant(void)
{
    char buf[16384];
    int fd = open("/proc/cpuinfo", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    size_t n = 0;
    while (n < sizeof buf - 1) {
        ssize_t r = read(fd, buf + n, sizeof buf - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    for (char *p = buf; p && *p;) {
        char *nl = strchr(p, '\n');
        if (!nl)
            break;   /* an incomplete last line: not trusted */
        if (strncmp(p, "flags", 5) == 0 && (p[5] == '\t' || p[5] == ' ' || p[5] == ':')) {
            char *colon = memchr(p, ':', (size_t)(nl - p));
            if (!colon)
                return 0;
            return hbt_has_word(colon + 1, nl, "constant_tsc") &&
                   hbt_has_word(colon + 1, nl, "nonstop_tsc");
        }
        p = nl + 1;
    }
    return 0;
}

/* One (TSC, CLOCK_MONOTONIC) pair: the monotonic read between two rdtsc,
 * the narrowest bracket of a few tries, TSC taken at its middle. */
static void hbt_cal_pair(uint64_t *tsc, uint64_t *ns)
{
    uint64_t best = UINT64_MAX;
    for (int k = 0; k < 8; k++) {
        uint64_t a = hbt_rdtsc();
        uint64_t m = hbt_now_ns();
        uint64_t b = hbt_rdtsc();
        if (b - a < best) {
            best = b - a;
            *tsc = a + (b - a) / 2;
            *ns = m;
        }
    }
}
#endif /* HBT_HAVE_TSC */

static void hbt_choose_clock(void)
{
    int tsc = 0;
    const char *v = hbt_getenv(HBT_ENV_HBTRACE_PROBE_CLOCK);
    if (v && *v) {
        if (strcmp(v, "tsc") == 0) {
            P.forced = 1;
            tsc = HBT_HAVE_TSC;
            if (!HBT_HAVE_TSC)
                hbt_warn("hbtrace: %s=tsc: no TSC on this machine; "
                         "probes use CLOCK_MONOTONIC", hbt_env_name(HBT_ENV_HBTRACE_PROBE_CLOCK));
        } else if (strcmp(v, "monotonic") == 0) {
            P.forced = 1;
        } else {
            hbt_warn("hbtrace: %s must be tsc or monotonic; "
                     "probes use the automatic choice", hbt_env_name(HBT_ENV_HBTRACE_PROBE_CLOCK));
        }
    }
#if HBT_HAVE_TSC
    if (!P.forced)
        tsc = hbt_cpuid_invariant() && hbt_kernel_invariant();
    if (tsc)
        hbt_cal_pair(&P.cal_tsc, &P.cal_ns);
#endif
    __atomic_store_n(&hbt_probe_use_tsc, tsc, __ATOMIC_RELEASE);
}

/* The clock is chosen by the first thread that hands out an id; the others
 * wait for it (not pthread_once: a fork child must not inherit a choice in
 * progress by a thread it does not have). */
static void hbt_clock_once(void)
{
    int st = 0;
    if (__atomic_compare_exchange_n(&P.clock_state, &st, 1, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
        hbt_choose_clock();
        __atomic_store_n(&P.clock_state, 2, __ATOMIC_RELEASE);
        return;
    }
    while (__atomic_load_n(&P.clock_state, __ATOMIC_ACQUIRE) != 2)
        sched_yield();
}

/* The conversion now: ns = ticks * *num / *den. */
static void hbt_tsc_rate(uint64_t *num, uint64_t *den)
{
    *num = 1;
    *den = 1;
#if HBT_HAVE_TSC
    if (!hbt_probe_use_tsc)
        return;
    uint64_t tsc, ns;
    hbt_cal_pair(&tsc, &ns);
    if (ns - P.cal_ns < HBT_CAL_MIN_NS) {
        uint64_t wait = HBT_CAL_MIN_NS - (ns - P.cal_ns);
        struct timespec ts = { 0, (long)wait };
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
        hbt_cal_pair(&tsc, &ns);
    }
    if (tsc > P.cal_tsc && ns > P.cal_ns) {
        *num = ns - P.cal_ns;
        *den = tsc - P.cal_tsc;
    }
#endif
}

static uint64_t hbt_to_ns(uint64_t ticks, uint64_t num, uint64_t den)
{
    if (num == den)
        return ticks;
    unsigned __int128 x = (unsigned __int128)ticks * num / den;
    return x > UINT64_MAX ? UINT64_MAX : (uint64_t)x;
}

/* ------------------------------------------------------------------ */
/* records                                                             */

/* The name of probe `id` as NAME fragments: "<file>:<line>\t<label>". */
static void hbt_write_name(uint32_t id, const struct hbt_probe_site *s, unsigned mode)
{
    char text[HBT_NAME_MAX + 64];
    int n = snprintf(text, sizeof text, "%s:%d\t%s", s->file ? s->file : "?", (int)s->line,
                     s->label ? s->label : "");
    if (n < 0)
        return;
    hbt_put_name(HBT_NAME_PROBE, id, text, HBT_NAME_MAX, mode);
}

/* Make sure the current file has the name of probe `id` before any of its
 * statistics (a fork child's new file, or a name that was lost). */
static void hbt_ensure_name(uint32_t id, unsigned mode)
{
    uint8_t z = 0;
    if (__atomic_compare_exchange_n(&P.named[id], &z, 1, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
        struct hbt_probe_site *s = __atomic_load_n(&P.site[id], __ATOMIC_ACQUIRE);
        if (s)
            hbt_write_name(id, s, mode);
        __atomic_store_n(&P.named[id], 2, __ATOMIC_RELEASE);
        return;
    }
    /* another thread is writing it: it takes microseconds */
    for (int k = 0; k < 100000 && __atomic_load_n(&P.named[id], __ATOMIC_ACQUIRE) == 1; k++)
        sched_yield();
}

static void hbt_probe_meta(void)
{
    if (__atomic_exchange_n(&P.meta_done, 1, __ATOMIC_ACQ_REL))
        return;
    hbt_meta_append_once("probe_clock", hbt_probe_use_tsc ? "tsc" : "monotonic");
    if (P.forced)
        hbt_meta_append_once("probe_clock_forced", "1");
}

/* ------------------------------------------------------------------ */
/* ids                                                                 */

static HBT_COLD uint32_t hbt_site_assign(struct hbt_probe_site *s)
{
    uint32_t pid = (uint32_t)getpid() & 0x7FFFFFFFu;
    uint32_t me = HBT_SITE_BUSY | pid;
    for (;;) {
        uint32_t w = __atomic_load_n(&s->id1, __ATOMIC_ACQUIRE);
        if (w != 0 && !(w & HBT_SITE_BUSY))
            return w;   /* published (or over the cap) */
        /* free, or claimed by a thread of another process (the parent of
         * this fork child, which cannot finish here): claim it */
        if ((w == 0 || (w & 0x7FFFFFFFu) != pid) &&
            __atomic_compare_exchange_n(&s->id1, &w, me, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE))
            break;
        if (w == me)
            sched_yield();   /* another thread of ours is naming it */
    }
    hbt_clock_once();
    uint32_t id = __atomic_fetch_add(&P.n, 1, __ATOMIC_ACQ_REL);
    if (id >= HBT_PROBE_MAX) {
        __atomic_store_n(&s->id1, HBT_SITE_OVER, __ATOMIC_RELEASE);
        return HBT_SITE_OVER;
    }
    __atomic_store_n(&P.site[id], s, __ATOMIC_RELEASE);
    hbt_probe_meta();
    __atomic_store_n(&P.named[id], 1, __ATOMIC_RELEASE);
    hbt_write_name(id, s, HBT_MODE_API);
    __atomic_store_n(&P.named[id], 2, __ATOMIC_RELEASE);
    __atomic_store_n(&s->id1, id + 1, __ATOMIC_RELEASE);
    return id + 1;
}

static void hbt_count_dropped(void)
{
    __atomic_fetch_add(&P.dropped, 1, __ATOMIC_RELAXED);
    if (!__atomic_exchange_n(&P.dropped_warned, 1, __ATOMIC_ACQ_REL))
        hbt_warn("hbtrace: more than %u timing probes; uses of the others are not "
                 "counted (metadata probe_dropped)", HBT_PROBE_MAX);
}

/* ------------------------------------------------------------------ */
/* tables                                                              */

static struct hbt_probe_table *hbt_table_of(struct hbt_probe_stat *st)
{
    return (struct hbt_probe_table *)((char *)st - offsetof(struct hbt_probe_table, st));
}

static HBT_COLD struct hbt_probe_stat *hbt_table_take(struct hbt_tls *t)
{
    if (t->end_recorded || t->internal || t->monitor ||
        __atomic_load_n(&P.exiting, __ATOMIC_ACQUIRE))
        return NULL;
    uint32_t slot;
    if (!hbt_self_slot(&slot))   /* opens the file, registers the thread */
        return NULL;
    struct hbt_probe_table *tab = NULL;
    for (struct hbt_probe_table *x = __atomic_load_n(&P.tables, __ATOMIC_ACQUIRE); x;
         x = x->next) {
        uint32_t f = T_FREE;
        if (__atomic_load_n(&x->state, __ATOMIC_RELAXED) == T_FREE &&
            __atomic_compare_exchange_n(&x->state, &f, T_TAKING, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
            tab = x;
            /* the previous owner used ids below the count of today */
            uint32_t n = __atomic_load_n(&P.n, __ATOMIC_ACQUIRE);
            if (n > HBT_PROBE_MAX)
                n = HBT_PROBE_MAX;
            memset(tab->st, 0, (size_t)n * sizeof tab->st[0]);
            break;
        }
    }
    if (!tab) {
        void *m = mmap(NULL, sizeof *tab, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return NULL;
        tab = m;
        tab->state = T_TAKING;
        struct hbt_probe_table *head = __atomic_load_n(&P.tables, __ATOMIC_ACQUIRE);
        do
            tab->next = head;
        while (!__atomic_compare_exchange_n(&P.tables, &head, tab, 1, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE));
    }
    tab->owner = t;
    tab->tid = (int32_t)syscall(SYS_gettid);
    tab->slot = slot;
    __atomic_store_n(&tab->state, T_LIVE, __ATOMIC_RELEASE);
    hbt_probe_stats = tab->st;
    hbt_probe_lim = HBT_PROBE_MAX;
    return tab->st;
}

/* Write the statistics of table `tab` as PROBE records of thread
 * (user, slot), names first. */
static void hbt_table_write(struct hbt_probe_table *tab, int32_t user, uint32_t slot,
                            unsigned mode)
{
    uint32_t n = __atomic_load_n(&P.n, __ATOMIC_ACQUIRE);
    if (n > HBT_PROBE_MAX)
        n = HBT_PROBE_MAX;
    uint64_t num = 1, den = 1;
    int have_rate = 0;
    for (uint32_t id = 0; id < n; id++) {
        struct hbt_probe_stat s;
        s.count = __atomic_load_n(&tab->st[id].count, __ATOMIC_RELAXED);
        if (!s.count)
            continue;
        s.total = __atomic_load_n(&tab->st[id].total, __ATOMIC_RELAXED);
        s.nmin = __atomic_load_n(&tab->st[id].nmin, __ATOMIC_RELAXED);
        s.max = __atomic_load_n(&tab->st[id].max, __ATOMIC_RELAXED);
        if (!have_rate) {
            hbt_tsc_rate(&num, &den);
            have_rate = 1;
        }
        hbt_ensure_name(id, mode);
        uint64_t v[4] = { s.count, hbt_to_ns(s.total, num, den),
                          hbt_to_ns(~s.nmin, num, den), hbt_to_ns(s.max, num, den) };
        for (uint16_t k = 0; k < 4; k++)   /* a record that finds no room is counted lost */
            (void)hbt_put_plain(HBT_REC_PROBE, (uint16_t)(HBT_PSTAT_COUNT + k), id, user,
                                (int32_t)slot, 0, 0, v[k], mode);
    }
}

/* Thread end (lifecycle.c), before THREAD_END: this thread's statistics. */
void hbt_probe_thread_end(struct hbt_tls *t)
{
    struct hbt_probe_stat *st = hbt_probe_stats;
    if (!st)
        return;
    hbt_probe_lim = 0;
    hbt_probe_stats = NULL;   /* later uses (TLS destructors) count nothing */
    struct hbt_probe_table *tab = hbt_table_of(st);
    uint32_t live = T_LIVE;
    if (__atomic_compare_exchange_n(&tab->state, &live, T_MERGING, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
        if (hbt_state() == HBT_ON && getpid() == hbt_g.pid)
            hbt_table_write(tab, t->user_set ? t->user_thread : -1, t->thread_slot,
                            HBT_MODE_END);
        __atomic_store_n(&tab->state, T_FREE, __ATOMIC_RELEASE);
        return;
    }
    /* process exit is writing it: stay (and keep this TLS readable) until
     * it is done */
    for (int k = 0; k < 200000 && __atomic_load_n(&tab->state, __ATOMIC_ACQUIRE) == T_MERGING; k++)
        sched_yield();
}

/* Process exit (lifecycle.c): the statistics of every thread still running,
 * the calling one included, then the clock rate and the drop count. */
void hbt_probe_at_exit(void)
{
    if (hbt_state() != HBT_ON || getpid() != hbt_g.pid)
        return;
    __atomic_store_n(&P.exiting, 1, __ATOMIC_RELEASE);
    struct hbt_tls *self = &hbt_tls;
    pid_t pid = getpid();
    for (struct hbt_probe_table *x = __atomic_load_n(&P.tables, __ATOMIC_ACQUIRE); x;
         x = x->next) {
        uint32_t live = T_LIVE;
        if (!__atomic_compare_exchange_n(&x->state, &live, T_MERGING, 0, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE))
            continue;
        int32_t user = -1;
        uint32_t slot = x->slot;
        if (x->owner == self) {
            user = self->user_set ? self->user_thread : -1;
            slot = self->thread_slot;
        } else if (syscall(SYS_tgkill, pid, x->tid, 0) == 0) {
            /* alive: if it reaches its end it waits for us (see above) */
            struct hbt_tls *o = x->owner;
            if (__atomic_load_n(&o->user_set, __ATOMIC_RELAXED))
                user = __atomic_load_n(&o->user_thread, __ATOMIC_RELAXED);
        }
        hbt_table_write(x, user, slot, HBT_MODE_END);
        __atomic_store_n(&x->state, T_DONE, __ATOMIC_RELEASE);
    }
    /* threads writing their own at this moment: let them finish (briefly),
     * so that the process does not end in the middle of their records */
    uint64_t until = hbt_now_ns() + 100000000u;
    for (struct hbt_probe_table *x = __atomic_load_n(&P.tables, __ATOMIC_ACQUIRE); x;
         x = x->next)
        while (__atomic_load_n(&x->state, __ATOMIC_ACQUIRE) == T_MERGING &&
               hbt_now_ns() < until)
            sched_yield();
    if (__atomic_load_n(&P.n, __ATOMIC_ACQUIRE) > 0) {
        char num[32];
        if (hbt_probe_use_tsc) {
            uint64_t a, b;
            hbt_tsc_rate(&a, &b);
            snprintf(num, sizeof num, "%.0f", (double)b * 1e9 / (double)a);
            hbt_meta_append_once("probe_tsc_hz", num);
        }
        uint64_t d = __atomic_load_n(&P.dropped, __ATOMIC_RELAXED);
        if (d) {
            snprintf(num, sizeof num, "%llu", (unsigned long long)d);
            hbt_meta_append_once("probe_dropped", num);
        }
    }
}

/* fork child (registered with the first id), in its only thread: the
 * parent's other threads are gone, and the child writes a new file (names
 * and metadata again). The forking thread's table is kept, zeroed, for its
 * next probe use. */
static void hbt_probe_after_fork_child(void)
{
    struct hbt_probe_stat *st = hbt_probe_stats;
    struct hbt_probe_table *own = st ? hbt_table_of(st) : NULL;
    struct hbt_probe_table *x = __atomic_load_n(&P.tables, __ATOMIC_RELAXED);
    while (x) {
        struct hbt_probe_table *next = x->next;
        if (x != own)
            munmap(x, sizeof *x);
        x = next;
    }
    if (own) {
        own->next = NULL;
        uint32_t n = __atomic_load_n(&P.n, __ATOMIC_RELAXED);
        memset(own->st, 0, (size_t)(n < HBT_PROBE_MAX ? n : HBT_PROBE_MAX) * sizeof own->st[0]);
        own->state = T_FREE;
    }
    P.tables = own;
    if (P.clock_state == 1)
        P.clock_state = 0;   /* its chooser was a thread of the parent */
    hbt_probe_lim = 0;
    hbt_probe_stats = NULL;   /* the next use takes it again (and opens the file) */
    memset(P.named, 0, sizeof P.named);
    P.exiting = 0;
    P.meta_done = 0;
    P.dropped = 0;
    P.dropped_warned = 0;
}

/* ------------------------------------------------------------------ */
/* the public slow path and the out-of-line hot path                   */

HBT_EXPORT struct hbt_probe_stat *hbt_probe_slow(struct hbt_probe_site *site)
{
    uint32_t id1 = __atomic_load_n(&site->id1, __ATOMIC_ACQUIRE);
    if (id1 == HBT_SITE_OVER) {
        hbt_count_dropped();
        return NULL;
    }
    if (id1 == 0 || (id1 & HBT_SITE_BUSY)) {
        if (!hbt_ensure_open())
            return NULL;
        hbt_fork_child_add(hbt_probe_after_fork_child);   /* before any state */
        id1 = hbt_site_assign(site);
        if (id1 == HBT_SITE_OVER) {
            hbt_count_dropped();
            return NULL;
        }
    }
    struct hbt_probe_stat *st = hbt_probe_stats;
    if (!st)
        st = hbt_table_take(&hbt_tls);
    if (!st)
        return NULL;
    if (__atomic_load_n(&P.meta_done, __ATOMIC_ACQUIRE) == 0)
        hbt_probe_meta();   /* a fork child's new file */
    return st + (id1 - 1u);
}

HBT_EXPORT hbt_probe_t hbt_probe_begin_call(struct hbt_probe_site *site)
{
    return hbt_probe_begin(site);
}

HBT_EXPORT void hbt_probe_end_call(hbt_probe_t p)
{
    hbt_probe_end(p);
}

HBT_EXPORT uint64_t hbt_probe_monotonic_ns(void)
{
    return hbt_now_ns();
}
