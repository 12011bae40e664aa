/*
 * stream_micro -- one producer, one instrumented queue, one consumer whose
 * service rate is set on the command line: the ground truth for the
 * service-rate estimator (seed 002).
 *
 * The consumer serves each item for a service time drawn from --dist with
 * mean 1/--rate seconds (exp: exponential; det: constant), busy-waiting on
 * CLOCK_MONOTONIC (the service uses the CPU, as a real kernel would).
 * Service times are chained: an item popped without waiting starts its
 * service exactly when the previous one ended, so the pop and the clock
 * reads do not slow the consumer below --rate (up to a few hundred thousand
 * items/s). After a wait (empty queue) or a preemption of more than 2 us,
 * service starts afresh from the clock. With --rate2 the mean changes to
 * 1/--rate2 at --change-at (a fraction of --duration, or of --items).
 *
 * The producer pushes as fast as it can, or --producer-rate items/s (paced
 * by the clock, sleeping in between), until the consumer has run for
 * --duration seconds (or --items were pushed), then closes the queue; the
 * consumer serves what is left at the rate in force. Items carry their
 * sequence number, which the consumer checks.
 */
#include "stream_common.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MICRO_SLACK_NS 2000u   /* later than this after the previous service: start afresh */
#define MICRO_WAIT_NS  1000u   /* a pop that took longer than this may have waited */

enum { DIST_EXP, DIST_DET };
static const char *const dist_names[] = { "exp", "det" };

static struct micro {
    /* options */
    double rate, rate2, change_at, duration, prate;
    long items, item_size, capacity;
    int dist;
    uint64_t seed;
    const char *name, *truth;
    int has_rate2;

    hbt_queue_t *q;
    int stop;                 /* atomic: the consumer asks the producer to stop */
    uint64_t pushed;          /* items the producer pushed */
    /* consumer results */
    uint64_t popped, order_errors;
    uint64_t start_ns, change_ns, end_ns;
    int switched;
    uint64_t served[2];
    double service_ns[2];     /* sum of the drawn service times */
    uint64_t waited_ns[2];    /* time spent in pops that waited for an item */
} m = {
    .rate = 20000, .rate2 = 0, .change_at = -1, .duration = 2.0, .prate = 0,
    .items = 0, .item_size = 8, .capacity = 1024, .dist = DIST_EXP, .seed = 1,
    .name = "source->server", .truth = NULL,
};

static void *producer_main(void *unused)
{
    (void)unused;
    size_t isz = (size_t)m.item_size;
    unsigned char *item = ex_xmalloc(isz);
    memset(item, 0, isz);
    size_t keep = isz < 8 ? isz : 8;
    double ns_per = m.prate > 0 ? 1e9 / m.prate : 0.0;
    uint64_t t0 = ex_now_ns(), n = 0;
    for (;;) {
        if (m.items > 0 ? n >= (uint64_t)m.items : __atomic_load_n(&m.stop, __ATOMIC_RELAXED))
            break;
        if (ns_per > 0) {
            uint64_t due = t0 + (uint64_t)((double)n * ns_per);
            if (ex_now_ns() < due)
                sc_sleep_until(due);
        }
        memcpy(item, &n, keep);   /* little-endian low bytes of the sequence number */
        if (hbt_queue_push(m.q, item) != 0)
            break;
        n++;
    }
    m.pushed = n;
    hbt_queue_close(m.q);
    free(item);
    return NULL;
}

static void *consumer_main(void *unused)
{
    (void)unused;
    size_t isz = (size_t)m.item_size;
    unsigned char *item = ex_xmalloc(isz);
    size_t keep = isz < 8 ? isz : 8;
    uint64_t mask = keep == 8 ? UINT64_MAX : ((uint64_t)1 << (8 * keep)) - 1;
    uint64_t rng = sc_rand_stream(m.seed, 1);
    double mean = 1e9 / m.rate;

    uint64_t start = ex_now_ns();
    uint64_t dur_ns = (uint64_t)(m.duration * 1e9);
    int by_items = m.items > 0;
    uint64_t change_ns = UINT64_MAX, change_item = UINT64_MAX;
    if (m.has_rate2) {
        if (by_items)
            change_item = (uint64_t)llround(m.change_at * (double)m.items);
        else
            change_ns = start + (uint64_t)(m.change_at * (double)dur_ns);
    }
    uint64_t end_ns = by_items ? UINT64_MAX : start + dur_ns;
    uint64_t deadline = start, n = 0, errors = 0, before = start, waits = 0;
    double frac = 0.0;
    int phase = 0, stopped = 0;
    m.start_ns = start;

    for (;;) {
        int got = hbt_queue_pop(m.q, item);
        uint64_t now = ex_now_ns();
        if (!got)
            break;
        if (now - before > MICRO_WAIT_NS) {
            /* a slow pop: did it wait for the item (or only wake the producer,
             * or get preempted)? The queue's own count of waits says. */
            struct hbt_queue_stats st;
            hbt_queue_stats(m.q, &st);
            if (st.pop_waits != waits) {
                waits = st.pop_waits;
                m.waited_ns[phase] += now - before;
            }
        }
        uint64_t v = 0;
        memcpy(&v, item, keep);
        if (v != (n & mask))
            errors++;
        int switch_now = phase == 0 && m.has_rate2 && (now >= change_ns || n >= change_item);
        if (now > deadline + MICRO_SLACK_NS)
            deadline = now;   /* waited for the item, or was preempted */
        if (switch_now) {
            phase = 1;
            mean = 1e9 / m.rate2;
            m.change_ns = deadline;   /* service of the first item at the new rate begins */
            m.switched = 1;
        }
        double s = m.dist == DIST_EXP ? -mean * log1p(-ex_rand_double(&rng)) : mean;
        double whole = s + frac;
        uint64_t step = (uint64_t)whole;
        frac = whole - (double)step;
        deadline += step;
        before = sc_spin_until(deadline);
        m.served[phase]++;
        m.service_ns[phase] += s;
        n++;
        if (!stopped && now >= end_ns) {
            __atomic_store_n(&m.stop, 1, __ATOMIC_RELAXED);
            stopped = 1;
        }
    }
    m.end_ns = deadline > start ? deadline : ex_now_ns();
    m.popped = n;
    m.order_errors = errors;
    free(item);
    return NULL;
}

/* One phase: its set rate; the rate of the drawn service times; the rate
 * the consumer achieved over the phase's wall time minus its waits for
 * items (what an observer of the queue can at best see: it includes the
 * machine's interference, e.g. preemption). */
static void json_phase(FILE *f, int k, uint64_t a, uint64_t b, double rate, uint64_t t0)
{
    double busy = (double)(b > a ? b - a : 0) - (double)m.waited_ns[k];
    fputc('{', f);
    sc_json_time(f, "start", a, t0);
    fputs(", ", f);
    sc_json_time(f, "end", b, t0);
    fprintf(f, ", \"rate\": %.17g, \"served\": %" PRIu64 ", \"mean_service_rate\": %.9g"
               ", \"busy_s\": %.9f, \"busy_rate\": %.9g}",
            rate, m.served[k],
            m.service_ns[k] > 0 ? (double)m.served[k] / (m.service_ns[k] * 1e-9) : 0.0,
            busy * 1e-9, busy > 0 ? (double)m.served[k] / (busy * 1e-9) : 0.0);
}

int main(int argc, char **argv)
{
    ex_prog = "stream_micro";
    struct sc_opt opts[] = {
        SC_NUM("--rate", SC_DOUBLE, &m.rate, 1, 1e7, "R",
               "consumer service rate, items/s (default 20000)"),
        SC_NUM("--rate2", SC_DOUBLE, &m.rate2, 1, 1e7, "R2",
               "service rate after --change-at (default: no change)"),
        SC_NUM("--change-at", SC_DOUBLE, &m.change_at, 0.0, 1.0, "F",
               "when the rate changes: fraction of --duration or --items (default 0.5)"),
        SC_PICK("--dist", &m.dist, dist_names, 2, "exp|det",
                "service time distribution: exponential or constant (default exp)"),
        SC_NUM("--duration", SC_DOUBLE, &m.duration, 0.001, 86400, "S",
               "seconds the consumer serves before the producer stops (default 2)"),
        SC_NUM("--items", SC_LONG, &m.items, 1, 1e15, "N",
               "instead of --duration: items to send"),
        SC_NUM("--item-size", SC_LONG, &m.item_size, 1, 65536, "B",
               "bytes per item (default 8)"),
        SC_NUM("--capacity", SC_LONG, &m.capacity, 1, 1 << 24, "C",
               "queue capacity in items (default 1024)"),
        SC_NUM("--producer-rate", SC_DOUBLE, &m.prate, 0, 1e9, "P",
               "producer pace, items/s (default 0: as fast as possible)"),
        SC_NUM("--name", SC_STR, &m.name, 0, 0, "NAME",
               "queue name (default source->server)"),
        SC_NUM("--seed", SC_U64, &m.seed, 0, 0, "S",
               "seed of the service times (default 1)"),
        SC_NUM("--truth", SC_STR, &m.truth, 0, 0, "FILE",
               "write the ground truth as JSON to FILE"),
    };
    int nopt = (int)(sizeof opts / sizeof opts[0]);
    sc_parse(argc, argv,
             "Producer -> instrumented queue -> consumer with a set service rate (busy-wait\n"
             "service times of mean 1/rate), for checking the service-rate estimator.",
             opts, nopt);
    if (sc_given(opts, nopt, "--items") && sc_given(opts, nopt, "--duration"))
        ex_die(SC_EXIT_USAGE, "give --duration or --items, not both");
    m.has_rate2 = sc_given(opts, nopt, "--rate2");
    if (sc_given(opts, nopt, "--change-at") && !m.has_rate2)
        ex_die(SC_EXIT_USAGE, "--change-at needs --rate2");
    if (m.has_rate2 && !sc_given(opts, nopt, "--change-at"))
        m.change_at = 0.5;
    if (!*m.name)
        ex_die(SC_EXIT_USAGE, "--name must not be empty");
    if (!m.has_rate2)
        m.change_at = -1;
    sc_truth_running(m.truth, m.seed, opts, nopt);

    m.q = sc_queue(m.name, (size_t)m.item_size, (size_t)m.capacity);
    pthread_t pt, ct;
    ex_thread(&ct, consumer_main, NULL);
    ex_thread(&pt, producer_main, NULL);
    pthread_join(pt, NULL);
    pthread_join(ct, NULL);

    struct hbt_queue_stats st;
    hbt_queue_stats(m.q, &st);
    char *tmp;
    uint64_t t0;
    FILE *f = sc_truth_begin(m.truth, m.seed, &tmp, &t0);
    if (f) {
        fputs(", \"queue\": ", f);
        ex_json_str(f, m.name);
        fprintf(f, ", \"queue_id\": %u, \"item_size\": %ld, \"capacity\": %ld, \"dist\": \"%s\"",
                st.id, m.item_size, m.capacity, dist_names[m.dist]);
        if (m.prate > 0) fprintf(f, ", \"producer_rate\": %.17g", m.prate);
        else             fputs(", \"producer_rate\": null", f);
        fputs(", \"phases\": [", f);
        if (m.switched) {
            json_phase(f, 0, m.start_ns, m.change_ns, m.rate, t0);
            fputs(", ", f);
            json_phase(f, 1, m.change_ns, m.end_ns, m.rate2, t0);
        } else {
            json_phase(f, 0, m.start_ns, m.end_ns, m.rate, t0);
        }
        fprintf(f, "], \"items\": %" PRIu64 ", \"popped\": %" PRIu64 ", \"order_errors\": %" PRIu64
                   ", \"totals\": ", m.pushed, m.popped, m.order_errors);
        sc_json_totals(f, &st);
        fprintf(f, ", \"monitored\": %s, \"period_us\": %u, \"elapsed_s\": %.6f, ",
                st.monitored ? "true" : "false", st.period_us,
                (double)(m.end_ns - m.start_ns) * 1e-9);
        sc_json_params(f, opts, nopt);
        fputs("}\n", f);
    }
    hbt_queue_destroy(m.q);   /* the final samples */
    sc_truth_commit(f, m.truth, tmp);

    printf("%s items %" PRIu64 " elapsed_s %.3f\n", ex_prog, m.popped,
           (double)(m.end_ns - m.start_ns) * 1e-9);
    if (m.popped != m.pushed || m.order_errors) {
        fprintf(stderr, "%s: queue lost or reordered items: pushed %" PRIu64 ", popped %" PRIu64
                        ", %" PRIu64 " out of order\n", ex_prog, m.pushed, m.popped, m.order_errors);
        return SC_EXIT_RUNTIME;
    }
    return SC_EXIT_OK;
}
