/*
 * bins.c -- quantisation of metric values into bins (seed 004, SPEC 6).
 *
 * The rule, used online per rank (at most HBP_RANK_BINS bins) and offline
 * for the program-wide table (at most HBP_RUN_BINS bins):
 *   - a value equal to a bin's value joins that bin (count + 1);
 *   - otherwise, while there is room, it becomes a new bin;
 *   - otherwise the two nearest neighbours in value order merge, nearness
 *     being the relative distance |a-b| / min(|a|,|b|) (0 if a == b,
 *     infinite if exactly one of them is 0), ties to the pair with the
 *     smaller values. Online, the candidates are the bins and the new value
 *     (257 values): if the winning pair contains the new value, the value is
 *     absorbed by its neighbour's bin; otherwise the two bins merge into the
 *     lower of their two slots and the freed slot takes the new value.
 *   - a merged bin's value is the count-weighted mean, its count the sum.
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void hbp_bins_reset(struct hbp_bins *b)
{
    memset(b, 0, sizeof *b);
}

double hbp_reldist(double a, double b)
{
    if (a == b)
        return 0.0;
    double lo = fmin(fabs(a), fabs(b));
    if (lo == 0.0)
        return INFINITY;
    return fabs(a - b) / lo;
}

/* weighted mean of (a, ca) and (b, cb), kept inside [min(a,b), max(a,b)] */
static double wmean(double a, uint64_t ca, double b, uint64_t cb)
{
    double m = a + (b - a) * ((double)cb / ((double)ca + (double)cb));
    double lo = fmin(a, b), hi = fmax(a, b);
    return m < lo ? lo : m > hi ? hi : m;
}

static int log_bin(unsigned m, uint16_t kind, uint16_t flags, unsigned slot,
                   unsigned from, const struct hbp_bins *b)
{
    struct hbp_bin_record r;
    memset(&r, 0, sizeof r);
    r.value = b->value[slot];
    r.count = b->count[slot];
    r.segment = hbp_g.segment;
    r.metric = (uint16_t)m;
    r.slot = (uint16_t)slot;
    r.from_slot = (uint16_t)from;
    r.kind = kind;
    r.flags = flags;
    return hbp_file_put(&r);
}

/* first position p in b->order with value >= v */
static unsigned lower_bound(const struct hbp_bins *b, double v)
{
    unsigned lo = 0, hi = b->n;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        if (b->value[b->order[mid]] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* recompute the gaps next to order position p */
static void gaps_around(struct hbp_bins *b, unsigned p)
{
    if (p > 0 && p < b->n)
        b->gap[p - 1] = hbp_reldist(b->value[b->order[p - 1]], b->value[b->order[p]]);
    if (p + 1 < b->n)
        b->gap[p] = hbp_reldist(b->value[b->order[p]], b->value[b->order[p + 1]]);
}

static void order_insert(struct hbp_bins *b, unsigned p, unsigned slot)
{
    memmove(&b->order[p + 1], &b->order[p], (b->n - p) * sizeof b->order[0]);
    if (b->n >= p + 2)   /* the gaps right of the split pair move one up */
        memmove(&b->gap[p + 1], &b->gap[p], (b->n - 1 - p) * sizeof b->gap[0]);
    b->order[p] = (uint16_t)slot;
    b->n++;
    gaps_around(b, p);
}

static void order_remove(struct hbp_bins *b, unsigned p)
{
    memmove(&b->order[p], &b->order[p + 1], (b->n - p - 1) * sizeof b->order[0]);
    if (b->n >= p + 3)   /* the gaps right of the removed entry move one down */
        memmove(&b->gap[p], &b->gap[p + 1], (b->n - p - 2) * sizeof b->gap[0]);
    b->n--;
    if (p > 0)
        gaps_around(b, p - 1);
    else
        gaps_around(b, 0);
}

/* first index of the smallest gap[i], lo <= i < hi; sets *best (INFINITY if none) */
static unsigned min_gap(const struct hbp_bins *b, unsigned lo, unsigned hi, double *best)
{
    unsigned at = lo;
    double m = INFINITY;
    for (unsigned i = lo; i < hi; i++) {
        if (b->gap[i] < m) {
            m = b->gap[i];
            at = i;
        }
    }
    *best = m;
    return at;
}

int hbp_bins_add(unsigned m, uint64_t raw)
{
    struct hbp_bins *b = &hbp_g.bins[m];
    double v = (double)raw;
    unsigned p = lower_bound(b, v);
    if (p < b->n && b->value[b->order[p]] == v) {
        b->count[b->order[p]]++;
        return b->order[p];
    }
    if (b->n < HBP_RANK_BINS) {
        /* slots fill in order and a freed slot is refilled at once, so the
         * free slots are exactly n..HBP_RANK_BINS-1 */
        unsigned slot = b->n;
        b->value[slot] = v;
        b->count[slot] = 1;
        order_insert(b, p, slot);
        return log_bin(m, HBP_REC_BIN_SET, HBP_BIN_NEW, slot, HBP_NO_SLOT, b) ? -1 : (int)slot;
    }

    /* Full. The 257 candidates in value order: position i holds order[i]
     * for i < p, the new value at p, order[i-1] for i > p. Find the nearest
     * adjacent pair (pos, pos+1), the lowest pos on ties. The pairs in
     * position order: existing gaps 0..p-2 (positions 0..p-2), the new
     * value's left pair (p-1) and right pair (p), existing gaps p..n-2
     * (positions p+1..n-1); gap p-1 is split by the new value. */
    const unsigned n = b->n;
    double best = INFINITY, d;
    unsigned bpos = 0;
    int found = 0;
    if (p >= 2) {
        unsigned i = min_gap(b, 0, p - 1, &d);
        best = d, bpos = i, found = 1;
    }
    if (p > 0) {
        d = hbp_reldist(b->value[b->order[p - 1]], v);
        if (!found || d < best)
            best = d, bpos = p - 1, found = 1;
    }
    if (p < n) {
        d = hbp_reldist(v, b->value[b->order[p]]);
        if (!found || d < best)
            best = d, bpos = p, found = 1;
    }
    if (p + 1 < n) {
        unsigned i = min_gap(b, p, n - 1, &d);
        if (!found || d < best)
            best = d, bpos = i + 1, found = 1;
    }
    if (bpos + 1 == p || bpos == p) {
        /* the new value is absorbed by its neighbour's bin */
        unsigned q = bpos + 1 == p ? p - 1 : p;
        unsigned slot = b->order[q];
        b->value[slot] = wmean(b->value[slot], b->count[slot], v, 1);
        b->count[slot]++;
        gaps_around(b, q);
        return log_bin(m, HBP_REC_BIN_SET, HBP_BIN_ABSORB, slot, HBP_NO_SLOT, b) ? -1 : (int)slot;
    }
    /* two existing bins merge: at order positions o and o+1 */
    unsigned o = bpos < p ? bpos : bpos - 1;
    unsigned sa = b->order[o], sb = b->order[o + 1];
    unsigned keep = sa < sb ? sa : sb, gone = sa < sb ? sb : sa;
    double mv = wmean(b->value[sa], b->count[sa], b->value[sb], b->count[sb]);
    uint64_t mc = b->count[sa] + b->count[sb];
    b->value[keep] = mv;
    b->count[keep] = mc;
    b->order[o] = (uint16_t)keep;
    order_remove(b, o + 1);
    gaps_around(b, o);
    if (log_bin(m, HBP_REC_BIN_MERGE, 0, keep, gone, b))
        return -1;
    b->value[gone] = v;
    b->count[gone] = 1;
    order_insert(b, lower_bound(b, v), gone);
    return log_bin(m, HBP_REC_BIN_SET, HBP_BIN_NEW, gone, HBP_NO_SLOT, b) ? -1 : (int)gone;
}

/* ------------------------------------------------------------------ */
/* offline merge (rank 0 at MPI_Finalize)                               */

struct heap_item {
    double   dist;
    uint32_t left;     /* node id of the left element (= its sorted position) */
    uint32_t right;
    uint32_t vl, vr;   /* versions of both nodes when the pair was pushed */
};

static int item_less(const struct heap_item *a, const struct heap_item *b)
{
    if (a->dist != b->dist)
        return a->dist < b->dist;
    return a->left < b->left;
}

static void heap_push(struct heap_item *h, size_t *n, struct heap_item it)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!item_less(&it, &h[parent]))
            break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = it;
}

static struct heap_item heap_pop(struct heap_item *h, size_t *n)
{
    struct heap_item top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && item_less(&h[c + 1], &h[c]))
            c++;
        if (!item_less(&h[c], &last))
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0)
        h[i] = last;
    return top;
}

static const double *sort_keys;

static int cmp_index(const void *a, const void *b)
{
    double x = sort_keys[*(const uint32_t *)a], y = sort_keys[*(const uint32_t *)b];
    if (x < y)
        return -1;
    if (x > y)
        return 1;
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    return i < j ? -1 : i > j;
}

static uint32_t find(uint32_t *parent, uint32_t x)
{
    while (parent[x] != x) {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    return x;
}

int hbp_bins_merge_offline(const double *value, const uint64_t *count, size_t n,
                           unsigned maxbins, double *out_value, uint64_t *out_count,
                           uint16_t *map)
{
    if (n == 0)
        return 0;
    uint32_t *idx = malloc(n * sizeof *idx);
    uint32_t *node_of = malloc(n * sizeof *node_of);
    double *nv = malloc(n * sizeof *nv);
    uint64_t *nc = malloc(n * sizeof *nc);
    uint32_t *prev = malloc(n * sizeof *prev), *next = malloc(n * sizeof *next);
    uint32_t *ver = calloc(n, sizeof *ver), *parent = malloc(n * sizeof *parent);
    uint32_t *outi = malloc(n * sizeof *outi);
    struct heap_item *heap = malloc(3 * n * sizeof *heap);
    int result = -1;
    if (!idx || !node_of || !nv || !nc || !prev || !next || !ver || !parent || !outi || !heap)
        goto out;
    for (size_t i = 0; i < n; i++)
        idx[i] = (uint32_t)i;
    sort_keys = value;
    qsort(idx, n, sizeof *idx, cmp_index);

    /* nodes: one per distinct value, in ascending order */
    uint32_t nodes = 0;
    for (size_t k = 0; k < n; k++) {
        uint32_t i = idx[k];
        if (nodes > 0 && nv[nodes - 1] == value[i]) {
            nc[nodes - 1] += count[i];
        } else {
            nv[nodes] = value[i];
            nc[nodes] = count[i];
            nodes++;
        }
        node_of[i] = nodes - 1;
    }
    const uint32_t NONE = UINT32_MAX;
    for (uint32_t k = 0; k < nodes; k++) {
        prev[k] = k ? k - 1 : NONE;
        next[k] = k + 1 < nodes ? k + 1 : NONE;
        parent[k] = k;
    }
    size_t hn = 0;
    for (uint32_t k = 0; k + 1 < nodes; k++)
        heap_push(heap, &hn, (struct heap_item){ hbp_reldist(nv[k], nv[k + 1]), k, k + 1, 0, 0 });
    uint32_t alive = nodes;
    while (alive > maxbins && hn > 0) {
        struct heap_item it = heap_pop(heap, &hn);
        uint32_t l = it.left, r = it.right;
        if (parent[l] != l || parent[r] != r || next[l] != r || ver[l] != it.vl || ver[r] != it.vr)
            continue;   /* stale */
        nv[l] = wmean(nv[l], nc[l], nv[r], nc[r]);
        nc[l] += nc[r];
        parent[r] = l;
        next[l] = next[r];
        if (next[r] != NONE)
            prev[next[r]] = l;
        ver[l]++;
        alive--;
        if (prev[l] != NONE)
            heap_push(heap, &hn, (struct heap_item){ hbp_reldist(nv[prev[l]], nv[l]), prev[l], l,
                                                     ver[prev[l]], ver[l] });
        if (next[l] != NONE)
            heap_push(heap, &hn, (struct heap_item){ hbp_reldist(nv[l], nv[next[l]]), l, next[l],
                                                     ver[l], ver[next[l]] });
    }
    /* output in ascending order: walk from node 0 (never merged away:
     * a merge keeps the left node) */
    uint32_t out = 0;
    for (uint32_t k = 0; k != NONE; k = next[k]) {
        out_value[out] = nv[k];
        out_count[out] = nc[k];
        outi[k] = out++;
    }
    for (size_t i = 0; i < n; i++)
        map[i] = (uint16_t)outi[find(parent, node_of[i])];
    result = (int)out;
out:
    free(idx);
    free(node_of);
    free(nv);
    free(nc);
    free(prev);
    free(next);
    free(ver);
    free(parent);
    free(outi);
    free(heap);
    return result;
}
