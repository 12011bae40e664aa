/*
 * hbtrace_queue.h -- instrumented stream-stage queues of libhbtrace, for the
 * online service-rate estimation of seed 002 (RaftLib style; `hbtool
 * service-rate` reads what they record).
 *
 * A queue is a bounded single-producer single-consumer ring of fixed-size
 * items: exactly one thread pushes, exactly one thread pops (they may be the
 * same thread, and the threads may change over time if the program orders
 * the hand-over itself).
 *
 *     hbt_queue_t *q = hbt_queue_create("parse->count", sizeof(struct rec), 1024);
 *     producer:  for (...) hbt_queue_push(q, &r);   hbt_queue_close(q);
 *     consumer:  while (hbt_queue_pop(q, &r) == 1) use(&r);
 *     after both threads are done:  hbt_queue_destroy(q);
 *
 * The hot path takes no lock and makes no system call unless it must wait:
 * each end publishes its index with a release store on a cache line of its
 * own and keeps a cached copy of the other end's index. An end that has to
 * wait spins for about 2 us (pause), then sleeps on a futex; the other end
 * makes the wake-up system call only when a waiter flag is set. A producer
 * waiting on a full queue is woken when an eighth of the capacity is free
 * again, not at every pop, so that a full queue does not turn every pop
 * into a system call.
 *
 * Each end counts, on its own cache line, its NON-BLOCKING transactions
 * (pushes that found room at once, pops that found an item at once) and
 * whether it blocked (a transaction that had to wait, which is not counted
 * as non-blocking; a try_* call that failed; a wait that is going on).
 * When tracing is on (the trace file is open), one monitor thread per
 * process ("hbt-queues", started with the first queue, ended with the last)
 * samples both ends of each queue every period T of that queue and writes
 * two HBT_REC_QUEUE_SAMPLE records (hbtrace_format.h): producer end, then consumer end. Creation
 * writes HBT_REC_QUEUE_OPEN and the name as HBT_REC_NAME records
 * (HBT_NAME_QUEUE; names longer than 255 bytes are cut at a UTF-8 character
 * boundary). Queue ids count from 0 per process in creation order.
 *
 * The sampling period T (seed 002, section IV-A). T starts at
 * HBTRACE_QUEUE_PERIOD_US and doubles, up to HBTRACE_QUEUE_PERIOD_MAX_US,
 * after 8 consecutive periods in which (1) at least one end did not block
 * and (2) the realized period (time between two samples) stayed within 10 %
 * of T. Blocking is judged per end, as the seed judges it per kernel: in a
 * pipeline one end of a queue usually waits (a fast producer keeps it full)
 * while the stage at the other end runs unhindered and is observable.
 * Periods in which no item moved (the stages have not started yet, paused,
 * or a long service is in progress) neither count nor break the run of 8.
 * A period in which both ends' stages blocked, or an unstable one, restarts
 * the count. T also doubles after 8 periods in a row in which both ends'
 * stages blocked: nothing can be learned of such a queue at that period
 * (the seed's method fails there), and on a busy machine each wake-up of the
 * monitor costs the stages a preemption. T is never
 * shortened (blocked samples are dropped by the estimator anyway, and a
 * changing T would only add noise). The monitor sleeps toward absolute
 * deadlines on CLOCK_MONOTONIC (the trace clock), on the grid of multiples
 * of T, so that queues with equal or nested periods are sampled in one
 * wake-up: the first sample comes between T and 2T after the open, and T
 * doubles only at a deadline that is a multiple of the new T (which, for
 * a power-of-two ratio, costs at most one more period at the old T). A
 * sample's t_ns is the clock read when the counters are taken, its iter
 * the T it aimed for.
 * Why these defaults: 1 ms is about the shortest period whose wake-up
 * jitter (tens of microseconds on a busy machine) stays well inside the
 * 10 % tolerance, and a stage doing 100 000 items/s still puts about 100
 * transactions into each sample; 16 ms (four doublings) gives a stage of
 * 1 000 items/s about 16 per sample, while the estimator's window of 32
 * samples spans only about 0.5 s and an estimate converges within about
 * 1.5 s, so rate changes a few seconds apart each show as a phase, and a
 * single blocking event costs at most 16 ms of samples. Under 100 us the sleep itself is mostly noise, hence the floor.
 *
 * Environment:
 *   HBTRACE_QUEUE_MONITOR=off   no monitor thread and no samples (the queues
 *                     work as usual; QUEUE_OPEN and NAME are still written)
 *   HBTRACE_QUEUE_PERIOD_US     first sampling period in microseconds
 *                     (default 1000, at least 100)
 *   HBTRACE_QUEUE_PERIOD_MAX_US longest sampling period in microseconds
 *                     (default 16000, at most 10000000; set it equal to
 *                     HBTRACE_QUEUE_PERIOD_US for a fixed period)
 * The trace metadata gets queue_monitor=on|off, queue_period_us and
 * queue_period_max_us once per process.
 *
 * The monitor thread is made with the real pthread_create (no lifecycle
 * records), blocks every signal, records nothing but samples, and never
 * keeps the process alive: when the main thread has called pthread_exit and
 * no program thread is left, it ends (at most about 0.1 s later). At exit
 * (exit(), return from main, _exit) every queue still open gets a last
 * sample of each end (HBT_QFLAG_FINAL), as it does at hbt_queue_destroy.
 * After SIGKILL the samples written so far are in the file. Queues belong to
 * the process that created them: a fork child has no monitor thread for
 * its parent's queues and records nothing about them (it may still use them
 * as plain queues); queues it creates itself get ids from 0 in its own file.
 *
 * The queues work the same when tracing is disabled (HBTRACE_DISABLE=1) or
 * the trace file is full; records that cannot be written are dropped.
 */
#ifndef HBTRACE_QUEUE_H
#define HBTRACE_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hbt_queue hbt_queue_t;

/* A queue of `capacity` items of `item_size` bytes each (1 <= item_size <=
 * 16 MiB, 1 <= capacity <= 2^30). name: any UTF-8 text; NULL or "" names it
 * "queue<id>". Returns NULL and sets errno: EINVAL for bad arguments,
 * ENOMEM when out of memory. Writes QUEUE_OPEN and NAME records and, when
 * tracing is on, starts the monitor thread unless it runs already. */
hbt_queue_t *hbt_queue_create(const char *name, size_t item_size, size_t capacity);

/* Producer: copy item_size bytes from `item` into the queue; blocks while
 * it is full. 0 ok, -1 if the queue was closed. */
int  hbt_queue_push(hbt_queue_t *q, const void *item);

/* Consumer: copy the oldest item to `item`; blocks while the queue is
 * empty. 1 got an item, 0 the queue is closed and drained. */
int  hbt_queue_pop(hbt_queue_t *q, void *item);

/* Producer: 1 pushed, 0 the queue is full (counts as blocked), -1 closed. */
int  hbt_queue_try_push(hbt_queue_t *q, const void *item);

/* Consumer: 1 popped, 0 the queue is empty (counts as blocked), -1 closed
 * and drained. */
int  hbt_queue_try_pop(hbt_queue_t *q, void *item);

/* Producer: no more items. The consumer pops what is left, then gets 0
 * (pop) or -1 (try_pop). Only the producer closes: a producer blocked on a
 * full queue waits until the consumer pops, so a consumer that stops
 * popping before the end must keep popping (and dropping) until pop
 * returns 0, or the producer waits for ever. Idempotent. */
void hbt_queue_close(hbt_queue_t *q);

/* After both ends are done (no thread is inside a call on q): the last
 * sample of each end (HBT_QFLAG_FINAL), free the queue; for the last
 * queue of the process, stop and join the monitor thread. NULL is ignored. */
void hbt_queue_destroy(hbt_queue_t *q);

/* Exact totals since creation, for tests and ground truth. Exact when
 * neither end is inside a call; a snapshot otherwise. */
struct hbt_queue_stats {
    uint32_t id;                 /* queue id (QUEUE_OPEN thread) */
    uint32_t capacity;           /* items */
    uint64_t item_size;          /* bytes */
    uint64_t push_nonblocking;   /* pushes that found room at once */
    uint64_t push_blocked;       /* pushes that had to wait, then succeeded */
    uint64_t push_waits;         /* waits begun by push + failed try_push */
    uint64_t pop_nonblocking;    /* pops that found an item at once */
    uint64_t pop_blocked;        /* pops that had to wait, then got an item */
    uint64_t pop_waits;          /* waits begun by pop (also one that ended by
                                    close) + failed try_pop */
    uint32_t period_us;          /* sampling period T now (0: no monitor) */
    uint32_t monitored;          /* 1 when the queue's samples are recorded */
};

/* Fill *out; 0, or -1 (errno EINVAL) for a NULL argument. */
int  hbt_queue_stats(const hbt_queue_t *q, struct hbt_queue_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* HBTRACE_QUEUE_H */
