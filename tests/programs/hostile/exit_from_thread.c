/*
 * exit_from_thread.c -- 4 threads beat and spin; thread 0 calls exit(7)
 * after its 20,000th beat while the others are still spinning. Prints one
 * line from an atexit handler; exit status 7.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "beat.h"

static void *spinner(void *arg)
{
    long k = (long)arg;
    for (long i = 0;; i++) {
        beat((unsigned)i);
        if (k == 0 && i == 20000)
            exit(7);
    }
    return NULL;
}

static void bye(void)
{
    printf("exit handler ran\n");
}

int main(void)
{
    atexit(bye);
    pthread_t t[4];
    for (long k = 0; k < 4; k++)
        if (pthread_create(&t[k], NULL, spinner, (void *)k) != 0)
            return 1;
    for (int k = 0; k < 4; k++)
        pthread_join(t[k], NULL);
    return 0; /* not reached */
}
