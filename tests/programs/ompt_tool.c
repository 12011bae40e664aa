/*
 * ompt_tool.c -- a program's own OMPT tool, for tests/test_ompt_beats.py: counts the
 * parallel regions and implicit tasks it is told of, keeps a value of its own in every
 * implicit task's ompt_data_t and checks it at the task's end, and prints one line at
 * finalize. Built as a shared library (OMP_TOOL_LIBRARIES, LD_PRELOAD) or linked into
 * the program itself.
 */
#include <omp-tools.h>
#include <stdio.h>

static int n_parallel, n_implicit, n_bad;

static void on_parallel_begin(ompt_data_t *etd, const ompt_frame_t *f, ompt_data_t *pd,
                              unsigned int req, int flags, const void *ra)
{
    (void)etd, (void)f, (void)pd, (void)req, (void)flags, (void)ra;
    __atomic_add_fetch(&n_parallel, 1, __ATOMIC_RELAXED);
}

static void on_implicit_task(ompt_scope_endpoint_t ep, ompt_data_t *pd, ompt_data_t *td,
                             unsigned int n, unsigned int index, int flags)
{
    (void)pd, (void)n;
    if (!(flags & ompt_task_implicit))
        return;
    if (ep == ompt_scope_begin) {
        td->value = 0x5eed0000u + index;
        __atomic_add_fetch(&n_implicit, 1, __ATOMIC_RELAXED);
    } else if ((td->value & 0xffff0000u) != 0x5eed0000u) {
        __atomic_add_fetch(&n_bad, 1, __ATOMIC_RELAXED);
    }
}

static int tool_init(ompt_function_lookup_t lookup, int dev, ompt_data_t *data)
{
    (void)dev, (void)data;
    ompt_set_callback_t set = (ompt_set_callback_t)lookup("ompt_set_callback");
    set(ompt_callback_parallel_begin, (ompt_callback_t)on_parallel_begin);
    set(ompt_callback_implicit_task, (ompt_callback_t)on_implicit_task);
    return 1;
}

static void tool_fini(ompt_data_t *data)
{
    (void)data;
    fprintf(stderr, "own-tool: parallel=%d implicit=%d bad=%d\n", n_parallel, n_implicit, n_bad);
}

ompt_start_tool_result_t *ompt_start_tool(unsigned int omp_version, const char *runtime_version)
{
    (void)omp_version, (void)runtime_version;
    static ompt_start_tool_result_t r = { tool_init, tool_fini, { 0 } };
    return &r;
}
