/*
 * core.c -- state, configuration, start and end of profiling, segment ends,
 * the computation counter, warnings.
 */
#include "internal.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

__thread struct hbp_tls hbp_tls __attribute__((tls_model("initial-exec")));
struct hbp_global hbp_g = { .perf_fd = -1, .w = { .fd = -1 } };

_Static_assert(sizeof(struct hbp_file_header) == HBP_HEADER_SIZE, "header size");
_Static_assert(sizeof(struct hbp_metric_entry) == HBP_METRIC_ENTRY_SIZE, "metric entry");
_Static_assert(sizeof(struct hbp_rank_entry) == HBP_RANK_ENTRY_SIZE, "rank entry");
_Static_assert(sizeof(struct hbp_bin) == HBP_BIN_ENTRY_SIZE, "bin entry");
_Static_assert(sizeof(struct hbp_segment_record) == HBP_RANK_RECORD_SIZE, "segment record");
_Static_assert(sizeof(struct hbp_bin_record) == HBP_RANK_RECORD_SIZE, "bin record");
_Static_assert(sizeof(struct hbp_inject_record) == HBP_RANK_RECORD_SIZE, "inject record");
_Static_assert(sizeof(struct hbp_slot) == HBP_RANK_RECORD_SIZE, "slot");
_Static_assert(offsetof(struct hbp_slot, kindflags) == offsetof(struct hbp_segment_record, kind),
               "kind word");
_Static_assert(offsetof(struct hbp_segment_record, kind) == 44 &&
               offsetof(struct hbp_bin_record, kind) == 44 &&
               offsetof(struct hbp_inject_record, kind) == 44, "kind at byte 44");
_Static_assert(sizeof(struct hbp_run_record) == HBP_RUN_RECORD_SIZE, "run record");
_Static_assert(HBP_METRIC_COUNT <= HBP_MAX_METRICS, "metric count");
_Static_assert(sizeof(((struct hbp_segment_record *)0)->bin) == HBP_MAX_METRICS, "bin[]");
_Static_assert(sizeof(((struct hbp_run_record *)0)->bin) == 2 * HBP_MAX_METRICS, "bin[]");
_Static_assert(HBP_EXTENT_SIZE % HBP_RANK_RECORD_SIZE == 0 && HBP_EXTENT_SIZE % 4096 == 0,
               "extent size");

/* ------------------------------------------------------------------ */
/* warnings and failure                                                 */

void hbp_warn(const char *fmt, ...)
{
    if (hbp_g.quiet || __atomic_exchange_n(&hbp_g.warned, 1, __ATOMIC_RELAXED))
        return;
    char msg[512];
    int n = snprintf(msg, sizeof msg, "hbprof: rank %d: ", hbp_g.rank);
    if (n < 0 || (size_t)n >= sizeof msg)
        n = 0;
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(msg + n, sizeof msg - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof msg - 2)
        len = sizeof msg - 2;
    msg[len++] = '\n';
    /* the raw system call: not counted, not delayed */
    (void)!syscall(SYS_write, 2, msg, len);
}

void hbp_fail(const char *what, int err)
{
    if (err)
        hbp_warn("%s: %s; profiling is off for this rank", what, strerror(err));
    else
        hbp_warn("%s; profiling is off for this rank", what);
    int on = HBP_S_ON;
    __atomic_compare_exchange_n(&hbp_g.state, &on, HBP_S_OFF, 0, __ATOMIC_RELAXED,
                                __ATOMIC_RELAXED);
}

const char *hbp_getenv(enum hbprof_env e)
{
    return getenv(hbprof_env_name(e));
}

int hbp_env_flag(enum hbprof_env e)
{
    const char *v = hbp_getenv(e);
    return v && *v && strcmp(v, "0") != 0;
}

/* ------------------------------------------------------------------ */
/* raw file I/O (never through our own wrappers)                        */

ssize_t hbp_pwrite_all(int fd, const void *buf, size_t n, uint64_t off)
{
    const char *p = buf;
    size_t done = 0;
    while (done < n) {
        long r = syscall(SYS_pwrite64, fd, p + done, n - done, (off_t)(off + done));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        done += (size_t)r;
    }
    return (ssize_t)done;
}

ssize_t hbp_pread_all(int fd, void *buf, size_t n, uint64_t off)
{
    char *p = buf;
    size_t done = 0;
    while (done < n) {
        long r = syscall(SYS_pread64, fd, p + done, n - done, (off_t)(off + done));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        done += (size_t)r;
    }
    return (ssize_t)done;
}

/* ------------------------------------------------------------------ */
/* the computation counter                                              */

static int perf_open_instructions(void)
{
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_HARDWARE;
    a.config = PERF_COUNT_HW_INSTRUCTIONS;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    a.pinned = 1;            /* never multiplexed: a read fails instead */
    int fd = (int)syscall(SYS_perf_event_open, &a, 0 /* this thread */, -1, -1,
                          PERF_FLAG_FD_CLOEXEC);
    if (fd < 0)
        return -1;
    /* The counter must count: some VMs give an event that stays at 0. */
    uint64_t v0 = 0, v1 = 0;
    volatile uint64_t x = 0;
    if (syscall(SYS_read, fd, &v0, sizeof v0) != (long)sizeof v0)
        goto bad;
    for (int i = 0; i < 10000; i++)
        x += (uint64_t)i;
    if (syscall(SYS_read, fd, &v1, sizeof v1) != (long)sizeof v1 || v1 <= v0)
        goto bad;
    return fd;
bad:
    syscall(SYS_close, fd);
    return -1;
}

uint64_t hbp_comp_read(void)
{
    if (hbp_g.comp_source == HBP_COMP_INSTRUCTIONS) {
        uint64_t v;
        if (syscall(SYS_read, hbp_g.perf_fd, &v, sizeof v) == (long)sizeof v)
            return v;
        return hbp_g.comp_mark;   /* adds 0; a read failure is not worth a stop */
    }
    struct timespec ts;
#ifdef HBP_EXPERIMENT_NO_CPU_READ
    /* for overhead experiments only (bench_mpi_app_overhead.py --arms
     * no-cpu-reads): the monotonic clock (vDSO, no system call) stands in for
     * the thread's CPU time, so the profile's computation is wall time: wrong */
    clock_gettime(CLOCK_MONOTONIC, &ts);
#else
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
#endif
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------ */
/* configuration                                                        */

static const struct { unsigned code; const char *name; } colls[] = {
#define HBP_COLL_ROW(code, name) { code, name },
    HBP_COLL_LIST(HBP_COLL_ROW)
#undef HBP_COLL_ROW
};

size_t hbp_list_word(const char **s)
{
    const char *p = *s;
    while (*p == ',' || isspace((unsigned char)*p))
        p++;
    const char *e = p;
    while (*e && *e != ',' && !isspace((unsigned char)*e))
        e++;
    *s = p;
    return (size_t)(e - p);
}

int hbp_mpi_name_is(const char *w, size_t len, const char *name)
{
    if (len > 4 && strncasecmp(w, "MPI_", 4) == 0) {
        w += 4;
        len -= 4;
    }
    return strlen(name) == len && strncasecmp(name, w, len) == 0;
}

static uint32_t parse_boundaries(void)
{
    const char *s = hbp_getenv(HBPROF_BOUNDARIES);
    if (!s || !*s)
        return HBP_BOUNDARY_DEFAULT;
    uint32_t mask = 0;
    char bad[128] = "";
    size_t len;
    for (; (len = hbp_list_word(&s)) > 0; s += len) {
        int found = 0;
        for (size_t i = 0; i < sizeof colls / sizeof colls[0]; i++) {
            if (hbp_mpi_name_is(s, len, colls[i].name)) {
                mask |= 1u << colls[i].code;
                found = 1;
            }
        }
        if (!found && !bad[0])
            snprintf(bad, sizeof bad, "%.*s", (int)len, s);
    }
    if (bad[0])
        hbp_warn("%s: unknown collective '%s' skipped", hbprof_env_name(HBPROF_BOUNDARIES), bad);
    return mask;
}

static void host_name(char *out, size_t size)
{
    char h[256];
    if (gethostname(h, sizeof h) != 0)
        strcpy(h, "unknown");
    h[sizeof h - 1] = '\0';
    size_t j = 0;
    for (size_t i = 0; h[i] && j + 1 < size; i++) {
        unsigned char c = (unsigned char)h[i];
        out[j++] = (isalnum(c) || c == '.' || c == '_' || c == '-') ? (char)c : '_';
    }
    out[j] = '\0';
}

static void after_fork_child(void)
{
    /* a forked child must not write into the parent's mapping */
    __atomic_store_n(&hbp_g.state, HBP_S_FINAL, __ATOMIC_RELAXED);
    hbp_tls.main = 0;
}

void hbp_fill_metric_table(struct hbp_metric_entry *t, uint32_t comp_source)
{
    for (unsigned m = 0; m < HBP_METRIC_COUNT; m++) {
        memset(&t[m], 0, sizeof t[m]);
        strncpy(t[m].name, hbp_metric_name(m), sizeof t[m].name - 1);
        t[m].unit = hbp_metric_unit(m);
    }
    if (comp_source == HBP_COMP_CPUTIME)
        t[HBP_M_COMPUTATION].unit = HBP_UNIT_NS;
}

/* Everything of the header but magic, flags and the section layout. */
void hbp_fill_header(struct hbp_file_header *h, int run_file)
{
    h->version = HBP_VERSION;
    h->endian = HBP_ENDIAN_MARK;
    h->header_size = HBP_HEADER_SIZE;
    h->rank = run_file ? -1 : hbp_g.rank;
    h->nranks = (uint32_t)hbp_g.nranks;
    h->comp_source = hbp_g.comp_source;
    h->metric_count = HBP_METRIC_COUNT;
    h->max_bins = run_file ? HBP_RUN_BINS : HBP_RANK_BINS;
    h->index_size = run_file ? 2 : 1;
    h->record_size = run_file ? HBP_RUN_RECORD_SIZE : HBP_RANK_RECORD_SIZE;
    h->boundary_mask = hbp_g.boundary_mask;
    h->clock_id = HBP_CLOCK_MONOTONIC;
    h->pid = (uint32_t)hbp_g.pid;
    h->start_mono_ns = hbp_g.t0;
    h->start_real_ns = hbp_g.t0_real;
    h->metric_entry_size = HBP_METRIC_ENTRY_SIZE;
    h->inject_families = hbp_g.inj.families;
    if (hbp_g.inj.families) {
        h->inject_mean_ns = (uint64_t)(hbp_g.inj.mean_ns + 0.5);
        h->inject_sd_ns = (uint64_t)(hbp_g.inj.sd_ns + 0.5);
        h->inject_prob = hbp_g.inj.prob;
        h->inject_seed = hbp_g.inj.seed;
    }
    memcpy(h->host, hbp_g.host, sizeof h->host);
}

/* ------------------------------------------------------------------ */
/* start and end                                                        */

void hbp_start(void)
{
    hbp_g.saw_init = 1;
    if (hbp_state() != HBP_S_UNINIT || hbp_g.participating)
        return;
    if (hbp_env_flag(HBPROF_DISABLE))
        return;
    struct hbp_tls *t = &hbp_tls;
    t->depth++;
    hbp_g.quiet = hbp_env_flag(HBPROF_QUIET);
    hbp_g.keep = hbp_env_flag(HBPROF_KEEP_RANK_FILES);
    hbp_g.pid = getpid();
    const char *pre = getenv("LD_PRELOAD");
    hbp_g.preload = pre && strstr(pre, "libhbprof") != NULL;
    if (PMPI_Comm_rank(MPI_COMM_WORLD, &hbp_g.rank) != MPI_SUCCESS ||
        PMPI_Comm_size(MPI_COMM_WORLD, &hbp_g.nranks) != MPI_SUCCESS ||
        PMPI_Comm_dup(MPI_COMM_WORLD, &hbp_g.comm) != MPI_SUCCESS) {
        hbp_warn("cannot set up a communicator; profiling is off");
        t->depth--;
        return;
    }
    PMPI_Comm_set_errhandler(hbp_g.comm, MPI_ERRORS_RETURN);
    hbp_g.participating = 1;
    t->main = 1;

    hbp_g.boundary_mask = parse_boundaries();

    /* computation source: the same on every rank */
    const char *want = hbp_getenv(HBPROF_COMPUTATION);
    int force_cpu = want && strcasecmp(want, "cputime") == 0;
    int force_ins = want && strcasecmp(want, "instructions") == 0;
    if (want && *want && !force_cpu && !force_ins)
        hbp_warn("%s=%s: expected instructions or cputime; using the default",
                 hbprof_env_name(HBPROF_COMPUTATION), want);
    int local_ok = 0;
    if (!force_cpu) {
        hbp_g.perf_fd = perf_open_instructions();
        local_ok = hbp_g.perf_fd >= 0;
    }
    int all_ok = 0;
    if (PMPI_Allreduce(&local_ok, &all_ok, 1, MPI_INT, MPI_MIN, hbp_g.comm) != MPI_SUCCESS)
        all_ok = 0;
    if (all_ok) {
        hbp_g.comp_source = HBP_COMP_INSTRUCTIONS;
    } else {
        if (hbp_g.perf_fd >= 0)
            syscall(SYS_close, hbp_g.perf_fd);
        hbp_g.perf_fd = -1;
        hbp_g.comp_source = HBP_COMP_CPUTIME;
        if (force_ins)
            hbp_warn("%s=instructions: no user-space instruction counter on %s; "
                     "counting thread CPU time instead", hbprof_env_name(HBPROF_COMPUTATION),
                     local_ok ? "another rank" : "this rank");
    }

    hbp_inject_config();
    host_name(hbp_g.host, sizeof hbp_g.host);
    const char *dir = hbp_getenv(HBPROF_DIR);
    snprintf(hbp_g.dir, sizeof hbp_g.dir, "%s", dir && *dir ? dir : ".");
    for (unsigned m = 0; m < HBP_METRIC_COUNT; m++)
        hbp_bins_reset(&hbp_g.bins[m]);
    pthread_atfork(NULL, NULL, after_fork_child);

    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    hbp_g.t0 = hbp_now_ns();
    hbp_g.t0_real = (int64_t)rt.tv_sec * 1000000000 + rt.tv_nsec;
    hbp_g.seg_start = hbp_g.t0;
    hbp_g.segment = 0;
    memset(hbp_g.acc, 0, sizeof hbp_g.acc);
    if (hbp_file_open() == 0) {
        hbp_end_hooks_install();
        hbp_g.comp_mark = hbp_comp_read();
        hbp_g.cpu_val = hbp_g.comp_mark;
        hbp_g.cpu_wall = hbp_now_ns();
        /* what a sampled call's own measurement adds to it (two counter reads and the
         * bookkeeping between them): the least of a few empty measurements */
        double bias = -1;
        for (int k = 0; k < 16; k++) {
            uint64_t a = hbp_comp_now(), b = hbp_comp_now();
            if (bias < 0 || (double)(b - a) < bias)
                bias = b > a ? (double)(b - a) : 0.0;
        }
        hbp_g.sample_bias = bias > 0 ? bias : 0.0;
        __atomic_store_n(&hbp_g.state, HBP_S_ON, __ATOMIC_RELEASE);
    } else {
        __atomic_store_n(&hbp_g.state, HBP_S_OFF, __ATOMIC_RELEASE);
    }
    t->depth--;
}

/* A sampled call (internal.h, hbp_poll_enter): the full entry, and the
 * counter at its start, to measure what the call cost. */
int hbp_poll_sample_enter(void)
{
    hbp_tls.depth = 1;
    hbp_comp_pause();
    hbp_g.poll_c0 = hbp_g.comp_mark;
    return 3;
}

void hbp_poll_sample_leave(unsigned i)
{
    uint64_t c = hbp_comp_now();
    double d = c > hbp_g.poll_c0 ? (double)(c - hbp_g.poll_c0) - hbp_g.sample_bias : 0.0;
    if (d < 0)
        d = 0;
    /* a moving mean over about the last 16 samples (the first sets it) */
    hbp_call_mean[i] = hbp_call_n[i] <= 1 ? d : hbp_call_mean[i] + (d - hbp_call_mean[i]) / 16.0;
    if (c > hbp_g.comp_mark)
        hbp_g.comp_mark = c;
    hbp_tls.depth = 0;
}

/*
 * End of the current segment: called by the wrapper of a boundary
 * collective after the real call returned (the call's bytes are already
 * added), and at MPI_Finalize. Logs bin changes, then the segment record.
 */
void hbp_segment_end(unsigned coll)
{
    uint64_t now = hbp_now_ns();
    struct hbp_segment_record r;
    memset(&r, 0, sizeof r);
    r.duration_ns = now - hbp_g.seg_start;
    r.end_ns = now - hbp_g.t0;
    r.segment = hbp_g.segment;
    for (unsigned m = 0; m < HBP_METRIC_COUNT; m++) {
        int slot = hbp_bins_add(m, hbp_g.acc[m]);
        if (slot < 0)
            return;   /* hbp_fail was called */
        r.bin[m] = (uint8_t)slot;
    }
    if (hbp_g.inj.seg_calls) {
        struct hbp_inject_record ir;
        memset(&ir, 0, sizeof ir);
        ir.injected_ns = hbp_g.inj.seg_ns;
        ir.segment = hbp_g.segment;
        ir.delayed_calls = hbp_g.inj.seg_calls;
        ir.kind = HBP_REC_INJECT;
        if (hbp_file_put(&ir) != 0)
            return;
    }
    r.kind = HBP_REC_SEGMENT;
    r.flags = (uint16_t)coll;
    if (hbp_file_put(&r) != 0)
        return;
    memset(hbp_g.acc, 0, sizeof hbp_g.acc);
    hbp_g.inj.seg_ns = 0;
    hbp_g.inj.seg_calls = 0;
    hbp_g.seg_start = now;
    hbp_g.segment++;
}

void hbp_finalize(void)
{
    hbp_g.saw_finalize = 1;
    if (!hbp_g.participating) {
        __atomic_store_n(&hbp_g.state, HBP_S_FINAL, __ATOMIC_RELAXED);
        return;
    }
    struct hbp_tls *t = &hbp_tls;
    t->depth++;
    if (hbp_state() == HBP_S_ON) {
        hbp_comp_pause();
        hbp_segment_end(HBP_COLL_FINALIZE);
        hbp_g.run_ns = hbp_g.seg_start - hbp_g.t0;   /* = end of the last segment */
        hbp_end_set(HBP_END_FINALIZED, 0);
        if (hbp_state() == HBP_S_ON && hbp_file_finish() != 0)
            hbp_fail("cannot finish the rank file", errno);
    }
    int ok = hbp_state() == HBP_S_ON;
    __atomic_store_n(&hbp_g.state, HBP_S_FINAL, __ATOMIC_RELAXED);
    hbp_run_finalize(ok);
    if (hbp_g.perf_fd >= 0)
        syscall(SYS_close, hbp_g.perf_fd);
    hbp_g.perf_fd = -1;
    hbp_g.participating = 0;
    t->depth--;
}
