/*
 * memory.c -- the memory signal (HBT_REC_MEMORY): what each thread allocated
 * and freed, and the process's resident and in-use heap bytes, over time.
 *
 * Allocation counting. The allocator's entry points (malloc, calloc,
 * realloc, reallocarray, free, posix_memalign, aligned_alloc, memalign,
 * valloc, pvalloc) are interposed, as heaptrack's preload library does: each
 * calls the next definition (dlsym(RTLD_NEXT): glibc's, or an allocator the
 * program links, jemalloc or tcmalloc, which keeps working as before) and
 * adds the block's usable size (malloc_usable_size of that allocator) to the
 * calling thread's `allocated` or `freed` count: two additions to
 * thread-local variables, no lock, no system call, no record. Sizes are
 * usable sizes on both sides, so a block freed by the thread that allocated
 * it leaves that thread's balance (allocated - freed) where it was. A nested
 * call (reallocarray through realloc) counts once, in the outermost.
 *
 * Owned blocks. A block of HBT_MEM_OWN_BYTES or more is kept in a table with
 * the thread that allocated it (its thread_slot), and when another thread
 * frees it, the bytes count as freed by the one that allocated it (an atomic
 * addition to that thread's entry of hbt_mem_owned_freed), not by the one
 * that freed it: GraphicsMagick's threads free 54 MiB of each other's blocks
 * of 16 MiB or more in a run (and none smaller), so each thread's balance
 * read tens of MiB either way in a normal run, as much as a leak. The table
 * is open addressing without a lock (a key is taken with a compare-and-swap,
 * a freed one is left as a tombstone for the next block to take), probed
 * HBT_MEM_OWN_PROBES entries at most: a block that finds no entry, or whose
 * thread has no slot below HBT_MEM_OWNERS, counts as before. Only blocks of
 * that size pay for it (a hash and a few loads, beside a call that maps or
 * clears tens of KiB).
 * dlsym may allocate: while it runs, allocations come from a small static
 * pool, whose blocks are never given to the next allocator.
 *
 * Records. A thread that records (beats, waits) writes its counts at most
 * every HBT_MEM_PERIOD_NS, when they changed, from the cold path of the CPU
 * reading (hbt_cpu_gap, every 1 ms at most while the thread records) -- sooner
 * when its balance grew by HBT_MEM_STEP_BYTES since its last record, so that a
 * leak of a short run rises record after record -- and once more at its end.
 * At most every HBT_MEM_PROCESS_NS one of them also writes the process's
 * resident bytes (/proc/self/statm) and the bytes in use in
 * glibc's heap (mallinfo2: in-use chunks plus mmapped blocks; unknown when
 * the program's allocator is not glibc's); the exiting thread writes a last
 * one. A program whose own binary defines malloc (static allocator) keeps
 * it; then only the process records say something.
 *
 * HBTRACE_MEMORY=0 turns the records off (the counting stays: it cannot be
 * undone once the symbols are bound, and costs two additions).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

#define HBT_MEM_PERIOD_NS   20000000ull    /* a thread's records: at most every 20 ms ... */
#define HBT_MEM_STEP_BYTES  (1ll << 20)    /* ... or sooner once its balance grew this much */
#define HBT_MEM_PROCESS_NS  200000000ull   /* the process's: at most every 200 ms */
#define HBT_MEM_POOL        16384u         /* bytes dlsym may allocate while we resolve */
#define HBT_MEM_UNKNOWN     UINT64_MAX
#define HBT_MEM_OWN_BYTES   (64u << 10)    /* blocks this large are kept with their thread */
#define HBT_MEM_OWN_SLOTS   16384u         /* entries of the table of such blocks (a power of 2) */
#define HBT_MEM_OWN_PROBES  32u            /* entries a block looks at, at most */
#define HBT_MEM_OWNERS      4096u          /* threads (thread_slot) whose blocks are kept */
#define HBT_MEM_TOMB        ((uintptr_t)1) /* an entry whose block was freed */

typedef void *(*malloc_fn)(size_t);
typedef void *(*calloc_fn)(size_t, size_t);
typedef void *(*realloc_fn)(void *, size_t);
typedef void *(*reallocarray_fn)(void *, size_t, size_t);
typedef void  (*free_fn)(void *);
typedef int   (*posix_memalign_fn)(void **, size_t, size_t);
typedef void *(*memalign_fn)(size_t, size_t);
typedef size_t (*usable_fn)(void *);
typedef struct mallinfo2 (*mallinfo2_fn)(void);

static struct {
    malloc_fn         malloc;
    calloc_fn         calloc;
    realloc_fn        realloc;
    reallocarray_fn   reallocarray;
    free_fn           free;
    posix_memalign_fn posix_memalign;
    memalign_fn       aligned_alloc, memalign;
    malloc_fn         valloc, pvalloc;
    usable_fn         usable;
    mallinfo2_fn      mallinfo2;   /* NULL unless the next malloc is glibc's */
    int               ready;       /* atomic: every pointer above is set */
} next;

static int hbt_mem_records = 1;         /* HBTRACE_MEMORY */

/* the owned blocks: address (0 empty, HBT_MEM_TOMB freed) and thread_slot + 1 of the
 * thread that allocated it (0 while it is being written); and per thread_slot, the bytes of
 * its blocks that other threads freed */
static uintptr_t hbt_mem_own_key[HBT_MEM_OWN_SLOTS];
static uint32_t hbt_mem_own_who[HBT_MEM_OWN_SLOTS];
static uint64_t hbt_mem_owned_freed[HBT_MEM_OWNERS];
/* per thread_slot, as of its last memory record (written by that thread, read at the exit):
 * its counts (freed with those of hbt_mem_owned_freed), hbt_mem_owned_freed then, and its
 * thread number + 1 (0: it wrote none) */
static uint64_t hbt_mem_last_allocated[HBT_MEM_OWNERS], hbt_mem_last_freed[HBT_MEM_OWNERS];
static uint64_t hbt_mem_last_owned[HBT_MEM_OWNERS];
static int64_t hbt_mem_last_thread[HBT_MEM_OWNERS];
static uint64_t hbt_mem_process_at;     /* atomic: when the last process record was taken */

#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)   /* see below */
/* the pool dlsym allocates from while we resolve */
static _Alignas(16) unsigned char pool[HBT_MEM_POOL];
static size_t pool_used;                /* atomic */
static int resolving;                   /* atomic: a thread is resolving */

static int in_pool(const void *p)
{
    return (const unsigned char *)p >= pool && (const unsigned char *)p < pool + sizeof pool;
}

static void *pool_alloc(size_t n, size_t align)
{
    if (align < 16)
        align = 16;
    if (n > sizeof pool || (align & (align - 1)))
        return NULL;
    size_t used = __atomic_load_n(&pool_used, __ATOMIC_RELAXED), start;
    do {
        start = (used + align - 1) & ~(align - 1);
        if (start > sizeof pool || n > sizeof pool - start)
            return NULL;
    } while (!__atomic_compare_exchange_n(&pool_used, &used, start + n, 0, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
    return pool + start;   /* zeroed: static storage, never reused */
}

/* Same object as glibc's mallinfo2? Only then does it describe the heap. */
static int same_object(void *a, void *b)
{
    Dl_info ia, ib;
    return a && b && dladdr(a, &ia) && dladdr(b, &ib) && ia.dli_fbase == ib.dli_fbase;
}

/* Resolve the next allocator. Returns 0 while another thread resolves, or
 * when we are the nested call of our own dlsym: the caller uses the pool. */
static int hbt_mem_resolve(void)
{
    if (__atomic_load_n(&next.ready, __ATOMIC_ACQUIRE))
        return 1;
    int expected = 0;
    if (!__atomic_compare_exchange_n(&resolving, &expected, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return 0;
    next.malloc         = (malloc_fn)dlsym(RTLD_NEXT, "malloc");
    next.calloc         = (calloc_fn)dlsym(RTLD_NEXT, "calloc");
    next.realloc        = (realloc_fn)dlsym(RTLD_NEXT, "realloc");
    next.reallocarray   = (reallocarray_fn)dlsym(RTLD_NEXT, "reallocarray");
    next.free           = (free_fn)dlsym(RTLD_NEXT, "free");
    next.posix_memalign = (posix_memalign_fn)dlsym(RTLD_NEXT, "posix_memalign");
    next.aligned_alloc  = (memalign_fn)dlsym(RTLD_NEXT, "aligned_alloc");
    next.memalign       = (memalign_fn)dlsym(RTLD_NEXT, "memalign");
    next.valloc         = (malloc_fn)dlsym(RTLD_NEXT, "valloc");
    next.pvalloc        = (malloc_fn)dlsym(RTLD_NEXT, "pvalloc");
    next.usable         = (usable_fn)dlsym(RTLD_NEXT, "malloc_usable_size");
    mallinfo2_fn mi     = (mallinfo2_fn)dlsym(RTLD_NEXT, "mallinfo2");
    next.mallinfo2      = same_object((void *)mi, (void *)next.malloc) ? mi : NULL;
    if (!next.malloc || !next.free || !next.calloc || !next.realloc) {
        /* nothing to forward to: cannot happen with a libc; leave resolving set,
         * so that every call keeps using the pool (and fails once it is full) */
        return 0;
    }
    __atomic_store_n(&next.ready, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&resolving, 0, __ATOMIC_RELEASE);
    return 1;
}
#endif /* not sanitized */

static inline size_t usable(void *p)
{
    return next.usable && p ? next.usable(p) : 0;
}

#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)   /* (see below) */
static inline uint32_t own_hash(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p >> 4;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (uint32_t)x & (HBT_MEM_OWN_SLOTS - 1u);
}

/* Keep block p (of HBT_MEM_OWN_BYTES or more) with the thread of slot who - 1 (0: none). */
static __attribute__((noinline)) void own_put_large(uint32_t who, void *p)
{
    if (!p || !who || who > HBT_MEM_OWNERS)
        return;
    uint32_t h = own_hash(p);
    for (uint32_t k = 0; k < HBT_MEM_OWN_PROBES; k++) {
        uint32_t i = (h + k) & (HBT_MEM_OWN_SLOTS - 1u);
        uintptr_t key = __atomic_load_n(&hbt_mem_own_key[i], __ATOMIC_RELAXED);
        if ((key == 0 || key == HBT_MEM_TOMB) &&
            __atomic_compare_exchange_n(&hbt_mem_own_key[i], &key, (uintptr_t)p, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
            __atomic_store_n(&hbt_mem_own_who[i], who, __ATOMIC_RELEASE);
            return;
        }
    }
}

/* (the common case, a block under HBT_MEM_OWN_BYTES, in the caller) */
#define own_put(who, p, n)  ((n) >= HBT_MEM_OWN_BYTES ? own_put_large((who), (p)) : (void)0)
#define own_take(p, n)      ((n) >= HBT_MEM_OWN_BYTES ? own_take_large(p) : 0u)

/* Thread t's slot + 1 for own_put; 0 when it has none (not registered yet, or too many). */
static inline uint32_t own_self(const struct hbt_tls *t)
{
    return t->registered && t->thread_slot < HBT_MEM_OWNERS ? t->thread_slot + 1u : 0u;
}

/* Block p (of HBT_MEM_OWN_BYTES or more) is about to go back to the allocator: its entry taken out (before,
 * so that the next thread given its address finds the entry free). Returns the slot + 1 of
 * the thread it was kept with, 0 when it was not kept. */
static __attribute__((noinline)) uint32_t own_take_large(void *p)
{
    if (!p)
        return 0;
    uint32_t h = own_hash(p);
    for (uint32_t k = 0; k < HBT_MEM_OWN_PROBES; k++) {
        uint32_t i = (h + k) & (HBT_MEM_OWN_SLOTS - 1u);
        uintptr_t key = __atomic_load_n(&hbt_mem_own_key[i], __ATOMIC_ACQUIRE);
        if (key == 0)
            return 0;
        if (key != (uintptr_t)p)
            continue;
        uint32_t who = __atomic_load_n(&hbt_mem_own_who[i], __ATOMIC_ACQUIRE);
        __atomic_store_n(&hbt_mem_own_who[i], 0u, __ATOMIC_RELAXED);
        __atomic_store_n(&hbt_mem_own_key[i], HBT_MEM_TOMB, __ATOMIC_RELEASE);
        return who;
    }
    return 0;
}

/* n bytes of a block kept with `who` (own_take) freed by thread t: the allocating thread's
 * when another thread allocated it, t's own else. */
static inline void own_freed(struct hbt_tls *t, uint32_t who, size_t n)
{
    if (__builtin_expect(who != 0, 0) && who != own_self(t))
        __atomic_fetch_add(&hbt_mem_owned_freed[who - 1u], (uint64_t)n, __ATOMIC_RELAXED);
    else
        t->mem_freed += n;
}
#endif

/* The sanitizers (make asan, make tsan) bring allocators of their own, and ThreadSanitizer's
 * start-up calls malloc before it can run instrumented code: a sanitized build does not
 * interpose the allocator (no per-thread counts; the process records still come). */
#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
/* Counting: only in the outermost wrapper of this thread. */
#define HBT_MEM_ENTER(t)  ((t)->mem_depth++ == 0)
#define HBT_MEM_LEAVE(t)  ((t)->mem_depth--)

/* Block p allocated by thread t: its usable size counted, and a large one kept with t. */
static inline void allocated(struct hbt_tls *t, void *p)
{
    size_t u = usable(p);
    t->mem_allocated += u;
    own_put(own_self(t), p, u);
}

HBT_EXPORT void *malloc(size_t n)
{
    if (__builtin_expect(!next.ready, 0) && !hbt_mem_resolve())
        return pool_alloc(n, 16);
    struct hbt_tls *t = &hbt_tls;
    int outer = HBT_MEM_ENTER(t);
    void *p = next.malloc(n);
    if (outer && p)
        allocated(t, p);
    HBT_MEM_LEAVE(t);
    return p;
}

HBT_EXPORT void *calloc(size_t k, size_t n)
{
    if (__builtin_expect(!next.ready, 0) && !hbt_mem_resolve()) {
        size_t bytes;
        if (__builtin_mul_overflow(k, n, &bytes))
            return NULL;
        return pool_alloc(bytes, 16);
    }
    struct hbt_tls *t = &hbt_tls;
    int outer = HBT_MEM_ENTER(t);
    void *p = next.calloc(k, n);
    if (outer && p)
        allocated(t, p);
    HBT_MEM_LEAVE(t);
    return p;
}

HBT_EXPORT void free(void *p)
{
    if (!p || in_pool(p))
        return;
    if (__builtin_expect(!next.ready, 0) && !hbt_mem_resolve())
        return;   /* cannot be: a block not from the pool came from the next allocator */
    struct hbt_tls *t = &hbt_tls;
    int outer = HBT_MEM_ENTER(t);
    if (outer) {
        size_t u = usable(p);
        own_freed(t, own_take(p, u), u);
    }
    next.free(p);
    HBT_MEM_LEAVE(t);
}

/* A block of the pool grown: a new one from the next allocator, the old one kept. */
static void *from_pool(void *p, size_t n)
{
    void *q = malloc(n);
    if (q) {
        size_t room = (size_t)(pool + sizeof pool - (unsigned char *)p);
        memcpy(q, p, n < room ? n : room);
    }
    return q;
}

/* Block p (usable size `before`, kept with `who`: own_take) resized to q by the calling thread
 * t: `done`, p freed and q allocated by t; else the call failed, p is untouched and kept as it
 * was. */
static void resized(struct hbt_tls *t, void *p, size_t before, uint32_t who, void *q, int done)
{
    if (!done) {
        own_put(who, p, before);
        return;
    }
    own_freed(t, who, before);
    allocated(t, q);
}

HBT_EXPORT void *realloc(void *p, size_t n)
{
    if (__builtin_expect(!next.ready, 0) && !hbt_mem_resolve()) {
        if (!p)
            return pool_alloc(n, 16);
        return NULL;   /* growing a pool block while resolving: never seen */
    }
    if (in_pool(p))
        return from_pool(p, n);
    struct hbt_tls *t = &hbt_tls;
    int outer = HBT_MEM_ENTER(t);
    size_t before = outer ? usable(p) : 0;
    uint32_t who = outer ? own_take(p, before) : 0;
    void *q = next.realloc(p, n);
    if (outer)
        resized(t, p, before, who, q, q || n == 0);
    HBT_MEM_LEAVE(t);
    return q;
}

HBT_EXPORT void *reallocarray(void *p, size_t k, size_t n)
{
    size_t bytes;
    if (__builtin_mul_overflow(k, n, &bytes)) {
        errno = ENOMEM;
        return NULL;
    }
    if (__builtin_expect(!next.ready, 0) && !hbt_mem_resolve())
        return p ? NULL : pool_alloc(bytes, 16);
    if (in_pool(p))
        return from_pool(p, bytes);
    if (!next.reallocarray)
        return realloc(p, bytes);
    struct hbt_tls *t = &hbt_tls;
    int outer = HBT_MEM_ENTER(t);
    size_t before = outer ? usable(p) : 0;
    uint32_t who = outer ? own_take(p, before) : 0;
    void *q = next.reallocarray(p, k, n);
    if (outer)
        resized(t, p, before, who, q, q || bytes == 0);
    HBT_MEM_LEAVE(t);
    return q;
}

HBT_EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
    if (__builtin_expect(!next.ready, 0) && !hbt_mem_resolve()) {
        void *p = pool_alloc(n, align);
        if (!p)
            return ENOMEM;
        *out = p;
        return 0;
    }
    if (!next.posix_memalign)
        return ENOMEM;
    struct hbt_tls *t = &hbt_tls;
    int outer = HBT_MEM_ENTER(t);
    int err = next.posix_memalign(out, align, n);
    if (outer && err == 0)
        allocated(t, *out);
    HBT_MEM_LEAVE(t);
    return err;
}

static void *hbt_aligned(memalign_fn fn, size_t align, size_t n)
{
    if (__builtin_expect(!next.ready, 0) && !hbt_mem_resolve())
        return pool_alloc(n, align);
    if (!fn) {
        errno = ENOMEM;
        return NULL;
    }
    struct hbt_tls *t = &hbt_tls;
    int outer = HBT_MEM_ENTER(t);
    void *p = fn(align, n);
    if (outer && p)
        allocated(t, p);
    HBT_MEM_LEAVE(t);
    return p;
}

HBT_EXPORT void *aligned_alloc(size_t align, size_t n)
{
    if (!next.ready)
        hbt_mem_resolve();
    return hbt_aligned(next.aligned_alloc, align, n);
}

HBT_EXPORT void *memalign(size_t align, size_t n)
{
    if (!next.ready)
        hbt_mem_resolve();
    return hbt_aligned(next.memalign, align, n);
}

static void *hbt_paged(malloc_fn fn, size_t n)
{
    if (__builtin_expect(!next.ready, 0) && !hbt_mem_resolve())
        return pool_alloc(n, 4096);
    if (!fn) {
        errno = ENOMEM;
        return NULL;
    }
    struct hbt_tls *t = &hbt_tls;
    int outer = HBT_MEM_ENTER(t);
    void *p = fn(n);
    if (outer && p)
        allocated(t, p);
    HBT_MEM_LEAVE(t);
    return p;
}

HBT_EXPORT void *valloc(size_t n)
{
    if (!next.ready)
        hbt_mem_resolve();
    return hbt_paged(next.valloc, n);
}

HBT_EXPORT void *pvalloc(size_t n)
{
    if (!next.ready)
        hbt_mem_resolve();
    return hbt_paged(next.pvalloc, n);
}

#endif /* not sanitized */

/* ------------------------------------------------------------------ */
/* records                                                             */

void hbt_memory_config(void)
{
    const char *v = hbt_getenv(HBT_ENV_HBTRACE_MEMORY);
    hbt_mem_records = !(v && strcmp(v, "0") == 0);
}

static void hbt_mem_put(struct hbt_tls *t, uint64_t now, int32_t thread, uint16_t flags, uint64_t a, uint64_t b)
{
    uint32_t i = hbt_take_slot(t, HBT_MODE_BEAT);
    if (i == HBT_NO_SLOT)
        return;
    hbt_store(t, i, now, hbt_kindflags(HBT_REC_MEMORY, flags), (uint32_t)a, thread, (int32_t)(uint32_t)b,
              (int32_t)(uint32_t)(b >> 32), (uint32_t)(a >> 32));
}

/* Resident bytes from /proc/self/statm (no allocation, three system calls). */
static uint64_t hbt_resident_bytes(void)
{
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return HBT_MEM_UNKNOWN;
    char buf[128];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return HBT_MEM_UNKNOWN;
    buf[n] = 0;
    const char *s = buf;
    while (*s && *s != ' ')   /* size, then resident */
        s++;
    if (*s != ' ')
        return HBT_MEM_UNKNOWN;
    s++;
    uint64_t pages = 0;
    int digits = 0;
    for (; *s >= '0' && *s <= '9' && digits < 19; s++, digits++)
        pages = pages * 10 + (uint64_t)(*s - '0');
    long page = sysconf(_SC_PAGESIZE);
    return digits ? pages * (uint64_t)(page > 0 ? page : 4096) : HBT_MEM_UNKNOWN;
}

static void hbt_mem_process(struct hbt_tls *t, uint64_t now, int32_t thread, uint16_t source)
{
    uint64_t heap = HBT_MEM_UNKNOWN;
    if (next.ready && next.mallinfo2) {
        struct mallinfo2 mi = next.mallinfo2();
        heap = (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
    }
    hbt_mem_put(t, now, thread, (uint16_t)(source | (HBT_MEM_PROCESS << 4)), hbt_resident_bytes(), heap);
}

/* At the exit: for every other thread that wrote memory records and whose blocks others freed
 * since its last one (GraphicsMagick's worker, idle in the pool from 4.8 s while the master
 * freed its 55 MiB image at 8 s: its balance stayed up), its counts with them (HBT_MEM_OWNED). */
static void hbt_mem_owned_at_exit(struct hbt_tls *t, uint64_t now, uint16_t source)
{
    uint32_t n = __atomic_load_n(&hbt_g.nthreads, __ATOMIC_RELAXED);
    if (n > HBT_MEM_OWNERS)
        n = HBT_MEM_OWNERS;
    for (uint32_t s = 0; s < n; s++) {
        if (t->registered && s == t->thread_slot)
            continue;
        int64_t who = __atomic_load_n(&hbt_mem_last_thread[s], __ATOMIC_ACQUIRE);
        uint64_t owned = __atomic_load_n(&hbt_mem_owned_freed[s], __ATOMIC_RELAXED);
        uint64_t was = __atomic_load_n(&hbt_mem_last_owned[s], __ATOMIC_RELAXED);
        if (!who || owned <= was)
            continue;
        uint64_t a = __atomic_load_n(&hbt_mem_last_allocated[s], __ATOMIC_RELAXED);
        uint64_t f = __atomic_load_n(&hbt_mem_last_freed[s], __ATOMIC_RELAXED) + (owned - was);
        hbt_mem_put(t, now, (int32_t)(who - 1), (uint16_t)(source | (HBT_MEM_OWNED << 4)), a, f);
        __atomic_store_n(&hbt_mem_last_owned[s], owned, __ATOMIC_RELAXED);
    }
}

/* The bytes of thread t's kept blocks that other threads freed. */
static uint64_t hbt_mem_owned(const struct hbt_tls *t)
{
    return t->registered && t->thread_slot < HBT_MEM_OWNERS
               ? __atomic_load_n(&hbt_mem_owned_freed[t->thread_slot], __ATOMIC_RELAXED) : 0;
}

/* From the cold path of a recording thread (hbt_cpu_gap), at most every
 * HBT_MEM_PERIOD_NS, or sooner when its balance (allocated - freed) grew by
 * HBT_MEM_STEP_BYTES since its last record; at its end (final 1) and at the process's exit (final
 * 2), whatever the time, if it wrote memory records before: a thread or a
 * process that never recorded anything gets none (an idle thread stays a
 * few bytes, a shell child stays a bystander). */
void hbt_memory_track(struct hbt_tls *t, uint64_t now, int32_t thread, uint16_t source, int final)
{
    if (!hbt_mem_records || t->internal || t->monitor)
        return;
    /* at the process's exit the process record is due whenever the process
     * recorded before, even from a thread that never did (the main thread
     * that only joined its workers) */
    /* (a balance that grew by HBT_MEM_STEP_BYTES since its last record is written at once,
     * at the cold path's 1 ms at most: NPB FT's leaking victim, 66 MB kept in 0.13 s of
     * beats, had 2 records in which it rose where a leak needs config.LEAK_MIN_RISES) */
    int64_t grew = (int64_t)(t->mem_allocated - t->mem_freed - hbt_mem_owned(t)) -
                   (int64_t)(t->mem_rec_allocated - t->mem_rec_freed);
    int own = final ? t->mem_recorded
                    : now - t->mem_at_ns >= HBT_MEM_PERIOD_NS ||
                      (t->mem_recorded && grew >= HBT_MEM_STEP_BYTES);
    if (!own && final != 2)
        return;
    if (own)
        t->mem_at_ns = now;
    uint64_t owned = hbt_mem_owned(t);
    uint64_t a = t->mem_allocated, f = t->mem_freed + owned;
    if (own && (a != t->mem_rec_allocated || f != t->mem_rec_freed || !t->mem_recorded)) {
        t->mem_rec_allocated = a;
        t->mem_rec_freed = f;
        t->mem_recorded = 1;
        hbt_mem_put(t, now, thread, (uint16_t)(source | (HBT_MEM_THREAD << 4)), a, f);
        if (t->registered && t->thread_slot < HBT_MEM_OWNERS) {
            uint32_t s = t->thread_slot;
            __atomic_store_n(&hbt_mem_last_allocated[s], a, __ATOMIC_RELAXED);
            __atomic_store_n(&hbt_mem_last_freed[s], f, __ATOMIC_RELAXED);
            __atomic_store_n(&hbt_mem_last_owned[s], owned, __ATOMIC_RELAXED);
            __atomic_store_n(&hbt_mem_last_thread[s], (int64_t)thread + 1, __ATOMIC_RELEASE);
        }
    }
    if (final == 2)
        hbt_mem_owned_at_exit(t, now, source);
    uint64_t at = __atomic_load_n(&hbt_mem_process_at, __ATOMIC_RELAXED);
    if ((final == 2 ? at != 0 : now - at >= HBT_MEM_PROCESS_NS) &&
        __atomic_compare_exchange_n(&hbt_mem_process_at, &at, now, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        hbt_mem_process(t, now, thread, source);
}

/* After fork: the child's process records start again, and its threads' slots (numbered
 * anew) own none of the blocks the parent kept: those count as before. */
void hbt_memory_fork_child(void)
{
    __atomic_store_n(&hbt_mem_process_at, 0, __ATOMIC_RELAXED);
    memset(hbt_mem_own_key, 0, sizeof hbt_mem_own_key);
    memset(hbt_mem_own_who, 0, sizeof hbt_mem_own_who);
    memset(hbt_mem_owned_freed, 0, sizeof hbt_mem_owned_freed);
    memset(hbt_mem_last_thread, 0, sizeof hbt_mem_last_thread);
    memset(hbt_mem_last_owned, 0, sizeof hbt_mem_last_owned);
}
