/*
 * hbtrace_probe.h -- timing probes of libhbtrace (seed 003): how often a
 * piece of code ran and how long it took, per call site and thread.
 *
 *     #include "hbtrace_probe.h"
 *
 *     hbt_probe_t p = HBT_PROBE_BEGIN("solve");  // one static probe per call site
 *     solve(...);
 *     HBT_PROBE_END(p);
 *
 *     {   HBT_PROBE_SCOPE("halo exchange");      // ends when the block is left
 *         exchange(...);
 *     }
 *
 * A probe is a call site: its label (a string literal), __FILE__ and
 * __LINE__. Its statistics are kept per thread -- completed uses (a BEGIN
 * followed by its END), the sum, minimum and maximum of their durations --
 * and written to the trace file when the thread ends (return from its start
 * routine, pthread_exit, cancellation) and, for the threads still running,
 * at process exit (exit, return from main, _exit). Each thread writes one
 * set of HBT_REC_PROBE records per probe it used (hbtrace_format.h); the
 * probe's name, "<file>:<line>\t<label>", is written as HBT_REC_NAME records
 * the first time any thread uses the probe. Durations are in nanoseconds.
 *
 * Cost: the hot path reads the clock twice and updates four fields of the
 * calling thread's own table (no lock, no system call, no atomic
 * read-modify-write). The clock is the TSC (rdtsc) on x86 when it is
 * invariant (CPUID and the kernel both say so), else
 * clock_gettime(CLOCK_MONOTONIC); it is chosen once, at the first use of any
 * probe, and named in the trace metadata (probe_clock=tsc|monotonic, and
 * probe_tsc_hz at exit). HBTRACE_PROBE_CLOCK=tsc|monotonic overrides the
 * choice. rdtsc is not a serialising instruction: a duration may be off by
 * the few tens of cycles the CPU overlaps the timed code with the reads.
 *
 * Limits:
 *   - at most HBT_PROBE_MAX probes (call sites) per process; uses of later
 *     ones are counted as dropped (one warning, metadata probe_dropped);
 *   - statistics that have not been written are lost if the process is
 *     killed (SIGKILL, a fatal signal): they are written at thread end and
 *     exit only. The counts of a thread that ended before are exact; the
 *     figures of a thread still running at exit are a snapshot taken while
 *     it runs;
 *   - a BEGIN without its END (the thread left the block by longjmp,
 *     pthread_exit, cancellation) counts nothing; a duration that comes out
 *     negative (the TSCs of two CPUs disagree) counts as 0;
 *   - the first use of a probe (any thread) and the first use of any probe
 *     by a thread take a slow path (id, name record, the thread's table):
 *     do not make them inside a signal handler;
 *   - tracing disabled (HBTRACE_DISABLE=1) or off: every probe is a no-op
 *     (no clock read; a call into the library per BEGIN).
 *     When the trace file is full, the statistics are still counted but
 *     their records are dropped (counted in lost_records).
 *
 * Define HBT_NO_PROBES before including this header to compile every probe
 * away (BEGIN yields a null handle, END does nothing, the library is not
 * needed). The macros use GNU C statement expressions (GCC, Clang).
 */
#ifndef HBTRACE_PROBE_H
#define HBTRACE_PROBE_H

#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HBT_PROBE_MAX 4096u   /* probes (call sites) per process */

/* One per call site, static, made by HBT_PROBE_BEGIN. id1 is the probe id
 * plus 1 once assigned (0 before the first use). */
struct hbt_probe_site {
    uint32_t id1;
    int32_t line;
    const char *file;
    const char *label;
};

/* One probe's statistics in one thread (in the library's per-thread
 * table). nmin holds the complement of the minimum, so that a zeroed entry
 * needs no initialisation. */
struct hbt_probe_stat {
    uint64_t count;
    uint64_t total;
    uint64_t nmin;
    uint64_t max;
};

/* What HBT_PROBE_BEGIN returns and HBT_PROBE_END takes: where to count
 * (NULL: nothing) and the clock value at the begin. */
typedef struct {
    struct hbt_probe_stat *st;
    uint64_t t0;
} hbt_probe_t;

#ifndef HBT_NO_PROBES

/* The calling thread's table (NULL until its first probe use), and the
 * number of its entries the hot path may use (0 while it has none), so that
 * one compare tells both "no table" and "probe without an id yet". */
extern __thread struct hbt_probe_stat *hbt_probe_stats
    __attribute__((tls_model("initial-exec")));
extern __thread uint32_t hbt_probe_lim __attribute__((tls_model("initial-exec")));
/* 1: the probe clock is the TSC; 0: CLOCK_MONOTONIC. Set once, before any
 * probe id is handed out. */
extern int hbt_probe_use_tsc;

/* The slow path of a begin: assigns the probe's id (writing its name) and
 * the thread's table as needed. NULL when the use is not counted. */
struct hbt_probe_stat *hbt_probe_slow(struct hbt_probe_site *site);

/* Out-of-line versions of the hot path (the same work behind a call), for
 * callers that cannot use the inline functions (FFI). */
hbt_probe_t hbt_probe_begin_call(struct hbt_probe_site *site);
void hbt_probe_end_call(hbt_probe_t p);

/* clock_gettime(CLOCK_MONOTONIC) in ns, for compilers in strict ISO mode. */
uint64_t hbt_probe_monotonic_ns(void);

/* The probe clock without a compiler barrier: the callers place one on the
 * side of the timed code, so that the compiler keeps the timed code between
 * the two reads yet may overlap the probe's own bookkeeping with them. */
static inline __attribute__((always_inline)) uint64_t hbt_probe_clock_nb(void)
{
#if defined(__x86_64__) || defined(__i386__)
    if (__builtin_expect(hbt_probe_use_tsc, 1)) {
        uint32_t lo, hi;
        __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
        return ((uint64_t)hi << 32) | lo;
    }
#endif
#ifdef CLOCK_MONOTONIC
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
#else
    return hbt_probe_monotonic_ns();   /* strict ISO C: no POSIX clocks declared */
#endif
}

/* One read of the probe clock, ordered with the memory accesses around it. */
static inline __attribute__((always_inline)) uint64_t hbt_probe_clock(void)
{
    __asm__ __volatile__("" : : : "memory");
    uint64_t t = hbt_probe_clock_nb();
    __asm__ __volatile__("" : : : "memory");
    return t;
}

static inline __attribute__((always_inline))
hbt_probe_t hbt_probe_begin(struct hbt_probe_site *site)
{
    hbt_probe_t p;
    uint32_t idx = __atomic_load_n(&site->id1, __ATOMIC_ACQUIRE) - 1u;
    if (__builtin_expect(idx >= hbt_probe_lim, 0)) {
        p.st = hbt_probe_slow(site);
        if (!p.st) {
            p.t0 = 0;   /* not counted: no clock read either */
            return p;
        }
    } else {
        p.st = hbt_probe_stats + idx;
    }
    p.t0 = hbt_probe_clock_nb();
    __asm__ __volatile__("" : : : "memory");   /* the timed code comes after the read */
    return p;
}

static inline __attribute__((always_inline)) void hbt_probe_end(hbt_probe_t p)
{
    struct hbt_probe_stat *s = p.st;
    if (__builtin_expect(s == 0, 0))
        return;
    __asm__ __volatile__("" : : : "memory");   /* the timed code came before the read */
    uint64_t d = hbt_probe_clock_nb() - p.t0;
    if ((int64_t)d < 0)
        d = 0;
    s->count++;
    s->total += d;
    if (~d > s->nmin)
        s->nmin = ~d;
    if (d > s->max)
        s->max = d;
}

static inline void hbt_probe_end_scope(hbt_probe_t *p)
{
    hbt_probe_end(*p);
}

#define HBT_PROBE_BEGIN(label) __extension__({                                  \
        static struct hbt_probe_site hbt_probe_site_ = { 0, __LINE__, __FILE__, (label) }; \
        hbt_probe_begin(&hbt_probe_site_); })

#define HBT_PROBE_END(p) hbt_probe_end(p)

#else /* HBT_NO_PROBES */

#define HBT_PROBE_BEGIN(label) ((void)(label), (hbt_probe_t){ 0, 0 })
#define HBT_PROBE_END(p) ((void)(p))
static inline void hbt_probe_end_scope(hbt_probe_t *p) { (void)p; }

#endif /* HBT_NO_PROBES */

#define HBT_PROBE_CAT2_(a, b) a##b
#define HBT_PROBE_CAT_(a, b) HBT_PROBE_CAT2_(a, b)

/* A probe over the rest of the enclosing block (GCC/Clang cleanup
 * attribute): it ends however the block is left, return and break
 * included (not by longjmp or pthread_exit). */
#define HBT_PROBE_SCOPE(label)                                                  \
    hbt_probe_t HBT_PROBE_CAT_(hbt_probe_scope_, __LINE__)                      \
        __attribute__((cleanup(hbt_probe_end_scope), unused)) = HBT_PROBE_BEGIN(label)

#ifdef __cplusplus
}
#endif

#endif /* HBTRACE_PROBE_H */
