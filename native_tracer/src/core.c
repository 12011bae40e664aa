/*
 * core.c -- chunks, thread registration, the records written outside the
 * hot path, and the process events (fork, exit) that concern them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

_Static_assert(sizeof(struct hbt_file_header) == HBT_HEADER_SIZE, "file header size");
_Static_assert(sizeof(struct hbt_chunk_header) == HBT_SLOT_SIZE, "chunk header size");
_Static_assert(sizeof(struct hbt_record) == HBT_SLOT_SIZE, "record size");
_Static_assert(sizeof(struct hbt_slot) == sizeof(struct hbt_record), "slot size");
_Static_assert(offsetof(struct hbt_slot, kindflags) == offsetof(struct hbt_record, kind),
               "kind word");
_Static_assert(offsetof(struct hbt_record, flags) == offsetof(struct hbt_record, kind) + 2,
               "flags follow kind");
_Static_assert(offsetof(struct hbt_chunk_header, magic) == offsetof(struct hbt_slot, kindflags),
               "chunk magic is stored last like a record's kind word");
_Static_assert(HBT_HEADER_SIZE + HBT_META_CAPACITY <= HBT_DATA_OFFSET, "metadata fits");
_Static_assert(HBT_CHUNK_SIZE % 4096 == 0, "largest chunks are page aligned in the file");
_Static_assert(HBT_CHUNK_SIZE % HBT_UNIT_SIZE == 0 && 4096 % HBT_UNIT_SIZE == 0 &&
               HBT_UNIT_SIZE % HBT_SLOT_SIZE == 0 && HBT_UNIT_SIZE >= 4 * HBT_SLOT_SIZE,
               "units divide pages and chunks, and hold a header, two records and the reserved slot");

__thread struct hbt_tls hbt_tls __attribute__((tls_model("initial-exec")));

struct hbt_global hbt_g = {
    .state = HBT_UNINIT,
    .fd = -1,
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .pf.lock = PTHREAD_MUTEX_INITIALIZER,
};

#define HBT_LOCK_TIMEOUT_S   10

/* ------------------------------------------------------------------ */
/* small helpers                                                       */

void hbt_warn(const char *fmt, ...)
{
    if (hbt_g.quiet)
        return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof buf - 2)
        n = (int)sizeof buf - 2;
    buf[n++] = '\n';
    /* write(2), not stdio: never touch the program's FILE buffers or locks */
    ssize_t w = write(STDERR_FILENO, buf, (size_t)n);
    (void)w;
}

/*
 * g.lock guards initialisation, growth and metadata. It is taken with a
 * timeout: a thread that died inside the tracer (a program's signal handler
 * that longjmp'd out of it) must not hang the others. Cancellation is off
 * while it is held so that pthread_cancel cannot leave it locked.
 */
int hbt_lock(void)
{
    int old;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += HBT_LOCK_TIMEOUT_S;
    if (pthread_mutex_timedlock(&hbt_g.lock, &dl) != 0) {
        pthread_setcancelstate(old, NULL);
        __atomic_store_n(&hbt_g.full, 1, __ATOMIC_RELEASE);
        if (hbt_g.hdr)
            __atomic_fetch_or(&hbt_g.hdr->lost_why, HBT_LOST_LOCK, __ATOMIC_RELAXED);
        if (!__atomic_exchange_n(&hbt_g.full_warned, 1, __ATOMIC_ACQ_REL))
            hbt_warn("hbtrace: tracer lock held for %d s by another thread; "
                     "further records are dropped", HBT_LOCK_TIMEOUT_S);
        return 0;
    }
    hbt_tls.cancel_state = old;
    return 1;
}

/* g.lock for at most `ms` milliseconds, for the paths that may simply do
 * without it (the trim at exit): no warning, no side effect on failure.
 * Released with hbt_unlock. */
int hbt_lock_for_ms(long ms)
{
    int old;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += ms / 1000;
    dl.tv_nsec += (ms % 1000) * 1000000;
    if (dl.tv_nsec >= 1000000000) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000;
    }
    if (pthread_mutex_timedlock(&hbt_g.lock, &dl) != 0) {
        pthread_setcancelstate(old, NULL);
        return 0;
    }
    hbt_tls.cancel_state = old;
    return 1;
}

void hbt_unlock(void)
{
    int old = hbt_tls.cancel_state;
    pthread_mutex_unlock(&hbt_g.lock);
    pthread_setcancelstate(old, NULL);
}

/*
 * HBTRACE_REPORT: a file (made by `hbtool record`, on a RAM file system
 * where it can) that the tracer appends one line to when it cannot write
 * the trace, so that record can say what happened even when the trace
 * folder's disk is full:
 *   <what>\t<pid>\t<errno>\t<where>\n
 * what: "start" (no trace file could be made; where = the folder),
 * "grow" (the file could not grow; where = the file), "cap" (the file
 * reached HBTRACE_MAX_MB; errno 0). Opened O_APPEND|O_NOFOLLOW, never
 * created; one write(2) of less than PIPE_BUF bytes; async-signal-safe but
 * never called from a signal handler.
 */
void hbt_report_line(const char *what, const char *where, int err)
{
    const char *path = hbt_getenv(HBT_ENV_HBTRACE_REPORT);
    if (!path || !*path)
        return;
    int fd = open(path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return;
    struct stat st;
    char line[512];
    int n = snprintf(line, sizeof line, "%s\t%d\t%d\t%s\n", what, (int)getpid(), err,
                     where ? where : "");
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && n > 0 && (size_t)n < sizeof line) {
        ssize_t w = write(fd, line, (size_t)n);
        (void)w;
    }
    close(fd);
}

static uint32_t hbt_lost_reason(int err)
{
    if (err == 0)
        return HBT_LOST_CAP;
    if (err == ENOSPC || err == EDQUOT)
        return HBT_LOST_NOSPACE;
    if (err == EFBIG)
        return HBT_LOST_FSIZE;
    return HBT_LOST_IO;
}

/* Stop handing out chunks; the header says why (lost_why, lost_errno), and
 * one warning per process, and one line of HBTRACE_REPORT. */
void hbt_set_full(unsigned mode, const char *why, int err)
{
    __atomic_store_n(&hbt_g.full, 1, __ATOMIC_RELEASE);
    struct hbt_file_header *h = hbt_g.hdr;
    if (h) {
        __atomic_fetch_or(&h->lost_why, hbt_lost_reason(err), __ATOMIC_RELAXED);
        uint32_t none = 0;
        if (err)
            __atomic_compare_exchange_n(&h->lost_errno, &none, (uint32_t)err, 0,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    }
    if (mode & HBT_M_SIGNAL)
        return;   /* no formatting inside a signal handler */
    if (__atomic_exchange_n(&hbt_g.full_warned, 1, __ATOMIC_ACQ_REL))
        return;
    if (err)
        hbt_warn("hbtrace: cannot grow trace file %s: %s; further records are "
                 "dropped and counted in lost_records", hbt_g.path, strerror(err));
    else
        hbt_warn("hbtrace: trace file %s reached %s; further records are "
                 "dropped and counted in lost_records", hbt_g.path, why);
    hbt_report_line(err ? "grow" : "cap", hbt_g.path, err);
}

static void hbt_count_lost(void)
{
    struct hbt_file_header *h = hbt_g.hdr;
    if (h)
        __atomic_fetch_add(&h->lost_records, 1, __ATOMIC_RELAXED);
}

/* Open the file if this process has none yet. 1 when tracing is on. */
int hbt_ensure_open(void)
{
    int st = hbt_state();
    if (st == HBT_ON)
        return 1;
    if (st == HBT_OFF)
        return 0;
    if (!hbt_lock())
        return 0;
    st = hbt_state();
    if (st == HBT_UNINIT || st == HBT_LAZY) {
        st = hbt_open_trace() ? HBT_ON : HBT_OFF;
        __atomic_store_n(&hbt_g.state, st, __ATOMIC_RELEASE);
    }
    hbt_unlock();
    return st == HBT_ON;
}

/* ------------------------------------------------------------------ */
/* chunks                                                              */

/* Address of unit i, and in *ext_end the first unit past its extent; the
 * caller has seen mapped_units > i (acquire). */
char *hbt_unit_span(uint64_t i, uint64_t *ext_end)
{
    uint32_t lo = 0, hi = __atomic_load_n(&hbt_g.n_extents, __ATOMIC_ACQUIRE);
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (hbt_g.ext[mid].first <= i)
            lo = mid;
        else
            hi = mid;
    }
    const struct hbt_extent *e = &hbt_g.ext[lo];
    if (ext_end)
        *ext_end = e->first + e->count;
    return e->base + (i - e->first) * HBT_UNIT_SIZE;
}

static struct hbt_slot *hbt_unit_addr(uint64_t i)
{
    return (struct hbt_slot *)hbt_unit_span(i, NULL);
}

/* Units that may have been handed out and lie inside the file: the reach
 * of a scan over the chunk area. */
uint64_t hbt_units_handed_out(void)
{
    uint64_t n = __atomic_load_n(&hbt_g.next_unit, __ATOMIC_ACQUIRE);
    uint64_t mapped = __atomic_load_n(&hbt_g.mapped_units, __ATOMIC_ACQUIRE);
    uint64_t file = __atomic_load_n(&hbt_g.file_units, __ATOMIC_ACQUIRE);
    if (n > mapped)
        n = mapped;
    if (n > file)
        n = file;
    return n < hbt_g.max_units ? n : hbt_g.max_units;
}

/* ---- free runs of units (hbt_g.pieces) ----
 * Runs below the allocation point that no chunk uses: the tail of an ended
 * thread's last chunk (hbt_release_chunk), the gap the allocator skipped to
 * keep a chunk from crossing a chunk_units boundary. A run never crosses
 * such a boundary either (it lay inside one chunk, or before one). The
 * list is guarded by a spin lock that is only ever tried: a thread that
 * finds it busy does without (takes fresh units, or lets a run go, which
 * then stays zero in the file). Never from a signal handler. */

static int hbt_pieces_trylock(void)
{
    return !__atomic_exchange_n(&hbt_g.free_lock, 1, __ATOMIC_ACQUIRE);
}

static void hbt_pieces_unlock(void)
{
    __atomic_store_n(&hbt_g.free_lock, 0, __ATOMIC_RELEASE);
}

static void hbt_piece_put(uint64_t first, uint64_t count)
{
    if (count == 0 || !hbt_pieces_trylock())
        return;
    uint32_t n = hbt_g.n_pieces;
    if (n < HBT_MAX_PIECES) {
        hbt_g.pieces[n] = (struct hbt_piece){ first, count };
        __atomic_store_n(&hbt_g.n_pieces, n + 1, __ATOMIC_RELAXED);   /* peeked at unlocked */
    } else {
        /* full: the new run replaces the smallest, if it is larger */
        uint32_t k = 0;
        for (uint32_t j = 1; j < n; j++)
            if (hbt_g.pieces[j].count < hbt_g.pieces[k].count)
                k = j;
        if (hbt_g.pieces[k].count < count)
            hbt_g.pieces[k] = (struct hbt_piece){ first, count };
    }
    hbt_pieces_unlock();
}

/* `want` units from the smallest run that holds them. 1 and *first if found. */
static int hbt_piece_take(uint64_t want, uint64_t *first)
{
    if (__atomic_load_n(&hbt_g.n_pieces, __ATOMIC_RELAXED) == 0 || !hbt_pieces_trylock())
        return 0;
    uint32_t n = hbt_g.n_pieces, best = n;
    for (uint32_t j = 0; j < n; j++)
        if (hbt_g.pieces[j].count >= want &&
            (best == n || hbt_g.pieces[j].count < hbt_g.pieces[best].count))
            best = j;
    int found = best < n;
    if (found) {
        struct hbt_piece *p = &hbt_g.pieces[best];
        *first = p->first;
        p->first += want;
        p->count -= want;
        if (p->count == 0) {
            hbt_g.pieces[best] = hbt_g.pieces[n - 1];
            __atomic_store_n(&hbt_g.n_pieces, n - 1, __ATOMIC_RELAXED);
        }
    }
    hbt_pieces_unlock();
    return found;
}

/*
 * Hand out `want` fresh units for a chunk: a free run if one is large
 * enough, else from the allocation point, skipping to the next multiple of
 * chunk_units when the chunk would cross it (the skipped gap becomes a free
 * run). Lock-free unless the file has to grow (or, after the trim at exit,
 * be extended again), which a signal handler (no HBT_M_GROW) never does.
 *
 * The compare-and-swap of next_unit and the load of file_units are seq_cst
 * (on x86 the load is the same instruction as a relaxed one):
 * hbt_trim_locked lowers file_units and then reads next_unit, both seq_cst,
 * so that every unit handed out is either seen by the trim (and kept in the
 * file) or sees the lowered file_units here (and extends the file under
 * g.lock before the chunk is touched). Free runs lie below an allocation
 * point the file already covers.
 */
static struct hbt_slot *hbt_take_chunk(unsigned mode, uint64_t want, uint64_t *index)
{
    if (__atomic_load_n(&hbt_g.full, __ATOMIC_ACQUIRE))
        return NULL;
    uint64_t i;
    if (!(mode & HBT_M_SIGNAL) && hbt_piece_take(want, &i)) {
        *index = i;
        return hbt_unit_addr(i);
    }
    uint64_t cur = __atomic_load_n(&hbt_g.next_unit, __ATOMIC_SEQ_CST), end;
    for (;;) {
        uint64_t in = cur % hbt_g.chunk_units;
        i = in + want > hbt_g.chunk_units ? cur - in + hbt_g.chunk_units : cur;
        end = i + want;
        if (end > hbt_g.max_units) {
            char why[64] = "";
            if (!(mode & HBT_M_SIGNAL))
                snprintf(why, sizeof why, "%s=%llu", hbt_env_name(HBT_ENV_HBTRACE_MAX_MB),
                         (unsigned long long)hbt_g.max_mb);
            hbt_set_full(mode, why, 0);
            return NULL;
        }
        if (__atomic_compare_exchange_n(&hbt_g.next_unit, &cur, end, 0, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST))
            break;
    }
    if (end > __atomic_load_n(&hbt_g.mapped_units, __ATOMIC_ACQUIRE) ||
        end > __atomic_load_n(&hbt_g.file_units, __ATOMIC_SEQ_CST)) {
        /* units given up here stay zero: no chunk begins in them */
        if (!(mode & HBT_M_GROW) || !hbt_lock())
            return NULL;
        int ok = hbt_grow_locked(end - 1, mode);
        hbt_unlock();
        if (!ok)
            return NULL;
    }
    if (i > cur && !(mode & HBT_M_SIGNAL))
        hbt_piece_put(cur, i - cur);
    *index = i;
    return hbt_unit_addr(i);
}

/* Units of the calling thread's next chunk: one for its first (a thread
 * that records only its start and end costs one unit), twice the previous
 * for each further one up to the largest, so that a beating thread soon
 * takes a new chunk only every ~2000 records; one again after its end. */
static uint64_t hbt_chunk_want(const struct hbt_tls *t)
{
    if (t->end_recorded || t->chunk_seq == 0)
        return 1;
    if (t->chunk_seq >= 31)
        return hbt_g.chunk_units;
    uint64_t n = (uint64_t)1 << t->chunk_seq;
    return n < hbt_g.chunk_units ? n : hbt_g.chunk_units;
}

static int hbt_new_chunk(struct hbt_tls *t, unsigned mode)
{
    uint64_t index = 0;
    uint64_t want = hbt_chunk_want(t);
    struct hbt_slot *c = hbt_take_chunk(mode, want, &index);
    if (!c)
        return 0;
    /* before the chunk is used: wakes (or first starts) the pre-faulter
     * when its headroom runs low; one atomic load otherwise */
    hbt_prefault_kick(t, index, mode);
    struct hbt_chunk_header *h = (struct hbt_chunk_header *)c;
    h->os_tid = (uint64_t)syscall(SYS_gettid);
    h->thread_slot = t->thread_slot;
    h->chunk_seq = t->chunk_seq++;
    h->user_thread = t->user_set ? t->user_thread : -1;
    h->reserved = 0;
    h->capacity = (uint32_t)(want * hbt_g.unit_slots);
    __atomic_store_n(&h->magic, HBT_CHUNK_MAGIC, __ATOMIC_RELEASE);

    /* Switch chunks in an order that a signal handler interrupting us can
     * live with: it reads slots and next, and scans for a free slot. */
    t->limit = 0;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t->next = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t->slots = c;
    t->chunk_first = index;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t->limit = (uint32_t)(want * hbt_g.unit_slots) - 1;
    return 1;
}

/*
 * At the end of a thread (after its THREAD_END and the monitor's records):
 * give back the whole units its current chunk did not use. The chunk's
 * capacity is lowered first (a reader, or a crash, then sees a smaller
 * chunk followed by zero units), then the units become a free run that
 * another thread's chunk may begin in. The thread forgets the chunk first:
 * a record it still writes (a signal handler, a TLS destructor) takes a new
 * one-unit chunk; a signal handler that interrupts us before that finds
 * limit 0 and does the same, never writing into this chunk.
 */
void hbt_release_chunk(struct hbt_tls *t)
{
    struct hbt_slot *c = t->slots;
    if (!c || hbt_state() != HBT_ON || getpid() != hbt_g.pid)
        return;
    t->limit = 0;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    uint32_t used = t->next;
    uint64_t first = t->chunk_first;
    t->slots = NULL;
    t->next = 0;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    struct hbt_chunk_header *h = (struct hbt_chunk_header *)c;
    uint32_t cap = h->capacity;
    /* step over a record a signal handler stored before limit went to 0 */
    while (used < cap && __atomic_load_n(&c[used].kindflags, __ATOMIC_RELAXED))
        used++;
    uint32_t keep = (used + hbt_g.unit_slots - 1) / hbt_g.unit_slots;
    uint32_t total = cap / hbt_g.unit_slots;
    if (keep >= total)
        return;
    __atomic_store_n(&h->capacity, keep * hbt_g.unit_slots, __ATOMIC_RELEASE);
    hbt_piece_put(first + keep, total - keep);
}

/* ------------------------------------------------------------------ */
/* threads and records                                                 */

void hbt_register_thread(struct hbt_tls *t, uint32_t creator, unsigned mode)
{
    if (t->registered)
        return;
    t->thread_slot = __atomic_fetch_add(&hbt_g.nthreads, 1, __ATOMIC_RELAXED);
    t->registered = 1;
    if (!t->user_set)
        t->beat_thread = (int32_t)t->thread_slot;
    hbt_mon_register(t);   /* its line of the heart table, before any beat */
    hbt_event(HBT_REC_THREAD_START, 0, creator, mode | HBT_M_LOST);
}

/* A tracer thread (monitor, queue monitor, status sampler) gets a
 * thread_slot, and so chunks, without THREAD_START or a heart-table line;
 * it never beats. */
void hbt_register_quiet(struct hbt_tls *t)
{
    if (t->registered)
        return;
    t->thread_slot = __atomic_fetch_add(&hbt_g.nthreads, 1, __ATOMIC_RELAXED);
    t->registered = 1;
    t->beat_thread = -1;
    t->beat = &t->sink;
    t->next_check = UINT64_MAX;
}

/* The rare path of every record: first use of the tracer by this process or
 * thread, or a full chunk. Returns the slot to write or HBT_NO_SLOT. */
uint32_t hbt_refill(struct hbt_tls *t, unsigned mode)
{
    if (hbt_state() != HBT_ON) {
        /* no file (off, or a fork child that has not needed one yet):
         * nothing is lost because nothing is being traced */
        if (!(mode & HBT_M_OPEN) || !hbt_ensure_open())
            return HBT_NO_SLOT;
    }
    if (!t->registered) {
        hbt_register_thread(t, HBT_NO_CREATOR, mode);
        if (t->next < t->limit)
            return t->next;
    }
    if (hbt_new_chunk(t, mode))
        return t->next;
    if (mode & HBT_M_LOST)
        hbt_count_lost();
    return HBT_NO_SLOT;
}

/* One record with every field given, at time `now`, into the calling
 * thread's chunk. */
static void hbt_put(uint16_t kind, uint16_t flags, uint32_t seq, int32_t thread,
                    int32_t loop, int32_t iter, uint32_t aux, uint64_t now,
                    unsigned mode)
{
    struct hbt_tls *t = &hbt_tls;
    uint32_t i = t->next;
    if ((mode & HBT_M_SIGNAL) && t->slots) {
        /* we may have interrupted hbt_store() between its kind store and
         * the update of next: step over a complete record */
        uint32_t cap = ((struct hbt_chunk_header *)t->slots)->capacity;
        while (i < cap && __atomic_load_n(&t->slots[i].kindflags, __ATOMIC_RELAXED))
            i++;
    }
    if (i >= t->limit) {
        uint32_t used = i;
        i = hbt_refill(t, mode & ~HBT_M_LOST);
        if (i == HBT_NO_SLOT) {
            if (hbt_state() != HBT_ON)
                return;
            /* no new chunk: a lifecycle record may take the reserved last
             * slot, which is only free while every slot before it is used */
            struct hbt_slot *s = t->slots;
            uint32_t last = s ? ((struct hbt_chunk_header *)s)->capacity - 1 : 0;
            if ((mode & HBT_M_RESERVE) && s && used >= last &&
                __atomic_load_n(&s[last].kindflags, __ATOMIC_RELAXED) == 0) {
                i = last;
            } else {
                if (mode & HBT_M_LOST)
                    hbt_count_lost();
                return;
            }
        }
    }
    hbt_store(t, i, now ? now : hbt_now_ns(), hbt_kindflags(kind, flags), seq, thread,
              loop, iter, aux);
}

/* Records other than beats: lifecycle, Init, Finished, signals. */
void hbt_event(uint16_t kind, uint16_t flags, uint32_t aux, unsigned mode)
{
    struct hbt_tls *t = &hbt_tls;
    hbt_put(kind, flags, t->seq, t->user_set ? t->user_thread : -1, 0, 0, aux, 0, mode);
}

/* The monitor's records (BEHAVIOR, MONITOR, ADJUST): every field given;
 * now = 0 takes the clock at the store. Never from a signal handler. */
void hbt_emit(uint16_t kind, uint16_t flags, uint32_t seq, int32_t thread, int32_t loop,
              int32_t iter, uint32_t aux, uint64_t now, unsigned mode)
{
    hbt_put(kind, flags, seq, thread, loop, iter, aux, now, mode & ~HBT_M_SIGNAL);
}

/*
 * One record with every field as given (t_ns too: 0 is stored as 0, unlike
 * hbt_emit's) into the calling thread's chunk, through the normal slots
 * only (the reserved last slot is left to THREAD_END and PROCESS_EXIT).
 * 0 when it could not be stored (counted in lost_records if `mode` says
 * so). Never from a signal handler. For the probes' and the status
 * sampler's records.
 */
int hbt_put_plain(uint16_t kind, uint16_t flags, uint32_t seq, int32_t thread, int32_t loop,
                  int32_t iter, uint32_t aux, uint64_t t_ns, unsigned mode)
{
    struct hbt_tls *t = &hbt_tls;
    uint32_t i = hbt_take_slot(t, mode & ~(unsigned)(HBT_M_RESERVE | HBT_M_SIGNAL));
    if (i == HBT_NO_SLOT)
        return 0;
    hbt_store(t, i, t_ns, hbt_kindflags(kind, flags), seq, thread, loop, iter, aux);
    return 1;
}

int hbt_put_name(uint32_t space, uint32_t id, const char *text, size_t max, unsigned mode)
{
    size_t len = hbt_utf8_prefix(text, strlen(text), max);
    uint32_t nfrag = (uint32_t)((len + 23) / 24);
    if (nfrag == 0)
        nfrag = 1;
    for (uint32_t k = 0; k < nfrag; k++) {
        union { char c[24]; struct { uint64_t t; uint32_t seq; int32_t thread, loop, iter; } f; } u;
        memset(&u, 0, sizeof u);
        size_t off = (size_t)k * 24, m = len - off < 24 ? len - off : 24;
        memcpy(u.c, text + off, m);
        uint16_t flags = (uint16_t)(k | (k + 1 == nfrag ? HBT_NAME_LAST : 0));
        if (!hbt_put_plain(HBT_REC_NAME, flags, u.f.seq, u.f.thread, u.f.loop, u.f.iter,
                           (space << 24) | (id & 0xFFFFFFu), u.f.t, mode))
            return 0;
    }
    return 1;
}

/* This thread's registration number, registering it (and opening the file)
 * if needed. 0 when tracing is off. */
int hbt_self_slot(uint32_t *slot)
{
    if (!hbt_ensure_open())
        return 0;
    struct hbt_tls *t = &hbt_tls;
    if (!t->registered)
        hbt_register_thread(t, HBT_NO_CREATOR, HBT_MODE_API);
    *slot = t->thread_slot;
    return 1;
}

/* ------------------------------------------------------------------ */
/* process events                                                      */

/*
 * fork child: drop the parent's mappings (the child must never write into
 * the parent's file), forget its chunks, and let the first record that
 * needs a file open one for the child's pid. Runs in the only thread of the
 * child, which is the forking thread: its TLS is reset here directly.
 * Registered (background.c) after the monitor's handler, which needs the
 * parent's thread count, and before the pre-faulter's.
 */
void hbt_after_fork_child(void)
{
    int st = hbt_state();
    if (st == HBT_ON) {
        uint32_t n = hbt_g.n_extents;
        for (uint32_t k = 0; k < n; k++)
            munmap(hbt_g.ext[k].base, hbt_g.ext[k].count * HBT_UNIT_SIZE);
        if (hbt_g.hdr)
            munmap(hbt_g.hdr, HBT_DATA_OFFSET);
        struct stat sb;
        if (hbt_g.fd >= 0 && fstat(hbt_g.fd, &sb) == 0 &&
            (uint64_t)sb.st_dev == hbt_g.dev && (uint64_t)sb.st_ino == hbt_g.ino)
            close(hbt_g.fd);
        hbt_g.path[0] = '\0';
        st = HBT_LAZY;
    }
    hbt_reset_counters();
    pthread_mutex_init(&hbt_g.lock, NULL);
    __atomic_store_n(&hbt_g.state, st, __ATOMIC_RELEASE);

    struct hbt_tls *t = &hbt_tls;
    t->limit = 0;
    t->next = 0;
    t->slots = NULL;
    t->seq = 0;
    t->auto_seq = 0;
    t->registered = 0;
    t->chunk_seq = 0;   /* chunk_first means nothing while slots is NULL */
    t->end_recorded = 0;
    t->beat = NULL;
    t->monitor = 0;
    hbt_mon_reset_tls(t);
}

static int hbt_kind_is_lifecycle(uint16_t kind, int allow_signal)
{
    return kind == HBT_REC_THREAD_START || kind == HBT_REC_THREAD_END ||
           kind == HBT_REC_PROCESS_EXIT || (allow_signal && kind == HBT_REC_SIGNAL);
}

/* A chunk of a bystander process: unused, or the first thread's, holding
 * nothing but lifecycle records. max_slots bounds a chunk read from disk. */
int hbt_chunk_is_bystander(const struct hbt_slot *chunk, uint32_t max_slots,
                           int allow_signal)
{
    const struct hbt_chunk_header *h = (const struct hbt_chunk_header *)chunk;
    uint32_t magic = __atomic_load_n(&h->magic, __ATOMIC_ACQUIRE);
    if (magic == 0)
        return 1;
    if (magic != HBT_CHUNK_MAGIC || h->thread_slot != 0 || h->capacity > max_slots)
        return 0;
    for (uint32_t i = 1; i < h->capacity; i++) {
        uint16_t kind = hbt_kind_of(__atomic_load_n(&chunk[i].kindflags, __ATOMIC_ACQUIRE));
        if (kind == 0)
            break;
        if (!hbt_kind_is_lifecycle(kind, allow_signal))
            return 0;
    }
    return 1;
}

/* Every chunk among the units handed out is a bystander's. Never past
 * file_units: after the trim at exit the mappings reach beyond the end of
 * the file. Async-signal-safe. */
int hbt_chunks_are_bystander(int allow_signal)
{
    uint64_t n = hbt_units_handed_out();
    for (uint64_t u = 0; u < n;) {
        const struct hbt_slot *c = hbt_unit_addr(u);
        const struct hbt_chunk_header *h = (const struct hbt_chunk_header *)c;
        if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) == 0) {
            u++;
            continue;
        }
        uint32_t cap = __atomic_load_n(&h->capacity, __ATOMIC_ACQUIRE);
        if (!hbt_chunk_is_bystander(c, hbt_g.chunk_units * hbt_g.unit_slots, allow_signal))
            return 0;
        u += cap / hbt_g.unit_slots ? cap / hbt_g.unit_slots : 1;
    }
    return 1;
}

/* The same test on a whole file image of process `pid` (see hbt_take_over). */
int hbt_file_is_bystander(const char *m, uint64_t size, pid_t pid)
{
    const struct hbt_file_header *h = (const struct hbt_file_header *)m;
    if (memcmp(h->magic, HBT_MAGIC, sizeof h->magic) != 0 ||
        h->version != HBT_VERSION || h->endian != HBT_ENDIAN_MARK ||
        h->pid != (uint32_t)pid || h->lost_records != 0 ||
        h->data_offset != HBT_DATA_OFFSET || h->unit_size != HBT_UNIT_SIZE ||
        h->chunk_size != HBT_CHUNK_SIZE || h->data_offset > size)
        return 0;
    uint64_t len = h->data_length;
    if (len > size - h->data_offset)
        len = size - h->data_offset;
    uint32_t unit_slots = HBT_UNIT_SIZE / HBT_SLOT_SIZE;
    for (uint64_t u = 0; u < len / HBT_UNIT_SIZE;) {
        const char *chunk = m + h->data_offset + u * HBT_UNIT_SIZE;
        const struct hbt_chunk_header *ch = (const struct hbt_chunk_header *)chunk;
        if (ch->magic == 0) {
            u++;
            continue;
        }
        uint32_t cap = ch->capacity;
        if (cap == 0 || cap % unit_slots != 0 ||
            u * HBT_UNIT_SIZE + (uint64_t)cap * HBT_SLOT_SIZE > len ||
            !hbt_chunk_is_bystander((const struct hbt_slot *)chunk, cap, 0))
            return 0;
        u += cap / unit_slots;
    }
    return 1;
}

/*
 * At a clean exit: a process that recorded nothing but its own start and
 * exit, with no thread besides the first, is a bystander (a shell child of a
 * traced script); remove its file so that it does not litter the directory.
 * allow_signal: also when it is dying of SIGPIPE, the usual end of the
 * writer of a shell pipeline (yes | head). Async-signal-safe. Returns 1 if
 * the file was removed.
 */
int hbt_unlink_if_empty(int allow_signal)
{
    if (hbt_state() != HBT_ON || !hbt_g.hdr)
        return 0;
    if (__atomic_load_n(&hbt_g.nthreads, __ATOMIC_ACQUIRE) > 1 ||
        __atomic_load_n(&hbt_g.hdr->lost_records, __ATOMIC_RELAXED) != 0)
        return 0;
    if (!hbt_chunks_are_bystander(allow_signal))
        return 0;
    return unlink(hbt_g.path) == 0;
}

/*
 * At a clean process end (exit, return from main, _exit; never in a signal
 * handler): give back the reserved tail of the chunk area, so that a file
 * does not keep up to twice its used size on disk.
 *
 * Other threads run on during exit handlers and may still take chunks; the
 * tail beyond the allocation point is unused by definition, and growth
 * keeps working after the trim. Under g.lock (see hbt_trim_locked):
 * file_units, the reach of the file, is lowered to the units handed out
 * so far (to the end of their page), then next_unit is read again (seq_cst on both sides,
 * see hbt_take_chunk), and the file is cut after max(both reads, the
 * chunks the pre-faulter's write fallback announced in pf.claim; its
 * madvise cannot fault past the end of a file). A chunk number handed out
 * before the lowering is inside what is kept; a later one at or beyond the
 * lowered file_units makes its thread extend the file again (g.lock,
 * posix_fallocate, data_length) before touching it, exactly as growth
 * does. The mappings stay; nothing touches them past the end of the file.
 * Nothing waits for another thread, nothing is dropped.
 */
void hbt_trim_at_exit(void)
{
    if (hbt_state() != HBT_ON || !hbt_g.hdr || getpid() != hbt_g.pid)
        return;
    if (__atomic_exchange_n(&hbt_g.closing, 1, __ATOMIC_ACQ_REL))
        return;   /* once */
    /* the pre-faulter may be growing the file (posix_fallocate); do not
     * hold up the exit for long if the lock is busy */
    if (!hbt_lock_for_ms(200))
        return;
    hbt_trim_locked();
    hbt_unlock();
}
