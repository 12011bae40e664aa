/*
 * ompt_abi_check.c -- native_tracer/src/ompt_abi.h (the tracer's own declarations of the
 * OMPT interface) against the installed runtime's omp-tools.h: compiles only if every value
 * and layout ompt.c relies on agrees (tests/test_ompt_beats.py).
 */
#include <stddef.h>
#include <omp-tools.h>
#include "ompt_abi.h"

#define SAME(a, b) _Static_assert((int)(a) == (int)(b), #a " != " #b)

SAME(HBT_OMPT_THREAD_BEGIN, ompt_callback_thread_begin);
SAME(HBT_OMPT_THREAD_END, ompt_callback_thread_end);
SAME(HBT_OMPT_PARALLEL_BEGIN, ompt_callback_parallel_begin);
SAME(HBT_OMPT_TASK_CREATE, ompt_callback_task_create);
SAME(HBT_OMPT_TASK_SCHEDULE, ompt_callback_task_schedule);
SAME(HBT_OMPT_IMPLICIT_TASK, ompt_callback_implicit_task);
SAME(HBT_OMPT_SYNC_REGION_WAIT, ompt_callback_sync_region_wait);
SAME(HBT_OMPT_WORK, ompt_callback_work);
SAME(HBT_OMPT_MUTEX_ACQUIRE, ompt_callback_mutex_acquire);
SAME(HBT_OMPT_MUTEX_ACQUIRED, ompt_callback_mutex_acquired);
SAME(HBT_OMPT_DISPATCH, ompt_callback_dispatch);
SAME(HBT_OMPT_SET_ERROR, ompt_set_error);
SAME(HBT_OMPT_SET_NEVER, ompt_set_never);
SAME(HBT_OMPT_SET_ALWAYS, ompt_set_always);
SAME(HBT_OMPT_SCOPE_BEGIN, ompt_scope_begin);
SAME(HBT_OMPT_SCOPE_END, ompt_scope_end);
SAME(HBT_OMPT_SCOPE_BEGINEND, ompt_scope_beginend);
SAME(HBT_OMPT_WORK_LOOP, ompt_work_loop);
SAME(HBT_OMPT_WORK_SECTIONS, ompt_work_sections);
SAME(HBT_OMPT_WORK_SINGLE_EXECUTOR, ompt_work_single_executor);
SAME(HBT_OMPT_WORK_SINGLE_OTHER, ompt_work_single_other);
SAME(HBT_OMPT_WORK_WORKSHARE, ompt_work_workshare);
SAME(HBT_OMPT_SYNC_BARRIER, ompt_sync_region_barrier);
SAME(HBT_OMPT_SYNC_BARRIER_IMPLICIT, ompt_sync_region_barrier_implicit);
SAME(HBT_OMPT_SYNC_BARRIER_EXPLICIT, ompt_sync_region_barrier_explicit);
SAME(HBT_OMPT_SYNC_BARRIER_IMPLEMENTATION, ompt_sync_region_barrier_implementation);
SAME(HBT_OMPT_SYNC_TASKWAIT, ompt_sync_region_taskwait);
SAME(HBT_OMPT_SYNC_TASKGROUP, ompt_sync_region_taskgroup);
SAME(HBT_OMPT_SYNC_BARRIER_IMPLICIT_WORKSHARE, ompt_sync_region_barrier_implicit_workshare);
SAME(HBT_OMPT_SYNC_BARRIER_IMPLICIT_PARALLEL, ompt_sync_region_barrier_implicit_parallel);
SAME(HBT_OMPT_MUTEX_CRITICAL, ompt_mutex_critical);
SAME(HBT_OMPT_MUTEX_ORDERED, ompt_mutex_ordered);
SAME(HBT_OMPT_TASK_INITIAL, ompt_task_initial);
SAME(HBT_OMPT_TASK_IMPLICIT, ompt_task_implicit);
SAME(HBT_OMPT_TASK_EXPLICIT, ompt_task_explicit);
SAME(HBT_OMPT_TASK_COMPLETE, ompt_task_complete);
SAME(HBT_OMPT_TASK_LATE_FULFILL, ompt_task_late_fulfill);
SAME(HBT_OMPT_PARALLEL_LEAGUE, ompt_parallel_league);
_Static_assert(sizeof(hbt_ompt_data_t) == sizeof(ompt_data_t), "ompt_data_t");
_Static_assert(sizeof(hbt_ompt_start_tool_result_t) == sizeof(ompt_start_tool_result_t), "result");
_Static_assert(offsetof(hbt_ompt_start_tool_result_t, finalize)
               == offsetof(ompt_start_tool_result_t, finalize), "finalize");
_Static_assert(offsetof(hbt_ompt_start_tool_result_t, tool_data)
               == offsetof(ompt_start_tool_result_t, tool_data), "tool_data");
_Static_assert(sizeof(ompt_scope_endpoint_t) == sizeof(int) && sizeof(ompt_work_t) == sizeof(int)
               && sizeof(ompt_sync_region_t) == sizeof(int) && sizeof(ompt_mutex_t) == sizeof(int)
               && sizeof(ompt_task_status_t) == sizeof(int) && sizeof(ompt_wait_id_t) == 8,
               "enums passed as int");

/* the callbacks' types, as ompt.c declares them, are the runtime's */
static hbt_ompt_implicit_task_t a1;
static hbt_ompt_work_t a2;
static hbt_ompt_sync_region_t a3;
static hbt_ompt_mutex_acquire_t a4;
static hbt_ompt_mutex_t a5;
static hbt_ompt_task_create_t a6;
static hbt_ompt_task_schedule_t a7;
static hbt_ompt_parallel_begin_t a8;

int main(void)
{
    /* same number and sizes of parameters: calling through either type is one call */
    ompt_callback_implicit_task_t b1 = (ompt_callback_implicit_task_t)a1;
    ompt_callback_work_t b2 = (ompt_callback_work_t)a2;
    ompt_callback_sync_region_t b3 = (ompt_callback_sync_region_t)a3;
    ompt_callback_mutex_acquire_t b4 = (ompt_callback_mutex_acquire_t)a4;
    ompt_callback_mutex_t b5 = (ompt_callback_mutex_t)a5;
    ompt_callback_task_create_t b6 = (ompt_callback_task_create_t)a6;
    ompt_callback_task_schedule_t b7 = (ompt_callback_task_schedule_t)a7;
    ompt_callback_parallel_begin_t b8 = (ompt_callback_parallel_begin_t)a8;
    return !!b1 + !!b2 + !!b3 + !!b4 + !!b5 + !!b6 + !!b7 + !!b8;
}
