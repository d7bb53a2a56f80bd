#!/usr/bin/env bash
# Copies the figures and tables of the last default run into docs/default-run/ (run after
# scripts/run_default.sh). The README's headline and docs/default-run/README.md quote these files;
# tests/test_default_run.py checks the headline table against them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p docs/default-run
cp results/figures/reward_curves.png results/figures/learning_speed.png results/figures/figure1.png docs/default-run/
for table in table1 paired results_by_variant learning_speed; do
  cp "results/tables/$table.md" "results/tables/$table.csv" docs/default-run/
done
# The spread across SFT seeds, where scripts/sft_seeds.sh has measured it.
if [ -f results-spread/spread.md ]; then
  cp results-spread/spread.md results-spread/spread.csv docs/default-run/
fi
echo "docs/default-run updated from results/"
