/*
 * stream_search -- Rabin-Karp string matching as a stream pipeline through
 * instrumented queues (hbtrace_queue.h):
 *
 *   gen --"gen->hash"--> hash --"hash->verify<k>"--> verify<k> --"verify<k>->reduce"--> reduce
 *
 * gen produces the corpus, --mb MiB of "foobar" repeated with --pattern
 * written over it every --every bytes (the first occurrence at an offset
 * chosen from --seed), as chunk items of --chunk bytes (16-byte header +
 * text). hash runs the Rabin-Karp rolling hash (base 257 modulo the prime
 * 2^31 - 1) over the byte stream, across chunk boundaries, and sends every
 * position whose window hash equals the pattern's, with the window's text,
 * to --verifiers verify stages round robin (80-byte items); verify<k>
 * compares the text with the pattern and sends (position, match) to reduce
 * (16-byte items), which takes them round robin and counts the matches and
 * the intervals between them. In steady state every stage's output is
 * regular: one candidate and one match every --every bytes.
 * The matches are checked against a count made by plain comparison over one
 * period of the corpus.
 *
 * --solo hash|verify|reduce measures one kernel's service rate alone (the
 * seed's ground truth): the kernel on resident in-memory items (chunks of
 * the corpus; the corpus's candidates; their results), its output into a
 * resident sink that never blocks, no queue operations, for --solo-time
 * seconds; items/s is printed and written into the truth file.
 */
#include "stream_common.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define PAT_MAX 64u
#define RK_Q    2147483647u   /* 2^31 - 1 */
#define RK_B    257u

struct chunk_hdr { uint64_t off; uint32_t len; uint32_t unused; };   /* + text */
struct cand { uint64_t pos; uint32_t len; uint32_t hash; char text[PAT_MAX]; };
struct result { uint64_t pos; uint32_t match; uint32_t verifier; };

enum { SOLO_NONE, SOLO_HASH, SOLO_VERIFY, SOLO_REDUCE };
static const char *const solo_names[] = { "none", "hash", "verify", "reduce" };

static struct ss {
    long mb, chunk, every, verifiers, capacity;
    const char *pattern;
    double solo_time;
    int solo;
    uint64_t seed;
    const char *truth;

    size_t m, item_size;       /* pattern length; gen->hash item size */
    uint64_t total, first;     /* corpus bytes; offset of the first occurrence */
    unsigned char *image;      /* one period of the corpus + one chunk */
    size_t period;
    uint32_t phash, bm1;       /* pattern hash; RK_B^(m-1) mod RK_Q */

    hbt_queue_t *gq, **hq, **vq;
    char (*hq_name)[40], (*vq_name)[40], (*v_name)[32];
    uint64_t chunks, candidates;
    uint64_t start_ns, end_ns;
} ss = {
    .mb = 256, .chunk = 4096, .every = 4096, .verifiers = 1, .capacity = 64,
    .pattern = "needle", .solo_time = 1.0, .solo = SOLO_NONE, .seed = 1, .truth = NULL,
};

/* What reduce found. */
struct rstate {
    uint64_t candidates, matches, first, last, imin, imax, sum;
};

/* ---------------------------------------------------------------- kernels */

static inline uint32_t rk_mod(uint64_t x)   /* x < 2^62 */
{
    x = (x & RK_Q) + (x >> 31);
    x = (x & RK_Q) + (x >> 31);
    return (uint32_t)(x >= RK_Q ? x - RK_Q : x);
}

static unsigned char corpus_byte(uint64_t p)
{
    uint64_t k = (p + (uint64_t)ss.every - ss.first) % (uint64_t)ss.every;
    return k < ss.m ? (unsigned char)ss.pattern[k] : (unsigned char)"foobar"[p % 6];
}

/* gen: one chunk of the corpus from offset off */
static inline void gen_chunk(uint64_t off, unsigned char *item)
{
    struct chunk_hdr h = { off, 0, 0 };
    uint64_t left = ss.total - off;
    h.len = (uint32_t)(left < (uint64_t)ss.chunk ? left : (uint64_t)ss.chunk);
    memcpy(item, &h, sizeof h);
    memcpy(item + sizeof h, ss.image + off % ss.period, h.len);
}

/* hash: the rolling hash over the stream, across chunks */
struct hstate {
    uint32_t h;
    uint32_t wpos;
    uint64_t seen;
    unsigned char win[PAT_MAX];
};

typedef void (*emit_fn)(void *ctx, const struct cand *c);

static inline void hash_chunk(struct hstate *hs, const unsigned char *item, emit_fn emit, void *ctx)
{
    struct chunk_hdr hd;
    memcpy(&hd, item, sizeof hd);
    const unsigned char *s = item + sizeof hd;
    uint32_t m = (uint32_t)ss.m, h = hs->h, w = hs->wpos;
    uint64_t seen = hs->seen;
    for (uint32_t x = 0; x < hd.len; x++) {
        unsigned char c = s[x];
        if (seen >= m)   /* drop the oldest byte of the window */
            h = rk_mod((uint64_t)h + RK_Q - rk_mod((uint64_t)hs->win[w] * ss.bm1));
        h = rk_mod((uint64_t)h * RK_B + c);
        hs->win[w] = c;
        if (++w == m)
            w = 0;
        seen++;
        if (seen >= m && h == ss.phash) {
            struct cand cd;
            memset(&cd, 0, sizeof cd);
            cd.pos = hd.off + x + 1 - m;
            cd.len = m;
            cd.hash = h;
            for (uint32_t k = 0; k < m; k++)   /* the window, oldest byte first */
                cd.text[k] = (char)hs->win[(w + k) % m];
            emit(ctx, &cd);
        }
    }
    hs->h = h;
    hs->wpos = w;
    hs->seen = seen;
}

/* verify: compare the candidate's text with the pattern */
static inline void verify_item(const struct cand *c, uint32_t v, struct result *r)
{
    r->pos = c->pos;
    r->match = c->len == ss.m && memcmp(c->text, ss.pattern, ss.m) == 0;
    r->verifier = v;
}

/* reduce: count, intervals, sum of positions */
static inline void reduce_item(struct rstate *rs, const struct result *r)
{
    rs->candidates++;
    if (!r->match)
        return;
    if (rs->matches) {
        uint64_t d = r->pos - rs->last;
        if (d < rs->imin) rs->imin = d;
        if (d > rs->imax) rs->imax = d;
    } else {
        rs->first = r->pos;
    }
    rs->last = r->pos;
    rs->sum += r->pos;
    rs->matches++;
}

/* ----------------------------------------------------------------- stages */

static struct rstate rs_pipe = { .imin = UINT64_MAX };

static void *gen_main(void *unused)
{
    (void)unused;
    unsigned char *item = ex_xmalloc(ss.item_size);
    uint64_t n = 0;
    for (uint64_t off = 0; off < ss.total; off += (uint64_t)ss.chunk, n++) {
        gen_chunk(off, item);
        hbt_queue_push(ss.gq, item);
    }
    ss.chunks = n;
    hbt_queue_close(ss.gq);
    free(item);
    return NULL;
}

static void emit_to_verify(void *ctx, const struct cand *c)
{
    uint64_t *n = ctx;
    hbt_queue_push(ss.hq[*n % (uint64_t)ss.verifiers], c);
    ++*n;
}

static void *hash_main(void *unused)
{
    (void)unused;
    unsigned char *item = ex_xmalloc(ss.item_size);
    struct hstate hs;
    memset(&hs, 0, sizeof hs);
    uint64_t n = 0;
    while (hbt_queue_pop(ss.gq, item) == 1)
        hash_chunk(&hs, item, emit_to_verify, &n);
    ss.candidates = n;
    for (long k = 0; k < ss.verifiers; k++)
        hbt_queue_close(ss.hq[k]);
    free(item);
    return NULL;
}

static void *verify_main(void *arg)
{
    uint32_t k = (uint32_t)(intptr_t)arg;
    struct cand c;
    struct result r;
    while (hbt_queue_pop(ss.hq[k], &c) == 1) {
        verify_item(&c, k, &r);
        hbt_queue_push(ss.vq[k], &r);
    }
    hbt_queue_close(ss.vq[k]);
    return NULL;
}

static void *reduce_main(void *unused)
{
    (void)unused;
    uint64_t V = (uint64_t)ss.verifiers, idx = 0;
    struct result r;
    while (hbt_queue_pop(ss.vq[idx % V], &r) == 1) {
        reduce_item(&rs_pipe, &r);
        idx++;
    }
    ss.end_ns = ex_now_ns();
    return NULL;
}

/* ------------------------------------------------------------------- solo */

static volatile uint64_t solo_seen;   /* the solo outputs are used: nothing is optimised away */

struct sink { struct cand c[64]; uint64_t n; };

static void emit_to_sink(void *ctx, const struct cand *c)
{
    struct sink *s = ctx;
    s->c[s->n++ & 63] = *c;
}

static void solo_run(struct sc_solo *s)
{
    /* resident inputs: the chunks of one period of the corpus (at least
     * 16 MiB), their candidates, the results of those */
    uint64_t span = ss.period > (16u << 20) ? ss.period : (16u << 20);
    size_t nch = (size_t)((span + (uint64_t)ss.chunk - 1) / (uint64_t)ss.chunk);
    uint64_t saved_total = ss.total;
    ss.total = UINT64_MAX;   /* chunks are never cut short */
    unsigned char *chunks = ex_xmalloc(nch * ss.item_size);
    for (size_t x = 0; x < nch; x++)
        gen_chunk((uint64_t)x * (uint64_t)ss.chunk, chunks + x * ss.item_size);
    ss.total = saved_total;

    size_t ncand = 4096;
    struct cand *cands = ex_xmalloc(ncand * sizeof *cands);
    struct result *res = ex_xmalloc(ncand * sizeof *res), out[64];
    for (size_t x = 0; x < ncand; x++) {
        memset(&cands[x], 0, sizeof cands[x]);
        cands[x].pos = ss.first + (uint64_t)x * (uint64_t)ss.every;
        cands[x].len = (uint32_t)ss.m;
        memcpy(cands[x].text, ss.pattern, ss.m);
        verify_item(&cands[x], 0, &res[x]);
    }
    struct sink *sk = ex_xmalloc(sizeof *sk);
    sk->n = 0;
    struct hstate hs;
    memset(&hs, 0, sizeof hs);
    struct rstate rs = { .imin = UINT64_MAX };

    int batch = ss.solo == SOLO_HASH ? 1 : 256;
    uint64_t t0 = ex_now_ns(), limit = (uint64_t)(ss.solo_time * 1e9), items = 0, now, acc = 0;
    size_t x = 0;
    do {
        for (int b = 0; b < batch; b++, items++) {
            switch (ss.solo) {
            case SOLO_HASH:
                hash_chunk(&hs, chunks + x * ss.item_size, emit_to_sink, sk);
                if (++x == nch)
                    x = 0;
                break;
            case SOLO_VERIFY:
                verify_item(&cands[x], 0, &out[items & 63]);
                acc += out[items & 63].match;
                if (++x == ncand)
                    x = 0;
                break;
            default:
                reduce_item(&rs, &res[x]);
                if (++x == ncand)
                    x = 0;
                break;
            }
        }
        now = ex_now_ns();
    } while (now - t0 < limit);
    solo_seen = acc + sk->n + rs.matches + rs.sum + rs.candidates;
    s->kernel = solo_names[ss.solo];
    s->items = items;
    s->seconds = (double)(now - t0) * 1e-9;
    s->in_item_size = ss.solo == SOLO_HASH ? ss.item_size
                    : ss.solo == SOLO_VERIFY ? sizeof(struct cand) : sizeof(struct result);
    s->out_item_size = ss.solo == SOLO_HASH ? sizeof(struct cand)
                     : ss.solo == SOLO_VERIFY ? sizeof(struct result) : 0;
    free(chunks);
    free(cands);
    free(res);
    free(sk);
}

/* ------------------------------------------------------------------- main */

static uint64_t gcd64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Matches by plain comparison: the corpus repeats with `period`, so count
 * the starts in one period and scale. Also the first match position. */
static uint64_t expected_matches(uint64_t *first)
{
    uint64_t last_start = ss.total >= ss.m ? ss.total - ss.m : 0;   /* inclusive */
    if (ss.total < ss.m) {
        *first = UINT64_MAX;
        return 0;
    }
    uint64_t per = 0, partial = 0, rem = (last_start + 1) % ss.period;
    uint64_t periods = (last_start + 1) / ss.period;
    *first = UINT64_MAX;
    for (uint64_t p = 0; p < ss.period; p++) {
        if (memcmp(ss.image + p, ss.pattern, ss.m) != 0)
            continue;
        per++;
        if (p < rem)
            partial++;
        if (*first == UINT64_MAX && p <= last_start)
            *first = p;
    }
    return periods * per + partial;
}

int main(int argc, char **argv)
{
    ex_prog = "stream_search";
    struct sc_opt opts[] = {
        SC_NUM("--mb", SC_LONG, &ss.mb, 1, 1 << 20, "M", "corpus size in MiB (default 256)"),
        SC_NUM("--chunk", SC_LONG, &ss.chunk, 64, 1 << 20, "B",
               "text bytes per gen->hash item (default 4096)"),
        SC_NUM("--pattern", SC_STR, &ss.pattern, 0, 0, "P",
               "the pattern, 1..64 bytes (default needle)"),
        SC_NUM("--every", SC_LONG, &ss.every, 1, 1 << 20, "E",
               "bytes from one occurrence of the pattern to the next (default 4096)"),
        SC_NUM("--verifiers", SC_LONG, &ss.verifiers, 1, 64, "V", "verify stages (default 1)"),
        SC_NUM("--capacity", SC_LONG, &ss.capacity, 1, 1 << 20, "C",
               "capacity of every queue, items (default 64)"),
        SC_PICK("--solo", &ss.solo, solo_names, 4, "hash|verify|reduce",
                "measure that kernel's service rate alone, no pipeline (default none)"),
        SC_NUM("--solo-time", SC_DOUBLE, &ss.solo_time, 0.01, 3600, "S",
               "seconds a --solo measurement runs (default 1)"),
        SC_NUM("--seed", SC_U64, &ss.seed, 0, 0, "S",
               "seed of the first occurrence's offset (default 1)"),
        SC_NUM("--truth", SC_STR, &ss.truth, 0, 0, "FILE", "write the ground truth as JSON to FILE"),
    };
    int nopt = (int)(sizeof opts / sizeof opts[0]);
    sc_parse(argc, argv,
             "Rabin-Karp search of a pattern in a generated corpus, streamed:\n"
             "gen -> hash -> V verify stages -> reduce, through instrumented queues;\n"
             "or one kernel's service rate alone (--solo).",
             opts, nopt);
    ss.m = strlen(ss.pattern);
    if (ss.m < 1 || ss.m > PAT_MAX)
        ex_die(SC_EXIT_USAGE, "bad value for --pattern: expected 1..%u bytes", PAT_MAX);
    if ((uint64_t)ss.every < ss.m)
        ex_die(SC_EXIT_USAGE, "--every %ld is shorter than the pattern (%zu bytes)", ss.every, ss.m);
    sc_truth_running(ss.truth, ss.seed, opts, nopt);

    ss.total = (uint64_t)ss.mb << 20;
    ss.item_size = sizeof(struct chunk_hdr) + (size_t)ss.chunk;
    uint64_t rng = sc_rand_stream(ss.seed, 3);
    ss.first = ex_rand_next(&rng) % ((uint64_t)ss.every - ss.m + 1);
    ss.period = (size_t)(6u / gcd64(6, (uint64_t)ss.every) * (uint64_t)ss.every);
    size_t img = ss.period + (size_t)ss.chunk + PAT_MAX;
    ss.image = ex_xmalloc(img);
    for (size_t p = 0; p < img; p++)
        ss.image[p] = corpus_byte(p);
    uint32_t ph = 0, bm1 = 1;
    for (size_t k = 0; k < ss.m; k++)
        ph = rk_mod((uint64_t)ph * RK_B + (unsigned char)ss.pattern[k]);
    for (size_t k = 1; k < ss.m; k++)
        bm1 = rk_mod((uint64_t)bm1 * RK_B);
    ss.phash = ph;
    ss.bm1 = bm1;

    struct sc_solo solo = { 0 };
    size_t V = (size_t)ss.verifiers;
    uint64_t expect_first = UINT64_MAX, expect = 0;
    int verified = 1;
    if (ss.solo != SOLO_NONE) {
        solo_run(&solo);
        sc_print_solo(&solo);
    } else {
        expect = expected_matches(&expect_first);
        ss.gq = sc_queue("gen->hash", ss.item_size, (size_t)ss.capacity);
        ss.hq = ex_xmalloc(V * sizeof *ss.hq);
        ss.vq = ex_xmalloc(V * sizeof *ss.vq);
        ss.hq_name = ex_xmalloc(V * sizeof *ss.hq_name);
        ss.vq_name = ex_xmalloc(V * sizeof *ss.vq_name);
        ss.v_name = ex_xmalloc(V * sizeof *ss.v_name);
        for (size_t k = 0; k < V; k++) {
            unsigned w = (unsigned)k;   /* below 64 */
            snprintf(ss.v_name[k], sizeof ss.v_name[k], "verify%u", w);
            snprintf(ss.hq_name[k], sizeof ss.hq_name[k], "hash->verify%u", w);
            snprintf(ss.vq_name[k], sizeof ss.vq_name[k], "verify%u->reduce", w);
            ss.hq[k] = sc_queue(ss.hq_name[k], sizeof(struct cand), (size_t)ss.capacity);
            ss.vq[k] = sc_queue(ss.vq_name[k], sizeof(struct result), (size_t)ss.capacity);
        }
        pthread_t gt, ht, ut, *vt = ex_xmalloc(V * sizeof *vt);
        ss.start_ns = ex_now_ns();
        ex_thread(&ut, reduce_main, NULL);
        for (size_t k = 0; k < V; k++)
            ex_thread(&vt[k], verify_main, (void *)(intptr_t)k);
        ex_thread(&ht, hash_main, NULL);
        ex_thread(&gt, gen_main, NULL);
        pthread_join(gt, NULL);
        pthread_join(ht, NULL);
        for (size_t k = 0; k < V; k++)
            pthread_join(vt[k], NULL);
        pthread_join(ut, NULL);
        free(vt);
        verified = rs_pipe.matches == expect &&
                   (expect == 0 || rs_pipe.first == expect_first);
    }

    char *tmp;
    uint64_t t0;
    FILE *f = sc_truth_begin(ss.truth, ss.seed, &tmp, &t0);
    if (f) {
        fprintf(f, ", \"bytes\": %" PRIu64 ", \"chunk\": %ld, \"item_size\": %zu, \"pattern\": ",
                ss.total, ss.chunk, ss.item_size);
        ex_json_str(f, ss.pattern);
        fprintf(f, ", \"every\": %ld, \"first\": %" PRIu64 ", \"verifiers\": %ld, ",
                ss.every, ss.first, ss.verifiers);
        if (ss.solo == SOLO_NONE) {
            sc_json_time(f, "start", ss.start_ns, t0);
            fputs(", ", f);
            sc_json_time(f, "end", ss.end_ns, t0);
            int regular = rs_pipe.matches < 2 || rs_pipe.imin == rs_pipe.imax;
            fprintf(f, ", \"chunks\": %" PRIu64 ", \"candidates\": %" PRIu64
                       ", \"matches\": %" PRIu64 ", \"expected_matches\": %" PRIu64,
                    ss.chunks, rs_pipe.candidates, rs_pipe.matches, expect);
            if (rs_pipe.matches)
                fprintf(f, ", \"first_match\": %" PRIu64, rs_pipe.first);
            else
                fputs(", \"first_match\": null", f);
            if (rs_pipe.matches > 1)
                fprintf(f, ", \"interval_min\": %" PRIu64 ", \"interval_max\": %" PRIu64,
                        rs_pipe.imin, rs_pipe.imax);
            else
                fputs(", \"interval_min\": null, \"interval_max\": null", f);
            fprintf(f, ", \"regular\": %s, \"checksum\": %" PRIu64 ", \"verified\": %s",
                    regular ? "true" : "false", rs_pipe.sum, verified ? "true" : "false");
        } else {
            fputs("\"checksum\": null, \"verified\": null", f);
        }
        fputs(", \"queues\": [", f);
        if (ss.solo == SOLO_NONE) {
            sc_json_queue(f, "gen->hash", ss.gq, "gen", "hash");
            for (size_t k = 0; k < V; k++) {
                fputs(", ", f);
                sc_json_queue(f, ss.hq_name[k], ss.hq[k], "hash", ss.v_name[k]);
                fputs(", ", f);
                sc_json_queue(f, ss.vq_name[k], ss.vq[k], ss.v_name[k], "reduce");
            }
        }
        fputs("], ", f);
        sc_json_solo(f, ss.solo == SOLO_NONE ? NULL : &solo);
        fputs(", ", f);
        sc_json_params(f, opts, nopt);
        fputs("}\n", f);
    }
    if (ss.solo == SOLO_NONE) {
        hbt_queue_destroy(ss.gq);
        for (size_t k = 0; k < V; k++) {
            hbt_queue_destroy(ss.hq[k]);
            hbt_queue_destroy(ss.vq[k]);
        }
    }
    sc_truth_commit(f, ss.truth, tmp);

    if (ss.solo == SOLO_NONE) {
        printf("%s matches %" PRIu64 " checksum %" PRIu64 " elapsed_s %.3f\n", ex_prog,
               rs_pipe.matches, rs_pipe.sum, (double)(ss.end_ns - ss.start_ns) * 1e-9);
        if (!verified) {
            fprintf(stderr, "%s: found %" PRIu64 " matches, expected %" PRIu64 "\n", ex_prog,
                    rs_pipe.matches, expect);
            return SC_EXIT_RUNTIME;
        }
    }
    return SC_EXIT_OK;
}
