#!/usr/bin/env bash
# Runs a study once per SFT seed, each run in its own results folder, and writes how the headline
# numbers spread across the runs (each run's value, and a prediction interval for one more run):
# <results>-spread/spread.{csv,md,tex}. The intervals of one run cover RL seeds and problems for one
# SFT model; a run on another machine fine-tunes another SFT model, and this measures what that does.
#
#   bash scripts/sft_seeds.sh [--configfile FILE] [--check RESULTS] [SEED ...]   (default seeds: 0 1 2 3)
#
# The run whose seed is the config's own sft.seed is the config's results folder itself (the
# default run's results/, reused if it is complete); seed k otherwise goes to <results>-sft<k>/.
# --check RESULTS sets one more finished run (another machine's, say) against the interval.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/setup.sh cpu

configfile=config/config.yaml
check=()
while [ $# -gt 0 ]; do
  case "$1" in
    --configfile) configfile=$2; shift 2 ;;
    --check) check=(--check "$2"); shift 2 ;;
    *) break ;;
  esac
done
seeds=("${@}")
[ ${#seeds[@]} -gt 0 ] || seeds=(0 1 2 3)

results=$(python -c 'import sys; from grpo_lambda import config; print(config.load(sys.argv[1])["results"])' "$configfile")
runs=()
for seed in "${seeds[@]}"; do
  # The config with this SFT seed and its own results folder, written beside the run it makes (a file, so
  # that the run can be remade and checked alone); prints that config's path and results folder.
  { read -r run_config; read -r run; } < <(python - "$configfile" "$seed" <<'EOF'
import sys, yaml
from grpo_lambda import config as study
from grpo_lambda.files import write_text
path, seed = sys.argv[1], int(sys.argv[2])
raw, validated = study.read_yaml(path), study.load(path)
results = validated["results"]
if validated["sft"].get("seed", 0) != seed:
    results = raw["results"] = f"{results}-sft{seed}"
    raw.setdefault("sft", {})["seed"] = seed
    path = f"{results}/config.yaml"
    write_text(path, yaml.safe_dump(raw, sort_keys=False, allow_unicode=True))
print(path)
print(results)
EOF
)
  echo "SFT seed $seed: $run (config $run_config)"
  snakemake --cores "${CORES:-2}" --configfile "$run_config"
  runs+=("$run")
done
grpo-lambda spread "${runs[@]}" "${check[@]}" --out "$results-spread"
