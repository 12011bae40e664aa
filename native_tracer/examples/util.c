/*
 * util.c -- what every example program shares (util.h).
 */
#include "util.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

const char *ex_prog = "example";
uint64_t ex_start_ns;

/* Program start, taken before main() runs. */
__attribute__((constructor)) static void ex_capture_start(void)
{
    ex_start_ns = ex_now_ns();
}

void ex_die(int status, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", ex_prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    if (status == EX_EXIT_USAGE)
        fputs(" (try --help)", stderr);
    fputc('\n', stderr);
    exit(status);
}

void *ex_xmalloc(size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, n ? n : 1) != 0)
        ex_die(EX_EXIT_RUNTIME, "out of memory (%zu bytes)", n);
    return p;
}

void ex_thread(pthread_t *th, void *(*fn)(void *), void *arg)
{
    int rc = pthread_create(th, NULL, fn, arg);
    if (rc != 0)
        ex_die(EX_EXIT_RUNTIME, "pthread_create: %s", strerror(rc));
}

void ex_json_str(FILE *f, const char *s)
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
