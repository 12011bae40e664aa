/*
 * rankfile.c -- the per-rank record stream.
 *
 * The file is written through MAP_SHARED mappings: the header page stays
 * mapped, the record area is mapped one extent (HBP_EXTENT_SIZE bytes, a
 * whole number of records and pages) at a time, so memory stays bounded
 * whatever the number of segments. Every extent is allocated on disk with
 * posix_fallocate before it is mapped (a full disk is an error here, never a
 * SIGBUS later). A stored record is in the page cache at once: it survives
 * SIGKILL, a crash or MPI_Abort of the process.
 *
 * Publication: the 44 bytes of body first, then the kind/flags word with
 * release ordering. A reader that finds kind 0 has reached the end.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static int fallocate_range(int fd, uint64_t off, uint64_t len)
{
    int e = posix_fallocate(fd, (off_t)off, (off_t)len);
    if (e == EINVAL || e == EOPNOTSUPP) {
        /* a file system without fallocate: a plain size change will do */
        if (syscall(SYS_ftruncate, fd, (off_t)(off + len)) == 0)
            return 0;
        e = errno;
    }
    return e;
}

static uint64_t ext_offset(uint64_t e)
{
    return HBP_RANK_DATA_OFFSET + e * (uint64_t)HBP_EXTENT_SIZE;
}

int hbp_file_open(void)
{
    struct hbp_writer *w = &hbp_g.w;
    int n = snprintf(hbp_g.path, sizeof hbp_g.path, "%s/hbprof-%s-%d-r%d.hbp", hbp_g.dir,
                     hbp_g.host, (int)hbp_g.pid, hbp_g.rank);
    if (n < 0 || (size_t)n >= sizeof hbp_g.path) {
        hbp_fail("HBPROF_DIR is too long", 0);
        return -1;
    }
    int fd = (int)syscall(SYS_openat, AT_FDCWD, hbp_g.path,
                          O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        char what[4500];
        snprintf(what, sizeof what, "cannot create %s", hbp_g.path);
        hbp_fail(what, e);
        return -1;
    }
    w->fd = fd;
    int e = fallocate_range(fd, 0, ext_offset(1));
    if (e) {
        hbp_fail("cannot allocate the rank file", e);
        hbp_file_close(1);   /* nothing in it yet */
        return -1;
    }
    void *h = mmap(NULL, HBP_RANK_DATA_OFFSET, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    void *x = h == MAP_FAILED ? MAP_FAILED
                              : mmap(NULL, HBP_EXTENT_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
                                     fd, (off_t)ext_offset(0));
    if (h == MAP_FAILED || x == MAP_FAILED) {
        e = errno;
        if (h != MAP_FAILED)
            munmap(h, HBP_RANK_DATA_OFFSET);
        hbp_fail("cannot map the rank file", e);
        hbp_file_close(1);
        return -1;
    }
    w->hdr = h;
    w->ext = x;
    w->ext_index = 0;
    w->ext_used = 0;
    w->records = 0;
    w->segments = 0;

    struct hbp_file_header *hd = w->hdr;
    hbp_fill_header(hd, 0);
    hd->flags = HBP_FLAG_RANK_FILE | (hbp_g.inj.families ? HBP_FLAG_INJECT : 0) |
                (hbp_g.preload ? HBP_FLAG_PRELOAD : 0);
    hd->metric_table_offset = HBP_HEADER_SIZE;
    hd->data_offset = HBP_RANK_DATA_OFFSET;
    hbp_fill_metric_table((struct hbp_metric_entry *)((char *)h + HBP_HEADER_SIZE),
                          hbp_g.comp_source);
    /* the magic last, one release store of its 8 bytes (the header is at the
     * mapping's start: aligned): a file with a magic has a whole header */
    uint64_t magic;
    memcpy(&magic, HBP_MAGIC, sizeof magic);
    __atomic_store_n((uint64_t *)(void *)hd->magic, magic, __ATOMIC_RELEASE);
    return 0;
}

static int next_extent(struct hbp_writer *w)
{
    uint64_t e = w->ext_index + 1;
    int err = fallocate_range(w->fd, ext_offset(e), HBP_EXTENT_SIZE);
    if (err) {
        hbp_fail("cannot grow the rank file", err);
        return -1;
    }
    void *x = mmap(NULL, HBP_EXTENT_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, w->fd,
                   (off_t)ext_offset(e));
    if (x == MAP_FAILED) {
        hbp_fail("cannot map the rank file", errno);
        return -1;
    }
    munmap(w->ext, HBP_EXTENT_SIZE);
    w->ext = x;
    w->ext_index = e;
    w->ext_used = 0;
    return 0;
}

int hbp_file_put(const void *record)
{
    struct hbp_writer *w = &hbp_g.w;
    if (hbp_state() != HBP_S_ON || !w->ext)
        return -1;
    if (w->ext_used == HBP_EXTENT_SIZE && next_extent(w) != 0)
        return -1;
    struct hbp_slot *s = (struct hbp_slot *)(w->ext + w->ext_used);
    uint32_t kf;
    memcpy(&kf, (const char *)record + offsetof(struct hbp_slot, kindflags), sizeof kf);
    memcpy(s->body, record, sizeof s->body);
    __atomic_store_n(&s->kindflags, kf, __ATOMIC_RELEASE);
    w->ext_used += HBP_RANK_RECORD_SIZE;
    w->records++;
    if (hbp_kind_of(kf) == HBP_REC_SEGMENT)
        w->segments++;
    /* advisory while running (a reader trusts them only with COMPLETE) */
    __atomic_store_n(&w->hdr->data_length, w->records * HBP_RANK_RECORD_SIZE, __ATOMIC_RELAXED);
    __atomic_store_n(&w->hdr->segment_count, w->segments, __ATOMIC_RELAXED);
    return 0;
}

int hbp_file_finish(void)
{
    struct hbp_writer *w = &hbp_g.w;
    if (!w->hdr)
        return -1;
    munmap(w->ext, HBP_EXTENT_SIZE);
    w->ext = NULL;
    uint64_t len = w->records * HBP_RANK_RECORD_SIZE;
    int rc = 0;
    if (syscall(SYS_ftruncate, w->fd, (off_t)(HBP_RANK_DATA_OFFSET + len)) != 0)
        rc = -1;
    struct hbp_file_header *h = w->hdr;
    h->data_length = len;
    h->segment_count = w->segments;
    h->run_ns = hbp_g.run_ns;
    if (rc == 0)
        __atomic_store_n(&h->flags, h->flags | HBP_FLAG_COMPLETE, __ATOMIC_RELEASE);
    __atomic_store_n(&w->hdr, NULL, __ATOMIC_RELEASE);   /* before the unmap: signal handlers */
    munmap(h, HBP_RANK_DATA_OFFSET);
    return rc;
}

#define VISIT_BLOCK 1365u   /* records per read: 65520 bytes */

int hbp_file_visit(int backward, hbp_visit_fn fn, void *arg)
{
    struct hbp_writer *w = &hbp_g.w;
    if (w->fd < 0)
        return -1;
    struct hbp_slot *buf = malloc(VISIT_BLOCK * sizeof *buf);
    if (!buf)
        return -1;
    uint64_t total = w->records;
    int rc = 0;
    for (uint64_t done = 0; done < total && rc == 0;) {
        uint64_t k = total - done < VISIT_BLOCK ? total - done : VISIT_BLOCK;
        uint64_t first = backward ? total - done - k : done;
        size_t bytes = (size_t)k * HBP_RANK_RECORD_SIZE;
        if (hbp_pread_all(w->fd, buf, bytes, HBP_RANK_DATA_OFFSET + first * HBP_RANK_RECORD_SIZE) !=
            (ssize_t)bytes) {
            rc = -1;
            break;
        }
        for (uint64_t j = 0; j < k && rc == 0; j++) {
            const struct hbp_slot *s = &buf[backward ? k - 1 - j : j];
            uint16_t kind = hbp_kind_of(s->kindflags);
            if (kind == 0) {
                rc = -1;   /* a finished file has no hole */
                break;
            }
            if (fn(s, kind, arg) != 0)
                rc = 1;
        }
        done += k;
    }
    free(buf);
    return rc < 0 ? -1 : 0;
}

void hbp_file_close(int unlink_it)
{
    struct hbp_writer *w = &hbp_g.w;
    if (w->ext) {
        munmap(w->ext, HBP_EXTENT_SIZE);
        w->ext = NULL;
    }
    if (w->hdr) {
        struct hbp_file_header *h = w->hdr;
        __atomic_store_n(&w->hdr, NULL, __ATOMIC_RELEASE);
        munmap(h, HBP_RANK_DATA_OFFSET);
    }
    if (w->fd >= 0) {
        syscall(SYS_close, w->fd);
        w->fd = -1;
        if (unlink_it)
            syscall(SYS_unlinkat, AT_FDCWD, hbp_g.path, 0);
    }
}
