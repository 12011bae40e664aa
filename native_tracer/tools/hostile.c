/*
 * hostile.c -- what the sanitizer runs (tools/run_sanitized.sh) exercise
 * beyond the examples: the tracer's chunk allocator under churn, fork, and
 * an exit from a thread that is not main. Linked with -lhbtrace.
 *
 *   hostile churn   200 threads, 8 at a time, each beating 0..2999 times
 *                   (first chunks, doubling chunks, units given back at the
 *                   end of each thread and taken again by the next), exit 0
 *   hostile fork    20 forked children, each with 3 beating threads, exit 0
 *   hostile exit    4 threads beat; one calls exit(7) while the others spin
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hbtrace.h"

static void *beater(void *arg)
{
    long n = (long)arg;
    for (long i = 0; i < n; i++)
        hbt_beat((unsigned)i);
    return NULL;
}

static int churn(int total, int at_once, unsigned seed)
{
    pthread_t t[64];
    for (int done = 0; done < total; done += at_once) {
        int m = total - done < at_once ? total - done : at_once;
        for (int i = 0; i < m; i++) {
            seed = seed * 1103515245u + 12345u;
            long beats = (long)((seed >> 8) % 3000u);
            if (pthread_create(&t[i], NULL, beater, (void *)beats) != 0)
                return 1;
        }
        for (int i = 0; i < m; i++)
            pthread_join(t[i], NULL);
    }
    return 0;
}

static volatile int stop;

static void *spinner(void *arg)
{
    long k = (long)arg;
    for (long i = 0; !__atomic_load_n(&stop, __ATOMIC_RELAXED); i++) {
        hbt_beat((unsigned)i);
        if (k == 0 && i == 20000)
            exit(7);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "churn") == 0)
        return churn(200, 8, 1);
    if (strcmp(mode, "fork") == 0) {
        for (int i = 0; i < 20; i++) {
            pid_t pid = fork();
            if (pid < 0)
                return 1;
            if (pid == 0)
                _exit(churn(3, 3, (unsigned)i + 2));
            int st;
            if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
                return 1;
        }
        return 0;
    }
    if (strcmp(mode, "exit") == 0) {
        pthread_t t[4];
        for (long i = 0; i < 4; i++)
            if (pthread_create(&t[i], NULL, spinner, (void *)i) != 0)
                return 1;
        for (int i = 0; i < 4; i++)
            pthread_join(t[i], NULL);
        return 0;   /* not reached: thread 0 calls exit(7) */
    }
    fprintf(stderr, "usage: %s churn|fork|exit\n", argv[0]);
    return 2;
}
