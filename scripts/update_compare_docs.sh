#!/usr/bin/env bash
# Copies the comparison's tables and figures from a finished `snakemake --configfile config/compare.yaml`
# run (results/compare/, or the folder given) into docs/compare-run/, with the run's provenance table and
# wall time; the table of docs/compare-run/README.md and the README's summary quote these files.
#   bash scripts/update_compare_docs.sh [RESULTS]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
results=${1:-results/compare}
mkdir -p docs/compare-run
for table in table1 paired results_by_variant learning_speed provenance; do
  cp "$results/tables/$table.md" "$results/tables/$table.csv" docs/compare-run/
done
cp "$results/figures/reward_curves.png" "$results/figures/learning_speed.png" "$results/figures/figure1.png" \
   docs/compare-run/
[ -f "$results/wall_seconds.txt" ] && cp "$results/wall_seconds.txt" docs/compare-run/
echo "docs/compare-run updated from $results"
