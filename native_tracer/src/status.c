/*
 * status.c -- the machine-status sampler (seed 003): every period, one
 * HBT_REC_STATUS record per metric (HBT_STAT_*, hbtrace_format.h) with the
 * machine's CPU time split, memory, swap and network byte counters and this
 * process's CPU time and resident set; the machine's capabilities once as
 * metadata.
 *
 * HBTRACE_STATUS=1 samples once a second, HBTRACE_STATUS=<seconds> every
 * that many seconds (0.1 .. 3600); 0 or unset: off; anything else: one
 * warning, off. HBTRACE_STATUS_NET_DEV=<file> reads that file instead of
 * /proc/net/dev (for tests of the wrap handling). Read when the trace file opens (hbt_status_config, with
 * g.lock held), which starts the sampler thread: made with the real
 * pthread_create (no lifecycle records), detached, every signal blocked,
 * named "hbt-status". It waits for the file to be open, takes the first
 * sample at once, then one every period. It never keeps the process alive:
 * every 250 ms at most it looks whether the main thread is gone and no
 * program thread is left (threads named hbt-* are the tracer's), and
 * returns if so.
 *
 * Samples. Sample 0 is taken at start, sample n about n periods later, and
 * a last one at process exit (exit, return from main, _exit) by the exiting
 * thread, so every process that writes samples has at least two. A process
 * that is a bystander at exit (one thread, nothing but lifecycle records:
 * a shell child of a traced script) and ended before its second sample was
 * due writes none (its file is removed as without the sampler): sample 0 is
 * kept in memory until the second sample or the exit shows that the process
 * is not one. A process killed before that (SIGKILL, a fatal signal) has no
 * samples.
 *
 * Values (t_ns = when the sample was taken, CLOCK_MONOTONIC):
 *   CPU_*      /proc/stat "cpu" line, ticks of sysconf(_SC_CLK_TCK) summed
 *              over all CPUs, cumulative since the first sample (that one
 *              is 0): the sum of the increments between samples, an
 *              increment that would be negative counting 0 (iowait and idle
 *              are known to step back on some kernels);
 *   MEM_*, SWAP_*  /proc/meminfo, KiB, as read (MemAvailable, else
 *              MemFree + Buffers + Cached);
 *   NET_*      /proc/net/dev of the process's network namespace (read
 *              through /proc/thread-self: /proc/self is the main thread,
 *              whose files are empty once it called pthread_exit), every
 *              interface but lo, bytes, cumulative since the first sample:
 *              per interface the increment since its previous reading; a
 *              counter that went down wrapped at 2^32 when both readings are
 *              below 2^32 (32-bit kernel counters), else it was reset and
 *              the increment counts 0; an interface seen for the first time
 *              after sample 0 (or again after it vanished) starts at its
 *              reading then (counts 0 until its next reading);
 *   PROC_USER_US, PROC_SYS_US  getrusage(RUSAGE_SELF), microseconds since
 *              the process started (not since the first sample);
 *   PROC_RSS_KB  /proc/thread-self/statm resident pages, KiB.
 * A metric that cannot be read in a sample is left out of that sample.
 *
 * Metadata, once per file, when the first sample is written: machine_cores
 * (online CPUs), machine_model (/proc/cpuinfo "model name", or the first of
 * "Processor", "cpu model", "Hardware"), machine_mem_kb (MemTotal),
 * status_period_s, status_clk_tck.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
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

#define HBT_NMETRIC      14u
#define HBT_MAX_IFACES   128
#define HBT_BUF          65536
#define HBT_LIVE_CHECK_NS 250000000ull
#define HBT_STATUS_STACK (256u * 1024u)
#define HBT_SEC_NS       1000000000ull

_Static_assert(HBT_STAT_PROC_RSS_KB + 1 == HBT_NMETRIC, "every metric has a slot");

struct hbt_sample {
    uint64_t t_ns;
    uint32_t have;                 /* bit m: metric m was read */
    uint64_t v[HBT_NMETRIC];
};

struct hbt_iface {
    char name[32];
    uint64_t rx, tx;               /* last readings */
    int seen;
};

static struct {
    /* configuration (set under g.lock at file open) */
    int on;                        /* this process samples */
    double period_s;
    uint64_t period_ns;
    pid_t pid;
    int warned;                    /* per image: bad HBTRACE_STATUS told once */
    int started;                   /* atomic: thread started in this process */
    int stop;                      /* atomic: the exit sample was taken */
    pid_t tid;                     /* atomic: the sampler thread */

    pthread_mutex_t lock;          /* everything below */
    uint32_t written;              /* samples written */
    int have_first;                /* sample 0 taken, not written yet */
    struct hbt_sample first;
    int have_prev;                 /* baselines of the counters */
    uint64_t cpu_prev[5], cpu_acc[5];
    struct hbt_iface iface[HBT_MAX_IFACES];
    int niface;
    uint64_t rx_acc, tx_acc;
    int meta_done;
    char net_dev[256];             /* /proc/net/dev, or HBTRACE_STATUS_NET_DEV */
    char buf[HBT_BUF];
} S = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* ------------------------------------------------------------------ */
/* reading /proc                                                       */

static ssize_t hbt_read_all(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t n = 0;
    while (n < size - 1) {
        ssize_t r = read(fd, buf + n, size - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    return (ssize_t)n;
}

/* /proc/thread-self/<name> (Linux 3.17), else /proc/self/<name>. */
static ssize_t hbt_read_self(const char *name, char *buf, size_t size)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/thread-self/%s", name);
    ssize_t n = hbt_read_all(path, buf, size);
    if (n > 0)
        return n;
    snprintf(path, sizeof path, "/proc/self/%s", name);
    return hbt_read_all(path, buf, size);
}

static const char *hbt_skip_space(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

/* Next unsigned number at p (spaces first); 0 if there is none. */
static int hbt_next_u64(const char **pp, uint64_t *out)
{
    const char *p = hbt_skip_space(*pp);
    if (*p < '0' || *p > '9')
        return 0;
    char *end;
    *out = strtoull(p, &end, 10);
    *pp = end;
    return 1;
}

/* The value of "Key:   123 kB" in /proc/meminfo text. */
static int hbt_meminfo(const char *text, const char *key, uint64_t *out)
{
    size_t k = strlen(key);
    for (const char *p = text; p && *p;) {
        if (strncmp(p, key, k) == 0 && p[k] == ':') {
            const char *q = p + k + 1;
            return hbt_next_u64(&q, out);
        }
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    return 0;
}

static void hbt_set(struct hbt_sample *s, unsigned m, uint64_t v)
{
    s->v[m] = v;
    s->have |= 1u << m;
}

/* Increment of a counter from prev to cur, with the wrap rule of
 * /proc/net/dev (see the top of the file). */
static uint64_t hbt_net_delta(uint64_t prev, uint64_t cur)
{
    if (cur >= prev)
        return cur - prev;
    if (prev < (1ull << 32) && cur < (1ull << 32))
        return cur + (1ull << 32) - prev;
    return 0;
}

static void hbt_sample_cpu(struct hbt_sample *s)
{
    if (hbt_read_all("/proc/stat", S.buf, sizeof S.buf) <= 0)
        return;
    uint64_t f[8];   /* user nice system idle iowait irq softirq steal */
    if (!hbt_proc_stat_cpu(S.buf, f))
        return;
    uint64_t cur[5] = { f[0] + f[1], f[2] + f[5] + f[6], f[3], f[4], f[7] };
    for (int k = 0; k < 5; k++) {
        if (S.have_prev) {
            if (cur[k] > S.cpu_prev[k])
                S.cpu_acc[k] += cur[k] - S.cpu_prev[k];
        } else {
            S.cpu_acc[k] = 0;
        }
        S.cpu_prev[k] = cur[k];
    }
    for (int k = 0; k < 5; k++)
        hbt_set(s, HBT_STAT_CPU_USER + (unsigned)k, S.cpu_acc[k]);
}

static void hbt_sample_mem(struct hbt_sample *s, uint64_t *total_kb)
{
    if (hbt_read_all("/proc/meminfo", S.buf, sizeof S.buf) <= 0)
        return;
    uint64_t v, free_kb, buffers, cached;
    if (hbt_meminfo(S.buf, "MemTotal", &v)) {
        hbt_set(s, HBT_STAT_MEM_TOTAL_KB, v);
        if (total_kb)
            *total_kb = v;
    }
    if (hbt_meminfo(S.buf, "MemAvailable", &v))
        hbt_set(s, HBT_STAT_MEM_AVAIL_KB, v);
    else if (hbt_meminfo(S.buf, "MemFree", &free_kb) && hbt_meminfo(S.buf, "Buffers", &buffers) &&
             hbt_meminfo(S.buf, "Cached", &cached))
        hbt_set(s, HBT_STAT_MEM_AVAIL_KB, free_kb + buffers + cached);
    if (hbt_meminfo(S.buf, "SwapTotal", &v))
        hbt_set(s, HBT_STAT_SWAP_TOTAL_KB, v);
    if (hbt_meminfo(S.buf, "SwapFree", &v))
        hbt_set(s, HBT_STAT_SWAP_FREE_KB, v);
}

static struct hbt_iface *hbt_iface_find(const char *name, size_t len)
{
    for (int k = 0; k < S.niface; k++)
        if (strlen(S.iface[k].name) == len && memcmp(S.iface[k].name, name, len) == 0)
            return &S.iface[k];
    return NULL;
}

static void hbt_sample_net(struct hbt_sample *s)
{
    /* thread-self: /proc/self is the main thread, whose files are empty
     * once it has called pthread_exit */
    if ((S.net_dev[0] ? hbt_read_all(S.net_dev, S.buf, sizeof S.buf)
                      : hbt_read_self("net/dev", S.buf, sizeof S.buf)) <= 0)
        return;
    for (int k = 0; k < S.niface; k++)
        S.iface[k].seen = 0;
    const char *p = strchr(S.buf, '\n');          /* two header lines */
    p = p ? strchr(p + 1, '\n') : NULL;
    while (p && *p) {
        p++;
        const char *nl = strchr(p, '\n');
        if (!nl)
            break;   /* a line cut by the buffer: not trusted */
        const char *colon = memchr(p, ':', (size_t)(nl - p));
        if (colon) {
            const char *name = hbt_skip_space(p);
            size_t len = (size_t)(colon - name);
            const char *q = colon + 1;
            uint64_t f[9];
            int n = 0;
            while (n < 9 && hbt_next_u64(&q, &f[n]))
                n++;
            if (n == 9 && len > 0 && len < sizeof S.iface[0].name &&
                !(len == 2 && memcmp(name, "lo", 2) == 0)) {
                struct hbt_iface *x = hbt_iface_find(name, len);
                if (x) {
                    S.rx_acc += hbt_net_delta(x->rx, f[0]);
                    S.tx_acc += hbt_net_delta(x->tx, f[8]);
                } else if (S.niface < HBT_MAX_IFACES) {
                    x = &S.iface[S.niface++];
                    memcpy(x->name, name, len);
                    x->name[len] = '\0';
                }
                if (x) {
                    x->rx = f[0];
                    x->tx = f[8];
                    x->seen = 1;
                }
            }
        }
        p = nl;
    }
    /* forget interfaces that are gone: one that comes back starts afresh */
    int w = 0;
    for (int k = 0; k < S.niface; k++)
        if (S.iface[k].seen)
            S.iface[w++] = S.iface[k];
    S.niface = w;
    hbt_set(s, HBT_STAT_NET_RX_BYTES, S.rx_acc);
    hbt_set(s, HBT_STAT_NET_TX_BYTES, S.tx_acc);
}

static void hbt_sample_proc(struct hbt_sample *s)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        hbt_set(s, HBT_STAT_PROC_USER_US,
                (uint64_t)ru.ru_utime.tv_sec * 1000000u + (uint64_t)ru.ru_utime.tv_usec);
        hbt_set(s, HBT_STAT_PROC_SYS_US,
                (uint64_t)ru.ru_stime.tv_sec * 1000000u + (uint64_t)ru.ru_stime.tv_usec);
    }
    char buf[256];
    if (hbt_read_self("statm", buf, sizeof buf) > 0) {
        const char *p = buf;
        uint64_t size, rss;
        long page = sysconf(_SC_PAGESIZE);
        if (hbt_next_u64(&p, &size) && hbt_next_u64(&p, &rss) && page > 0)
            hbt_set(s, HBT_STAT_PROC_RSS_KB, rss * (uint64_t)page / 1024u);
    }
}

/* One sample (S.lock held): the counters move on. */
static void hbt_sample_take(struct hbt_sample *s)
{
    memset(s, 0, sizeof *s);
    s->t_ns = hbt_now_ns();
    hbt_sample_cpu(s);
    hbt_sample_mem(s, NULL);
    hbt_sample_net(s);
    hbt_sample_proc(s);
    S.have_prev = 1;
}

/* ------------------------------------------------------------------ */
/* writing                                                             */

/* /proc/cpuinfo: the first "model name" (or the ARM equivalents). */
static void hbt_cpu_model(char *out, size_t size)
{
    static const char *const keys[] = { "model name", "Processor", "cpu model", "Hardware" };
    snprintf(out, size, "unknown");
    if (hbt_read_all("/proc/cpuinfo", S.buf, 16384 < sizeof S.buf ? 16384 : sizeof S.buf) <= 0)
        return;
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        size_t kl = strlen(keys[k]);
        for (const char *p = S.buf; p && *p;) {
            const char *nl = strchr(p, '\n');
            if (!nl)
                break;
            if (strncmp(p, keys[k], kl) == 0 && (p[kl] == '\t' || p[kl] == ' ' || p[kl] == ':')) {
                const char *c = memchr(p, ':', (size_t)(nl - p));
                if (c) {
                    c = hbt_skip_space(c + 1);
                    size_t n = (size_t)(nl - c);
                    while (n > 0 && (c[n - 1] == ' ' || c[n - 1] == '\t'))
                        n--;
                    if (n >= size)
                        n = size - 1;
                    if (n > 0) {
                        memcpy(out, c, n);
                        out[n] = '\0';
                        return;
                    }
                }
            }
            p = nl + 1;
        }
    }
}

static void hbt_status_meta(void)
{
    if (S.meta_done)
        return;
    S.meta_done = 1;
    char v[96];
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    snprintf(v, sizeof v, "%ld", cores);
    hbt_meta_append_once("machine_cores", v);
    hbt_cpu_model(v, 64);
    hbt_meta_append_once("machine_model", v);
    uint64_t total = 0;
    struct hbt_sample tmp;
    memset(&tmp, 0, sizeof tmp);
    hbt_sample_mem(&tmp, &total);
    snprintf(v, sizeof v, "%llu", (unsigned long long)total);
    hbt_meta_append_once("machine_mem_kb", v);
    snprintf(v, sizeof v, "%g", S.period_s);
    hbt_meta_append_once("status_period_s", v);
    snprintf(v, sizeof v, "%ld", sysconf(_SC_CLK_TCK));
    hbt_meta_append_once("status_clk_tck", v);
}

/* Write sample s as number S.written (S.lock held). */
static void hbt_sample_write(const struct hbt_sample *s, unsigned mode)
{
    uint32_t number = S.written++;
    for (unsigned m = 0; m < HBT_NMETRIC; m++)
        if (s->have & (1u << m))
            (void)hbt_put_plain(HBT_REC_STATUS, (uint16_t)m, (uint32_t)s->v[m], -1,
                                (int32_t)number, 0, (uint32_t)(s->v[m] >> 32), s->t_ns, mode);
}

/* Before the first sample is written: metadata, then the kept sample 0
 * (taken now if it never was). S.lock held. */
static void hbt_write_pending(unsigned mode)
{
    if (S.written)
        return;
    hbt_status_meta();
    if (!S.have_first)
        hbt_sample_take(&S.first);
    S.have_first = 0;
    hbt_sample_write(&S.first, mode);
}

/* A process that would leave no file without us (see core.c). */
static int hbt_is_bystander(void)
{
    if (__atomic_load_n(&hbt_g.nthreads, __ATOMIC_ACQUIRE) > 1 ||
        !hbt_g.hdr || __atomic_load_n(&hbt_g.hdr->lost_records, __ATOMIC_RELAXED) != 0)
        return 0;
    return hbt_chunks_are_bystander(0);
}

/* ------------------------------------------------------------------ */
/* the sampler thread                                                  */

static void *hbt_status_main(void *unused)
{
    (void)unused;
    struct hbt_tls *t = &hbt_tls;
    pid_t self = (pid_t)syscall(SYS_gettid);
    __atomic_store_n(&S.tid, self, __ATOMIC_RELEASE);
    t->next_check = UINT64_MAX;
    /* the file is being opened under g.lock: once we get it, it is done */
    if (!hbt_lock_for_ms(10000))
        return NULL;
    hbt_unlock();
    if (hbt_state() != HBT_ON || getpid() != S.pid)
        return NULL;

    pthread_mutex_lock(&S.lock);
    if (!__atomic_load_n(&S.stop, __ATOMIC_ACQUIRE) && !S.have_first && !S.written) {
        hbt_sample_take(&S.first);
        S.have_first = 1;
    }
    uint64_t next = S.first.t_ns + S.period_ns;
    pthread_mutex_unlock(&S.lock);

    for (;;) {
        uint64_t now = hbt_now_ns();
        uint64_t wake = next < now + HBT_LIVE_CHECK_NS ? next : now + HBT_LIVE_CHECK_NS;
        (void)hbt_sleep_until(wake, NULL, 0);
        if (__atomic_load_n(&S.stop, __ATOMIC_ACQUIRE) || hbt_state() != HBT_ON)
            break;
        now = hbt_now_ns();
        if (now >= next) {
            pthread_mutex_lock(&S.lock);
            if (!__atomic_load_n(&S.stop, __ATOMIC_ACQUIRE)) {
                hbt_register_quiet(t);
                hbt_write_pending(HBT_M_GROW | HBT_M_LOST);
                struct hbt_sample s;
                hbt_sample_take(&s);
                hbt_sample_write(&s, HBT_M_GROW | HBT_M_LOST);
            }
            pthread_mutex_unlock(&S.lock);
            next += S.period_ns;
            if (next <= now)
                next = now + S.period_ns;   /* we were held up: no catching up */
        }
        if (hbt_orphaned())
            break;   /* do not keep the process alive */
    }
    return NULL;   /* S.tid stays: if we are the last thread, we run the exit */
}

static void hbt_status_start(void)
{
    if (__atomic_exchange_n(&S.started, 1, __ATOMIC_ACQ_REL))
        return;
    int rc = hbt_bg_start(NULL, "hbt-status", HBT_STATUS_STACK, 0, hbt_status_main, NULL);
    if (rc != 0)
        hbt_warn("hbtrace: cannot start the status sampler thread: %s; only the "
                 "samples at start and exit are taken", strerror(rc));
}

/* ------------------------------------------------------------------ */
/* hooks                                                               */

static void hbt_status_after_fork_child(void);

/* The trace file is being opened (g.lock held, state not yet HBT_ON). */
void hbt_status_config(void)
{
    S.on = 0;
    hbt_fork_child_add(hbt_status_after_fork_child);
    const char *v = hbt_getenv(HBT_ENV_HBTRACE_STATUS);
    if (!v || !*v || strcmp(v, "0") == 0)
        return;
    char *end;
    errno = 0;
    double p = strtod(v, &end);
    while (*end == ' ')
        end++;
    if (errno || end == v || *end || !isfinite(p) || p < 0.1 || p > 3600.0) {
        if (!S.warned) {
            S.warned = 1;
            hbt_warn("hbtrace: %s=%.64s is not a period in seconds "
                     "(0.1 to 3600, or 1); no status sampling",
                     hbt_env_name(HBT_ENV_HBTRACE_STATUS), v);
        }
        return;
    }
    const char *nd = hbt_getenv(HBT_ENV_HBTRACE_STATUS_NET_DEV);   /* tests only */
    snprintf(S.net_dev, sizeof S.net_dev, "%s", nd && *nd ? nd : "");
    S.period_s = p;
    S.period_ns = (uint64_t)(p * 1e9 + 0.5);
    S.pid = getpid();
    S.on = 1;
    hbt_status_start();
}

/* Process exit: the last sample (and the first, if it is not written yet),
 * from the exiting thread. */
void hbt_status_at_exit(void)
{
    if (!S.on || hbt_state() != HBT_ON || getpid() != S.pid)
        return;
    if (__atomic_exchange_n(&S.stop, 1, __ATOMIC_ACQ_REL))
        return;   /* once */
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 1;
    if (pthread_mutex_timedlock(&S.lock, &dl) != 0)
        return;
    if (S.written || !hbt_is_bystander()) {
        struct hbt_tls *t = &hbt_tls;
        if (__atomic_load_n(&S.tid, __ATOMIC_ACQUIRE) == (pid_t)syscall(SYS_gettid))
            hbt_register_quiet(t);   /* the sampler is the last thread */
        unsigned mode = HBT_MODE_END & ~HBT_M_RESERVE;
        hbt_write_pending(mode);
        struct hbt_sample s;
        hbt_sample_take(&s);
        hbt_sample_write(&s, mode);
    }
    pthread_mutex_unlock(&S.lock);
}

/* fork child, in its only thread: no sampler thread here; the child's
 * file, when it opens, starts its own. */
static void hbt_status_after_fork_child(void)
{
    S.on = 0;
    S.started = 0;
    S.stop = 0;
    S.tid = 0;
    pthread_mutex_init(&S.lock, NULL);
    S.written = 0;
    S.have_first = 0;
    S.have_prev = 0;
    S.niface = 0;
    S.rx_acc = S.tx_acc = 0;
    memset(S.cpu_acc, 0, sizeof S.cpu_acc);
    S.meta_done = 0;
}
