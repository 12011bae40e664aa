/*
 * wrap_posix.h -- what the generated libc I/O wrappers share.
 *
 * build/wrap_posix.gen.c (tools/gen_wrappers.py, from wrap_posix.list)
 * includes this file and nothing else. The real functions are found with
 * dlsym(RTLD_NEXT) on first use, which works for LD_PRELOAD and for a
 * library linked before libc alike; the plain read/write/open/close fall
 * back to the system call if that fails, the others fail with ENOSYS.
 */
#ifndef HBP_WRAP_POSIX_H
#define HBP_WRAP_POSIX_H

#include "internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

/* the real function `name`, looked up once (a racing second lookup is harmless) */
static void *hbp_resolve(void **cache, const char *name)
{
    void *p = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
    if (!p) {
        p = dlsym(RTLD_NEXT, name);
        __atomic_store_n(cache, p, __ATOMIC_RELEASE);
    }
    return p;
}

/* the mode argument of open(), if the flags say there is one */
static inline mode_t open_mode(int flags, va_list ap)
{
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

/* after a counted call: one call in m, bytes (if > 0) in m_bytes, the
 * call's errno restored after our own bookkeeping */
static inline void hbp_posix_done(unsigned m, unsigned m_bytes, long long bytes, int err)
{
    hbp_add(m, 1);
    if (bytes > 0)
        hbp_add(m_bytes, (uint64_t)bytes);
    hbp_leave();
    errno = err;
}

#endif /* HBP_WRAP_POSIX_H */
