"""The keys of an evaluated cell, and the names the tables give to the final model, the SFT baseline,
the benchmark average and the mean over training sets (the metrics a problem's value can be are
``grpo_lambda.config.report.METRICS``)."""

FINAL = "final"
SFT = "sft"
AVERAGE = "average"
ALL_DATASETS = "all"
KEYS = ["model", "dataset", "variant", "seed", "step", "benchmark"]
