/*
 * inject.h -- the thread fault injector (inject.c; docs/inject.md): one fault
 * (leak, stop, slow, busy, cond, exit, segv) in one thread at one moment,
 * chosen by HBTRACE_INJECT*, fired at a unit-of-work boundary of that thread
 * (one of its beats, of any source), its ground truth written to a JSON file.
 *
 * The hooks are single lines behind hbt_inject_armed, a flag set once by
 * inject.c's constructor: a run with no HBTRACE_INJECT pays one load and one
 * predicted-not-taken branch per beat.
 */
#ifndef HBT_INJECT_H
#define HBT_INJECT_H

#include <stdint.h>

/* 1 when a fault is to be injected in this process (set once, at start). */
extern int hbt_inject_armed __attribute__((visibility("hidden")));

/* A beat of the calling OS thread was recorded (or would have been): thread
 * is the number it records, source HBT_SRC_* (0 = API), now its clock value
 * (0: read the clock). May fire the fault, or apply its per-unit effect, in
 * the calling thread: it may sleep, spin, allocate, or never return. */
__attribute__((visibility("hidden"), noinline, cold))
void hbt_inject_point(int source, int32_t thread, uint64_t now);

/* A beat of the calling OS thread (thread: the number it records) is about to
 * be recorded at now (0: the record reads the clock): for slow, the victim
 * spins (slow - 1) times the unit that ends there, so that the unit's beat
 * interval holds it. Returns the time to record (now after the spin; 0 stays
 * 0). */
__attribute__((visibility("hidden"), noinline, cold))
uint64_t hbt_inject_before_beat(int32_t thread, uint64_t now);

/* The calling OS thread (thread: the number it records) is about to wait in
 * the runtime (a critical section, a lock, a barrier with no beat before it):
 * for slow, the victim spins (slow - 1) times its work since its last beat or
 * wait, the work that ends there (IQ-TREE's static loops end in a reduction's
 * atomic before the region's end: the beat after it found no work left). */
__attribute__((visibility("hidden"), noinline, cold))
void hbt_inject_before_wait(int32_t thread);

/* The calling thread spun spun_ns on a flag in its own code (a wait the tracer
 * records when the spin is over): for slow, the victim's work that ended in the
 * spin (ns, 0: none, or not the victim), for hbt_inject_after_spin once the
 * wait is recorded: its work before the spin (its CPU time since its last beat
 * or wait; NPB LU's pipeline with libomp, where each unit of work ends in such
 * a wait) and after it to now (after_ns: the wall time since its last flush, at
 * most the CPU time since its first). first_cpu: the thread's CPU clock at the
 * spin's first flush (0: unread; then the work is the CPU time less the spin's
 * length): a spin the machine took the CPU from used less CPU time than its
 * length, and the work before it was lost. */
__attribute__((visibility("hidden"), noinline, cold))
uint64_t hbt_inject_spun(int32_t thread, uint64_t spun_ns, uint64_t first_cpu, uint64_t after_ns);

/* For slow: the victim spins (slow - 1) times work_ns (hbt_inject_spun's),
 * after the spin's wait record: the spin is in the unit after the wait, whose
 * CPU time the tracer's next cpu record holds (not in the wait's). */
__attribute__((visibility("hidden"), noinline, cold))
void hbt_inject_after_spin(uint64_t work_ns);

/* Whether the calling thread's flag spins want the CPU clock at their first
 * flush (the victim of slow once the fault fired): hbt_inject_spun's
 * first_cpu. */
__attribute__((visibility("hidden"), noinline, cold))
int hbt_inject_times_spins(void);

/* The calling thread left a recorded wait at now: the next unit of work
 * (for slow) starts there. */
__attribute__((visibility("hidden"), noinline, cold))
void hbt_inject_waited(uint64_t now);

/* Inside a libgomp GOMP_loop_*_next wrapper (entry: its name), before the
 * real call: 1 when the calling thread (OpenMP thread number `thread`) is a
 * stopped victim and the call must return false without taking a chunk (not
 * in an ordered loop, nor in one whose schedule gives each thread a share of
 * its own: static, or a runtime schedule that OMP_SCHEDULE makes static). */
__attribute__((visibility("hidden"), noinline, cold))
int hbt_inject_skip_chunk(int32_t thread, const char *entry);

/* Inside a libgomp GOMP_loop_*_start wrapper (entry: its name; sched: the
 * generic GOMP_loop_start's schedule argument, -1 for the others), before the
 * real call: 1 when the calling thread is a stopped victim, in a loop whose
 * chunks its team takes in its place (as hbt_inject_skip_chunk). The caller
 * then waits for its team to take them all before it calls _start, which
 * then hands it none: libgomp hands a thread its first chunk inside the call
 * that sets the loop up, and cannot take it back. */
__attribute__((visibility("hidden"), noinline, cold))
int hbt_inject_stop_start(int32_t thread, const char *entry, long sched);

/* A stopped victim's loop _start handed it no chunk after its wait: one more
 * chunk skipped (the truth's effect.chunks_skipped). */
__attribute__((visibility("hidden"), noinline, cold))
void hbt_inject_skipped(void);

/* libomp: whether a loop that __kmpc_dispatch_init_* set up with this schedule (kmp.h's
 * enum sched_type) hands its chunks to whichever thread asks (dynamic, guided, the static
 * chunks idle threads steal that clang's schedule(dynamic) gets, a runtime schedule that
 * OMP_SCHEDULE makes one of them): its team takes a stopped victim's chunks in its place.
 * Not a static or ordered loop. */
__attribute__((visibility("hidden"), noinline, cold))
int hbt_inject_kmp_shared(int32_t schedule);

/* 1 when the calling thread (OpenMP thread number `thread`) is the fired stop's victim, in
 * OpenMP: it takes no chunk of a loop whose chunks its team takes in its place. */
__attribute__((visibility("hidden"), noinline, cold))
int hbt_inject_stopped(int32_t thread);

/* The process exits with status (on_exit, _exit): the truth file's last
 * version. */
__attribute__((visibility("hidden"), noinline, cold))
void hbt_inject_at_exit(int status);

#endif
