/*
 * monitor_still.c -- is a late thread that runs making any progress of its own?
 *
 * A thread that spins on a flag in the program's own code (NPB LU's pipeline:
 * `while (flag[i-1] == 0) { #pragma omp flush }`; with gcc no call the tracer
 * sees) runs a loop of three instructions whose registers never change: the
 * load, the compare, the fence. Work changes them at every step (induction
 * variables, accumulators, addresses), and so does a thread that burns CPU
 * time on anything else. While a thread is late and runs, the monitor takes
 * samples of its user-mode registers every HBT_STILL_PERIOD_NS of its CPU
 * time (a software task-clock event of perf_event_open with
 * PERF_SAMPLE_REGS_USER: no hardware counter, no signal to the program,
 * allowed for a process's own threads at perf_event_paranoid 2, the Debian
 * default); a thread whose samples since it fell silent are all the same is
 * *still*: it waits for memory another thread writes. (The kernel takes the
 * sample on the thread's own CPU, a few microseconds each; off while the
 * thread beats.)
 *
 * Where the kernel refuses (perf_event_paranoid 3, a seccomp filter, an
 * architecture without these registers), nothing is known to be still and the
 * monitor judges as it did before; the trace's metadata says which
 * (`monitor_still`).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__aarch64__)
#include <asm/perf_regs.h>
#endif

#include "monitor.h"

#define HBT_STILL_MAX       64u              /* threads followed at once, at most */
#define HBT_STILL_PAGES     2u               /* the ring: 1 header page, 1 data page (~24 samples) */
#define HBT_STILL_REC_MAX   512u             /* the longest sample record read */
#define HBT_STILL_STATES    4u               /* register states of one spin loop, at most */

/* One followed thread: its event and what its samples said. Only the checker
 * that holds the thread's view lock touches its entry. */
struct hbt_still {
    int      fd;          /* -1: none */
    int      tid;         /* the thread it was opened for */
    dev_t    dev;         /* the event's file, to tell it from a file of the program's that */
    ino_t    ino;         /* took its number after the program closed it */
    void    *map;
    int      on;          /* enabled (the thread is late) */
    uint32_t run_n;       /* samples in the current run of equal ones */
    uint32_t n;           /* samples since it was enabled */
    uint32_t k;           /* distinct register states in the current run */
    int      rec;         /* ... and they came again, twice at least */
    uint64_t moved_t;     /* the latest read that found a spin of it ended (a still run
                             followed by a sample out of it), ns */
    uint64_t hash[HBT_STILL_STATES]; /* ... each hashed, the program counter aside */
    uint64_t ip_lo, ip_hi;/* the program counters of the current run */
    uint64_t wait_t;      /* a teammate's reading of it while it waits in the runtime: when, */
    uint64_t wait_cpu;    /* ... its CPU time then, */
    int      wait_queued; /* ... and whether it hardly ran since the reading before */
};

static struct hbt_still hbt_still_tab[HBT_HEARTS];
static uint32_t hbt_still_open;   /* atomic: events open */
static int hbt_still_state;       /* atomic: 0 not tried, 1 works, -errno refused */
static int hbt_still_ready;       /* atomic: the monitor thread opened the kept event */
static uint64_t hbt_still_mask;   /* registers sampled */
static int hbt_still_ip = -1;     /* the program counter's index among them */

/* A loop that spins on memory takes a few instructions (load the flag's
 * address, load the flag, compare, branch, maybe a fence): its samples land
 * on any of them, and its temporaries differ from one to the next (omp_flag_
 * pipeline with gcc: %rax holds the address, then the value). So a run of
 * samples is still when their program counters lie within
 * HBT_STILL_LOOP_BYTES, they take at most HBT_STILL_STATES register states,
 * and those states came again, twice at least: a loop that goes round and
 * round without a change of its own. Work changes some register at every
 * step (an index, a sum, an address), so its states do not recur. */
#define HBT_STILL_LOOP_BYTES 64u

/* The registers a sample takes: the program counter, the stack pointer and
 * the general-purpose ones (not the flags: a compare leaves them as they
 * were, and the segment registers never change). */
static uint64_t hbt_still_regs(void)
{
#if defined(__x86_64__)
    hbt_still_ip = PERF_REG_X86_IP;
    static const int r[] = {PERF_REG_X86_AX, PERF_REG_X86_BX, PERF_REG_X86_CX, PERF_REG_X86_DX,
                            PERF_REG_X86_SI, PERF_REG_X86_DI, PERF_REG_X86_BP, PERF_REG_X86_SP,
                            PERF_REG_X86_IP, PERF_REG_X86_R8, PERF_REG_X86_R9, PERF_REG_X86_R10,
                            PERF_REG_X86_R11, PERF_REG_X86_R12, PERF_REG_X86_R13, PERF_REG_X86_R14,
                            PERF_REG_X86_R15};
    uint64_t m = 0;
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++)
        m |= 1ull << r[i];
    hbt_still_ip = __builtin_popcountll(m & ((1ull << PERF_REG_X86_IP) - 1));
    return m;
#elif defined(__aarch64__)
    hbt_still_ip = PERF_REG_ARM64_PC;
    return (1ull << PERF_REG_ARM64_MAX) - 1;   /* x0-x30, sp, pc */
#else
    return 0;
#endif
}

/* "on" when the kernel lets the monitor sample its threads' registers, else
 * why not (for the trace's metadata); NULL before the first try. */
const char *hbt_still_how(void)
{
    int s = __atomic_load_n(&hbt_still_state, __ATOMIC_RELAXED);
    static char why[96];
    if (!s)
        return NULL;
    if (s > 0)
        return "perf task-clock samples of user registers";
    snprintf(why, sizeof why, "off: perf_event_open: %s", strerror(-s));
    return why;
}

/* Is e's descriptor still its event? A program may close every descriptor
 * it did not open (a daemon does) and open a file that gets the number: that
 * file is never touched. */
static int hbt_still_ours(const struct hbt_still *e)
{
    struct stat st;
    int saved = errno, ok = e->fd >= 0 && fstat(e->fd, &st) == 0 && st.st_dev == e->dev && st.st_ino == e->ino;
    errno = saved;
    return ok;
}

static void hbt_still_close(struct hbt_still *e)
{
    __atomic_store_n(&e->on, 0, __ATOMIC_RELAXED);
    if (e->map)
        munmap(e->map, (size_t)HBT_STILL_PAGES * (size_t)sysconf(_SC_PAGESIZE));
    if (e->fd >= 0) {
        if (hbt_still_ours(e)) {
            int saved = errno;
            close(e->fd);
            errno = saved;
        }
        __atomic_sub_fetch(&hbt_still_open, 1u, __ATOMIC_RELAXED);
    }
    e->map = NULL;
    e->fd = -1;
    e->tid = 0;
    __atomic_store_n(&e->wait_t, 0u, __ATOMIC_RELAXED);
    __atomic_store_n(&e->moved_t, 0u, __ATOMIC_RELAXED);
    __atomic_store_n(&e->n, 0u, __ATOMIC_RELAXED);
    __atomic_store_n(&e->run_n, 0u, __ATOMIC_RELAXED);
    __atomic_store_n(&e->rec, 0, __ATOMIC_RELAXED);
}

static int hbt_still_openfor(struct hbt_still *e, int tid)
{
    int st = __atomic_load_n(&hbt_still_state, __ATOMIC_RELAXED);
    if (st < 0 || (!hbt_still_mask && !(hbt_still_mask = hbt_still_regs()))) {
        if (!st)
            __atomic_store_n(&hbt_still_state, -EOPNOTSUPP, __ATOMIC_RELAXED);
        return 0;
    }
    if (__atomic_add_fetch(&hbt_still_open, 1u, __ATOMIC_RELAXED) > HBT_STILL_MAX) {
        __atomic_sub_fetch(&hbt_still_open, 1u, __ATOMIC_RELAXED);
        return 0;
    }
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_TASK_CLOCK;
    a.sample_period = HBT_STILL_PERIOD_NS;
    a.sample_type = PERF_SAMPLE_REGS_USER;
    a.sample_regs_user = hbt_still_mask;
    a.disabled = 1;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    int saved = errno;
    int fd = (int)syscall(SYS_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        errno = saved;
        __atomic_sub_fetch(&hbt_still_open, 1u, __ATOMIC_RELAXED);
        if (err != ESRCH && err != EMFILE && err != ENFILE && err != ENOMEM)
            __atomic_store_n(&hbt_still_state, -err, __ATOMIC_RELAXED);   /* refused for good */
        return 0;
    }
    void *m = mmap(NULL, (size_t)HBT_STILL_PAGES * (size_t)sysconf(_SC_PAGESIZE), PROT_READ | PROT_WRITE,
                   MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        close(fd);
        errno = saved;
        __atomic_sub_fetch(&hbt_still_open, 1u, __ATOMIC_RELAXED);
        return 0;
    }
    struct stat fs;
    if (fstat(fd, &fs) != 0) {
        munmap(m, (size_t)HBT_STILL_PAGES * (size_t)sysconf(_SC_PAGESIZE));
        close(fd);
        errno = saved;
        __atomic_sub_fetch(&hbt_still_open, 1u, __ATOMIC_RELAXED);
        return 0;
    }
    errno = saved;
    __atomic_store_n(&hbt_still_state, 1, __ATOMIC_RELAXED);
    e->dev = fs.st_dev;
    e->ino = fs.st_ino;
    e->fd = fd;
    e->tid = tid;
    e->map = m;
    e->on = 0;
    return 1;
}

/* The central monitor thread, at its start: whether the kernel lets this
 * process sample its threads' registers -- an event on the calling thread,
 * opened disabled and kept for the process's life. The first event on the
 * machine makes the kernel turn on its scheduler hooks, 10-15 ms for the
 * thread that opens it (benchmarks/perf_event_cost.c: 15-20 ms, then 3-15 us), and turns them
 * off a while after the last one closes: kept open, every later one is
 * cheap. Only then does a late look open events (ring mode, whose checkers
 * are the program's own threads, never does). */
static struct hbt_still hbt_still_kept = {.fd = -1};

static void *hbt_still_opener(void *monitor_tid)
{
    if (hbt_still_openfor(&hbt_still_kept, (int)(intptr_t)monitor_tid)) {
        __atomic_store_n(&hbt_still_ready, 1, __ATOMIC_RELEASE);
        hbt_meta_append_once("monitor_still", hbt_still_how());
    } else {
        const char *how = hbt_still_how();
        hbt_meta_append_once("monitor_still", how ? how : "off: too many events");
    }
    return NULL;
}

/* (the kept event is opened by a thread of its own, which ends then: the
 * monitor looks meanwhile -- 15 ms of a monitor that did not look cost a
 * thread of jacobi_omp the CPU time of its first beats, and a spin early in
 * its run went unreported) */
void hbt_still_start(void)
{
    if (__atomic_load_n(&hbt_still_state, __ATOMIC_RELAXED) || hbt_still_kept.map)
        return;
    if (hbt_bg_start(NULL, "hbt-still", 64u * 1024u, 0, hbt_still_opener,
                     (void *)(intptr_t)syscall(SYS_gettid)) != 0)
        hbt_meta_append_once("monitor_still", "off: no thread to open the events");
}

/* Read the samples the kernel wrote since the last read into e's run. */
static void hbt_still_drain(struct hbt_still *e, int keep)
{
    struct perf_event_mmap_page *pg = e->map;
    uint64_t head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
    uint64_t tail = pg->data_tail;
    uint64_t off = pg->data_offset, size = pg->data_size;
    if (!size || off < sizeof *pg || head < tail || head - tail > size) {
        /* not what this kernel documents: read nothing more from it */
        __atomic_store_n(&pg->data_tail, head, __ATOMIC_RELEASE);
        return;
    }
    const unsigned char *data = (const unsigned char *)e->map + off;
    unsigned nregs = (unsigned)__builtin_popcountll(hbt_still_mask);
    unsigned char rec[HBT_STILL_REC_MAX];
    int moved = 0;
    while (keep && head - tail >= sizeof(struct perf_event_header)) {
        struct perf_event_header h;
        for (size_t i = 0; i < sizeof h; i++)
            ((unsigned char *)&h)[i] = data[(tail + i) % size];
        if (h.size < sizeof h || h.size > head - tail)
            break;
#ifdef HBT_MON_DEBUG
        if (h.type != PERF_RECORD_SAMPLE)
            fprintf(stderr, "hbtstill tid=%d record type %u size %u\n", e->tid, h.type, h.size);
#endif
        if (h.type == PERF_RECORD_SAMPLE && h.size <= sizeof rec) {
            for (size_t i = 0; i < h.size; i++)
                rec[i] = data[(tail + i) % size];
            uint64_t abi, *p = (uint64_t *)(void *)(rec + sizeof h);
            size_t have = (h.size - sizeof h) / sizeof(uint64_t);
            memcpy(&abi, p, sizeof abi);
            if (have >= 1 + nregs && abi != PERF_SAMPLE_REGS_ABI_NONE) {
                uint64_t x = 1469598103934665603ull, ip = 0;   /* FNV-1a over the registers */
                for (unsigned k = 0; k < nregs; k++) {
                    uint64_t r;
                    memcpy(&r, p + 1 + k, sizeof r);
                    if ((int)k == hbt_still_ip) {
                        ip = r;
                        continue;
                    }
                    for (int b = 0; b < 64; b += 8)
                        x = (x ^ ((r >> b) & 0xffu)) * 1099511628211ull;
                }
                uint64_t lo = ip < e->ip_lo ? ip : e->ip_lo, hi = ip > e->ip_hi ? ip : e->ip_hi;
                int same = e->n && hi - lo <= HBT_STILL_LOOP_BYTES;
                uint32_t q = 0;
                while (same && q < e->k && e->hash[q] != x)
                    q++;
                if (same && q == e->k) {
                    /* a state not seen yet: of the loop, or -- once its states came
                     * again -- a spin on another flag, or at another step (NPB LU's
                     * spin on its neighbour's flag before each plane, the same
                     * instructions each time: it went on) */
                    moved |= e->rec;
                    if (e->k < HBT_STILL_STATES)
                        e->hash[e->k++] = x;
                    else
                        same = 0;
                }
                if (!same) {
                    moved |= e->rec;   /* a spin ended: what it waited for came */
                    lo = hi = ip;
                    e->k = 1;
                    e->hash[0] = x;
                }
#ifdef HBT_MON_DEBUG
                fprintf(stderr, "hbtstill tid=%d ip=%llx hash=%llx same=%d k=%u n=%u\n", e->tid, (unsigned long long)ip,
                        (unsigned long long)x, same, e->k, e->n);
#endif
                e->ip_lo = lo;
                e->ip_hi = hi;
                __atomic_store_n(&e->run_n, same ? e->run_n + 1 : 1u, __ATOMIC_RELAXED);
                __atomic_store_n(&e->rec, e->run_n >= e->k + 2, __ATOMIC_RELAXED);
                __atomic_store_n(&e->n, e->n + 1, __ATOMIC_RELAXED);
            }
        }
        tail += h.size;
    }
#ifdef HBT_MON_DEBUG
    if (keep)
        fprintf(stderr, "hbtstill drain tid=%d head=%llu tail0=%llu n=%u\n", e->tid, (unsigned long long)head,
                (unsigned long long)pg->data_tail, e->n);
#endif
    __atomic_store_n(&pg->data_tail, head, __ATOMIC_RELEASE);
    if (moved)
        __atomic_store_n(&e->moved_t, hbt_now_ns(), __ATOMIC_RELAXED);
}

/* Thread j (os tid `tid`) is late and runs: sample it from now on (if not
 * already) and say whether it is still -- 1: its latest samples are one run
 * of a spin loop (above: it may have worked before it began to spin); 0:
 * they are not (it works);
 * HBT_STILL_UNKNOWN: too few samples yet; HBT_STILL_NO: it is not sampled
 * (no sampling here, too many threads followed). Its checker holds its view
 * lock. */
int hbt_still_follow(uint32_t j, int tid)
{
    if (j >= HBT_HEARTS || tid <= 0)
        return HBT_STILL_NO;
    if (!__atomic_load_n(&hbt_still_ready, __ATOMIC_ACQUIRE))
        return HBT_STILL_NO;
    struct hbt_still *e = &hbt_still_tab[j];
    if (e->map && e->tid != tid)
        hbt_still_close(e);   /* the heart holds another thread now */
    if (!e->map) {
        e->fd = -1;
        if (!hbt_still_openfor(e, tid))
            return HBT_STILL_NO;
    }
    if (!e->on) {
        hbt_still_drain(e, 0);   /* samples of an earlier silence */
        __atomic_store_n(&e->n, 0u, __ATOMIC_RELAXED);
        __atomic_store_n(&e->run_n, 0u, __ATOMIC_RELAXED);
        __atomic_store_n(&e->rec, 0, __ATOMIC_RELAXED);
        if (!hbt_still_ours(e)) {
            hbt_still_close(e);   /* the program closed it: opened again next time */
            return HBT_STILL_NO;
        }
        int saved = errno, ok = ioctl(e->fd, PERF_EVENT_IOC_ENABLE, 0) == 0;
        errno = saved;
        if (!ok)
            return HBT_STILL_NO;
        __atomic_store_n(&e->on, 1, __ATOMIC_RELAXED);
        return HBT_STILL_UNKNOWN;
    }
    hbt_still_drain(e, 1);
    if (e->n < 2)
        return HBT_STILL_UNKNOWN;
    return e->rec;
}

/* What thread j's samples say, without taking any (read by a teammate's
 * checker, as a hint): as hbt_still_follow. */
int hbt_still_known(uint32_t j)
{
    if (j >= HBT_HEARTS)
        return HBT_STILL_NO;
    struct hbt_still *e = &hbt_still_tab[j];
    uint32_t n = __atomic_load_n(&e->n, __ATOMIC_RELAXED);
    if (!__atomic_load_n(&e->on, __ATOMIC_RELAXED))
        return HBT_STILL_NO;
    if (n < 2)
        return HBT_STILL_UNKNOWN;
    return __atomic_load_n(&e->rec, __ATOMIC_RELAXED);
}

/* When thread j's samples last showed a spin of it end (0: never): it goes
 * on, what it waited for came. (A thread that never spins never moves on by
 * this measure: its work, or a spin that changes its registers, is judged by
 * its CPU time as before.) */
uint64_t hbt_still_moved(uint32_t j)
{
    return j < HBT_HEARTS ? __atomic_load_n(&hbt_still_tab[j].moved_t, __ATOMIC_RELAXED) : 0;
}

/* Thread j beats again (or waits in the runtime): no samples until it is late
 * again. */
void hbt_still_pause(uint32_t j)
{
    if (j >= HBT_HEARTS)
        return;
    struct hbt_still *e = &hbt_still_tab[j];
    if (e->map && e->on) {
        int saved = errno;
        if (hbt_still_ours(e))
            (void)ioctl(e->fd, PERF_EVENT_IOC_DISABLE, 0);
        errno = saved;
        __atomic_store_n(&e->on, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&e->n, 0u, __ATOMIC_RELAXED);
        __atomic_store_n(&e->run_n, 0u, __ATOMIC_RELAXED);
        __atomic_store_n(&e->rec, 0, __ATOMIC_RELAXED);
    }
}

/* Thread j waits in the OpenMP runtime and is runnable (state R): has it
 * hardly run lately (under a quarter of a CPU since the reading before, 0.3
 * ms at least)? Then it waits for a CPU, and may have been let out of its
 * wait meanwhile: its mark says "waiting" until it runs again (NPB LU with
 * source beats beside CPU hogs: thread 0 released from the barrier between
 * LU's two sweeps and queued behind a hog, its teammate spinning on its flag
 * at once). The first reading, and one 20 ms old, says so too. Read by any
 * checker: a hint. */
int hbt_still_waiter_queued(uint32_t j, int tid, uint64_t now, uint64_t cpu)
{
    if (j >= HBT_HEARTS || tid <= 0)
        return 0;
    struct hbt_still *e = &hbt_still_tab[j];
    uint64_t t = __atomic_load_n(&e->wait_t, __ATOMIC_RELAXED);
    if (t && now >= t && now - t < 300 * HBT_US)
        return __atomic_load_n(&e->wait_queued, __ATOMIC_RELAXED);
    uint64_t c = __atomic_load_n(&e->wait_cpu, __ATOMIC_RELAXED);
    int q = !t || now < t || now - t > 20 * HBT_MS || 4 * (cpu > c ? cpu - c : 0) < now - t;
    __atomic_store_n(&e->wait_cpu, cpu, __ATOMIC_RELAXED);
    __atomic_store_n(&e->wait_queued, q, __ATOMIC_RELAXED);
    __atomic_store_n(&e->wait_t, now, __ATOMIC_RELAXED);
    return q;
}

/* Thread j ended: its event goes. */
void hbt_still_end(uint32_t j)
{
    if (j < HBT_HEARTS && hbt_still_tab[j].map)
        hbt_still_close(&hbt_still_tab[j]);
}

/* A fork child: the events are the parent's threads'. */
void hbt_still_after_fork_child(void)
{
    if (hbt_still_kept.map)
        hbt_still_close(&hbt_still_kept);   /* the parent's monitor thread's: the child's opens its own */
    __atomic_store_n(&hbt_still_ready, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&hbt_still_state, 0, __ATOMIC_RELAXED);
    for (uint32_t j = 0; j < HBT_HEARTS; j++)
        if (hbt_still_tab[j].map)
            hbt_still_close(&hbt_still_tab[j]);
    __atomic_store_n(&hbt_still_open, 0u, __ATOMIC_RELAXED);
}
