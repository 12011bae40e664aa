/*
 * fake_libgomp.c -- a stand-in for a libgomp of another version (tests/test_openmp_beats.py):
 * built as libgomp.so.1, it runs a parallel region on the calling thread alone, and exports
 * GOMP_* entry points the tracer does not know (GOMP_future_*), beside ones it wraps
 * (GOMP_parallel, GOMP_barrier), ones it knows to need no wrapper (GOMP_atomic_*), the
 * plugin interface (GOMP_PLUGIN_*) and a hidden one. The tracer must warn once, naming the
 * two unknown ones, and still record the region.
 */
#define EXPORT __attribute__((visibility("default")))

EXPORT int omp_get_thread_num(void) { return 0; }
EXPORT int omp_get_num_threads(void) { return 1; }
EXPORT int omp_get_level(void) { return 1; }
EXPORT int omp_get_ancestor_thread_num(int level) { return level == 1 ? 0 : -1; }

EXPORT void GOMP_parallel(void (*fn)(void *), void *data, unsigned nthreads, unsigned flags)
{
    (void)nthreads;
    (void)flags;
    fn(data);
}

EXPORT void GOMP_barrier(void) {}
EXPORT void GOMP_atomic_start(void) {}
EXPORT void GOMP_atomic_end(void) {}
EXPORT void GOMP_PLUGIN_malloc(void) {}
EXPORT void GOMP_future_region(void (*fn)(void *), void *data) { fn(data); }
EXPORT void GOMP_future_wait(void) {}
__attribute__((visibility("hidden"))) void GOMP_internal_helper(void) {}
EXPORT int GOMP_data_not_a_function = 1;
