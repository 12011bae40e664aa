#!/usr/bin/env bash
# Set-up command 1: install everything, then run the main job on the bundled sample traces:
# which thread of each run misbehaved and how (diagnose), what each trace holds (info),
# and a picture of the heart rates (sample_traces.png).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
hb=.venv/bin/hbtool
"$hb" diagnose sample_traces/
echo
"$hb" info sample_traces/
"$hb" plot sample_traces/jacobi-normal sample_traces/jacobi-leak sample_traces/pi-shutdown sample_traces/pi-segv \
  -o sample_traces.png
