#!/bin/sh
# run_sanitized.sh asan|tsan -- run the stencil built by `make asan` /
# `make tsan` (examples/bin-<kind>/stencil_linked, linked with
# lib-<kind>/libhbprof.so) on 2 ranks, with and without delay injection,
# check the exit status, and fail if a sanitizer reported anything in the
# profiler. Reports go to $OUT/report.<pid> (kept when there is one).
set -u
kind=${1:?usage: run_sanitized.sh asan|tsan}
here=$(cd "$(dirname "$0")/.." && pwd)
exe=$here/examples/bin-$kind/stencil_linked
OUT=$(mktemp -d "${TMPDIR:-/tmp}/hbprof-$kind.XXXXXX")
# detect_leaks=0: Open MPI does not free what it allocated by MPI_Finalize and
# unloads its components, so LeakSanitizer reports thousands of its blocks,
# most with stacks it can no longer attribute (unknown modules), and no
# suppression can name them. Memory errors (ASan) and undefined behaviour
# (UBSan) are still caught; the tracer's own leak check (../tools) stays on.
export ASAN_OPTIONS="log_path=$OUT/report:exitcode=66:detect_leaks=0"
export UBSAN_OPTIONS="log_path=$OUT/report:print_stacktrace=1:halt_on_error=1"
export TSAN_OPTIONS="log_path=$OUT/report:exitcode=66:halt_on_error=0:suppressions=$here/tools/tsan.supp"

export HBPROF_QUIET=1
fails=0 runs=0
run() {
    name=$1
    shift
    runs=$((runs + 1))
    mkdir -p "$OUT/prof.$runs"
    HBPROF_DIR=$OUT/prof.$runs mpirun --allow-run-as-root --oversubscribe -np 2 \
        -x ASAN_OPTIONS -x UBSAN_OPTIONS -x TSAN_OPTIONS -x HBPROF_QUIET -x HBPROF_DIR "$@" \
        "$exe" --iterations 50 >/dev/null 2>"$OUT/stderr.$runs"
    got=$?
    if [ "$got" != 0 ]; then
        echo "FAIL $kind $name: exit status $got (stderr: $OUT/stderr.$runs)"
        fails=$((fails + 1))
    else
        echo "ok   $kind $name"
    fi
}
run stencil
HBPROF_INJECT=200,50,0.2 run stencil.inject -x HBPROF_INJECT
. "$here/../tools/sanitizer_verdict.sh"
