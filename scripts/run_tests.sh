#!/usr/bin/env bash
# Sets everything up and runs the test suite (what CI runs).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/setup.sh cpu
# -rs: list each skipped test with its reason (a fresh clone without ../shared/data skips the
# real-data tests, and says so).
# --durations: the slowest tests, named, so a tier can be chosen by what they cost.
# -n auto --dist worksteal: one test process per core, an idle one taking tests queued on a busy one (the
# suite's tests are independent processes' worth of work: 2 cores took the fast tier from 308 s to 175 s).
# TEST_WORKERS=0 runs them in this one process, one after the other.
python -m pytest -q -rs -n "${TEST_WORKERS:-auto}" --dist worksteal --durations=25 "$@"
