/*
 * background.c -- what every background thread of the tracer shares: how it
 * is started, how it sleeps, how it knows that it must end because the
 * program has gone, and what happens to it in a fork child.
 *
 * The tracer's threads (hbt-monitor, hbt-queues, hbt-status, hbt-prefault)
 * are made with the real pthread_create, so that they leave no lifecycle
 * record; they inherit a signal mask with every signal blocked, so that no
 * signal meant for the program is ever delivered to them; and they are
 * named "hbt-*" before their body runs, which is how the orphan check
 * below (and ps, top, gdb) tells them from the program's threads.
 *
 * The orphan rule (hbt_orphaned), one for every thread: the process is
 * orphaned when its main thread is gone (the leader's state in
 * /proc/self/stat is Z, X or x: it called pthread_exit, thrd_exit or was
 * cancelled) and every other task in /proc/self/task is either dead (gone,
 * or in state Z, X or x) or a tracer thread (named "hbt-*"), the caller
 * included. Such a process would live on for the tracer's threads alone:
 * each of them returns when it sees this (an exit then writes the final
 * records as usual). A task that cannot be read counts as dead; a thread
 * that is still being started (not named yet) counts as the program's, so
 * the check errs on the side of waiting.
 *
 * The after-fork registry: one pthread_atfork child handler runs every
 * registered handler in the order of registration, in the only thread of
 * the child. The constructor registers those of the monitor, the file and
 * the pre-faulter first (lifecycle.c); the queues, the status sampler and
 * the probes register theirs when they are first used.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
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

#define HBT_BG_STARTS   8u    /* threads being started at the same moment, at most */
#define HBT_FORK_MAX    16u   /* after-fork handlers */
#define HBT_NS_PER_S    1000000000ull

typedef int (*hbt_create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

/* ------------------------------------------------------------------ */
/* starting a thread                                                   */

/* What a thread being started needs, until its first instruction has
 * copied it (the creator does not wait). */
static struct hbt_bg_start {
    int    busy;                 /* atomic */
    void *(*fn)(void *);
    void  *arg;
    char   name[16];             /* the kernel keeps 15 bytes */
} hbt_starts[HBT_BG_STARTS];

static void *hbt_bg_trampoline(void *p)
{
    struct hbt_bg_start *s = p;
    void *(*fn)(void *) = s->fn;
    void *arg = s->arg;
    char name[sizeof s->name];
    memcpy(name, s->name, sizeof name);
    __atomic_store_n(&s->busy, 0, __ATOMIC_RELEASE);
    (void)prctl(PR_SET_NAME, name, 0, 0, 0);   /* before any of its work */
    return fn(arg);
}

#define HBT_BG_STACK_MAX (1024u * 1024u * 1024u)

int hbt_bg_start(pthread_t *thread, const char *name, size_t stack, int joinable,
                 void *(*fn)(void *), void *arg)
{
    hbt_create_fn create = (hbt_create_fn)hbt_real_pthread_create();
    if (!create)
        return EAGAIN;
    struct hbt_bg_start *s = NULL;
    for (unsigned k = 0; k < HBT_BG_STARTS && !s; k++)
        if (!__atomic_exchange_n(&hbt_starts[k].busy, 1, __ATOMIC_ACQ_REL))
            s = &hbt_starts[k];
    if (!s)
        return EAGAIN;
    s->fn = fn;
    s->arg = arg;
    snprintf(s->name, sizeof s->name, "%s", name);

    int rc = EAGAIN;
    long min = sysconf(_SC_THREAD_STACK_MIN);
    if (min > 0 && (size_t)min > stack)
        stack = (size_t)min;
    /* glibc carves every thread's static TLS -- the program's and its
     * libraries' __thread and `omp threadprivate` variables -- out of its
     * stack, and refuses (EINVAL) a stack that cannot hold it: NPB EP's
     * threadprivate array is 1 MiB, and none of the tracer's threads started
     * in it. Twice the stack until it fits (address space only: pages are
     * used as touched), up to HBT_BG_STACK_MAX. */
    for (; rc != 0 && stack <= HBT_BG_STACK_MAX; stack *= 2) {
        pthread_attr_t attr;
        if (pthread_attr_init(&attr) != 0)
            break;
        (void)pthread_attr_setstacksize(&attr, stack);
        if (!joinable)
            (void)pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        /* the thread inherits a mask with every signal blocked */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        pthread_t th;
        rc = create(thread ? thread : &th, &attr, hbt_bg_trampoline, s);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        pthread_attr_destroy(&attr);
        if (rc != EINVAL)
            break;
    }
    if (rc != 0)
        __atomic_store_n(&s->busy, 0, __ATOMIC_RELEASE);
    return rc;
}

/* Ask to wake on time: 1 us of timer slack, and a short scheduler slice
 * (Linux 6.12+, EEVDF), so that a thread that runs for microseconds at a
 * time gets a CPU soon after it wakes even when the program keeps every
 * CPU busy. Older kernels ignore the slice. */
void hbt_bg_wake_on_time(void)
{
    (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
#ifdef SYS_sched_setattr
    struct {
        uint32_t size, policy;
        uint64_t flags;
        int32_t  nice;
        uint32_t priority;
        uint64_t runtime, deadline, period;
    } attr;
    memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;   /* SCHED_ATTR_SIZE_VER0 */
    attr.policy = SCHED_OTHER;
    attr.nice = getpriority(PRIO_PROCESS, 0);
    attr.runtime = 100000;     /* 100 us */
    (void)syscall(SYS_sched_setattr, 0, &attr, 0);
#endif
}

/* ------------------------------------------------------------------ */
/* sleeping                                                            */

int hbt_sleep_until(uint64_t when, uint32_t *word, uint32_t val)
{
    struct timespec ts = { .tv_sec = (time_t)(when / HBT_NS_PER_S),
                           .tv_nsec = (long)(when % HBT_NS_PER_S) };
    if (word) {
        /* FUTEX_WAIT_BITSET: an absolute CLOCK_MONOTONIC deadline */
        long rc = syscall(SYS_futex, word, FUTEX_WAIT_BITSET_PRIVATE, val, &ts, NULL,
                          FUTEX_BITSET_MATCH_ANY);
        if (rc == 0)
            return 0;
        if (errno == ETIMEDOUT)
            return 1;
        if (errno != ENOSYS)
            return 0;   /* the word changed, or a signal */
    }
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
    return 1;
}

void hbt_futex_wake(uint32_t *word, int n)
{
    int saved = errno;
    (void)syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
    errno = saved;   /* never disturb the program's errno */
}

/* ------------------------------------------------------------------ */
/* the orphan check                                                    */

/* The eight first fields of /proc/stat's "cpu " line (user nice system idle
 * iowait irq softirq steal, in clock ticks) from `text`: 1, or 0 when it has
 * fewer (kernels before 2.6.11) or is no such line. */
int hbt_proc_stat_cpu(const char *text, uint64_t f[8])
{
    if (strncmp(text, "cpu ", 4) != 0)
        return 0;
    const char *q = text + 4;
    for (int k = 0; k < 8; k++) {
        char *end;
        f[k] = strtoull(q, &end, 10);
        if (end == q)
            return 0;
        q = end;
    }
    return 1;
}

ssize_t hbt_read_small(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, size - 1);
    int err = errno;
    close(fd);
    if (n < 0) {
        errno = err;
        return -1;
    }
    buf[n] = '\0';
    return n;
}

static int hbt_state_dead(char st)
{
    return st == 'Z' || st == 'X' || st == 'x';
}

/* State letter of a /proc stat file and, if name, the task's name; 0 when
 * it cannot be read (the task is gone). */
static char hbt_stat_state(const char *path, char *name, size_t size)
{
    char buf[512];
    if (hbt_read_small(path, buf, sizeof buf) <= 0)
        return 0;
    const char *open_paren = strchr(buf, '(');
    const char *close_paren = strrchr(buf, ')');   /* the name may contain ')' */
    if (!open_paren || !close_paren || close_paren < open_paren || close_paren[1] != ' ')
        return 0;
    if (name) {
        size_t n = (size_t)(close_paren - open_paren - 1);
        if (n >= size)
            n = size - 1;
        memcpy(name, open_paren + 1, n);
        name[n] = '\0';
    }
    return close_paren[2];
}

int hbt_main_thread_gone(void)
{
    return hbt_state_dead(hbt_stat_state("/proc/self/stat", NULL, 0));
}

struct hbt_dirent64 {
    uint64_t       d_ino;
    int64_t        d_off;
    unsigned short d_reclen;
    unsigned char  d_type;
    char           d_name[];
};

int hbt_orphaned(void)
{
    if (!hbt_main_thread_gone())
        return 0;
    int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    long self = syscall(SYS_gettid), leader = getpid();
    char dents[2048];
    int alive = 0;
    while (!alive) {   /* getdents64: no malloc, unlike opendir */
        long n = syscall(SYS_getdents64, fd, dents, sizeof dents);
        if (n <= 0)
            break;
        for (long off = 0; off < n && !alive;) {
            struct hbt_dirent64 *d = (struct hbt_dirent64 *)(void *)(dents + off);
            off += d->d_reclen;
            long tid = strtol(d->d_name, NULL, 10);
            if (tid <= 0 || tid == self || tid == leader)
                continue;
            char path[64], name[32];
            snprintf(path, sizeof path, "/proc/self/task/%ld/stat", tid);
            char st = hbt_stat_state(path, name, sizeof name);
            if (st && !hbt_state_dead(st) && strncmp(name, "hbt-", 4) != 0)
                alive = 1;
        }
    }
    close(fd);
    return !alive;
}

/* ------------------------------------------------------------------ */
/* the after-fork registry                                             */

static void (*hbt_fork_fns[HBT_FORK_MAX])(void);
static int hbt_fork_installed;   /* atomic */

static void hbt_fork_child_run(void)
{
    /* threads being started in the parent were not copied */
    for (unsigned k = 0; k < HBT_BG_STARTS; k++)
        __atomic_store_n(&hbt_starts[k].busy, 0, __ATOMIC_RELAXED);
    for (unsigned k = 0; k < HBT_FORK_MAX; k++) {
        void (*fn)(void) = __atomic_load_n(&hbt_fork_fns[k], __ATOMIC_ACQUIRE);
        if (!fn)
            break;
        fn();
    }
}

void hbt_fork_child_add(void (*fn)(void))
{
    for (unsigned k = 0; k < HBT_FORK_MAX; k++) {
        void (*cur)(void) = __atomic_load_n(&hbt_fork_fns[k], __ATOMIC_ACQUIRE);
        if (cur == fn)
            return;   /* once */
        if (!cur) {
            void (*none)(void) = NULL;
            if (__atomic_compare_exchange_n(&hbt_fork_fns[k], &none, fn, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE))
                break;
            if (none == fn)
                return;   /* another thread added it meanwhile */
        }
    }
    if (!__atomic_exchange_n(&hbt_fork_installed, 1, __ATOMIC_ACQ_REL))
        pthread_atfork(NULL, NULL, hbt_fork_child_run);
}
