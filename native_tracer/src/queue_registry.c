/*
 * queue_registry.c -- creation, names, destruction of the instrumented
 * queues, and what becomes of them at exit and in a fork child.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "queue.h"

struct hbt_qreg hbt_qreg = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void q_atfork_child(void)
{
    /* the parent's queues are not this process's: no monitors, no samples
     * (their pid says so); ids start again in the child's own file */
    pthread_mutex_init(&hbt_qreg.lock, NULL);
    __atomic_store_n(&hbt_qreg.head, NULL, __ATOMIC_RELAXED);
    hbt_qreg.next_id = 0;
    hbt_qreg.noted = 0;
    hbt_qreg.mon_running = 0;   /* threads do not survive fork */
    hbt_qreg.mon_joinable = 0;
    hbt_qreg.mwake = 0;
}

/* The name as NAME records: 24 bytes of text in bytes 0..23 of each slot.
 * Every fragment starts with a non-NUL byte of the name, so t_ns is never 0
 * (which hbt_emit would take as "read the clock"). */
static void q_emit_name(const struct hbt_queue *q, unsigned mode)
{
    uint32_t n = q->name_len;
    for (uint32_t off = 0, k = 0; off < n; off += Q_FRAG, k++) {
        char frag[Q_FRAG];
        memset(frag, 0, sizeof frag);
        memcpy(frag, q->name + off, n - off < Q_FRAG ? n - off : Q_FRAG);
        uint64_t t_ns;
        uint32_t seq;
        int32_t thread, loop, iter;
        memcpy(&t_ns, frag, 8);
        memcpy(&seq, frag + 8, 4);
        memcpy(&thread, frag + 12, 4);
        memcpy(&loop, frag + 16, 4);
        memcpy(&iter, frag + 20, 4);
        uint16_t flags = (uint16_t)(k | (off + Q_FRAG >= n ? HBT_NAME_LAST : 0));
        hbt_emit(HBT_REC_NAME, flags, seq, thread, loop, iter,
                 HBT_NAME_QUEUE << 24 | (q->id & 0xFFFFFFu), t_ns, mode);
    }
}

HBT_EXPORT hbt_queue_t *hbt_queue_create(const char *name, size_t item_size, size_t capacity)
{
    if (item_size == 0 || item_size > Q_MAX_ITEM || capacity == 0 || capacity > Q_MAX_CAP) {
        errno = EINVAL;
        return NULL;
    }
    void *mem = NULL, *buf = NULL;
    if (posix_memalign(&mem, Q_LINE, sizeof(struct hbt_queue)) != 0) {
        errno = ENOMEM;
        return NULL;
    }
    if (posix_memalign(&buf, 64, item_size * capacity) != 0) {
        free(mem);
        errno = ENOMEM;
        return NULL;
    }
    struct hbt_queue *q = mem;
    memset(q, 0, sizeof *q);
    q->buf = buf;
    q->isz = item_size;
    q->cap = (uint32_t)capacity;
    q->hyst = q->cap / 8;   /* below cap: a sleeping producer is woken by an empty queue */
    q->pid = getpid();

    int old;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    uint32_t slot;
    int tracing = hbt_self_slot(&slot);   /* opens the trace if it is enabled */

    pthread_mutex_lock(&hbt_qreg.lock);
    q_configure();
    hbt_fork_child_add(q_atfork_child);
    q->id = hbt_qreg.next_id++;
    int note = tracing && !hbt_qreg.noted;
    if (note)
        hbt_qreg.noted = 1;
    pthread_mutex_unlock(&hbt_qreg.lock);

    if (name && *name) {
        q->name_len = (uint32_t)hbt_utf8_prefix(name, strlen(name), Q_NAME_MAX);
        memcpy(q->name, name, q->name_len);
    } else {
        q->name_len = (uint32_t)snprintf(q->name, sizeof q->name, "queue%u", q->id);
    }
    q->name[q->name_len] = '\0';

    if (tracing) {
        if (note) {
            char num[16];
            hbt_meta_append_once("queue_monitor", hbt_qreg.monitor_on ? "on" : "off");
            snprintf(num, sizeof num, "%u", hbt_qreg.period_us);
            hbt_meta_append_once("queue_period_us", num);
            snprintf(num, sizeof num, "%u", hbt_qreg.period_max_us);
            hbt_meta_append_once("queue_period_max_us", num);
        }
        q->monitored = hbt_qreg.monitor_on;
        q->m.period_us = hbt_qreg.period_us;
        q->m.open_ns = hbt_now_ns();
        q->m.last_ns = q->m.open_ns;
        q->m.T = (uint64_t)hbt_qreg.period_us * Q_NS_US;
        q->m.deadline = q_first_deadline(q->m.open_ns, q->m.T);
        hbt_emit(HBT_REC_QUEUE_OPEN, 0, q->cap, (int32_t)q->id, 0, (int32_t)hbt_qreg.period_us,
                 (uint32_t)q->isz, q->m.open_ns, HBT_MODE_API);
        q_emit_name(q, HBT_MODE_API);
    }

    pthread_mutex_lock(&hbt_qreg.lock);
    q->next = hbt_qreg.head;
    __atomic_store_n(&hbt_qreg.head, q, __ATOMIC_RELEASE);
    if (q->monitored) {
        if (hbt_qreg.mon_running)
            q_wake_monitor();   /* it sleeps toward the other queues' deadlines */
        else
            q_start_monitor();
    }
    pthread_mutex_unlock(&hbt_qreg.lock);
    pthread_setcancelstate(old, NULL);
    return q;
}

HBT_EXPORT void hbt_queue_destroy(hbt_queue_t *q)
{
    if (!q)
        return;
    int old;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    pid_t self = getpid();
    int join = 0;
    pthread_t thread;
    pthread_mutex_lock(&hbt_qreg.lock);
    /* unlinked under the lock: the monitor thread, which samples only under
     * it, never touches q again */
    int monitored_left = 0;
    for (struct hbt_queue **pp = &hbt_qreg.head; *pp;) {
        if (*pp == q) {
            __atomic_store_n(pp, q->next, __ATOMIC_RELEASE);
            continue;
        }
        monitored_left |= (*pp)->monitored && (*pp)->pid == self;
        pp = &(*pp)->next;
    }
    if (q->monitored && q->pid == self && !monitored_left && hbt_qreg.mon_running) {
        hbt_qreg.mon_gen++;   /* the last monitored queue: the monitor thread ends */
        hbt_qreg.mon_running = 0;
        q_wake_monitor();
    }
    if (!hbt_qreg.mon_running && hbt_qreg.mon_joinable) {
        join = 1;
        thread = hbt_qreg.mon_thread;
        hbt_qreg.mon_joinable = 0;
    }
    pthread_mutex_unlock(&hbt_qreg.lock);
    /* a fork child never samples its parent's queues */
    if (q->pid == self && q->monitored && hbt_state() == HBT_ON)
        (void)q_sample(q, 1, HBT_MODE_API & ~HBT_M_RESERVE, NULL);
    if (join)
        pthread_join(thread, NULL);
    free(q->buf);
    free(q);
    pthread_setcancelstate(old, NULL);
}

/* Process exit (exit, return from main, _exit): the last samples of every
 * queue still open; the monitors stop writing. Never waits long. */
void hbt_queue_at_exit(void)
{
    if (!__atomic_load_n(&hbt_qreg.head, __ATOMIC_ACQUIRE))
        return;
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_nsec += Q_EXIT_LOCK_MS * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    if (pthread_mutex_timedlock(&hbt_qreg.lock, &dl) != 0)
        return;
    pid_t self = getpid();
    for (struct hbt_queue *q = hbt_qreg.head; q; q = q->next) {
        if (q->pid == self && q->monitored && hbt_state() == HBT_ON)
            (void)q_sample(q, 1, HBT_MODE_END & ~HBT_M_RESERVE, NULL);
    }
    if (hbt_qreg.mon_running) {   /* the monitor thread writes no more */
        hbt_qreg.mon_gen++;
        hbt_qreg.mon_running = 0;
        q_wake_monitor();
    }
    pthread_mutex_unlock(&hbt_qreg.lock);
}
