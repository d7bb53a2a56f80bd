"""The keys of an evaluated cell, and the names the tables give to the final model, the SFT baseline,
the benchmark average and the mean over training sets, and the metrics a problem's value can be."""

FINAL = "final"
SFT = "sft"
AVERAGE = "average"
ALL_DATASETS = "all"
KEYS = ["model", "dataset", "variant", "seed", "step", "benchmark"]
# What a problem's value is, per report.metric: the greedy completion's verdict (the paper's protocol),
# or from its k sampled completions: avg@k (their mean verdict), pass@k (any right), maj@k (the
# verdict of their most frequent answer).
METRICS = ("greedy", "avg", "pass_at_k", "maj_at_k")
