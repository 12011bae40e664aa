#!/bin/sh
# run_sanitized.sh asan|tsan -- run the examples and the hostile programs
# built by `make asan` / `make tsan` (examples/bin-<kind>/) with the tracer
# built the same way (lib-<kind>/), check each exit status, and fail if any
# sanitizer reported anything. Reports go to $OUT/<kind>.<program>.<pid>
# (OUT: a temporary folder, kept when there is a report).
set -u
kind=${1:?usage: run_sanitized.sh asan|tsan}
here=$(cd "$(dirname "$0")/.." && pwd)
bin=$here/examples/bin-$kind
OUT=$(mktemp -d "${TMPDIR:-/tmp}/hbt-$kind.XXXXXX")
# exitcode 66: a report, told apart from the program's own status
export ASAN_OPTIONS="log_path=$OUT/report:exitcode=66:detect_leaks=1:abort_on_error=0"
export UBSAN_OPTIONS="log_path=$OUT/report:print_stacktrace=1:halt_on_error=1"
# die_after_fork=0: the tracer starts its own threads again (status sampler,
# monitor) in the fork child of a threaded program, which TSan does not
# model and by default dies on; it then may miss races in that child, and
# invents none.
export TSAN_OPTIONS="log_path=$OUT/report:exitcode=66:halt_on_error=0:second_deadlock_stack=1:die_after_fork=0:suppressions=$here/tools/tsan.supp"
export LSAN_OPTIONS="suppressions=$here/tools/lsan.supp"
export HBTRACE_QUIET=1
fails=0
runs=0
lib=$here/lib-$kind/libhbtrace.so
if [ "$kind" = tsan ]; then
    # ThreadSanitizer's interceptors must come after ours, in every program:
    # pthread_create then goes ours -> TSan's -> libc's, so that TSan knows
    # every thread (also the tracer's own) before any instrumented code of it
    # runs, and TSan's start-up resolves sigaction to libc's, not to ours
    # (which would run instrumented code before TSan is initialised).
    # LD_PRELOAD puts the tracer ahead of libtsan, which the programs link.
    export LD_PRELOAD=$lib
    unlinked=$lib
else
    # AddressSanitizer must come first; programs that do not link the
    # tracer get the ASan runtime and then the tracer preloaded
    unlinked="$(gcc -print-file-name=libasan.so) $lib"
fi

# run EXPECTED_STATUS NAME PROGRAM ARGS...
run() {
    want=$1 name=$2
    shift 2
    runs=$((runs + 1))
    dir=$OUT/trace.$runs
    mkdir -p "$dir"
    HBTRACE_DIR=$dir "$@" >/dev/null 2>"$OUT/stderr.$runs"
    got=$?
    if [ "$got" != "$want" ]; then
        echo "FAIL $kind $name: exit status $got, expected $want (stderr: $OUT/stderr.$runs)"
        fails=$((fails + 1))
    else
        echo "ok   $kind $name"
    fi
}

run 0 pi_pthread          "$bin/pi_pthread" --threads 4 --beats 300 --work 2000
run 0 pi_pthread.ring     env HBTRACE_MONITOR=ring "$bin/pi_pthread" --threads 4 --beats 300 --work 2000
# the monitor's verdicts (busy-waiting against the other threads' work, conditional
# waiting and running again), both modes
run 0 pi_pthread.busy     "$bin/pi_pthread" --threads 3 --beats 300 --work 200000 --inject busywait --inject-thread 1 --inject-beat 100 --busy-beats 10 --busy-factor 10
run 0 pi_pthread.busy.ring env HBTRACE_MONITOR=ring "$bin/pi_pthread" --threads 3 --beats 300 --work 200000 --inject busywait --inject-thread 1 --inject-beat 100 --busy-beats 10 --busy-factor 10
run 0 pi_pthread.cond.ring env HBTRACE_MONITOR=ring "$bin/pi_pthread" --threads 3 --beats 300 --work 200000 --inject condwait --inject-thread 1 --inject-beat 100 --wait-ms 50
run 0 matmul_pthread      "$bin/matmul_pthread" --threads 3 --beats 20 --size 96 --work 4
# the thread fault injector (docs/inject.md) at the API's beats: slow spins before a beat,
# leak allocates at each up to its limit
run 0 pi_pthread.inject.slow env HBTRACE_INJECT=slow HBTRACE_INJECT_THREAD=1 HBTRACE_INJECT_BEAT=50 "$bin/pi_pthread" --threads 3 --beats 150 --work 2000
run 0 pi_pthread.inject.leak env HBTRACE_INJECT=leak HBTRACE_INJECT_THREAD=random HBTRACE_INJECT_BEAT=20-60 HBTRACE_INJECT_BYTES=65536 HBTRACE_INJECT_LEAK_MAX=1048576 "$bin/pi_pthread" --threads 3 --beats 150 --work 2000
run 0 stream_micro        "$bin/stream_micro" --rate 20000 --duration 0.3
run 0 stream_matmul       "$bin/stream_matmul" --size 48 --workers 2 --reps 2
run 0 stream_search       "$bin/stream_search" --mb 2 --verifiers 2
run 0 probe_demo          env HBTRACE_STATUS=0.1 "$bin/probe_demo" --threads 3 --seconds 0.3 --fork --beat
run 3 probe_demo.exit     "$bin/probe_demo" --threads 2 --seconds 0.1 --exit 3
if [ "$kind" = asan ]; then
    # OpenMP: libgomp is not built with ThreadSanitizer, so TSan cannot see
    # its barriers and reports every access they order: they run under ASan only
    run 0 jacobi_omp      env OMP_NUM_THREADS=3 "$bin/jacobi_omp" --threads 3 --beats 30 --size 32 --work 1
    run 0 heat_omp        env OMP_NUM_THREADS=3 LD_PRELOAD="$unlinked" "$bin/heat_omp"
    run 0 heat_omp.inject.slow env OMP_NUM_THREADS=3 HBTRACE_INJECT=slow HBTRACE_INJECT_THREAD=2 HBTRACE_INJECT_BEAT=100 LD_PRELOAD="$unlinked" "$bin/heat_omp"
    # 4 MiB of threadprivate data a thread: the tracer's own threads (monitor, pre-faulter)
    # start on stacks doubled until the static TLS fits; the monitor judges a blocked thread
    run 0 omp_batches.tls env OMP_NUM_THREADS=2 HBTRACE_MONITOR=central HBTRACE_INJECT=cond HBTRACE_INJECT_THREAD=1 HBTRACE_INJECT_BEAT=20 HBTRACE_INJECT_WAIT_MS=100 "$bin/omp_batches_tls" 120 2
    # sections: the sections a thread ran in its beats (GOMP_sections_start and _next), and
    # a stopped thread skipping them
    run 0 omp_sections    env OMP_NUM_THREADS=3 LD_PRELOAD="$unlinked" "$bin/omp_sections" 40 0.2
    run 0 omp_sections.inject.stop env OMP_NUM_THREADS=2 HBTRACE_INJECT=stop HBTRACE_INJECT_THREAD=1 HBTRACE_INJECT_BEAT=40 LD_PRELOAD="$unlinked" "$bin/omp_sections" 40 0.2
    # a dynamic loop's chunks as the monitor's units of work (struct hbt_unit, hbt_ct_units),
    # judged by the automatic beats, and a spin in the middle of one
    run 0 omp_long_chunks env OMP_NUM_THREADS=2 HBTRACE_MONITOR=central HBTRACE_MONITOR_BEATS=openmp LD_PRELOAD="$unlinked" "$bin/omp_long_chunks" 3 20000 5 20
    run 0 omp_long_chunks.inject.busy env OMP_NUM_THREADS=2 HBTRACE_MONITOR=central HBTRACE_MONITOR_BEATS=openmp HBTRACE_INJECT=busy HBTRACE_INJECT_THREAD=1 HBTRACE_INJECT_AT=0.3 HBTRACE_INJECT_WAIT_MS=100 LD_PRELOAD="$unlinked" "$bin/omp_long_chunks" 3 20000 5 20
    # OpenMP locks as beats (omp_set_lock, omp_set_nest_lock: a beat, then a critical wait)
    # and the monitor's lock units, and a spin between two locks
    run 0 omp_lock_queue  env OMP_NUM_THREADS=2 HBTRACE_MONITOR=central HBTRACE_MONITOR_BEATS=openmp LD_PRELOAD="$unlinked" "$bin/omp_lock_queue" queue 200 1000 200 50
    # recursive tasks: a wait cut where a task runs in it (a taskwait, the closing barrier),
    # regions opened from tasks in the closing barrier, unshared tasks; a slowed walker
    run 0 omp_task_tree   env OMP_NUM_THREADS=2 OMP_MAX_ACTIVE_LEVELS=1 HBTRACE_MONITOR=central HBTRACE_MONITOR_BEATS=openmp LD_PRELOAD="$unlinked" "$bin/omp_task_tree" 7 0.2 5 2 100
    run 0 omp_task_tree.inject.busy env OMP_NUM_THREADS=2 OMP_MAX_ACTIVE_LEVELS=1 HBTRACE_MONITOR=central HBTRACE_MONITOR_BEATS=openmp HBTRACE_INJECT=busy HBTRACE_INJECT_THREAD=0 HBTRACE_INJECT_BEAT=100 HBTRACE_INJECT_WAIT_MS=100 LD_PRELOAD="$unlinked" "$bin/omp_task_tree" 7 0.5 0 1 0 0
    run 0 omp_task_tree.inject.slow env OMP_NUM_THREADS=2 OMP_MAX_ACTIVE_LEVELS=1 HBTRACE_INJECT=slow HBTRACE_INJECT_THREAD=0 HBTRACE_INJECT_BEAT=60 LD_PRELOAD="$unlinked" "$bin/omp_task_tree" 6 0.2 0 1 100 0
    # a guided loop's chunks and their iterations, judged by the monitor, a slowed thread;
    # with libgomp and (where clang is installed) libomp's dispatch wrappers and OMPT tool
    run 0 omp_guided_rows.inject.slow env OMP_NUM_THREADS=2 HBTRACE_MONITOR=central HBTRACE_MONITOR_BEATS=openmp HBTRACE_INJECT=slow HBTRACE_INJECT_THREAD=1 HBTRACE_INJECT_BEAT=4 LD_PRELOAD="$unlinked" "$bin/omp_guided_rows" 4 100 200 flat
    # a stopped thread waits at each guided loop's _start until its teammate took every chunk
    # (gomp_stop_start: the team's futex word)
    run 0 omp_guided_rows.inject.stop env OMP_NUM_THREADS=2 HBTRACE_MONITOR=central HBTRACE_MONITOR_BEATS=openmp HBTRACE_INJECT=stop HBTRACE_INJECT_THREAD=1 HBTRACE_INJECT_BEAT=4 LD_PRELOAD="$unlinked" "$bin/omp_guided_rows" 6 100 200 halves
    if [ -x "$bin/omp_guided_rows_libomp" ]; then
        run 0 omp_guided_rows.libomp env OMP_NUM_THREADS=2 HBTRACE_MONITOR=central HBTRACE_MONITOR_BEATS=openmp LD_PRELOAD="$unlinked" "$bin/omp_guided_rows_libomp" 4 100 200 rising
        run 0 omp_guided_rows.libomp.inject.busy env OMP_NUM_THREADS=2 HBTRACE_MONITOR=central HBTRACE_MONITOR_BEATS=openmp HBTRACE_INJECT=busy HBTRACE_INJECT_THREAD=1 HBTRACE_INJECT_BEAT=6 HBTRACE_INJECT_WAIT_MS=50 LD_PRELOAD="$unlinked" "$bin/omp_guided_rows_libomp" 4 100 200 flat
    fi
    run 0 omp_lock_queue.inject.busy env OMP_NUM_THREADS=2 HBTRACE_MONITOR=central HBTRACE_MONITOR_BEATS=openmp HBTRACE_INJECT=busy HBTRACE_INJECT_THREAD=1 HBTRACE_INJECT_BEAT=100 HBTRACE_INJECT_WAIT_MS=100 LD_PRELOAD="$unlinked" "$bin/omp_lock_queue" dealt 200 1000
fi
run 0 idle_threads        env LD_PRELOAD="$unlinked" "$bin/idle_threads" threads 500 50
run 0 idle_forks          env LD_PRELOAD="$unlinked" "$bin/idle_threads" fork 20 4
run 0 hostile.churn       "$bin/hostile" churn
run 0 hostile.fork        "$bin/hostile" fork
run 7 hostile.exit        "$bin/hostile" exit
# the programs of the fault suite (tests/programs/hostile/, not linked with the
# tracer: preloaded as hbtool record does); not rlimits as (a sanitizer's shadow
# memory needs more address space than any limit the program sets) nor
# beat_truth (runs until killed)
# hostile EXPECTED_STATUS NAME PROGRAM ARGS...
hostile() {
    want=$1 name=$2 prog=$3
    shift 3
    run "$want" "$name" env LD_PRELOAD="$unlinked" "$bin/hostile-$prog" "$@"
}
hostile 0 segv_recover     segv_recover 1000
hostile 0 close_fds        close_fds "$OUT"
hostile 7 exit_from_thread exit_from_thread
hostile 5 threads_exec     threads_exec /bin/sh -c "exit 5"
hostile 0 signals_blocked  signals_blocked
hostile 0 spawn            spawn
hostile 0 rlimits.fsize    rlimits fsize "$OUT"
hostile 0 rlimits.nofile   rlimits nofile "$OUT"

. "$here/tools/sanitizer_verdict.sh"
