#!/usr/bin/env bash
# Sets everything up and runs the test suite (what CI runs).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/setup.sh cpu
# -rs: list each skipped test with its reason (a fresh clone without ../shared/data skips the
# real-data tests, and says so).
# --durations: the slowest tests, named, so a tier can be chosen by what they cost.
python -m pytest -q -rs --durations=25 "$@"
