/*
 * prefault.c -- the background pre-faulter.
 *
 * A record is stored straight into a MAP_SHARED mapping of the trace file.
 * The first store into each fresh 4 KiB page takes a page fault that finds
 * or allocates the page-cache page and makes it writable (page_mkwrite):
 * one fault per 128 beats, and on a virtual machine one such fault can cost
 * as much as several hundred beats. This thread takes those faults instead:
 * it keeps the chunk area ahead of the allocation point (chunks are handed
 * out in increasing file offset, see hbt_take_chunk) writable, `ahead`
 * chunks deep, one page at a time (madvise(MADV_POPULATE_WRITE) of one
 * page), and grows the file ahead when that headroom reaches past the
 * mapped extents.
 *
 * Why one page at a time, at the program's own priority: populating holds
 * the process's mmap lock, and a program thread that changes its address
 * space (brk, mmap, munmap, mprotect: any malloc or free of a large block)
 * waits for it. At nice 19, populating 256 KiB per call, the thread got
 * about 1 % of a CPU while the program's threads filled them and was kept
 * off the CPU for up to a second holding the lock: a thread of NPB LU that
 * leaked memory (brk) stopped for 0.2-0.4 s in every such run, and
 * tests/programs/heap_grower.c's sbrk calls waited 0.4-1.2 s
 * (tests/test_prefault.py; at most a few ms now). Writes from user space
 * instead (a fault under the mapping's own lock on Linux 6.7+) would race,
 * by the C memory model, with a beating thread's stores into a chunk handed
 * out meanwhile (ThreadSanitizer reports it): they are the fallback of
 * kernels without MADV_POPULATE_WRITE only.
 *
 * What it must never do:
 *   - block a beating thread: beating threads never wait for it; if it is
 *     behind, they take the faults themselves as they would without it. It
 *     takes g.lock only with trylock, and only to grow the file.
 *   - be seen as a program thread: created with the real pthread_create
 *     (not our interposed one), never registered, records nothing, all
 *     signals blocked.
 *   - change the data: it only populates chunks not yet handed out (all
 *     zero). The fallback for kernels without MADV_POPULATE_WRITE writes
 *     with an atomic "add 0", which cannot change a value even if a thread
 *     took the chunk meanwhile.
 *   - touch the file past its end after the trim at exit (the fallback's
 *     SIGBUS; madvise only fails there, EFAULT): it
 *     announces each page it is about to touch in pf.claim, then reads
 *     file_units (both seq_cst); hbt_trim_locked waits for the page in hand
 *     (hbt_prefault_settle), or keeps it in the file. After the trim it
 *     does nothing.
 *   - hold a lock a program thread needs while it is kept off the CPU: it
 *     runs at the priority of the thread that started it (above).
 *   - keep a program thread off the CPU for long: it yields the CPU after
 *     each round of 16 pages (tens of microseconds).
 *   - keep the process alive: exit() ends it like any other thread (it is
 *     never waited for). When the main thread calls pthread_exit, the
 *     process must end with the last other thread: hbt_prefault_stop (from
 *     our pthread_exit) stops and joins it first, for good. If the main
 *     thread went away by a path we do not see (thrd_exit, cancellation),
 *     the thread notices it once idle and the process orphaned (the one
 *     rule of background.c: main thread gone, no program thread left) and
 *     returns.
 *
 * It is started lazily, on the rare path of a thread that takes its second
 * chunk (so a process that records only its lifecycle never gets an extra
 * thread), and again in a fork child once the child needs its own file. It
 * sleeps on a futex; the rare path of taking a chunk wakes it when the
 * headroom falls below half (one load per chunk otherwise, one syscall per
 * many chunks when it sleeps), and it wakes by itself every 50 ms, backing
 * off to 1 s while no chunk is taken.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23   /* Linux 5.14 */
#endif

#define HBT_PF_DEFAULT_MB   4u
#define HBT_PF_MAX_MB       1024u
#define HBT_PF_STEP         (HBT_CHUNK_SIZE / HBT_UNIT_SIZE)  /* units per round (a largest
                                                             chunk, 16 pages) */
#define HBT_PF_PERIOD_MS    50u
#define HBT_PF_IDLE_MAX_MS  1000u
#define HBT_PF_STACK        (128u * 1024u)
#define HBT_PF_JOIN_S       2

/* Read HBTRACE_PREFAULT and HBTRACE_PREFAULT_MB; called when the file opens
 * (max_units is set). */
void hbt_prefault_config(void)
{
    struct hbt_prefault *pf = &hbt_g.pf;
    const char *v = hbt_getenv(HBT_ENV_HBTRACE_PREFAULT);
    pf->enabled = !(v && strcmp(v, "0") == 0);
    uint64_t mb = HBT_PF_DEFAULT_MB;
    v = hbt_getenv(HBT_ENV_HBTRACE_PREFAULT_MB);
    if (v && *v) {
        char *end;
        errno = 0;
        unsigned long long x = strtoull(v, &end, 10);
        if (!errno && !*end)
            mb = x > HBT_PF_MAX_MB ? HBT_PF_MAX_MB : x;
    }
    pf->ahead = mb * 1024u * 1024u / HBT_UNIT_SIZE;
    if (pf->ahead == 0)
        pf->enabled = 0;
    else if (pf->ahead < 2 * hbt_g.chunk_units)
        pf->ahead = 2 * hbt_g.chunk_units;
}

static void hbt_pf_wake(struct hbt_prefault *pf)
{
    __atomic_fetch_add(&pf->word, 1, __ATOMIC_SEQ_CST);
    hbt_futex_wake(&pf->word, 1);
}

/* Make units [from, to) writable (from on a page boundary, mapped at addr),
 * one 4 KiB page at a time: madvise(MADV_POPULATE_WRITE) of one page holds
 * the mmap lock for one page fault only, and writes nothing a beating
 * thread may be writing (a page of a chunk handed out meanwhile). Kernels
 * before 5.14 have no MADV_POPULATE_WRITE (*touch set): one atomic "add 0"
 * per page, a write that leaves the value as it was, whoever stored it.
 * Each page is announced in pf.claim before the reach of the file is
 * checked (seq_cst on both sides: the trim at exit lowers file_units, then
 * reads claim, and waits for the page in hand, see hbt_prefault_settle).
 * Returns where it stopped. */
static uint64_t hbt_pf_populate(struct hbt_prefault *pf, char *addr, uint64_t from, uint64_t to,
                                int *touch)
{
    uint64_t u = from;
    for (; u < to; u += HBT_PAGE_UNITS) {
        __atomic_store_n(&pf->claim, u + 1, __ATOMIC_SEQ_CST);
        if (u >= __atomic_load_n(&hbt_g.file_units, __ATOMIC_SEQ_CST) ||
            __atomic_load_n(&hbt_g.closing, __ATOMIC_ACQUIRE))
            break;
        char *page = addr + (u - from) * HBT_UNIT_SIZE;
        if (!*touch) {
            if (madvise(page, 4096, MADV_POPULATE_WRITE) == 0)
                continue;
            if (errno != EINVAL && errno != ENOSYS)
                break;    /* EFAULT (past the end of the file), ENOMEM: next round */
            *touch = 1;   /* kernel before 5.14 */
        }
        __atomic_fetch_add((uint64_t *)(void *)page, 0, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&pf->claim, 0, __ATOMIC_RELEASE);
    return u < to ? u : to;
}

/* For the trim at exit (g.lock held, file_units already lowered to keep):
 * the end of the page the pre-faulter may be touching, once it is done with
 * any page beyond keep. It stops at its next page (it sees the lowered
 * file_units), a few microseconds; waits 50 ms at most, then the page in
 * hand stays in the file. */
uint64_t hbt_prefault_settle(uint64_t keep)
{
    const uint64_t deadline = hbt_now_ns() + 50000000u;
    for (;;) {
        uint64_t c = hbt_page_units(__atomic_load_n(&hbt_g.pf.claim, __ATOMIC_SEQ_CST));
        if (c <= keep || hbt_now_ns() >= deadline)
            return c;
        struct timespec ts = { 0, 50000 };
        nanosleep(&ts, NULL);
    }
}

/* One round of work. Returns 1 if it did something (call again), 0 if the
 * headroom is full or cannot be extended now. */
static int hbt_pf_work(struct hbt_prefault *pf, int *touch, uint64_t *grow_failed)
{
    if (__atomic_load_n(&hbt_g.closing, __ATOMIC_ACQUIRE))
        return 0;   /* trimmed at exit: nothing ahead is wanted any more */
    uint64_t next = __atomic_load_n(&hbt_g.next_unit, __ATOMIC_SEQ_CST);
    uint64_t cap = hbt_g.max_units;
    uint64_t target = next + pf->ahead < cap ? next + pf->ahead : cap;
    uint64_t done = __atomic_load_n(&pf->done, __ATOMIC_RELAXED);
    if (done < next)
        done = next;   /* handed out before we got there: skip */
    /* whole pages: from the next page boundary (the page holding the
     * allocation point is left to its writer) */
    done = hbt_page_units(done);
    if (done >= target)
        return 0;
    uint64_t mapped = __atomic_load_n(&hbt_g.mapped_units, __ATOMIC_ACQUIRE);
    if (done >= mapped) {
        if (mapped == *grow_failed)
            return 0;   /* until a thread grows the file itself */
        if (__atomic_load_n(&hbt_g.full, __ATOMIC_ACQUIRE) ||
            pthread_mutex_trylock(&hbt_g.lock) != 0)
            return 0;   /* somebody else is growing it */
        int ok = hbt_grow_locked(done, HBT_M_AHEAD);
        pthread_mutex_unlock(&hbt_g.lock);
        if (!ok) {
            *grow_failed = mapped;
            return 0;
        }
        return 1;
    }
    uint64_t ext_end;
    char *addr = hbt_unit_span(done, &ext_end);
    uint64_t end = done + HBT_PF_STEP;
    if (end > target)
        end = target;
    if (end > ext_end)
        end = ext_end;
    end = hbt_pf_populate(pf, addr, done, end, touch);
    if (end <= done)
        return 0;
    __atomic_store_n(&pf->done, end, __ATOMIC_RELEASE);
    return 1;
}

static void *hbt_pf_main(void *unused)
{
    (void)unused;
    struct hbt_prefault *pf = &hbt_g.pf;
    hbt_tls.internal = 1;
    /* At the creator's priority, not below it: its work only replaces
     * page faults the beating threads would otherwise take themselves, and
     * each fault holds kernel locks a program thread may wait for (above).
     * At nice 19 it was kept off the CPU for up to a second while holding
     * them. */
    int touch = 0;
    uint64_t grow_failed = UINT64_MAX;
    unsigned period = HBT_PF_PERIOD_MS;
    uint64_t seen = __atomic_load_n(&hbt_g.next_unit, __ATOMIC_RELAXED);
    while (!__atomic_load_n(&pf->stop, __ATOMIC_ACQUIRE)) {
        if (hbt_pf_work(pf, &touch, &grow_failed)) {
            /* a round at a time, and the CPU to a program thread it took it from: woken
             * with the headroom empty, it ran 4 ms in one go at the program's priority, and
             * a worker it preempted made no beat for that long (the first 4 MB, 45 ms into
             * every run of tests/programs/omp_long_chunks.c: the longest chunk of a loop of
             * 20 us chunks, which the monitor measures chunks against) */
            sched_yield();
            continue;
        }
        /* sleep until woken or `period` ms; `waiting` is set before the
         * last look at next_unit, so a wake-up is not lost */
        uint32_t w = __atomic_load_n(&pf->word, __ATOMIC_SEQ_CST);
        __atomic_store_n(&pf->waiting, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&pf->stop, __ATOMIC_SEQ_CST) ||
            hbt_pf_work(pf, &touch, &grow_failed)) {
            __atomic_store_n(&pf->waiting, 0, __ATOMIC_RELAXED);
            continue;
        }
        int timed_out = hbt_sleep_until(hbt_now_ns() + (uint64_t)period * 1000000u,
                                        &pf->word, w);
        __atomic_store_n(&pf->waiting, 0, __ATOMIC_RELAXED);

        uint64_t now = __atomic_load_n(&hbt_g.next_unit, __ATOMIC_RELAXED);
        if (now != seen || !timed_out) {
            seen = now;
            period = HBT_PF_PERIOD_MS;
        } else {
            /* idle: back off, and make sure we are not the last thread of
             * a process whose main thread left unseen */
            period = period * 2 > HBT_PF_IDLE_MAX_MS ? HBT_PF_IDLE_MAX_MS : period * 2;
            if (hbt_orphaned())
                break;
        }
    }
    __atomic_store_n(&pf->run, HBT_PF_DEAD, __ATOMIC_RELEASE);
    return NULL;
}

/* Start the thread, from the rare path of a thread taking a chunk; never
 * waits: gives up if another thread is starting or stopping it. */
static void hbt_pf_start(void)
{
    struct hbt_prefault *pf = &hbt_g.pf;
    if (pthread_mutex_trylock(&pf->lock) != 0)
        return;
    if (__atomic_load_n(&pf->run, __ATOMIC_ACQUIRE) != HBT_PF_IDLE || pf->have_thread ||
        getpid() != hbt_g.pid) {   /* getpid: not from a vfork child */
        pthread_mutex_unlock(&pf->lock);
        return;
    }
    __atomic_store_n(&pf->stop, 0, __ATOMIC_RELAXED);
    /* joinable: hbt_prefault_stop waits for it */
    int rc = hbt_bg_start(&pf->thread, "hbt-prefault", HBT_PF_STACK, 1, hbt_pf_main, NULL);
    if (rc == 0) {
        pf->have_thread = 1;
        __atomic_store_n(&pf->run, HBT_PF_RUNNING, __ATOMIC_RELEASE);
    } else {
        __atomic_store_n(&pf->run, HBT_PF_DEAD, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&pf->lock);
}

/*
 * From hbt_new_chunk, after chunk `chunk` was handed out to thread t, before
 * it is used. The common case is one load and one compare.
 */
void hbt_prefault_kick(const struct hbt_tls *t, uint64_t chunk, unsigned mode)
{
    struct hbt_prefault *pf = &hbt_g.pf;
    if (!pf->enabled)
        return;
    int run = __atomic_load_n(&pf->run, __ATOMIC_ACQUIRE);
    if (run == HBT_PF_RUNNING) {
        uint64_t want = chunk + 1 + pf->ahead / 2;
        if (want > hbt_g.max_units)
            want = hbt_g.max_units;
        if (__atomic_load_n(&pf->done, __ATOMIC_RELAXED) >= want)
            return;
        /* next_unit was advanced (seq_cst) before we look at `waiting`;
         * the thread sets `waiting` before it looks at next_unit */
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        if (__atomic_load_n(&pf->waiting, __ATOMIC_SEQ_CST) &&
            __atomic_exchange_n(&pf->waiting, 0, __ATOMIC_SEQ_CST))
            hbt_pf_wake(pf);   /* async-signal-safe: a futex syscall */
        return;
    }
    /* start when a thread takes a chunk of the largest size (its chunks
     * double from one unit: it made some 2000 records, it is beating).
     * Not from a signal handler (pthread_create is not async-signal-safe). */
    if (run == HBT_PF_IDLE && t->chunk_seq >= 8 && (mode & HBT_M_GROW) &&
        !(mode & HBT_M_SIGNAL))
        hbt_pf_start();
}

/* The main thread is about to pthread_exit: stop the thread and wait until
 * it is gone (it returns within one populate step), and never start it
 * again in this process. */
void hbt_prefault_stop(void)
{
    struct hbt_prefault *pf = &hbt_g.pf;
    __atomic_store_n(&pf->run, HBT_PF_DEAD, __ATOMIC_RELEASE);
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += HBT_PF_JOIN_S;
    /* held only by a thread starting it (bounded); timed in case that was
     * this very thread, interrupted by a signal handler that exits */
    if (pthread_mutex_timedlock(&pf->lock, &dl) != 0)
        return;
    __atomic_store_n(&pf->run, HBT_PF_DEAD, __ATOMIC_RELEASE);
    if (pf->have_thread) {
        __atomic_store_n(&pf->stop, 1, __ATOMIC_SEQ_CST);
        hbt_pf_wake(pf);
        if (pthread_timedjoin_np(pf->thread, NULL, &dl) == 0)
            pf->have_thread = 0;
    }
    pthread_mutex_unlock(&pf->lock);
}

/* fork child: the thread was not copied; start afresh with the child's own
 * file. Runs in the only thread of the child, after core.c's handler. */
void hbt_prefault_after_fork_child(void)
{
    struct hbt_prefault *pf = &hbt_g.pf;
    pthread_mutex_init(&pf->lock, NULL);
    pf->have_thread = 0;
    __atomic_store_n(&pf->done, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&pf->claim, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&pf->stop, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&pf->waiting, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&pf->word, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&pf->run, HBT_PF_IDLE, __ATOMIC_RELEASE);
    hbt_tls.internal = 0;
}
