/*
 * api.c -- the public API (hbtrace.h): the modern hbt_* calls and the entry
 * points of the seed papers' tracers, all thin shells around the hot path in
 * internal.h and hbt_event() in core.c.
 */
#define _GNU_SOURCE
#include <stdio.h>

#include "hbtrace.h"
#include "internal.h"

/* Init of any flavour: open the file if needed, note the API once in the
 * metadata, record INIT. */
static int hbt_api_init(const char *api, int type, int typed)
{
    if (!hbt_ensure_open())
        return -1;
    hbt_meta_append_once("api", api);
    if (typed) {
        char num[16];
        snprintf(num, sizeof num, "%d", type);
        hbt_meta_append_once("api_type", num);
    }
    hbt_event(HBT_REC_INIT, 0, (uint32_t)type, HBT_MODE_API);
    return 0;
}

static void hbt_api_finished(void)
{
    /* tears nothing down: other threads may still beat, and lifecycle
     * records continue until the process ends. The monitor's final pass
     * reports the threads that stopped beating as exited, and a MONITOR
     * record the totals so far. */
    hbt_mon_finished();
    hbt_event(HBT_REC_FINISHED, 0, 0, HBT_MODE_API);
}

/* Heartbeat_*_Init(type): Init, then the monitor of that type. */
static int hbt_api_init_typed(const char *api, int type)
{
    if (hbt_api_init(api, type, 1) != 0)
        return -1;
    hbt_mon_init_type(type);
    return 0;
}

/* ---- modern API ---- */

HBT_EXPORT int hbt_init(const char *name)
{
    if (!hbt_ensure_open())
        return -1;
    if (name)
        hbt_meta_append_once("name", name);
    return hbt_api_init("hbt", 0, 0);
}

HBT_EXPORT void hbt_set_thread(int thread)
{
    struct hbt_tls *t = &hbt_tls;
    t->user_thread = thread;
    t->beat_thread = thread;
    t->user_set = 1;
    hbt_mon_set_thread(t);
}

HBT_EXPORT void hbt_beat(unsigned tag)
{
    hbt_beat_inline(1, 0, 0, 0, tag);
}

HBT_EXPORT void hbt_beat_ex(int thread, int loop, int iter)
{
    hbt_beat_inline(0, thread, loop, iter, 0);
}

HBT_EXPORT void hbt_finish(void)
{
    hbt_api_finished();
}

HBT_EXPORT const char *hbt_trace_path(void)
{
    return hbt_ensure_open() ? hbt_g.path : NULL;
}

/* ---- entry points of the seed papers' tracers ---- */

HBT_EXPORT int L_Heartbeat_OpenMP_Init(void)
{
    return hbt_api_init("L_Heartbeat_OpenMP", 0, 0);
}

HBT_EXPORT int L_Heartbeat_OpenMP_Generate(int threadnum, int loopnum, int iter)
{
    hbt_beat_inline(0, threadnum, loopnum, iter, 0);
    return 0;
}

HBT_EXPORT void L_Heartbeat_OpenMP_Finished(void)
{
    hbt_api_finished();
}

HBT_EXPORT int Heartbeat_OpenMP_Init(int type)
{
    return hbt_api_init_typed("Heartbeat_OpenMP", type);
}

HBT_EXPORT void Heartbeat_OpenMP_Generate(int threadnum, int loopnum, int iteration)
{
    hbt_beat_inline(0, threadnum, loopnum, iteration, 0);
}

HBT_EXPORT void Heartbeat_OpenMP_Monitor(void)
{
    hbt_mon_api_pass();
}

HBT_EXPORT int Heartbeat_OpenMP_Finished(void)
{
    hbt_api_finished();
    return 0;
}

HBT_EXPORT int Heartbeat_MultiPthread_Init(int type)
{
    return hbt_api_init_typed("Heartbeat_MultiPthread", type);
}

HBT_EXPORT void Heartbeat_MultiPthread_Generate(int pthreadnum, int loopnum, int iteration)
{
    hbt_beat_inline(0, pthreadnum, loopnum, iteration, 0);
}

HBT_EXPORT void Heartbeat_MultiPthread_Monitor(void)
{
    hbt_mon_api_pass();
}

HBT_EXPORT int Heartbeat_MultiPthread_Finished(void)
{
    hbt_api_finished();
    return 0;
}

HBT_EXPORT int Heartbeat_HeartRate_Adjust(float expected_heart_rate)
{
    return hbt_mon_adjust((double)expected_heart_rate, 0);
}
