/*
 * runfile.c -- the collective finalize step (inside MPI_Finalize, before
 * PMPI_Finalize, on the profiler's duplicate of MPI_COMM_WORLD).
 *
 *   1. rank 0 allocates what it needs and creates <run file>.tmp; it
 *      broadcasts whether it can go on (if not, every rank keeps its file)
 *   2. gather one struct hbp_rank_entry per rank to rank 0
 *   3. per metric: gather every rank's final bins (256 x value, count) to
 *      rank 0, which merges them into at most 512 program-wide bins, writes
 *      them, and scatters back each rank's map final slot -> program-wide bin
 *   4. every rank replays its own file backward (the 256-entry "final slot"
 *      map per metric, see docs/profile-format.md) and turns its segment
 *      records into run records; rank 0 writes its own, then receives every
 *      other rank's in blocks (rank by rank, an empty message ends a rank)
 *      and writes them where they belong (pwrite: records arrive last to
 *      first). Records travel as MPI messages, so the ranks need not share
 *      a file system with rank 0; HBPROF_DIR is only where each rank writes.
 *   5. with the injector: the same for the truth rows, forward, into the CSV
 *   6. rank 0 writes the header and tables, renames the files into place
 *      and broadcasts success; each rank then removes its own file (unless
 *      HBPROF_KEEP_RANK_FILES=1, or it failed, or the run file was not made).
 *
 * Memory: rank 0 holds O(nranks x 256) per metric, never the records; the
 * others hold one block.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define TAG_RECORDS 0x4850
#define TAG_TRUTH   0x4851
#define REC_BLOCK   1024u    /* run records per message (64 KiB) */
#define TRUTH_BLOCK 4096u    /* truth rows per message (64 KiB) */
#define CSV_BUF     65536u

struct truth_row {
    uint32_t segment;
    uint32_t calls;
    uint64_t ns;
};

/* rank 0: where records and truth rows go */
struct sink {
    int      fd;                 /* run file, -1 once failed */
    int      csv_fd;             /* truth CSV, -1 once failed */
    struct hbp_rank_entry *ranks;
    uint64_t *received;
    uint64_t data_off;
    uint64_t csv_off;
    char    *csv_buf;
    size_t   csv_len;
};

static uint64_t align_up(uint64_t x, uint64_t a)
{
    return (x + a - 1) / a * a;
}

static void sink_fail(struct sink *s, const char *what, int err)
{
    if (s->fd >= 0)
        hbp_warn("%s: %s; the run file is not written", what, strerror(err));
    if (s->fd >= 0)
        syscall(SYS_close, s->fd);
    s->fd = -1;
}

static void sink_records(struct sink *s, int r, const struct hbp_run_record *rec, size_t k)
{
    if (s->fd < 0)
        return;
    const struct hbp_rank_entry *re = &s->ranks[r];
    size_t i = 0;
    while (i < k) {
        if (rec[i].rank != r || rec[i].segment >= re->segment_count) {
            i++;
            continue;
        }
        size_t j = i + 1;
        while (j < k && rec[j].rank == r && rec[j].segment == rec[j - 1].segment + 1 &&
               rec[j].segment < re->segment_count)
            j++;
        uint64_t off = s->data_off + (re->first_record + rec[i].segment) * HBP_RUN_RECORD_SIZE;
        if (hbp_pwrite_all(s->fd, &rec[i], (j - i) * sizeof *rec, off) < 0) {
            sink_fail(s, "cannot write the run file", errno);
            return;
        }
        s->received[r] += j - i;
        i = j;
    }
}

static void csv_flush(struct sink *s)
{
    if (s->csv_fd >= 0 && s->csv_len) {
        if (hbp_pwrite_all(s->csv_fd, s->csv_buf, s->csv_len, s->csv_off) < 0) {
            hbp_warn("cannot write the injection truth CSV: %s", strerror(errno));
            syscall(SYS_close, s->csv_fd);
            s->csv_fd = -1;
        }
        s->csv_off += s->csv_len;
    }
    s->csv_len = 0;
}

static void sink_truth(struct sink *s, int r, const struct truth_row *t, size_t k)
{
    for (size_t i = 0; i < k && s->csv_fd >= 0; i++) {
        if (s->csv_len + 96 > CSV_BUF)
            csv_flush(s);
        int n = snprintf(s->csv_buf + s->csv_len, CSV_BUF - s->csv_len,
                         "%d,%" PRIu32 ",%" PRIu64 ",%" PRIu32 "\n", r, t[i].segment, t[i].ns,
                         t[i].calls);
        if (n > 0)
            s->csv_len += (size_t)n;
    }
}

/* rank 0: a block of rank r's stream of `tag` (records or truth rows) */
static void sink_put(struct sink *s, int r, int tag, const void *p, size_t bytes)
{
    if (tag == TAG_RECORDS)
        sink_records(s, r, p, bytes / sizeof(struct hbp_run_record));
    else
        sink_truth(s, r, p, bytes / sizeof(struct truth_row));
}

/* a block of this rank's stream to rank 0 (which sinks its own: s != NULL) */
static void stream_put(struct sink *s, int tag, const void *p, size_t bytes)
{
    if (s)
        sink_put(s, 0, tag, p, bytes);
    else
        PMPI_Send(p, (int)bytes, MPI_BYTE, 0, tag, hbp_g.comm);
}

/* ---- the backward pass over this rank's file ---- */

struct back {
    uint8_t  fin[HBP_METRIC_COUNT][HBP_RANK_BINS];   /* slot -> final slot */
    uint16_t gmap[HBP_METRIC_COUNT][HBP_RANK_BINS];  /* final slot -> run bin */
    struct hbp_run_record *blk;
    unsigned pos;                                    /* filled from REC_BLOCK down */
    struct sink *sink;                               /* rank 0, else NULL */
};

static void back_flush(struct back *b)
{
    size_t k = REC_BLOCK - b->pos;
    if (k > 0)
        stream_put(b->sink, TAG_RECORDS, b->blk + b->pos, k * sizeof *b->blk);
    b->pos = REC_BLOCK;
}

static int back_visit(const struct hbp_slot *s, uint16_t kind, void *arg)
{
    struct back *b = arg;
    if (kind == HBP_REC_SEGMENT) {
        struct hbp_segment_record sr;
        memcpy(&sr, s, sizeof sr);
        struct hbp_run_record *o = &b->blk[--b->pos];
        memset(o, 0, sizeof *o);
        o->duration_ns = sr.duration_ns;
        o->segment = sr.segment;
        o->rank = hbp_g.rank;
        for (unsigned m = 0; m < HBP_METRIC_COUNT; m++)
            o->bin[m] = b->gmap[m][b->fin[m][sr.bin[m]]];
        o->boundary = sr.flags;
        o->flags = HBP_RUNREC_VALID;
        if (b->pos == 0)
            back_flush(b);
    } else if (kind == HBP_REC_BIN_MERGE) {
        struct hbp_bin_record br;
        memcpy(&br, s, sizeof br);
        if (br.metric < HBP_METRIC_COUNT && br.slot < HBP_RANK_BINS &&
            br.from_slot < HBP_RANK_BINS)
            b->fin[br.metric][br.from_slot] = b->fin[br.metric][br.slot];
    }
    return 0;
}

/* ---- the forward pass for the truth rows ---- */

struct fwd {
    struct truth_row *blk;
    unsigned n;
    int have;                    /* an INJECT record waits for its segment */
    struct truth_row pending;
    struct sink *sink;
};

static void fwd_flush(struct fwd *f)
{
    if (f->n > 0)
        stream_put(f->sink, TAG_TRUTH, f->blk, f->n * sizeof *f->blk);
    f->n = 0;
}

static int fwd_visit(const struct hbp_slot *s, uint16_t kind, void *arg)
{
    struct fwd *f = arg;
    if (kind == HBP_REC_INJECT) {
        struct hbp_inject_record ir;
        memcpy(&ir, s, sizeof ir);
        f->pending = (struct truth_row){ ir.segment, ir.delayed_calls, ir.injected_ns };
        f->have = 1;
    } else if (kind == HBP_REC_SEGMENT) {
        struct hbp_segment_record sr;
        memcpy(&sr, s, sizeof sr);
        struct truth_row t = { sr.segment, 0, 0 };
        if (f->have && f->pending.segment == sr.segment)
            t = f->pending;
        f->have = 0;
        f->blk[f->n++] = t;
        if (f->n == TRUTH_BLOCK)
            fwd_flush(f);
    }
    return 0;
}

/* rank 0: receive rank r's stream of `tag` until its empty message */
static void receive_stream(struct sink *s, int r, int tag, void *buf, size_t cap)
{
    for (;;) {
        MPI_Status st;
        int bytes = 0;
        if (PMPI_Probe(r, tag, hbp_g.comm, &st) != MPI_SUCCESS ||
            PMPI_Get_count(&st, MPI_BYTE, &bytes) != MPI_SUCCESS || bytes < 0) {
            hbp_warn("lost the stream of rank %d", r);
            return;
        }
        void *dst = buf;
        if ((size_t)bytes > cap && !(dst = malloc((size_t)bytes))) {
            hbp_warn("lost the stream of rank %d", r);
            return;
        }
        PMPI_Recv(dst, bytes, MPI_BYTE, r, tag, hbp_g.comm, MPI_STATUS_IGNORE);
        if (bytes > 0)
            sink_put(s, r, tag, dst, (size_t)bytes);
        if (dst != buf)
            free(dst);
        if (bytes == 0)
            return;
    }
}

/* the end of every rank's stream of `tag`: an empty message to rank 0,
 * which receives the others' streams in rank order */
static void stream_end(struct sink *s, int tag, int nranks, void *buf, size_t cap)
{
    if (hbp_g.rank != 0) {
        PMPI_Send(NULL, 0, MPI_BYTE, 0, tag, hbp_g.comm);
        return;
    }
    for (int r = 1; r < nranks; r++)
        receive_stream(s, r, tag, buf, cap);
}

/* ---- rank 0's tables ---- */

struct root {
    struct sink sink;
    struct hbp_rank_entry *ranks;
    uint64_t *received;
    struct hbp_bin *gbuf;          /* nranks x 256 gathered bins */
    uint16_t *map_all;             /* nranks x 256 */
    double   *vals;
    uint64_t *cnts;
    uint32_t *src;
    uint16_t *kmap;
    struct hbp_metric_entry metrics[HBP_METRIC_COUNT];
    double    outv[HBP_RUN_BINS];
    uint64_t  outc[HBP_RUN_BINS];
    uint64_t  metric_off, rank_off, bin_off, total;
    char      path[4400], tmp[4420], csv[4440], csv_tmp[4460];
};

static int root_alloc(struct root *R, int n)
{
    size_t nb = (size_t)n * HBP_RANK_BINS;
    R->ranks = calloc((size_t)n, sizeof *R->ranks);
    R->received = calloc((size_t)n, sizeof *R->received);
    R->gbuf = malloc(nb * sizeof *R->gbuf);
    R->map_all = malloc(nb * sizeof *R->map_all);
    R->vals = malloc(nb * sizeof *R->vals);
    R->cnts = malloc(nb * sizeof *R->cnts);
    R->src = malloc(nb * sizeof *R->src);
    R->kmap = malloc(nb * sizeof *R->kmap);
    R->sink.csv_buf = malloc(CSV_BUF);
    return R->ranks && R->received && R->gbuf && R->map_all && R->vals && R->cnts && R->src &&
           R->kmap && R->sink.csv_buf ? 0 : -1;
}

static void root_free(struct root *R)
{
    free(R->ranks);
    free(R->received);
    free(R->gbuf);
    free(R->map_all);
    free(R->vals);
    free(R->cnts);
    free(R->src);
    free(R->kmap);
    free(R->sink.csv_buf);
}

static int open_new(const char *path)
{
    return (int)syscall(SYS_openat, AT_FDCWD, path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC,
                        0644);
}

/* merge metric m's gathered bins, write them, fill map_all */
static void root_merge_metric(struct root *R, unsigned m, int n)
{
    size_t k = 0;
    for (size_t i = 0; i < (size_t)n * HBP_RANK_BINS; i++) {
        R->map_all[i] = HBP_NO_SLOT;
        if (R->gbuf[i].count > 0) {
            R->vals[k] = R->gbuf[i].value;
            R->cnts[k] = R->gbuf[i].count;
            R->src[k] = (uint32_t)i;
            k++;
        }
    }
    int nb = hbp_bins_merge_offline(R->vals, R->cnts, k, HBP_RUN_BINS, R->outv, R->outc,
                                    R->kmap);
    if (nb < 0) {
        sink_fail(&R->sink, "cannot merge the bins", ENOMEM);
        return;
    }
    for (size_t j = 0; j < k; j++)
        R->map_all[R->src[j]] = R->kmap[j];
    R->metrics[m].bins_used = (uint32_t)nb;
    if (R->sink.fd >= 0 && nb > 0) {
        struct hbp_bin tab[HBP_RUN_BINS];
        for (int b = 0; b < nb; b++) {
            tab[b].value = R->outv[b];
            tab[b].count = R->outc[b];
        }
        uint64_t off = R->bin_off + (uint64_t)m * HBP_RUN_BINS * sizeof(struct hbp_bin);
        if (hbp_pwrite_all(R->sink.fd, tab, (size_t)nb * sizeof tab[0], off) < 0)
            sink_fail(&R->sink, "cannot write the run file", errno);
    }
}

static int root_finish(struct root *R, int n, int csv)
{
    struct sink *s = &R->sink;
    int partial = 0, orphaned = 0;
    uint64_t run_ns = 0;
    for (int r = 0; r < n; r++) {
        if (R->ranks[r].flags & HBP_RANK_ORPHANED)
            orphaned = 1;
        if ((R->ranks[r].flags & HBP_RANK_OK) && R->received[r] != R->ranks[r].segment_count) {
            R->ranks[r].flags |= HBP_RANK_INCOMPLETE;
            partial = 1;
        }
        if (!(R->ranks[r].flags & HBP_RANK_OK))
            partial = 1;
        if ((R->ranks[r].flags & HBP_RANK_OK) && R->ranks[r].run_ns > run_ns)
            run_ns = R->ranks[r].run_ns;
    }
    int csv_ok = 0;
    if (csv) {
        csv_flush(s);
        if (s->csv_fd >= 0) {
            csv_ok = syscall(SYS_close, s->csv_fd) == 0;
            s->csv_fd = -1;
        }
    }
    if (s->fd < 0)
        return 0;
    struct hbp_file_header h;
    memset(&h, 0, sizeof h);
    hbp_fill_header(&h, 1);
    h.flags = HBP_FLAG_RUN_FILE | HBP_FLAG_COMPLETE | (csv ? HBP_FLAG_INJECT : 0) |
              (hbp_g.preload ? HBP_FLAG_PRELOAD : 0) | (partial ? HBP_FLAG_PARTIAL : 0) |
              (orphaned ? HBP_FLAG_ORPHANED : 0);
    h.run_ns = run_ns;
    h.segment_count = R->total;
    h.metric_table_offset = R->metric_off;
    h.rank_entry_size = HBP_RANK_ENTRY_SIZE;
    h.rank_table_offset = R->rank_off;
    h.bin_table_offset = R->bin_off;
    h.bin_entry_size = HBP_BIN_ENTRY_SIZE;
    h.data_offset = s->data_off;
    h.data_length = R->total * HBP_RUN_RECORD_SIZE;
    memcpy(h.magic, HBP_MAGIC, sizeof h.magic);
    if (hbp_pwrite_all(s->fd, R->metrics, sizeof R->metrics, R->metric_off) < 0 ||
        hbp_pwrite_all(s->fd, R->ranks, (size_t)n * sizeof *R->ranks, R->rank_off) < 0 ||
        hbp_pwrite_all(s->fd, &h, sizeof h, 0) < 0) {
        sink_fail(s, "cannot write the run file", errno);
        return 0;
    }
    syscall(SYS_close, s->fd);
    s->fd = -1;
    if (syscall(SYS_renameat, AT_FDCWD, R->tmp, AT_FDCWD, R->path) != 0) {
        hbp_warn("cannot rename %s: %s", R->tmp, strerror(errno));
        return 0;
    }
    if (csv_ok && syscall(SYS_renameat, AT_FDCWD, R->csv_tmp, AT_FDCWD, R->csv) != 0)
        hbp_warn("cannot rename %s: %s", R->csv_tmp, strerror(errno));
    return 1;
}

/* ---- the whole step ---- */

void hbp_run_finalize(int ok)
{
    const int n = hbp_g.nranks, me = hbp_g.rank;
    MPI_Comm comm = hbp_g.comm;
    struct root *R = NULL;
    int go = 1, csv = 0, success = 0;

    /* 1 */
    if (me == 0) {
        R = calloc(1, sizeof *R);
        if (!R || root_alloc(R, n) != 0) {
            hbp_warn("out of memory at MPI_Finalize; the run file is not written");
            go = 0;
        } else {
            R->sink.fd = R->sink.csv_fd = -1;
            R->sink.ranks = R->ranks;
            R->sink.received = R->received;
            snprintf(R->path, sizeof R->path, "%s/hbprof-%s-%d.hbp", hbp_g.dir, hbp_g.host,
                     (int)hbp_g.pid);
            snprintf(R->tmp, sizeof R->tmp, "%s.tmp", R->path);
            snprintf(R->csv, sizeof R->csv, "%s.inject.csv", R->path);
            snprintf(R->csv_tmp, sizeof R->csv_tmp, "%s.tmp", R->csv);
            R->sink.fd = open_new(R->tmp);
            if (R->sink.fd < 0) {
                hbp_warn("cannot create %s: %s; the run file is not written", R->tmp,
                         strerror(errno));
                go = 0;
            }
        }
    }
    PMPI_Bcast(&go, 1, MPI_INT, 0, comm);
    if (!go)
        goto out;

    /* 2 */
    struct hbp_rank_entry mine;
    memset(&mine, 0, sizeof mine);
    mine.rank = me;
    mine.flags = (ok ? HBP_RANK_OK : HBP_RANK_FAILED) | (hbp_g.inj.families ? HBP_RANK_INJECT : 0);
    mine.run_ns = ok ? hbp_g.run_ns : 0;
    mine.segment_count = ok ? hbp_g.w.segments : 0;
    mine.start_real_ns = hbp_g.t0_real;
    mine.start_mono_ns = hbp_g.t0;
    mine.pid = (uint32_t)hbp_g.pid;
    mine.comp_source = ok ? hbp_g.comp_source : HBP_COMP_NONE;
    mine.end_how = HBP_END_FINALIZED;
    if (hbp_g.ppid && getppid() != hbp_g.ppid)
        mine.flags |= HBP_RANK_ORPHANED;   /* mpirun (or its daemon) died during the run */
    memcpy(mine.host, hbp_g.host, sizeof mine.host);
    PMPI_Gather(&mine, (int)sizeof mine, MPI_BYTE, R ? R->ranks : NULL, (int)sizeof mine,
                MPI_BYTE, 0, comm);
    if (me == 0) {
        uint64_t first = 0;
        for (int r = 0; r < n; r++) {
            R->ranks[r].first_record = first;
            first += R->ranks[r].segment_count;
            if (R->ranks[r].flags & HBP_RANK_INJECT)
                csv = 1;
        }
        R->total = first;
        R->metric_off = HBP_HEADER_SIZE;
        R->rank_off = align_up(R->metric_off + sizeof R->metrics, 64);
        R->bin_off = align_up(R->rank_off + (uint64_t)n * HBP_RANK_ENTRY_SIZE, 64);
        R->sink.data_off = align_up(R->bin_off + (uint64_t)HBP_METRIC_COUNT * HBP_RUN_BINS *
                                                     HBP_BIN_ENTRY_SIZE, 4096);
        hbp_fill_metric_table(R->metrics, hbp_g.comp_source);
        if (syscall(SYS_ftruncate, R->sink.fd,
                    (off_t)(R->sink.data_off + R->total * HBP_RUN_RECORD_SIZE)) != 0)
            sink_fail(&R->sink, "cannot size the run file", errno);
        if (csv) {
            R->sink.csv_fd = open_new(R->csv_tmp);
            if (R->sink.csv_fd < 0)
                hbp_warn("cannot create %s: %s", R->csv_tmp, strerror(errno));
            else {
                static const char head[] = "rank,segment,injected_ns,delayed_calls\n";
                memcpy(R->sink.csv_buf, head, sizeof head - 1);
                R->sink.csv_len = sizeof head - 1;
            }
        }
    }
    PMPI_Bcast(&csv, 1, MPI_INT, 0, comm);

    /* 3 */
    struct back *B = calloc(1, sizeof *B);
    uint16_t dummy_map[HBP_RANK_BINS];
    for (unsigned m = 0; m < HBP_METRIC_COUNT; m++) {
        struct hbp_bin local[HBP_RANK_BINS];
        memset(local, 0, sizeof local);
        if (ok) {
            for (unsigned s = 0; s < HBP_RANK_BINS; s++) {
                local[s].value = hbp_g.bins[m].value[s];
                local[s].count = hbp_g.bins[m].count[s];
            }
        }
        PMPI_Gather(local, (int)sizeof local, MPI_BYTE, R ? (void *)R->gbuf : NULL,
                    (int)sizeof local, MPI_BYTE, 0, comm);
        if (me == 0)
            root_merge_metric(R, m, n);
        PMPI_Scatter(R ? (void *)R->map_all : NULL, (int)sizeof dummy_map, MPI_BYTE,
                     B ? (void *)B->gmap[m] : (void *)dummy_map, (int)sizeof dummy_map,
                     MPI_BYTE, 0, comm);
    }

    /* 4 */
    struct hbp_run_record *blk = malloc(REC_BLOCK * sizeof *blk);
    if (ok && B && blk) {
        for (unsigned m = 0; m < HBP_METRIC_COUNT; m++)
            for (unsigned s = 0; s < HBP_RANK_BINS; s++)
                B->fin[m][s] = (uint8_t)s;
        B->blk = blk;
        B->pos = REC_BLOCK;
        B->sink = me == 0 ? &R->sink : NULL;
        if (hbp_file_visit(1, back_visit, B) != 0)
            hbp_warn("cannot read back the rank file");
        back_flush(B);
    }
    stream_end(R ? &R->sink : NULL, TAG_RECORDS, n, blk, blk ? REC_BLOCK * sizeof *blk : 0);

    /* 5 */
    if (csv) {
        struct truth_row *tb = (struct truth_row *)blk;   /* same 64 KiB */
        _Static_assert(TRUTH_BLOCK * sizeof(struct truth_row) ==
                       REC_BLOCK * sizeof(struct hbp_run_record), "block sizes");
        if (ok && tb && hbp_g.inj.families) {
            struct fwd f = { .blk = tb, .sink = me == 0 ? &R->sink : NULL };
            if (hbp_file_visit(0, fwd_visit, &f) != 0)
                hbp_warn("cannot read back the rank file");
            fwd_flush(&f);
        }
        stream_end(R ? &R->sink : NULL, TAG_TRUTH, n, blk, blk ? REC_BLOCK * sizeof *blk : 0);
    }
    free(blk);
    free(B);

    /* 6 */
    if (me == 0)
        success = root_finish(R, n, csv);
    PMPI_Bcast(&success, 1, MPI_INT, 0, comm);

out:
    hbp_file_close(ok && success && !hbp_g.keep);
    if (R) {
        if (R->sink.fd >= 0)
            syscall(SYS_close, R->sink.fd);
        if (R->sink.csv_fd >= 0)
            syscall(SYS_close, R->sink.csv_fd);
        if (!success) {
            syscall(SYS_unlinkat, AT_FDCWD, R->tmp, 0);
            syscall(SYS_unlinkat, AT_FDCWD, R->csv_tmp, 0);
        }
        root_free(R);
        free(R);
    }
    PMPI_Comm_free(&hbp_g.comm);
}
