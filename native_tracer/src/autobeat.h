/*
 * autobeat.h -- beats and waits recorded with no change to the program (issue 15).
 * The record layout is docs/formats.md's (see /work/contract-15.md until it lands there).
 * Implemented in native_tracer/src/autobeat.c (helper "gomp"); used by gomp.c (libgomp
 * wrappers), ompt.c (the OMPT tool for LLVM's libomp) and, through the exported entry
 * at the bottom, by the MPI profiler libhbprof.
 */
#ifndef HBT_AUTOBEAT_H
#define HBT_AUTOBEAT_H

#include <stddef.h>
#include <stdint.h>

enum hbt_source { HBT_SRC_API = 0, HBT_SRC_OPENMP = 1, HBT_SRC_MPI = 2 };
/* HBT_EV_LOCK: the thread asks for an OpenMP lock (omp_set_lock, omp_set_nest_lock), the
 * unit of work of a team that shares its work out by hand under a lock (MUSCLE 5: one
 * parallel region whose threads take the next pair of sequences under a lock); its wait for
 * the lock is a critical wait (HBT_SYNC_CRITICAL) of the same construct (HBT_CK_LOCK) */
enum hbt_omp_event { HBT_EV_CHUNK = 1, HBT_EV_WORKSHARE = 2, HBT_EV_TASK = 3, HBT_EV_IMPLICIT = 4,
                     HBT_EV_LOCK = 5 };
/* the aux of a TASK beat: the thread that made the task ran it, no teammate took it (an
 * undeferred task -- if(0), a final task, one the runtime would not queue --, one made in a
 * team of one -- a nested region where nesting is off --, or one its maker took back in its
 * taskwait before any teammate did: kalign's recursion down a chain of its guide tree) */
#define HBT_TASK_UNSHARED 1u
enum hbt_mpi_event { HBT_EV_COLLECTIVE = 1, HBT_EV_CALL = 2 };
enum hbt_sync { HBT_SYNC_BARRIER = 1, HBT_SYNC_TASKWAIT = 2, HBT_SYNC_CRITICAL = 3,
                HBT_SYNC_ORDERED = 4, HBT_SYNC_COLLECTIVE = 5,
                /* outside any parallel region: from the end of the thread's implicit task
                 * (after its IMPLICIT beat) to the start of its next one in the outermost
                 * team; written at that start. The master ran the program's serial part
                 * there, the others waited in the runtime's pool. */
                HBT_SYNC_OUTSIDE = 6,
                /* a spin on a flag in the program's own code, seen through its `omp flush`
                 * calls (libomp: ompt_callback_flush): the same flush called again and
                 * again, at most HBT_SPIN_STEP_NS apart, for HBT_SPIN_MIN_NS or more;
                 * written when the thread's next record or another flush ends it, with
                 * the time of the spin's last flush (ompt.c) */
                HBT_SYNC_FLAG = 7 };
enum hbt_construct_kind { HBT_CK_PARALLEL = 1, HBT_CK_LOOP, HBT_CK_SECTIONS, HBT_CK_SINGLE,
                          HBT_CK_TASK, HBT_CK_BARRIER, HBT_CK_CRITICAL, HBT_CK_ORDERED,
                          HBT_CK_COLLECTIVE, HBT_CK_CALL, HBT_CK_FLUSH, HBT_CK_LOCK };

/* 1 when beats of this source are to be recorded (HBTRACE_BEATS, default: all). Cheap:
 * a load of a flag set once at start. */
int hbt_auto_enabled(int source);

/* The construct id (from 1) of (kind, addr), registering it and writing its name records
 * (name space 3: "<kind>\t<symbol>\t<object>+0x<offset>") the first time; 0 when the
 * table is full or tracing is off. Lock-free lookup on the hot path. */
uint32_t hbt_construct_id(int kind, const void *addr);

/* One automatic beat of the calling thread: a `beat` record with flags source | event << 4,
 * thread = `thread`, loop = construct, iter = iter, aux 0. Same crash-safety as API beats.
 * Does not feed the online monitor's heart line while the thread has made API beats. */
void hbt_auto_beat(int source, int event, int32_t thread, uint32_t construct, int32_t iter);

/* The calling thread left a synchronisation it waited in for wait_ns: a `wait` record. */
void hbt_auto_wait(int source, int sync, int32_t thread, uint32_t construct, uint64_t wait_ns);

/* Exported (default visibility) from libhbtrace.so for the MPI profiler, which finds it with
 * dlsym(RTLD_DEFAULT, "hbtrace_mpi_beat") when both are loaded: one `mpi` beat of the
 * calling thread for the function at fn (named fn_name), event HBT_EV_COLLECTIVE or
 * HBT_EV_CALL; and one `wait` of sync kind HBT_SYNC_COLLECTIVE when wait_ns > 0. */
void hbtrace_mpi_beat(int event, const void *fn, const char *fn_name, uint64_t wait_ns);

/* ---- additions of the gomp helper (not in the contract), inside libhbtrace only ---- */

/* The sources HBTRACE_BEATS enables, a bit per source; -1 until it is read (the first
 * hbt_auto_enabled). Read with hbt_auto_on() on the hot path: one load and a test. */
extern int hbt_auto_mask __attribute__((visibility("hidden")));
__attribute__((visibility("hidden"))) int hbt_auto_parse(void);

static inline int hbt_auto_on(int source)
{
    int m = __atomic_load_n(&hbt_auto_mask, __ATOMIC_RELAXED);
    if (__builtin_expect(m < 0, 0))
        m = hbt_auto_parse();
    return (m >> source) & 1;
}

/* hbt_auto_beat and hbt_auto_wait at a clock value the caller already read
 * (hb_mono_ns(); 0 = read the clock now). */
__attribute__((visibility("hidden")))
void hbt_auto_beat_at(int source, int event, int32_t thread, uint32_t construct, int32_t iter,
                      uint64_t now);
__attribute__((visibility("hidden")))
void hbt_auto_wait_at(int source, int sync, int32_t thread, uint32_t construct,
                      uint64_t wait_ns, uint64_t now);
/* hbt_auto_beat_at with an aux other than 0 (a sections beat: the sections the thread was
 * given; a task beat: HBT_TASK_UNSHARED) */
__attribute__((visibility("hidden")))
void hbt_auto_beat_aux_at(int source, int event, int32_t thread, uint32_t construct, int32_t iter,
                          uint32_t aux, uint64_t now);

/* Construct ids run 1..HBT_CT_MAX (autobeat.c). */
#define HBT_CT_MAX     6144u
/* Chunks of a loop measured before the monitor compares a thread's chunk in progress with
 * them (hbt_unit_beat) */
#define HBT_UNIT_WARM  32u

/* Each loop's chunks (and each task construct's tasks), by construct id, for the online
 * monitor: its two longest chunks measured (ns, saturating), each with when (ms of the
 * monotonic clock, mod 2^32), each forgotten by half every HBT_UNIT_HALF_MS
 * (hbt_unit_long): a chunk the host's stop of a CPU or a fault held up does not set the
 * loop's bar for the rest of the run, a long chunk that comes back every step does; and
 * how many chunks were measured (up to HBT_UNIT_WARM). Two, not one: a single chunk
 * stretched by a preemption (a 20 us chunk that waited 4-8 ms for its CPU) is the longest,
 * and the monitor's bar for a chunk in progress is 8 times the second longest, 2 times the
 * longest (hbt_unit_overdue). Written by a thread that ends a chunk longer than the shorter
 * of the two, which is rare once a few were measured. A task construct's (`task` set) are
 * never forgotten: its tasks differ by orders of magnitude (a leaf's work and the root's
 * merge of a recursion), and its long ones may come seconds apart (kalign). */
#define HBT_UNIT_HALF_MS 1000u
/* Tasks of a construct measured before the monitor judges a task of it in progress by
 * them (hbt_unit_overdue); before, nothing in it is busy-waiting */
#define HBT_TASK_WARM  8u
struct hbt_ct_unit {
    uint32_t long_ns[2];
    uint32_t long_ms[2];
    uint32_t n;
    uint32_t task;
};

/* Slot k of a loop's two longest chunks, as of now_ms: halved for each HBT_UNIT_HALF_MS since
 * (a task construct's: as measured). */
static inline uint32_t hbt_unit_long(const struct hbt_ct_unit *c, int k, uint32_t now_ms)
{
    uint32_t d = __atomic_load_n(&c->long_ns[k], __ATOMIC_RELAXED);
    uint32_t age = now_ms - __atomic_load_n(&c->long_ms[k], __ATOMIC_RELAXED);
    if (age >= 0x80000000u || __atomic_load_n(&c->task, __ATOMIC_RELAXED))
        return d;   /* (stored after now_ms was read) */
    age /= HBT_UNIT_HALF_MS;
    return age >= 32 ? 0 : d >> age;
}

/* The longest chunk of a loop as of now_ms, and in *second the one after it. */
static inline uint32_t hbt_unit_most(const struct hbt_ct_unit *c, uint32_t now_ms, uint32_t *second)
{
    uint32_t a = hbt_unit_long(c, 0, now_ms), b = hbt_unit_long(c, 1, now_ms);
    if (second)
        *second = a < b ? a : b;
    return a < b ? b : a;
}
extern struct hbt_ct_unit hbt_ct_units[HBT_CT_MAX + 1] __attribute__((visibility("hidden")));

/* The body of hbt_auto_beat_at and hbt_auto_wait_at, inline for the hot paths of the
 * wrappers (gomp.c's loop chunk: no call into autobeat.c, one TLS block address), in
 * libhbtrace's own files only (they include internal.h before this header). */
#ifdef HBT_INTERNAL_H
/* The thread's open flag spin (HBT_SYNC_FLAG) ends: its wait record, at the time of
 * its last flush, and the monitor's wait mark cleared (autobeat.c). */
__attribute__((visibility("hidden"))) void hbt_spin_close(struct hbt_tls *t);

/* Returns the record's clock value (0 when there was no slot for it). */
static inline __attribute__((always_inline))
uint64_t hbt_auto_record(uint16_t kind, uint16_t flags, uint32_t beat, int32_t thread,
                         uint32_t construct, int32_t iter, uint32_t aux, uint64_t now)
{
    struct hbt_tls *t = &hbt_tls;
    if (__builtin_expect(t->spin_ra != NULL, 0)) {
        /* it left the flushes it repeated before this record: a spin long enough is a
         * wait that goes first; a shorter one does not go on past this record */
        if (t->spin_on)
            hbt_spin_close(t);
        t->spin_ra = NULL;
    }
    uint32_t i = hbt_take_slot(t, HBT_MODE_BEAT);
    if (__builtin_expect(i == HBT_NO_SLOT, 0))
        return 0;
    uint32_t seq = t->auto_seq;
    t->auto_seq = seq + beat;   /* beats count, waits do not */
    if (!now)
        now = hbt_now_ns();
    hbt_store(t, i, now, hbt_kindflags(kind, flags), seq, thread, (int32_t)construct, iter, aux);
    hbt_cpu_track(t, now, thread, construct, flags & HBT_SRC_MASK);
    return now;
}

/* A wait in the runtime (a barrier, a critical section, a taskwait: sync, HBT_SYNC_*) begins
 * and ends. A thread in the program's serial part (HBT_SYNC_OUTSIDE) is there again after it:
 * cd-hit's master takes a critical section outside any region, and was at work from then on,
 * judged while it wrote its output at the run's end (conditional waiting, 1 in 6 normal runs
 * beside two CPU hogs). */
static inline __attribute__((always_inline)) void hbt_wait_begin(uint32_t sync)
{
    struct hbt_tls *t = &hbt_tls;
    t->wait_under = t->beat ? t->beat->waiting : 0;
    hbt_wait_mark(sync);
}

static inline __attribute__((always_inline)) void hbt_wait_end(void)
{
    struct hbt_tls *t = &hbt_tls;
    uint32_t under = t->wait_under == HBT_SYNC_OUTSIDE ? HBT_SYNC_OUTSIDE : 0;
    t->wait_under = 0;
    hbt_wait_mark(under);
}

/* A chunk of loop `construct` (a task of it: `task`) begun at t0 ended at `at`: measured. */
static inline void hbt_unit_measure(uint32_t construct, uint64_t t0, uint64_t at, int task)
{
    struct hbt_ct_unit *c = &hbt_ct_units[construct];
    if (task && !__atomic_load_n(&c->task, __ATOMIC_RELAXED))
        __atomic_store_n(&c->task, 1u, __ATOMIC_RELAXED);
    uint64_t d = at - t0;
    uint32_t now_ms = (uint32_t)(at / 1000000u);
    uint32_t a = hbt_unit_long(c, 0, now_ms), b = hbt_unit_long(c, 1, now_ms);
    int k = a <= b ? 0 : 1;   /* the shorter of the two is replaced */
    if (d > (k ? b : a)) {
        __atomic_store_n(&c->long_ms[k], now_ms, __ATOMIC_RELAXED);
        __atomic_store_n(&c->long_ns[k], d > UINT32_MAX ? UINT32_MAX : (uint32_t)d, __ATOMIC_RELAXED);
    }
    if (__atomic_load_n(&c->n, __ATOMIC_RELAXED) < HBT_UNIT_WARM)
        __atomic_fetch_add(&c->n, 1u, __ATOMIC_RELAXED);
}

/* The unit a thread was in when a task began to run on it (a chunk whose code made the
 * task and ran it at once, the task whose taskwait runs it, ...), back when the task ends. */
struct hbt_unit_saved {
    uint32_t loop, kind, ended;
};

/* An explicit task of construct `construct` begins to run on this thread at `at`: the unit
 * of work it is in is the task from now (its teammates waiting in a taskwait for it wait
 * for a task, whose length its construct's tasks tell, not for a chunk or the thread's
 * usual beat); the unit before is kept in *sv. Returns 0 where nothing was done (the
 * monitor does not judge automatic beats; the thread has no line). */
static inline int hbt_unit_task_begin(struct hbt_unit_saved *sv, uint32_t construct, uint64_t at)
{
    struct hbt_unit *u = hbt_tls.unit;
    if (!hbt_mon_hot.openmp || !u || !construct || construct > HBT_CT_MAX)
        return 0;
    sv->loop = u->loop;
    sv->kind = u->kind;
    sv->ended = u->ended;
    __atomic_store_n(&u->kind, (uint32_t)(HBT_UNIT_TASK), __ATOMIC_RELAXED);
    __atomic_store_n(&u->ended, 0u, __ATOMIC_RELAXED);
    __atomic_store_n(&u->t, at, __ATOMIC_RELAXED);
    __atomic_store_n(&u->loop, construct, __ATOMIC_RELEASE);
    return 1;
}

/* ... and ends at `at`, its beat (hbt_unit_beat: a fault injected there after the beat is in
 * the unit the thread is back in, slow's spin before it in the task's): measured, as a task of its construct, from its start or its latest
 * wait's end; the unit before it is back, begun at `at` (silent since then: the time before
 * was the task's). */
static inline void hbt_unit_task_end(const struct hbt_unit_saved *sv, uint32_t construct, uint64_t at)
{
    struct hbt_unit *u = hbt_tls.unit;
    if (!u)
        return;
    if (u->kind == HBT_UNIT_TASK && u->loop == construct && at > u->t)
        hbt_unit_measure(construct, u->t, at, 1);
    __atomic_store_n(&u->kind, (uint32_t)(sv->kind), __ATOMIC_RELAXED);
    __atomic_store_n(&u->ended, sv->ended, __ATOMIC_RELAXED);
    __atomic_store_n(&u->t, at, __ATOMIC_RELAXED);
    __atomic_store_n(&u->loop, sv->loop, __ATOMIC_RELEASE);
}

/* An automatic beat of a thread whose automatic beats the monitor judges: a chunk beat
 * ends the thread's chunk of its loop (if it was in one, measured) and begins the next
 * (libgomp beats when a thread asks for its next chunk, libomp when it got one; a loop
 * with no chunk left clears it: hbt_unit_none). Out of a chunk, a lock's beat ends the unit
 * the thread's previous lock beat began (measured, as a chunk of that lock: a team that
 * shares its work out by hand under a lock, MUSCLE 5) and begins the next; in a chunk, it
 * leaves the chunk alone. In a task, only a chunk beat (a loop of a region the task opened)
 * changes the unit. A task's own beat leaves the unit as the task's end left it
 * (hbt_unit_task_end). Any other beat leaves the loop or the lock's unit. */
static inline __attribute__((always_inline))
void hbt_unit_beat(struct hbt_unit *u, int event, uint32_t construct, uint64_t at)
{
    if (event == HBT_EV_TASK) {
        const struct hbt_unit_saved *sv = hbt_tls.unit_end;
        if (sv) {
            hbt_tls.unit_end = NULL;
            hbt_unit_task_end(sv, construct, at);
        }
        return;
    }
    uint32_t kind = u->kind;   /* (written by this thread only) */
    uint32_t prev = u->ended ? 0u : u->loop;
    int chunk = event == HBT_EV_CHUNK, lock = event == HBT_EV_LOCK;
    if (prev && kind == HBT_UNIT_TASK && !chunk)
        return;   /* a lock taken inside a task, a region it opens and closes: still in it */
    if ((chunk || (lock && (!prev || kind == HBT_UNIT_LOCK))) && construct && construct <= HBT_CT_MAX) {
        uint64_t t0 = u->t;
        if (prev && at > t0 && (lock ? kind == HBT_UNIT_LOCK : prev == construct && kind == HBT_UNIT_CHUNK))
            hbt_unit_measure(prev, t0, at, 0);
        __atomic_store_n(&u->kind, (uint32_t)(lock ? HBT_UNIT_LOCK : HBT_UNIT_CHUNK), __ATOMIC_RELAXED);
        __atomic_store_n(&u->ended, 0u, __ATOMIC_RELAXED);
        __atomic_store_n(&u->t, at, __ATOMIC_RELAXED);
        __atomic_store_n(&u->loop, construct, __ATOMIC_RELEASE);
    } else if (u->loop && !(lock && prev && kind != HBT_UNIT_LOCK)) {   /* (a lock taken inside a chunk: still in it) */
        __atomic_store_n(&u->kind, (uint32_t)(HBT_UNIT_CHUNK), __ATOMIC_RELAXED);
        __atomic_store_n(&u->ended, 0u, __ATOMIC_RELAXED);
        __atomic_store_n(&u->loop, 0u, __ATOMIC_RELEASE);
    }
}

/* A wait in the runtime ended at `at` (a taskwait, a critical section): a task the thread is
 * in is at work again from then; its wait was not the task's work. */
static inline void hbt_unit_after_wait(uint64_t at)
{
    struct hbt_unit *u = hbt_tls.unit;
    if (u && u->kind == HBT_UNIT_TASK && u->loop && at > u->t)
        __atomic_store_n(&u->t, at, __ATOMIC_RELAXED);
}

/* The thread's loop gave it no further chunk: it is in no chunk now. With `at` (libomp,
 * whose chunk beat comes at a chunk's start), the chunk it was in ended then: measured
 * (a loop's long last iteration is learnt so), and the thread is in the loop's tail from
 * then until its next beat (`ended`: judged as in a chunk begun at `at`). Its latest beat
 * is the chunk's start: with the unit cleared, a look in the microseconds before its wait
 * at the loop's end saw a thread silent for its whole long chunk, its teammate waiting for
 * it, and nothing to say that was the loop's work -- busy-waiting (a loop's long last
 * iteration, 1 step in some hundreds; tests/test_monitor.py). */
static inline void hbt_unit_none(uint64_t at)
{
    struct hbt_unit *u = hbt_tls.unit;
    if (u && u->loop && !u->ended && u->kind != HBT_UNIT_TASK) {
        __atomic_store_n(&u->kind, (uint32_t)(HBT_UNIT_CHUNK), __ATOMIC_RELAXED);
        if (at && at > u->t && u->loop <= HBT_CT_MAX) {
            hbt_unit_measure(u->loop, u->t, at, 0);
            __atomic_store_n(&u->ended, 1u, __ATOMIC_RELAXED);
            __atomic_store_n(&u->t, at, __ATOMIC_RELAXED);
            __atomic_store_n(&u->loop, u->loop, __ATOMIC_RELEASE);
            return;
        }
        __atomic_store_n(&u->loop, 0u, __ATOMIC_RELEASE);
    }
}

/* One automatic beat, inline (hbt_auto_beat_at's record); a unit of work ended there,
 * where the fault injector may act (inject.h). */
static inline __attribute__((always_inline))
void hbt_auto_beat_inline(int source, int event, int32_t thread, uint32_t construct,
                          int32_t iter, uint32_t aux, uint64_t now)
{
    if (__builtin_expect(hbt_inject_armed, 0)) {
        /* a flag spin still open ends first (as the record would end it): slow takes its
         * CPU time out of the unit before it spins for the unit */
        if (hbt_tls.spin_on)
            hbt_spin_close(&hbt_tls);
        now = hbt_inject_before_beat(thread, now);   /* slow: the unit's spin, before its beat */
    }
    uint64_t at = hbt_auto_record(HBT_REC_BEAT, (uint16_t)((source & 0xF) | (event << HBT_EV_SHIFT)), 1,
                                  thread, construct, iter, aux, now);
    if (__builtin_expect(hbt_mon_hot.openmp, 0) && source == HBT_SRC_OPENMP && at) {
        /* HBTRACE_MONITOR_BEATS=openmp: this beat, not the API's, is what the online
         * monitor judges; its count is the thread's automatic beats */
        struct hbt_tls *t = &hbt_tls;
        if (t->beat) {
            if (__builtin_expect(t->beat->thread != thread, 0))
                __atomic_store_n(&t->beat->thread, thread, __ATOMIC_RELAXED);
            hbt_beatline_update(t, at, t->auto_seq - 1);
        }
        if (t->unit)
            hbt_unit_beat(t->unit, event, construct, at);
    }
    if (__builtin_expect(hbt_inject_armed, 0))
        hbt_inject_point(source, thread, at ? at : now);
}
#endif

/* hbt_construct_id with the symbol given (NULL: dladdr's), for the MPI entry. */
__attribute__((visibility("hidden")))
uint32_t hbt_construct_id_named(int kind, const void *addr, const char *symbol);


/* ---- gomp_known.c: the libgomp entry points gomp.c knows ---- */

/* How many of names[0..n) (sorted in place) are GOMP_* entry points that are neither in
 * ours[0..nours) (sorted in place: the ones this build wraps) nor known to need no wrapper
 * (gomp_known.c's list, GOMP_PLUGIN_*); each name counted once; the first max into out. */
__attribute__((visibility("hidden")))
size_t hbt_gomp_unknown(const char **names, size_t n, const char **ours, size_t nours,
                        const char **out, size_t max);

/* The names of the functions with default visibility whose names begin with prefix, defined
 * by the loaded object holding addr (its dynamic symbol table, found with
 * dl_iterate_phdr); at most max into out, which point into the object's string table. */
__attribute__((visibility("hidden")))
size_t hbt_elf_exports(const void *addr, const char *prefix, const char **out, size_t max);

/* The check gomp.c makes once: how many GOMP_* functions the object defining `real` (a
 * libgomp entry) exports that this library neither wraps nor knows (the first max into
 * first; *object: that object's file name). Not reentrant: called once. */
__attribute__((visibility("hidden")))
size_t hbt_gomp_check(const void *real, const char **first, size_t max, const char **object);

#endif
