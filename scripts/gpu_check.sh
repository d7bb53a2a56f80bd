#!/usr/bin/env bash
# The project's checks on a lent GPU machine (one H100 or H200, torch + transformers installed, no network,
# no vLLM, no Snakemake), in one run of at most 7 minutes, every result under $OUT:
#   bash scripts/gpu_check.sh wheels      here, with PyPI: the wheels the machine lacks, into wheelhouse/
#   bash scripts/gpu_check.sh             there: install them, then the steps below (OUT=... or results/gpu-check)
#   bash scripts/gpu_check.sh --dry-run   here, without a GPU: the same steps in their CPU forms, small
# Steps, each with its own time limit inside the run's budget (a step that would start past it is skipped):
#   install        the wheels into /tmp/site (--no-index --no-deps), the repository's src/ on PYTHONPATH
#   tests          pytest -m gpu tests/test_gpu.py (traces, objectives, a trainer step of each objective)
#   bench_traces   benchmarks/bench_traces.py --device cuda
#   bench_step     benchmarks/bench_step.py --device cuda --shape qwen2.5-1.5b
#   preflight      grpo-lambda preflight (the default study for one seed included)
#   bench_step_7b  the 7B shape with LoRA, if at least 75 s are left
# Files under $OUT (8 at most, as the machine sends back): summary.txt, install.log, tests.log,
# bench_traces.txt, bench_step-qwen2.5-1.5b.txt, preflight.txt, preflight.json, bench_step-qwen2.5-7b.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

# The machine's image lacks these (its python3 is 3.12 with torch 2.11, transformers 5.17, accelerate,
# peft, pandas, pyarrow, huggingface-hub, sympy, tensorboard, pytest), at the CPU lock's versions.
MISSING=(trl datasets dill multiprocess math-verify latex2sympy2-extended antlr4-python3-runtime jsonschema
         jsonschema-specifications referencing rpds-py tensorboardx)
MACHINE_PYTHON=3.12

if [ "${1:-}" = wheels ]; then
  WHEELS=()
  for name in "${MISSING[@]}"; do
    pin=$(grep -i "^$name==" envs/lock-cpu.txt | cut -d' ' -f1)
    [ -n "$pin" ] || { echo "envs/lock-cpu.txt pins no $name"; exit 1; }
    WHEELS+=("$pin")
  done
  rm -rf wheelhouse && mkdir -p wheelhouse
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$MACHINE_PYTHON" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 -d wheelhouse "${WHEELS[@]}" || exit 1
  ls wheelhouse; du -sh wheelhouse
  exit 0
fi

DRY_RUN=0
[ "${1:-}" = --dry-run ] && DRY_RUN=1
OUT=${OUT:-$ROOT/results/gpu-check}
WORK=${GPU_CHECK_WORK:-/tmp/gpu-check}
mkdir -p "$OUT" "$WORK"
BUDGET=420 SCALE=1
# the CPU forms are slower (and a shared CPU slower still): they check the script, not the times
[ $DRY_RUN = 1 ] && BUDGET=7200 SCALE=10
START=$(date +%s)
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"

note() { echo "$*" | tee -a "$SUMMARY"; }

# step NAME LIMIT LOG COMMAND...: run under min(LIMIT, what is left of the budget); one summary line.
step() {
  local name=$1 limit=$(( $2 * SCALE )) log=$3; shift 3
  local left=$(( BUDGET - ($(date +%s) - START) ))
  if [ "$left" -lt 20 ]; then note "skip  $name: the ${BUDGET} s budget is spent"; return 1; fi
  [ "$limit" -gt "$left" ] && limit=$left
  local begin=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" > "$log" 2>&1
  local code=$?
  local took=$(( $(date +%s) - begin ))
  if [ $code = 0 ]; then note "ok    $name ($took s)"
  elif [ $code = 124 ] || [ $code = 137 ]; then note "fail  $name: stopped at its ${limit} s limit (log: $(basename "$log"))"
  else note "fail  $name: exit $code after $took s (log: $(basename "$log")): $(grep -v '^\s*$' "$log" | tail -1)"; fi
  return $code
}

if [ $DRY_RUN = 1 ]; then
  PYTHON=$ROOT/.venv/bin/python
  [ -x "$PYTHON" ] || { echo "--dry-run runs in .venv: bash scripts/setup.sh cpu first"; exit 2; }
  export GRPO_LAMBDA_GPU_TESTS_ON=cpu  # tests/conftest.py: the gpu tests on the CPU
  DEVICE_CHECK=(--device cuda --dry-run)
  PREFLIGHT=(--cpu --skip study)  # the study stages: tests/test_preflight.py runs them on a shrunk default
  STEP=(--rounds 1 --iterations 1 --completion-length 32 --batch 8)
  note "dry run on $(hostname): $("$PYTHON" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__)')"
else
  PYTHON=python3
  DEVICE_CHECK=(--device cuda)
  PREFLIGHT=()
  STEP=(--rounds 5 --iterations 3 --completion-length 256 --batch 16)
  note "$(nvidia-smi -L 2>&1 | head -4); $(python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "CUDA", torch.version.cuda)' 2>&1)"
fi

# --- install: the carried wheels, no index, no resolution (their needs are in the image or among them) ----
install_wheels() {
  [ -n "$(ls wheelhouse/*.whl 2>/dev/null)" ] || { echo "no wheelhouse/*.whl: bash scripts/gpu_check.sh wheels"; return 1; }
  local site=$WORK/site installer=$PYTHON
  if [ $DRY_RUN = 1 ]; then  # the machine's Python: the wheels' tags must fit it
    installer=python$MACHINE_PYTHON
    "$installer" -V > /dev/null 2>&1 || installer=$(ls ~/.pyenv/versions/$MACHINE_PYTHON*/bin/python3 2>/dev/null | head -1)
    [ -n "$installer" ] || { echo "no Python $MACHINE_PYTHON here to check the wheels' tags with"; return 1; }
  fi
  rm -rf "$site"
  "$installer" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \
    wheelhouse/*.whl || return 1
  ls "$site" | grep -i dist-info
  mkdir -p "$WORK/bin"
  printf '#!/bin/sh\nexec %s -m grpo_lambda.cli "$@"\n' "$PYTHON" > "$WORK/bin/grpo-lambda"
  chmod +x "$WORK/bin/grpo-lambda"
  # every requirement of the package and of what was installed, met by what is importable now
  "$PYTHON" - <<'EOF'
import importlib.metadata as metadata, re, tomllib
from packaging.requirements import Requirement
wanted = [Requirement(text) for text in tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]]
for name in ("trl", "datasets", "math-verify", "jsonschema"):
    wanted += [Requirement(text) for text in metadata.requires(name) or []]
unmet = []
for requirement in wanted:
    if requirement.marker and not requirement.marker.evaluate({"extra": ""}):
        continue
    try:
        version = metadata.version(requirement.name)
    except metadata.PackageNotFoundError:
        unmet.append(f"{requirement} (missing)")
        continue
    if requirement.specifier and not requirement.specifier.contains(version, prereleases=True):
        unmet.append(f"{requirement} (found {version})")
import torch, transformers, trl, datasets, math_verify, jsonschema, grpo_lambda.trainer, grpo_lambda.grading
print("imported: torch", torch.__version__, "transformers", transformers.__version__, "trl", trl.__version__,
      "datasets", datasets.__version__, "jsonschema", metadata.version("jsonschema"))
print("requirements not met (a warning, not a stop):", "; ".join(unmet) or "none")
EOF
}
if [ $DRY_RUN = 1 ]; then
  export PATH=$WORK/bin:$PATH PYTHONPATH=$ROOT/src
else
  export PATH=$WORK/bin:$PATH PYTHONPATH=$ROOT/src:$WORK/site
fi
export PYTHON WORK DRY_RUN MACHINE_PYTHON
export -f install_wheels  # `timeout` runs programs: the function goes through bash
step install 90 "$OUT/install.log" bash -c install_wheels || { note "no-go: the install failed; nothing else can run"; exit 1; }

step tests 150 "$OUT/tests.log" "$PYTHON" -m pytest -q -p no:cacheprovider -rs -m gpu tests/test_gpu.py
step bench_traces 90 "$OUT/bench_traces.txt" "$PYTHON" benchmarks/bench_traces.py "${DEVICE_CHECK[@]}"
step bench_step 120 "$OUT/bench_step-qwen2.5-1.5b.txt" "$PYTHON" benchmarks/bench_step.py "${DEVICE_CHECK[@]}" \
  --shape qwen2.5-1.5b "${STEP[@]}"
step preflight 300 "$OUT/preflight.txt" "$PYTHON" -m grpo_lambda.cli preflight --configfile config/config.yaml \
  --work "$WORK/preflight" --json "$OUT/preflight.json" ${PREFLIGHT[@]+"${PREFLIGHT[@]}"}
if [ $? != 0 ]; then  # the failing stages' logs, for the record that comes back
  for log in $(ls -t "$WORK"/preflight/*.log "$WORK"/preflight/*/logs/*.log "$WORK"/preflight/*/*.log 2>/dev/null | head -3); do
    { echo "=== $log"; tail -n 25 "$log" | cut -c1-300; } >> "$OUT/preflight.txt"
  done
fi
if [ $(( BUDGET - ($(date +%s) - START) )) -ge $(( 75 * SCALE )) ]; then
  step bench_step_7b 75 "$OUT/bench_step-qwen2.5-7b.txt" "$PYTHON" benchmarks/bench_step.py "${DEVICE_CHECK[@]}" \
    --shape qwen2.5-7b "${STEP[@]:0:4}" --completion-length 256 --batch 8 --variants grpo-lambda-recent grpo-lambda-absolute
else
  note "skip  bench_step_7b: under 75 s of the budget left"
fi
note "done in $(( $(date +%s) - START )) s; files in $OUT"
