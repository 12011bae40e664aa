/*
 * hbtrace.h -- public API of libhbtrace, the hbtool heartbeat tracer.
 *
 * Compile and link with the flags of `hbtool config --cflags --libs`.
 *
 * Modern API:
 *     hbt_init(NULL);                 // optional: the first beat initialises
 *     hbt_set_thread(omp_get_thread_num());
 *     for (...) { work(); hbt_beat(0); }
 *     hbt_finish();
 *
 * Every call is safe from any thread, never blocks on another thread, never
 * aborts the program, and does nothing (returns -1) if tracing is disabled or
 * the trace file cannot be written (one warning on stderr says why).
 *
 * Environment:
 *   HBTRACE_DIR        directory for trace files (default: current directory)
 *   HBTRACE_DISABLE=1  record nothing
 *   HBTRACE_QUIET=1    no messages on stderr
 */
#ifndef HBTRACE_H
#define HBTRACE_H

#ifdef __cplusplus
extern "C" {
#endif

/* ---- modern API ---- */

/* Start tracing (idempotent). `name` is stored in the trace metadata (may be
 * NULL). Returns 0 on success, -1 if tracing is off. */
int  hbt_init(const char *name);

/* Set the user thread number recorded with this thread's beats (default:
 * the order in which the thread first used the tracer, from 0). */
void hbt_set_thread(int thread);

/* Record one heartbeat of the calling thread with a user tag. */
void hbt_beat(unsigned tag);

/* Record one heartbeat with explicit thread number, loop and iteration. */
void hbt_beat_ex(int thread, int loop, int iter);

/* Record that the program finished its heartbeat work; flushes metadata.
 * Tracing of lifecycle events continues until the process ends. */
void hbt_finish(void);

/* Path of this process's trace file, or NULL when tracing is off. */
const char *hbt_trace_path(void);

/* ---- entry points of the seed papers' tracers (exact signatures) ---- */

int  L_Heartbeat_OpenMP_Init(void);
int  L_Heartbeat_OpenMP_Generate(int threadnum, int loopnum, int iter);
void L_Heartbeat_OpenMP_Finished(void);

int  Heartbeat_OpenMP_Init(int type);
void Heartbeat_OpenMP_Generate(int threadnum, int loopnum, int iteration);
int  Heartbeat_OpenMP_Finished(void);

int  Heartbeat_MultiPthread_Init(int type);
void Heartbeat_MultiPthread_Generate(int pthreadnum, int loopnum, int iteration);
int  Heartbeat_MultiPthread_Finished(void);

#ifdef __cplusplus
}
#endif

#endif /* HBTRACE_H */
