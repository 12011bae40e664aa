/*
 * monitor.h -- what the files of the online behavior monitor share (private
 * to monitor*.c; monitor.c describes the method):
 *   monitor.c          configuration, the heart table (owner side), the
 *                      entry points, the final passes, Heartbeat_HeartRate_Adjust
 *   monitor_judge.c    reading a thread from outside (/proc), the detection,
 *                      the BEHAVIOR and MONITOR records
 *   monitor_central.c  the central monitor thread
 *   monitor_ring.c     the ring checks of the decentralized mode
 */
#ifndef HBT_MONITOR_H
#define HBT_MONITOR_H

#include <stdint.h>

#include "internal.h"

#define HBT_US              1000ull
#define HBT_MS              1000000ull
#define HBT_SEC             1000000000ull

#define HBT_WARM            8u              /* beats before a thread is judged */
#define HBT_WARM_TEAM       4u              /* ... a thread of an OpenMP team */
#define HBT_LATE_DEFAULT    1.5
#define HBT_POLL_MIN_NS     (100 * HBT_US)
#define HBT_POLL_MAX_NS     (100 * HBT_MS)
#define HBT_POLL_WARM_NS    HBT_MS
#define HBT_POLL_IDLE_NS    (50 * HBT_MS)
#define HBT_BATCH           0.3             /* central: slack, in baseline intervals */
#define HBT_PROC_MAX_NS     (100 * HBT_MS)  /* /proc re-reads while late: back-off cap */
#define HBT_LATE_LOOK_MAX_NS (4 * HBT_MS)   /* looks for its next beat meanwhile: cap */
#define HBT_RING_IDLE_NS    (10 * HBT_MS)   /* ring with no live neighbour: look again */
#define HBT_COLD_MAX_NS     HBT_SEC         /* every thread's cold path, at least */
#define HBT_SOFT_LOOK_NS    (100 * HBT_MS)
#define HBT_PROBE_MIN_NS    (50 * HBT_US)
#define HBT_LATE_FLOOR_NS   (500 * HBT_US)  /* late: silent for at least this long, whatever
                                               its rate (scheduler noise, page faults) */
#define HBT_BUSY_FLOOR_NS   (2 * HBT_MS)    /* busy-waiting: CPU time used without beating, at
                                               least this much whatever its beats need (on
                                               this 2-vCPU VM under load, a 20-40 us unit of
                                               copying took up to 0.93 ms of CPU, no tracer) */
#define HBT_FROZEN_NS       (10 * HBT_MS)   /* a CPU with no timer tick for this long while a
                                                thread ran on it was stopped by the host */
#define HBT_OVERSLEPT_NS    HBT_MS          /* the monitor thread woke this late, not queued for a
                                               CPU: its CPU was stopped (benchmarks/wake_lateness.c:
                                               with the CPUs busy, 8 of 40,000 wakes here, 1-3 ms) */
#define HBT_APART           4.0             /* of its beat intervals: a thread that beat on this
                                               long after a teammate fell silent fell silent
                                               after it */
#define HBT_TICK_LOOK_NS    (500 * HBT_US)  /* busy-waiting but its CPU not seen to run yet:
                                                looked at again this soon */
#define HBT_TICKS_FRESH_NS  (100 * HBT_US)  /* /proc/interrupts: a read this recent serves */
#define HBT_TICK_GRACE_NS   (200 * HBT_US)  /* ... its CPU seen to tick: this much CPU time used,
                                                silent, since (twice its usual interval if longer) */
#define HBT_COND_FLOOR_NS   (2 * HBT_MS)    /* conditional waiting: seen using under half a CPU
                                               for at least this long */
#define HBT_BUSY_FACTOR     2.0             /* busy-waiting: this many times the most CPU time
                                               one of its beats took lately (or S if larger) */
#define HBT_SLOW_MAX        16.0            /* a teammate silent since within HBT_APART of its
                                               intervals of the judged thread says the machine
                                               runs this much slower at most (the VM's stalls:
                                               4-12x, benchmarks/vm_stalls.c): NPB LU's thread
                                               that spun on its teammate's flag, silent 2 us
                                               after it (1.5 of its intervals), otherwise made
                                               the spinning victim's bar 2,000 times its CPU time
                                               per beat, and the other way round: neither was
                                               reported in 300 ms */
#define HBT_LOOKS           12u             /* look maxima kept per thread */
#define HBT_CPU_LOOKS       32u             /* looks' CPU time per beat kept per thread */
#define HBT_CPU_HALF_NS     HBT_SEC         /* its CPU time per beat: half-life of the most */
#define HBT_CPU_WARM        16u             /* ... looks before it judges busy-waiting */
#define HBT_GAPS            7u              /* silences kept per thread (struct hbt_dist) */
#define HBT_GAP_OFTEN_MS    350u            /* ... which set its lateness only where that many
                                               come within this long, 20 a second or more: its
                                               pace (GROMACS: 2 a step of 3 ms), not the
                                               machine's preemptions now and then (jacobi_omp:
                                               with them, latency 2.4 -> 6.7 ms) */
#define HBT_GAP_USUAL_MAX_NS (10 * HBT_MS)   /* late: its usual silence (the third longest of its
                                                latest HBT_LOOKS silences, less its runtime
                                                waits) counts up to this much: units of a few
                                                ms among beats microseconds apart (GROMACS:
                                                two regions of 1.3-5 ms a step among 17 of
                                                10 us) are its pace, not lateness to look at
                                                every 0.2 ms (+59 % wall) */
#define HBT_TAIL_MAX        2.0             /* late: its usual worst interval, at most this
                                               many baselines (a stalled machine does not blind it) */
#define HBT_LOCK_WAIT_NS    (5 * HBT_MS)    /* final passes: wait for a view this long */
#define HBT_K_MAX           (1u << 20)

/* hbt_mon.mode: HBT_MON_CENTRAL or HBT_MON_RING (hbtrace_format.h), or one of
 * these two, which are never recorded */
enum {
    HBT_MON_NONE = -1,   /* no monitor asked for (yet) */
    HBT_MON_OFF  = 2,    /* HBTRACE_MONITOR=off */
};

/* judge results */
enum { HBT_J_FREE, HBT_J_SILENT, HBT_J_ALIVE, HBT_J_DEAD };

/* final passes */
enum { HBT_FIN_NONE, HBT_FIN_FINISHED, HBT_FIN_EXIT_OK, HBT_FIN_EXIT_FAIL };

/* The checkers' view of one thread, under `lock`. 64 bytes. */
struct hbt_view {
    uint32_t lock;        /* try-lock: 0 free, 1 taken */
    uint8_t  final;       /* atomic: exited or failed for good, never judged again */
    uint8_t  soft;        /* EXITED by a Finished pass: judged again if it beats */
    uint8_t  cur;         /* behavior last reported (RUNNING before any) */
    uint8_t  probing;     /* its CPU clock was sampled at probe_t, after the latest beat seen */
    uint32_t seen_seq;    /* beat count at the latest beat seen */
    uint16_t nbeats;      /* beats folded into the baseline (saturating) */
    uint16_t proc_gap;    /* late: current back-off between /proc reads, 16 us units */
    uint64_t seen_t;      /* time of the latest beat seen, 0 before the first look */
    double   base;        /* baseline inter-beat interval B_j, ns */
    uint64_t proc_next;   /* late: no /proc read before this */
    uint64_t probe_t;     /* probing: when its CPU clock was sampled */
    uint64_t probe_cpu;   /* ... its CPU time then */
    uint32_t k : 24;      /* heart-rate divisor the baseline belongs to */
    uint32_t slow_end : 1;/* the latest beat seen ended a slow interval */
    uint32_t held_peer : 1;/* late since its latest beat seen, it was held as waiting for a
                              teammate (hbt_waits_for_peer) */
    uint32_t blocked_seen : 1;/* late since its latest beat seen, its latest late look read it
                              blocked (S, D) */
    uint32_t probe_seq;   /* probing: its beat count at the sample */
};

/* The latest HBT_LOOKS values of one of a thread's quantities, and their
 * tail: the third largest (the largest while fewer than three). */
struct hbt_tail {
    uint32_t x[HBT_LOOKS];
    uint32_t n;           /* values recorded (saturating), next index n % HBT_LOOKS */
    uint32_t tail;
};

/* The latest HBT_CPU_LOOKS values of CPU time per beat (ns) and their upper
 * quartile: a thread's usual, which a stall of the machine over a few looks
 * does not move. */
struct hbt_cpu_tail {
    uint32_t x[HBT_CPU_LOOKS];
    uint32_t n;
    uint32_t tail;
};

/* The checkers' record of a thread's own distributions, under the view's lock,
 * from its usual work (not from a reported anomaly): */
struct hbt_dist {
    struct hbt_tail wall; /* its mean interval between two of its beats in each of its
                             latest looks that saw beats, ns */
    struct hbt_cpu_tail cpu; /* its CPU time per beat between two such looks, ns */
    double   cpu_max;     /* its most CPU time per beat (of a thread outside a team: the
                             tail of `cpu`), ns, forgotten by half every HBT_CPU_HALF_NS */
    uint64_t cpu_t;       /* when cpu_max was last updated */
    uint16_t cpu_n;       /* such looks (saturating) */
    int16_t  tick_cpu;    /* late on a machine whose host may stop its CPUs: the CPU it was on
                             (-1: not followed; with tick_n, tick_t, tick_same below) */
    uint32_t probe_waited;/* probing: its waited_us at the sample */
    uint32_t gap_x[HBT_GAPS]; /* its latest silences that ended with a beat and no verdict
                             (of its gap limit or more: hbt_gap_limit), less its time in
                             runtime waits meanwhile, ns; */
    uint32_t gap_tail;    /* ... their third longest: up to HBT_GAP_USUAL_MAX_NS, how long
                             it may be silent and not late (hbt_limit), while they come */
    uint32_t gap_from_ms; /* ... often: HBT_GAPS of them took HBT_GAP_OFTEN_MS at most (the
                             latest batch began then, ms of the clock mod 2^32), */
    uint16_t gap_n;       /* ... how many (HBT_GAPS up to twice that once the ring is full), */
    uint16_t gap_often;   /* ... and whether the latest whole batch came that often */
    uint32_t gap_waited;  /* its waited_us at the latest look that saw it beat */
    double   late_cpu;    /* the most CPU time a late look saw it use in its unit of work in
                             progress (since the sample after its latest beat), ns */
    float    late_share;  /* ... its CPU share over the time sampled then */
    uint32_t tick_n;      /* late on a machine whose host may stop its CPUs: the timer tick
                             count of its CPU, */
    uint64_t tick_t;      /* ... when it was read first or seen to change (0: not followed) */
    uint16_t tick_same;   /* ... and for how long after that it was read unchanged, us
                             (saturating: only whether over HBT_FROZEN_NS counts) */
    uint8_t  tick_new;    /* ... changes seen (saturating; a move to another CPU is one):
                             tick_t is a change, not the first read, when non-zero */
    uint8_t  froze;       /* its CPU was seen stopped since its latest beat */
    uint16_t tick_run;    /* ... how long before tick_t its CPU was first seen to tick
                             (tick_new), 16 us units (saturating) */
    uint64_t tick_cpu1;   /* ... its CPU time then */
    uint32_t late_from;   /* atomic: late and at work at its latest such look: its latest
                             beat then, us (mod 2^32) */
    uint32_t late_at;     /* atomic: ... the time of that look, us (mod 2^32) */
    uint32_t gap_end;     /* atomic: the first beat after its latest gap a look saw end (one
                             of its lateness limit or more, or the one it was late in at
                             late_at), us (mod 2^32; older than late_at: that one not yet) */
};

/* A thread's counters as a checker (ring checks, Monitor calls, final
 * passes), written only by that thread. */
struct hbt_checkline {
    uint64_t msgs;
    uint64_t checks;
    uint64_t last_ns;     /* its latest ring check */
    uint64_t period_ns;   /* EWMA of the time between its ring checks */
    struct hbt_unit unit; /* the chunk of a loop it is in (internal.h), written on its
                             automatic beats */
};

struct hbt_heart {
    struct hbt_beatline  b __attribute__((aligned(64)));
    struct hbt_checkline c __attribute__((aligned(64)));
    struct hbt_view      v __attribute__((aligned(64)));
    struct hbt_dist      d __attribute__((aligned(64)));
};

_Static_assert(sizeof(struct hbt_beatline) == 64, "beat line is one cache line");
_Static_assert(sizeof(struct hbt_view) <= 64, "view is one cache line");
_Static_assert(sizeof(struct hbt_dist) <= 320, "distributions are five cache lines");
_Static_assert(sizeof(struct hbt_heart) == 512, "eight lines per heart");

extern struct hbt_heart hbt_hearts[HBT_HEARTS] HBT_HIDDEN;

/* Global monitor state. The configuration is written when the trace file
 * opens (single-threaded or under g.lock), everything else atomically. */
struct hbt_mon {
    int      mode;            /* atomic: HBT_MON_NONE, HBT_MON_CENTRAL, HBT_MON_RING, HBT_MON_OFF */
    int      env_mode;        /* HBTRACE_MONITOR: HBT_MON_NONE when unset */
    double   late;            /* S */
    uint64_t period_ns;       /* HBTRACE_MONITOR_PERIOD_US, 0: adaptive */
    double   heart_rate;      /* HBTRACE_HEART_RATE, 0: none */
    int      have_proc;       /* /proc/self/task is readable */
    int      from_env;        /* the mode came from HBTRACE_MONITOR */
    int      type_warned;     /* atomic */
    int      pending;         /* atomic: a fork child still has to write its
                                 metadata and (central) start its thread */
    int      started;         /* atomic: the monitor thread was started in this process */
    int      stop;            /* atomic: the process is exiting */
    int      rate_noted;      /* atomic: heart_rate is in the metadata */
    uint64_t start_ns;        /* when the monitor became active */
    uint64_t next_adjust;     /* atomic: HBTRACE_HEART_RATE: next automatic adjustment */
    uint32_t adjust_lock;     /* atomic try-lock of the adjustment */
    uint32_t unwatched;       /* atomic: threads beyond the heart table */
    uint32_t wake;            /* futex word the monitor thread sleeps on */
    int      idle;            /* atomic: it sleeps with no thread to watch: wake
                                 it when a thread beats for the first time */
    uint64_t central_msgs;    /* written by the monitor thread only */
    uint64_t central_passes;
    uint64_t central_period_ns;
    uint64_t api_msgs;        /* atomic: checks by threads without a heart entry */
    uint64_t api_passes;      /* atomic */
    struct { uint64_t t; uint32_t seq; uint32_t valid; } snap[HBT_HEARTS];  /* adjustment windows */
    uint64_t steal_t;         /* atomic: when it was read last */
    int      steals;          /* atomic: a virtual machine, or one with steal time: its host may stop its CPUs */
    uint64_t stop_from;       /* atomic: the latest CPU seen stopped: from (its last tick seen) */
    uint64_t stop_to;         /* atomic: ... to (when it was seen so, or running again) */
};

extern struct hbt_mon hbt_mon HBT_HIDDEN;

/* One checker's pass. */
struct hbt_ctx {
    uint64_t msgs;        /* entries of other threads read */
    uint64_t look;        /* ALIVE: when this thread should be looked at next, 0: no wish */
    uint64_t tol;         /* ... and how much later is still fine */
    uint32_t self;        /* the checker's own slot, UINT32_MAX if none */
    uint16_t flags;       /* HBT_MON_* of the records */
    uint8_t  final;       /* HBT_FIN_* */
    uint8_t  wait;        /* may wait (bounded) for a view lock */
    int      unwarm;      /* a live thread has no baseline yet */
};

struct hbt_seen {
    uint32_t seq;
    uint64_t t;
};

static inline uint32_t hbt_nthreads(void)
{
    uint32_t n = __atomic_load_n(&hbt_g.nthreads, __ATOMIC_ACQUIRE);
    return n < HBT_HEARTS ? n : HBT_HEARTS;
}

static inline int32_t hbt_sat32(double x)
{
    if (!(x > 0))
        return 0;
    return x >= (double)INT32_MAX ? INT32_MAX : (int32_t)x;
}

/* monitor.c */
HBT_HIDDEN void hbt_account(struct hbt_tls *t, uint64_t msgs, uint64_t passes);
HBT_HIDDEN void hbt_mon_auto(uint64_t now);

/* monitor_judge.c */
HBT_HIDDEN uint64_t hbt_steal_ticks(void);
HBT_HIDDEN int hbt_under_hypervisor(void);
/* monitor_still.c: is a late, running thread making progress of its own? */
HBT_HIDDEN void hbt_still_start(void);
HBT_HIDDEN const char *hbt_still_how(void);
#define HBT_STILL_PERIOD_NS (250 * HBT_US)   /* a register sample every this much of its CPU time */
enum { HBT_STILL_NO = -2, HBT_STILL_UNKNOWN = -1 };   /* besides 0 (works) and 1 (still) */
HBT_HIDDEN int hbt_still_follow(uint32_t j, int tid);
HBT_HIDDEN int hbt_still_known(uint32_t j);
HBT_HIDDEN uint64_t hbt_still_moved(uint32_t j);
HBT_HIDDEN int hbt_still_waiter_queued(uint32_t j, int tid, uint64_t now, uint64_t cpu);
#define HBT_STILL_RECENT_NS (20 * HBT_MS)   /* a teammate seen to move on this recently is at work */
#define HBT_STILL_STUCK_NS  HBT_SEC          /* still beside a still teammate: held this long at most */
#define HBT_SHARE_OVER      2.0              /* a thread of a team is late for its team once it has
                                                 taken this many times the share of the last teammate
                                                 that waits for it (hbt_judge_locked) */
#define HBT_UNIT_OVER       8.0              /* a chunk of a loop this many times the loop's second
                                                 longest chunk lately, and HBT_UNIT_USUAL times its
                                                 longest, is overdue, whatever its team does
                                                 (hbt_unit_overdue) */
#define HBT_UNIT_USUAL      2.0              /* up to this many times the loop's longest chunk
                                                 lately, a chunk is work, even while the team waits */
HBT_HIDDEN void hbt_still_pause(uint32_t j);
HBT_HIDDEN void hbt_still_end(uint32_t j);
HBT_HIDDEN void hbt_still_after_fork_child(void);
HBT_HIDDEN void hbt_mon_overslept(uint64_t from, uint64_t to, uint64_t queued);
HBT_HIDDEN void hbt_read_beat(const struct hbt_beatline *b, struct hbt_seen *s);
HBT_HIDDEN int  hbt_judge(uint32_t j, struct hbt_ctx *c);
HBT_HIDDEN uint64_t hbt_pass_all(struct hbt_ctx *c, uint32_t *active);
HBT_HIDDEN void hbt_mon_record(int mode, uint64_t period_ns, unsigned rec_mode);

/* monitor_central.c */
HBT_HIDDEN void hbt_mon_wake(void);
HBT_HIDDEN void hbt_mon_start_thread(void);

/* monitor_ring.c */
HBT_HIDDEN uint64_t hbt_ring_check(struct hbt_tls *t, uint64_t now);

#endif /* HBT_MONITOR_H */
