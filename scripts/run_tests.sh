#!/usr/bin/env bash
# Sets everything up and runs the test suite (what CI runs).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/setup.sh cpu
# -rs: list each skipped test with its reason (a fresh clone without ../shared/data skips the
# real-data tests, and says so).
# --durations: the slowest tests, named, so a tier can be chosen by what they cost.
# -n auto: one test process per core (2 cores took the fast tier from 308 s to 175–193 s). --dist loadfile: a
# test file's tests run on one worker, so a module's fixture (the rehearsal, the pipeline run) is made once;
# --no-loadscope-reorder: files are handed out in conftest's order, the longest first, each on a worker of
# its own (conftest._deal_longest).
# TEST_WORKERS=0 runs them in this one process, one after the other.
python -m pytest -q -rs -n "${TEST_WORKERS:-auto}" --dist loadfile --no-loadscope-reorder --durations=25 "$@"
