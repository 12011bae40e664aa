/*
 * ompt.c -- automatic beats and waits of programs on LLVM's OpenMP runtime
 * (libomp, clang -fopenmp; issue 15), through its tool interface OMPT. The
 * libgomp (GCC) programs get the same records from gomp.c.
 *
 * libomp calls ompt_start_tool when it initialises: ours is found when this
 * library is preloaded, or named in OMP_TOOL_LIBRARIES. It stays inactive
 * with any other runtime (libgomp calls no tool at all) and when
 * HBTRACE_BEATS leaves out openmp. What gives what (docs/formats.md,
 * "Automatic beats and waits"):
 *
 *   __kmpc_dispatch_next_* asks for a chunk    beat CHUNK for the chunk the thread had
 *                                              (iter: its first iteration, aux its
 *                                              iterations), as libgomp's _next
 *   work end: loop that took no chunk from the beat WORKSHARE
 *     dispatcher (static), sections, single, workshare
 *   task_schedule: an explicit task completed  beat TASK
 *   implicit_task end (not the initial task)   beat IMPLICIT
 *   sync_region_wait begin..end                wait BARRIER (barriers) or TASKWAIT
 *                                              (taskwait, taskgroup)
 *   mutex_acquire..acquired                    wait CRITICAL (critical), ORDERED
 *   mutex_acquire of a lock (omp_set_lock,     beat LOCK, then wait CRITICAL until
 *     omp_set_nest_lock)                       mutex_acquired (or nest_lock: taken again)
 *   flush, the same one again and again        wait FLAG (a spin on a flag in the
 *                                              program's own code)
 *
 * libomp 14 offers no ompt_callback_dispatch, so the chunks come from the
 * preloaded wrappers of libomp's loop dispatcher __kmpc_dispatch_next_{4,4u,8,8u}
 * (the calls clang emits for dynamic, guided, runtime, auto and ordered
 * schedules); a loop whose threads called it is dynamic, the others are
 * static. Without the preload (OMP_TOOL_LIBRARIES only) the wrappers are not
 * reached, and a dynamic loop gives one WORKSHARE beat per thread instead.
 *
 * `thread` is the OpenMP thread number in the outermost team (a nested
 * team's threads take that of the outer thread that opened it: libomp's
 * omp_get_ancestor_thread_num(1) as the implicit task begins); it is kept
 * per OS thread in a small stack of frames, one per implicit task, and so is
 * the count of each construct's beats that `iter` carries. Nothing is
 * stored in the runtime's ompt_data_t slots: a tool we chain to has them
 * all. A team's workers learn the code address of its region through a
 * small table keyed by the team's parallel_data address, written by the
 * primary thread as its implicit task begins; explicit tasks, that of their
 * task construct through another, keyed by their task_data address.
 *
 * Another tool: where libomp would find another ompt_start_tool after ours
 * (RTLD_NEXT, or OMP_TOOL_LIBRARIES, which libomp no longer reads once ours
 * answered), ours starts it and hands on its callbacks, initialize and
 * finalize. Where the program's own ompt_start_tool is found before ours,
 * ours is off, and the constructor says so once.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <sched.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "autobeat.h"   /* after internal.h: its inline record path */
#include "ompt_abi.h"

/* two OpenMP routines (omp.h is not needed to build the tracer) */
extern int omp_get_level(void) __attribute__((weak));
extern int omp_get_ancestor_thread_num(int level) __attribute__((weak));

#define HBT_OMPT_DEPTH 8u      /* nesting levels kept; deeper ones share the last frame (the
                                  frames are in the TLS, which must fit the static TLS block a
                                  dlopen through OMP_TOOL_LIBRARIES finds left) */
#define HBT_OMPT_WAITS 1024u   /* sync-region waits open at once (a task run inside a
                                  barrier may wait in a taskwait, and so on: recursive
                                  tasks); deeper ones are not written */
#define HBT_OMPT_REGIONS 1024u /* the parallel-region table, a power of 2 */

/* One implicit task of the calling OS thread. */
struct hbt_ompt_frame {
    int32_t thread;            /* OpenMP thread number in the outermost team */
    uint32_t level;            /* nesting level of its region, from 1 */
    uint32_t region;           /* construct id of the parallel region */
    uint32_t loop;             /* construct id of the worksharing construct it is in */
    const void *region_ra;     /* the region's code address (its end barrier's name) */
    const void *team;          /* the team's parallel_data, the key of hbt_ompt_regions */
    uint32_t inst;             /* an outermost region's instance (hbt_region_instance), 0 in a
                                  nested region or not learnt yet */
    uint32_t bar;              /* team barriers it entered in the region (HBT_PLACE) */
    uint32_t chunk_first;      /* the chunk it has of the current loop: its first iteration (the
                                  low 32 bits, as its beat's iter) ... */
    uint32_t chunk_count;      /* ... and iterations (0: not known) */
    uint8_t dynamic;           /* the current loop took its chunks from the dispatcher */
    uint8_t chunk_open;        /* it has a chunk: its beat comes at its next call */
    uint8_t many;              /* an outermost team of 2 threads or more */
    uint32_t team_size;        /* threads in its team */
    uint8_t shared;            /* while a fault is injected: the current dispatcher loop hands
                                  its chunks to whoever asks (hbt_inject_kmp_shared) */
    uint32_t dispatches;       /* ... and the dispatcher loops it began in the region */
};

/* A sync-region wait open on this thread. A task the runtime starts inside the innermost
 * one cuts it (gomp.c, struct gomp_open_wait): the wait up to the task is written, and the
 * wait begins again when the tasks begun in it have all completed. */
struct hbt_ompt_wait {
    uint64_t start;            /* when it began, or when the last task run in it ended */
    const void *ra;            /* its code address at its beginning (NULL: a region's end) */
    uint32_t tasks;            /* tasks begun in it and not completed */
    uint8_t sync;              /* HBT_SYNC_* */
};

/* An explicit task running on this thread, for the online monitor's unit of work
 * (autobeat.h, hbt_unit_task_begin): the task (its task_data) and the unit the thread was
 * in when it began. A task run inside another's taskwait comes after it. */
struct hbt_ompt_unit {
    const void *key;
    struct hbt_unit_saved sv;
};
#define HBT_OMPT_UNITS 1024u   /* tasks running nested at once that are followed, at most */

struct hbt_ompt_tls {
    uint32_t depth;            /* frames in use; frame[depth-1] is the current one */
    uint32_t nwaits;
    struct hbt_ompt_frame frame[HBT_OMPT_DEPTH];
    /* the open waits, outermost first, waits_cap of them held (on the heap, grown as they
     * nest: the library's TLS must fit the static TLS block a dlopen finds left) */
    struct hbt_ompt_wait *waits;
    uint32_t waits_cap;
    uint32_t me;               /* hbt_ompt_me, 0 until asked */
    uint64_t mutex_start;
    const void *mutex_ra;
    uint64_t lock_start;       /* it asked for an OpenMP lock then (0: it is not waiting for one) */
    uint32_t lock_id;          /* that lock's construct (the call site) */
    const void *pending_ra;    /* the code address of the region this thread opens */
    uint32_t pending_inst;     /* ... and its instance, when outermost */
    uint32_t *counts;          /* this thread's beats per construct id */
    uint32_t ncounts;
    uint64_t left_ns;          /* when it last left an outermost region (0: never) */
    struct hbt_ompt_unit *units;   /* the tasks running, outermost first (on the heap, grown
                                      as they nest, up to HBT_OMPT_UNITS) */
    uint32_t nunits, units_cap;
};

static __thread struct hbt_ompt_tls hbt_ompt;

/* ours; exported as ompt_start_tool (below), whose address seen from this library
 * may be another's: a program's own ompt_start_tool interposes on it */
static hbt_ompt_start_tool_result_t *hbt_ompt_start_tool(unsigned int omp_version,
                                                         const char *runtime_version);

/* the tool's state, set once by ompt_start_tool / initialize */
static int hbt_ompt_active;                       /* our callbacks are registered */

int hbt_ompt_on(void)
{
    return __atomic_load_n(&hbt_ompt_active, __ATOMIC_RELAXED);
}
static int hbt_ompt_started;                      /* ompt_start_tool was called */
static hbt_ompt_set_callback_t hbt_ompt_real_set;
static hbt_ompt_get_callback_t hbt_ompt_real_get;
static hbt_ompt_lookup_t hbt_ompt_real_lookup;

/* the next tool, when ours hands on */
static hbt_ompt_start_tool_result_t *hbt_ompt_next;
static hbt_ompt_fn_t hbt_ompt_fwd[HBT_OMPT_EVENTS];       /* its callbacks of our events */
static int hbt_ompt_ours[HBT_OMPT_EVENTS];                /* set result of our events, 0: not ours */
static uint64_t hbt_ompt_next_direct;                     /* events it set in the runtime itself */

/* a team's parallel_data address -> the code address of its current region (written by
 * the team's primary thread as its implicit task begins); explicit tasks likewise */
struct hbt_ompt_region {
    uint64_t key;              /* the parallel_data (task_data) address, 0 empty */
    const void *ra;
    uint32_t inst;             /* an outermost region's instance, 0 for the others */
};
static struct hbt_ompt_region hbt_ompt_regions[HBT_OMPT_REGIONS];

/* ------------------------------------------------------------------ */
/* the frames                                                          */

static inline struct hbt_ompt_frame *hbt_ompt_cur(struct hbt_ompt_tls *o)
{
    static const struct hbt_ompt_frame none = { 0 };
    if (__builtin_expect(o->depth == 0, 0))
        return (struct hbt_ompt_frame *)&none;   /* outside any region: read only */
    uint32_t d = o->depth < HBT_OMPT_DEPTH ? o->depth : HBT_OMPT_DEPTH;
    return &o->frame[d - 1];
}

static HBT_COLD uint32_t hbt_ompt_grow_counts(struct hbt_ompt_tls *o, uint32_t id)
{
    uint32_t n = o->ncounts ? o->ncounts : 64;
    while (n <= id)
        n *= 2;
    uint32_t *c = realloc(o->counts, n * sizeof *c);
    if (!c)
        return 0;
    memset(c + o->ncounts, 0, (n - o->ncounts) * sizeof *c);
    o->counts = c;
    o->ncounts = n;
    return ++c[id];
}

/* Room for more entries of a stack on the heap (p, *cap entries of `size` bytes): twice as
 * many, from 8, up to `most`. Returns the grown stack (*cap updated), or NULL where it cannot
 * grow (p is then as it was). */
static HBT_COLD void *hbt_ompt_grow(void *p, uint32_t *cap, size_t size, uint32_t most)
{
    uint32_t n = *cap ? *cap * 2 : 8u;
    void *q = n > most ? NULL : realloc(p, n * size);
    if (q)
        *cap = n;
    return q;
}

/* Room for more open waits (hbt_ompt_tls.waits), up to HBT_OMPT_WAITS */
static HBT_COLD void hbt_ompt_grow_waits(struct hbt_ompt_tls *o)
{
    struct hbt_ompt_wait *w = hbt_ompt_grow(o->waits, &o->waits_cap, sizeof *w, HBT_OMPT_WAITS);
    if (w)
        o->waits = w;
}

/* Room for more running tasks (hbt_ompt_tls.units), up to HBT_OMPT_UNITS */
static HBT_COLD int hbt_ompt_grow_units(struct hbt_ompt_tls *o)
{
    struct hbt_ompt_unit *u = hbt_ompt_grow(o->units, &o->units_cap, sizeof *u, HBT_OMPT_UNITS);
    if (u)
        o->units = u;
    return u != NULL;
}

/* This thread's number among the threads that made or ran a task, from 1 */
static inline uint32_t hbt_ompt_me(struct hbt_ompt_tls *o)
{
    static uint32_t made;
    if (__builtin_expect(!o->me, 0))
        o->me = __atomic_add_fetch(&made, 1u, __ATOMIC_RELAXED);
    return o->me;
}

/* The thread's count of construct id's beats, this one included. */
static inline uint32_t hbt_ompt_count(struct hbt_ompt_tls *o, uint32_t id)
{
    if (__builtin_expect(id < o->ncounts, 1))
        return ++o->counts[id];
    return hbt_ompt_grow_counts(o, id);
}

static inline void hbt_ompt_beat(struct hbt_ompt_tls *o, int event, int32_t thread,
                                 uint32_t construct)
{
    hbt_auto_beat_at(HBT_SRC_OPENMP, event, thread, construct,
                     (int32_t)hbt_ompt_count(o, construct), 0);
}

/* ------------------------------------------------------------------ */
/* the parallel-region table                                           */

#define HBT_OMPT_TASKS 16384u   /* the explicit-task table, a power of 2 */
#define HBT_OMPT_TASK_PROBE 16u /* slots a task's key may take, from its hash on */
static struct hbt_ompt_region hbt_ompt_tasks[HBT_OMPT_TASKS];

#define HBT_OMPT_BUSY 1ull      /* a slot being written (no key is 1: the data are aligned) */

static inline uint32_t hbt_ompt_hash(uint32_t size, const void *key)
{
    uint64_t h = (uint64_t)(uintptr_t)key * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 40) & (size - 1);
}

/* Store ra and inst under key, in the first of probe slots from its hash that holds the key
 * already (a region's team, which its regions share; a task's address a completed one had),
 * else in the first empty one; with none, in the first (another key's entry is lost there:
 * its construct is then 0). The explicit tasks' table takes 16 slots a key, each freed as
 * its task completes (hbt_ompt_forget): a recursive walk or a loop that makes tasks has
 * hundreds unfinished at once, and with one slot a key, 1 in 20 runs of omp_task_tree lost
 * some of its 600 tasks' constructs. The regions' table takes one, its entries never freed:
 * a stale region's is overwritten. */
static void hbt_ompt_put(struct hbt_ompt_region *table, uint32_t size, uint32_t probe,
                         const void *key, const void *ra, uint32_t inst)
{
    uint64_t k = (uint64_t)(uintptr_t)key;
    uint32_t h = hbt_ompt_hash(size, key);
    struct hbt_ompt_region *r = NULL;
    for (uint32_t p = 0; p < probe && !r; p++)
        if (__atomic_load_n(&table[(h + p) & (size - 1)].key, __ATOMIC_RELAXED) == k)
            r = &table[(h + p) & (size - 1)];
    for (uint32_t p = 0; p < probe && !r; p++) {
        uint64_t empty = 0;
        if (__atomic_compare_exchange_n(&table[(h + p) & (size - 1)].key, &empty, HBT_OMPT_BUSY, 0,
                                        __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            r = &table[(h + p) & (size - 1)];
    }
    if (!r)
        r = &table[h];
    __atomic_store_n(&r->key, HBT_OMPT_BUSY, __ATOMIC_RELEASE);
    __atomic_store_n(&r->ra, ra, __ATOMIC_RELAXED);
    __atomic_store_n(&r->inst, inst, __ATOMIC_RELAXED);
    __atomic_store_n(&r->key, k, __ATOMIC_RELEASE);
}

/* The code address stored under key (and in *inst its instance), or NULL when the table
 * does not hold it. */
static const void *hbt_ompt_get(struct hbt_ompt_region *table, uint32_t size, uint32_t probe,
                                const void *key, uint32_t *inst)
{
    uint64_t k = (uint64_t)(uintptr_t)key;
    if (!key)
        return NULL;
    uint32_t h = hbt_ompt_hash(size, key);
    for (uint32_t p = 0; p < probe; p++) {
        struct hbt_ompt_region *r = &table[(h + p) & (size - 1)];
        if (__atomic_load_n(&r->key, __ATOMIC_ACQUIRE) != k)
            continue;
        const void *ra = __atomic_load_n(&r->ra, __ATOMIC_RELAXED);
        uint32_t n = __atomic_load_n(&r->inst, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&r->key, __ATOMIC_RELAXED) != k)
            return NULL;
        *inst = n;
        return ra;
    }
    return NULL;
}

/* The entry under key, its task completed: the slot is free again. */
static void hbt_ompt_forget(struct hbt_ompt_region *table, uint32_t size, uint32_t probe,
                            const void *key)
{
    uint64_t k = (uint64_t)(uintptr_t)key;
    uint32_t h = hbt_ompt_hash(size, key);
    for (uint32_t p = 0; p < probe; p++) {
        uint64_t expect = k;
        if (__atomic_compare_exchange_n(&table[(h + p) & (size - 1)].key, &expect, 0, 0,
                                        __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            return;
    }
}

/* The outermost region whose master began it last (parallel_begin, before any of its
 * workers starts). */
static uint32_t hbt_ompt_latest;

/* A worker learns its region's construct from the table, as soon as the primary
 * thread has written it (before the worker's first beat that needs it, as a rule), and
 * an outermost region's instance once the table's is the one begun last: a hot team's
 * regions share their key, and a worker that looks before its master wrote the entry
 * reads the previous region's (omp_released with libomp: thread 1's barrier marks an
 * instance behind, judged released while it waited, 1 run in 15). */
static void hbt_ompt_resolve(struct hbt_ompt_frame *f)
{
    if ((f->region == 0 || (f->level == 1 && !f->inst)) && f->team) {
        uint32_t inst = 0;
        const void *ra = hbt_ompt_get(hbt_ompt_regions, HBT_OMPT_REGIONS, 1, f->team, &inst);
        if (ra) {
            if (f->level == 1 && inst && inst == __atomic_load_n(&hbt_ompt_latest, __ATOMIC_ACQUIRE))
                f->inst = inst;
            if (f->region == 0) {
                f->region_ra = ra;
                f->region = hbt_construct_id(HBT_CK_PARALLEL, ra);
            }
        }
    }
}

/* ------------------------------------------------------------------ */
/* the callbacks                                                       */

#define HBT_OMPT_FORWARD(event, type, ...)                                       \
    do {                                                                         \
        hbt_ompt_fn_t f_ = __atomic_load_n(&hbt_ompt_fwd[event], __ATOMIC_ACQUIRE); \
        if (__builtin_expect(f_ != NULL, 0))                                     \
            ((type)f_)(__VA_ARGS__);                                             \
    } while (0)

static void hbt_ompt_thread_begin(int thread_type, hbt_ompt_data_t *thread_data)
{
    HBT_OMPT_FORWARD(HBT_OMPT_THREAD_BEGIN, hbt_ompt_thread_begin_t, thread_type, thread_data);
}

static void hbt_ompt_thread_end(hbt_ompt_data_t *thread_data)
{
    struct hbt_ompt_tls *o = &hbt_ompt;
    free(o->counts);
    o->counts = NULL;
    o->ncounts = 0;
    free(o->waits);
    o->waits = NULL;
    o->waits_cap = 0;
    free(o->units);
    o->units = NULL;
    o->units_cap = 0;
    o->nunits = 0;
    o->depth = 0;
    o->nwaits = 0;
    HBT_OMPT_FORWARD(HBT_OMPT_THREAD_END, hbt_ompt_thread_end_t, thread_data);
}

static void hbt_ompt_parallel_begin(hbt_ompt_data_t *encountering_task_data,
                                    const void *encountering_task_frame,
                                    hbt_ompt_data_t *parallel_data,
                                    unsigned int requested_parallelism, int flags,
                                    const void *codeptr_ra)
{
    if (!(flags & HBT_OMPT_PARALLEL_LEAGUE)) {
        hbt_ompt.pending_ra = codeptr_ra;   /* its implicit task begins next, on this thread */
        hbt_ompt.pending_inst = 0;
        if (hbt_ompt.depth == 0) {   /* an outermost region: numbered before its workers start */
            uint32_t n = hbt_region_instance();
            hbt_ompt.pending_inst = n;
            __atomic_store_n(&hbt_ompt_latest, n, __ATOMIC_RELEASE);
        }
    }
    HBT_OMPT_FORWARD(HBT_OMPT_PARALLEL_BEGIN, hbt_ompt_parallel_begin_t, encountering_task_data,
                     encountering_task_frame, parallel_data, requested_parallelism, flags,
                     codeptr_ra);
}

void hbt_ompt_at_exit(void)
{
    struct hbt_ompt_tls *o = &hbt_ompt;
    /* (not hbt_ompt_on: libomp's exit handler, before ours, may have ended OMPT) */
    if (o->depth || !o->left_ns || !hbt_auto_on(HBT_SRC_OPENMP))
        return;
    uint64_t t0 = hbt_now_ns();
    hbt_auto_wait_at(HBT_SRC_OPENMP, HBT_SYNC_OUTSIDE, 0, 0, t0 - o->left_ns, t0);
    o->left_ns = 0;
}

/* The chunk the thread had, if any, is done: its beat. */
static inline void hbt_ompt_chunk_done(struct hbt_ompt_frame *f)
{
    if (f->chunk_open) {
        f->chunk_open = 0;
        hbt_auto_beat_aux_at(HBT_SRC_OPENMP, HBT_EV_CHUNK, f->thread, f->loop,
                             (int32_t)f->chunk_first, f->chunk_count, 0);
    }
}

static void hbt_ompt_implicit_task(int endpoint, hbt_ompt_data_t *parallel_data,
                                   hbt_ompt_data_t *task_data, unsigned int actual_parallelism,
                                   unsigned int index, int flags)
{
    struct hbt_ompt_tls *o = &hbt_ompt;
    if (flags & HBT_OMPT_TASK_IMPLICIT) {
        if (endpoint == HBT_OMPT_SCOPE_BEGIN) {
            /* the OpenMP routines answer for the calling thread inside the region */
            int level = omp_get_level ? omp_get_level() : 1;
            int32_t thread = level > 1 && omp_get_ancestor_thread_num
                             ? omp_get_ancestor_thread_num(1) : (int32_t)index;
            o->depth++;
            hbt_wait_mark(0);   /* at work in the region */
            struct hbt_ompt_frame *f = hbt_ompt_cur(o);
            f->thread = thread;
            f->level = level > 0 ? (uint32_t)level : 1;
            f->team = parallel_data;
            f->region = 0;
            f->region_ra = NULL;
            f->loop = 0;
            f->dynamic = 0;
            f->chunk_open = 0;
            f->inst = 0;
            f->bar = 0;
            f->many = f->level == 1 && actual_parallelism > 1;
            f->team_size = actual_parallelism;
            f->shared = 0;
            f->dispatches = 0;
            if (index == 0) {
                /* the primary thread names the region for the team, and numbers an outermost one */
                f->region_ra = o->pending_ra;
                o->pending_ra = NULL;
                f->region = hbt_construct_id(HBT_CK_PARALLEL, f->region_ra);
                f->inst = f->level == 1 ? o->pending_inst : 0;   /* (a team of one too) */
                o->pending_inst = 0;
                hbt_ompt_put(hbt_ompt_regions, HBT_OMPT_REGIONS, 1, parallel_data, f->region_ra, f->inst);
            } else {
                hbt_ompt_resolve(f);
            }
            if (f->level == 1)
                hbt_team_mark(actual_parallelism);
            hbt_place_mark(HBT_PLACE(f->inst, 0));
            if (f->level == 1 && o->left_ns) {   /* since it left the previous outermost region */
                uint64_t t0 = hbt_now_ns();
                hbt_auto_wait_at(HBT_SRC_OPENMP, HBT_SYNC_OUTSIDE, thread, f->region, t0 - o->left_ns, t0);
            }
            if (__builtin_expect(hbt_inject_armed, 0)) hbt_inject_waited(0);   /* a unit of work starts */
        } else if (endpoint == HBT_OMPT_SCOPE_END && o->depth > 0) {
            struct hbt_ompt_frame *f = hbt_ompt_cur(o);
            hbt_ompt_resolve(f);
            hbt_ompt_chunk_done(f);   /* a chunk left open (cancellation) */
            hbt_ompt_beat(o, HBT_EV_IMPLICIT, f->thread, f->region);
            if (f->level == 1) {   /* it leaves for the serial part (master) or the pool */
                o->left_ns = hbt_now_ns();
                if (!f->inst)
                    hbt_ompt_resolve(f);
                hbt_place_mark(HBT_PLACE(f->inst, HBT_PLACE_END));
            }
            hbt_wait_mark(f->level == 1 ? HBT_SYNC_OUTSIDE : 0);
            o->depth--;
            if (f->level > 1 && o->depth > 0) {   /* back at its place in the enclosing region */
                struct hbt_ompt_frame *e = hbt_ompt_cur(o);
                hbt_place_mark(e->level == 1 ? HBT_PLACE(e->inst, e->bar) : 0);
            }
        }
    }
    HBT_OMPT_FORWARD(HBT_OMPT_IMPLICIT_TASK, hbt_ompt_implicit_task_t, endpoint, parallel_data,
                     task_data, actual_parallelism, index, flags);
}

static void hbt_ompt_work(int wstype, int endpoint, hbt_ompt_data_t *parallel_data,
                          hbt_ompt_data_t *task_data, uint64_t count, const void *codeptr_ra)
{
    struct hbt_ompt_tls *o = &hbt_ompt;
    int kind = wstype == HBT_OMPT_WORK_LOOP ? HBT_CK_LOOP
             : wstype == HBT_OMPT_WORK_SECTIONS ? HBT_CK_SECTIONS
             : wstype == HBT_OMPT_WORK_SINGLE_EXECUTOR || wstype == HBT_OMPT_WORK_SINGLE_OTHER
               ? HBT_CK_SINGLE
             : wstype == HBT_OMPT_WORK_WORKSHARE ? HBT_CK_LOOP : 0;
    if (kind && o->depth > 0) {
        struct hbt_ompt_frame *f = hbt_ompt_cur(o);
        if (endpoint == HBT_OMPT_SCOPE_BEGIN) {
            f->loop = hbt_construct_id(kind, codeptr_ra);
            f->dynamic = 0;
            f->chunk_open = 0;
        } else if (endpoint == HBT_OMPT_SCOPE_END) {
            hbt_ompt_chunk_done(f);   /* (its last chunk was beaten as it asked for more) */
            /* a dynamically scheduled loop beat at each of its chunks */
            if (!f->dynamic)
                hbt_ompt_beat(o, HBT_EV_WORKSHARE, f->thread, f->loop);
            f->dynamic = 0;
        }
    }
    HBT_OMPT_FORWARD(HBT_OMPT_WORK, hbt_ompt_work_t, wstype, endpoint, parallel_data, task_data,
                     count, codeptr_ra);
}

static void hbt_ompt_task_create(hbt_ompt_data_t *encountering_task_data,
                                 const void *encountering_task_frame,
                                 hbt_ompt_data_t *new_task_data, int flags, int has_dependences,
                                 const void *codeptr_ra)
{
    /* the completion's construct: task_create's code address, keyed by the task */
    if (flags & HBT_OMPT_TASK_EXPLICIT)   /* (and the thread that made it) */
        hbt_ompt_put(hbt_ompt_tasks, HBT_OMPT_TASKS, HBT_OMPT_TASK_PROBE, new_task_data, codeptr_ra, hbt_ompt_me(&hbt_ompt));
    HBT_OMPT_FORWARD(HBT_OMPT_TASK_CREATE, hbt_ompt_task_create_t, encountering_task_data,
                     encountering_task_frame, new_task_data, flags, has_dependences, codeptr_ra);
}

/* The construct of open wait k (its code address, or the region's for the barrier that ends
 * one). */
static uint32_t hbt_ompt_wait_id(struct hbt_ompt_tls *o, uint32_t k, struct hbt_ompt_frame *f,
                                 const void *codeptr_ra)
{
    if (!codeptr_ra)
        codeptr_ra = o->waits[k].ra;
    if (!codeptr_ra && o->depth > 0)
        hbt_ompt_resolve(f);
    const void *ra = codeptr_ra ? codeptr_ra : f->region_ra;
    return hbt_construct_id(o->waits[k].sync == HBT_SYNC_BARRIER ? HBT_CK_BARRIER : HBT_CK_TASK, ra);
}

/* A task starts (or resumes) on this thread: inside a wait, the wait so far is written, and
 * the task is work. */
static void hbt_ompt_task_starts(struct hbt_ompt_tls *o)
{
    uint32_t k = o->nwaits - 1;
    if (o->nwaits == 0 || k >= o->waits_cap || o->waits[k].tasks++)
        return;
    uint64_t now = hbt_now_ns();
    hbt_wait_mark(0);
    struct hbt_ompt_frame *f = hbt_ompt_cur(o);
    if (now > o->waits[k].start)
        hbt_auto_wait_at(HBT_SRC_OPENMP, o->waits[k].sync, f->thread, hbt_ompt_wait_id(o, k, f, NULL),
                         now - o->waits[k].start, now);
}

/* A task run on this thread completed: the wait it cut, if the last, begins again. */
static void hbt_ompt_task_done(struct hbt_ompt_tls *o)
{
    uint32_t k = o->nwaits - 1;
    if (o->nwaits == 0 || k >= o->waits_cap || !o->waits[k].tasks || --o->waits[k].tasks)
        return;
    o->waits[k].start = hbt_now_ns();
    hbt_wait_mark(o->waits[k].sync);
}

/* The monitor's unit of work as a task stops and another runs (task_schedule): the one that
 * completed (its beat ended its unit) or detached is no longer running, and the unit before
 * it is back; a task that begins (not one resumed: it is the latest still running) is the
 * unit from now. Followed as a stack of the tasks begun on this thread: libomp runs a task
 * inside a taskwait or a barrier and resumes the one it cut when it completes. */
static void hbt_ompt_task_unit(struct hbt_ompt_tls *o, const void *prior, int status, const void *next)
{
    if (status == HBT_OMPT_TASK_COMPLETE || status == HBT_OMPT_TASK_DETACH) {
        if (o->nunits > o->units_cap) {
            o->nunits--;   /* the latest begun was not followed (too deep) */
        } else if (o->nunits && o->units[o->nunits - 1].key == prior) {
            if (status == HBT_OMPT_TASK_DETACH)   /* (no beat: construct 0, not measured) */
                hbt_unit_task_end(&o->units[o->nunits - 1].sv, 0, hbt_now_ns());
            o->nunits--;
        }
    }
    if (status == HBT_OMPT_TASK_LATE_FULFILL || status == HBT_OMPT_TASK_EARLY_FULFILL || !next)
        return;
    if (o->nunits && o->nunits <= o->units_cap && o->units[o->nunits - 1].key == next)
        return;   /* resumed */
    uint32_t maker = 0;
    const void *ra = hbt_ompt_get(hbt_ompt_tasks, HBT_OMPT_TASKS, HBT_OMPT_TASK_PROBE, next, &maker);
    if (!ra)
        return;   /* an implicit task (the region's), or one not known */
    if (o->nunits >= o->units_cap && (o->nunits > o->units_cap || !hbt_ompt_grow_units(o))) {
        o->nunits++;   /* too deep: counted, not followed */
        return;
    }
    struct hbt_ompt_unit *u = &o->units[o->nunits];
    u->key = next;
    if (hbt_unit_task_begin(&u->sv, hbt_construct_id(HBT_CK_TASK, ra), hbt_now_ns()))
        o->nunits++;
}

static void hbt_ompt_task_schedule(hbt_ompt_data_t *prior_task_data, int prior_task_status,
                                   hbt_ompt_data_t *next_task_data)
{
    /* libomp reports a completion only for explicit tasks (implicit and initial
     * tasks end through implicit_task) */
    if (prior_task_status == HBT_OMPT_TASK_COMPLETE
        || prior_task_status == HBT_OMPT_TASK_LATE_FULFILL) {
        struct hbt_ompt_tls *o = &hbt_ompt;
        uint32_t maker = 0;
        const void *ra = hbt_ompt_get(hbt_ompt_tasks, HBT_OMPT_TASKS, HBT_OMPT_TASK_PROBE, prior_task_data, &maker);
        uint32_t unshared = ra && maker == hbt_ompt_me(o) ? HBT_TASK_UNSHARED : 0u;   /* no teammate took it */
        uint32_t id = ra ? hbt_construct_id(HBT_CK_TASK, ra) : 0;
        /* the monitor's unit: the task's, ended by its beat (a late fulfil's task ended
         * running earlier, as it detached: not the latest begun) */
        struct hbt_ompt_unit *top = o->nunits && o->nunits <= o->units_cap ? &o->units[o->nunits - 1] : NULL;
        int ends = top && top->key == prior_task_data && prior_task_status == HBT_OMPT_TASK_COMPLETE;
        if (ends)
            hbt_tls.unit_end = &top->sv;
        hbt_auto_beat_aux_at(HBT_SRC_OPENMP, HBT_EV_TASK, hbt_ompt_cur(o)->thread, id,
                             (int32_t)hbt_ompt_count(o, id), unshared, 0);
        if (ends && hbt_tls.unit_end == &top->sv) {   /* (no beat: no room for it) */
            hbt_unit_task_end(&top->sv, id, hbt_now_ns());
            hbt_tls.unit_end = NULL;
        }
        if (ra)
            hbt_ompt_forget(hbt_ompt_tasks, HBT_OMPT_TASKS, HBT_OMPT_TASK_PROBE, prior_task_data);
    }
    if (__builtin_expect(hbt_mon_hot.openmp, 0))
        hbt_ompt_task_unit(&hbt_ompt, prior_task_data, prior_task_status, next_task_data);
    /* the task before stops here (switch, yield; complete or detach: it is done), the next
     * runs (a fulfilled detached task's event is no task run) */
    if (prior_task_status == HBT_OMPT_TASK_COMPLETE || prior_task_status == HBT_OMPT_TASK_DETACH)
        hbt_ompt_task_done(&hbt_ompt);
    else if (prior_task_status != HBT_OMPT_TASK_LATE_FULFILL
             && prior_task_status != HBT_OMPT_TASK_EARLY_FULFILL)
        hbt_ompt_task_starts(&hbt_ompt);
    HBT_OMPT_FORWARD(HBT_OMPT_TASK_SCHEDULE, hbt_ompt_task_schedule_t, prior_task_data,
                     prior_task_status, next_task_data);
}

static void hbt_ompt_sync_region_wait(int kind, int endpoint, hbt_ompt_data_t *parallel_data,
                                      hbt_ompt_data_t *task_data, const void *codeptr_ra)
{
    int sync = kind == HBT_OMPT_SYNC_TASKWAIT || kind == HBT_OMPT_SYNC_TASKGROUP
               ? HBT_SYNC_TASKWAIT
             : kind == HBT_OMPT_SYNC_BARRIER || kind == HBT_OMPT_SYNC_BARRIER_IMPLICIT
               || kind == HBT_OMPT_SYNC_BARRIER_EXPLICIT
               || kind == HBT_OMPT_SYNC_BARRIER_IMPLEMENTATION
               || kind == HBT_OMPT_SYNC_BARRIER_IMPLICIT_WORKSHARE
               || kind == HBT_OMPT_SYNC_BARRIER_IMPLICIT_PARALLEL
               ? HBT_SYNC_BARRIER : 0;
    if (sync) {
        struct hbt_ompt_tls *o = &hbt_ompt;
        uint64_t now = hbt_now_ns();
        if (endpoint == HBT_OMPT_SCOPE_BEGIN) {
            if (__builtin_expect(hbt_inject_armed, 0) && o->depth > 0) {
                hbt_inject_before_wait(hbt_ompt_cur(o)->thread);   /* slow: the work that ends here */
                now = hbt_now_ns();
            }
            if (__builtin_expect(o->nwaits >= o->waits_cap, 0))
                hbt_ompt_grow_waits(o);
            if (o->nwaits < o->waits_cap)
                o->waits[o->nwaits] = (struct hbt_ompt_wait){now, codeptr_ra, 0, (uint8_t)sync};
            if (sync == HBT_SYNC_BARRIER && o->nwaits == 0 && o->depth > 0) {
                struct hbt_ompt_frame *f = hbt_ompt_cur(o);
                if (f->level == 1) {   /* its team's next barrier */
                    f->bar++;
                    if (!f->inst)
                        hbt_ompt_resolve(f);
                    hbt_place_mark(HBT_PLACE(f->inst, f->bar));
                }
            }
            if (o->nwaits++ == 0)
                hbt_wait_begin((uint32_t)sync);
            else
                hbt_wait_mark((uint32_t)sync);
        } else if (endpoint == HBT_OMPT_SCOPE_END && o->nwaits > 0) {
            uint32_t k = --o->nwaits;
            if (k == 0)
                hbt_wait_end();
            else if (k - 1 < o->waits_cap)   /* back in the task that cut the wait before, or in it */
                hbt_wait_mark(o->waits[k - 1].tasks ? 0u : o->waits[k - 1].sync);
            hbt_unit_after_wait(now);
            if (k < o->waits_cap) {
                /* the barrier that ends a region has no code address of its own */
                struct hbt_ompt_frame *f = hbt_ompt_cur(o);
                uint32_t id = hbt_ompt_wait_id(o, k, f, codeptr_ra);
                hbt_auto_wait_at(HBT_SRC_OPENMP, sync, f->thread, id, now - o->waits[k].start, now);
            }
        }
    }
    HBT_OMPT_FORWARD(HBT_OMPT_SYNC_REGION_WAIT, hbt_ompt_sync_region_t, kind, endpoint,
                     parallel_data, task_data, codeptr_ra);
}

static void hbt_ompt_mutex_acquire(int kind, unsigned int hint, unsigned int impl,
                                   uint64_t wait_id, const void *codeptr_ra)
{
    if ((kind == HBT_OMPT_MUTEX_LOCK || kind == HBT_OMPT_MUTEX_NEST_LOCK) && hbt_ompt.depth > 0) {
        /* an OpenMP lock, in a parallel region: a LOCK beat as the thread asks (a fault
         * injected there holds nobody up), then its wait for it, a critical wait of the same
         * construct (gomp.c: none outside a region) */
        struct hbt_ompt_tls *o = &hbt_ompt;
        uint32_t id = hbt_construct_id(HBT_CK_LOCK, codeptr_ra);
        hbt_ompt_beat(o, HBT_EV_LOCK, hbt_ompt_cur(o)->thread, id);
        o->lock_id = id;
        o->lock_start = hbt_now_ns();
        hbt_wait_begin(HBT_SYNC_CRITICAL);
    } else if (kind == HBT_OMPT_MUTEX_CRITICAL || kind == HBT_OMPT_MUTEX_ORDERED) {
        struct hbt_ompt_tls *o = &hbt_ompt;
        if (__builtin_expect(hbt_inject_armed, 0) && o->depth > 0)
            hbt_inject_before_wait(hbt_ompt_cur(o)->thread);   /* slow: the work that ends here */
        o->mutex_ra = codeptr_ra;
        o->mutex_start = hbt_now_ns();
    }
    HBT_OMPT_FORWARD(HBT_OMPT_MUTEX_ACQUIRE, hbt_ompt_mutex_acquire_t, kind, hint, impl, wait_id,
                     codeptr_ra);
}

/* The thread has the lock it asked for (hbt_ompt_mutex_acquire): its wait ends. */
static void hbt_ompt_lock_taken(struct hbt_ompt_tls *o)
{
    if (o->lock_start) {
        uint64_t now = hbt_now_ns();
        hbt_wait_end();
        hbt_unit_after_wait(now);
        hbt_auto_wait_at(HBT_SRC_OPENMP, HBT_SYNC_CRITICAL, hbt_ompt_cur(o)->thread, o->lock_id,
                         now - o->lock_start, now);
        o->lock_start = 0;
    }
}

static void hbt_ompt_mutex_acquired(int kind, uint64_t wait_id, const void *codeptr_ra)
{
    struct hbt_ompt_tls *o = &hbt_ompt;
    if (kind == HBT_OMPT_MUTEX_LOCK || kind == HBT_OMPT_MUTEX_NEST_LOCK)
        hbt_ompt_lock_taken(o);
    if ((kind == HBT_OMPT_MUTEX_CRITICAL || kind == HBT_OMPT_MUTEX_ORDERED) && o->mutex_start) {
        uint64_t now = hbt_now_ns();
        int critical = kind == HBT_OMPT_MUTEX_CRITICAL;
        uint32_t id = hbt_construct_id(critical ? HBT_CK_CRITICAL : HBT_CK_ORDERED,
                                       codeptr_ra ? codeptr_ra : o->mutex_ra);
        hbt_auto_wait_at(HBT_SRC_OPENMP, critical ? HBT_SYNC_CRITICAL : HBT_SYNC_ORDERED,
                         hbt_ompt_cur(o)->thread, id, now - o->mutex_start, now);
        hbt_unit_after_wait(now);
        o->mutex_start = 0;
    }
    HBT_OMPT_FORWARD(HBT_OMPT_MUTEX_ACQUIRED, hbt_ompt_mutex_t, kind, wait_id, codeptr_ra);
}

/* A nest lock the thread holds already, taken again (libomp reports that here, not as
 * mutex_acquired): no wait, but the one its acquire opened ends. */
static void hbt_ompt_nest_lock(int endpoint, uint64_t wait_id, const void *codeptr_ra)
{
    if (endpoint == HBT_OMPT_SCOPE_BEGIN)
        hbt_ompt_lock_taken(&hbt_ompt);
    HBT_OMPT_FORWARD(HBT_OMPT_NEST_LOCK, hbt_ompt_nest_lock_t, endpoint, wait_id, codeptr_ra);
}

/* A flush of the program's own code (`#pragma omp flush`, libomp's __kmpc_flush). A
 * thread that waits for another in its own code spins on a shared flag, flushing:
 * the same flush again and again, every 0.07 us on this machine, never HBT_SPIN_STEP_NS
 * apart (the machine's interrupts take a few us now and then). From HBT_SPIN_MIN_NS of
 * it, at HBT_SPIN_AVG_NS per flush or faster, the thread waits (the monitor's mark: its
 * spin is no work), and the spin is a wait record (HBT_SYNC_FLAG) from its first flush to
 * its last, written when another flush or the thread's next record ends it
 * (hbt_spin_close). A flush after each unit of work is no spin: its calls come slower.
 * A spin the machine took the CPU from goes on past the gap in its flushes when the
 * thread's CPU clock shows it used none in the gap (a team larger than the CPUs). */
#define HBT_SPIN_STEP_NS 100000ull    /* 0.1 ms */
#define HBT_SPIN_MIN_NS 100000ull     /* 0.1 ms */
#define HBT_SPIN_AVG_NS 500ull        /* 0.5 us */

/* The open spin's thread was off the CPU from its last flush to now: it used no more CPU
 * time since the spin's last reading than the time it spun after that reading. */
static HBT_COLD int hbt_ompt_spin_preempted(struct hbt_tls *t, uint64_t now)
{
    uint64_t cpu = hb_thread_cpu_ns();
    if (!cpu || !t->spin_cpu_ns)
        return 0;
    int off = cpu - t->spin_cpu_ns <= (t->spin_last_ns - t->spin_cpu_at) + HBT_SPIN_STEP_NS;
    t->spin_cpu_ns = cpu;
    t->spin_cpu_at = now;
    return off;
}

static void hbt_ompt_flush(hbt_ompt_data_t *thread_data, const void *codeptr_ra)
{
    struct hbt_tls *t = &hbt_tls;
    uint64_t now = hbt_now_ns();
    if (codeptr_ra && codeptr_ra == t->spin_ra
        && (now - t->spin_last_ns <= HBT_SPIN_STEP_NS || (t->spin_on && hbt_ompt_spin_preempted(t, now)))) {
        t->spin_last_ns = now;
        t->spin_calls++;
        if (__builtin_expect(!t->spin_on && now - t->spin_first_ns >= HBT_SPIN_MIN_NS, 0)
            && (uint64_t)t->spin_calls * HBT_SPIN_AVG_NS >= now - t->spin_first_ns) {
            t->spin_on = 1;
            t->spin_thread = hbt_ompt_cur(&hbt_ompt)->thread;
            t->spin_cpu_ns = hb_thread_cpu_ns();
            t->spin_cpu_at = hbt_now_ns();
            struct hbt_beatline *b = t->beat;
            if (b && !b->waiting) {
                /* as hbt_wait_mark, from the spin's first flush */
                t->wait_from = t->spin_first_ns;
                __atomic_store_n(&b->wait_us, (uint32_t)(t->spin_first_ns / 1000u), __ATOMIC_RELAXED);
                __atomic_store_n(&b->waiting, (uint16_t)HBT_SYNC_FLAG, __ATOMIC_RELEASE);
                t->spin_marked = 1;
            }
        }
    } else {
        if (t->spin_on)
            hbt_spin_close(t);
        t->spin_ra = codeptr_ra;
        t->spin_first_ns = t->spin_last_ns = now;
        t->spin_calls = 0;
        if (__builtin_expect(hbt_inject_armed, 0))   /* (once a spin: its flushes come every 0.07 us) */
            t->spin_first_cpu = hbt_inject_times_spins() ? hb_thread_cpu_ns() : 0;
    }
    HBT_OMPT_FORWARD(HBT_OMPT_FLUSH, hbt_ompt_flush_t, thread_data, codeptr_ra);
}

/* ------------------------------------------------------------------ */
/* libomp's loop dispatcher: a beat per chunk                          */

/* A chunk the thread got: noted, its beat comes when it asks for the next one (or at
 * the loop's end). diff: its last iteration less its first; st: the loop's stride. */
static inline void hbt_ompt_chunk_got(int64_t first, int64_t diff, int64_t st)
{
    struct hbt_ompt_tls *o = &hbt_ompt;
    if (o->depth > 0) {
        struct hbt_ompt_frame *f = hbt_ompt_cur(o);
        int64_t n = st ? diff / st + 1 : 0;
        f->chunk_open = 1;
        f->chunk_first = (uint32_t)(uint64_t)first;
        f->chunk_count = n > 0 && n <= (int64_t)UINT32_MAX ? (uint32_t)n : 0;
    }
}

/* The loop ends inside the call that returns 0 (its work-end callback): the loop is
 * marked dynamic before the call, and the chunk the thread had is beaten then. */
static inline void hbt_ompt_ask_chunk(void)
{
    struct hbt_ompt_tls *o = &hbt_ompt;
    if (__atomic_load_n(&hbt_ompt_active, __ATOMIC_RELAXED) && o->depth > 0) {
        struct hbt_ompt_frame *f = hbt_ompt_cur(o);
        f->dynamic = 1;
        hbt_ompt_chunk_done(f);
    }
}

/* ------------------------------------------------------------------ */
/* stop (inject.c) with libomp                                         */

/* libomp's dispatcher must see every thread of the team finish a loop (it recycles the
 * loop's buffer when the last one does): a stopped victim cannot just be told "no chunk
 * left". It asks for its chunks only once every teammate found none left (docs/inject.md),
 * and is then handed none. A teammate that finds none says so in its team's entry here: the
 * loops of its outermost region it began, with the region's instance above them, so that a
 * hot team's next region (the same key) is told from this one without anybody resetting it.
 * The entries are only used while a fault is injected. */
#define HBT_OMPT_DRAINS 64u    /* outermost teams followed, a power of 2 (a team whose slot is
                                  another's: its victim takes its chunks) */
#define HBT_OMPT_DRAIN_LOOPS 8u /* loops of a team counted at once (teammates a nowait loop
                                  apart), a power of 2 */
struct hbt_ompt_drain {
    uint64_t key;              /* the team's parallel_data address, 0 free */
    uint64_t upto;             /* (region instance << 32) | its dispatcher loops drained */
    uint32_t seq;              /* futex word: bumped as upto grows */
    uint32_t waits;            /* a victim waits on seq */
    uint32_t lock;             /* guards loops[] */
    struct {
        uint64_t mark;         /* a loop (as upto) ... */
        uint32_t found_none;   /* ... and the threads that found no chunk left in it */
    } loops[HBT_OMPT_DRAIN_LOOPS];
};
static struct hbt_ompt_drain hbt_ompt_drains[HBT_OMPT_DRAINS];

/* Longest a stopped victim waits for its team to take a loop's chunks (a loop its team
 * cancelled; then it asks for them, as without the wait): as gomp.c's */
#define HBT_OMPT_STOP_WAIT_MAX_NS (60ull * 1000000000ull)

static HBT_COLD struct hbt_ompt_drain *hbt_ompt_drain_of(const void *team)
{
    uint64_t k = (uint64_t)(uintptr_t)team;
    struct hbt_ompt_drain *d = &hbt_ompt_drains[((k * 0x9E3779B97F4A7C15ull) >> 40) & (HBT_OMPT_DRAINS - 1)];
    uint64_t cur = __atomic_load_n(&d->key, __ATOMIC_ACQUIRE);
    if (cur == k)
        return d;
    if (cur == 0 && __atomic_compare_exchange_n(&d->key, &cur, k, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return d;
    return cur == k ? d : NULL;
}

/* The region's instance and the thread's dispatcher loops in it, as one ordered number: an
 * outermost region's instance, or (a worker that has not learnt it yet) the one begun last,
 * which is its own where one thread opens the outermost regions. */
static HBT_COLD uint64_t hbt_ompt_drain_mark(struct hbt_ompt_frame *f)
{
    if (!f->inst)
        hbt_ompt_resolve(f);
    uint32_t inst = f->inst ? f->inst : __atomic_load_n(&hbt_ompt_latest, __ATOMIC_ACQUIRE);
    return (uint64_t)inst << 32 | f->dispatches;
}

/* __kmpc_dispatch_init_*, while a fault is injected: one more dispatcher loop in the region,
 * and whether its chunks go to whoever asks. */
static HBT_COLD void hbt_ompt_dispatch_begins(int32_t schedule)
{
    struct hbt_ompt_tls *o = &hbt_ompt;
    if (!__atomic_load_n(&hbt_ompt_active, __ATOMIC_RELAXED) || o->depth == 0)
        return;
    struct hbt_ompt_frame *f = hbt_ompt_cur(o);
    f->dispatches++;
    f->shared = (uint8_t)hbt_inject_kmp_shared(schedule);
}

/* The calling thread found no chunk left in its current dispatcher loop (a spin lock: once
 * per thread and loop, while a fault is injected). */
static HBT_COLD void hbt_ompt_drained(void)
{
    struct hbt_ompt_tls *o = &hbt_ompt;
    if (!__atomic_load_n(&hbt_ompt_active, __ATOMIC_RELAXED) || o->depth == 0)
        return;
    struct hbt_ompt_frame *f = hbt_ompt_cur(o);
    struct hbt_ompt_drain *d;
    if (f->level != 1 || !f->many || !f->dispatches || !(d = hbt_ompt_drain_of(f->team)))
        return;
    uint64_t v = hbt_ompt_drain_mark(f);
    /* the loop is drained once every thread of the team but one (the victim) found none: with
     * libomp's stolen static chunks, one that found none may have found its teammates' shares
     * being taken over (a thread that took a whole share nobody set up still runs it) */
    uint32_t found = 0;
    while (__atomic_exchange_n(&d->lock, 1u, __ATOMIC_ACQUIRE))
        sched_yield();   /* (its holder may be off the CPU: more threads than CPUs) */
    __typeof__(&d->loops[0]) l = &d->loops[v & (HBT_OMPT_DRAIN_LOOPS - 1)];
    if (l->mark < v) {
        l->mark = v;
        l->found_none = 0;
    }
    if (l->mark == v)
        found = ++l->found_none;
    __atomic_store_n(&d->lock, 0u, __ATOMIC_RELEASE);
    if (found + 1 < f->team_size)
        return;
    uint64_t cur = __atomic_load_n(&d->upto, __ATOMIC_RELAXED);
    while (cur < v && !__atomic_compare_exchange_n(&d->upto, &cur, v, 1, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
        ;
    if (cur < v) {
        __atomic_add_fetch(&d->seq, 1u, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&d->waits, __ATOMIC_SEQ_CST))
            syscall(SYS_futex, &d->seq, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
    }
}

/* Before the calling thread sets a dispatcher loop up (ra: the program's call; for the loop
 * it fired in, before it asks for a chunk, ra NULL), while a fault is injected: the stopped
 * victim, in an outermost team's loop whose chunks its team takes in its place, waits until
 * every teammate found none left (recorded as a barrier's wait: it waits for its team, as it
 * then does at the loop's end). Before the set-up: a loop of static chunks that idle threads
 * steal (clang's schedule(dynamic)) lets a teammate take a whole share that nobody set up,
 * where it leaves a share set up its last few chunks (3 of 12 chunks in a loop of 8-byte
 * iterations, libomp 14). Returns whether the thread is such a victim. */
static HBT_COLD int hbt_ompt_stop_wait(const void *ra)
{
    struct hbt_ompt_tls *o = &hbt_ompt;
    if (!__atomic_load_n(&hbt_ompt_active, __ATOMIC_RELAXED) || o->depth == 0)
        return 0;
    struct hbt_ompt_frame *f = hbt_ompt_cur(o);
    struct hbt_ompt_drain *d;
    if (f->level != 1 || !f->many || !f->shared || !f->dispatches || !hbt_inject_stopped(f->thread)
        || !(d = hbt_ompt_drain_of(f->team)))
        return 0;
    uint64_t want = hbt_ompt_drain_mark(f);
    if (__atomic_load_n(&d->upto, __ATOMIC_SEQ_CST) >= want)
        return 1;
    uint64_t t0 = hbt_now_ns();
    hbt_wait_begin(HBT_SYNC_BARRIER);
    __atomic_store_n(&d->waits, 1u, __ATOMIC_SEQ_CST);
    for (;;) {
        uint32_t seq = __atomic_load_n(&d->seq, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&d->upto, __ATOMIC_SEQ_CST) >= want || hbt_now_ns() - t0 >= HBT_OMPT_STOP_WAIT_MAX_NS)
            break;
        struct timespec ts = {0, 10 * 1000 * 1000};   /* (a wake-up missed costs 10 ms) */
        syscall(SYS_futex, &d->seq, FUTEX_WAIT_PRIVATE, seq, &ts, NULL, 0);
    }
    uint64_t t1 = hbt_now_ns();
    hbt_wait_end();
    hbt_unit_after_wait(t1);
    hbt_auto_wait_at(HBT_SRC_OPENMP, HBT_SYNC_BARRIER, f->thread,
                     ra ? hbt_construct_id(HBT_CK_LOOP, ra) : f->loop, t1 - t0, t1);
    return 1;
}

static HBT_COLD void *hbt_ompt_real_dispatch(void **cache, const char *name)
{
    void *f = hbt_real(cache, name);
    if (!f) {
        hbt_warn("hbtrace: %s called but not found in the OpenMP runtime", name);
        abort();
    }
    return f;
}

#define HBT_OMPT_DISPATCH_WRAPPER(name, T, ST)                                        \
    HBT_EXPORT int name(void *loc, int32_t gtid, int32_t *p_last, T *p_lb, T *p_ub,   \
                        ST *p_st)                                                     \
    {                                                                                 \
        static void *real;                                                            \
        int (*fn)(void *, int32_t, int32_t *, T *, T *, ST *) =                       \
            (int (*)(void *, int32_t, int32_t *, T *, T *, ST *))                     \
            __atomic_load_n(&real, __ATOMIC_ACQUIRE);                                 \
        if (__builtin_expect(!fn, 0))                                                 \
            fn = (int (*)(void *, int32_t, int32_t *, T *, T *, ST *))                \
                 hbt_ompt_real_dispatch(&real, #name);                                \
        hbt_ompt_ask_chunk();                                                         \
        int stopped_ = __builtin_expect(hbt_inject_armed, 0) && hbt_ompt_stop_wait(NULL); \
        int got = fn(loc, gtid, p_last, p_lb, p_ub, p_st);                            \
        if (__builtin_expect(hbt_inject_armed, 0) && !got) {                          \
            hbt_ompt_drained();                                                       \
            if (stopped_)                                                             \
                hbt_inject_skipped();                                                 \
        }                                                                             \
        if (got && __atomic_load_n(&hbt_ompt_active, __ATOMIC_RELAXED))               \
            hbt_ompt_chunk_got((int64_t)*p_lb, (int64_t)(ST)(T)(*p_ub - *p_lb), (int64_t)*p_st); \
        if (!got && hbt_tls.unit && hbt_tls.unit->loop)                               \
            hbt_unit_none(hbt_now_ns());                                              \
        return got;                                                                   \
    }

HBT_OMPT_DISPATCH_WRAPPER(__kmpc_dispatch_next_4, int32_t, int32_t)
HBT_OMPT_DISPATCH_WRAPPER(__kmpc_dispatch_next_4u, uint32_t, int32_t)
HBT_OMPT_DISPATCH_WRAPPER(__kmpc_dispatch_next_8, int64_t, int64_t)
HBT_OMPT_DISPATCH_WRAPPER(__kmpc_dispatch_next_8u, uint64_t, int64_t)

/* __kmpc_dispatch_init_*: counted while a fault is injected (hbt_ompt_dispatch_begins), where
 * a stopped victim waits (hbt_ompt_stop_wait), then the real one, as a tail call: libomp names the loop (its work callback's codeptr_ra) by the
 * return address its entry sees, which must be the program's. */
#define HBT_OMPT_DISPATCH_INIT(name, T, ST)                                           \
    HBT_EXPORT void name(void *loc, int32_t gtid, int32_t schedule, T lb, T ub, ST st, \
                         ST chunk)                                                    \
    {                                                                                 \
        static void *real;                                                            \
        void (*fn)(void *, int32_t, int32_t, T, T, ST, ST) =                          \
            (void (*)(void *, int32_t, int32_t, T, T, ST, ST))                        \
            __atomic_load_n(&real, __ATOMIC_ACQUIRE);                                 \
        if (__builtin_expect(!fn, 0))                                                 \
            fn = (void (*)(void *, int32_t, int32_t, T, T, ST, ST))                   \
                 hbt_ompt_real_dispatch(&real, #name);                                \
        if (__builtin_expect(hbt_inject_armed, 0)) {                                  \
            hbt_ompt_dispatch_begins(schedule);                                       \
            hbt_ompt_stop_wait(__builtin_return_address(0));                          \
        }                                                                             \
        fn(loc, gtid, schedule, lb, ub, st, chunk);                                   \
    }

HBT_OMPT_DISPATCH_INIT(__kmpc_dispatch_init_4, int32_t, int32_t)
HBT_OMPT_DISPATCH_INIT(__kmpc_dispatch_init_4u, uint32_t, int32_t)
HBT_OMPT_DISPATCH_INIT(__kmpc_dispatch_init_8, int64_t, int64_t)
HBT_OMPT_DISPATCH_INIT(__kmpc_dispatch_init_8u, uint64_t, int64_t)

/* ------------------------------------------------------------------ */
/* registration, and handing on to the next tool                       */

static int hbt_ompt_set_wrapped(int event, hbt_ompt_fn_t callback)
{
    if (event > 0 && event < HBT_OMPT_EVENTS && hbt_ompt_ours[event]) {
        __atomic_store_n(&hbt_ompt_fwd[event], callback, __ATOMIC_RELEASE);
        return hbt_ompt_ours[event];
    }
    int r = hbt_ompt_real_set(event, callback);
    if (event > 0 && event < HBT_OMPT_EVENTS && callback)
        hbt_ompt_next_direct |= 1ull << event;
    return r;
}

static int hbt_ompt_get_wrapped(int event, hbt_ompt_fn_t *callback)
{
    if (event > 0 && event < HBT_OMPT_EVENTS && hbt_ompt_ours[event]) {
        *callback = __atomic_load_n(&hbt_ompt_fwd[event], __ATOMIC_ACQUIRE);
        return *callback != NULL;
    }
    return hbt_ompt_real_get ? hbt_ompt_real_get(event, callback) : 0;
}

static hbt_ompt_fn_t hbt_ompt_lookup_wrapped(const char *name)
{
    if (strcmp(name, "ompt_set_callback") == 0)
        return (hbt_ompt_fn_t)hbt_ompt_set_wrapped;
    if (strcmp(name, "ompt_get_callback") == 0)
        return (hbt_ompt_fn_t)hbt_ompt_get_wrapped;
    return hbt_ompt_real_lookup(name);
}

static void hbt_ompt_register(int event, hbt_ompt_fn_t callback)
{
    int r = hbt_ompt_real_set(event, callback);
    hbt_ompt_ours[event] = r > HBT_OMPT_SET_NEVER ? r : 0;
}

static int hbt_ompt_initialize(hbt_ompt_lookup_t lookup, int initial_device_num,
                               hbt_ompt_data_t *tool_data)
{
    (void)tool_data;
    hbt_ompt_real_lookup = lookup;
    hbt_ompt_real_set = (hbt_ompt_set_callback_t)lookup("ompt_set_callback");
    hbt_ompt_real_get = (hbt_ompt_get_callback_t)lookup("ompt_get_callback");
    if (hbt_ompt_real_set) {
        static const struct { int event; hbt_ompt_fn_t fn; } ours[] = {
            { HBT_OMPT_THREAD_BEGIN, (hbt_ompt_fn_t)hbt_ompt_thread_begin },
            { HBT_OMPT_THREAD_END, (hbt_ompt_fn_t)hbt_ompt_thread_end },
            { HBT_OMPT_PARALLEL_BEGIN, (hbt_ompt_fn_t)hbt_ompt_parallel_begin },
            { HBT_OMPT_IMPLICIT_TASK, (hbt_ompt_fn_t)hbt_ompt_implicit_task },
            { HBT_OMPT_WORK, (hbt_ompt_fn_t)hbt_ompt_work },
            { HBT_OMPT_TASK_CREATE, (hbt_ompt_fn_t)hbt_ompt_task_create },
            { HBT_OMPT_TASK_SCHEDULE, (hbt_ompt_fn_t)hbt_ompt_task_schedule },
            { HBT_OMPT_SYNC_REGION_WAIT, (hbt_ompt_fn_t)hbt_ompt_sync_region_wait },
            { HBT_OMPT_MUTEX_ACQUIRE, (hbt_ompt_fn_t)hbt_ompt_mutex_acquire },
            { HBT_OMPT_MUTEX_ACQUIRED, (hbt_ompt_fn_t)hbt_ompt_mutex_acquired },
            { HBT_OMPT_NEST_LOCK, (hbt_ompt_fn_t)hbt_ompt_nest_lock },
            { HBT_OMPT_FLUSH, (hbt_ompt_fn_t)hbt_ompt_flush },
        };
        for (size_t k = 0; k < sizeof ours / sizeof ours[0]; k++)
            hbt_ompt_register(ours[k].event, ours[k].fn);
        __atomic_store_n(&hbt_ompt_active, 1, __ATOMIC_RELEASE);
    }
    hbt_ompt_start_tool_result_t *next = hbt_ompt_next;
    if (next && next->initialize
        && !next->initialize(hbt_ompt_lookup_wrapped, initial_device_num, &next->tool_data)) {
        /* it declined: none of its callbacks stay */
        for (int e = 1; e < HBT_OMPT_EVENTS; e++) {
            __atomic_store_n(&hbt_ompt_fwd[e], NULL, __ATOMIC_RELEASE);
            if (hbt_ompt_next_direct & (1ull << e))
                hbt_ompt_real_set(e, NULL);
        }
        hbt_ompt_next = NULL;
    }
    return 1;
}

static void hbt_ompt_finalize(hbt_ompt_data_t *tool_data)
{
    (void)tool_data;
    __atomic_store_n(&hbt_ompt_active, 0, __ATOMIC_RELEASE);
    hbt_ompt_start_tool_result_t *next = hbt_ompt_next;
    if (next && next->finalize)
        next->finalize(&next->tool_data);
}

/* The tool libomp would have started after ours: the next ompt_start_tool in
 * the global scope, else the first library of OMP_TOOL_LIBRARIES that has one
 * (ours skipped; a library that cannot be opened is passed over, as libomp does). */
static hbt_ompt_start_tool_result_t *hbt_ompt_find_next(unsigned int omp_version,
                                                        const char *runtime_version)
{
    hbt_ompt_start_tool_t f = (hbt_ompt_start_tool_t)dlsym(RTLD_NEXT, "ompt_start_tool");
    if (f && f != hbt_ompt_start_tool) {
        hbt_ompt_start_tool_result_t *r = f(omp_version, runtime_version);
        if (r)
            return r;
    }
    const char *libs = getenv("OMP_TOOL_LIBRARIES");
    if (!libs)
        return NULL;
    char buf[4096];
    size_t n = strlen(libs);
    if (n >= sizeof buf)
        return NULL;
    memcpy(buf, libs, n + 1);
    for (char *save = NULL, *p = strtok_r(buf, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
        void *h = dlopen(p, RTLD_LAZY);
        if (!h)
            continue;
        f = (hbt_ompt_start_tool_t)dlsym(h, "ompt_start_tool");
        if (f && f != hbt_ompt_start_tool) {
            hbt_ompt_start_tool_result_t *r = f(omp_version, runtime_version);
            if (r)
                return r;   /* h stays open */
        }
        dlclose(h);
    }
    return NULL;
}

static hbt_ompt_start_tool_result_t *hbt_ompt_start_tool(unsigned int omp_version,
                                                         const char *runtime_version)
{
    static hbt_ompt_start_tool_result_t ours = { hbt_ompt_initialize, hbt_ompt_finalize, { 0 } };
    if (__atomic_exchange_n(&hbt_ompt_started, 1, __ATOMIC_ACQ_REL))
        return NULL;   /* asked again (a tool of ours that asks back, a fork child) */
    hbt_ompt_start_tool_result_t *next = hbt_ompt_find_next(omp_version, runtime_version);
    /* LLVM's libomp (and Intel's, its twin) only: any other runtime is left to
     * the next tool (libgomp's programs are gomp.c's) */
    int llvm = runtime_version && (strncmp(runtime_version, "LLVM OMP", 8) == 0
                                   || strncmp(runtime_version, "Intel(R) OMP", 12) == 0);
    if (!llvm || !hbt_auto_on(HBT_SRC_OPENMP) || hbt_state() == HBT_OFF)
        return next;
    hbt_ompt_next = next;
    return &ours;
}

HBT_EXPORT hbt_ompt_start_tool_result_t *ompt_start_tool(unsigned int omp_version,
                                                         const char *runtime_version)
    __attribute__((alias("hbt_ompt_start_tool")));

/* The program's own ompt_start_tool comes before ours (libomp calls the first
 * one of the global scope): say once that the tracer's OpenMP beats are off. */
__attribute__((constructor)) static void hbt_ompt_check_other_tool(void)
{
    void *kmpc = dlsym(RTLD_DEFAULT, "__kmpc_fork_call");
    void *first = dlsym(RTLD_DEFAULT, "ompt_start_tool");
    if (!kmpc || !first || first == (void *)hbt_ompt_start_tool || !hbt_auto_on(HBT_SRC_OPENMP))
        return;
    Dl_info a, b;
    if (dladdr(first, &a) && dladdr(kmpc, &b) && a.dli_fbase == b.dli_fbase)
        return;   /* the runtime's own weak default: it hands on to ours */
    const char *where = a.dli_fname && *a.dli_fname ? a.dli_fname : "the program";
    hbt_warn("hbtrace: %s has its own OMPT tool (ompt_start_tool), found before the "
             "tracer's: OpenMP beats are off unless that tool starts the next one",
             where);
}
