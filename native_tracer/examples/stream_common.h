/*
 * stream_common.h -- command line, clocks, randomness and ground truth shared
 * by the stream-stage examples (stream_micro, stream_matmul, stream_search),
 * which move their data through instrumented queues (hbtrace_queue.h).
 *
 * Every program includes this header first, exactly once, from its only
 * source file. Options are described by a table (struct sc_opt); the parser
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

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hbtrace.h"
#include "hbtrace_queue.h"

/* Exit statuses (as the heartbeat examples). */
#define SC_EXIT_OK      0   /* the run completed and its result checked out */
#define SC_EXIT_USAGE   2   /* bad argument, or the truth file cannot be written */
#define SC_EXIT_RUNTIME 3   /* out of memory, thread or queue creation failed,
                               a wrong result */

static const char *sc_prog = "stream";
static uint64_t sc_start_ns;   /* CLOCK_MONOTONIC at program start */

/* ------------------------------------------------------------------ clocks */

static inline uint64_t sc_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

__attribute__((constructor)) static void sc_capture_start(void)
{
    sc_start_ns = sc_now_ns();
}

/* Busy-wait on the clock until `deadline` (CLOCK_MONOTONIC ns): CPU-like
 * service time, no system call (the clock is served by the vDSO). Returns
 * the last clock value read (>= deadline). */
static inline uint64_t sc_spin_until(uint64_t deadline)
{
    uint64_t now;
    while ((now = sc_now_ns()) < deadline)
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
 * trace file's header (offset 64, start_mono_ns), else the program start. */
static inline uint64_t sc_t0(const char **source)
{
    const char *path = hbt_trace_path();
    if (path) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            unsigned char h[128];
            ssize_t n = pread(fd, h, sizeof h, 0);
            close(fd);
            uint64_t t0;
            if (n == (ssize_t)sizeof h && memcmp(h, "HBTRACE", 8) == 0) {
                memcpy(&t0, h + 64, sizeof t0);
                if (t0) {
                    *source = "trace";
                    return t0;
                }
            }
        }
    }
    *source = "program";
    return sc_start_ns;
}

/* -------------------------------------------------------------- randomness */

/* splitmix64: every random choice of a run comes from --seed through this. */
static inline uint64_t sc_rand_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static inline double sc_rand_double(uint64_t *state)
{
    return (double)(sc_rand_next(state) >> 11) * 0x1.0p-53;
}

/* A generator for one purpose of a run, derived from the seed. */
static inline uint64_t sc_rand_stream(uint64_t seed, uint64_t stream)
{
    uint64_t s = seed ^ (stream * 0xD1B54A32D192ED03ull);
    (void)sc_rand_next(&s);
    return s;
}

/* ------------------------------------------------------------------ errors */

__attribute__((format(printf, 2, 3), noreturn))
static inline void sc_die(int status, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", sc_prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    if (status == SC_EXIT_USAGE)
        fputs(" (try --help)", stderr);
    fputc('\n', stderr);
    exit(status);
}

static inline void *sc_xmalloc(size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, n ? n : 1) != 0)
        sc_die(SC_EXIT_RUNTIME, "out of memory (%zu bytes)", n);
    return p;
}

static inline void sc_thread(pthread_t *th, void *(*fn)(void *), void *arg)
{
    int rc = pthread_create(th, NULL, fn, arg);
    if (rc != 0)
        sc_die(SC_EXIT_RUNTIME, "pthread_create: %s", strerror(rc));
}

static inline hbt_queue_t *sc_queue(const char *name, size_t item_size, size_t capacity)
{
    hbt_queue_t *q = hbt_queue_create(name, item_size, capacity);
    if (!q)
        sc_die(SC_EXIT_RUNTIME, "hbt_queue_create(%s): %s", name, strerror(errno));
    return q;
}

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

static inline void sc_usage(FILE *f, const char *summary, const struct sc_opt *o, int n)
{
    fprintf(f, "usage: %s [options]\n%s\n\n", sc_prog, summary);
    for (int i = 0; i < n; i++) {
        char left[64];
        snprintf(left, sizeof left, "%s %s", o[i].name, o[i].arg ? o[i].arg : "");
        fprintf(f, "  %-22s %s\n", left, o[i].help);
    }
    fprintf(f, "  %-22s %s\n", "--help", "this text");
    fputs("exit status: 0 success, 2 bad argument or unwritable truth file, 3 runtime failure\n", f);
}

static inline void sc_bad(const char *opt, const char *val, const char *what)
{
    fprintf(stderr, "%s: bad value '%s' for %s: expected %s (try --help)\n", sc_prog, val, opt, what);
    exit(SC_EXIT_USAGE);
}

static inline void sc_set(struct sc_opt *o, const char *val)
{
    char *end, what[96];
    errno = 0;
    switch (o->type) {
    case SC_LONG: {
        long v = strtol(val, &end, 10);
        snprintf(what, sizeof what, "an integer in %.0f..%.0f", o->lo, o->hi);
        if (errno || end == val || *end || (double)v < o->lo || (double)v > o->hi)
            sc_bad(o->name, val, what);
        *(long *)o->dst = v;
        break;
    }
    case SC_DOUBLE: {
        double v = strtod(val, &end);
        snprintf(what, sizeof what, "a number in %g..%g", o->lo, o->hi);
        if (errno || end == val || *end || !isfinite(v) || v < o->lo || v > o->hi)
            sc_bad(o->name, val, what);
        *(double *)o->dst = v;
        break;
    }
    case SC_U64: {
        unsigned long long v = strtoull(val, &end, 10);
        if (errno || end == val || *end || val[0] == '-')
            sc_bad(o->name, val, "an unsigned integer");
        *(uint64_t *)o->dst = (uint64_t)v;
        break;
    }
    case SC_STR:
        *(const char **)o->dst = val;
        break;
    case SC_CHOICE:
        for (int i = 0; i < o->nchoices; i++) {
            if (strcmp(val, o->choices[i]) == 0) {
                *(int *)o->dst = i;
                o->given = 1;
                return;
            }
        }
        fprintf(stderr, "%s: bad value '%s' for %s: expected one of", sc_prog, val, o->name);
        for (int i = 0; i < o->nchoices; i++)
            fprintf(stderr, "%s%s", i ? "|" : " ", o->choices[i]);
        fputs(" (try --help)\n", stderr);
        exit(SC_EXIT_USAGE);
    }
    o->given = 1;
}

static inline void sc_parse(int argc, char **argv, const char *summary, struct sc_opt *opts, int n)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            sc_usage(stdout, summary, opts, n);
            exit(SC_EXIT_OK);
        }
        if (strncmp(arg, "--", 2) != 0)
            sc_die(SC_EXIT_USAGE, "unexpected argument '%s'", arg);
        const char *eq = strchr(arg, '=');
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        struct sc_opt *o = NULL;
        for (int k = 0; k < n; k++)
            if (strlen(opts[k].name) == len && strncmp(opts[k].name, arg, len) == 0)
                o = &opts[k];
        if (!o)
            sc_die(SC_EXIT_USAGE, "unknown option '%.*s'", (int)len, arg);
        const char *val = eq ? eq + 1 : NULL;
        if (!val) {
            if (i + 1 >= argc)
                sc_die(SC_EXIT_USAGE, "option %s needs a value", o->name);
            val = argv[++i];
        }
        sc_set(o, val);
    }
}

static inline const struct sc_opt *sc_find(const struct sc_opt *opts, int n, const char *name)
{
    for (int k = 0; k < n; k++)
        if (strcmp(opts[k].name, name) == 0)
            return &opts[k];
    return NULL;
}

static inline int sc_given(const struct sc_opt *opts, int n, const char *name)
{
    const struct sc_opt *o = sc_find(opts, n, name);
    return o && o->given;
}

/* ------------------------------------------------------------ truth file */

static inline void sc_json_str(FILE *f, const char *s)
{
    if (!s) {
        fputs("null", f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20)         fprintf(f, "\\u%04x", c);
        else                       fputc(c, f);
    }
    fputc('"', f);
}

/* Every option as a "params" object (the values in force). */
static inline void sc_json_params(FILE *f, const struct sc_opt *o, int n)
{
    fputs("\"params\": {", f);
    for (int i = 0; i < n; i++) {
        fprintf(f, "%s\"", i ? ", " : "");
        for (const char *p = o[i].name + 2; *p; p++)
            fputc(*p == '-' ? '_' : *p, f);
        fputs("\": ", f);
        switch (o[i].type) {
        case SC_LONG:   fprintf(f, "%ld", *(const long *)o[i].dst); break;
        case SC_DOUBLE: fprintf(f, "%.17g", *(const double *)o[i].dst); break;
        case SC_U64:    fprintf(f, "%" PRIu64, *(const uint64_t *)o[i].dst); break;
        case SC_STR:    sc_json_str(f, *(const char *const *)o[i].dst); break;
        case SC_CHOICE: sc_json_str(f, o[i].choices[*(const int *)o[i].dst]); break;
        }
    }
    fputc('}', f);
}

/* One end's exact totals. */
static inline void sc_json_totals(FILE *f, const struct hbt_queue_stats *s)
{
    fprintf(f, "{\"producer\": {\"nonblocking\": %" PRIu64 ", \"blocked\": %" PRIu64
               ", \"waits\": %" PRIu64 "}, \"consumer\": {\"nonblocking\": %" PRIu64
               ", \"blocked\": %" PRIu64 ", \"waits\": %" PRIu64 "}}",
            s->push_nonblocking, s->push_blocked, s->push_waits,
            s->pop_nonblocking, s->pop_blocked, s->pop_waits);
}

/* One queue of a pipeline: name, id, sizes, the stages at its ends, totals. */
static inline void sc_json_queue(FILE *f, const char *name, hbt_queue_t *q,
                                 const char *producer, const char *consumer)
{
    struct hbt_queue_stats s;
    hbt_queue_stats(q, &s);
    fputs("{\"name\": ", f);
    sc_json_str(f, name);
    fprintf(f, ", \"id\": %u, \"item_size\": %" PRIu64 ", \"capacity\": %u, \"producer\": ",
            s.id, s.item_size, s.capacity);
    sc_json_str(f, producer);
    fputs(", \"consumer\": ", f);
    sc_json_str(f, consumer);
    fprintf(f, ", \"monitored\": %s, \"period_us\": %u, \"totals\": ",
            s.monitored ? "true" : "false", s.period_us);
    sc_json_totals(f, &s);
    fputc('}', f);
}

/* Open a temporary file next to `path`; sc_truth_commit renames it, so a
 * reader never sees half a file. NULL path: NULL, nothing to write. */
static inline FILE *sc_truth_open(const char *path, char **tmp)
{
    *tmp = NULL;
    if (!path)
        return NULL;
    size_t n = strlen(path) + 32;
    *tmp = malloc(n);
    if (!*tmp)
        sc_die(SC_EXIT_RUNTIME, "out of memory");
    snprintf(*tmp, n, "%s.tmp%ld", path, (long)getpid());
    FILE *f = fopen(*tmp, "w");
    if (!f)
        sc_die(SC_EXIT_USAGE, "cannot write truth file '%s': %s", path, strerror(errno));
    return f;
}

static inline void sc_truth_commit(FILE *f, const char *path, char *tmp)
{
    if (!f)
        return;
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
        unlink(tmp);
        free(tmp);
        sc_die(SC_EXIT_USAGE, "cannot write truth file '%s'", path);
    }
    free(tmp);
}

/* The fields every truth file starts with (after the opening brace). */
static inline void sc_json_head(FILE *f, uint64_t seed, const char *end, uint64_t t0,
                                const char *t0_source)
{
    fputs("\"program\": ", f);
    sc_json_str(f, sc_prog);
    fprintf(f, ", \"seed\": %" PRIu64 ", \"end\": ", seed);
    sc_json_str(f, end);
    fprintf(f, ", \"pid\": %ld, \"trace\": ", (long)getpid());
    sc_json_str(f, hbt_trace_path());
    fprintf(f, ", \"t0_mono_ns\": %" PRIu64 ", \"t0_source\": ", t0);
    sc_json_str(f, t0_source);
    fprintf(f, ", \"program_start_mono_ns\": %" PRIu64, sc_start_ns);
}

/* A time as "<key>_s" (since t0) and "<key>_mono_ns". */
static inline void sc_json_time(FILE *f, const char *key, uint64_t mono, uint64_t t0)
{
    fprintf(f, "\"%s_s\": %.9f, \"%s_mono_ns\": %" PRIu64, key,
            ((double)mono - (double)t0) * 1e-9, key, mono);
}

/* A first truth file ("end": "running"), so that an unwritable path is a
 * usage error before any work is done. */
static inline void sc_truth_running(const char *path, uint64_t seed, const struct sc_opt *o, int n)
{
    char *tmp;
    FILE *f = sc_truth_open(path, &tmp);
    if (!f)
        return;
    const char *src;
    uint64_t t0 = sc_t0(&src);
    fputc('{', f);
    sc_json_head(f, seed, "running", t0, src);
    fputs(", ", f);
    sc_json_params(f, o, n);
    fputs("}\n", f);
    sc_truth_commit(f, path, tmp);
}

/* --------------------------------------------------------- solo measures */

/* The result of a --solo measurement: a kernel alone on resident data, its
 * output to a resident sink (never blocks), timed over about `seconds`. */
struct sc_solo {
    const char *kernel;
    uint64_t items;
    double seconds;
    size_t in_item_size, out_item_size;
};

static inline void sc_json_solo(FILE *f, const struct sc_solo *s)
{
    if (!s || !s->kernel) {
        fputs("\"solo\": null", f);
        return;
    }
    double rate = s->seconds > 0 ? (double)s->items / s->seconds : 0.0;
    fputs("\"solo\": {\"kernel\": ", f);
    sc_json_str(f, s->kernel);
    fprintf(f, ", \"items\": %" PRIu64 ", \"seconds\": %.9f, \"items_per_s\": %.6g"
               ", \"in_item_size\": %zu, \"in_bytes_per_s\": %.6g"
               ", \"out_item_size\": %zu, \"out_bytes_per_s\": %.6g}",
            s->items, s->seconds, rate, s->in_item_size, rate * (double)s->in_item_size,
            s->out_item_size, rate * (double)s->out_item_size);
}

static inline void sc_print_solo(const struct sc_solo *s)
{
    double rate = s->seconds > 0 ? (double)s->items / s->seconds : 0.0;
    printf("%s solo %s items %" PRIu64 " seconds %.6f items_per_s %.6g bytes_per_s %.6g\n",
           sc_prog, s->kernel, s->items, s->seconds, rate, rate * (double)s->in_item_size);
}

#endif /* STREAM_COMMON_H */
