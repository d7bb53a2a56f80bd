#!/usr/bin/env bash
# Sets everything up, runs the embedded default study and writes results/report.html.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
begin=$(date +%s)
source scripts/setup.sh cpu
start=$(date +%s)
snakemake --cores "${CORES:-2}" "$@"
snakemake --report results/report.html
end=$(date +%s)
echo "results/report.html written; the pipeline took $(( end - start )) s," \
     "$(( (end - begin) / 60 )) min $(( (end - begin) % 60 )) s with the environment setup"
