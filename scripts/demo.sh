#!/usr/bin/env bash
# Set-up command 1: install everything, then run the main job on the bundled sample traces:
# which thread of each run misbehaved and how (diagnose: normal, memory leak, shutdown;
# behavior: running, busy-waiting, conditional waiting, exited, failed), what each trace
# holds (info), and pictures of the heart rates (sample_traces.png, behavior.png).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
hb=.venv/bin/hbtool
"$hb" diagnose sample_traces/
echo
"$hb" behavior sample_traces/pi-condwait sample_traces/jacobi-busywait sample_traces/pi-segv sample_traces/pi-shutdown
echo
"$hb" info sample_traces/
"$hb" plot sample_traces/jacobi-normal sample_traces/jacobi-leak sample_traces/pi-shutdown sample_traces/pi-segv \
  -o sample_traces.png
"$hb" plot --behavior sample_traces/pi-condwait sample_traces/jacobi-busywait -o behavior.png
