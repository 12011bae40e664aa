#!/usr/bin/env bash
# Regenerate the bundled sample traces: the real tracer running the real example programs
# (OpenMP and pthreads), normal and with each anomaly, fixed seeds. Each run directory holds
# the tracer's .hbt file and truth.json (what was injected, where and when).
# Usage: bash sample_traces/regenerate.sh      (after scripts/install.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
hb=${HBTOOL:-.venv/bin/hbtool}
[ -x "$hb" ] || hb=hbtool
py=${PYTHON:-.venv/bin/python}
[ -x "$py" ] || py=python3
bin=native_tracer/examples/bin
out=sample_traces

rec() {  # rec NAME PROGRAM ARGS...: record one run into $out/NAME (status of a killed run is expected)
  local name=$1; shift
  rm -rf "${out:?}/$name"
  mkdir -p "$out/$name"
  "$hb" record -q -o "$out/$name" -- "$@" --truth "$out/$name/truth.json" >/dev/null || true
}

# the settings of the evaluation data set (benchmarks/make_dataset.py): 4 threads, 1000 beats,
# a leak of 2 MiB per beat
rec jacobi-normal   $bin/jacobi_omp --threads 4 --beats 1000 --seed 11
rec jacobi-leak     $bin/jacobi_omp --threads 4 --beats 1000 --seed 12 --inject leak --inject-thread 1 --inject-beat 400 --leak-bytes 2097152
rec jacobi-busywait $bin/jacobi_omp --threads 4 --beats 1000 --seed 13 --inject busywait --inject-thread 2 --inject-beat 500
rec pi-normal       $bin/pi_pthread --threads 4 --beats 1000 --seed 20
rec pi-shutdown     $bin/pi_pthread --threads 4 --beats 1000 --seed 14 --inject shutdown --shutdown-mode thread --inject-thread 3 --inject-beat 300
rec pi-condwait     $bin/pi_pthread --threads 4 --beats 1000 --seed 15 --inject condwait --inject-thread 0 --inject-beat 500 --wait-ms 300
rec pi-segv         $bin/pi_pthread --threads 4 --beats 1000 --seed 16 --inject shutdown --shutdown-mode segv --inject-thread 1 --inject-beat 600
rec matmul-exit1    $bin/matmul_pthread --threads 4 --beats 1000 --seed 17 --inject shutdown --shutdown-mode exit --inject-thread 2 --inject-beat 300
rec matmul-earlyexit $bin/matmul_pthread --threads 4 --beats 1000 --seed 18 --inject earlyexit --inject-thread 0 --inject-beat 500

# killed from outside with SIGKILL in the middle of the run
rm -rf "$out/pi-sigkill"; mkdir -p "$out/pi-sigkill"
HBTRACE_DIR="$out/pi-sigkill" $bin/pi_pthread --threads 4 --beats 100000 --seed 19 &
pid=$!
sleep 0.6
kill -KILL $pid
wait $pid 2>/dev/null || true
printf '{"program": "pi_pthread", "inject": "sigkill", "note": "killed with SIGKILL 0.6 s after start"}\n' > "$out/pi-sigkill/truth.json"

# the same normal run as a workbook and a csv table, as other tools would hand them over
"$hb" convert --force "$out/jacobi-normal" -o "$out/jacobi-normal.xlsx" 2>/dev/null
"$hb" convert --force "$out/pi-shutdown" -o "$out/pi-shutdown.csv" 2>/dev/null
# the seed paper's legacy text format, one file per thread (synthetic, fixed seed)
rm -rf "$out/legacy-shutdown"
"$py" "$out/make_legacy.py" "$out/legacy-shutdown"
echo "sample traces regenerated in $out/" >&2
