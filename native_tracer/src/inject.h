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

/* The calling thread left a recorded wait at now: the next unit of work
 * (for slow) starts there. */
__attribute__((visibility("hidden"), noinline, cold))
void hbt_inject_waited(uint64_t now);

/* Inside a libgomp GOMP_loop_*_next wrapper (entry: its name), before the
 * real call: 1 when the calling thread (OpenMP thread number `thread`) is a
 * stopped victim and the call must return false without taking a chunk. */
__attribute__((visibility("hidden"), noinline, cold))
int hbt_inject_skip_chunk(int32_t thread, const char *entry);

/* The process exits with status (on_exit, _exit): the truth file's last
 * version. */
__attribute__((visibility("hidden"), noinline, cold))
void hbt_inject_at_exit(int status);

#endif
