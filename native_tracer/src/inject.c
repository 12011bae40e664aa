/*
 * inject.c -- the thread fault injector (docs/inject.md): one fault in one
 * thread of an unmodified program, loaded with the tracer, its ground truth
 * written beside the trace.
 *
 * HBTRACE_INJECT names the kind; HBTRACE_INJECT_THREAD the victim (a thread
 * number as its beats record it, or random); HBTRACE_INJECT_BEAT or _AT the
 * moment (a fixed value or a LO-HI range drawn from HBTRACE_INJECT_SEED).
 * Every beat of every source goes through hbt_inject_point while the
 * injector is armed (the API's hot path in internal.h, automatic beats in
 * autobeat.c): it counts the beats of each thread number, chooses the
 * victim when the moment comes, fires the fault in the victim's own OS
 * thread at its beat, and afterwards applies the per-unit effects (leak,
 * slow) at each of its beats. stop makes libgomp's GOMP_loop_*_next return
 * false for the victim, and GOMP_sections_next 0 (gomp.c calls
 * hbt_inject_skip_chunk), and has it wait before a loop's or sections' _start
 * until its team took every chunk or section (hbt_inject_stop_start), or ends
 * an API-beating thread outside OpenMP with pthread_exit.
 *
 * The truth file is written (temporary file, rename) when the injector
 * first sees a beat, when the fault fires, and at exit; a process that never
 * beats writes none. A fork child does not inherit the injection.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "autobeat.h"
#include "internal.h"

int hbt_inject_armed;

enum { K_NONE, K_LEAK, K_STOP, K_SLOW, K_BUSY, K_COND, K_EXIT, K_SEGV, K_COUNT };
static const char *const inj_kinds[K_COUNT] = {
    [K_NONE] = "none", [K_LEAK] = "leak", [K_STOP] = "stop", [K_SLOW] = "slow",
    [K_BUSY] = "busy", [K_COND] = "cond", [K_EXIT] = "exit", [K_SEGV] = "segv",
};

enum { F_NO = 0, F_FIRING = 1, F_DONE = 2 };          /* inj.fired */
enum { S_NONE = 0, S_OPENMP = 1, S_PTHREAD_EXIT = 2 }; /* how stop acts */

#define INJ_THREADS 1024u   /* thread numbers 0..1023 can be chosen */

/* beats per thread number, one cache line each (only armed runs touch them) */
static struct { uint32_t n; char pad[60]; } inj_count[INJ_THREADS] __attribute__((aligned(64)));
static uint64_t inj_seen[INJ_THREADS / 64];   /* thread numbers that beat */

static struct {
    int kind;
    int32_t thread_req;       /* -1: random */
    int by_beat;              /* moment: 1 the victim's beat, 0 a time */
    uint64_t beat;            /* planned beat (from 1) */
    double at_s;              /* planned seconds since the tracer started */
    uint64_t seed;
    uint64_t r_thread;        /* the draw that chooses the victim */
    uint64_t bytes;
    uint64_t leak_max;      /* leak: no more than this in all (0: no limit) */
    double slow;
    uint64_t wait_ms;
    char spec_thread[64], spec_moment[64];
    char truth[4096];

    int32_t victim;           /* atomic: -1 until chosen */
    uint32_t population;      /* threads it was chosen among (0: given) */
    int population_team;      /* 1: the outermost OpenMP team, 0: the numbers seen */
    int fired;                /* atomic: F_* */
    uint64_t fired_ns, fired_beat, start_ns;
    int fired_source;
    long fired_tid;
    int stop_how;
    int beaten;               /* atomic: this process made a beat */
    uint64_t units, leaked, skipped, delay_ns;   /* atomic: effects so far */
    uint64_t work_ns;     /* atomic: slow: the victim's units' own CPU time, which each delay is slow - 1 times */
    pthread_mutex_t lock;     /* the truth file */
} inj = { .victim = -1, .lock = PTHREAD_MUTEX_INITIALIZER };

/* the start of the calling thread's current unit of work (slow) */
static __thread uint64_t inj_last;
/* slow, in the victim's OS thread once the fault fired (inj_self): its CPU clock at the
 * start of its current unit (0: unknown) */
static __thread int inj_self;
static __thread uint64_t inj_last_cpu;
static volatile uintptr_t inj_fault_address = 16;   /* segv: in the unmapped page at 0 */

/* ------------------------------------------------------------------ */
/* configuration                                                       */

static uint64_t inj_splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int inj_u64(const char *s, uint64_t *v)
{
    char *end;
    if (!s || !*s || *s == '-' || *s == '+')
        return 0;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || *end)
        return 0;
    *v = x;
    return 1;
}

static int inj_double(const char *s, double *v)
{
    char *end;
    if (!s || !*s || *s == '-' || *s == '+')
        return 0;
    errno = 0;
    double x = strtod(s, &end);
    if (errno || *end || !(x >= 0) || x > 1e9)
        return 0;
    *v = x;
    return 1;
}

/* "A" or "LO-HI" (LO <= HI): *lo, *hi */
static int inj_range(const char *v, int integer, double *lo, double *hi)
{
    char buf[64];
    if (!v || strlen(v) >= sizeof buf)
        return 0;
    strcpy(buf, v);
    char *dash = strchr(buf, '-');
    if (dash)
        *dash = '\0';
    const char *a = buf, *b = dash ? dash + 1 : buf;
    if (integer) {
        uint64_t x, y;
        if (!inj_u64(a, &x) || !inj_u64(b, &y) || x < 1 || y < x || y > (1ull << 40))
            return 0;
        *lo = (double)x;
        *hi = (double)y;
    } else {
        if (!inj_double(a, lo) || !inj_double(b, hi) || *hi < *lo)
            return 0;
    }
    return 1;
}

static HBT_COLD void inj_refuse(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static HBT_COLD void inj_refuse(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    hbt_warn("hbtrace: %s: nothing is injected", msg);
}

static void inj_after_fork_child(void)
{
    /* the child is another process: the fault and its truth are the parent's */
    __atomic_store_n(&hbt_inject_armed, 0, __ATOMIC_RELAXED);
}

__attribute__((constructor)) static void inj_config(void)
{
    const char *k = hbt_getenv(HBT_ENV_HBTRACE_INJECT);
    if (!k || !*k || hbt_env_flag(HBT_ENV_HBTRACE_DISABLE))
        return;
    int kind = K_NONE;
    for (int i = 1; i < K_COUNT; i++)
        if (strcmp(k, inj_kinds[i]) == 0)
            kind = i;
    const char *en = hbt_env_name(HBT_ENV_HBTRACE_INJECT);
    if (kind == K_NONE) {
        inj_refuse("%s=%.64s: unknown kind (known: leak, stop, slow, busy, cond, exit, segv)", en, k);
        return;
    }
    inj.kind = kind;

    const char *th = hbt_getenv(HBT_ENV_HBTRACE_INJECT_THREAD);
    uint64_t x;
    if (!th || !*th || strcmp(th, "random") == 0) {
        inj.thread_req = -1;
        snprintf(inj.spec_thread, sizeof inj.spec_thread, "random");
    } else if (inj_u64(th, &x) && x < INJ_THREADS) {
        inj.thread_req = (int32_t)x;
        snprintf(inj.spec_thread, sizeof inj.spec_thread, "%" PRIu64, x);
    } else {
        inj_refuse("%s=%.64s: expected a thread number below %u or random",
                   hbt_env_name(HBT_ENV_HBTRACE_INJECT_THREAD), th, INJ_THREADS);
        return;
    }

    const char *seed = hbt_getenv(HBT_ENV_HBTRACE_INJECT_SEED);
    inj.seed = 1;
    if (seed && *seed && !inj_u64(seed, &inj.seed)) {
        inj_refuse("%s=%.64s: expected a number", hbt_env_name(HBT_ENV_HBTRACE_INJECT_SEED), seed);
        return;
    }
    uint64_t state = inj.seed;
    uint64_t r_moment = inj_splitmix(&state);
    inj.r_thread = inj_splitmix(&state);

    const char *at = hbt_getenv(HBT_ENV_HBTRACE_INJECT_AT);
    const char *bt = hbt_getenv(HBT_ENV_HBTRACE_INJECT_BEAT);
    if (at && !*at)
        at = NULL;
    if (bt && !*bt)
        bt = NULL;
    if (!at == !bt) {
        inj_refuse("%s needs exactly one of %s and %s", en, hbt_env_name(HBT_ENV_HBTRACE_INJECT_AT),
                   hbt_env_name(HBT_ENV_HBTRACE_INJECT_BEAT));
        return;
    }
    double lo, hi;
    if (bt) {
        if (!inj_range(bt, 1, &lo, &hi)) {
            inj_refuse("%s=%.64s: expected a beat B >= 1 or a range LO-HI",
                       hbt_env_name(HBT_ENV_HBTRACE_INJECT_BEAT), bt);
            return;
        }
        uint64_t l = (uint64_t)lo, h = (uint64_t)hi;
        inj.by_beat = 1;
        inj.beat = l + r_moment % (h - l + 1);
        snprintf(inj.spec_moment, sizeof inj.spec_moment, "%s", bt);
    } else {
        if (!inj_range(at, 0, &lo, &hi)) {
            inj_refuse("%s=%.64s: expected SECONDS >= 0 or a range LO-HI",
                       hbt_env_name(HBT_ENV_HBTRACE_INJECT_AT), at);
            return;
        }
        inj.at_s = lo + (hi - lo) * ((double)(r_moment >> 11) * 0x1.0p-53);
        snprintf(inj.spec_moment, sizeof inj.spec_moment, "%s", at);
    }

    const char *v = hbt_getenv(HBT_ENV_HBTRACE_INJECT_BYTES);
    inj.bytes = 1048576;
    if (v && *v && (!inj_u64(v, &inj.bytes) || inj.bytes > (1ull << 40))) {
        inj_refuse("%s=%.64s: expected a number of bytes", hbt_env_name(HBT_ENV_HBTRACE_INJECT_BYTES), v);
        return;
    }
    /* a quarter of the machine's memory by default: 1 MiB per unit of a program that beats
     * every 40 us (NPB LU built with clang) asked for 35 GB of a 24 GB machine, and the
     * kernel's OOM killer then ends the program -- or another one */
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    inj.leak_max = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page / 4 : (1ull << 30);
    v = hbt_getenv(HBT_ENV_HBTRACE_INJECT_LEAK_MAX);
    if (v && *v && (!inj_u64(v, &inj.leak_max) || inj.leak_max > (1ull << 50))) {
        inj_refuse("%s=%.64s: expected a number of bytes", hbt_env_name(HBT_ENV_HBTRACE_INJECT_LEAK_MAX), v);
        return;
    }
    v = hbt_getenv(HBT_ENV_HBTRACE_INJECT_SLOW);
    inj.slow = 3;
    if (v && *v && (!inj_double(v, &inj.slow) || inj.slow <= 1 || inj.slow > 1000)) {
        inj_refuse("%s=%.64s: expected a factor above 1, at most 1000",
                   hbt_env_name(HBT_ENV_HBTRACE_INJECT_SLOW), v);
        return;
    }
    v = hbt_getenv(HBT_ENV_HBTRACE_INJECT_WAIT_MS);
    inj.wait_ms = 1000;
    if (v && *v && (!inj_u64(v, &inj.wait_ms) || inj.wait_ms > 86400000ull)) {
        inj_refuse("%s=%.64s: expected milliseconds", hbt_env_name(HBT_ENV_HBTRACE_INJECT_WAIT_MS), v);
        return;
    }
    v = hbt_getenv(HBT_ENV_HBTRACE_INJECT_TRUTH);
    if (v && *v) {
        if (strlen(v) >= sizeof inj.truth - 16) {
            inj_refuse("%s: path too long", hbt_env_name(HBT_ENV_HBTRACE_INJECT_TRUTH));
            return;
        }
        strcpy(inj.truth, v);
    }
    inj.victim = inj.thread_req;
    __atomic_store_n(&hbt_inject_armed, 1, __ATOMIC_RELEASE);
}

/* ------------------------------------------------------------------ */
/* the truth file                                                      */

struct inj_buf {
    char *p;
    size_t n, cap;
};

static void inj_put(struct inj_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void inj_put(struct inj_buf *b, const char *fmt, ...)
{
    if (b->n >= b->cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    if (k > 0)
        b->n = b->n + (size_t)k < b->cap ? b->n + (size_t)k : b->cap;
}

static void inj_put_str(struct inj_buf *b, const char *s)
{
    inj_put(b, "\"");
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            inj_put(b, "\\%c", c);
        else if (c < 0x20)
            inj_put(b, "\\u%04x", c);
        else
            inj_put(b, "%c", c);
    }
    inj_put(b, "\"");
}

static const char *inj_source_name(int source)
{
    return source == HBT_SRC_API ? "api" : source == HBT_SRC_OPENMP ? "openmp"
         : source == HBT_SRC_MPI ? "mpi" : "?";
}

static uint64_t inj_start_ns(void)
{
    uint64_t s = __atomic_load_n(&inj.start_ns, __ATOMIC_ACQUIRE);
    if (s)
        return s;
    if (hbt_state() == HBT_ON && hbt_g.hdr)
        s = hbt_g.hdr->start_mono_ns;
    if (!s)
        s = hbt_now_ns();
    uint64_t zero = 0;
    __atomic_compare_exchange_n(&inj.start_ns, &zero, s, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    return __atomic_load_n(&inj.start_ns, __ATOMIC_ACQUIRE);
}

/* Write the truth (under inj.lock). final: the process is exiting with status. */
static void inj_write_truth(int final, int status)
{
    char path[4096 + 32];
    if (inj.truth[0])
        snprintf(path, sizeof path, "%s", inj.truth);
    else if (hbt_state() == HBT_ON && hbt_g.dir[0])
        snprintf(path, sizeof path, "%s/inject-truth.json", hbt_g.dir);
    else
        snprintf(path, sizeof path, "inject-truth.json");
    static char text[8192];
    struct inj_buf b = { text, 0, sizeof text };
    int fired = __atomic_load_n(&inj.fired, __ATOMIC_ACQUIRE) != F_NO;
    int32_t victim = __atomic_load_n(&inj.victim, __ATOMIC_ACQUIRE);
    uint64_t start = inj_start_ns();

    inj_put(&b, "{\n  \"format\": \"hbtool-inject-truth\",\n  \"version\": 1,\n");
    inj_put(&b, "  \"kind\": \"%s\",\n  \"pid\": %ld,\n  \"trace\": ", inj_kinds[inj.kind], (long)getpid());
    inj_put_str(&b, hbt_state() == HBT_ON ? hbt_g.path : "");
    inj_put(&b, ",\n  \"seed\": %" PRIu64 ",\n  \"thread_requested\": ", inj.seed);
    if (inj.thread_req >= 0)
        inj_put(&b, "%d", (int)inj.thread_req);
    else
        inj_put_str(&b, inj.spec_thread);
    inj_put(&b, ",\n  \"moment_requested\": {\"%s\": ", inj.by_beat ? "beat" : "at_s");
    inj_put_str(&b, inj.spec_moment);
    inj_put(&b, "},\n");
    if (victim >= 0)
        inj_put(&b, "  \"thread\": %d,\n", (int)victim);
    else
        inj_put(&b, "  \"thread\": null,\n");
    if (inj.population)
        inj_put(&b, "  \"chosen_among\": {\"threads\": %u, \"from\": \"%s\"},\n", inj.population,
                inj.population_team ? "openmp-team" : "threads-seen");
    else
        inj_put(&b, "  \"chosen_among\": null,\n");
    if (inj.by_beat)
        inj_put(&b, "  \"planned\": {\"beat\": %" PRIu64 ", \"at_s\": null},\n", inj.beat);
    else
        inj_put(&b, "  \"planned\": {\"beat\": null, \"at_s\": %.9f},\n", inj.at_s);
    inj_put(&b, "  \"fired\": %s,\n", fired ? "true" : "false");
    if (fired) {
        inj_put(&b, "  \"fired_at\": {\"mono_ns\": %" PRIu64 ", \"trace_ns\": %" PRId64
                ", \"trace_s\": %.9f, \"beat\": %" PRIu64 ", \"source\": \"%s\", \"os_tid\": %ld},\n",
                inj.fired_ns, (int64_t)(inj.fired_ns - start), (double)(int64_t)(inj.fired_ns - start) * 1e-9,
                inj.fired_beat, inj_source_name(inj.fired_source), inj.fired_tid);
    } else {
        inj_put(&b, "  \"fired_at\": null,\n");
    }
    inj_put(&b, "  \"params\": {\"bytes\": %" PRIu64 ", \"leak_max\": %" PRIu64 ", \"slow\": %.17g, "
            "\"wait_ms\": %" PRIu64 "},\n", inj.bytes, inj.leak_max, inj.slow, inj.wait_ms);
    const char *how = inj.stop_how == S_OPENMP ? "\"openmp-chunks\""
                    : inj.stop_how == S_PTHREAD_EXIT ? "\"pthread_exit\"" : "null";
    inj_put(&b, "  \"effect\": {\"units\": %" PRIu64 ", \"leaked_bytes\": %" PRIu64
            ", \"chunks_skipped\": %" PRIu64 ", \"delay_ns\": %" PRIu64 ", \"work_ns\": %" PRIu64
            ", \"stop\": %s},\n",
            __atomic_load_n(&inj.units, __ATOMIC_RELAXED), __atomic_load_n(&inj.leaked, __ATOMIC_RELAXED),
            __atomic_load_n(&inj.skipped, __ATOMIC_RELAXED), __atomic_load_n(&inj.delay_ns, __ATOMIC_RELAXED),
            __atomic_load_n(&inj.work_ns, __ATOMIC_RELAXED), how);
    inj_put(&b, "  \"start_mono_ns\": %" PRIu64 ",\n", start);
    if (final)
        inj_put(&b, "  \"final\": true,\n  \"exit_status\": %d\n}\n", status);
    else
        inj_put(&b, "  \"final\": false,\n  \"exit_status\": null\n}\n");

    char tmp[4096 + 64];
    snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        hbt_warn("hbtrace: cannot write the injector's truth %s: %s", tmp, strerror(errno));
        return;
    }
    size_t off = 0;
    while (off < b.n) {
        ssize_t w = write(fd, text + off, b.n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    if (close(fd) != 0 || off != b.n || rename(tmp, path) != 0) {
        hbt_warn("hbtrace: cannot write the injector's truth %s: %s", path, strerror(errno));
        unlink(tmp);
    }
}

static void inj_truth(int final, int status)
{
    pthread_mutex_lock(&inj.lock);
    inj_write_truth(final, status);
    pthread_mutex_unlock(&inj.lock);
}

void hbt_inject_at_exit(int status)
{
    if (!__atomic_load_n(&hbt_inject_armed, __ATOMIC_ACQUIRE)
        || !__atomic_load_n(&inj.beaten, __ATOMIC_ACQUIRE))
        return;
    /* a thread that is firing right now holds the lock: do not wait for it long */
    for (int i = 0; i < 200; i++) {
        if (pthread_mutex_trylock(&inj.lock) == 0) {
            inj_write_truth(1, status);
            pthread_mutex_unlock(&inj.lock);
            return;
        }
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
}

/* ------------------------------------------------------------------ */
/* the faults                                                          */

static int (*inj_omp_level)(void);
static int (*inj_omp_team_size)(int);
static void (*inj_omp_schedule)(int *, int *);

static void inj_resolve_omp_once(void)
{
    inj_omp_team_size = (int (*)(int))dlsym(RTLD_DEFAULT, "omp_get_team_size");
    inj_omp_level = (int (*)(void))dlsym(RTLD_DEFAULT, "omp_get_level");
    inj_omp_schedule = (void (*)(int *, int *))dlsym(RTLD_DEFAULT, "omp_get_schedule");
}

/* Once, whichever threads choose the victim at the same moment. */
static void inj_resolve_omp(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, inj_resolve_omp_once);
}

static int inj_in_parallel(void)
{
    inj_resolve_omp();
    return inj_omp_level && inj_omp_level() > 0;
}

/* Burn the CPU until `until` (CLOCK_MONOTONIC ns). */
static void inj_spin_until(uint64_t until)
{
    volatile uint64_t sink = 0;
    while (hbt_now_ns() < until)
        for (int i = 0; i < 1000; i++)
            sink += (uint64_t)i;
}

/* Spin until the calling thread's CPU clock reads `until` (ns); from `start` (wall ns) on,
 * at most INJ_SPIN_MAX_NS of wall time, and no longer once its clock cannot be read. */
#define INJ_SPIN_MAX_NS (60ull * 1000000000ull)
static void inj_spin_cpu(uint64_t until, uint64_t start)
{
    volatile uint64_t sink = 0;
    for (;;) {
        uint64_t c = hb_thread_cpu_ns();
        if (!c || c >= until || hbt_now_ns() - start > INJ_SPIN_MAX_NS)
            return;
        for (int i = 0; i < 1000; i++)
            sink += (uint64_t)i;
    }
}

static void inj_leak(void)
{
    uint64_t done = __atomic_load_n(&inj.leaked, __ATOMIC_RELAXED);
    if (!inj.bytes || (inj.leak_max && done + inj.bytes > inj.leak_max))
        return;   /* (only the victim leaks: no race on the sum) */
    char *p = malloc(inj.bytes);
    if (!p)
        return;
    memset(p, 0xA5, inj.bytes);   /* touched: resident, not just reserved */
    __asm__ volatile("" : : "r"(p) : "memory");
    __atomic_add_fetch(&inj.leaked, inj.bytes, __ATOMIC_RELAXED);
}

/* A unit of work of the victim ended at now, after the fault fired (its beat is
 * recorded; slow's spin ran before it, in hbt_inject_before_beat). */
static void inj_unit(uint64_t now)
{
    (void)now;
    __atomic_add_fetch(&inj.units, 1, __ATOMIC_RELAXED);
    if (inj.kind == K_LEAK)
        inj_leak();
}

/* slow: spin (slow - 1) times a unit of work (ns: CPU time where cpu, the thread's CPU
 * clock at end, is known; else wall time, spun in wall time); returns when it ended. */
static uint64_t inj_delay(uint64_t unit, uint64_t cpu, uint64_t end)
{
    if (unit > 10000000000ull)
        unit = 10000000000ull;   /* a unit of 10 s at most: a long idle is no work */
    uint64_t delay = (uint64_t)((inj.slow - 1) * (double)unit);
    __atomic_add_fetch(&inj.work_ns, unit, __ATOMIC_RELAXED);
    if (cpu)
        inj_spin_cpu(cpu + delay, end);
    else
        inj_spin_until(end + delay);
    /* what it spun: a thread preempted at the spin's end spun longer, and that time is
     * in its beat interval too (the truth says what happened) */
    uint64_t after = hbt_now_ns();
    __atomic_add_fetch(&inj.delay_ns, after - end, __ATOMIC_RELAXED);
    return after;
}

uint64_t hbt_inject_before_beat(int32_t thread, uint64_t now)
{
    if (inj.kind != K_SLOW || __atomic_load_n(&inj.fired, __ATOMIC_ACQUIRE) != F_DONE
        || thread != __atomic_load_n(&inj.victim, __ATOMIC_ACQUIRE) || !inj_last)
        return now;
    uint64_t end = now ? now : hbt_now_ns();
    if (end <= inj_last)
        return now;
    /* the unit's own CPU time, and as much again (slow - 1) times on the thread's CPU clock:
     * its work takes the factor whatever share of a CPU the machine gives it (a spin until a
     * wall-clock time got a third of a CPU where NPB EP's four threads shared two: 1.7x, not
     * 3x); where the CPU clock cannot be read, the unit's wall time, spun in wall time */
    uint64_t cpu = inj_last_cpu ? hb_thread_cpu_ns() : 0;
    int by_cpu = cpu > inj_last_cpu;
    uint64_t after = inj_delay(by_cpu ? cpu - inj_last_cpu : end - inj_last, by_cpu ? cpu : 0, end);
    return now ? after : 0;
}

/* slow: the victim's work so far is spun for; its next unit starts now (a wait that
 * records nothing does not count it again) */
static void inj_unit_done(void)
{
    inj_last = hbt_now_ns();
    inj_last_cpu = hb_thread_cpu_ns();
}

void hbt_inject_before_wait(int32_t thread)
{
    if (inj.kind != K_SLOW || !inj_self)
        return;
    (void)hbt_inject_before_beat(thread, 0);
    inj_unit_done();
}

uint64_t hbt_inject_spun(int32_t thread, uint64_t spun_ns, uint64_t first_cpu, uint64_t after_ns)
{
    if (inj.kind != K_SLOW || !inj_self || thread != __atomic_load_n(&inj.victim, __ATOMIC_ACQUIRE))
        return 0;
    uint64_t cpu = inj_last_cpu ? hb_thread_cpu_ns() : 0;
    if (!cpu)
        return 0;
    if (first_cpu >= inj_last_cpu && cpu >= first_cpu) {
        /* the work before the spin, and after it (its wall time, at most the CPU time
         * since the spin began): at 4 threads on 2 CPUs a spin of 8 ms used 4 ms of CPU
         * time, and with its length taken for its CPU time the work before it was never
         * multiplied (NPB LU with libomp at 4 threads: 6-8 ms of work in a 10 s run) */
        uint64_t after = after_ns < cpu - first_cpu ? after_ns : cpu - first_cpu;
        return first_cpu - inj_last_cpu + after;
    }
    /* the spin burnt about its length of CPU time, and was no work */
    return cpu > inj_last_cpu + spun_ns ? cpu - inj_last_cpu - spun_ns : 0;
}

void hbt_inject_after_spin(uint64_t work_ns)
{
    if (inj.kind != K_SLOW || !inj_self || !work_ns)
        return;
    (void)inj_delay(work_ns, hb_thread_cpu_ns(), hbt_now_ns());
    inj_unit_done();
}

int hbt_inject_times_spins(void)
{
    return inj.kind == K_SLOW && inj_self;
}

static void inj_block_on_cond(uint64_t ms)
{
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t c;
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&c, &a);
    pthread_condattr_destroy(&a);
    uint64_t until = hbt_now_ns() + ms * 1000000ull;
    struct timespec ts = { (time_t)(until / 1000000000ull), (long)(until % 1000000000ull) };
    pthread_mutex_lock(&m);
    while (hbt_now_ns() < until)   /* spurious wake-ups wait again */
        if (pthread_cond_timedwait(&c, &m, &ts) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&m);
    pthread_cond_destroy(&c);
}

/* Fire the fault in the calling thread (the victim's), at its beat number `beat`. */
static HBT_COLD void inj_fire(int source, uint64_t beat, uint64_t now)
{
    inj.fired_ns = now;
    inj.fired_beat = beat;
    inj.fired_source = source;
    inj.fired_tid = (long)syscall(SYS_gettid);
    if (inj.kind == K_STOP)
        inj.stop_how = source == HBT_SRC_OPENMP || inj_in_parallel() ? S_OPENMP : S_PTHREAD_EXIT;
    __atomic_store_n(&inj.fired, F_DONE, __ATOMIC_RELEASE);
    inj_truth(0, 0);
    switch (inj.kind) {
    case K_LEAK:
    case K_SLOW:   /* slow: from its next unit on, each is longer (hbt_inject_before_beat) */
        inj_unit(now);
        break;
    case K_BUSY:
        inj_spin_until(now + inj.wait_ms * 1000000ull);
        __atomic_add_fetch(&inj.delay_ns, hbt_now_ns() - now, __ATOMIC_RELAXED);
        break;
    case K_COND:
        inj_block_on_cond(inj.wait_ms);
        __atomic_add_fetch(&inj.delay_ns, hbt_now_ns() - now, __ATOMIC_RELAXED);
        break;
    case K_EXIT:
        exit(1);
    case K_SEGV:
        /* a real fault, not raise(): a program's own handler runs as on a real fault, and
         * when it returns the write runs again, as the faulting instruction would -- a
         * handler that prints and puts SIG_DFL back (IQ-TREE's) lets the process die of
         * it; raise() returned to the thread and the program went on to exit(0). The
         * address is read from a volatile: a store to a null constant may compile to a
         * trap (SIGILL) */
        *(volatile int *)inj_fault_address = 0;
        break;   /* a handler that jumped out went on elsewhere; one that returns loops here */
    case K_STOP:
        if (inj.stop_how == S_PTHREAD_EXIT)
            pthread_exit(NULL);
        break;
    }
}

/* The victim among the thread numbers: the outermost OpenMP team when the
 * calling thread is in a parallel region, else the numbers that beat so far. */
static HBT_COLD void inj_choose(void)
{
    uint32_t n = 0;
    int team = 0;
    if (inj_in_parallel() && inj_omp_team_size) {
        int s = inj_omp_team_size(1);
        if (s > 0 && (uint32_t)s <= INJ_THREADS) {
            n = (uint32_t)s;
            team = 1;
        }
    }
    int32_t chosen = -1;
    if (team) {
        chosen = (int32_t)(inj.r_thread % n);
    } else {
        for (uint32_t w = 0; w < INJ_THREADS / 64; w++)
            n += (uint32_t)__builtin_popcountll(__atomic_load_n(&inj_seen[w], __ATOMIC_RELAXED));
        if (!n)
            return;
        uint64_t k = inj.r_thread % n;
        for (uint32_t i = 0; i < INJ_THREADS; i++)
            if ((__atomic_load_n(&inj_seen[i / 64], __ATOMIC_RELAXED) >> (i % 64)) & 1) {
                if (k-- == 0) {
                    chosen = (int32_t)i;
                    break;
                }
            }
    }
    int32_t none = -1;
    pthread_mutex_lock(&inj.lock);
    if (__atomic_compare_exchange_n(&inj.victim, &none, chosen, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
        inj.population = n;
        inj.population_team = team;
    }
    pthread_mutex_unlock(&inj.lock);
}

static inline int inj_moment(uint64_t count, uint64_t now)
{
    if (inj.by_beat)
        return count >= inj.beat;
    return now >= inj_start_ns() + (uint64_t)(inj.at_s * 1e9);
}

void hbt_inject_point(int source, int32_t thread, uint64_t now)
{
    if (!__atomic_load_n(&hbt_inject_armed, __ATOMIC_ACQUIRE) || thread < 0
        || (uint32_t)thread >= INJ_THREADS)
        return;
    if (!now)
        now = hbt_now_ns();
    if (__builtin_expect(!__atomic_load_n(&inj.beaten, __ATOMIC_RELAXED), 0)) {
        if (!__atomic_exchange_n(&inj.beaten, 1, __ATOMIC_ACQ_REL)) {
            hbt_fork_child_add(inj_after_fork_child);
            inj_truth(0, 0);   /* the plan, before anything happens */
        }
    }
    uint64_t count = __atomic_add_fetch(&inj_count[thread].n, 1, __ATOMIC_RELAXED);
    uint64_t bit = 1ull << (thread % 64);
    if (!(__atomic_load_n(&inj_seen[thread / 64], __ATOMIC_RELAXED) & bit))
        __atomic_or_fetch(&inj_seen[thread / 64], bit, __ATOMIC_RELAXED);

    int fired = __atomic_load_n(&inj.fired, __ATOMIC_ACQUIRE);
    int32_t victim = __atomic_load_n(&inj.victim, __ATOMIC_ACQUIRE);
    if (fired == F_DONE) {
        if (thread == victim)
            inj_unit(now);
    } else if (fired == F_NO) {
        if (victim < 0 && inj_moment(count, now)) {
            inj_choose();
            victim = __atomic_load_n(&inj.victim, __ATOMIC_ACQUIRE);
        }
        if (thread == victim && inj_moment(count, now)) {
            int no = F_NO;
            if (__atomic_compare_exchange_n(&inj.fired, &no, F_FIRING, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE))
                inj_fire(source, count, now);
        }
    }
    inj_last = hbt_now_ns();
    if (inj.kind == K_SLOW && thread == __atomic_load_n(&inj.victim, __ATOMIC_ACQUIRE)
        && __atomic_load_n(&inj.fired, __ATOMIC_ACQUIRE) == F_DONE) {
        inj_self = 1;
        inj_last_cpu = hb_thread_cpu_ns();
    }
}

void hbt_inject_waited(uint64_t now)
{
    inj_last = now ? now : hbt_now_ns();
    if (inj_self)
        inj_last_cpu = hb_thread_cpu_ns();
}

/* Whether a libgomp loop (entry: its _start or _next; sched: a generic _start's schedule
 * argument, -1 for the others) gives each thread a share of its own: a static schedule
 * (also OMP_SCHEDULE=static or auto for a runtime one), whose chunks a teammate never takes
 * in its place -- a share skipped would be lost. libgomp's kinds: 0 runtime, 1 static,
 * 2 dynamic, 3 guided, 4 auto (static there), the high bit monotonic. */
static int inj_own_shares(const char *entry, long sched)
{
    int kind = sched >= 0 ? (int)(sched & 0x7fffffffL) : strstr(entry, "static") ? 1
             : strstr(entry, "runtime") ? 0 : 2;
    if (kind == 0) {
        int chunk = 0;
        inj_resolve_omp();
        if (!inj_omp_schedule)
            return 1;   /* not known: skip nothing */
        inj_omp_schedule(&kind, &chunk);
        kind &= 0x7fffffff;
    }
    return kind == 1 || kind == 4;
}

/* The calling thread is the fired stop's victim, in OpenMP, and the loop (entry, sched:
 * inj_own_shares) is one whose chunks its team takes in its place: not an ordered loop
 * (its threads hand the turn on to each other inside _next), nor one of shares of its own. */
static int inj_stopped_in(int32_t thread, const char *entry, long sched)
{
    return hbt_inject_stopped(thread) && !strstr(entry, "ordered") && !inj_own_shares(entry, sched);
}

int hbt_inject_skip_chunk(int32_t thread, const char *entry)
{
    if (!inj_stopped_in(thread, entry, -1))
        return 0;
    __atomic_add_fetch(&inj.skipped, 1, __ATOMIC_RELAXED);
    return 1;
}

int hbt_inject_stop_start(int32_t thread, const char *entry, long sched)
{
    return inj_stopped_in(thread, entry, sched);
}

void hbt_inject_skipped(void)
{
    __atomic_add_fetch(&inj.skipped, 1, __ATOMIC_RELAXED);
}

/* libomp's schedule kinds (kmp.h's enum sched_type), less the monotonic (1 << 29) and
 * nonmonotonic (1 << 30) modifiers: whether a loop's chunks go to whichever thread asks
 * (dynamic 35, guided 36, 42, 43 and 46, trapezoidal 39, and 44, static chunks that idle
 * threads steal: clang's schedule(dynamic), nonmonotonic since OpenMP 5.0), or a runtime
 * schedule (37, 47) that omp_get_schedule makes dynamic or guided. Not the static kinds
 * (33, 34, 40, 41, 45), auto (38), the ordered ones (64-72: the threads hand the turn on to
 * each other) nor distribute (91, 92). The "no merge" kinds (161-190) are the same kinds
 * numbered 128 higher. */
int hbt_inject_kmp_shared(int32_t schedule)
{
    int s = (int)((uint32_t)schedule & ~((1u << 29) | (1u << 30)));
    if (s >= 161 && s <= 190)
        s -= 128;
    if (s == 37 || s == 47) {
        int kind = 0, chunk = 0;
        inj_resolve_omp();
        if (!inj_omp_schedule)
            return 0;
        inj_omp_schedule(&kind, &chunk);
        kind &= 0x7fffffff;
        return kind == 2 || kind == 3;
    }
    return s == 35 || s == 36 || s == 39 || s == 42 || s == 43 || s == 44 || s == 46;
}

int hbt_inject_stopped(int32_t thread)
{
    return inj.kind == K_STOP && __atomic_load_n(&inj.fired, __ATOMIC_ACQUIRE) == F_DONE
        && inj.stop_how == S_OPENMP && thread == __atomic_load_n(&inj.victim, __ATOMIC_RELAXED);
}
