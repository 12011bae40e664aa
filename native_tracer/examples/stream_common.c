/*
 * stream_common.c -- command line, truth files and the other helpers of the
 * stream-stage examples (stream_common.h).
 */
#include "stream_common.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The origin of the truth file's times: the tracer's start, read from the
 * trace file's header (offset 64, start_mono_ns), else the program start. */
uint64_t sc_t0(const char **source)
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
    return ex_start_ns;
}

hbt_queue_t *sc_queue(const char *name, size_t item_size, size_t capacity)
{
    hbt_queue_t *q = hbt_queue_create(name, item_size, capacity);
    if (!q)
        ex_die(SC_EXIT_RUNTIME, "hbt_queue_create(%s): %s", name, strerror(errno));
    return q;
}

static void sc_usage(FILE *f, const char *summary, const struct sc_opt *o, int n)
{
    fprintf(f, "usage: %s [options]\n%s\n\n", ex_prog, summary);
    for (int i = 0; i < n; i++) {
        char left[64];
        snprintf(left, sizeof left, "%s %s", o[i].name, o[i].arg ? o[i].arg : "");
        fprintf(f, "  %-22s %s\n", left, o[i].help);
    }
    fprintf(f, "  %-22s %s\n", "--help", "this text");
    fputs("exit status: 0 success, 2 bad argument or unwritable truth file, 3 runtime failure\n", f);
}

static void sc_bad(const char *opt, const char *val, const char *what)
{
    fprintf(stderr, "%s: bad value '%s' for %s: expected %s (try --help)\n", ex_prog, val, opt, what);
    exit(SC_EXIT_USAGE);
}

static void sc_set(struct sc_opt *o, const char *val)
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
        fprintf(stderr, "%s: bad value '%s' for %s: expected one of", ex_prog, val, o->name);
        for (int i = 0; i < o->nchoices; i++)
            fprintf(stderr, "%s%s", i ? "|" : " ", o->choices[i]);
        fputs(" (try --help)\n", stderr);
        exit(SC_EXIT_USAGE);
    }
    o->given = 1;
}

void sc_parse(int argc, char **argv, const char *summary, struct sc_opt *opts, int n)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            sc_usage(stdout, summary, opts, n);
            exit(SC_EXIT_OK);
        }
        if (strncmp(arg, "--", 2) != 0)
            ex_die(SC_EXIT_USAGE, "unexpected argument '%s'", arg);
        const char *eq = strchr(arg, '=');
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        struct sc_opt *o = NULL;
        for (int k = 0; k < n; k++)
            if (strlen(opts[k].name) == len && strncmp(opts[k].name, arg, len) == 0)
                o = &opts[k];
        if (!o)
            ex_die(SC_EXIT_USAGE, "unknown option '%.*s'", (int)len, arg);
        const char *val = eq ? eq + 1 : NULL;
        if (!val) {
            if (i + 1 >= argc)
                ex_die(SC_EXIT_USAGE, "option %s needs a value", o->name);
            val = argv[++i];
        }
        sc_set(o, val);
    }
}

static const struct sc_opt *sc_find(const struct sc_opt *opts, int n, const char *name)
{
    for (int k = 0; k < n; k++)
        if (strcmp(opts[k].name, name) == 0)
            return &opts[k];
    return NULL;
}

int sc_given(const struct sc_opt *opts, int n, const char *name)
{
    const struct sc_opt *o = sc_find(opts, n, name);
    return o && o->given;
}

/* Every option as a "params" object (the values in force). */
void sc_json_params(FILE *f, const struct sc_opt *o, int n)
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
        case SC_STR:    ex_json_str(f, *(const char *const *)o[i].dst); break;
        case SC_CHOICE: ex_json_str(f, o[i].choices[*(const int *)o[i].dst]); break;
        }
    }
    fputc('}', f);
}

/* One end's exact totals. */
void sc_json_totals(FILE *f, const struct hbt_queue_stats *s)
{
    fprintf(f, "{\"producer\": {\"nonblocking\": %" PRIu64 ", \"blocked\": %" PRIu64
               ", \"waits\": %" PRIu64 "}, \"consumer\": {\"nonblocking\": %" PRIu64
               ", \"blocked\": %" PRIu64 ", \"waits\": %" PRIu64 "}}",
            s->push_nonblocking, s->push_blocked, s->push_waits,
            s->pop_nonblocking, s->pop_blocked, s->pop_waits);
}

/* One queue of a pipeline: name, id, sizes, the stages at its ends, totals. */
void sc_json_queue(FILE *f, const char *name, hbt_queue_t *q,
                                 const char *producer, const char *consumer)
{
    struct hbt_queue_stats s;
    hbt_queue_stats(q, &s);
    fputs("{\"name\": ", f);
    ex_json_str(f, name);
    fprintf(f, ", \"id\": %u, \"item_size\": %" PRIu64 ", \"capacity\": %u, \"producer\": ",
            s.id, s.item_size, s.capacity);
    ex_json_str(f, producer);
    fputs(", \"consumer\": ", f);
    ex_json_str(f, consumer);
    fprintf(f, ", \"monitored\": %s, \"period_us\": %u, \"totals\": ",
            s.monitored ? "true" : "false", s.period_us);
    sc_json_totals(f, &s);
    fputc('}', f);
}

/* Open a temporary file next to `path`; sc_truth_commit renames it, so a
 * reader never sees half a file. NULL path: NULL, nothing to write. */
FILE *sc_truth_open(const char *path, char **tmp)
{
    *tmp = NULL;
    if (!path)
        return NULL;
    size_t n = strlen(path) + 32;
    *tmp = malloc(n);
    if (!*tmp)
        ex_die(SC_EXIT_RUNTIME, "out of memory");
    snprintf(*tmp, n, "%s.tmp%ld", path, (long)getpid());
    FILE *f = fopen(*tmp, "w");
    if (!f)
        ex_die(SC_EXIT_USAGE, "cannot write truth file '%s': %s", path, strerror(errno));
    return f;
}

void sc_truth_commit(FILE *f, const char *path, char *tmp)
{
    if (!f)
        return;
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
        unlink(tmp);
        free(tmp);
        ex_die(SC_EXIT_USAGE, "cannot write truth file '%s'", path);
    }
    free(tmp);
}

/* The fields every truth file starts with (after the opening brace). */
void sc_json_head(FILE *f, uint64_t seed, const char *end, uint64_t t0,
                                const char *t0_source)
{
    fputs("\"program\": ", f);
    ex_json_str(f, ex_prog);
    fprintf(f, ", \"seed\": %" PRIu64 ", \"end\": ", seed);
    ex_json_str(f, end);
    fprintf(f, ", \"pid\": %ld, \"trace\": ", (long)getpid());
    ex_json_str(f, hbt_trace_path());
    fprintf(f, ", \"t0_mono_ns\": %" PRIu64 ", \"t0_source\": ", t0);
    ex_json_str(f, t0_source);
    fprintf(f, ", \"program_start_mono_ns\": %" PRIu64, ex_start_ns);
}

/* A time as "<key>_s" (since t0) and "<key>_mono_ns". */
void sc_json_time(FILE *f, const char *key, uint64_t mono, uint64_t t0)
{
    fprintf(f, "\"%s_s\": %.9f, \"%s_mono_ns\": %" PRIu64, key,
            ((double)mono - (double)t0) * 1e-9, key, mono);
}

/* The final truth file, opened with "{" and its head written ("end":
 * "normal"); NULL (nothing to write) without --truth. *t0: the origin of
 * its times (sc_t0). Finish with "}\n" and sc_truth_commit. */
FILE *sc_truth_begin(const char *path, uint64_t seed, char **tmp, uint64_t *t0)
{
    const char *src;
    *t0 = sc_t0(&src);
    FILE *f = sc_truth_open(path, tmp);
    if (f) {
        fputc('{', f);
        sc_json_head(f, seed, "normal", *t0, src);
    }
    return f;
}

/* A first truth file ("end": "running"), so that an unwritable path is a
 * usage error before any work is done. */
void sc_truth_running(const char *path, uint64_t seed, const struct sc_opt *o, int n)
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

void sc_json_solo(FILE *f, const struct sc_solo *s)
{
    if (!s || !s->kernel) {
        fputs("\"solo\": null", f);
        return;
    }
    double rate = s->seconds > 0 ? (double)s->items / s->seconds : 0.0;
    fputs("\"solo\": {\"kernel\": ", f);
    ex_json_str(f, s->kernel);
    fprintf(f, ", \"items\": %" PRIu64 ", \"seconds\": %.9f, \"items_per_s\": %.6g"
               ", \"in_item_size\": %zu, \"in_bytes_per_s\": %.6g"
               ", \"out_item_size\": %zu, \"out_bytes_per_s\": %.6g}",
            s->items, s->seconds, rate, s->in_item_size, rate * (double)s->in_item_size,
            s->out_item_size, rate * (double)s->out_item_size);
}

void sc_print_solo(const struct sc_solo *s)
{
    double rate = s->seconds > 0 ? (double)s->items / s->seconds : 0.0;
    printf("%s solo %s items %" PRIu64 " seconds %.6f items_per_s %.6g bytes_per_s %.6g\n",
           ex_prog, s->kernel, s->items, s->seconds, rate, rate * (double)s->in_item_size);
}
