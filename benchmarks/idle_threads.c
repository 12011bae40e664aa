/*
 * idle_threads.c -- threads and processes that never beat, for
 * benchmarks/bench_trace_size.py (and tests/test_trace_size.py).
 *
 *   idle_threads threads N K   N short-lived threads, K alive at a time
 *   idle_threads fork P T      P forked children, one after another, each
 *                              starting T threads and exiting with status 0
 *
 * Nothing here calls the heartbeat API: under LD_PRELOAD the tracer sees only
 * thread and process lifecycles. Exit status 0, or 1 on a failed call.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void *idle(void *arg)
{
    return arg;
}

static int batch(int n, int k)
{
    pthread_t *t = calloc((size_t)k, sizeof *t);
    if (!t)
        return 1;
    for (int done = 0; done < n; done += k) {
        int m = n - done < k ? n - done : k;
        for (int i = 0; i < m; i++)
            if (pthread_create(&t[i], NULL, idle, NULL) != 0) {
                perror("pthread_create");
                return 1;
            }
        for (int i = 0; i < m; i++)
            pthread_join(t[i], NULL);
    }
    free(t);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s threads N K | fork P T\n", argv[0]);
        return 2;
    }
    int a = atoi(argv[2]), b = atoi(argv[3]);
    if (strcmp(argv[1], "threads") == 0)
        return batch(a, b > 0 ? b : 1);
    if (strcmp(argv[1], "fork") == 0) {
        for (int i = 0; i < a; i++) {
            pid_t pid = fork();
            if (pid < 0) {
                perror("fork");
                return 1;
            }
            if (pid == 0)
                exit(batch(b, b > 0 ? b : 1));
            int st;
            if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
                return 1;
        }
        return 0;
    }
    fprintf(stderr, "%s: unknown mode %s\n", argv[0], argv[1]);
    return 2;
}
