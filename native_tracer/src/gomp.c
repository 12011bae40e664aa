/*
 * gomp.c -- automatic beats and waits of programs built with gcc -fopenmp
 * (issue 15): libgomp's entry points, interposed as lifecycle.c interposes
 * pthread_create (the real one found with dlsym(RTLD_NEXT)). A program that
 * never calls libgomp never enters this file; a statically linked one cannot
 * be interposed at all. docs/formats.md ("automatic beats") has the records.
 *
 * What each entry records, on the calling thread (thread = its number in the
 * outermost team, cached per thread per region):
 *   GOMP_parallel*          the outlined function is called through
 *                           gomp_region(), on every thread of the team: it
 *                           sets the thread's state and, when fn returns,
 *                           records an IMPLICIT beat (the construct: the
 *                           region, named by fn). The master's time from
 *                           there to the end of the region (the implicit
 *                           barrier, team teardown) is a barrier wait; the
 *                           workers' end barrier is inside libgomp, unseen.
 *   GOMP_loop_*_start       notes the loop (construct: the call site) and
 *                           the chunk it got, if any: no beat.
 *   GOMP_loop_*_next        a CHUNK beat for the chunk the thread had (iter =
 *                           its first iteration, aux its count of iterations:
 *                           (iend - istart) / the loop's step), then notes
 *                           the new one. So
 *                           every chunk a thread gets has exactly one beat,
 *                           taken when the thread asks for more; the first
 *                           chunk (from _start, or the first _next of a
 *                           combined parallel loop) is counted by the _next
 *                           after it. A thread that gets no chunk has no beat.
 *   GOMP_loop_end*          a CHUNK beat if a chunk is still open (never, in
 *                           code gcc writes), then the barrier wait (not for
 *                           _nowait).
 *   GOMP_barrier*           a WORKSHARE beat (the closing barrier of a
 *                           statically scheduled loop or of a single, or an
 *                           explicit barrier: libgomp cannot tell them apart),
 *                           then the barrier wait.
 *   GOMP_sections_start,    note the section the thread was given (the
 *   GOMP_sections_next      return value): no beat.
 *   GOMP_sections_end*      a WORKSHARE beat (aux: the sections the thread was
 *                           given, a bit each), then the wait (not _nowait).
 *   GOMP_single_copy_start  the wait of the threads that did not run it.
 *   GOMP_single_copy_end    the wait of the thread that ran it.
 *   GOMP_critical*_start    a critical wait (the time to get the lock).
 *   omp_set_lock,           a LOCK beat (construct: the call site), then a
 *   omp_set_nest_lock       critical wait; left to ompt.c when libomp runs
 *                           (it has them too). omp_test_lock: not recorded.
 *   GOMP_ordered_start      an ordered wait.
 *   GOMP_taskwait*,
 *   GOMP_taskgroup_end      a taskwait wait.
 *   GOMP_task               the task function is called through gomp_task_run,
 *                           which records a TASK beat when it returns (aux
 *                           HBT_TASK_UNSHARED when the thread that made it
 *                           ran it). A task
 *                           run inside a wait (a taskwait, a barrier, the
 *                           closing barrier of a region) cuts that wait: the
 *                           part before the task is written as the task
 *                           starts, and the wait begins again at its end.
 * Not interposed: statically scheduled loops with nowait (gcc calls nothing),
 * GOMP_doacross_wait (variadic), taskloop, the pre-4.9 GOMP_parallel_start/end
 * ABI, teams and target; they run as before, unrecorded.
 * A libgomp with entry points this file does not know (a newer GCC): at the
 * first call of any wrapper, gomp_known.c compares the GOMP_* functions the
 * loaded libgomp exports with the ones this library wraps and a list of ones
 * known to need no wrapper; if any is left, one warning names how many and
 * the first few. The program runs as before; work inside them is unrecorded.
 * The chunk path (GOMP_loop_*_next) stores its beat inline
 * (hbt_auto_beat_inline): no call into autobeat.c.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "autobeat.h"   /* after internal.h: its inline record path */

typedef unsigned long long ull;

/* ------------------------------------------------------------------ */
/* per-thread state                                                     */

#define GOMP_CACHE 16u   /* construct ids by (kind, address), per thread */

struct gomp_region;

struct gomp_state {
    int32_t  thread;      /* number in the outermost team */
    uint32_t region;      /* construct id of the innermost region, 0 outside */
    uint32_t loop;        /* construct id of the current loop */
    uint32_t sections;    /* construct id of the current sections */
    uint32_t taken;       /* sections it was given since its last sections beat: bit n-1
                           * for section n (n >= 32: bit 31), its WORKSHARE beat's aux */
    int64_t  first;       /* first iteration of the open chunk */
    int64_t  step;        /* the current loop's step (its incr; 1 for a doacross loop's
                           * logical iterations; 0 not known) */
    uint32_t count;       /* iterations of the open chunk (0: not known) */
    uint8_t  open;        /* a chunk is open: its beat comes at the next call */
    uint8_t  known;       /* thread is valid */
    const void *fn;       /* the innermost region's outlined function, NULL outside */
    uint32_t inst;        /* the outermost region's instance (hbt_region_instance), 0 outside
                           * it or in a nested region */
    uint32_t bar;         /* team barriers it entered in that region (HBT_PLACE) */
    uint32_t workshares;  /* loops and sections it began in the innermost region (counted
                           * while a fault is injected: gomp_stop_start) */
    struct gomp_region *team;   /* the innermost region's record, shared by its team */
};

/* A wait in progress on this thread, innermost first. A task the runtime runs inside it
 * (libgomp runs queued tasks in a taskwait and in a barrier) cuts it in two: the wait up to
 * the task's start is written then, the task is work, and the wait begins again at the
 * task's end. Without the cut a taskwait's wait spans every task run in it, and a program of
 * recursive tasks (kalign) has waits nested in waits, more of them than its run is long. */
struct gomp_open_wait {
    uint64_t *t0;         /* when it began, or when the last task run in it ended */
    uint32_t id;          /* its records' construct */
    int sync;             /* its records' HBT_SYNC_* */
    uint32_t mark;        /* the monitor's wait mark while it waits */
    struct gomp_open_wait *outer;
};

struct gomp_tls {
    struct gomp_open_wait *wait;     /* the innermost, NULL: none (or a task is running) */
    struct gomp_open_wait closing;   /* the closing barrier of the outermost region it left */
    struct gomp_state s;
    uint32_t *counts;     /* beats per construct id (iter of non-chunk beats) */
    uint32_t ncounts;
    struct { uint64_t key; uint32_t id; } cache[GOMP_CACHE];
    uint64_t left_ns;     /* when it last left an outermost region (0: never) */
    uint32_t depth;       /* regions it is in, through gomp_region_run */
};

static __thread struct gomp_tls gomp_tls __attribute__((tls_model("initial-exec")));

static void gomp_region_run(void *arg);

/* The program's code address a wrapper was called from. An outlined function whose last
 * act is the call (a barrier or a loop's end closing a region's body) may jump to it as
 * a tail call: the return address is then in gomp_region_run, just after its call of
 * the function; the region's function is what names the construct then. */
static inline const void *gomp_site(const struct gomp_tls *g, const void *ra)
{
    if (__builtin_expect((uintptr_t)ra - (uintptr_t)gomp_region_run < 512u, 0) && g->s.fn)
        return g->s.fn;
    return ra;
}

static int (*gomp_level_fn)(void);
static int (*gomp_num_fn)(void);
static int (*gomp_size_fn)(void);
static int (*gomp_ancestor_fn)(int);

static void gomp_after_fork_child(void)
{
    /* the child writes its own file: construct names again, through the table */
    memset(gomp_tls.cache, 0, sizeof gomp_tls.cache);
}

static HBT_COLD void gomp_resolve_omp(void)
{
    static void *c1, *c2, *c3, *c4;
    gomp_level_fn = (int (*)(void))hbt_real(&c1, "omp_get_level");
    gomp_num_fn = (int (*)(void))hbt_real(&c2, "omp_get_thread_num");
    gomp_ancestor_fn = (int (*)(int))hbt_real(&c3, "omp_get_ancestor_thread_num");
    gomp_size_fn = (int (*)(void))hbt_real(&c4, "omp_get_num_threads");
    hbt_fork_child_add(gomp_after_fork_child);
}

/* The calling thread's number in the outermost team. */
static int32_t gomp_thread_now(void)
{
    if (__builtin_expect(!gomp_num_fn, 0))
        gomp_resolve_omp();
    if (!gomp_num_fn)
        return -1;
    int level = gomp_level_fn ? gomp_level_fn() : 1;
    if (level > 1 && gomp_ancestor_fn)
        return gomp_ancestor_fn(1);
    return gomp_num_fn();
}

static inline struct gomp_tls *gomp_self(void)
{
    struct gomp_tls *g = &gomp_tls;
    if (__builtin_expect(!g->s.known, 0)) {
        g->s.thread = gomp_thread_now();   /* outside any region we saw */
        g->s.known = 1;
    }
    return g;
}

static inline uint32_t gomp_construct(struct gomp_tls *g, int kind, const void *addr)
{
    uint64_t key = ((uint64_t)(uintptr_t)addr << 4) | (uint64_t)kind;
    unsigned h = (unsigned)((key >> 4) ^ (key >> 10)) & (GOMP_CACHE - 1);
    if (__builtin_expect(g->cache[h].key == key, 1))
        return g->cache[h].id;
    uint32_t id = hbt_construct_id(kind, addr);
    g->cache[h].key = key;
    g->cache[h].id = id;
    return id;
}

/* The thread's count of beats of construct id, after this one. */
static inline int32_t gomp_count(struct gomp_tls *g, uint32_t id)
{
    if (__builtin_expect(id >= g->ncounts, 0)) {
        uint32_t n = g->ncounts ? g->ncounts : 64;
        while (n <= id)
            n *= 2;
        uint32_t *c = realloc(g->counts, n * sizeof *c);
        if (!c)
            return 0;
        memset(c + g->ncounts, 0, (n - g->ncounts) * sizeof *c);
        g->counts = c;
        g->ncounts = n;
    }
    return (int32_t)++g->counts[id];
}

static inline int gomp_on(void)
{
    return hbt_auto_on(HBT_SRC_OPENMP);
}

/* The real entry, or what the dynamic linker would have said without us. */
static HBT_COLD void gomp_missing(const char *name)
{
    static const char m[] = "hbtrace: symbol lookup error: undefined symbol: ";
    ssize_t w = write(STDERR_FILENO, m, sizeof m - 1);
    w = write(STDERR_FILENO, name, strlen(name));
    w = write(STDERR_FILENO, "\n", 1);
    (void)w;
    _exit(127);
}

/* Once, at the first call of a wrapper (so a program that never calls libgomp stays
 * silent): the GOMP_* functions of the loaded libgomp that this build neither wraps nor
 * knows to need no wrapper (gomp_known.c). The program runs as before; work inside them
 * is not recorded, and the user is told once. */
static HBT_COLD void gomp_check_entries(const void *real)
{
    static int checked;
    if (__atomic_exchange_n(&checked, 1, __ATOMIC_ACQ_REL) || !gomp_on())
        return;
    enum { FEW = 4 };
    const char *first[FEW], *object;
    size_t n = hbt_gomp_check(real, first, FEW, &object);
    if (n == 0)
        return;
    char list[256];
    size_t len = 0;
    list[0] = 0;
    for (size_t k = 0; k < n && k < FEW; k++) {
        int w = snprintf(list + len, sizeof list - len, "%s%s", k ? ", " : "", first[k]);
        if (w < 0 || (size_t)w >= sizeof list - len)
            break;
        len += (size_t)w;
    }
    hbt_warn("hbtrace: %s has %zu OpenMP entry point%s this tracer does not know (%s%s): the "
             "program runs as before, but beats and waits inside them are not recorded",
             object, n, n == 1 ? "" : "s", list, n > FEW ? ", ..." : "");
}

/* Inside the wrapper of `name`: fn_real, the next definition of name. */
#define REAL(name)                                                                \
    static void *real_##name;                                                     \
    __typeof__(&name) fn_real = (__typeof__(&name))__atomic_load_n(&real_##name,  \
                                                                   __ATOMIC_RELAXED); \
    if (__builtin_expect(!fn_real, 0)) {                                          \
        fn_real = (__typeof__(&name))hbt_real(&real_##name, #name);               \
        if (!fn_real)                                                             \
            gomp_missing(#name);                                                  \
        gomp_check_entries((const void *)fn_real);                                \
    }

/* ------------------------------------------------------------------ */
/* loops                                                                */

/* A chunk's iterations: (iend - istart) / step, for any of libgomp's iteration types
 * (an unsigned loop's difference read as signed: a loop counting down has a negative step
 * and difference); the difference itself where the step is not known; 0 where that is not
 * a count a 32-bit field holds. */
static inline uint32_t gomp_chunk_count(int64_t diff, int64_t step)
{
    int64_t n = step ? diff / step : (diff < 0 ? -diff : diff);
    return n > 0 && n <= (int64_t)UINT32_MAX ? (uint32_t)n : 0;
}

static void gomp_workshare_drained(struct gomp_tls *g);
static int gomp_stop_start(const void *ra, const char *entry, long sched);
static int32_t gomp_stop_number(struct gomp_tls *g);

/* A loop's _start returned: note the loop, its step and the chunk, if any. */
static inline void gomp_loop_started(const void *site, bool got, int64_t first, int64_t diff,
                                     int64_t step)
{
    struct gomp_tls *g = gomp_self();
    g->s.loop = gomp_construct(g, HBT_CK_LOOP, site);
    g->s.open = got;
    g->s.first = first;
    g->s.step = step;
    g->s.count = got ? gomp_chunk_count(diff, step) : 0;
    if (!got && __builtin_expect(hbt_inject_armed, 0))
        gomp_workshare_drained(g);
}

/* Entering _next: the beat of the chunk the thread had. */
static inline void gomp_chunk_done(struct gomp_tls *g, const void *site)
{
    if (g->s.open) {
        if (__builtin_expect(!g->s.loop, 0))
            g->s.loop = gomp_construct(g, HBT_CK_LOOP, site);
        hbt_auto_beat_inline(HBT_SRC_OPENMP, HBT_EV_CHUNK, g->s.thread, g->s.loop,
                             (int32_t)g->s.first, g->s.count, 0);   /* inline: the hot path */
    }
}

/* The loop's step and schedule, by the form of the call's arguments: its incr, or 1 for a
 * doacross loop's logical iterations (counts: E4, E3, EG); the generic entries' schedule
 * argument (AG, BG, EG), -1 where the entry's name says it */
#define FORM_A4 incr, -1L
#define FORM_A3 incr, -1L
#define FORM_AG incr, sched
#define FORM_B4 incr, -1L
#define FORM_B3 incr, -1L
#define FORM_BG incr, sched
#define FORM_E4 1, -1L
#define FORM_E3 1, -1L
#define FORM_EG 1, sched
#define LOOP_START(name, params, args, itype) LOOP_START_FORM(name, params, args, itype, FORM_##args)
#define LOOP_START_FORM(...) LOOP_START_STEP(__VA_ARGS__)
#define LOOP_START_STEP(name, params, args, itype, step, sched)                   \
    HBT_EXPORT bool name params                                                   \
    {                                                                             \
        REAL(name)                                               \
        int waited_ = __builtin_expect(hbt_inject_armed, 0)                       \
            && gomp_stop_start(__builtin_return_address(0), #name, sched);        \
        bool r = fn_real args;                                                    \
        if (waited_ && !r)                                                        \
            hbt_inject_skipped();                                                 \
        if (gomp_on())                                                            \
            gomp_loop_started(__builtin_return_address(0), r, r ? (int64_t)*istart : 0, \
                              r ? (int64_t)(itype)(*iend - *istart) : 0, (int64_t)(step)); \
        return r;                                                                 \
    }

#define LOOP_NEXT(name, itype)                                                    \
    HBT_EXPORT bool name(itype *istart, itype *iend)                              \
    {                                                                             \
        REAL(name)                                    \
        if (!gomp_on())                                                           \
            return fn_real(istart, iend);                                         \
        struct gomp_tls *g = gomp_self();                                         \
        gomp_chunk_done(g, gomp_site(g, __builtin_return_address(0)));             \
        if (__builtin_expect(hbt_inject_armed, 0) && hbt_inject_skip_chunk(gomp_stop_number(g), #name)) { g->s.open = 0; hbt_unit_none(0); return false; } \
        bool r = fn_real(istart, iend);                                           \
        if (!r) {                                                                 \
            hbt_unit_none(0);                                                      \
            if (__builtin_expect(hbt_inject_armed, 0))                            \
                gomp_workshare_drained(g);                                             \
        }                                                                         \
        g->s.open = r;                                                            \
        g->s.first = r ? (int64_t)*istart : 0;                                    \
        g->s.count = r ? gomp_chunk_count((int64_t)(itype)(*iend - *istart), g->s.step) : 0; \
        return r;                                                                 \
    }

#define L4 (long start, long end, long incr, long chunk, long *istart, long *iend)
#define A4 (start, end, incr, chunk, istart, iend)
#define L3 (long start, long end, long incr, long *istart, long *iend)
#define A3 (start, end, incr, istart, iend)
#define LG (long start, long end, long incr, long sched, long chunk, long *istart, long *iend, \
            uintptr_t *reductions, void **mem)
#define AG (start, end, incr, sched, chunk, istart, iend, reductions, mem)
#define U4 (bool up, ull start, ull end, ull incr, ull chunk, ull *istart, ull *iend)
#define B4 (up, start, end, incr, chunk, istart, iend)
#define U3 (bool up, ull start, ull end, ull incr, ull *istart, ull *iend)
#define B3 (up, start, end, incr, istart, iend)
#define UG (bool up, ull start, ull end, ull incr, long sched, ull chunk, ull *istart, ull *iend, \
            uintptr_t *reductions, void **mem)
#define BG (up, start, end, incr, sched, chunk, istart, iend, reductions, mem)
#define D4 (unsigned ncounts, long *counts, long chunk, long *istart, long *iend)
#define E4 (ncounts, counts, chunk, istart, iend)
#define D3 (unsigned ncounts, long *counts, long *istart, long *iend)
#define E3 (ncounts, counts, istart, iend)
#define DG (unsigned ncounts, long *counts, long sched, long chunk, long *istart, long *iend, \
            uintptr_t *reductions, void **mem)
#define EG (ncounts, counts, sched, chunk, istart, iend, reductions, mem)
#define V4 (unsigned ncounts, ull *counts, ull chunk, ull *istart, ull *iend)
#define V3 (unsigned ncounts, ull *counts, ull *istart, ull *iend)
#define VG (unsigned ncounts, ull *counts, long sched, ull chunk, ull *istart, ull *iend, \
            uintptr_t *reductions, void **mem)

LOOP_START(GOMP_loop_static_start, L4, A4, long)
LOOP_START(GOMP_loop_dynamic_start, L4, A4, long)
LOOP_START(GOMP_loop_guided_start, L4, A4, long)
LOOP_START(GOMP_loop_runtime_start, L3, A3, long)
LOOP_START(GOMP_loop_nonmonotonic_dynamic_start, L4, A4, long)
LOOP_START(GOMP_loop_nonmonotonic_guided_start, L4, A4, long)
LOOP_START(GOMP_loop_nonmonotonic_runtime_start, L3, A3, long)
LOOP_START(GOMP_loop_maybe_nonmonotonic_runtime_start, L3, A3, long)
LOOP_START(GOMP_loop_start, LG, AG, long)
LOOP_START(GOMP_loop_ordered_static_start, L4, A4, long)
LOOP_START(GOMP_loop_ordered_dynamic_start, L4, A4, long)
LOOP_START(GOMP_loop_ordered_guided_start, L4, A4, long)
LOOP_START(GOMP_loop_ordered_runtime_start, L3, A3, long)
LOOP_START(GOMP_loop_ordered_start, LG, AG, long)
LOOP_START(GOMP_loop_doacross_static_start, D4, E4, long)
LOOP_START(GOMP_loop_doacross_dynamic_start, D4, E4, long)
LOOP_START(GOMP_loop_doacross_guided_start, D4, E4, long)
LOOP_START(GOMP_loop_doacross_runtime_start, D3, E3, long)
LOOP_START(GOMP_loop_doacross_start, DG, EG, long)
LOOP_START(GOMP_loop_ull_static_start, U4, B4, ull)
LOOP_START(GOMP_loop_ull_dynamic_start, U4, B4, ull)
LOOP_START(GOMP_loop_ull_guided_start, U4, B4, ull)
LOOP_START(GOMP_loop_ull_runtime_start, U3, B3, ull)
LOOP_START(GOMP_loop_ull_nonmonotonic_dynamic_start, U4, B4, ull)
LOOP_START(GOMP_loop_ull_nonmonotonic_guided_start, U4, B4, ull)
LOOP_START(GOMP_loop_ull_nonmonotonic_runtime_start, U3, B3, ull)
LOOP_START(GOMP_loop_ull_maybe_nonmonotonic_runtime_start, U3, B3, ull)
LOOP_START(GOMP_loop_ull_start, UG, BG, ull)
LOOP_START(GOMP_loop_ull_ordered_static_start, U4, B4, ull)
LOOP_START(GOMP_loop_ull_ordered_dynamic_start, U4, B4, ull)
LOOP_START(GOMP_loop_ull_ordered_guided_start, U4, B4, ull)
LOOP_START(GOMP_loop_ull_ordered_runtime_start, U3, B3, ull)
LOOP_START(GOMP_loop_ull_ordered_start, UG, BG, ull)
LOOP_START(GOMP_loop_ull_doacross_static_start, V4, E4, ull)
LOOP_START(GOMP_loop_ull_doacross_dynamic_start, V4, E4, ull)
LOOP_START(GOMP_loop_ull_doacross_guided_start, V4, E4, ull)
LOOP_START(GOMP_loop_ull_doacross_runtime_start, V3, E3, ull)
LOOP_START(GOMP_loop_ull_doacross_start, VG, EG, ull)

LOOP_NEXT(GOMP_loop_static_next, long)
LOOP_NEXT(GOMP_loop_dynamic_next, long)
LOOP_NEXT(GOMP_loop_guided_next, long)
LOOP_NEXT(GOMP_loop_runtime_next, long)
LOOP_NEXT(GOMP_loop_nonmonotonic_dynamic_next, long)
LOOP_NEXT(GOMP_loop_nonmonotonic_guided_next, long)
LOOP_NEXT(GOMP_loop_nonmonotonic_runtime_next, long)
LOOP_NEXT(GOMP_loop_maybe_nonmonotonic_runtime_next, long)
LOOP_NEXT(GOMP_loop_ordered_static_next, long)
LOOP_NEXT(GOMP_loop_ordered_dynamic_next, long)
LOOP_NEXT(GOMP_loop_ordered_guided_next, long)
LOOP_NEXT(GOMP_loop_ordered_runtime_next, long)
LOOP_NEXT(GOMP_loop_ull_static_next, ull)
LOOP_NEXT(GOMP_loop_ull_dynamic_next, ull)
LOOP_NEXT(GOMP_loop_ull_guided_next, ull)
LOOP_NEXT(GOMP_loop_ull_runtime_next, ull)
LOOP_NEXT(GOMP_loop_ull_nonmonotonic_dynamic_next, ull)
LOOP_NEXT(GOMP_loop_ull_nonmonotonic_guided_next, ull)
LOOP_NEXT(GOMP_loop_ull_nonmonotonic_runtime_next, ull)
LOOP_NEXT(GOMP_loop_ull_maybe_nonmonotonic_runtime_next, ull)
LOOP_NEXT(GOMP_loop_ull_ordered_static_next, ull)
LOOP_NEXT(GOMP_loop_ull_ordered_dynamic_next, ull)
LOOP_NEXT(GOMP_loop_ull_ordered_guided_next, ull)
LOOP_NEXT(GOMP_loop_ull_ordered_runtime_next, ull)

/* ------------------------------------------------------------------ */
/* barriers and the ends of worksharing constructs                     */

/* Around a call that may wait: the beat before it (ev: 0 none), the wait after. */
static inline uint64_t gomp_arrive(struct gomp_tls *g, int ev, uint32_t id, uint32_t aux)
{
    uint64_t t0 = hbt_now_ns();
    if (ev) {
        hbt_auto_beat_aux_at(HBT_SRC_OPENMP, ev, g->s.thread, id, gomp_count(g, id), aux, t0);
        if (__builtin_expect(hbt_inject_armed, 0))
            t0 = hbt_now_ns();   /* a fault injected at the beat ran in this thread: no wait */
    } else if (__builtin_expect(hbt_inject_armed, 0)) {
        hbt_inject_before_wait(g->s.thread);   /* slow: the work that ends here */
        t0 = hbt_now_ns();
    }
    return t0;
}

static inline void gomp_leave(struct gomp_tls *g, int sync, uint32_t id, uint64_t t0)
{
    if (sync) {
        uint64_t t1 = hbt_now_ns();
        hbt_wait_end();
        hbt_unit_after_wait(t1);
        hbt_auto_wait_at(HBT_SRC_OPENMP, sync, g->s.thread, id, t1 - t0, t1);
    }
}

/* `decl` is `type rv_ =` (RV) and `ret` is rv_, or both empty for a void function; `aux`
 * the beat's aux (the sections a thread was given, at a sections construct's end). */
#define WAITING(type, name, params, args, decl, ret, before, ev, sync, idexpr)         \
    WAITING_AUX(type, name, params, args, decl, ret, before, ev, sync, idexpr, 0)
#define WAITING_AUX(type, name, params, args, decl, ret, before, ev, sync, idexpr, aux) \
    WAITING_AFTER(type, name, params, args, decl, ret, before, ev, sync, idexpr, aux, NOTHING)
/* `after`: run once the real function returned, before the wait's end */
#define WAITING_AFTER(type, name, params, args, decl, ret, before, ev, sync, idexpr, aux, after) \
    HBT_EXPORT type name params                                                   \
    {                                                                             \
        REAL(name)                                                                \
        if (!gomp_on())                                                           \
            return fn_real args;                                                  \
        struct gomp_tls *g = gomp_self();                                         \
        const void *site = gomp_site(g, __builtin_return_address(0));             \
        (void)site;                                                               \
        before;                                                                   \
        uint32_t id = idexpr;                                                     \
        uint64_t t0 = gomp_arrive(g, ev, id, aux);                                \
        if (sync == HBT_SYNC_BARRIER && g->s.inst)   /* its team's next barrier */ \
            hbt_place_mark(HBT_PLACE(g->s.inst, ++g->s.bar));                     \
        if (sync)   /* after the beat and a fault injected there: it waits now */ \
            hbt_wait_begin(sync);                                                 \
        struct gomp_open_wait w_ = {&t0, id, sync, (uint32_t)sync, g->wait};      \
        if (sync)                                                                 \
            g->wait = &w_;                                                        \
        decl fn_real args;                                                        \
        if (sync)                                                                 \
            g->wait = w_.outer;                                                   \
        after;                                                                    \
        gomp_leave(g, sync, id, t0);                                              \
        return ret;                                                               \
    }

#define CLOSE_CHUNK gomp_chunk_done(g, site); g->s.open = 0
#define NOTHING     (void)0
#define RV(type)    type rv_ =
#define VOIDWAIT(name, params, args, before, ev, sync, idexpr)                    \
    WAITING(void, name, params, args, , , before, ev, sync, idexpr)

/* the sections a thread was given since its last sections beat, for this one */
static inline uint32_t gomp_sections_taken(struct gomp_tls *g)
{
    uint32_t taken = g->s.taken;
    g->s.taken = 0;
    return taken;
}

#define LOOP_ID     (g->s.loop ? g->s.loop : gomp_construct(g, HBT_CK_LOOP, site))
#define SECTIONS_ID (g->s.sections ? g->s.sections : gomp_construct(g, HBT_CK_SECTIONS, site))

VOIDWAIT(GOMP_loop_end, (void), (), CLOSE_CHUNK, 0, HBT_SYNC_BARRIER, LOOP_ID)
VOIDWAIT(GOMP_loop_end_nowait, (void), (), CLOSE_CHUNK, 0, 0, LOOP_ID)
WAITING(bool, GOMP_loop_end_cancel, (void), (), RV(bool), rv_, CLOSE_CHUNK, 0, HBT_SYNC_BARRIER,
        LOOP_ID)
VOIDWAIT(GOMP_barrier, (void), (), NOTHING, HBT_EV_WORKSHARE, HBT_SYNC_BARRIER,
         gomp_construct(g, HBT_CK_BARRIER, site))
WAITING(bool, GOMP_barrier_cancel, (void), (), RV(bool), rv_, NOTHING, HBT_EV_WORKSHARE,
        HBT_SYNC_BARRIER, gomp_construct(g, HBT_CK_BARRIER, site))
#define TAKEN       gomp_sections_taken(g)
WAITING_AUX(void, GOMP_sections_end, (void), (), , , NOTHING, HBT_EV_WORKSHARE, HBT_SYNC_BARRIER,
            SECTIONS_ID, TAKEN)
WAITING_AUX(void, GOMP_sections_end_nowait, (void), (), , , NOTHING, HBT_EV_WORKSHARE, 0,
            SECTIONS_ID, TAKEN)
WAITING_AUX(bool, GOMP_sections_end_cancel, (void), (), RV(bool), rv_, NOTHING, HBT_EV_WORKSHARE,
            HBT_SYNC_BARRIER, SECTIONS_ID, TAKEN)
/* every thread calls it; the one that gets the single (NULL) returns at once, and meets the
 * others at the barrier in GOMP_single_copy_end: that one counts it */
#define NOT_THE_BARRIER_IF_MINE                                                   \
    if (!rv_ && g->s.inst)                                                        \
        hbt_place_mark(HBT_PLACE(g->s.inst, --g->s.bar))
WAITING_AFTER(void *, GOMP_single_copy_start, (void), (), RV(void *), rv_, NOTHING, 0, HBT_SYNC_BARRIER,
              gomp_construct(g, HBT_CK_SINGLE, site), 0, NOT_THE_BARRIER_IF_MINE)
VOIDWAIT(GOMP_single_copy_end, (void *data), (data), NOTHING, 0, HBT_SYNC_BARRIER,
         gomp_construct(g, HBT_CK_SINGLE, site))
VOIDWAIT(GOMP_critical_start, (void), (), NOTHING, 0, HBT_SYNC_CRITICAL,
         gomp_construct(g, HBT_CK_CRITICAL, site))
VOIDWAIT(GOMP_critical_name_start, (void **pptr), (pptr), NOTHING, 0, HBT_SYNC_CRITICAL,
         gomp_construct(g, HBT_CK_CRITICAL, site))
/* OpenMP locks: a LOCK beat as the thread asks for one (before it has it: a fault injected
 * there holds nobody up), then its wait for it, a critical wait of the same construct; in a
 * parallel region only (a thread of no team has no OpenMP number of its own: every pthread
 * would be thread 0). libomp exports them too, and reports them to the OMPT tool (ompt.c): a
 * gcc program's calls only, here. */
#define LOCK_WRAPPER(name)                                                        \
    HBT_EXPORT void name(void *lock)                                              \
    {                                                                             \
        REAL(name)                                                                \
        struct gomp_tls *g = gomp_on() && !hbt_ompt_on() ? gomp_self() : NULL;    \
        if (!g || !g->depth) {                                                    \
            fn_real(lock);                                                        \
            return;                                                               \
        }                                                                         \
        uint32_t id = gomp_construct(g, HBT_CK_LOCK, gomp_site(g, __builtin_return_address(0))); \
        uint64_t t0 = gomp_arrive(g, HBT_EV_LOCK, id, 0);                         \
        hbt_wait_begin(HBT_SYNC_CRITICAL);                                        \
        fn_real(lock);                                                            \
        gomp_leave(g, HBT_SYNC_CRITICAL, id, t0);                                 \
    }
LOCK_WRAPPER(omp_set_lock)
LOCK_WRAPPER(omp_set_nest_lock)
VOIDWAIT(GOMP_ordered_start, (void), (), NOTHING, 0, HBT_SYNC_ORDERED,
         gomp_construct(g, HBT_CK_ORDERED, site))
VOIDWAIT(GOMP_taskwait, (void), (), NOTHING, 0, HBT_SYNC_TASKWAIT,
         gomp_construct(g, HBT_CK_TASK, site))
VOIDWAIT(GOMP_taskwait_depend, (void **depend), (depend), NOTHING, 0, HBT_SYNC_TASKWAIT,
         gomp_construct(g, HBT_CK_TASK, site))
VOIDWAIT(GOMP_taskgroup_end, (void), (), NOTHING, 0, HBT_SYNC_TASKWAIT,
         gomp_construct(g, HBT_CK_TASK, site))

/* sections: the construct is the _start call site. libgomp hands each thread its next
 * section as the return value of _start and _next (1, 2, ...; 0: none left); the combined
 * GOMP_parallel_sections calls only _next, from the outlined function. The sections a
 * thread was given go in its beat at the construct's end (aux), so that a unit of work is
 * compared with units of the same sections: a construct's sections differ in length, and
 * whichever thread comes first takes the first one. */
static inline unsigned gomp_section_taken(struct gomp_tls *g, unsigned n)
{
    if (n)
        g->s.taken |= 1u << (n < 32u ? n - 1u : 31u);
    return n;
}

#define SECTIONS_START(name, params, args)                                        \
    HBT_EXPORT unsigned name params                                               \
    {                                                                             \
        REAL(name)                                                                \
        int waited_ = __builtin_expect(hbt_inject_armed, 0)                       \
            && gomp_stop_start(__builtin_return_address(0), #name, -1L);          \
        unsigned n = fn_real args;                                                \
        if (waited_ && !n)                                                        \
            hbt_inject_skipped();                                                 \
        if (gomp_on()) {                                                          \
            struct gomp_tls *g = gomp_self();                                     \
            g->s.sections = gomp_construct(g, HBT_CK_SECTIONS, gomp_site(g, __builtin_return_address(0))); \
            g->s.taken = 0;                                                       \
            if (!n && __builtin_expect(hbt_inject_armed, 0))                      \
                gomp_workshare_drained(g);                                        \
            n = gomp_section_taken(g, n);                                         \
        }                                                                         \
        return n;                                                                 \
    }

SECTIONS_START(GOMP_sections_start, (unsigned count), (count))
SECTIONS_START(GOMP_sections2_start, (unsigned count, uintptr_t *reductions, void **mem),
               (count, reductions, mem))

HBT_EXPORT unsigned GOMP_sections_next(void)
{
    REAL(GOMP_sections_next)
    if (!gomp_on())
        return fn_real();
    struct gomp_tls *g = gomp_self();
    if (__builtin_expect(hbt_inject_armed, 0) && hbt_inject_skip_chunk(gomp_stop_number(g), "GOMP_sections_next"))
        return 0;   /* a stopped thread takes no more sections: the others take them */
    unsigned n = fn_real();
    if (!n && __builtin_expect(hbt_inject_armed, 0))
        gomp_workshare_drained(g);
    return gomp_section_taken(g, n);
}

/* ------------------------------------------------------------------ */
/* parallel regions                                                     */

struct gomp_region {
    void (*fn)(void *);
    void *data;
    uint32_t id;          /* the region's construct (parallel, fn) */
    uint32_t loop;        /* combined parallel loop: its construct */
    uint32_t sections;    /* combined parallel sections: its construct */
    int64_t step;         /* combined parallel loop: its step */
    const struct gomp_tls *master;
    uint64_t master_done; /* when the master's fn returned */
    uint32_t inst;        /* an outermost region's instance (hbt_region_instance), 0: nested */
    uint8_t outermost;    /* opened in the program's serial part (not in another region,
                           * nor in a task run in the barrier that closes one) */
    /* while a fault is injected: the loops and sections of the region (its threads begin
     * them in one order) up to which one of its threads found no chunk or section left (a
     * futex word), and whether a stopped victim waits on it (gomp_stop_start) */
    uint32_t drained;
    uint32_t stop_waits;
};

/* Longest a stopped victim waits for its team to take a loop's chunks (then it takes the
 * chunk _start hands it, as without the wait): a loop whose team never finds its chunks all
 * taken (a loop its team cancelled) */
#define GOMP_STOP_WAIT_MAX_NS (60ull * 1000000000ull)

/* The calling thread found no chunk left in its current loop, or no section in its
 * sections: a stopped victim that waits for that (gomp_stop_start) goes on. */
static HBT_COLD void gomp_workshare_drained(struct gomp_tls *g)
{
    struct gomp_region *r = g->s.team;
    if (!r)
        return;
    uint32_t d = __atomic_load_n(&r->drained, __ATOMIC_RELAXED);
    while (d < g->s.workshares && !__atomic_compare_exchange_n(&r->drained, &d, g->s.workshares, 1, __ATOMIC_SEQ_CST,
                                                          __ATOMIC_RELAXED))
        ;
    if (__atomic_load_n(&r->stop_waits, __ATOMIC_SEQ_CST))
        syscall(SYS_futex, &r->drained, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* The number a stop fault knows the calling thread by (inject.c), while it may keep it
 * from work: its number in the outermost team, in a team of 2 threads at least (a team of
 * one has nobody to take its chunks); in a nested team, only for its master. The other
 * threads of a nested team in the victim's thread have its outermost number too, and would
 * skip the chunks the master leaves them (omp_beats.c's nested loop: its inner team's
 * iterations were all lost). -1 otherwise. */
static HBT_COLD int32_t gomp_stop_number(struct gomp_tls *g)
{
    struct gomp_region *r = g->s.team;
    if (!r || !gomp_size_fn || gomp_size_fn() < 2 || (!r->outermost && (!gomp_num_fn || gomp_num_fn() != 0)))
        return -1;
    return g->s.thread;
}

/* Before a loop's or sections' _start, while a fault is injected (entry: its name; sched:
 * inject.h's hbt_inject_stop_start): counts the thread's worksharing constructs in its
 * region, and a stopped victim waits there until a teammate found no chunk (section) left,
 * so that _start hands it none. libgomp hands a thread its first chunk (section) inside the
 * call that sets the construct up, and cannot take it back: GraphicsMagick's stopped
 * victims went on running half of each guided loop of 2 threads, and a sections
 * construct's first section, skipped, was lost. The wait is a barrier's: the victim waits
 * for its team, as it then does at the construct's end. Returns whether it waited. */
static HBT_COLD int gomp_stop_start(const void *ra, const char *entry, long sched)
{
    if (!gomp_on())
        return 0;
    struct gomp_tls *g = gomp_self();
    uint32_t n = ++g->s.workshares;
    struct gomp_region *r = g->s.team;
    if (!r || !hbt_inject_stop_start(gomp_stop_number(g), entry, sched))
        return 0;
    uint32_t id = gomp_construct(g, HBT_CK_LOOP, gomp_site(g, ra));
    uint64_t t0 = hbt_now_ns();
    hbt_wait_begin(HBT_SYNC_BARRIER);
    __atomic_store_n(&r->stop_waits, 1, __ATOMIC_SEQ_CST);
    uint32_t d;
    while ((d = __atomic_load_n(&r->drained, __ATOMIC_SEQ_CST)) < n && hbt_now_ns() - t0 < GOMP_STOP_WAIT_MAX_NS) {
        struct timespec ts = {0, 10 * 1000 * 1000};   /* (a wake-up missed costs 10 ms) */
        syscall(SYS_futex, &r->drained, FUTEX_WAIT_PRIVATE, d, &ts, NULL, 0);
    }
    gomp_leave(g, HBT_SYNC_BARRIER, id, t0);
    return 1;
}

/* fn(data) on every thread of the team, between its state and its beat. */
static void gomp_region_run(void *arg)
{
    struct gomp_region *r = arg;
    struct gomp_tls *g = &gomp_tls;
    struct gomp_state saved = g->s;   /* a nested region on this thread */
    g->s.thread = gomp_thread_now();
    g->s.known = 1;
    g->s.region = r->id;
    g->s.fn = (const void *)r->fn;
    g->s.loop = r->loop;
    g->s.step = r->step;
    g->s.sections = r->sections;
    g->s.taken = 0;
    g->s.open = 0;
    int outermost = r->outermost;
    g->depth++;
    struct gomp_open_wait *saved_wait = g->wait == &g->closing ? NULL : g->wait;
    g->wait = NULL;
    g->s.inst = outermost ? r->inst : 0;
    g->s.bar = 0;
    g->s.team = r;
    g->s.workshares = r->loop || r->sections ? 1 : 0;   /* a combined loop or sections: the first */
    if (outermost)
        hbt_team_mark(gomp_size_fn ? (uint32_t)gomp_size_fn() : 0);
    hbt_place_mark(HBT_PLACE(g->s.inst, 0));   /* (not known in a nested region) */
    hbt_wait_mark(0);   /* at work in the region */
    if (outermost && g->left_ns) {   /* the time since it left the previous outermost region */
        uint64_t t0 = hbt_now_ns();
        hbt_auto_wait_at(HBT_SRC_OPENMP, HBT_SYNC_OUTSIDE, g->s.thread, r->id, t0 - g->left_ns, t0);
    }
    if (__builtin_expect(hbt_inject_armed, 0)) hbt_inject_waited(0);   /* a unit of work starts */
    r->fn(r->data);
    uint64_t now = hbt_now_ns();
    if (g->s.open)   /* a chunk of a combined loop left open (cancellation) */
        gomp_chunk_done(g, (const void *)r->fn);
    hbt_auto_beat_at(HBT_SRC_OPENMP, HBT_EV_IMPLICIT, g->s.thread, r->id, gomp_count(g, r->id), now);
    if (__builtin_expect(hbt_inject_armed, 0))   /* a fault injected at the beat ran here: no wait */
        now = hbt_now_ns();
    if (g == r->master)
        r->master_done = now;
    else if (outermost)   /* a worker leaves for the closing barrier and the pool */
        g->left_ns = now;
    /* the closing barrier (and a worker of the outermost team the pool after it) */
    if (outermost)
        hbt_place_mark(HBT_PLACE(g->s.inst, HBT_PLACE_END));
    uint32_t mark = outermost && g != r->master ? HBT_SYNC_OUTSIDE : HBT_SYNC_BARRIER;
    hbt_wait_mark(mark);
    g->wait = saved_wait;
    if (outermost) {   /* tasks still queued run in the closing barrier: they cut its wait */
        g->closing = (struct gomp_open_wait){g == r->master ? &r->master_done : &g->left_ns,
                                             r->id, HBT_SYNC_BARRIER, mark, NULL};
        g->wait = &g->closing;
    }
    g->depth--;
    g->s = saved;
}

/* loop: a combined parallel loop's step (its incr), 0 for any other region */
static inline void gomp_region_init(struct gomp_region *r, void (*fn)(void *), void *data,
                                    const void *site, int64_t loop, int sections)
{
    struct gomp_tls *g = gomp_self();
    r->fn = fn;
    r->data = data;
    r->id = gomp_construct(g, HBT_CK_PARALLEL, (const void *)fn);
    r->loop = loop ? gomp_construct(g, HBT_CK_LOOP, site) : 0;
    r->step = loop;
    r->sections = sections ? gomp_construct(g, HBT_CK_SECTIONS, site) : 0;
    r->master = g;
    r->master_done = 0;
    /* the runtime's level, not this file's depth: a task run in the closing barrier of a
     * region is in that region still, after gomp_region_run returned (kalign) */
    if (__builtin_expect(!gomp_num_fn, 0))
        gomp_resolve_omp();
    r->outermost = gomp_level_fn ? gomp_level_fn() == 0 : g->depth == 0;
    r->inst = r->outermost ? hbt_region_instance() : 0;
    r->drained = 0;
    r->stop_waits = 0;
}

/* The master's time from its fn's return to the end of the region. */
static inline void gomp_region_end(struct gomp_region *r)
{
    if (r->master_done) {
        uint64_t t1 = hbt_now_ns();
        hbt_auto_wait_at(HBT_SRC_OPENMP, HBT_SYNC_BARRIER, r->master->s.thread, r->id,
                         t1 - r->master_done, t1);
        struct gomp_tls *g = &gomp_tls;
        if (r->outermost && g->wait == &g->closing)
            g->wait = NULL;
        if (r->outermost)   /* the master leaves the outermost region for the serial part */
            g->left_ns = t1;
        /* the serial part makes no automatic beat: the monitor waits for the next region;
         * a nested region's master is back at work in the enclosing one */
        else   /* back at its place in the enclosing region */
            hbt_place_mark(HBT_PLACE(g->s.inst, g->s.bar));
        hbt_wait_mark(r->outermost ? HBT_SYNC_OUTSIDE : 0);
    }
}

void hbt_gomp_at_exit(void)
{
    struct gomp_tls *g = &gomp_tls;
    if (g->wait == &g->closing)
        g->wait = NULL;
    if (g->depth || !g->left_ns || !gomp_on())
        return;
    uint64_t t0 = hbt_now_ns();
    hbt_auto_wait_at(HBT_SRC_OPENMP, HBT_SYNC_OUTSIDE, g->s.known ? g->s.thread : 0, 0, t0 - g->left_ns, t0);
    g->left_ns = 0;
}

/* decl, ret: as for WAITING; loop: a combined parallel loop's step (its incr), 0 else */
#define PARALLEL(type, name, params, args, decl, ret, loop, sections)             \
    HBT_EXPORT type name params                                                   \
    {                                                                             \
        REAL(name)                                                                \
        if (!gomp_on())                                                           \
            return fn_real args;                                                  \
        struct gomp_region region;                                                \
        gomp_region_init(&region, fn, data, __builtin_return_address(0), loop, sections); \
        fn = gomp_region_run;                                                     \
        data = &region;                                                           \
        decl fn_real args;                                                        \
        gomp_region_end(&region);                                                 \
        return ret;                                                               \
    }

#define PL4 (void (*fn)(void *), void *data, unsigned nthreads, long start, long end, long incr, \
             long chunk, unsigned flags)
#define PA4 (fn, data, nthreads, start, end, incr, chunk, flags)
#define PL3 (void (*fn)(void *), void *data, unsigned nthreads, long start, long end, long incr, \
             unsigned flags)
#define PA3 (fn, data, nthreads, start, end, incr, flags)
#define PVOID(name, params, args, loop, sections)                                 \
    PARALLEL(void, name, params, args, , , loop, sections)

PVOID(GOMP_parallel, (void (*fn)(void *), void *data, unsigned nthreads, unsigned flags),
      (fn, data, nthreads, flags), 0, 0)
PARALLEL(unsigned, GOMP_parallel_reductions,
         (void (*fn)(void *), void *data, unsigned nthreads, unsigned flags),
         (fn, data, nthreads, flags), RV(unsigned), rv_, 0, 0)
PVOID(GOMP_parallel_sections,
      (void (*fn)(void *), void *data, unsigned nthreads, unsigned count, unsigned flags),
      (fn, data, nthreads, count, flags), 0, 1)
PVOID(GOMP_parallel_loop_static, PL4, PA4, incr, 0)
PVOID(GOMP_parallel_loop_dynamic, PL4, PA4, incr, 0)
PVOID(GOMP_parallel_loop_guided, PL4, PA4, incr, 0)
PVOID(GOMP_parallel_loop_nonmonotonic_dynamic, PL4, PA4, incr, 0)
PVOID(GOMP_parallel_loop_nonmonotonic_guided, PL4, PA4, incr, 0)
PVOID(GOMP_parallel_loop_runtime, PL3, PA3, incr, 0)
PVOID(GOMP_parallel_loop_nonmonotonic_runtime, PL3, PA3, incr, 0)
PVOID(GOMP_parallel_loop_maybe_nonmonotonic_runtime, PL3, PA3, incr, 0)

/* ------------------------------------------------------------------ */
/* explicit tasks                                                       */

/*
 * The task's function is replaced by gomp_task_run and its data by a header
 * followed (at `offset`, aligned as the task asked) by the task's own data.
 * libgomp copies data with the copy function it is given (it always is:
 * gomp_task_copy), into a buffer of arg_size bytes, both for a deferred task
 * and for one it runs at once; gomp_task_copy writes the header and then the
 * task's data the way the program asked (its copy function, or memcpy).
 */
struct gomp_task_head {
    void (*fn)(void *);
    void (*cpyfn)(void *, void *);
    void *data;           /* the program's data (source side only) */
    long size;            /* the program's arg_size */
    long offset;          /* of the program's data in the copy */
    uint32_t id;
    int32_t thread;       /* unused: the running thread records its own */
    const struct gomp_tls *maker;   /* the thread that made it */
};

static void gomp_task_copy(void *dst, void *src)
{
    const struct gomp_task_head *h = src;
    struct gomp_task_head *d = dst;
    *d = *h;
    d->data = NULL;
    char *to = (char *)dst + h->offset;
    if (h->cpyfn)
        h->cpyfn(to, h->data);
    else if (h->size > 0)
        memcpy(to, h->data, (size_t)h->size);
}

static void gomp_task_run(void *arg)
{
    struct gomp_task_head *h = arg;
    struct gomp_tls *g = gomp_self();
    int unshared = h->maker == g;   /* no teammate took it */
    struct gomp_open_wait *w = g->wait;
    uint64_t t = 0;
    if (w) {   /* run inside a wait: the wait so far is one, the task is work */
        t = hbt_now_ns();
        hbt_wait_mark(0);
        if (t > *w->t0)
            hbt_auto_wait_at(HBT_SRC_OPENMP, w->sync, g->s.thread, w->id, t - *w->t0, t);
        g->wait = NULL;
    }
    struct hbt_unit_saved sv;
    int unit = __builtin_expect(hbt_mon_hot.openmp, 0) &&
               hbt_unit_task_begin(&sv, h->id, t ? t : hbt_now_ns());   /* (the monitor's) */
    h->fn((char *)arg + h->offset);
    if (unit)
        hbt_tls.unit_end = &sv;   /* the task's beat ends its unit (hbt_unit_beat) */
    hbt_auto_beat_aux_at(HBT_SRC_OPENMP, HBT_EV_TASK, g->s.thread, h->id, gomp_count(g, h->id),
                         unshared ? HBT_TASK_UNSHARED : 0u, 0);
    if (unit && hbt_tls.unit_end == &sv) {   /* (no beat: no room for it) */
        hbt_unit_task_end(&sv, h->id, hbt_now_ns());
        hbt_tls.unit_end = NULL;
    }
    if (w) {   /* the wait goes on */
        g->wait = w;
        *w->t0 = hbt_now_ns();
        hbt_wait_mark(w->mark);
    }
}

HBT_EXPORT void GOMP_task(void (*fn)(void *), void *data, void (*cpyfn)(void *, void *),
                          long arg_size, long arg_align, bool if_clause, unsigned flags,
                          void **depend, int priority, void *detach)
{
    REAL(GOMP_task)
    if (!gomp_on() || arg_align <= 0 || (arg_align & (arg_align - 1)) || arg_size < 0) {
        fn_real(fn, data, cpyfn, arg_size, arg_align, if_clause, flags, depend, priority,
                detach);
        return;
    }
    struct gomp_tls *g = gomp_self();
    long align = arg_align > (long)_Alignof(struct gomp_task_head)
                     ? arg_align : (long)_Alignof(struct gomp_task_head);
    long offset = ((long)sizeof(struct gomp_task_head) + align - 1) & ~(align - 1);
    struct gomp_task_head h = {
        .fn = fn, .cpyfn = cpyfn, .data = data, .size = arg_size, .offset = offset,
        .id = gomp_construct(g, HBT_CK_TASK, (const void *)fn), .thread = g->s.thread,
        .maker = g,
    };
    fn_real(gomp_task_run, &h, gomp_task_copy, offset + arg_size, align, if_clause, flags,
            depend, priority, detach);
}
