"""Where an RL cell's and an SFT model's files lie in the results folder (docs/results-format.md), spelled out once for the
workflow's rules, the tables, the status command and training. Standard library only: the workflow
reads it while planning.

Paths are text, relative to the results folder. Given Snakemake's wildcards (``"{model}"``, ...) as
values, a function returns a rule's pattern.
"""

from __future__ import annotations

TRAIN_LOG = "train_log.csv"


def cell(model: str, dataset: str, variant: str, seed) -> str:
    """An RL cell's folder, ``<model>/<dataset>/<variant>/seed<seed>``: also the cell's name in the
    status table, the job logs and a tracker."""
    return f"{model}/{dataset}/{variant}/seed{seed}"


def done(model: str, dataset: str, variant: str, seed) -> str:
    """The file that stands for a whole cell, trained and every kept checkpoint evaluated: a Snakemake target
    (the folder itself cannot be one, as it holds other rules' outputs)."""
    return f"{cell(model, dataset, variant, seed)}/done"


def published(model: str, dataset: str, variant: str, seed) -> str:
    """The record of the cell's published model (its hub repo and commit)."""
    return f"{cell(model, dataset, variant, seed)}/published.json"


def train_log(model: str, dataset: str, variant: str, seed) -> str:
    """The cell's step log (one row per logged training step)."""
    return f"{cell(model, dataset, variant, seed)}/{TRAIN_LOG}"


def evaluation(model: str, dataset: str, variant: str, seed, step, benchmark: str, ext: str = "jsonl") -> str:
    """The evaluation of the cell's model at ``step`` (a number, or ``final``) on ``benchmark``: its
    per-sample lines (``jsonl``) or its summary (``json``)."""
    return f"{cell(model, dataset, variant, seed)}/eval/{step}/{benchmark}.{ext}"


SFT_FOLDER = "sft"  # no variant may be named so (the config's schema): beside the variants, the SFT stage's folder


def sft(model: str, dataset: str | None, sft_seed=None) -> str:
    """The SFT stage's folder: ``<model>/<dataset>/sft`` (its model, its self-distilled set), or ``<model>/sft``
    for an SFT model shared by all the model's training sets (``dataset`` None). A study with several SFT
    models per condition (``sft.seeds``) keeps each in ``<...>/sft/seed<sft_seed>`` (the self-distilled set,
    which does not depend on the SFT seed, stays in ``<...>/sft``)."""
    folder = f"{model}/{SFT_FOLDER}" if dataset is None else f"{model}/{dataset}/{SFT_FOLDER}"
    return folder if sft_seed is None else f"{folder}/seed{sft_seed}"


def sft_evaluation(model: str, dataset: str, benchmark: str, ext: str = "jsonl", sft_seed=None) -> str:
    """The SFT baseline of one training set's cells on ``benchmark``: kept under the training set's folder even
    when the SFT model is shared, so that every cell's baseline lies beside it."""
    return f"{sft(model, dataset, sft_seed)}/eval/final/{benchmark}.{ext}"
