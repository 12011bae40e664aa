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
 * Each process writes one file, hbtrace-<host>-<pid>.hbt in HBTRACE_DIR
 * (.1.hbt, .2.hbt ... when an earlier image of the same process, before an
 * exec, left one with records in it), through a shared mapping: every
 * record is in the file the moment it is stored, so the trace survives a
 * crash or SIGKILL. The layout is in hbtrace_format.h.
 *
 * Without any API call (LD_PRELOAD=libhbtrace.so, or just linking it) the
 * tracer records thread start and end, process exit and the fatal signal
 * that killed the process. A process that records nothing but its own start
 * and exit, with one thread, removes its file when it exits, so that the
 * shell children of a traced script leave no files. A forked child gets its
 * own file, opened when it first records something.
 *
 * A process whose threads beat (some thread fills a 64 KiB chunk, about
 * 2,000 records) gets one more OS thread, the tracer's pre-faulter: it makes
 * the file pages ahead of the writers writable in advance, so that a beat
 * does not pay for a page fault. It runs at the program's priority (its
 * work replaces page faults the beating threads would otherwise take
 * themselves), populates one page at a time (a program thread that maps
 * memory or grows its heap waits for one page fault at most), never records
 * anything, never delays a beat and does not keep the process alive.
 * At a clean end (exit, return from main, _exit) the file is cut to the
 * space actually used.
 *
 * Environment:
 *   HBTRACE_DIR        directory for trace files, created if missing
 *                      (default: current directory)
 *   HBTRACE_DISABLE=1  record nothing
 *   HBTRACE_QUIET=1    no messages on stderr
 *   HBTRACE_MAX_MB     cap on the size of one trace file (default 4096); past
 *                      it records are dropped and counted in lost_records
 *   HBTRACE_PREFAULT=0 no pre-faulter thread: beating threads take the page
 *                      faults of fresh trace pages themselves
 *   HBTRACE_PREFAULT_MB  how far ahead of the writers the pre-faulter keeps
 *                      pages ready, in MiB (default 4, at most 1024; 0 = off)
 *   HBTRACE_MONITOR    central|ring|off: the online behavior monitor, over
 *                      the type given to Heartbeat_*_Init; with no typed
 *                      Init, central or ring starts on the first beat
 *                      (default: what the program's typed Init asks for,
 *                      none without one)
 *   HBTRACE_MONITOR_LATE  lateness factor S: a thread is late when no beat
 *                      came for S times its usual interval (default 1.5)
 *   HBTRACE_MONITOR_PERIOD_US  fixed poll period of the central monitor
 *                      thread in microseconds (default: adaptive, see below)
 *   HBTRACE_HEART_RATE  expected beats per second per thread: about once a
 *                      second the tracer runs Heartbeat_HeartRate_Adjust
 *                      with it (default: never)
 *   HBTRACE_STATUS     1 or SECONDS (0.1..3600): sample the machine's status
 *                      (CPU split, memory, swap, network, this process) every
 *                      SECONDS, 1 for once a second (default: off)
 *   HBTRACE_PROBE_CLOCK  tsc|monotonic: the clock of the timing probes
 *                      (hbtrace_probe.h; default: the TSC when it is invariant)
 *   HBTRACE_QUEUE_MONITOR=off, HBTRACE_QUEUE_PERIOD_US, HBTRACE_QUEUE_PERIOD_MAX_US:
 *                      the instrumented queues' monitors (hbtrace_queue.h)
 *
 * The online behavior monitor (HBTM). Heartbeat_OpenMP_Init(type) and
 * Heartbeat_MultiPthread_Init(type) start it: type 0 (centralized) one
 * monitor thread judges every beating thread; type 1 (decentralized) every
 * beating thread judges its ring neighbour -- the next beating thread in
 * registration order that is still alive -- from its own beats. Other types
 * act as 0 (one warning). hbt_init and L_Heartbeat_OpenMP_Init start none.
 * A thread is judged from its beats after 8 of them: late (no beat for S
 * times its usual interval) and blocked (/proc says so) is
 * conditional-waiting; late and using the CPU (its CPU clock advances by
 * most of a beat's interval while it still does not beat) is busy-waiting;
 * ended normally is exited; cancelled, or vanished without a THREAD_END, is
 * failed; beats at the usual rate again after a wait is running. Every
 * change is one BEHAVIOR record (see hbtrace_format.h): on an idle machine
 * the lag is about S + 0.5 beat intervals (busy-waiting: S + 1.5, as it
 * takes one more interval to tell from waiting for a CPU). MONITOR records
 * count the messages (reads of another thread's heartbeat entry). The
 * monitor thread records nothing else, never beats, blocks every signal and
 * never keeps the process alive; it sleeps until a thread could become
 * late (at least 100 us, at most 100 ms; 50 ms with nothing to watch). At
 * Finished, threads that stopped beating are reported exited; at exit()
 * the threads still at work are exited (status 0) or failed (other status).
 * Only the first 1024 threads of a process are monitored. The beat path
 * only adds two stores into the thread's own line of the heart table and
 * two compares (the heart-rate divisor, the time of its next monitor work).
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

/* Record one heartbeat of the calling thread with a user tag: thread = the
 * number of hbt_set_thread (or the registration order), loop = 0,
 * iter = this thread's beat count, aux = tag. Costs about one
 * clock_gettime(CLOCK_MONOTONIC): no lock, no system call. */
void hbt_beat(unsigned tag);

/* Record one heartbeat with explicit thread number, loop and iteration; the
 * thread number becomes this thread's number, as with hbt_set_thread. */
void hbt_beat_ex(int thread, int loop, int iter);

/* Record that the program finished its heartbeat work (FINISHED record,
 * after the monitor's final pass if one runs). Tracing of lifecycle events
 * continues until the process ends. */
void hbt_finish(void);

/* Path of this process's trace file, or NULL when tracing is off. */
const char *hbt_trace_path(void);

/* ---- entry points of the seed papers' tracers (exact signatures) ----
 * Init: start tracing, record INIT (aux = type, 0 for L_); 0 or -1. The
 *   typed Inits also start the behavior monitor (type 0 centralized, 1
 *   decentralized; see above).
 * Generate: hbt_beat_ex(threadnum, loopnum, iter); L_ returns 0.
 * Monitor: one detection pass now, from the calling thread (centralized:
 *   every thread; decentralized: the caller's ring neighbour), for programs
 *   that drive their own monitor loop; nothing with HBTRACE_MONITOR=off.
 * Finished: the monitor's final pass (threads that stopped beating have
 *   exited), a MONITOR record, then FINISHED, as hbt_finish; returns 0. */

int  L_Heartbeat_OpenMP_Init(void);
int  L_Heartbeat_OpenMP_Generate(int threadnum, int loopnum, int iter);
void L_Heartbeat_OpenMP_Finished(void);

int  Heartbeat_OpenMP_Init(int type);
void Heartbeat_OpenMP_Generate(int threadnum, int loopnum, int iteration);
void Heartbeat_OpenMP_Monitor(void);
int  Heartbeat_OpenMP_Finished(void);

int  Heartbeat_MultiPthread_Init(int type);
void Heartbeat_MultiPthread_Generate(int pthreadnum, int loopnum, int iteration);
void Heartbeat_MultiPthread_Monitor(void);
int  Heartbeat_MultiPthread_Finished(void);

/* Seed 001, Algorithm 2: from the average heart rate of the beating threads
 * since the previous adjustment (or since their first beats), set how many
 * calls make one recorded beat: k = max(1, round(k * observed / expected)),
 * at most 2^20, for every thread; each Generate/beat call then records only
 * every k-th call of its thread. An ADJUST record says when k changes.
 * Returns 0 on success, 1 when no heart rate can be observed yet, the
 * argument is not a positive finite number, tracing is off, or another
 * thread is adjusting at this moment. */
int  Heartbeat_HeartRate_Adjust(float expected_heart_rate);

#ifdef __cplusplus
}
#endif

#endif /* HBTRACE_H */
