/*
 * output_bound_stage -- source -> stage -> sink through two instrumented
 * queues, where the stage waits on its output and never on its input:
 * the sink sleeps SLEEP_US between pops (it blocks, using no CPU), the
 * source pushes as fast as the stage takes. After a short start, every
 * sampling period of the stage's input end holds a wait of the stage (on
 * its output) and none of that end.
 *
 *   output_bound_stage ITEMS SLEEP_US
 *
 * Prints the stage's pushes that waited and its pops that waited.
 */
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <time.h>

#include "hbtrace.h"
#include "hbtrace_queue.h"

static hbt_queue_t *in, *out;
static long items, sleep_us;

static void *source(void *unused)
{
    (void)unused;
    for (long i = 0; i < items; i++)
        hbt_queue_push(in, &i);
    hbt_queue_close(in);
    return NULL;
}

static void *stage(void *unused)
{
    (void)unused;
    long v;
    while (hbt_queue_pop(in, &v) == 1)
        hbt_queue_push(out, &v);
    hbt_queue_close(out);
    return NULL;
}

static void *sink(void *unused)
{
    (void)unused;
    long v, expect = 0;
    struct timespec ts = { 0, sleep_us * 1000 };
    while (hbt_queue_pop(out, &v) == 1) {
        if (v != expect++) {
            fprintf(stderr, "output_bound_stage: item %ld out of order\n", v);
            exit(1);
        }
        nanosleep(&ts, NULL);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: output_bound_stage ITEMS SLEEP_US\n");
        return 2;
    }
    items = atol(argv[1]);
    sleep_us = atol(argv[2]);
    in = hbt_queue_create("source->stage", sizeof(long), 16);
    out = hbt_queue_create("stage->sink", sizeof(long), 4);
    if (!in || !out) {
        perror("output_bound_stage: hbt_queue_create");
        return 1;
    }
    pthread_t t[3];
    pthread_create(&t[0], NULL, source, NULL);
    pthread_create(&t[1], NULL, stage, NULL);
    pthread_create(&t[2], NULL, sink, NULL);
    for (int k = 0; k < 3; k++)
        pthread_join(t[k], NULL);
    struct hbt_queue_stats si, so;
    hbt_queue_stats(in, &si);
    hbt_queue_stats(out, &so);
    printf("%u %u %llu %llu\n", si.id, so.id, (unsigned long long)so.push_waits,
           (unsigned long long)si.pop_waits);
    hbt_queue_destroy(in);
    hbt_queue_destroy(out);
    return 0;
}
