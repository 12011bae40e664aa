/*
 * ending.c -- how this rank ended (format version 2: end_how, end_detail and
 * the orphan flag in its file's header), recorded the moment it happens:
 * MPI_Finalize (core.c), MPI_Abort (the generated wrapper), a fatal signal
 * (a handler in front of the ones there were, which it then calls), exit()
 * without MPI_Finalize (on_exit), _exit()/_Exit() (interposed); and, at the
 * process's end, one line when MPI was used where the profiler could not see it.
 */
#include "internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

void hbp_end_set(uint32_t how, int32_t detail)
{
    struct hbp_file_header *h = __atomic_load_n(&hbp_g.w.hdr, __ATOMIC_ACQUIRE);
    /* the first end wins, but MPI_Finalize: a signal the program's own handler
     * survived (it set a flag and went on) was not the end */
    if (!h || (__atomic_load_n(&h->end_how, __ATOMIC_RELAXED) != HBP_END_UNKNOWN &&
               how != HBP_END_FINALIZED))
        return;
    if (hbp_g.ppid && getppid() != hbp_g.ppid)
        __atomic_or_fetch(&h->flags, HBP_FLAG_ORPHANED, __ATOMIC_RELAXED);
    if (how != HBP_END_FINALIZED)
        h->run_ns = hbp_now_ns() - hbp_g.t0;   /* how long it ran (exact only if COMPLETE) */
    __atomic_store_n(&h->end_detail, detail, __ATOMIC_RELAXED);
    __atomic_store_n(&h->end_how, how, __ATOMIC_RELEASE);
}

void hbp_abort_seen(int errorcode)
{
    if (hbp_state() == HBP_S_ON || hbp_state() == HBP_S_OFF)
        hbp_end_set(HBP_END_ABORT, errorcode);
}

/* the fatal signals whose arrival is recorded; the previous handler (Open
 * MPI's, the program's, or the default action) then runs as before */
static const int fatal_signals[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM, SIGINT,
                                     SIGHUP, SIGQUIT, SIGPIPE, SIGXCPU };
#define N_FATAL (sizeof fatal_signals / sizeof fatal_signals[0])
static struct sigaction old_actions[N_FATAL];
/* libc's sigaction, past any interposer loaded before us (libhbtrace keeps
 * its own handler first and calls a program's from it: ours goes in front of
 * it instead, and chains to it) */
typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
static sigaction_fn real_sigaction = sigaction;

static void on_fatal(int sig, siginfo_t *si, void *uc)
{
    int saved = errno;
    size_t i = 0;
    while (i < N_FATAL && fatal_signals[i] != sig)
        i++;
    if (i == N_FATAL)
        return;
    struct sigaction *o = &old_actions[i];
    int st = hbp_state();
    if ((st == HBP_S_ON || st == HBP_S_OFF) &&
        ((o->sa_flags & SA_SIGINFO) || o->sa_handler != SIG_IGN))
        hbp_end_set(HBP_END_SIGNAL, sig);   /* not when it was ignored before us */
    if (o->sa_flags & SA_SIGINFO) {
        if (o->sa_sigaction) {
            errno = saved;
            o->sa_sigaction(sig, si, uc);
        }
    } else if (o->sa_handler == SIG_IGN) {
        /* ignored before us: still ignored */
    } else if (o->sa_handler == SIG_DFL) {
        struct sigaction d;
        memset(&d, 0, sizeof d);
        d.sa_handler = SIG_DFL;
        real_sigaction(sig, &d, NULL);
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, sig);
        pthread_sigmask(SIG_UNBLOCK, &set, NULL);
        raise(sig);   /* the default action: the process ends by this signal */
    } else {
        errno = saved;
        o->sa_handler(sig);
    }
    errno = saved;
}

static void on_process_exit(int status, void *arg)
{
    (void)arg;
    int st = hbp_state();
    if (st == HBP_S_ON || st == HBP_S_OFF)
        hbp_end_set(HBP_END_EXIT, status);
}

/* _exit and _Exit skip on_exit: the profiler's own, recording first (Open
 * MPI's ranks end this way, from a progress thread, when they lose mpirun).
 * With libhbtrace loaded before us, its _exit calls the next one: ours. */
typedef void (*exit_fn)(int);
static exit_fn real_exit_now, real_Exit;

static void __attribute__((noreturn)) exit_now(exit_fn *real, const char *name, int status)
{
    int st = hbp_state();
    if (st == HBP_S_ON || st == HBP_S_OFF)
        hbp_end_set(HBP_END_EXIT_NOW, status);
    exit_fn f = __atomic_load_n(real, __ATOMIC_ACQUIRE);
    if (!f)
        f = (exit_fn)dlsym(RTLD_NEXT, name);
    if (f)
        f(status);
    for (;;)
        syscall(SYS_exit_group, status);
}

HBP_EXPORT void _exit(int status)
{
    exit_now(&real_exit_now, "_exit", status);
}

HBP_EXPORT void _Exit(int status)
{
    exit_now(&real_Exit, "_Exit", status);
}

void hbp_end_hooks_install(void)
{
    hbp_g.ppid = getppid();
    __atomic_store_n(&real_exit_now, (exit_fn)dlsym(RTLD_NEXT, "_exit"), __ATOMIC_RELEASE);
    __atomic_store_n(&real_Exit, (exit_fn)dlsym(RTLD_NEXT, "_Exit"), __ATOMIC_RELEASE);
    on_exit(on_process_exit, NULL);
    void *next = dlsym(RTLD_NEXT, "sigaction");
    if (next)
        real_sigaction = (sigaction_fn)next;
    for (size_t i = 0; i < N_FATAL; i++) {
        struct sigaction a;
        memset(&a, 0, sizeof a);
        a.sa_sigaction = on_fatal;
        a.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&a.sa_mask);
        if (real_sigaction(fatal_signals[i], &a, &old_actions[i]) != 0)
            memset(&old_actions[i], 0, sizeof old_actions[i]);   /* SIG_DFL */
    }
}


/* ------------------------------------------------------------------ */
/* the end of the process: MPI calls the profiler did not see            */

/* the rank the launcher gave this process, -1 if none says */
static int launcher_rank(void)
{
    static const char *const vars[] = { "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK" };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            return atoi(v);
    }
    return -1;
}

/*
 * One line on stderr when this process used MPI in a way the profiler could
 * not follow: MPI initialized, but not through an entry point it wraps (a
 * binding it does not know, a direct PMPI_ call), or MPI_Finalize seen
 * without MPI_Init. Runs at exit (libhbprof is nodelete; libmpi, which it
 * depends on, is torn down after it).
 */
__attribute__((destructor)) static void hbp_end_check(void)
{
    if (hbp_g.saw_init || hbp_env_flag(HBPROF_DISABLE) || hbp_env_flag(HBPROF_QUIET))
        return;
    int init = 0;
    if (PMPI_Initialized(&init) != MPI_SUCCESS)
        init = 0;
    if (!init && !hbp_g.saw_finalize)
        return;   /* not an MPI program (or one that never started MPI) */
    char msg[400];
    int n = snprintf(msg, sizeof msg,
                     "hbprof: rank %d: %s; this rank has no profile (its MPI calls were not seen)\n",
                     launcher_rank(),
                     hbp_g.saw_finalize ? "MPI_Finalize seen but MPI_Init not seen"
                                        : "MPI was initialized, but MPI_Init was not seen (an MPI "
                                          "binding or PMPI_ call libhbprof does not wrap)");
    if (n > 0)
        (void)!syscall(SYS_write, 2, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
}
