/*
 * ompt_abi.h -- the part of the OMPT interface (OpenMP 5.x, "OMPT" chapter) that
 * ompt.c uses, declared under hbt_ names so that the tracer builds with any C
 * compiler, without clang's omp-tools.h. The values and signatures are the
 * standard's ABI; tests/programs/ompt_abi_check.c checks every one of them
 * against the omp-tools.h of the installed LLVM OpenMP runtime.
 */
#ifndef HBT_OMPT_ABI_H
#define HBT_OMPT_ABI_H

#include <stdint.h>

typedef union hbt_ompt_data {
    uint64_t value;
    void *ptr;
} hbt_ompt_data_t;

typedef void (*hbt_ompt_fn_t)(void);                       /* ompt_interface_fn_t, ompt_callback_t */
typedef hbt_ompt_fn_t (*hbt_ompt_lookup_t)(const char *name); /* ompt_function_lookup_t */
typedef int  (*hbt_ompt_initialize_t)(hbt_ompt_lookup_t lookup, int initial_device_num,
                                      hbt_ompt_data_t *tool_data);
typedef void (*hbt_ompt_finalize_t)(hbt_ompt_data_t *tool_data);

typedef struct hbt_ompt_start_tool_result {                  /* ompt_start_tool_result_t */
    hbt_ompt_initialize_t initialize;
    hbt_ompt_finalize_t finalize;
    hbt_ompt_data_t tool_data;
} hbt_ompt_start_tool_result_t;

typedef hbt_ompt_start_tool_result_t *(*hbt_ompt_start_tool_t)(unsigned int omp_version,
                                                               const char *runtime_version);
typedef int (*hbt_ompt_set_callback_t)(int event, hbt_ompt_fn_t callback);   /* ompt_set_result_t */
typedef int (*hbt_ompt_get_callback_t)(int event, hbt_ompt_fn_t *callback);

/* ompt_callbacks_t */
enum {
    HBT_OMPT_THREAD_BEGIN = 1, HBT_OMPT_THREAD_END = 2, HBT_OMPT_PARALLEL_BEGIN = 3,
    HBT_OMPT_TASK_CREATE = 5, HBT_OMPT_TASK_SCHEDULE = 6, HBT_OMPT_IMPLICIT_TASK = 7,
    HBT_OMPT_SYNC_REGION_WAIT = 16, HBT_OMPT_WORK = 20, HBT_OMPT_MUTEX_ACQUIRE = 26,
    HBT_OMPT_MUTEX_ACQUIRED = 27, HBT_OMPT_NEST_LOCK = 28, HBT_OMPT_FLUSH = 29, HBT_OMPT_DISPATCH = 32,
    HBT_OMPT_EVENTS = 64                 /* above every event number of OpenMP 5.2 */
};

enum { HBT_OMPT_SET_ERROR = 0, HBT_OMPT_SET_NEVER = 1, HBT_OMPT_SET_ALWAYS = 5 };
enum { HBT_OMPT_SCOPE_BEGIN = 1, HBT_OMPT_SCOPE_END = 2, HBT_OMPT_SCOPE_BEGINEND = 3 };

/* ompt_work_t */
enum {
    HBT_OMPT_WORK_LOOP = 1, HBT_OMPT_WORK_SECTIONS = 2, HBT_OMPT_WORK_SINGLE_EXECUTOR = 3,
    HBT_OMPT_WORK_SINGLE_OTHER = 4, HBT_OMPT_WORK_WORKSHARE = 5
};

/* ompt_sync_region_t */
enum {
    HBT_OMPT_SYNC_BARRIER = 1, HBT_OMPT_SYNC_BARRIER_IMPLICIT = 2,
    HBT_OMPT_SYNC_BARRIER_EXPLICIT = 3, HBT_OMPT_SYNC_BARRIER_IMPLEMENTATION = 4,
    HBT_OMPT_SYNC_TASKWAIT = 5, HBT_OMPT_SYNC_TASKGROUP = 6,
    HBT_OMPT_SYNC_BARRIER_IMPLICIT_WORKSHARE = 8, HBT_OMPT_SYNC_BARRIER_IMPLICIT_PARALLEL = 9
};

/* ompt_mutex_t (the ones ompt.c records) */
enum { HBT_OMPT_MUTEX_LOCK = 1, HBT_OMPT_MUTEX_NEST_LOCK = 3, HBT_OMPT_MUTEX_CRITICAL = 5,
       HBT_OMPT_MUTEX_ORDERED = 7 };

/* ompt_task_flag_t, ompt_task_status_t, ompt_parallel_flag_t */
enum { HBT_OMPT_TASK_INITIAL = 0x1, HBT_OMPT_TASK_IMPLICIT = 0x2, HBT_OMPT_TASK_EXPLICIT = 0x4 };
enum { HBT_OMPT_TASK_COMPLETE = 1, HBT_OMPT_TASK_DETACH = 4, HBT_OMPT_TASK_EARLY_FULFILL = 5,
       HBT_OMPT_TASK_LATE_FULFILL = 6 };
enum { HBT_OMPT_PARALLEL_LEAGUE = 0x40000000 };

/* the callbacks ompt.c registers (ompt_callback_*_t) */
typedef void (*hbt_ompt_thread_begin_t)(int thread_type, hbt_ompt_data_t *thread_data);
typedef void (*hbt_ompt_thread_end_t)(hbt_ompt_data_t *thread_data);
typedef void (*hbt_ompt_parallel_begin_t)(hbt_ompt_data_t *encountering_task_data,
                                          const void *encountering_task_frame,
                                          hbt_ompt_data_t *parallel_data,
                                          unsigned int requested_parallelism, int flags,
                                          const void *codeptr_ra);
typedef void (*hbt_ompt_implicit_task_t)(int endpoint, hbt_ompt_data_t *parallel_data,
                                         hbt_ompt_data_t *task_data,
                                         unsigned int actual_parallelism, unsigned int index,
                                         int flags);
typedef void (*hbt_ompt_work_t)(int wstype, int endpoint, hbt_ompt_data_t *parallel_data,
                                hbt_ompt_data_t *task_data, uint64_t count,
                                const void *codeptr_ra);
typedef void (*hbt_ompt_task_create_t)(hbt_ompt_data_t *encountering_task_data,
                                       const void *encountering_task_frame,
                                       hbt_ompt_data_t *new_task_data, int flags,
                                       int has_dependences, const void *codeptr_ra);
typedef void (*hbt_ompt_task_schedule_t)(hbt_ompt_data_t *prior_task_data, int prior_task_status,
                                         hbt_ompt_data_t *next_task_data);
typedef void (*hbt_ompt_sync_region_t)(int kind, int endpoint, hbt_ompt_data_t *parallel_data,
                                       hbt_ompt_data_t *task_data, const void *codeptr_ra);
typedef void (*hbt_ompt_mutex_acquire_t)(int kind, unsigned int hint, unsigned int impl,
                                         uint64_t wait_id, const void *codeptr_ra);
typedef void (*hbt_ompt_mutex_t)(int kind, uint64_t wait_id, const void *codeptr_ra);
typedef void (*hbt_ompt_nest_lock_t)(int endpoint, uint64_t wait_id, const void *codeptr_ra);
typedef void (*hbt_ompt_flush_t)(hbt_ompt_data_t *thread_data, const void *codeptr_ra);

#endif /* HBT_OMPT_ABI_H */
