/*
 * common.c -- command line, ground truth and anomaly injection of the
 * heartbeat example programs (common.h says how a worker uses them).
 * Built twice: with the tracer, and with -DHBT_NO_HEARTBEAT for the
 * uninstrumented baseline.
 */
#include "common.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

struct hb_run hb_run;

const char *const hb_inject_names[HB_INJ_COUNT] = {
    "none", "leak", "shutdown", "busywait", "condwait", "earlyexit"
};

const char *const hb_shutdown_names[HB_SD_COUNT] = {
    "thread", "exit", "abort", "segv", "cancel", "vanish"
};

static volatile unsigned hb_spin_flag;   /* read by the busy-wait loop, never set */
static void *volatile hb_leak_sink;      /* the last leaked block escapes here */

/* Uniform integer in [lo, hi]. */
static long hb_rand_range(uint64_t *state, long lo, long hi)
{
    return lo + (long)(ex_rand_next(state) % (uint64_t)(hi - lo + 1));
}

/* A generator for one purpose (stream) of one thread, derived from --seed. */
uint64_t hb_rand_stream(uint64_t stream, uint64_t tid)
{
    uint64_t s = hb_run.o.seed ^ (stream * 0xD1B54A32D192ED03ull) ^ (tid * 0x8CB92BA72F3D8DD7ull);
    (void)ex_rand_next(&s);
    return s;
}

/* Write the ground truth to --truth (through a temporary file and rename, so
 * a reader never sees half a file). `end`: "running" (written at start),
 * "normal" (the program ended normally), or the fatal injection about to end
 * it ("exit", "abort", "segv"). Returns 0, or -1 if it cannot be written. */
static int hb_write_truth(const char *end)
{
    const struct hb_opts *o = &hb_run.o;
    if (!o->truth)
        return 0;
    size_t n = strlen(o->truth) + 32;
    char *tmp = malloc(n);
    if (!tmp)
        return -1;
    snprintf(tmp, n, "%s.tmp%ld", o->truth, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) { free(tmp); return -1; }

    int inj = o->inject != HB_INJ_NONE;
    int fired = hb_run.injected;
    fputs("{\"program\": ", f);
    ex_json_str(f, hb_run.prog->name);
    fprintf(f, ", \"threads\": %d, \"beats\": %d, \"seed\": %" PRIu64 ", \"inject\": \"%s\"",
            o->threads, o->beats, o->seed, hb_inject_names[o->inject]);
    if (inj) fprintf(f, ", \"thread\": %d", hb_run.target_thread);
    else     fputs(", \"thread\": null", f);
    if (fired)                         fprintf(f, ", \"beat\": %d", hb_run.inj_beat);
    else if (inj && hb_run.target_beat >= 0) fprintf(f, ", \"beat\": %d", hb_run.target_beat);
    else                               fputs(", \"beat\": null", f);
    if (fired) fprintf(f, ", \"time_s\": %.9f", (double)(hb_run.inj_ns - ex_start_ns) * 1e-9);
    else       fputs(", \"time_s\": null", f);
    fprintf(f, ", \"injected\": %s", fired ? "true" : "false");
    if (o->inject == HB_INJ_SHUTDOWN) {
        fputs(", \"shutdown_mode\": ", f);
        ex_json_str(f, hb_shutdown_names[o->shutdown_mode]);
    }
    fputs(", \"end\": ", f);
    ex_json_str(f, end);
    fprintf(f, ", \"pid\": %ld, \"start_mono_ns\": %" PRIu64, (long)getpid(), ex_start_ns);
    if (fired) fprintf(f, ", \"inject_mono_ns\": %" PRIu64, (uint64_t)hb_run.inj_ns);
    else       fputs(", \"inject_mono_ns\": null", f);
    fputs(", \"trace\": ", f);
    ex_json_str(f, strcmp(end, "running") ? hbt_trace_path() : NULL);
    fputs(", \"beats_done\": [", f);
    for (int t = 0; t < o->threads; t++)
        fprintf(f, "%s%ld", t ? ", " : "", hb_run.done ? hb_run.done[t].v : 0L);
    fprintf(f, "], \"leaked_bytes\": %ld", (long)hb_run.leaked);

    fprintf(f, ", \"params\": {\"threads\": %d, \"beats\": %d, \"work\": %ld",
            o->threads, o->beats, o->work);
    if (hb_run.prog->size_help) fprintf(f, ", \"size\": %ld", o->size);
    fprintf(f, ", \"seed\": %" PRIu64 ", \"inject\": \"%s\", \"inject_thread\": %d"
               ", \"inject_beat\": %d",
            o->seed, hb_inject_names[o->inject], o->inject_thread, o->inject_beat);
    if (o->inject_time >= 0) fprintf(f, ", \"inject_time\": %.15g", o->inject_time);
    else                     fputs(", \"inject_time\": null", f);
    fprintf(f, ", \"shutdown_mode\": \"%s\", \"leak_bytes\": %ld, \"busy_beats\": %d"
               ", \"busy_factor\": %.17g, \"wait_ms\": %ld, \"truth\": ",
            hb_shutdown_names[o->shutdown_mode], o->leak_bytes, o->busy_beats,
            o->busy_factor, o->wait_ms);
    ex_json_str(f, o->truth);
    fputs("}}\n", f);

    int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, o->truth) != 0) {
        unlink(tmp);
        free(tmp);
        return -1;
    }
    free(tmp);
    return 0;
}

static void hb_usage(FILE *f)
{
    const struct hb_program *p = hb_run.prog;
    fprintf(f,
        "usage: %s [options]\n"
        "%s\n"
        "\n"
        "  --threads N          worker threads (default 4)\n"
        "  --beats N            beats per thread (default 1000)\n"
        "  --work N             %s (default %ld)\n",
        p->name, p->summary, p->work_help, p->work_default);
    if (p->size_help)
        fprintf(f, "  --size N             %s (default %ld)\n", p->size_help, p->size_default);
    fprintf(f,
        "  --seed S             seed of every random choice (default 1)\n"
        "  --inject KIND        none|leak|shutdown|busywait|condwait|earlyexit (default none)\n"
        "  --inject-thread T    thread to inject (default -1: chosen from the seed)\n"
        "  --inject-beat B      inject right after beat B of that thread\n"
        "                       (default -1: chosen from the seed in [beats/4, 3*beats/4])\n"
        "  --inject-time SEC    instead: inject after the thread's first beat at or\n"
        "                       after SEC seconds since program start\n"
        "  --shutdown-mode M    thread|exit|abort|segv|cancel|vanish (default thread)\n"
        "                       cancel: the thread cancels itself; vanish: it ends\n"
        "                       by the raw exit system call (pthread programs only)\n"
        "  --leak-bytes N       leak: bytes leaked per beat (default 1048576)\n"
        "  --busy-beats N       busywait: beats to slow down (default -1: to the end)\n"
        "  --busy-factor F      busywait: each beat takes F times as long (default 4)\n"
        "  --wait-ms M          condwait: milliseconds blocked (default 500)\n"
        "  --truth FILE         write the ground truth as JSON to FILE\n"
        "  --help               this text\n"
        "exit status: 0 normal run, 1 shutdown by exit(1), 2 bad argument,\n"
        "             3 runtime failure; abort/segv end by SIGABRT/SIGSEGV\n");
}

static long hb_parse_long(const char *opt, const char *s, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        char range[64];
        snprintf(range, sizeof range, "%ld..%ld", lo, hi);
        fprintf(stderr, "%s: bad value '%s' for %s: expected an integer in %s (try --help)\n",
                hb_run.prog->name, s, opt, range);
        exit(HB_EXIT_USAGE);
    }
    return v;
}

static double hb_parse_double(const char *opt, const char *s, double lo, double hi)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi) {
        fprintf(stderr, "%s: bad value '%s' for %s: expected a number in %g..%g (try --help)\n",
                hb_run.prog->name, s, opt, lo, hi);
        exit(HB_EXIT_USAGE);
    }
    return v;
}

static int hb_parse_name(const char *opt, const char *s,
                                const char *const *names, int count)
{
    for (int i = 0; i < count; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    fprintf(stderr, "%s: bad value '%s' for %s: expected one of", hb_run.prog->name, s, opt);
    for (int i = 0; i < count; i++)
        fprintf(stderr, "%s%s", i ? "|" : " ", names[i]);
    fputs(" (try --help)\n", stderr);
    exit(HB_EXIT_USAGE);
}

/* Parse the command line, resolve the injection plan from --seed, and write
 * the first version of the truth file. Exits with status 2 on a bad argument. */
struct hb_opts *hb_setup(int argc, char **argv, const struct hb_program *prog)
{
    hb_run.prog = prog;
    ex_prog = prog->name;
    struct hb_opts *o = &hb_run.o;
    *o = (struct hb_opts){
        .threads = 4, .beats = 1000, .work = prog->work_default,
        .size = prog->size_help ? prog->size_default : 0, .seed = 1,
        .inject = HB_INJ_NONE, .inject_thread = -1, .inject_beat = -1,
        .inject_time = -1.0, .shutdown_mode = HB_SD_THREAD,
        .leak_bytes = 1048576, .busy_beats = -1, .busy_factor = 4.0,
        .wait_ms = 500, .truth = NULL,
    };

    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            hb_usage(stdout);
            exit(HB_EXIT_OK);
        }
        if (strncmp(arg, "--", 2) != 0)
            ex_die(HB_EXIT_USAGE, "unexpected argument '%s'", arg);
        /* --name=value or --name value */
        char name[64];
        const char *val;
        const char *eq = strchr(arg, '=');
        if (eq) {
            size_t len = (size_t)(eq - arg);
            if (len >= sizeof name)
                ex_die(HB_EXIT_USAGE, "unknown option '%s'", arg);
            memcpy(name, arg, len);
            name[len] = '\0';
            val = eq + 1;
        } else {
            if (strlen(arg) >= sizeof name)
                ex_die(HB_EXIT_USAGE, "unknown option '%s'", arg);
            strcpy(name, arg);
            val = NULL;
        }
        enum { O_THREADS, O_BEATS, O_WORK, O_SIZE, O_SEED, O_INJECT, O_INJECT_THREAD,
               O_INJECT_BEAT, O_INJECT_TIME, O_SHUTDOWN_MODE, O_LEAK_BYTES, O_BUSY_BEATS,
               O_BUSY_FACTOR, O_WAIT_MS, O_TRUTH, O_COUNT };
        static const char *const known[O_COUNT] = {
            "--threads", "--beats", "--work", "--size", "--seed", "--inject",
            "--inject-thread", "--inject-beat", "--inject-time", "--shutdown-mode",
            "--leak-bytes", "--busy-beats", "--busy-factor", "--wait-ms", "--truth",
        };
        int k = -1;
        for (int j = 0; j < O_COUNT; j++)
            if (strcmp(name, known[j]) == 0)
                k = j;
        if (prog->work_alias && strcmp(name, prog->work_alias) == 0)
            k = O_WORK;
        if (k == O_SIZE && !prog->size_help)
            k = -1;                               /* a program without --size */
        if (k < 0)
            ex_die(HB_EXIT_USAGE, "unknown option '%s'", name);
        if (!val) {
            if (i + 1 >= argc)
                ex_die(HB_EXIT_USAGE, "option %s needs a value", name);
            val = argv[++i];
        }
        switch (k) {
        case O_THREADS: o->threads = (int)hb_parse_long(name, val, 1, 4096); break;
        case O_BEATS:   o->beats = (int)hb_parse_long(name, val, 1, INT_MAX / 2); break;
        case O_WORK:    o->work = hb_parse_long(name, val, 1, LONG_MAX / 4); break;
        case O_SIZE:    o->size = hb_parse_long(name, val, prog->size_min, 1L << 15); break;
        case O_SEED: {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(val, &end, 10);
            if (errno || end == val || *end || val[0] == '-')
                ex_die(HB_EXIT_USAGE, "bad value '%s' for --seed: expected an unsigned integer",
                       val);
            o->seed = (uint64_t)v;
            break;
        }
        case O_INJECT:        o->inject = hb_parse_name(name, val, hb_inject_names, 6); break;
        case O_INJECT_THREAD: o->inject_thread = (int)hb_parse_long(name, val, -1, 4095); break;
        case O_INJECT_BEAT:   o->inject_beat = (int)hb_parse_long(name, val, -1, INT_MAX / 2); break;
        case O_INJECT_TIME:   o->inject_time = hb_parse_double(name, val, 0.0, 1e9); break;
        case O_SHUTDOWN_MODE:
            o->shutdown_mode = hb_parse_name(name, val, hb_shutdown_names, HB_SD_COUNT);
            break;
        case O_LEAK_BYTES:    o->leak_bytes = hb_parse_long(name, val, 1, 1L << 40); break;
        case O_BUSY_BEATS:    o->busy_beats = (int)hb_parse_long(name, val, -1, INT_MAX / 2); break;
        case O_BUSY_FACTOR:   o->busy_factor = hb_parse_double(name, val, 1.0, 1e6); break;
        case O_WAIT_MS:       o->wait_ms = hb_parse_long(name, val, 0, 86400000L); break;
        case O_TRUTH:         o->truth = val; break;
        }
    }

    if (o->busy_beats == 0)
        ex_die(HB_EXIT_USAGE, "bad value '0' for --busy-beats: expected -1 or a positive count");
    if (o->inject_thread >= o->threads)
        ex_die(HB_EXIT_USAGE, "--inject-thread %d is not below --threads %d",
               o->inject_thread, o->threads);
    if (o->inject_beat >= o->beats)
        ex_die(HB_EXIT_USAGE, "--inject-beat %d is not below --beats %d", o->inject_beat, o->beats);
    if (o->inject_beat >= 0 && o->inject_time >= 0)
        ex_die(HB_EXIT_USAGE, "give --inject-beat or --inject-time, not both");
    if (prog->openmp && (o->shutdown_mode == HB_SD_CANCEL || o->shutdown_mode == HB_SD_VANISH))
        ex_die(HB_EXIT_USAGE, "--shutdown-mode %s needs a pthread program: a thread cannot "
               "leave an OpenMP parallel region that way", hb_shutdown_names[o->shutdown_mode]);

    /* The injection plan: first the thread, then the beat, from the seed. */
    hb_run.target_thread = -1;
    hb_run.target_beat = -1;
    if (o->inject != HB_INJ_NONE) {
        uint64_t rng = hb_rand_stream(1, 0);
        long t = hb_rand_range(&rng, 0, o->threads - 1);
        long b = hb_rand_range(&rng, o->beats / 4, (3L * o->beats) / 4);
        if (b > o->beats - 1)
            b = o->beats - 1;
        hb_run.target_thread = o->inject_thread >= 0 ? o->inject_thread : (int)t;
        if (o->inject_time < 0)
            hb_run.target_beat = o->inject_beat >= 0 ? o->inject_beat : (int)b;
    }

    hb_run.done = ex_xmalloc(sizeof *hb_run.done * (size_t)o->threads);
    memset(hb_run.done, 0, sizeof *hb_run.done * (size_t)o->threads);

    if (hb_write_truth("running") != 0)
        ex_die(HB_EXIT_USAGE, "cannot write truth file '%s': %s", o->truth, strerror(errno));
    return o;
}

void hb_thread_init(struct hb_thread *ts, int tid)
{
    memset(ts, 0, sizeof *ts);
    ts->tid = tid;
    ts->target = hb_run.o.inject != HB_INJ_NONE && tid == hb_run.target_thread;
}

/* Spin, reading a volatile, until this thread has used `ns` more CPU time.
 * The thread CPU clock is a system call (about 0.7 us here), so it is read
 * rarely: each chunk of reads is sized from the rate measured so far to cover
 * 7/8 of what is left, and the spin stays in user space. */
void hb_spin_cpu(uint64_t ns)
{
    uint64_t t0 = ex_clock_ns(CLOCK_THREAD_CPUTIME_ID), spun = 0, chunk = 4096;
    for (;;) {
        for (uint64_t i = 0; i < chunk && hb_spin_flag == 0; i++)
            ;
        spun += chunk;
        uint64_t el = ex_clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
        if (el >= ns || hb_spin_flag != 0)
            break;
        double left = (double)spun / (double)(el ? el : 1) * (double)(ns - el) * 0.875;
        chunk = left < 4096.0 ? 4096 : (uint64_t)left;
    }
}

/* Leak --leak-bytes: malloc, write one byte per page, never free. */
void hb_leak_once(void)
{
    size_t n = (size_t)hb_run.o.leak_bytes;
    volatile char *p = malloc(n);
    if (!p) {
        static int warned;
        if (!warned++)
            fprintf(stderr, "%s: leak: malloc(%zu) failed\n", hb_run.prog->name, n);
        return;
    }
    for (size_t i = 0; i < n; i += 4096)
        p[i] = (char)(i >> 12 | 1);
    p[n - 1] = 1;
    hb_leak_sink = (void *)p;
    __atomic_add_fetch(&hb_run.leaked, (long)n, __ATOMIC_RELAXED);
}

/* Block in pthread_cond_timedwait for `ms` milliseconds. Nothing signals the
 * condition, so the wait ends when it times out (spurious wake-ups wait again). */
static void hb_cond_wait_ms(long ms)
{
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_condattr_t attr;
    pthread_cond_t cv;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&cv, &attr);
    pthread_condattr_destroy(&attr);

    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += ms / 1000;
    dl.tv_nsec += (ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) { dl.tv_sec++; dl.tv_nsec -= 1000000000L; }

    pthread_mutex_lock(&mu);
    while (pthread_cond_timedwait(&cv, &mu, &dl) != ETIMEDOUT)
        ;
    pthread_mutex_unlock(&mu);
    pthread_cond_destroy(&cv);
    pthread_mutex_destroy(&mu);
}

static void hb_report_injection(const char *how)
{
    fprintf(stderr, "%s: injected %s in thread %d after beat %d at %.6f s\n",
            hb_run.prog->name, how, hb_run.target_thread, hb_run.inj_beat,
            (double)(hb_run.inj_ns - ex_start_ns) * 1e-9);
}

/* Kill the process the way --shutdown-mode says, after writing the truth. */
__attribute__((noreturn)) static void hb_fatal_shutdown(int mode)
{
    const char *name = hb_shutdown_names[mode];
    if (hb_write_truth(name) != 0)
        fprintf(stderr, "%s: cannot write truth file '%s'\n", hb_run.prog->name, hb_run.o.truth);
    char how[32];
    snprintf(how, sizeof how, "shutdown/%s", name);
    hb_report_injection(how);
    fflush(NULL);
    if (mode == HB_SD_EXIT)
        exit(HB_EXIT_INJECTED);
    if (mode == HB_SD_SEGV) {
        static volatile uintptr_t bad_address = 0;   /* opaque to the compiler */
        volatile int *p = (volatile int *)bad_address;
        *p = 1;                                       /* a real invalid write */
    }
    abort();
}

/* shutdown cancel: the thread cancels itself. Deferred cancellation acts at
 * pthread_testcancel: the thread unwinds (cleanup handlers run) and ends as
 * cancelled, as if another thread had called pthread_cancel on it. */
__attribute__((noreturn)) static void hb_cancel_self(void)
{
    pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
    pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, NULL);
    pthread_cancel(pthread_self());
    for (;;)
        pthread_testcancel();
}

/* shutdown vanish: the OS thread just disappears, by the raw exit system
 * call: no pthread_exit, no unwinding, no cleanup handler, no thread-end
 * record; pthread_join still returns, because the kernel clears the
 * thread id that it waits on. */
__attribute__((noreturn)) static void hb_vanish(void)
{
    for (;;)
        syscall(SYS_exit, 0);
}

/* hb_after_beat of the thread to inject, until the injection fired. */
int hb_inject_point(struct hb_thread *ts, int b)
{
    uint64_t now;
    if (hb_run.o.inject_time >= 0) {
        now = ex_now_ns();
        if ((double)(now - ex_start_ns) < hb_run.o.inject_time * 1e9)
            return HB_CONTINUE;
    } else {
        if (b != hb_run.target_beat)
            return HB_CONTINUE;
        now = ex_now_ns();
    }
    ts->fired = 1;
    hb_run.inj_ns = now;
    hb_run.inj_beat = b;
    hb_run.injected = 1;

    switch (hb_run.o.inject) {
    case HB_INJ_LEAK:
        ts->leaking = 1;
        return HB_CONTINUE;
    case HB_INJ_BUSYWAIT:
        ts->busy_left = hb_run.o.busy_beats;
        return HB_CONTINUE;
    case HB_INJ_CONDWAIT:
        hb_cond_wait_ms(hb_run.o.wait_ms);
        return HB_CONTINUE;
    case HB_INJ_EARLYEXIT:
        return HB_STOP_RETURN;
    case HB_INJ_SHUTDOWN:
        switch (hb_run.o.shutdown_mode) {
        case HB_SD_THREAD:
            return HB_STOP_EXIT;
        case HB_SD_CANCEL:
            hb_cancel_self();
        case HB_SD_VANISH:
            hb_vanish();
        default:
            hb_fatal_shutdown(hb_run.o.shutdown_mode);
        }
    }
    return HB_CONTINUE;
}

/* Call at the end of a normal run, after all threads ended: rewrites the truth
 * file with what happened and reports the injection on stderr. */
void hb_finish_run(void)
{
    if (hb_run.injected) {
        const char *kind = hb_inject_names[hb_run.o.inject];
        char how[32];
        if (hb_run.o.inject == HB_INJ_SHUTDOWN)
            snprintf(how, sizeof how, "%s/%s", kind, hb_shutdown_names[hb_run.o.shutdown_mode]);
        else
            snprintf(how, sizeof how, "%s", kind);
        hb_report_injection(how);
    } else if (hb_run.o.inject != HB_INJ_NONE) {
        fprintf(stderr, "%s: %s was not injected: thread %d never reached the injection point\n",
                hb_run.prog->name, hb_inject_names[hb_run.o.inject], hb_run.target_thread);
    }
    if (hb_write_truth("normal") != 0)
        fprintf(stderr, "%s: cannot write truth file '%s'\n", hb_run.prog->name, hb_run.o.truth);
}
