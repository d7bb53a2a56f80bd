# grpo-lambda: SFT -> RL (model x dataset x variant x seed) -> evaluation -> tables, figures, report.
# Run: snakemake --cores 2 (embedded default), or see docs/cluster.md for the paper grid and SLURM.
from snakemake.utils import min_version

min_version("9.0")


# The embedded default, unless the command line names the study's config file: a --configfile is
# used alone, not merged into the default (else paper.yaml would inherit the tiny model).
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/prefetch.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/sft.smk"
include: "workflow/rules/rl.smk"
include: "workflow/rules/eval.smk"
include: "workflow/rules/cell.smk"
include: "workflow/rules/publish.smk"
include: "workflow/rules/report.smk"


# A run that made the tables ends with their headline (Table 1, the primary verdicts) and where they are.
onsuccess:
    print_headline()


rule all:
    input:
        final_targets(),
    default_target: True
