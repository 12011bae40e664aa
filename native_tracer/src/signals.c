/*
 * signals.c -- record the fatal signal that kills the process.
 *
 * For each signal whose default action kills the process, and only when the
 * program left it at SIG_DFL, a handler records HBT_REC_SIGNAL, puts SIG_DFL
 * back and re-raises, so the process dies exactly as it would have (same
 * wait status, same core dump). The handler only stores into the mapping:
 * no lock, no allocation, no growth of the file.
 *
 * sigaction() and signal() are interposed to report our handler as SIG_DFL:
 * programs that install a handler only over SIG_DFL (CPython's
 * KeyboardInterrupt, Rust's stack-overflow guard) must behave as without the
 * tracer. A program that installs its own handler simply replaces ours; one
 * that puts SIG_DFL back gets ours again (a crash handler that prints, resets
 * and returns so that the fault kills the process).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

typedef int (*hbt_sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef sighandler_t (*hbt_signal_fn)(int, sighandler_t);

typedef void (*hbt_abort_fn)(void) __attribute__((noreturn));

static void *hbt_real_sigaction, *hbt_real_signal, *hbt_real_abort;

static const int hbt_fatal_signals[] = {
    SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS, SIGTERM, SIGINT,
    SIGHUP, SIGQUIT, SIGXCPU, SIGXFSZ, SIGPIPE, SIGALRM, SIGUSR1, SIGUSR2,
};

#define HBT_ALTSTACK_SIZE (64u * 1024u)

HBT_NO_TSAN static int hbt_sigaction_real(int sig, const struct sigaction *act, struct sigaction *old)
{
    hbt_sigaction_fn f = (hbt_sigaction_fn)hbt_real(&hbt_real_sigaction, "sigaction");
    if (!f) {
        errno = ENOSYS;
        return -1;
    }
    return f(sig, act, old);
}

static void hbt_on_signal(int sig, siginfo_t *info, void *ctx)
{
    (void)info;
    (void)ctx;
    int saved = errno;
    /* getpid: a vfork child shares our memory but not our file */
    if (hbt_state() == HBT_ON && getpid() == hbt_g.pid) {
        hbt_event(HBT_REC_SIGNAL, 0, (uint32_t)sig, HBT_MODE_SIGNAL);
        if (sig == SIGPIPE)
            hbt_unlink_if_empty(1);
    }

    /* SA_RESETHAND already restored SIG_DFL; say it again for the kernels
     * that do not reset SIGILL/SIGTRAP. The re-raised signal is blocked
     * until we return, then kills the process with the default action; a
     * fault (SIGSEGV...) would also simply happen again. */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    hbt_sigaction_real(sig, &dfl, NULL);
    raise(sig);
    errno = saved;
}

HBT_NO_TSAN static int hbt_is_ours(const struct sigaction *sa)
{
    return (sa->sa_flags & SA_SIGINFO) && sa->sa_sigaction == hbt_on_signal;
}

/* The main thread's alternate stack, so that a stack overflow is recorded
 * too. Other threads have none (their overflow dies unrecorded). */
static void hbt_altstack(void)
{
    stack_t cur;
    if (sigaltstack(NULL, &cur) != 0 || !(cur.ss_flags & SS_DISABLE))
        return;   /* the program has its own */
    size_t size = HBT_ALTSTACK_SIZE;
#ifdef _SC_SIGSTKSZ
    long min = sysconf(_SC_SIGSTKSZ);
    if (min > 0 && (size_t)min * 4 > size)
        size = (size_t)min * 4;
#endif
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (p == MAP_FAILED)
        return;
    stack_t ss = { .ss_sp = p, .ss_size = size, .ss_flags = 0 };
    if (sigaltstack(&ss, NULL) != 0)
        munmap(p, size);
}

/* Resolve early: the wrappers may later run inside a signal handler, where
 * dlsym must not be called. */
void hbt_signals_resolve(void)
{
    hbt_real(&hbt_real_sigaction, "sigaction");
    hbt_real(&hbt_real_signal, "signal");
    hbt_real(&hbt_real_abort, "abort");
}

static void hbt_our_action(struct sigaction *sa)
{
    memset(sa, 0, sizeof *sa);
    sa->sa_sigaction = hbt_on_signal;
    sa->sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
    sigfillset(&sa->sa_mask);   /* one handler at a time per thread */
}

void hbt_signals_init(void)
{
    int installed = 0;
    for (size_t k = 0; k < sizeof hbt_fatal_signals / sizeof hbt_fatal_signals[0]; k++) {
        int sig = hbt_fatal_signals[k];
        struct sigaction old;
        if (hbt_sigaction_real(sig, NULL, &old) != 0)
            continue;
        if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL)
            continue;
        struct sigaction sa;
        hbt_our_action(&sa);
        if (hbt_sigaction_real(sig, &sa, NULL) == 0)
            installed = 1;
    }
    if (installed)
        hbt_altstack();
}

/* A program that puts SIG_DFL back for a fatal signal gets our handler, which acts as
 * SIG_DFL and records the death first: a crash handler that prints its message, puts
 * SIG_DFL back and returns so that the fault kills the process (IQ-TREE's) left no record
 * of the signal that killed it. Async-signal-safe: such handlers call this from inside. */
HBT_NO_TSAN static int hbt_default_is_ours(int sig)
{
    /* (called while a sanitizer's runtime starts, before it can take instrumented code:
     * nothing here but loads and one system call) */
    int fatal = 0;
    for (size_t k = 0; k < sizeof hbt_fatal_signals / sizeof hbt_fatal_signals[0]; k++)
        fatal |= hbt_fatal_signals[k] == sig;
    return fatal && __atomic_load_n(&hbt_g.state, __ATOMIC_ACQUIRE) == HBT_ON && getpid() == hbt_g.pid;
}

HBT_EXPORT HBT_NO_TSAN int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    struct sigaction ours;
    if (act && !(act->sa_flags & SA_SIGINFO) && act->sa_handler == SIG_DFL && hbt_default_is_ours(sig)) {
        hbt_our_action(&ours);
        act = &ours;
    }
    int rc = hbt_sigaction_real(sig, act, old);
    if (rc == 0 && old && hbt_is_ours(old)) {
        memset(old, 0, sizeof *old);
        old->sa_handler = SIG_DFL;
        sigemptyset(&old->sa_mask);
    }
    return rc;
}

HBT_EXPORT HBT_NO_TSAN sighandler_t signal(int sig, sighandler_t handler)
{
    hbt_signal_fn f = (hbt_signal_fn)hbt_real(&hbt_real_signal, "signal");
    if (!f) {
        errno = ENOSYS;
        return SIG_ERR;
    }
    if (handler == SIG_DFL && hbt_default_is_ours(sig)) {
        struct sigaction ours, prev;
        hbt_our_action(&ours);
        if (hbt_sigaction_real(sig, &ours, &prev) != 0)
            return SIG_ERR;
        if (hbt_is_ours(&prev))
            return SIG_DFL;
        return (prev.sa_flags & SA_SIGINFO) ? (sighandler_t)(void (*)(void))prev.sa_sigaction : prev.sa_handler;
    }
    sighandler_t old = f(sig, handler);
    return old == (sighandler_t)(void (*)(void))hbt_on_signal ? SIG_DFL : old;
}

/*
 * abort(): recorded as it is called, in the thread that calls it, where SIGABRT is not left
 * to our handler -- a program whose own handler catches it (GraphicsMagick's crash handler
 * catches SIGSEGV and SIGABRT, prints its message and calls abort(); glibc's abort then puts
 * SIG_DFL back by itself, unseen, and the process died with no record of what killed it, on
 * no thread). The record is the one our handler writes for SIGABRT, so the death reads the
 * same; where our handler is in place it writes it, not this. Async-signal-safe: crash
 * handlers call abort() from inside.
 */
HBT_EXPORT HBT_NO_TSAN void abort(void)
{
    if (__atomic_load_n(&hbt_g.state, __ATOMIC_ACQUIRE) == HBT_ON && getpid() == hbt_g.pid) {
        struct sigaction cur;
        if (hbt_sigaction_real(SIGABRT, NULL, &cur) != 0 || !hbt_is_ours(&cur))
            hbt_event(HBT_REC_SIGNAL, 0, (uint32_t)SIGABRT, HBT_MODE_SIGNAL);
    }
    hbt_abort_fn f = (hbt_abort_fn)hbt_real(&hbt_real_abort, "abort");
    if (f)
        f();
    /* (no libc abort: die of SIGABRT as it would) */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    hbt_sigaction_real(SIGABRT, &dfl, NULL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGABRT);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    raise(SIGABRT);
    _exit(127);
}
