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
# The end of the output: the headline (Table 1's averages, the primary verdict) and where everything is.
echo
cat results/report/headline.txt
echo "Tables: results/tables/table1.md (every table: results/tables/). Report: results/report.html."
echo "The pipeline took $(( end - start )) s," \
     "$(( (end - begin) / 60 )) min $(( (end - begin) % 60 )) s with the environment setup."
