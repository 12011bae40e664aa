/*
 * signals_blocked.c -- every signal blocked in main before anything else
 * (so in every thread it starts), 4 threads beat 50,000 times each, then a
 * SIGTERM the program sends itself is taken with sigwait. Prints what it
 * took; exit 0.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "beat.h"

static void *worker(void *arg)
{
    (void)arg;
    for (unsigned i = 0; i < 50000; i++)
        beat(i);
    return NULL;
}

int main(void)
{
    sigset_t all;
    sigfillset(&all);
    if (sigprocmask(SIG_BLOCK, &all, NULL) != 0)
        return 1;
    pthread_t t[4];
    for (int k = 0; k < 4; k++)
        if (pthread_create(&t[k], NULL, worker, NULL) != 0)
            return 1;
    for (int k = 0; k < 4; k++)
        pthread_join(t[k], NULL);
    kill(getpid(), SIGTERM);
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    int got = 0;
    if (sigwait(&term, &got) != 0)
        return 1;
    printf("took %s while every signal was blocked\n", strsignal(got));
    return 0;
}
