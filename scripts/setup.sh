#!/usr/bin/env bash
# Creates .venv and installs the CPU environment (torch pinned to its CPU build), once: a stamp of the
# requirement files skips the install when nothing changed. Sourced by run_default.sh and run_tests.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON=${PYTHON:-python3}
"$PYTHON" -c 'import sys; assert sys.version_info >= (3, 11), f"Python >= 3.11 needed, found {sys.version}"'
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
stamp=.venv/.grpo-lambda-installed
wanted=$(cat envs/constraints-cpu.txt envs/requirements-cpu.txt pyproject.toml | sha1sum | cut -c1-40)
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  echo "installing the environment into .venv (log: .venv/install.log)"
  {
    .venv/bin/python -m pip install -q --upgrade pip &&
    # torch first and alone, so that nothing else can pick a CUDA build of it.
    .venv/bin/python -m pip install -q --no-compile -c envs/constraints-cpu.txt torch &&
    .venv/bin/python -m pip install -q --no-compile -c envs/constraints-cpu.txt -r envs/requirements-cpu.txt -e . &&
    # Bytecode once, on every core (pip compiles on one; measured 110 s -> 90 s for the whole setup):
    # jobs then import from .pyc even where PYTHONDONTWRITEBYTECODE is set. A few packages ship files
    # that do not compile (templates, py2 examples), as under pip: they are skipped.
    { .venv/bin/python -m compileall -q -j 0 .venv/lib > /dev/null || true; }
  } > .venv/install.log 2>&1 || { tail -50 .venv/install.log; echo "setup failed: see .venv/install.log"; exit 1; }
  echo "$wanted" > "$stamp"
fi
export PATH="$PWD/.venv/bin:$PATH"
