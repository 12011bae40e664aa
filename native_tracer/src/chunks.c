/*
 * chunks.c -- the chunk area in units (hbtrace_format.h, version 2): where
 * a unit is mapped, handing out a thread's next chunk (a free run of units,
 * or fresh ones at the allocation point), and taking back the units an
 * ended thread did not use.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

/* ------------------------------------------------------------------ */
/* chunks                                                              */

/* Address of unit i, and in *ext_end the first unit past its extent; the
 * caller has seen mapped_units > i (acquire). */
char *hbt_unit_span(uint64_t i, uint64_t *ext_end)
{
    uint32_t lo = 0, hi = __atomic_load_n(&hbt_g.n_extents, __ATOMIC_ACQUIRE);
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (hbt_g.ext[mid].first <= i)
            lo = mid;
        else
            hi = mid;
    }
    const struct hbt_extent *e = &hbt_g.ext[lo];
    if (ext_end)
        *ext_end = e->first + e->count;
    return e->base + (i - e->first) * HBT_UNIT_SIZE;
}

struct hbt_slot *hbt_unit_addr(uint64_t i)
{
    return (struct hbt_slot *)hbt_unit_span(i, NULL);
}

/* Units that may have been handed out and lie inside the file: the reach
 * of a scan over the chunk area. */
uint64_t hbt_units_handed_out(void)
{
    uint64_t n = __atomic_load_n(&hbt_g.next_unit, __ATOMIC_ACQUIRE);
    uint64_t mapped = __atomic_load_n(&hbt_g.mapped_units, __ATOMIC_ACQUIRE);
    uint64_t file = __atomic_load_n(&hbt_g.file_units, __ATOMIC_ACQUIRE);
    if (n > mapped)
        n = mapped;
    if (n > file)
        n = file;
    return n < hbt_g.max_units ? n : hbt_g.max_units;
}

/* ---- free runs of units (hbt_g.pieces) ----
 * Runs below the allocation point that no chunk uses: the tail of an ended
 * thread's last chunk (hbt_release_chunk), the gap the allocator skipped to
 * keep a chunk from crossing a chunk_units boundary. A run never crosses
 * such a boundary either (it lay inside one chunk, or before one). The
 * list is guarded by a spin lock that is only ever tried: a thread that
 * finds it busy does without (takes fresh units, or lets a run go, which
 * then stays zero in the file). Never from a signal handler. */

static int hbt_pieces_trylock(void)
{
    return !__atomic_exchange_n(&hbt_g.free_lock, 1, __ATOMIC_ACQUIRE);
}

static void hbt_pieces_unlock(void)
{
    __atomic_store_n(&hbt_g.free_lock, 0, __ATOMIC_RELEASE);
}

static void hbt_piece_put(uint64_t first, uint64_t count)
{
    if (count == 0 || !hbt_pieces_trylock())
        return;
    uint32_t n = hbt_g.n_pieces;
    if (n < HBT_MAX_PIECES) {
        hbt_g.pieces[n] = (struct hbt_piece){ first, count };
        __atomic_store_n(&hbt_g.n_pieces, n + 1, __ATOMIC_RELAXED);   /* peeked at unlocked */
    } else {
        /* full: the new run replaces the smallest, if it is larger */
        uint32_t k = 0;
        for (uint32_t j = 1; j < n; j++)
            if (hbt_g.pieces[j].count < hbt_g.pieces[k].count)
                k = j;
        if (hbt_g.pieces[k].count < count)
            hbt_g.pieces[k] = (struct hbt_piece){ first, count };
    }
    hbt_pieces_unlock();
}

/* `want` units from the smallest run that holds them. 1 and *first if found. */
static int hbt_piece_take(uint64_t want, uint64_t *first)
{
    if (__atomic_load_n(&hbt_g.n_pieces, __ATOMIC_RELAXED) == 0 || !hbt_pieces_trylock())
        return 0;
    uint32_t n = hbt_g.n_pieces, best = n;
    for (uint32_t j = 0; j < n; j++)
        if (hbt_g.pieces[j].count >= want &&
            (best == n || hbt_g.pieces[j].count < hbt_g.pieces[best].count))
            best = j;
    int found = best < n;
    if (found) {
        struct hbt_piece *p = &hbt_g.pieces[best];
        *first = p->first;
        p->first += want;
        p->count -= want;
        if (p->count == 0) {
            hbt_g.pieces[best] = hbt_g.pieces[n - 1];
            __atomic_store_n(&hbt_g.n_pieces, n - 1, __ATOMIC_RELAXED);
        }
    }
    hbt_pieces_unlock();
    return found;
}

/*
 * Hand out `want` fresh units for a chunk: a free run if one is large
 * enough, else from the allocation point, skipping to the next multiple of
 * chunk_units when the chunk would cross it (the skipped gap becomes a free
 * run). Lock-free unless the file has to grow (or, after the trim at exit,
 * be extended again), which a signal handler (no HBT_M_GROW) never does.
 *
 * The compare-and-swap of next_unit and the load of file_units are seq_cst
 * (on x86 the load is the same instruction as a relaxed one):
 * hbt_trim_locked lowers file_units and then reads next_unit, both seq_cst,
 * so that every unit handed out is either seen by the trim (and kept in the
 * file) or sees the lowered file_units here (and extends the file under
 * g.lock before the chunk is touched). Free runs lie below an allocation
 * point the file already covers.
 */
static struct hbt_slot *hbt_take_chunk(unsigned mode, uint64_t want, uint64_t *index)
{
    if (__atomic_load_n(&hbt_g.full, __ATOMIC_ACQUIRE))
        return NULL;
    uint64_t i;
    if (!(mode & HBT_M_SIGNAL) && hbt_piece_take(want, &i)) {
        *index = i;
        return hbt_unit_addr(i);
    }
    uint64_t cur = __atomic_load_n(&hbt_g.next_unit, __ATOMIC_SEQ_CST), end;
    for (;;) {
        uint64_t in = cur % hbt_g.chunk_units;
        i = in + want > hbt_g.chunk_units ? cur - in + hbt_g.chunk_units : cur;
        end = i + want;
        if (end > hbt_g.max_units) {
            char why[64] = "";
            if (!(mode & HBT_M_SIGNAL))
                snprintf(why, sizeof why, "%s=%llu", hbt_env_name(HBT_ENV_HBTRACE_MAX_MB),
                         (unsigned long long)hbt_g.max_mb);
            hbt_set_full(mode, why, 0);
            return NULL;
        }
        if (__atomic_compare_exchange_n(&hbt_g.next_unit, &cur, end, 0, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST))
            break;
    }
    if (end > __atomic_load_n(&hbt_g.mapped_units, __ATOMIC_ACQUIRE) ||
        end > __atomic_load_n(&hbt_g.file_units, __ATOMIC_SEQ_CST)) {
        /* units given up here stay zero: no chunk begins in them */
        if (!(mode & HBT_M_GROW) || !hbt_lock())
            return NULL;
        int ok = hbt_grow_locked(end - 1, mode);
        hbt_unlock();
        if (!ok)
            return NULL;
    }
    if (i > cur && !(mode & HBT_M_SIGNAL))
        hbt_piece_put(cur, i - cur);
    *index = i;
    return hbt_unit_addr(i);
}

/* Units of the calling thread's next chunk: one for its first (a thread
 * that records only its start and end costs one unit), twice the previous
 * for each further one up to the largest, so that a beating thread soon
 * takes a new chunk only every ~2000 records; one again after its end. */
static uint64_t hbt_chunk_want(const struct hbt_tls *t)
{
    if (t->end_recorded || t->chunk_seq == 0)
        return 1;
    if (t->chunk_seq >= 31)
        return hbt_g.chunk_units;
    uint64_t n = (uint64_t)1 << t->chunk_seq;
    return n < hbt_g.chunk_units ? n : hbt_g.chunk_units;
}

int hbt_new_chunk(struct hbt_tls *t, unsigned mode)
{
    uint64_t index = 0;
    uint64_t want = hbt_chunk_want(t);
    struct hbt_slot *c = hbt_take_chunk(mode, want, &index);
    if (!c)
        return 0;
    /* before the chunk is used: wakes (or first starts) the pre-faulter
     * when its headroom runs low; one atomic load otherwise */
    hbt_prefault_kick(t, index, mode);
    struct hbt_chunk_header *h = (struct hbt_chunk_header *)c;
    h->os_tid = (uint64_t)syscall(SYS_gettid);
    h->thread_slot = t->thread_slot;
    h->chunk_seq = t->chunk_seq++;
    h->user_thread = t->user_set ? t->user_thread : -1;
    h->reserved = 0;
    h->capacity = (uint32_t)(want * hbt_g.unit_slots);
    __atomic_store_n(&h->magic, HBT_CHUNK_MAGIC, __ATOMIC_RELEASE);

    /* Switch chunks in an order that a signal handler interrupting us can
     * live with: it reads slots and next, and scans for a free slot. */
    t->limit = 0;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t->next = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t->slots = c;
    t->chunk_first = index;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t->limit = (uint32_t)(want * hbt_g.unit_slots) - 1;
    return 1;
}

/*
 * At the end of a thread (after its THREAD_END and the monitor's records):
 * give back the whole units its current chunk did not use. The chunk's
 * capacity is lowered first (a reader, or a crash, then sees a smaller
 * chunk followed by zero units), then the units become a free run that
 * another thread's chunk may begin in. The thread forgets the chunk first:
 * a record it still writes (a signal handler, a TLS destructor) takes a new
 * one-unit chunk; a signal handler that interrupts us before that finds
 * limit 0 and does the same, never writing into this chunk.
 */
void hbt_release_chunk(struct hbt_tls *t)
{
    struct hbt_slot *c = t->slots;
    if (!c || hbt_state() != HBT_ON || getpid() != hbt_g.pid)
        return;
    t->limit = 0;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    uint32_t used = t->next;
    uint64_t first = t->chunk_first;
    t->slots = NULL;
    t->next = 0;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    struct hbt_chunk_header *h = (struct hbt_chunk_header *)c;
    uint32_t cap = h->capacity;
    /* step over a record a signal handler stored before limit went to 0 */
    while (used < cap && __atomic_load_n(&c[used].kindflags, __ATOMIC_RELAXED))
        used++;
    uint32_t keep = (used + hbt_g.unit_slots - 1) / hbt_g.unit_slots;
    uint32_t total = cap / hbt_g.unit_slots;
    if (keep >= total)
        return;
    __atomic_store_n(&h->capacity, keep * hbt_g.unit_slots, __ATOMIC_RELEASE);
    hbt_piece_put(first + keep, total - keep);
}

