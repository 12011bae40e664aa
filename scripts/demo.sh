#!/usr/bin/env bash
# Set-up command 1: install everything, then run the main job on the bundled sample traces.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
hb=.venv/bin/hbtool
for run in sample_traces/*/; do
  echo "== $run"
  "$hb" info "$run"
  echo
done
"$hb" plot sample_traces/jacobi-normal sample_traces/jacobi-leak sample_traces/pi-shutdown -o sample_traces.png
