/*
 * autobeat.c -- beats and waits recorded with no change to the program
 * (issue 15): HBTRACE_BEATS, the construct table and its NAME records, the
 * automatic BEAT and WAIT records, and the exported entry of the MPI
 * profiler. The record layout is docs/formats.md's ("Automatic beats and
 * waits"). Users: gomp.c (libgomp wrappers), ompt.c (LLVM's libomp),
 * libhbprof (through hbtrace_mpi_beat).
 *
 * Hot paths (hbt_auto_on, hbt_auto_beat_at, hbt_auto_wait_at, the lookup of
 * hbt_construct_id) take no lock and make no system call but the vDSO clock.
 * Automatic beats have their own per-thread sequence (auto_seq), so that the
 * API beats' seq stays 0, 1, 2, ...; they are not subject to the heart-rate
 * divisor, and feed the thread's line of the heart table only while the
 * thread has made no API beat (seq == 0), so that the online monitor judges
 * a program that does not beat by itself from its automatic beats.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "autobeat.h"   /* after internal.h: its inline record path */

/* ------------------------------------------------------------------ */
/* HBTRACE_BEATS                                                       */

int hbt_auto_mask = -1;

#define HBT_AUTO_ALL ((1 << HBT_SRC_API) | (1 << HBT_SRC_OPENMP) | (1 << HBT_SRC_MPI))

static int hbt_auto_warned;

/* Parse HBTRACE_BEATS (idempotent: racing threads compute the same mask;
 * the warning is written once). Unset or empty: all. HBTRACE_DISABLE: none. */
int hbt_auto_parse(void)
{
    int m;
    const char *v = hbt_getenv(HBT_ENV_HBTRACE_BEATS);
    if (hbt_env_flag(HBT_ENV_HBTRACE_DISABLE)) {
        m = 0;
    } else if (!v || !*v) {
        m = HBT_AUTO_ALL;
    } else {
        m = 0;
        const char *p = v;
        while (*p) {
            const char *e = strchr(p, ',');
            size_t n = e ? (size_t)(e - p) : strlen(p);
            /* trim blanks around the word */
            while (n && (*p == ' ' || *p == '\t')) {
                p++;
                n--;
            }
            while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
                n--;
            if (n == 3 && strncmp(p, "api", 3) == 0)
                m |= 1 << HBT_SRC_API;
            else if (n == 6 && strncmp(p, "openmp", 6) == 0)
                m |= 1 << HBT_SRC_OPENMP;
            else if (n == 3 && strncmp(p, "mpi", 3) == 0)
                m |= 1 << HBT_SRC_MPI;
            else if (n == 3 && strncmp(p, "all", 3) == 0)
                m |= HBT_AUTO_ALL;
            else if ((n == 4 && strncmp(p, "none", 4) == 0) || n == 0)
                ;
            else if (!__atomic_exchange_n(&hbt_auto_warned, 1, __ATOMIC_ACQ_REL))
                hbt_warn("hbtrace: %s=%s: unknown beat source '%.*s' ignored "
                         "(known: api, openmp, mpi)",
                         hbt_env_name(HBT_ENV_HBTRACE_BEATS), v, (int)(n > 64 ? 64 : n), p);
            if (!e)
                break;
            p = e + 1;
        }
    }
    __atomic_store_n(&hbt_auto_mask, m, __ATOMIC_RELAXED);
    return m;
}

int hbt_auto_enabled(int source)
{
    if (source < 0 || source > 15)
        return 0;
    return hbt_auto_on(source);
}

/* ------------------------------------------------------------------ */
/* the construct table                                                 */

/*
 * Open addressing on key = addr << 4 | kind (0 = empty), linear probing.
 * An entry is claimed by a CAS of its key, then gets its id (published with
 * release; a reader that finds the key with id 0 waits for it). `named`
 * holds the file generation whose file has the entry's NAME records
 * (| HBT_CT_WRITING while a thread writes them); a fork child starts a new
 * file and so a new generation.
 */
#define HBT_CT_SIZE    8192u              /* a power of 2 */
/* HBT_CT_MAX (autobeat.h): ids at most 3/4 of the table */
#define HBT_CT_WRITING 0x80000000u
#define HBT_CT_TEXT    256u               /* bytes of a construct name */

struct hbt_ct_entry {
    uint64_t key;
    uint32_t id;
    uint32_t named;
};

static struct hbt_ct_entry hbt_ct[HBT_CT_SIZE];
static uint32_t hbt_ct_count;            /* ids handed out */
static uint32_t hbt_ct_gen = 1;          /* file generation */
static int hbt_ct_fork_added;
static uint32_t hbt_ct_beats[HBT_CT_MAX + 1];   /* MPI beats per construct */
struct hbt_ct_unit hbt_ct_units[HBT_CT_MAX + 1];  /* loops' chunks (autobeat.h) */
static uint32_t hbt_regions_begun;       /* outermost parallel regions (hbt_region_instance) */

uint32_t hbt_region_instance(void)
{
    uint32_t n = __atomic_add_fetch(&hbt_regions_begun, 1u, __ATOMIC_RELAXED);
    return n ? n : __atomic_add_fetch(&hbt_regions_begun, 1u, __ATOMIC_RELAXED);
}

static const char *const hbt_ck_names[] = {
    [HBT_CK_PARALLEL] = "parallel", [HBT_CK_LOOP] = "loop",
    [HBT_CK_SECTIONS] = "sections", [HBT_CK_SINGLE] = "single",
    [HBT_CK_TASK] = "task",         [HBT_CK_BARRIER] = "barrier",
    [HBT_CK_CRITICAL] = "critical", [HBT_CK_ORDERED] = "ordered",
    [HBT_CK_COLLECTIVE] = "collective", [HBT_CK_CALL] = "call",
    [HBT_CK_FLUSH] = "flush",       [HBT_CK_LOCK] = "lock",
};

static void hbt_ct_after_fork_child(void)
{
    /* the child writes a file of its own: every name again, on first use */
    __atomic_add_fetch(&hbt_ct_gen, 1, __ATOMIC_RELEASE);
    if ((hbt_ct_gen & ~HBT_CT_WRITING) == 0)
        hbt_ct_gen = 1;
}

/* "<kind>\t<symbol>\t<object>+0x<offset>" as NAME fragments of name space 3. */
static void hbt_ct_write_name(uint32_t id, int kind, const void *addr, const char *symbol)
{
    char text[HBT_CT_TEXT + 64];
    const char *kname = (kind > 0 && kind <= HBT_CK_LOCK) ? hbt_ck_names[kind] : "?";
    Dl_info info;
    memset(&info, 0, sizeof info);
    int have = addr && dladdr(addr, &info) != 0;
    const char *sym = symbol ? symbol : (have && info.dli_sname ? info.dli_sname : "");
    int n;
    if (have && info.dli_fname) {
        const char *obj = strrchr(info.dli_fname, '/');
        obj = obj ? obj + 1 : info.dli_fname;
        n = snprintf(text, sizeof text, "%s\t%s\t%s+0x%lx", kname, sym, obj,
                     (unsigned long)((uintptr_t)addr - (uintptr_t)info.dli_fbase));
    } else {
        n = snprintf(text, sizeof text, "%s\t%s\t0x%lx", kname, sym, (unsigned long)(uintptr_t)addr);
    }
    if (n < 0)
        return;
    hbt_put_name(HBT_NAME_CONSTRUCT, id, text, HBT_CT_TEXT - 1, HBT_MODE_BEAT);
}

/* Make sure the current file has the entry's name before its first record. */
static HBT_COLD void hbt_ct_name(struct hbt_ct_entry *e, uint32_t gen, int kind,
                                 const void *addr, const char *symbol)
{
    for (int spins = 0; spins < 100000; spins++) {
        uint32_t cur = __atomic_load_n(&e->named, __ATOMIC_ACQUIRE);
        if (cur == gen)
            return;
        if (cur == (gen | HBT_CT_WRITING)) {
            sched_yield();   /* another thread writes it: microseconds */
            continue;
        }
        if (__atomic_compare_exchange_n(&e->named, &cur, gen | HBT_CT_WRITING, 0,
                                        __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            hbt_ct_write_name(e->id, kind, addr, symbol);
            __atomic_store_n(&e->named, gen, __ATOMIC_RELEASE);
            return;
        }
    }
}

uint32_t hbt_construct_id_named(int kind, const void *addr, const char *symbol)
{
    if (kind <= 0 || kind > 15 || hbt_state() == HBT_OFF)
        return 0;
    uint64_t key = ((uint64_t)(uintptr_t)addr << 4) | (uint64_t)kind;
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    uint32_t gen = __atomic_load_n(&hbt_ct_gen, __ATOMIC_ACQUIRE);
    for (uint32_t probe = 0, i = (uint32_t)(h >> 40) & (HBT_CT_SIZE - 1); probe < HBT_CT_SIZE;
         probe++, i = (i + 1) & (HBT_CT_SIZE - 1)) {
        struct hbt_ct_entry *e = &hbt_ct[i];
        uint64_t k = __atomic_load_n(&e->key, __ATOMIC_ACQUIRE);
        if (k == 0) {
            if (__atomic_load_n(&hbt_ct_count, __ATOMIC_RELAXED) >= HBT_CT_MAX)
                return 0;   /* full */
            if (!__atomic_compare_exchange_n(&e->key, &k, key, 0, __ATOMIC_ACQ_REL,
                                             __ATOMIC_ACQUIRE)) {
                if (k != key)
                    continue;   /* someone else's key took it: probe on */
            } else {
                uint32_t id = __atomic_add_fetch(&hbt_ct_count, 1, __ATOMIC_RELAXED);
                if (!__atomic_exchange_n(&hbt_ct_fork_added, 1, __ATOMIC_ACQ_REL))
                    hbt_fork_child_add(hbt_ct_after_fork_child);
                __atomic_store_n(&e->id, id, __ATOMIC_RELEASE);
            }
        } else if (k != key) {
            continue;
        }
        uint32_t id = __atomic_load_n(&e->id, __ATOMIC_ACQUIRE);
        for (int spins = 0; id == 0 && spins < 100000; spins++) {
            sched_yield();
            id = __atomic_load_n(&e->id, __ATOMIC_ACQUIRE);
        }
        if (id == 0 || id > HBT_CT_MAX)
            return 0;
        if (__builtin_expect(__atomic_load_n(&e->named, __ATOMIC_ACQUIRE) != gen, 0))
            hbt_ct_name(e, gen, kind, addr, symbol);
        return id;
    }
    return 0;
}

uint32_t hbt_construct_id(int kind, const void *addr)
{
    return hbt_construct_id_named(kind, addr, NULL);
}

/* ------------------------------------------------------------------ */
/* records                                                             */

void hbt_auto_beat_at(int source, int event, int32_t thread, uint32_t construct, int32_t iter,
                      uint64_t now)
{
    /* automatic beats do not feed the online monitor: a thread's API beats, which may
     * begin after its first automatic ones, are what the monitor judges, and two
     * counters in one heart line would read as a thread gone backwards */
    hbt_auto_beat_inline(source, event, thread, construct, iter, 0, now);
}

void hbt_auto_beat_aux_at(int source, int event, int32_t thread, uint32_t construct, int32_t iter,
                          uint32_t aux, uint64_t now)
{
    hbt_auto_beat_inline(source, event, thread, construct, iter, aux, now);
}

void hbt_auto_beat(int source, int event, int32_t thread, uint32_t construct, int32_t iter)
{
    if (hbt_auto_enabled(source))
        hbt_auto_beat_at(source, event, thread, construct, iter, 0);
}

void hbt_auto_wait_at(int source, int sync, int32_t thread, uint32_t construct,
                      uint64_t wait_ns, uint64_t now)
{
    uint64_t at = hbt_auto_record(HBT_REC_WAIT, (uint16_t)((source & 0xF) | (sync << HBT_EV_SHIFT)), 0,
                                  thread, construct, (int32_t)(uint32_t)(wait_ns >> 32), (uint32_t)wait_ns,
                                  now);
    if (__builtin_expect(hbt_inject_armed, 0))
        hbt_inject_waited(at ? at : now);
}

void hbt_spin_close(struct hbt_tls *t)
{
    uint64_t first = t->spin_first_ns, last = t->spin_last_ns;
    const void *ra = t->spin_ra;
    t->spin_on = 0;
    t->spin_ra = NULL;
    if (t->spin_marked) {
        /* as hbt_wait_mark(0), with the spin's own length: what it spun away is no work */
        struct hbt_beatline *b = t->beat;
        t->spin_marked = 0;
        if (b && b->waiting == HBT_SYNC_FLAG) {
            __atomic_store_n(&b->waited_us, b->waited_us + (uint32_t)((last - first + 999u) / 1000u),
                             __ATOMIC_RELEASE);
            __atomic_store_n(&b->waiting, (uint16_t)0, __ATOMIC_RELEASE);
        }
    }
    uint64_t work = 0;   /* slow: the work that ended in the spin, spun for after its wait */
    if (__builtin_expect(hbt_inject_armed, 0))
        work = hbt_inject_spun(t->spin_thread, last - first, t->spin_first_cpu, hbt_now_ns() - last);
    hbt_auto_wait_at(HBT_SRC_OPENMP, HBT_SYNC_FLAG, t->spin_thread, hbt_construct_id(HBT_CK_FLUSH, ra),
                     last - first, last);
    if (__builtin_expect(work != 0, 0))
        hbt_inject_after_spin(work);
}

void hbt_auto_wait(int source, int sync, int32_t thread, uint32_t construct, uint64_t wait_ns)
{
    if (hbt_auto_enabled(source))
        hbt_auto_wait_at(source, sync, thread, construct, wait_ns, 0);
}

/* ------------------------------------------------------------------ */
/* the MPI profiler's entry                                            */

HBT_EXPORT void hbtrace_mpi_beat(int event, const void *fn, const char *fn_name,
                                 uint64_t wait_ns)
{
    if (!hbt_auto_on(HBT_SRC_MPI))
        return;
    uint32_t slot;
    if (!hbt_self_slot(&slot))
        return;
    int kind = event == HBT_EV_COLLECTIVE ? HBT_CK_COLLECTIVE : HBT_CK_CALL;
    uint32_t id = hbt_construct_id_named(kind, fn, fn_name);
    struct hbt_tls *t = &hbt_tls;
    uint64_t now = hbt_now_ns();
    (void)t;
    /* iter: the process's count of this construct's beats (one thread of a
     * rank calls MPI, as a rule: then it is that thread's count) */
    uint32_t count = id ? __atomic_fetch_add(&hbt_ct_beats[id], 1, __ATOMIC_RELAXED) + 1 : 0;
    hbt_auto_beat_at(HBT_SRC_MPI, event, (int32_t)slot, id, (int32_t)count, now);
    if (wait_ns > 0)
        hbt_auto_wait_at(HBT_SRC_MPI, HBT_SYNC_COLLECTIVE, (int32_t)slot, id, wait_ns, now);
}

/* The calling thread's run-queue delay so far (ns it was runnable and waited for a
 * CPU: the second field of /proc/thread-self/schedstat), or 0 with *ok = 0 when it
 * cannot be read (no such file, no descriptor free). About 2 us; errno kept. */
uint64_t hbt_run_delay(int *ok)
{
    int saved = errno;
    uint64_t v = 0;
    *ok = 0;
    int fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        char buf[96];
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n > 0) {
            buf[n] = 0;
            const char *p = buf;
            while (*p >= '0' && *p <= '9')   /* the time on a CPU */
                p++;
            if (*p == ' ') {
                p++;
                const char *d = p;
                while (*p >= '0' && *p <= '9' && p - d < 20)
                    v = v * 10u + (uint64_t)(*p++ - '0');
                *ok = p > d && (*p == ' ' || *p == '\n' || *p == 0);
            }
        }
    }
    errno = saved;
    return *ok ? v : 0;
}

/* A sched record (HBT_REC_SCHED) for the span since the thread's last one, once it
 * lasts HBT_SCHED_NS; the first reading only starts the first span. */
static void hbt_sched_span(struct hbt_tls *t, uint64_t now, uint64_t cpu, uint64_t rq,
                           int32_t thread, uint32_t construct, uint16_t source)
{
    uint64_t at = t->sched_at_ns;
    if (at && (now <= at || cpu < t->sched_cpu_ns || rq < t->sched_rq_ns))
        at = 0;   /* a clock that went back (fork: another thread's values) starts again */
    /* spans of HBT_SCHED_NS, or a 512th of the thread's time since its first reading
     * if longer: a thread writes about 500 such records in its first 10 s, then a
     * few hundred more each time its age grows by e (3,500 in an hour) */
    uint64_t every = at ? (now - t->sched_first_ns) / HBT_SCHED_PARTS : 0;
    if (at && now - at < (every > HBT_SCHED_NS ? every : HBT_SCHED_NS))
        return;
    if (at) {
        uint32_t i = hbt_take_slot(t, HBT_MODE_BEAT);
        if (i == HBT_NO_SLOT)
            return;   /* the span goes on: the next record covers it */
        uint64_t span = (now - at) / 1000u, used = (cpu - t->sched_cpu_ns) / 1000u,
                 queued = (rq - t->sched_rq_ns) / 1000u;
        hbt_store(t, i, now, hbt_kindflags(HBT_REC_SCHED, source),
                  used > UINT32_MAX ? UINT32_MAX : (uint32_t)used, thread, (int32_t)construct,
                  span > INT32_MAX ? INT32_MAX : (int32_t)span,
                  queued > UINT32_MAX ? UINT32_MAX : (uint32_t)queued);
    }
    if (!at)
        t->sched_first_ns = now;
    t->sched_at_ns = now;
    t->sched_cpu_ns = cpu;
    t->sched_rq_ns = rq;
}

/* The cold path of hbt_cpu_track (internal.h): read the thread's CPU clock and its
 * run-queue delay; if a gap of HBT_CPU_GAP_NS or more ended at `now`, record the CPU
 * time it used in it, and the share of the gap it spent runnable, waiting for a CPU
 * (HBT_CPU_QUEUED). The record goes after the one that ended the gap (same clock value). */
void hbt_cpu_gap(struct hbt_tls *t, uint64_t last, uint64_t now, int32_t thread,
                 uint32_t construct, uint16_t source)
{
    t->mem_thread = thread;
    hbt_memory_track(t, now, thread, source, 0);
    uint64_t cpu = hb_thread_cpu_ns();
    if (!cpu) {
        t->cpu_at_ns = now;   /* try again later; no record without a reading */
        return;
    }
    uint64_t at = t->cpu_at_ns, before = t->cpu_ns;
    int rq_ok;
    uint64_t rq = hbt_run_delay(&rq_ok), rq_before = t->rq_ns;
    int rq_was = t->rq_known;
    t->cpu_at_ns = now;
    t->cpu_ns = cpu;
    t->rq_ns = rq;
    t->rq_known = (uint8_t)rq_ok;
    if (rq_ok)
        hbt_sched_span(t, now, cpu, rq, thread, construct, source);
    if (!at || !last || last < at || now - last < HBT_CPU_GAP_NS)
        return;
    /* CPU at the gap's start: the last reading, plus the time from it to the start
     * (the thread was at work, recording, then); never more than what it used in all */
    uint64_t start = before + (last - at);
    uint64_t used = cpu > start ? cpu - start : 0;
    uint64_t gap_us = (now - last) / 1000u;
    uint16_t flags = source;
    if (rq_ok && rq_was && rq >= rq_before) {
        /* waiting for a CPU from the last reading on, as the CPU time: the thread was at
         * work from that reading to the gap's start */
        uint64_t q = rq - rq_before, gap = now - last;
        if (q > gap)
            q = gap;
        flags |= (uint16_t)(HBT_CPU_QUEUED | ((q * HBT_CPU_QUEUED_MAX / gap) << HBT_CPU_QUEUED_SHIFT));
    }
    uint32_t i = hbt_take_slot(t, HBT_MODE_BEAT);
    if (i == HBT_NO_SLOT)
        return;
    hbt_store(t, i, now, hbt_kindflags(HBT_REC_CPU, flags), (uint32_t)used, thread,
              (int32_t)construct, gap_us > INT32_MAX ? INT32_MAX : (int32_t)gap_us,
              (uint32_t)(used >> 32));
}
