/*
 * monitor_ring.c -- the ring checks of the decentralized monitor mode
 * (monitor.c describes them): a beating thread, on the cold path of its own
 * beats, judges its live neighbour.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "monitor.h"

/* ------------------------------------------------------------------ */
/* ring mode                                                            */

/* Thread t's ring check at time now, from the cold path of its beat (or
 * Heartbeat_*_Monitor). Returns when to check next. */
uint64_t hbt_ring_check(struct hbt_tls *t, uint64_t now)
{
    uint32_t self = t->thread_slot;
    uint32_t n = hbt_nthreads();
    uint64_t next = now + HBT_RING_IDLE_NS;
    if (self >= HBT_HEARTS)
        return next;
    struct hbt_ctx c = { .self = self, .flags = HBT_MON_RING };
    int old;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);   /* /proc reads are cancellation points */
    int found = 0;
    if (n > 1) {
        /* the neighbour found last, unless threads joined since; where
         * threads that did not beat yet lay in between, walk from ourselves
         * every 16th check to notice when they start */
        int cached = t->ring_valid && t->ring_n == n && t->ring_slot < n &&
                     t->ring_slot != self && !(t->ring_skipped && (++t->ring_count & 15) == 0);
        uint32_t j = cached ? t->ring_slot : (self + 1 == n ? 0 : self + 1);
        int skipped = 0;
        /* at most once round the ring: a ring whose other threads all died
         * ends here with no neighbour */
        for (uint32_t step = 0; step < n && j != self; step++) {
            int r = hbt_judge(j, &c);
            if (r == HBT_J_ALIVE) {
                found = 1;
                break;
            }
            if (r != HBT_J_DEAD)
                skipped = 1;
            j = j + 1 == n ? 0 : j + 1;
        }
        if (found) {
            t->ring_skipped = (uint8_t)(cached ? (t->ring_skipped | skipped) : skipped);
            t->ring_valid = 1;
            t->ring_slot = j;
            t->ring_n = n;
            next = c.look > now ? c.look : now + 1;
        } else {
            t->ring_valid = 0;
        }
    }
    if (!found) {
        /* no other live thread (they ended, or there never were any): it
         * judges itself, at its beats -- its own silence it cannot see, but
         * it still says when it runs again after a reported anomaly, and
         * CPU time it spent through a gap without beating, at the beat that
         * ends the gap (a run whose other threads finished first otherwise
         * left a busy-waiting thread reported busy to its end) */
        (void)hbt_judge(self, &c);
        if (c.look > now && c.look < next)
            next = c.look;
    }
    struct hbt_checkline *cl = &hbt_hearts[self].c;
    if (cl->last_ns && now > cl->last_ns) {
        uint64_t d = now - cl->last_ns;
        uint64_t p = cl->period_ns ? cl->period_ns - cl->period_ns / 8 + d / 8 : d;
        __atomic_store_n(&cl->period_ns, p, __ATOMIC_RELAXED);
    }
    cl->last_ns = now;
    hbt_account(t, c.msgs, 1);
    pthread_setcancelstate(old, NULL);
    return next;
}
