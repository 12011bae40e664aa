/*
 * stream_common.h -- command line, clocks, randomness and ground truth shared
 * by the stream-stage examples (stream_micro, stream_matmul, stream_search),
 * which move their data through instrumented queues (hbtrace_queue.h).
 *
 * Every program includes this header first; the code is in stream_common.c
 * (and util.c). Options are described by a table (struct sc_opt); the parser
 * prints the usage from it, accepts --name value and --name=value, and on a
 * bad argument prints one line on stderr and exits with status 2.
 *
 * Times in the truth files are seconds since the tracer's start
 * (start_mono_ns of the trace header, read back from the trace file), on
 * the trace clock, CLOCK_MONOTONIC; when tracing is off, since the program's
 * start. Every time is also given as an absolute CLOCK_MONOTONIC value in
 * ns ("*_mono_ns"), and "t0_mono_ns" is the origin used.
 */
#ifndef STREAM_COMMON_H
#define STREAM_COMMON_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include "util.h"
#include "hbtrace.h"
#include "hbtrace_queue.h"

/* Exit statuses (as the heartbeat examples). */
#define SC_EXIT_OK      EX_EXIT_OK       /* the run completed and its result checked out */
#define SC_EXIT_USAGE   EX_EXIT_USAGE    /* bad argument, or the truth file cannot be written */
#define SC_EXIT_RUNTIME EX_EXIT_RUNTIME  /* out of memory, thread or queue creation failed,
                                            a wrong result */

/* ------------------------------------------------------------------ clocks */

/* Busy-wait on the clock until `deadline` (CLOCK_MONOTONIC ns): CPU-like
 * service time, no system call (the clock is served by the vDSO). Returns
 * the last clock value read (>= deadline). */
static inline uint64_t sc_spin_until(uint64_t deadline)
{
    uint64_t now;
    while ((now = ex_now_ns()) < deadline)
        ;
    return now;
}

static inline void sc_sleep_until(uint64_t when)
{
    struct timespec ts = { .tv_sec = (time_t)(when / 1000000000u),
                           .tv_nsec = (long)(when % 1000000000u) };
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

/* The origin of the truth file's times: the tracer's start, read from the
 * trace file's header (offset 64, start_mono_ns), else the program start;
 * *source says which ("trace", "program"). */
uint64_t sc_t0(const char **source);

/* -------------------------------------------------------------- randomness */

/* A generator for one purpose of a run, derived from the seed. */
static inline uint64_t sc_rand_stream(uint64_t seed, uint64_t stream)
{
    uint64_t s = seed ^ (stream * 0xD1B54A32D192ED03ull);
    (void)ex_rand_next(&s);
    return s;
}

/* hbt_queue_create; dies (SC_EXIT_RUNTIME) when it fails. */
hbt_queue_t *sc_queue(const char *name, size_t item_size, size_t capacity);

/* ---------------------------------------------------------------- options */

enum sc_type { SC_LONG, SC_DOUBLE, SC_STR, SC_CHOICE, SC_U64 };

struct sc_opt {
    const char *name;             /* "--rate" */
    enum sc_type type;
    void *dst;                    /* long *, double *, const char **, int *, uint64_t * */
    double lo, hi;                /* SC_LONG, SC_DOUBLE: accepted range */
    const char *const *choices;   /* SC_CHOICE: names, index stored in *(int *)dst */
    int nchoices;
    const char *arg;              /* metavariable in the usage */
    const char *help;
    int given;                    /* set by the parser */
};

/* Table entries: SC_NUM for numbers and strings, SC_PICK for a choice. */
#define SC_NUM(nm, ty, d, l, h, a, hl) \
    { .name = (nm), .type = (ty), .dst = (d), .lo = (l), .hi = (h), .arg = (a), .help = (hl) }
#define SC_PICK(nm, d, ch, n, a, hl) \
    { .name = (nm), .type = SC_CHOICE, .dst = (d), .choices = (ch), .nchoices = (n), \
      .arg = (a), .help = (hl) }

/* Parse the command line into the table; --help prints the usage from it.
 * A bad argument: one line on stderr, exit status 2. */
void sc_parse(int argc, char **argv, const char *summary, struct sc_opt *opts, int n);
int  sc_given(const struct sc_opt *opts, int n, const char *name);

/* ------------------------------------------------------------ truth file */

void  sc_json_params(FILE *f, const struct sc_opt *o, int n);   /* "params": {...} */
/* One queue's exact totals of both ends. */
void  sc_json_totals(FILE *f, const struct hbt_queue_stats *s);
/* One queue of a pipeline: name, id, sizes, the stages at its ends, totals. */
void  sc_json_queue(FILE *f, const char *name, hbt_queue_t *q, const char *producer,
                    const char *consumer);
/* Open a temporary file next to `path`; sc_truth_commit renames it, so a
 * reader never sees half a file. NULL path: NULL, nothing to write. */
FILE *sc_truth_open(const char *path, char **tmp);
void  sc_truth_commit(FILE *f, const char *path, char *tmp);
/* The fields every truth file starts with (after the opening brace). */
void  sc_json_head(FILE *f, uint64_t seed, const char *end, uint64_t t0, const char *t0_source);
/* A time as "<key>_s" (since t0) and "<key>_mono_ns". */
void  sc_json_time(FILE *f, const char *key, uint64_t mono, uint64_t t0);
FILE *sc_truth_begin(const char *path, uint64_t seed, char **tmp, uint64_t *t0);
/* A first truth file ("end": "running"), so that an unwritable path is a
 * usage error before any work is done. */
void  sc_truth_running(const char *path, uint64_t seed, const struct sc_opt *o, int n);

/* --------------------------------------------------------- solo measures */

/* The result of a --solo measurement: a kernel alone on resident data, its
 * output to a resident sink (never blocks), timed over about `seconds`. */
struct sc_solo {
    const char *kernel;
    uint64_t items;
    double seconds;
    size_t in_item_size, out_item_size;
};

void sc_json_solo(FILE *f, const struct sc_solo *s);
void sc_print_solo(const struct sc_solo *s);

#endif /* STREAM_COMMON_H */
