/*
 * core.c -- thread registration, the records written outside the hot path,
 * and the process events (fork, exit) that concern them; the chunks they go
 * into are handed out by chunks.c.
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
 *
 * The file is also held open from the first trace file on (hbt_report_hold,
 * at a high descriptor number like the trace file's, O_CLOEXEC): a process
 * that has no descriptor left when it must report -- a child forked after
 * the program took every one its RLIMIT_NOFILE allows -- reports through the
 * held one, inherited across fork. The program may have closed it and
 * reused the number: it is used only while it is still the same file.
 */
static int hbt_report_fd = -1;
static uint64_t hbt_report_dev, hbt_report_ino;

static int hbt_report_open(void)
{
    const char *path = hbt_getenv(HBT_ENV_HBTRACE_REPORT);
    if (!path || !*path)
        return -1;
    return open(path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
}

void hbt_report_hold(void)
{
    if (hbt_report_fd >= 0)
        return;
    int fd = hbt_report_open();
    struct stat st;
    if (fd < 0)
        return;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return;
    }
    hbt_report_dev = (uint64_t)st.st_dev;
    hbt_report_ino = (uint64_t)st.st_ino;
    hbt_report_fd = hbt_move_fd_high(fd);
}

void hbt_report_line(const char *what, const char *where, int err)
{
    int fd = hbt_report_open();
    struct stat st;
    int held = 0;
    if (fd < 0) {
        /* no descriptor to open it with (EMFILE): the held one, if still ours */
        if (hbt_report_fd < 0 || fstat(hbt_report_fd, &st) != 0 ||
            (uint64_t)st.st_dev != hbt_report_dev || (uint64_t)st.st_ino != hbt_report_ino)
            return;
        fd = hbt_report_fd;
        held = 1;
    } else if (fstat(fd, &st) != 0) {
        close(fd);
        return;
    }
    char line[512];
    int n = snprintf(line, sizeof line, "%s\t%d\t%d\t%s\n", what, (int)getpid(), err,
                     where ? where : "");
    if (S_ISREG(st.st_mode) && n > 0 && (size_t)n < sizeof line) {
        ssize_t w = write(fd, line, (size_t)n);
        (void)w;
    }
    if (!held)
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
    t->unit = NULL;
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
    t->unit = NULL;
    t->monitor = 0;
    t->mem_recorded = 0;   /* the child's memory records start with its own */
    t->mem_at_ns = 0;
    hbt_memory_fork_child();
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
 * chunks the pre-faulter announced in pf.claim, which it is about to
 * write to). A chunk number handed out
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
