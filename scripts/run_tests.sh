#!/usr/bin/env bash
# Sets everything up and runs the test suite (what CI runs).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/setup.sh
python -m pytest -q "$@"
