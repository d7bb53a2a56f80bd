"""Where an RL cell's files lie in the results folder (docs/results-format.md), spelled out once for the
workflow's rules, the tables, the status command and training. Standard library only: the workflow
reads it while planning. The SFT stage's paths are not here (its rules and ``tables.collect`` name
them).

Paths are text, relative to the results folder. Given Snakemake's wildcards (``"{model}"``, ...) as
values, a function returns a rule's pattern.
"""

from __future__ import annotations

TRAIN_LOG = "train_log.csv"


def cell(model: str, dataset: str, variant: str, seed) -> str:
    """An RL cell's folder, ``<model>/<dataset>/<variant>/seed<seed>``: also the cell's name in the
    status table, the job logs and a tracker."""
    return f"{model}/{dataset}/{variant}/seed{seed}"


def train_log(model: str, dataset: str, variant: str, seed) -> str:
    """The cell's step log (one row per logged training step)."""
    return f"{cell(model, dataset, variant, seed)}/{TRAIN_LOG}"


def evaluation(model: str, dataset: str, variant: str, seed, step, benchmark: str, ext: str = "jsonl") -> str:
    """The evaluation of the cell's model at ``step`` (a number, or ``final``) on ``benchmark``: its
    per-sample lines (``jsonl``) or its summary (``json``)."""
    return f"{cell(model, dataset, variant, seed)}/eval/{step}/{benchmark}.{ext}"
