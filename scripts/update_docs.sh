#!/usr/bin/env bash
# Copies the figure and tables the README shows from the last default run into docs/default-run/
# (run after scripts/run_default.sh; the README quotes these files, nothing there is drawn by hand).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p docs/default-run
cp results/figures/reward_curves.png results/figures/figure1.png docs/default-run/
cp results/tables/table1.md results/tables/paired.md results/tables/results_by_variant.md docs/default-run/
echo "docs/default-run updated from results/"
