/*
 * beats.c -- heartbeats of MPI ranks, recorded by libhbtrace (issue 15).
 *
 * When libhbtrace.so is loaded in the same process (hbtool record --mpi
 * preloads both), MPI_Init* finds its entry hbtrace_mpi_beat with
 * dlsym(RTLD_DEFAULT) once. Then, by default, every completed blocking
 * collective (the lines of wrap_mpi.list marked beat=collective) is a beat of
 * the calling thread, event HBT_EV_COLLECTIVE, with the time spent in the
 * call as its wait; or, when HBTRACE_MPI_BEATS names functions, every call of
 * those is a beat, event HBT_EV_CALL, and nothing else beats. libhbtrace
 * decides whether mpi beats are wanted (HBTRACE_BEATS), writes the records
 * and names the construct after the function.
 *
 * Without libhbtrace nothing changes: hbp_beat_on stays all zero, every
 * wrapper pays one byte load. Beats do not depend on profiling: they are
 * recorded with HBPROF_DISABLE too, and from every thread. A call made
 * inside another intercepted call (an MPI library calling MPI_ names, the
 * profiler's own work) does not beat.
 */
#include "internal.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* the tracer's environment names, from its one list */
enum {
#define HBT_ENV(name, descr) HBT_ENV_##name,
#include "../../include/hbtrace_env.def"
#undef HBT_ENV
};
static const char *const tracer_env[] = {
#define HBT_ENV(name, descr) #name,
#include "../../include/hbtrace_env.def"
#undef HBT_ENV
};

/* libhbtrace's entry, its events (enum hbt_mpi_event) and their values */
#include "../../src/autobeat.h"
#define EV_COLLECTIVE HBT_EV_COLLECTIVE
#define EV_CALL       HBT_EV_CALL
_Static_assert(HBT_EV_COLLECTIVE > 0 && HBT_EV_CALL > 0 && HBT_EV_CALL < 256, "events fit hbp_beat_on");

typedef __typeof__(&hbtrace_mpi_beat) beat_fn;
static beat_fn beat;

static int tracer_flag(unsigned e)
{
    const char *v = getenv(tracer_env[e]);
    return v && *v && strcmp(v, "0") != 0;
}

/* one line on stderr, from rank 0 only (every rank reads the same list) */
static void beats_warn(const char *what)
{
    int rank = -1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank != 0 || tracer_flag(HBT_ENV_HBTRACE_QUIET) || hbp_env_flag(HBPROF_QUIET))
        return;
    char msg[512];
    int n = snprintf(msg, sizeof msg, "hbprof: %s: %s\n", tracer_env[HBT_ENV_HBTRACE_MPI_BEATS], what);
    if (n > 0)
        (void)!syscall(SYS_write, 2, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
}

/* the wrapper number of the function named by s[0..len), or -1 */
static int wrapped(const char *s, size_t len)
{
    for (unsigned i = 0; i < hbp_wrap_count; i++)
        if (hbp_mpi_name_is(s, len, hbp_wrap_name[i] + 4))
            return (int)i;
    return -1;
}

/* HBTRACE_MPI_BEATS: a comma list; unknown names are skipped with one warning */
static void beats_named(const char *spec)
{
    char bad[256] = "";
    size_t used = 0, len;
    unsigned skipped = 0;
    for (; (len = hbp_list_word(&spec)) > 0; spec += len) {
        int i = wrapped(spec, len);
        if (i >= 0) {
            hbp_beat_on[i] = EV_CALL;
            continue;
        }
        int w = snprintf(bad + used, sizeof bad - used, "%s'%.*s'", skipped ? ", " : "", (int)len, spec);
        if (w > 0 && used + (size_t)w < sizeof bad)
            used += (size_t)w;
        skipped++;
    }
    if (skipped) {
        char msg[400];
        snprintf(msg, sizeof msg, "%s not %s libhbprof intercepts; ignored%s", bad,
                 skipped > 1 ? "functions" : "a function",
                 memchr(hbp_beat_on, EV_CALL, hbp_wrap_count) ? "" : " (no MPI beats at all)");
        beats_warn(msg);
    }
}

void hbp_beats_init(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    beat = (beat_fn)dlsym(RTLD_DEFAULT, "hbtrace_mpi_beat");
    if (!beat)
        return;   /* libhbtrace not loaded: no beats, no warning */
    const char *spec = getenv(tracer_env[HBT_ENV_HBTRACE_MPI_BEATS]);
    if (spec && *spec) {
        beats_named(spec);
        return;
    }
    for (unsigned i = 0; i < hbp_wrap_count; i++)
        hbp_beat_on[i] = hbp_wrap_collective[i] ? EV_COLLECTIVE : 0;
}

/* the calling thread's outermost intercepted call (the main thread's depth
 * is counted only while profiling; `beating` covers every thread) */
int hbp_beat_enter(void)
{
    struct hbp_tls *t = &hbp_tls;
    if (t->beating || t->depth)
        return 0;
    t->beating = 1;
    return 1;
}

void hbp_beat_done(unsigned i, const void *fn, uint64_t t0)
{
    uint64_t wait = hbp_now_ns() - t0;
    /* a wait only where the call was a collective (its time is time waiting
     * for the other ranks); a named point-to-point call beats without one */
    beat((int)hbp_beat_on[i], fn, hbp_wrap_name[i], hbp_wrap_collective[i] ? (wait ? wait : 1) : 0);
    hbp_tls.beating = 0;
}
