#!/usr/bin/env bash
# Set-up command 2: install everything, then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec .venv/bin/python -m pytest -q tests "$@"
