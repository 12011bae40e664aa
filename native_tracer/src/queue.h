/*
 * queue.h -- what the files of the instrumented queues share (private to
 * queue*.c; queue.c describes the design):
 *   queue.c           the ring and the operations (push, pop, close, stats)
 *   queue_monitor.c   the samples, the monitor thread and its period policy,
 *                     the configuration
 *   queue_registry.c  creation, names, destruction, exit and fork
 */
#ifndef HBT_QUEUE_H
#define HBT_QUEUE_H

#include <pthread.h>
#include <stdint.h>

#include "hbtrace_queue.h"
#include "internal.h"

#define Q_LINE            128u
#define Q_MASK            0x7fffffffu      /* indices modulo 2^31 */
#define Q_CLOSED          0x80000000u      /* in the tail word: closed */
#define Q_WANT            0x80000000u      /* in pwant: a producer sleeps */
#define Q_MAX_CAP         (1u << 30)
#define Q_MAX_ITEM        (16u << 20)
#define Q_NAME_MAX        255u             /* bytes of a name that are recorded */
#define Q_FRAG            24u              /* text bytes per NAME record */

#define Q_NS_US           1000ull
#define Q_NS_MS           1000000ull
#define Q_NS_S            1000000000ull
#define Q_SPIN_NS         (2 * Q_NS_US)    /* spin before sleeping */
#define Q_BACKSTOP_NS     (4 * Q_NS_MS)    /* longest futex sleep before looking again */

/* sampling period policy (hbtrace_queue.h) */
#define Q_PERIOD_US       1000u            /* default first period */
#define Q_PERIOD_MAX_US   16000u           /* default longest period: 4 doublings */
#define Q_PERIOD_FLOOR_US 100u             /* shortest period accepted */
#define Q_PERIOD_CEIL_US  10000000u        /* longest period accepted */
#define Q_STABLE_K        8u               /* good periods in a row before T doubles */
#define Q_TOL_PCT         10u              /* realized period within this % of T */
#define Q_ALIGN_WAIT      4u               /* periods T may wait for a deadline on the new grid */

#define Q_ORPHAN_NS       (100 * Q_NS_MS)  /* how often the monitor checks that the
                                              program still has threads */
#define Q_FINAL_WAIT_NS   (50 * Q_NS_MS)   /* final sample: wait for a sampling monitor */
#define Q_EXIT_LOCK_MS    100              /* at exit: wait for the registry */
#define Q_STACK           (128u * 1024u)
#define Q_KMAX            1024u            /* threads whose blocking is seen per stage */
#define Q_KNONE           UINT32_MAX       /* kslot: the thread has no q_kern slot */

/* One end's private state. */
struct hbt_qend {
    uint32_t mine;        /* own index (mod 2^31) */
    uint32_t cache;       /* the other end's index as last seen */
    uint32_t pos;         /* own slot in buf */
    uint32_t waiting;     /* atomic: 1 while the end waits */
    uint32_t closed;      /* producer: closed */
    uint32_t kslot;       /* atomic: 1 + q_kern slot of the thread at this end
                             (0: none yet, Q_KNONE: the table was full) */
    uint64_t nb;          /* atomic: transactions that did not wait */
    uint64_t blk;         /* atomic: transactions that waited, then completed */
    uint64_t waits;       /* atomic: waits begun, failed try_* calls */
} __attribute__((aligned(Q_LINE)));

struct hbt_qword {
    uint32_t v;
} __attribute__((aligned(Q_LINE)));

struct hbt_qmon {
    int      slock;       /* atomic: sampling in progress */
    int      final_done;  /* atomic, set under slock: the final samples are written */
    uint32_t period_us;   /* atomic: T now */
    uint64_t open_ns;     /* QUEUE_OPEN time */
    /* the period policy, kept by the monitor thread under hbt_qreg.lock */
    uint64_t T;           /* ns */
    uint64_t deadline;    /* CLOCK_MONOTONIC ns of the next sample; UINT64_MAX: none */
    unsigned streak;      /* good periods in a row */
    unsigned lost;        /* periods in a row in which both ends' stages blocked */
    uint64_t last_ns;     /* under slock: time of the previous sample */
    uint64_t prev_nb[2], prev_blk[2], prev_waits[2];   /* under slock */
    uint32_t prev_kslot[2];                            /* under slock */
    uint64_t prev_kblk[2];                             /* under slock */
} __attribute__((aligned(Q_LINE)));

struct hbt_queue {
    /* read-only after creation */
    char     *buf;
    size_t    isz;
    uint32_t  cap;
    uint32_t  hyst;       /* a sleeping producer wants this many more free slots */
    uint32_t  id;
    pid_t     pid;        /* creating process: only it samples */
    int       monitored;  /* samples are recorded */
    uint32_t  name_len;
    struct hbt_queue *next;   /* registry list, under hbt_qreg.lock */
    char      name[Q_NAME_MAX + 1];

    struct hbt_qword tail;    /* producer's index | Q_CLOSED */
    struct hbt_qword head;    /* consumer's index */
    struct hbt_qend  p;       /* producer (HBT_QEND_PRODUCER) */
    struct hbt_qend  c;       /* consumer (HBT_QEND_CONSUMER) */
    struct hbt_qword pwant;   /* Q_WANT | head index a sleeping producer waits for */
    struct hbt_qword cwait;   /* 1: the consumer sleeps */
    struct hbt_qmon  m;
};

/* The queues of this process, and the configuration read once. */
struct hbt_qreg {
    pthread_mutex_t lock;
    struct hbt_queue *head;   /* atomic for the quick look at exit */
    uint32_t next_id;
    int configured;
    int monitor_on;
    uint32_t period_us, period_max_us;
    int noted;                /* metadata written into this process's file */
    int start_warned;
    /* the monitor thread (one per process, for every monitored queue) */
    int mon_running;          /* a monitor thread of generation mon_gen samples */
    uint32_t mon_gen;         /* bumped to stop it */
    int mon_joinable;         /* mon_thread is still to be joined */
    pthread_t mon_thread;
    uint32_t mwake;           /* atomic: futex word of its sleep, bumped to wake it */
};

extern struct hbt_qreg hbt_qreg HBT_HIDDEN;

/*
 * Blocking per stage. Seed 002 keeps a sample only when the kernel (the
 * thread at that end) blocked on none of its queues, in-bound or out-bound,
 * in the period: a stage that waited on its output queue served fewer items
 * from its input queue than it could, though that input end never blocked.
 * Each thread that uses a queue takes a slot of q_kern the first time (never
 * reused, so the monitor may read a slot after its thread ended) and counts
 * there every wait on any queue; each end remembers the slot of the thread
 * that used it last. Only the slot's thread writes it.
 */
struct q_kern {
    uint64_t blocked;     /* atomic: waits begun and failed try_* calls, any queue */
    uint32_t waiting;     /* atomic: 1 while the thread waits on a queue */
} __attribute__((aligned(64)));

extern struct q_kern hbt_q_kern[Q_KMAX] HBT_HIDDEN;

struct q_obs {
    uint64_t realized;   /* ns since the previous sample */
    int blocked;         /* both ends' stages blocked: no end ran unhindered */
    int active;          /* either end completed a transaction without waiting */
};

enum { Q_SAMPLED = 1, Q_BUSY = 0, Q_FINISHED = -1 };

/* queue_monitor.c */
HBT_HIDDEN int  q_slock(struct hbt_queue *q, uint64_t wait_ns);
HBT_HIDDEN void q_sunlock(struct hbt_queue *q);
HBT_HIDDEN int  q_sample(struct hbt_queue *q, int final, unsigned mode, struct q_obs *o);
HBT_HIDDEN void q_wake_monitor(void);
HBT_HIDDEN uint64_t q_first_deadline(uint64_t open_ns, uint64_t T);
HBT_HIDDEN void q_start_monitor(void);
HBT_HIDDEN void q_configure(void);

#endif /* HBT_QUEUE_H */
