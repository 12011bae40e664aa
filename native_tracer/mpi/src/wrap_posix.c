/*
 * wrap_posix.c -- libc I/O wrappers.
 *
 * Counted (profiled thread, outermost calls, between MPI_Init and
 * MPI_Finalize): opens (open open64 openat openat64 creat creat64 fopen
 * fopen64 and the fortified __open_2 __open64_2 __openat_2), closes (close
 * fclose), reads (read pread pread64 readv fread and __read_chk __pread_chk
 * __pread64_chk __fread_chk), writes (write pwrite pwrite64 writev fwrite).
 * A call counts once whatever its result; bytes are what it returned (items
 * x size for fread/fwrite). Calls inside libc (fopen's own open, fwrite's
 * own write) do not reach these wrappers; calls inside an intercepted MPI
 * call pass through uncounted (hbp_tls.depth); the profiler's own I/O uses
 * raw system calls. Any descriptor counts (files, pipes, sockets, ttys).
 *
 * The real functions are found with dlsym(RTLD_NEXT) on first use, which
 * works for LD_PRELOAD and for a library linked before libc alike; the
 * plain read/write/open/close fall back to the system call if that fails.
 */
#include "internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

/* fortified entry points (not declared without _FORTIFY_SOURCE) */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen);
ssize_t __pread64_chk(int fd, void *buf, size_t n, off64_t off, size_t buflen);
size_t __fread_chk(void *ptr, size_t ptrlen, size_t size, size_t n, FILE *stream);

static void *resolve(void **cache, const char *name)
{
    void *p = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
    if (!p) {
        p = dlsym(RTLD_NEXT, name);
        __atomic_store_n(cache, p, __ATOMIC_RELEASE);
    }
    return p;
}

#define REAL(name)                                                             \
    static void *real_##name##_p;                                              \
    __typeof__(&name) real_##name = (__typeof__(&name))resolve(&real_##name##_p, #name)

static inline void done(unsigned m, unsigned mbytes, long long bytes, int err)
{
    hbp_add(m, 1);
    if (bytes > 0)
        hbp_add(mbytes, (uint64_t)bytes);
    hbp_leave();
    errno = err;
}

#define OPEN_DONE(r) done(HBP_M_POSIX_OPEN, HBP_M_POSIX_OPEN, 0, errno)
#define CLOSE_DONE() done(HBP_M_POSIX_CLOSE, HBP_M_POSIX_CLOSE, 0, errno)
#define READ_DONE(b) done(HBP_M_POSIX_READ, HBP_M_POSIX_READ_BYTES, (long long)(b), errno)
#define WRITE_DONE(b) done(HBP_M_POSIX_WRITE, HBP_M_POSIX_WRITE_BYTES, (long long)(b), errno)

static inline mode_t open_mode(int flags, va_list ap)
{
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

/* ---- open ---- */

HBP_EXPORT int open(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t mode = open_mode(flags, ap);
    va_end(ap);
    REAL(open);
    int on = hbp_enter(HBP_INJ_POSIX);
    int fd = real_open ? real_open(path, flags, mode)
                       : (int)syscall(SYS_openat, AT_FDCWD, path, flags, mode);
    if (on)
        OPEN_DONE(fd);
    return fd;
}

HBP_EXPORT int open64(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t mode = open_mode(flags, ap);
    va_end(ap);
    REAL(open64);
    int on = hbp_enter(HBP_INJ_POSIX);
    int fd = real_open64 ? real_open64(path, flags, mode)
                         : (int)syscall(SYS_openat, AT_FDCWD, path, flags, mode);
    if (on)
        OPEN_DONE(fd);
    return fd;
}

HBP_EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t mode = open_mode(flags, ap);
    va_end(ap);
    REAL(openat);
    int on = hbp_enter(HBP_INJ_POSIX);
    int fd = real_openat ? real_openat(dirfd, path, flags, mode)
                         : (int)syscall(SYS_openat, dirfd, path, flags, mode);
    if (on)
        OPEN_DONE(fd);
    return fd;
}

HBP_EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t mode = open_mode(flags, ap);
    va_end(ap);
    REAL(openat64);
    int on = hbp_enter(HBP_INJ_POSIX);
    int fd = real_openat64 ? real_openat64(dirfd, path, flags, mode)
                           : (int)syscall(SYS_openat, dirfd, path, flags, mode);
    if (on)
        OPEN_DONE(fd);
    return fd;
}

HBP_EXPORT int creat(const char *path, mode_t mode)
{
    REAL(creat);
    int on = hbp_enter(HBP_INJ_POSIX);
    int fd = real_creat ? real_creat(path, mode)
                        : (int)syscall(SYS_openat, AT_FDCWD, path,
                                       O_CREAT | O_WRONLY | O_TRUNC, mode);
    if (on)
        OPEN_DONE(fd);
    return fd;
}

HBP_EXPORT int creat64(const char *path, mode_t mode)
{
    REAL(creat64);
    int on = hbp_enter(HBP_INJ_POSIX);
    int fd = real_creat64 ? real_creat64(path, mode)
                          : (int)syscall(SYS_openat, AT_FDCWD, path,
                                         O_CREAT | O_WRONLY | O_TRUNC, mode);
    if (on)
        OPEN_DONE(fd);
    return fd;
}

HBP_EXPORT int __open_2(const char *path, int flags)
{
    REAL(__open_2);
    int on = hbp_enter(HBP_INJ_POSIX);
    int fd = real___open_2 ? real___open_2(path, flags)
                           : (int)syscall(SYS_openat, AT_FDCWD, path, flags, 0);
    if (on)
        OPEN_DONE(fd);
    return fd;
}

HBP_EXPORT int __open64_2(const char *path, int flags)
{
    REAL(__open64_2);
    int on = hbp_enter(HBP_INJ_POSIX);
    int fd = real___open64_2 ? real___open64_2(path, flags)
                             : (int)syscall(SYS_openat, AT_FDCWD, path, flags, 0);
    if (on)
        OPEN_DONE(fd);
    return fd;
}

HBP_EXPORT int __openat_2(int dirfd, const char *path, int flags)
{
    REAL(__openat_2);
    int on = hbp_enter(HBP_INJ_POSIX);
    int fd = real___openat_2 ? real___openat_2(dirfd, path, flags)
                             : (int)syscall(SYS_openat, dirfd, path, flags, 0);
    if (on)
        OPEN_DONE(fd);
    return fd;
}

HBP_EXPORT FILE *fopen(const char *restrict path, const char *restrict mode)
{
    REAL(fopen);
    if (!real_fopen) {
        errno = ENOSYS;
        return NULL;
    }
    int on = hbp_enter(HBP_INJ_POSIX);
    FILE *f = real_fopen(path, mode);
    if (on)
        OPEN_DONE(f);
    return f;
}

HBP_EXPORT FILE *fopen64(const char *restrict path, const char *restrict mode)
{
    REAL(fopen64);
    if (!real_fopen64) {
        errno = ENOSYS;
        return NULL;
    }
    int on = hbp_enter(HBP_INJ_POSIX);
    FILE *f = real_fopen64(path, mode);
    if (on)
        OPEN_DONE(f);
    return f;
}

/* ---- close ---- */

HBP_EXPORT int close(int fd)
{
    REAL(close);
    int on = hbp_enter(HBP_INJ_POSIX);
    int r = real_close ? real_close(fd) : (int)syscall(SYS_close, fd);
    if (on)
        CLOSE_DONE();
    return r;
}

HBP_EXPORT int fclose(FILE *f)
{
    REAL(fclose);
    if (!real_fclose) {
        errno = ENOSYS;
        return EOF;
    }
    int on = hbp_enter(HBP_INJ_POSIX);
    int r = real_fclose(f);
    if (on)
        CLOSE_DONE();
    return r;
}

/* ---- read ---- */

HBP_EXPORT ssize_t read(int fd, void *buf, size_t n)
{
    REAL(read);
    int on = hbp_enter(HBP_INJ_POSIX);
    ssize_t r = real_read ? real_read(fd, buf, n) : syscall(SYS_read, fd, buf, n);
    if (on)
        READ_DONE(r);
    return r;
}

HBP_EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
    REAL(__read_chk);
    if (!real___read_chk) {
        errno = ENOSYS;
        return -1;
    }
    int on = hbp_enter(HBP_INJ_POSIX);
    ssize_t r = real___read_chk(fd, buf, n, buflen);
    if (on)
        READ_DONE(r);
    return r;
}

HBP_EXPORT ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
    REAL(pread);
    int on = hbp_enter(HBP_INJ_POSIX);
    ssize_t r = real_pread ? real_pread(fd, buf, n, off) : syscall(SYS_pread64, fd, buf, n, off);
    if (on)
        READ_DONE(r);
    return r;
}

HBP_EXPORT ssize_t pread64(int fd, void *buf, size_t n, off64_t off)
{
    REAL(pread64);
    int on = hbp_enter(HBP_INJ_POSIX);
    ssize_t r = real_pread64 ? real_pread64(fd, buf, n, off)
                             : syscall(SYS_pread64, fd, buf, n, off);
    if (on)
        READ_DONE(r);
    return r;
}

HBP_EXPORT ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen)
{
    REAL(__pread_chk);
    if (!real___pread_chk) {
        errno = ENOSYS;
        return -1;
    }
    int on = hbp_enter(HBP_INJ_POSIX);
    ssize_t r = real___pread_chk(fd, buf, n, off, buflen);
    if (on)
        READ_DONE(r);
    return r;
}

HBP_EXPORT ssize_t __pread64_chk(int fd, void *buf, size_t n, off64_t off, size_t buflen)
{
    REAL(__pread64_chk);
    if (!real___pread64_chk) {
        errno = ENOSYS;
        return -1;
    }
    int on = hbp_enter(HBP_INJ_POSIX);
    ssize_t r = real___pread64_chk(fd, buf, n, off, buflen);
    if (on)
        READ_DONE(r);
    return r;
}

HBP_EXPORT ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
    REAL(readv);
    int on = hbp_enter(HBP_INJ_POSIX);
    ssize_t r = real_readv ? real_readv(fd, iov, cnt) : syscall(SYS_readv, fd, iov, cnt);
    if (on)
        READ_DONE(r);
    return r;
}

HBP_EXPORT size_t fread(void *restrict ptr, size_t size, size_t n, FILE *restrict f)
{
    REAL(fread);
    if (!real_fread) {
        errno = ENOSYS;
        return 0;
    }
    int on = hbp_enter(HBP_INJ_POSIX);
    size_t r = real_fread(ptr, size, n, f);
    if (on)
        READ_DONE(r * size);
    return r;
}

HBP_EXPORT size_t __fread_chk(void *ptr, size_t ptrlen, size_t size, size_t n, FILE *f)
{
    REAL(__fread_chk);
    if (!real___fread_chk) {
        errno = ENOSYS;
        return 0;
    }
    int on = hbp_enter(HBP_INJ_POSIX);
    size_t r = real___fread_chk(ptr, ptrlen, size, n, f);
    if (on)
        READ_DONE(r * size);
    return r;
}

/* ---- write ---- */

HBP_EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
    REAL(write);
    int on = hbp_enter(HBP_INJ_POSIX);
    ssize_t r = real_write ? real_write(fd, buf, n) : syscall(SYS_write, fd, buf, n);
    if (on)
        WRITE_DONE(r);
    return r;
}

HBP_EXPORT ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    REAL(pwrite);
    int on = hbp_enter(HBP_INJ_POSIX);
    ssize_t r = real_pwrite ? real_pwrite(fd, buf, n, off)
                            : syscall(SYS_pwrite64, fd, buf, n, off);
    if (on)
        WRITE_DONE(r);
    return r;
}

HBP_EXPORT ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t off)
{
    REAL(pwrite64);
    int on = hbp_enter(HBP_INJ_POSIX);
    ssize_t r = real_pwrite64 ? real_pwrite64(fd, buf, n, off)
                              : syscall(SYS_pwrite64, fd, buf, n, off);
    if (on)
        WRITE_DONE(r);
    return r;
}

HBP_EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
    REAL(writev);
    int on = hbp_enter(HBP_INJ_POSIX);
    ssize_t r = real_writev ? real_writev(fd, iov, cnt) : syscall(SYS_writev, fd, iov, cnt);
    if (on)
        WRITE_DONE(r);
    return r;
}

HBP_EXPORT size_t fwrite(const void *restrict ptr, size_t size, size_t n, FILE *restrict f)
{
    REAL(fwrite);
    if (!real_fwrite) {
        errno = ENOSYS;
        return 0;
    }
    int on = hbp_enter(HBP_INJ_POSIX);
    size_t r = real_fwrite(ptr, size, n, f);
    if (on)
        WRITE_DONE(r * size);
    return r;
}
