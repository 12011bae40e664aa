/*
 * threads_exec.c -- 4 threads beat and keep running while a fifth calls
 * execv(argv[1], argv + 1): the new program replaces them all. Exit status
 * and output are the new program's.
 */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "beat.h"

static char **args;

static void *busy(void *arg)
{
    (void)arg;
    for (unsigned i = 0;; i++) {
        beat(i);
        usleep(100);
    }
    return NULL;
}

static void *execer(void *arg)
{
    (void)arg;
    usleep(50000);
    fflush(stdout);
    execv(args[0], args);
    perror("execv");
    _exit(126);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s PROGRAM [ARGS]...\n", argv[0]);
        return 2;
    }
    args = argv + 1;
    pthread_t t[5];
    for (int k = 0; k < 4; k++)
        if (pthread_create(&t[k], NULL, busy, NULL) != 0)
            return 1;
    if (pthread_create(&t[4], NULL, execer, NULL) != 0)
        return 1;
    printf("before exec\n");
    pthread_join(t[4], NULL);
    return 1; /* not reached */
}
