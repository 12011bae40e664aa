/*
 * file.c -- the trace file on disk: its name, creation (or take-over),
 * header, growth and mappings.
 *
 * The file is never written with write(2): it is grown with posix_fallocate
 * (so that the blocks exist and a full disk cannot turn a store into SIGBUS)
 * and mapped MAP_SHARED in extents. A store into the mapping is in the page
 * cache at once and survives any death of the process.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

#define HBT_MIB              (1024u * 1024u)
#define HBT_FIRST_EXTENT     HBT_CHUNK_SIZE     /* one largest chunk: a process
                                                  that records little costs little */
#define HBT_MAX_EXTENT       (64u * HBT_MIB)
#define HBT_DEFAULT_MAX_MB   4096u
#define HBT_HIGH_FD          512    /* keep our fd out of the low numbers that
                                       shells and daemons dup2 onto */
#define HBT_MAX_SUFFIX       10000
#define HBT_TAKE_OVER_MAX    (16u * HBT_MIB)   /* an empty trace is ~64 KiB */

static int hbt_mkdir_p(const char *dir)
{
    char buf[sizeof hbt_g.dir];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof buf)
        return ENAMETOOLONG;
    memcpy(buf, dir, n + 1);
    int last = 0;
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0')
            continue;
        char c = buf[i];
        buf[i] = '\0';
        /* errors of intermediate components (EEXIST, EACCES on an existing
         * parent) do not matter; only whether the directory exists at the end */
        last = mkdir(buf, 0777) == 0 ? 0 : errno;
        buf[i] = c;
    }
    struct stat st;
    if (stat(dir, &st) == 0)
        return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
    return last ? last : errno;
}

static void hbt_hostname(char *out, size_t size)
{
    if (gethostname(out, size) != 0)
        snprintf(out, size, "unknown");
    out[size - 1] = '\0';
    for (char *p = out; *p; p++)
        if (*p == '/' || *p == ' ' || *p == '\t' || *p == '\n')
            *p = '_';
}

/*
 * An existing file with our name was made by an earlier image of this very
 * process (before an exec: the name holds host and pid) or by a dead
 * process whose pid we got again. If no live process holds its lock and it
 * recorded nothing but its first thread's start, take it over instead of
 * adding a .1 file: otherwise every image of an exec chain (#!/usr/bin/env,
 * wrapper scripts, exec "$@") would leave an empty file behind.
 */
static int hbt_take_over(const char *path, pid_t pid)
{
    int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    struct stat st;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0 || fstat(fd, &st) != 0 ||
        !S_ISREG(st.st_mode) || st.st_size < (off_t)HBT_DATA_OFFSET ||
        st.st_size > (off_t)HBT_TAKE_OVER_MAX)
        goto keep;
    const char *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED)
        goto keep;
    int empty = hbt_file_is_bystander(m, (uint64_t)st.st_size, pid);
    munmap((void *)m, (size_t)st.st_size);
    if (!empty || ftruncate(fd, 0) != 0)
        goto keep;
    return fd;
keep:
    close(fd);
    return -1;
}

/* hbtrace-<host>-<pid>.hbt, or .1.hbt, .2.hbt ... if an earlier image of the
 * same process (before an exec) left one with records in it. The file stays
 * flock()ed while this image lives (the lock goes with the O_CLOEXEC
 * descriptor at exec), which is how hbt_take_over tells a dead owner. */
static int hbt_create_file(pid_t pid)
{
    char host[256];
    hbt_hostname(host, sizeof host);
    for (int n = 0; n < HBT_MAX_SUFFIX; n++) {
        int len = n == 0
            ? snprintf(hbt_g.path, sizeof hbt_g.path, "%s/hbtrace-%s-%d.hbt",
                       hbt_g.dir, host, (int)pid)
            : snprintf(hbt_g.path, sizeof hbt_g.path, "%s/hbtrace-%s-%d.%d.hbt",
                       hbt_g.dir, host, (int)pid, n);
        if (len < 0 || (size_t)len >= sizeof hbt_g.path) {
            errno = ENAMETOOLONG;
            return -1;
        }
        int fd = open(hbt_g.path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd >= 0) {
            (void)flock(fd, LOCK_EX | LOCK_NB);   /* best effort (NFS) */
            return fd;
        }
        if (errno != EEXIST)
            return -1;
        fd = hbt_take_over(hbt_g.path, pid);
        if (fd >= 0)
            return fd;
    }
    errno = EEXIST;
    return -1;
}

int hbt_move_fd_high(int fd)
{
    int hi = fcntl(fd, F_DUPFD_CLOEXEC, HBT_HIGH_FD);
    if (hi < 0)
        return fd;
    close(fd);
    return hi;
}

/* The program may have closed our descriptor and reused its number: never
 * fallocate someone else's file. Reopen by path if the identity changed. */
static int hbt_check_fd(void)
{
    struct stat st;
    if (hbt_g.fd >= 0 && fstat(hbt_g.fd, &st) == 0 &&
        (uint64_t)st.st_dev == hbt_g.dev && (uint64_t)st.st_ino == hbt_g.ino)
        return 1;
    int fd = open(hbt_g.path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return 0;
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_dev != hbt_g.dev ||
        (uint64_t)st.st_ino != hbt_g.ino) {
        close(fd);
        errno = ESTALE;
        return 0;
    }
    (void)flock(fd, LOCK_EX | LOCK_NB);
    hbt_g.fd = hbt_move_fd_high(fd);
    return 1;
}

/* Returns 0 or an errno value. Blocks are allocated so that later stores into
 * the mapping cannot fault on a full disk. Past the program's file size
 * limit (RLIMIT_FSIZE) the kernel would answer with SIGXFSZ, which kills the
 * process: refuse with EFBIG before asking it. */
static int hbt_allocate(off_t off, off_t len)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (uint64_t)off + (uint64_t)len > (uint64_t)rl.rlim_cur)
        return EFBIG;
    int err = posix_fallocate(hbt_g.fd, off, len);
    if (err == EINVAL || err == EOPNOTSUPP || err == ENOSYS)
        err = ftruncate(hbt_g.fd, off + len) == 0 ? 0 : errno;
    return err;
}

static char *hbt_map(off_t off, size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, hbt_g.fd, off);
    return p == MAP_FAILED ? NULL : p;
}

static uint64_t hbt_max_mb(void)
{
    const char *v = hbt_getenv(HBT_ENV_HBTRACE_MAX_MB);
    if (!v || !*v)
        return HBT_DEFAULT_MAX_MB;
    char *end;
    errno = 0;
    unsigned long long mb = strtoull(v, &end, 10);
    if (errno || *end || mb == 0)
        return HBT_DEFAULT_MAX_MB;
    return mb > (1ull << 40) ? (1ull << 40) : mb;
}

static void hbt_fill_header(struct hbt_file_header *h, uint64_t data_len)
{
    struct timespec mono, real, res;
    clock_gettime(CLOCK_MONOTONIC, &mono);
    clock_gettime(CLOCK_REALTIME, &real);
    if (clock_getres(CLOCK_MONOTONIC, &res) != 0)
        res.tv_sec = 0, res.tv_nsec = 0;
    const char *pre = getenv("LD_PRELOAD");

    h->version = HBT_VERSION;
    h->endian = HBT_ENDIAN_MARK;
    h->header_size = sizeof *h;
    h->slot_size = HBT_SLOT_SIZE;
    h->chunk_size = HBT_CHUNK_SIZE;
    h->unit_size = HBT_UNIT_SIZE;
    h->flags = pre && strstr(pre, "libhbtrace") ? HBT_FLAG_PRELOAD : 0;
    h->meta_offset = HBT_HEADER_SIZE;
    h->meta_length = 0;
    h->meta_capacity = HBT_META_CAPACITY;
    h->clock_id = HBT_CLOCK_MONOTONIC;
    h->data_offset = HBT_DATA_OFFSET;
    h->data_length = data_len;
    h->start_mono_ns = (uint64_t)mono.tv_sec * 1000000000u + (uint64_t)mono.tv_nsec;
    h->start_real_ns = (int64_t)real.tv_sec * 1000000000 + real.tv_nsec;
    h->clock_res_ns = (uint32_t)(res.tv_sec * 1000000000 + res.tv_nsec);
    h->pid = (uint32_t)hbt_g.pid;
    h->rank = -1;
    h->lost_records = 0;
    h->lost_why = 0;
    h->lost_errno = 0;
}

void hbt_reset_counters(void)
{
    hbt_g.hdr = NULL;
    hbt_g.fd = -1;
    __atomic_store_n(&hbt_g.next_unit, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&hbt_g.mapped_units, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&hbt_g.file_units, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&hbt_g.free_lock, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&hbt_g.n_pieces, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&hbt_g.n_extents, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&hbt_g.nthreads, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&hbt_g.full, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&hbt_g.full_warned, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&hbt_g.closing, 0, __ATOMIC_RELAXED);
}

/* Create and map the trace file. Called with g.lock held. */
int hbt_open_trace(void)
{
    hbt_g.quiet = hbt_env_flag(HBT_ENV_HBTRACE_QUIET);
    if (hbt_env_flag(HBT_ENV_HBTRACE_DISABLE))
        return 0;

    const char *dir = hbt_getenv(HBT_ENV_HBTRACE_DIR);
    if (!dir || !*dir)
        dir = ".";
    hbt_reset_counters();
    hbt_g.pid = getpid();
    hbt_g.unit_slots = HBT_UNIT_SIZE / HBT_SLOT_SIZE;
    hbt_g.chunk_units = HBT_CHUNK_SIZE / HBT_UNIT_SIZE;
    hbt_g.max_mb = hbt_max_mb();
    uint64_t cap = hbt_g.max_mb * HBT_MIB;
    hbt_g.max_units = cap > HBT_DATA_OFFSET ? (cap - HBT_DATA_OFFSET) / HBT_UNIT_SIZE : 0;
    hbt_prefault_config();
    hbt_mon_config();
    hbt_memory_config();
    HBT_HOOK(hbt_status_config);
    uint64_t first = HBT_FIRST_EXTENT / HBT_UNIT_SIZE;
    if (first > hbt_g.max_units)
        first = hbt_g.max_units;

    hbt_report_hold();
    int err = hbt_mkdir_p(dir);
    if (err)
        goto fail;
    /* absolute, so that unlink at exit works after the program chdir()s */
    if (!realpath(dir, hbt_g.dir))
        snprintf(hbt_g.dir, sizeof hbt_g.dir, "%s", dir);

    int fd = hbt_create_file(hbt_g.pid);
    if (fd < 0) {
        err = errno;
        goto fail;
    }
    hbt_g.fd = hbt_move_fd_high(fd);
    struct stat st;
    if (fstat(hbt_g.fd, &st) != 0) {
        err = errno;
        goto fail_file;
    }
    hbt_g.dev = (uint64_t)st.st_dev;
    hbt_g.ino = (uint64_t)st.st_ino;
    if (first == 0) {
        err = EFBIG;
        goto fail_file;
    }
    err = hbt_allocate(0, (off_t)(HBT_DATA_OFFSET + first * HBT_UNIT_SIZE));
    if (err)
        goto fail_file;
    struct hbt_file_header *h = (void *)hbt_map(0, HBT_DATA_OFFSET);
    char *base = hbt_map(HBT_DATA_OFFSET, first * HBT_UNIT_SIZE);
    if (!h || !base) {
        err = errno;
        if (h)
            munmap(h, HBT_DATA_OFFSET);
        if (base)
            munmap(base, first * HBT_UNIT_SIZE);
        goto fail_file;
    }
    hbt_g.hdr = h;
    hbt_g.ext[0] = (struct hbt_extent){ .base = base, .first = 0, .count = first };
    __atomic_store_n(&hbt_g.n_extents, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&hbt_g.file_units, first, __ATOMIC_RELEASE);
    __atomic_store_n(&hbt_g.mapped_units, first, __ATOMIC_RELEASE);

    hbt_fill_header(h, first * HBT_UNIT_SIZE);
    hbt_meta_write_initial();
    /* magic last: a file with a magic has a complete header */
    __atomic_thread_fence(__ATOMIC_RELEASE);
    memcpy(h->magic, HBT_MAGIC, sizeof h->magic);
    return 1;

fail_file:
    if (hbt_g.fd >= 0)
        close(hbt_g.fd);
    unlink(hbt_g.path);
    hbt_g.fd = -1;
fail:
    hbt_g.path[0] = '\0';
    hbt_warn("hbtrace: cannot write trace file in %s: %s; tracing disabled",
             dir, strerror(err));
    hbt_report_line("start", dir, err);
    return 0;
}

/*
 * After the trim at exit the mappings reach past the end of the file: put
 * the file back under chunk `need` (allocated, as growth does), and no
 * further, before any thread touches it. g.lock held.
 */
static int hbt_extend_locked(uint64_t need, unsigned mode)
{
    uint64_t file = __atomic_load_n(&hbt_g.file_units, __ATOMIC_SEQ_CST);
    uint64_t mapped = __atomic_load_n(&hbt_g.mapped_units, __ATOMIC_ACQUIRE);
    if (file > need || file >= mapped)
        return 1;
    if (mode & HBT_M_AHEAD)
        return 0;   /* the pre-faulter does not pre-extend after the trim */
    /* to the end of need's page: the file ends on a page boundary */
    uint64_t upto = hbt_page_units(need + 1);
    if (upto > mapped)
        upto = mapped;
    int err = hbt_check_fd() ? 0 : (errno ? errno : EBADF);
    if (!err)
        err = hbt_allocate((off_t)(HBT_DATA_OFFSET + file * HBT_UNIT_SIZE),
                           (off_t)((upto - file) * HBT_UNIT_SIZE));
    if (err) {
        hbt_set_full(mode, NULL, err);
        return 0;
    }
    __atomic_store_n(&hbt_g.file_units, upto, __ATOMIC_SEQ_CST);
    __atomic_store_n(&hbt_g.hdr->data_length, upto * HBT_UNIT_SIZE, __ATOMIC_RELEASE);
    return 1;
}

/* Map more of the file until unit `need` is covered. g.lock held.
 * HBT_M_AHEAD (the pre-faulter growing ahead of the allocation point): a
 * failure only returns 0; the tracer goes on with what is mapped.
 * Once closing (trim at exit), new extents are mapped as usual but the file
 * is only extended to chunk `need` (hbt_extend_locked), so that a thread
 * still beating while the process exits does not leave a new, mostly empty
 * extent behind. */
int hbt_grow_locked(uint64_t need, unsigned mode)
{
    uint64_t max_ext = HBT_MAX_EXTENT / HBT_UNIT_SIZE;
    int closing = __atomic_load_n(&hbt_g.closing, __ATOMIC_ACQUIRE);
    if (!hbt_extend_locked(need, mode))
        return 0;
    while (__atomic_load_n(&hbt_g.mapped_units, __ATOMIC_ACQUIRE) <= need) {
        if (__atomic_load_n(&hbt_g.full, __ATOMIC_ACQUIRE))
            return 0;
        uint32_t n = hbt_g.n_extents;
        uint64_t mapped = hbt_g.mapped_units;
        /* extents double from one largest chunk: every extent boundary is
         * a multiple of chunk_units, which no chunk crosses */
        uint64_t count = hbt_g.ext[n - 1].count * 2;
        if (count > max_ext)
            count = max_ext;
        if (count > hbt_g.max_units - mapped)
            count = hbt_g.max_units - mapped;
        if (count == 0 || n >= HBT_MAX_EXTENTS) {
            if (mode & HBT_M_AHEAD)
                return 0;
            char why[64];
            snprintf(why, sizeof why, "%s=%llu", hbt_env_name(HBT_ENV_HBTRACE_MAX_MB),
                     (unsigned long long)hbt_g.max_mb);
            hbt_set_full(mode, why, 0);
            return 0;
        }
        if (!hbt_check_fd()) {
            if (!(mode & HBT_M_AHEAD))
                hbt_set_full(mode, NULL, errno ? errno : EBADF);
            return 0;
        }
        off_t off = (off_t)(HBT_DATA_OFFSET + mapped * HBT_UNIT_SIZE);
        size_t len = count * HBT_UNIT_SIZE;
        int err = closing ? 0 : hbt_allocate(off, (off_t)len);
        char *base = err ? NULL : hbt_map(off, len);
        /* under an address-space limit (RLIMIT_AS) a smaller extent may still
         * fit: halve it, down to one largest chunk (boundaries stay multiples
         * of chunk_units; the file part allocated beyond is used next time) */
        while (!base && !err && errno == ENOMEM && count / 2 >= hbt_g.chunk_units &&
               (count / 2) % hbt_g.chunk_units == 0) {
            count /= 2;
            len = count * HBT_UNIT_SIZE;
            base = hbt_map(off, len);
        }
        if (!base) {
            if (!(mode & HBT_M_AHEAD))
                hbt_set_full(mode, NULL, err ? err : errno);
            return 0;
        }
        hbt_g.ext[n] = (struct hbt_extent){ .base = base, .first = mapped, .count = count };
        if (!closing)
            __atomic_store_n(&hbt_g.file_units, mapped + count, __ATOMIC_SEQ_CST);
        /* publish the extent, then the unit count that makes it reachable */
        __atomic_store_n(&hbt_g.n_extents, n + 1, __ATOMIC_RELEASE);
        __atomic_store_n(&hbt_g.mapped_units, mapped + count, __ATOMIC_RELEASE);
        if (!closing)
            __atomic_store_n(&hbt_g.hdr->data_length, (mapped + count) * HBT_UNIT_SIZE,
                             __ATOMIC_RELEASE);
    }
    return closing ? hbt_extend_locked(need, mode) : 1;
}

/* The file part of hbt_trim_at_exit (core.c), which explains the protocol.
 * g.lock held, so no growth runs meanwhile. */
void hbt_trim_locked(void)
{
    uint64_t file = __atomic_load_n(&hbt_g.file_units, __ATOMIC_SEQ_CST);
    /* to the end of the allocation point's page: the file stays a whole
     * number of pages, and the rest of that page is a little room for the
     * records of exit handlers that run after ours */
    uint64_t keep = hbt_page_units(__atomic_load_n(&hbt_g.next_unit, __ATOMIC_SEQ_CST));
    if (keep >= file)
        return;   /* nothing reserved beyond the allocation point */
    __atomic_store_n(&hbt_g.file_units, keep, __ATOMIC_SEQ_CST);
    /* units handed out before the store above, and the units the
     * pre-faulter may be touching, stay inside the file */
    uint64_t n = hbt_page_units(__atomic_load_n(&hbt_g.next_unit, __ATOMIC_SEQ_CST));
    uint64_t claim = hbt_prefault_settle(keep);
    if (n > keep)
        keep = n;
    if (claim > keep)
        keep = claim;
    if (keep < file && hbt_check_fd() &&
        ftruncate(hbt_g.fd, (off_t)(HBT_DATA_OFFSET + keep * HBT_UNIT_SIZE)) == 0) {
        __atomic_store_n(&hbt_g.hdr->data_length, keep * HBT_UNIT_SIZE, __ATOMIC_RELEASE);
        __atomic_store_n(&hbt_g.file_units, keep, __ATOMIC_SEQ_CST);
    } else {
        __atomic_store_n(&hbt_g.file_units, file, __ATOMIC_SEQ_CST);   /* not cut */
    }
}
