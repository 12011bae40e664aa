/*
 * seq_beaters.c -- threads that beat, then end, a few at a time, for
 * tests/test_trace_size.py: the units an ended thread gives back are taken
 * by the threads after it.
 *
 *   seq_beaters ROUNDS AT_ONCE BEATS [USLEEP]
 *
 * ROUNDS rounds of AT_ONCE threads, each making BEATS beats (hbt_beat),
 * sleeping USLEEP microseconds after each beat; ROUNDS 0: forever (until
 * killed). Exit status 0.
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "hbtrace.h"

static long beats, pause_us;

static void *beater(void *arg)
{
    (void)arg;
    for (long i = 0; i < beats; i++) {
        hbt_beat((unsigned)i);
        if (pause_us)
            usleep((useconds_t)pause_us);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 4)
        return 2;
    long rounds = atol(argv[1]), at_once = atol(argv[2]);
    beats = atol(argv[3]);
    pause_us = argc > 4 ? atol(argv[4]) : 0;
    if (at_once < 1 || at_once > 64)
        return 2;
    pthread_t t[64];
    for (long r = 0; rounds == 0 || r < rounds; r++) {
        for (long i = 0; i < at_once; i++)
            if (pthread_create(&t[i], NULL, beater, NULL) != 0)
                return 1;
        for (long i = 0; i < at_once; i++)
            pthread_join(t[i], NULL);
    }
    return 0;
}
