/*
 * monitor_central.c -- the central monitor thread (monitor.c describes
 * it): one tracer thread that judges every thread, sleeping until the
 * earliest moment one of them could become late.
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

#define HBT_MON_STACK       (256u * 1024u)

/* ------------------------------------------------------------------ */
/* the central monitor thread                                           */

/* A thread beat for the first time: an idle monitor thread looks at once. */
void hbt_mon_wake(void)
{
    if (__atomic_load_n(&hbt_mon.idle, __ATOMIC_ACQUIRE) &&
        __atomic_exchange_n(&hbt_mon.idle, 0, __ATOMIC_ACQ_REL)) {
        __atomic_fetch_add(&hbt_mon.wake, 1, __ATOMIC_SEQ_CST);
        hbt_futex_wake(&hbt_mon.wake, 1);
    }
}

void hbt_mon_auto(uint64_t now);

static void *hbt_mon_main(void *unused)
{
    (void)unused;
    struct hbt_tls *t = &hbt_tls;
    /* a tracer thread whose chunk holds only the monitor's records: no
     * THREAD_START, no heart entry, never beating */
    t->monitor = 1;
    hbt_register_quiet(t);
    hbt_bg_wake_on_time();
    /* the register samples' first event costs its opener 10-15 ms (the kernel
     * turns on its scheduler hooks): opened now, by a thread of its own, once,
     * and kept */
    hbt_still_start();

    uint64_t now = hbt_now_ns();
    uint64_t next_stat = now + HBT_SEC, last_stat = now, passes_at_stat = 0;
    uint64_t next_life = now + HBT_POLL_IDLE_NS;
    uint64_t last_rq = 0;
    int have_rq = 0;
    while (!__atomic_load_n(&hbt_mon.stop, __ATOMIC_ACQUIRE) && hbt_state() == HBT_ON) {
        struct hbt_ctx c = { .self = UINT32_MAX, .flags = HBT_MON_CENTRAL };
        uint32_t active = 0;
        uint64_t wake = hbt_pass_all(&c, &active);
        uint64_t passes = hbt_mon.central_passes + 1;
        __atomic_store_n(&hbt_mon.central_msgs, hbt_mon.central_msgs + c.msgs, __ATOMIC_RELAXED);
        __atomic_store_n(&hbt_mon.central_passes, passes, __ATOMIC_RELAXED);

        now = hbt_now_ns();
        if (hbt_mon.period_ns) {
            wake = now + hbt_mon.period_ns;
        } else if (!active) {
            wake = now + HBT_POLL_IDLE_NS;
        } else {
            if (c.unwarm && wake > now + HBT_POLL_WARM_NS)
                wake = now + HBT_POLL_WARM_NS;
            if (wake < now + HBT_POLL_MIN_NS)
                wake = now + HBT_POLL_MIN_NS;
            if (wake > now + HBT_POLL_MAX_NS)
                wake = now + HBT_POLL_MAX_NS;
        }
        if (now >= next_stat) {
            uint64_t period = (now - last_stat) / (passes - passes_at_stat ? passes - passes_at_stat : 1);
            __atomic_store_n(&hbt_mon.central_period_ns, period, __ATOMIC_RELAXED);
            hbt_mon_record(HBT_MON_CENTRAL, period, HBT_MODE_BEAT);
            last_stat = now;
            passes_at_stat = passes;
            next_stat = now + HBT_SEC;
        }
        if (wake > next_stat)
            wake = next_stat;
        if (hbt_mon.heart_rate > 0) {
            hbt_mon_auto(now);
            uint64_t due = __atomic_load_n(&hbt_mon.next_adjust, __ATOMIC_RELAXED);
            if (due > now && wake > due)
                wake = due;
        }
        if (!active && now >= next_life) {
            next_life = now + HBT_POLL_IDLE_NS;
            if (hbt_orphaned())
                break;   /* do not keep the process alive */
        }
        /* idle: the first beat of a thread wakes us (`idle` is set before
         * the word is read, and the waker bumps the word after clearing it) */
        uint32_t word = __atomic_load_n(&hbt_mon.wake, __ATOMIC_SEQ_CST);
        __atomic_store_n(&hbt_mon.idle, !active || c.unwarm, __ATOMIC_SEQ_CST);
        (void)hbt_sleep_until(wake, &hbt_mon.wake, word);
        __atomic_store_n(&hbt_mon.idle, 0, __ATOMIC_RELAXED);
        uint64_t woke = hbt_now_ns();
        if (__atomic_load_n(&hbt_mon.steals, __ATOMIC_RELAXED)) {
            /* its run-queue delay since the previous wake: how much of a late
             * wake it spent waiting for a CPU */
            int ok;
            uint64_t rq = hbt_run_delay(&ok);
            if (ok && have_rq && woke > wake)
                hbt_mon_overslept(wake, woke, rq > last_rq ? rq - last_rq : 0);
            have_rq = ok;
            last_rq = rq;
        }
    }
    return NULL;
}

/* Start the monitor thread once per process; never waits. */
void hbt_mon_start_thread(void)
{
    if (__atomic_load_n(&hbt_mon.started, __ATOMIC_ACQUIRE) || getpid() != hbt_g.pid)
        return;   /* getpid: never from a vfork child */
    if (__atomic_exchange_n(&hbt_mon.started, 1, __ATOMIC_ACQ_REL))
        return;
    int rc = hbt_bg_start(NULL, "hbt-monitor", HBT_MON_STACK, 0, hbt_mon_main, NULL);
    if (rc != 0)
        hbt_warn("hbtrace: cannot start the monitor thread: %s; behaviors are detected "
                 "only by Heartbeat_*_Monitor calls and at Finished/exit", strerror(rc));
}
