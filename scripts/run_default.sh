#!/usr/bin/env bash
# Sets everything up, runs the embedded default study and writes results/report.html.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/setup.sh
start=$(date +%s)
snakemake --cores "${CORES:-2}" "$@"
snakemake --report results/report.html
echo "results/report.html written; the pipeline took $(( $(date +%s) - start )) s"
