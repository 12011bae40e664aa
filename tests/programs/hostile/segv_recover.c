/*
 * segv_recover.c -- a program with its own SIGSEGV handler that recovers
 * from N faults (default 1000): each time a worker thread touches a
 * PROT_NONE page, the handler makes the page writable, the store is
 * retried, the page is protected again. Prints the count; exit 0.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "beat.h"

static char *page;
static long pagesize;
static volatile sig_atomic_t faults;

static void on_segv(int sig, siginfo_t *si, void *ctx)
{
    (void)sig, (void)ctx;
    char *at = (char *)si->si_addr;
    if (at < page || at >= page + pagesize)
        _exit(99); /* a fault that is not ours */
    faults++;
    mprotect(page, (size_t)pagesize, PROT_READ | PROT_WRITE);
}

static void *worker(void *arg)
{
    long n = (long)arg;
    for (long i = 0; i < n; i++) {
        mprotect(page, (size_t)pagesize, PROT_NONE);
        page[i % pagesize] = (char)i; /* faults, recovers, retries */
        beat((unsigned)i);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000;
    pagesize = sysconf(_SC_PAGESIZE);
    page = mmap(NULL, (size_t)pagesize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    struct sigaction sa = {0};
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    if (page == MAP_FAILED || sigaction(SIGSEGV, &sa, NULL) != 0)
        return 1;
    pthread_t t;
    if (pthread_create(&t, NULL, worker, (void *)n) != 0)
        return 1;
    pthread_join(t, NULL);
    printf("recovered from %d faults\n", (int)faults);
    return faults == n ? 0 : 1;
}
