/*
 * lifecycle.c -- the records that tell an exited thread from a failed one:
 * thread start and end (pthread_create/pthread_exit interposition), process
 * exit (on_exit, _exit/_Exit interposition), and fork.
 *
 * The wrappers are exported under the libc names. With LD_PRELOAD they come
 * first in the global scope; a program linked with -lhbtrace finds them
 * before libc as well, and so does libgomp, which calls pthread_create
 * through its PLT. The real functions come from dlsym(RTLD_NEXT).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

typedef int  (*hbt_create_fn)(pthread_t *, const pthread_attr_t *,
                              void *(*)(void *), void *);
typedef void (*hbt_exit_fn)(int) __attribute__((noreturn));
typedef void (*hbt_pexit_fn)(void *) __attribute__((noreturn));

static void *hbt_real_create, *hbt_real_pexit, *hbt_real_exit, *hbt_real_libc_exit;

/*
 * Resolve a libc function once. dlsym may allocate, and an allocator that
 * is itself interposed could call back into us: the per-thread flag makes
 * such a nested call fail instead of recursing.
 */
HBT_NO_TSAN void *hbt_real(void **cache, const char *name)
{
    void *f = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
    if (f)
        return f;
    struct hbt_tls *t = &hbt_tls;
    if (t->resolving)
        return NULL;
    t->resolving = 1;
    f = dlsym(RTLD_NEXT, name);
    t->resolving = 0;
    __atomic_store_n(cache, f, __ATOMIC_RELEASE);
    return f;
}

/* The real pthread_create, for the tracer's own threads (background.c). */
void *hbt_real_pthread_create(void)
{
    return hbt_real(&hbt_real_create, "pthread_create");
}

/* ------------------------------------------------------------------ */
/* threads                                                             */

struct hbt_start {
    void *(*fn)(void *);
    void *arg;
    uint32_t creator;
};

/* Start records go from the creating thread to the new one through a static
 * pool, so that the new thread frees nothing: free() in a thread that never
 * allocated gives it a malloc arena of its own, 64 MiB of address space,
 * which under an address-space limit (RLIMIT_AS) the trace's own mappings
 * then lacked. malloc only when every record of the pool is in flight. */
#define HBT_START_POOL 256
static struct hbt_start hbt_start_pool[HBT_START_POOL];
static uint32_t hbt_start_busy[HBT_START_POOL];
static uint32_t hbt_start_next;

static struct hbt_start *hbt_start_take(void)
{
    uint32_t first = __atomic_fetch_add(&hbt_start_next, 1, __ATOMIC_RELAXED);
    for (uint32_t k = 0; k < HBT_START_POOL; k++) {
        uint32_t i = (first + k) % HBT_START_POOL, idle = 0;
        if (__atomic_compare_exchange_n(&hbt_start_busy[i], &idle, 1, 0, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED))
            return &hbt_start_pool[i];
    }
    return malloc(sizeof(struct hbt_start));
}

static void hbt_start_give(struct hbt_start *s)
{
    if (s >= hbt_start_pool && s < hbt_start_pool + HBT_START_POOL)
        __atomic_store_n(&hbt_start_busy[s - hbt_start_pool], 0, __ATOMIC_RELEASE);
    else
        free(s);
}

static void hbt_thread_end(uint32_t how)
{
    struct hbt_tls *t = &hbt_tls;
    if (t->end_recorded)
        return;
    t->end_recorded = 1;
    HBT_HOOK(hbt_probe_thread_end, t);   /* its probe statistics, merged */
    hbt_memory_track(t, hbt_now_ns(), t->mem_thread, 0, 1);   /* its last counts */
    hbt_event(HBT_REC_THREAD_END, 0, how, HBT_MODE_END);
    hbt_mon_thread_end(t, how);   /* the monitor reports it exited or failed */
    hbt_release_chunk(t);         /* its unused units, for the threads to come */
}

static void hbt_cancelled(void *unused)
{
    (void)unused;
    /* also runs when pthread_exit unwinds us; that end is already recorded */
    hbt_thread_end(HBT_END_CANCELLED);
}

static void *hbt_trampoline(void *p)
{
    struct hbt_start s = *(struct hbt_start *)p;
    hbt_start_give(p);
    hbt_register_thread(&hbt_tls, s.creator, HBT_MODE_API);

    void *volatile ret = NULL;
    pthread_cleanup_push(hbt_cancelled, NULL);
    ret = s.fn(s.arg);
    pthread_cleanup_pop(0);
    hbt_thread_end(HBT_END_RETURN);
    return ret;
}

HBT_EXPORT int pthread_create(pthread_t *thread, const pthread_attr_t *attr,
                              void *(*start)(void *), void *arg)
{
    hbt_create_fn real = (hbt_create_fn)hbt_real(&hbt_real_create, "pthread_create");
    if (!real)
        return EAGAIN;
    uint32_t creator;
    if (!hbt_self_slot(&creator))
        return real(thread, attr, start, arg);
    struct hbt_start *s = hbt_start_take();
    if (!s)
        return real(thread, attr, start, arg);
    s->fn = start;
    s->arg = arg;
    s->creator = creator;
    int rc = real(thread, attr, hbt_trampoline, s);
    if (rc != 0)
        hbt_start_give(s);
    return rc;
}

HBT_EXPORT void pthread_exit(void *retval)
{
    if (hbt_state() == HBT_ON)
        hbt_thread_end(HBT_END_PTHREAD_EXIT);
    /* The main thread leaves the process to its other threads, and the
     * process must end when the last of them does: stop (and join) the
     * pre-faulter first, for good, so that it neither keeps the process
     * alive nor becomes the last thread that runs the exit handlers. */
    if ((pid_t)syscall(SYS_gettid) == getpid())
        hbt_prefault_stop();
    hbt_pexit_fn real = (hbt_pexit_fn)hbt_real(&hbt_real_pexit, "pthread_exit");
    if (real)
        real(retval);
    syscall(SYS_exit, 0);   /* unreachable in practice: libc always has it */
    __builtin_unreachable();
}

/* ------------------------------------------------------------------ */
/* process exit                                                        */

/* The exit ends the serial part of the master that ends the process (either runtime's). */
static void hbt_serial_part_ends(void)
{
    hbt_gomp_at_exit();
    hbt_ompt_at_exit();
}

static void hbt_process_exit(int status, uint16_t how)
{
    /* getpid: a vfork child shares our memory and must not write (or
     * unlink) its parent's file */
    if (hbt_state() != HBT_ON || getpid() != hbt_g.pid)
        return;
    if (hbt_inject_armed)
        hbt_inject_at_exit(status);   /* the injector's truth, final */
    /* the pre-faulter runs the exit handlers only when it outlived every
     * program thread without being told (see prefault.c): it is no program
     * thread and records nothing. The monitor thread runs them when it
     * noticed that the program's threads are gone (after the main thread's
     * pthread_exit) and returned last: it records the exit as any thread. */
    if (!hbt_tls.internal) {
        /* the monitor's final pass: threads still at work end with the
         * process (exited for status 0, failed otherwise) */
        hbt_serial_part_ends();   /* (a return from main) */
        hbt_mon_at_exit(status);
        HBT_HOOK(hbt_queue_at_exit);    /* last samples of the open queues */
        HBT_HOOK(hbt_status_at_exit);   /* a last status sample */
        HBT_HOOK(hbt_probe_at_exit);    /* probe statistics of the live threads */
        hbt_memory_track(&hbt_tls, hbt_now_ns(), hbt_tls.mem_thread, 0, 2);   /* last counts */
        hbt_event(HBT_REC_PROCESS_EXIT, how, (uint32_t)status, HBT_MODE_END);
    }
    if (!hbt_unlink_if_empty(0))
        hbt_trim_at_exit();
}

static void hbt_on_exit(int status, void *unused)
{
    (void)unused;
    hbt_process_exit(status, HBT_EXIT_NORMAL);
}

static __attribute__((noreturn)) void hbt_real_exit_now(int status)
{
    hbt_exit_fn real = (hbt_exit_fn)hbt_real(&hbt_real_exit, "_exit");
    if (real)
        real(status);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}

/*
 * exit(): the moment it is called, before the exit handlers run. Those are
 * the program's and its runtimes' (libomp's ends its worker threads, which
 * record THREAD_END as threads that returned), and ours runs last: the
 * PROCESS_EXIT at their end is when the process ended, this one (flag
 * HBT_EXIT_CALLED) when and in which thread its end began. Through the
 * normal slots only: the reserved one is left to the final record.
 * A return from main calls libc's exit inside libc, not through here.
 */
HBT_EXPORT void exit(int status)
{
    if (hbt_state() == HBT_ON && getpid() == hbt_g.pid && !hbt_tls.internal) {
        hbt_serial_part_ends();
        hbt_event(HBT_REC_PROCESS_EXIT, HBT_EXIT_CALLED, (uint32_t)status, HBT_M_GROW | HBT_M_LOST);
    }
    hbt_exit_fn real = (hbt_exit_fn)hbt_real(&hbt_real_libc_exit, "exit");
    if (real)
        real(status);
    hbt_process_exit(status, HBT_EXIT_NORMAL);   /* no libc exit: end as _exit would */
    hbt_real_exit_now(status);
}

HBT_EXPORT void _exit(int status)
{
    hbt_process_exit(status, HBT_EXIT_UNDERSCORE);
    hbt_real_exit_now(status);
}

HBT_EXPORT void _Exit(int status)
{
    hbt_process_exit(status, HBT_EXIT_UNDERSCORE);
    hbt_real_exit_now(status);
}

/* ------------------------------------------------------------------ */
/* start-up                                                            */

static void hbt_resolve_all(void)
{
    hbt_real(&hbt_real_create, "pthread_create");
    hbt_real(&hbt_real_pexit, "pthread_exit");
    hbt_real(&hbt_real_exit, "_exit");
    hbt_real(&hbt_real_libc_exit, "exit");
    hbt_signals_resolve();
}

/*
 * Runs once per program image (again after exec, not after fork). If a
 * call into the API came first, the file is already open and only the
 * hooks are missing.
 */
__attribute__((constructor)) static void hbt_constructor(void)
{
    hbt_resolve_all();
    uint32_t slot;
    if (!hbt_self_slot(&slot))   /* opens the file, registers this thread */
        return;
    /* registered in the constructor, so these run after every atexit
     * handler the program registers later */
    on_exit(hbt_on_exit, NULL);
    hbt_fork_child_add(hbt_mon_after_fork_child);   /* first: the parent's thread count */
    hbt_fork_child_add(hbt_after_fork_child);       /* the file, counters, this thread */
    hbt_fork_child_add(hbt_prefault_after_fork_child);
    hbt_signals_init();
}
