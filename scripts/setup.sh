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
    # uv (from PyPI, into .venv) installs the same pinned set as pip, unpacking and compiling bytecode
    # on every core: the whole setup measured 90 s with pip and compileall, 54 s with uv (fresh clone,
    # empty uv cache).
    # uv does not read pip's configuration: the package sources pip is configured with here (local
    # wheel folders, mirrors) are handed to it, and it may take a pin from any of them, as pip does.
    .venv/bin/python -m pip install -q -c envs/constraints-cpu.txt uv &&
    sources=(--index-strategy unsafe-best-match) &&
    for key in index-url extra-index-url find-links; do
      for value in $(.venv/bin/python -m pip config get "global.$key" 2>/dev/null || true); do
        sources+=("--$key" "$value")
      done
    done &&
    install() { VIRTUAL_ENV="$PWD/.venv" .venv/bin/uv pip install --quiet --compile-bytecode \
                  "${sources[@]}" -c envs/constraints-cpu.txt "$@"; } &&
    # torch first and alone, so that nothing else can pick a CUDA build of it.
    install torch &&
    install -r envs/requirements-cpu.txt -e .
  } > .venv/install.log 2>&1 || { tail -50 .venv/install.log; echo "setup failed: see .venv/install.log"; exit 1; }
  echo "$wanted" > "$stamp"
fi
export PATH="$PWD/.venv/bin:$PATH"
