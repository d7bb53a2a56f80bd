"""Reading the results folder: the per-sample evaluation files, the training logs, the missing cells,
and the published tables shipped with the package."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from grpo_lambda import files, layout
from grpo_lambda.config import (model_checkpoints, model_datasets, model_variants, rl_settings, sft_folder,
                                sft_seeds)
from grpo_lambda.sampling import pass_at_k
from grpo_lambda.tables.keys import FINAL, KEYS, SFT

def final_step(config: dict, model: str) -> int:
    """The optimizer step of the final model (where ``final`` sits on a step axis)."""
    return int(rl_settings(config, model)["max_steps"])


def expected_cells(config: dict) -> list[tuple]:
    """Every (model, dataset, variant, seed, step, benchmark) the config asks to evaluate. An SFT model's
    seed is None, or, with several SFT models per condition (``sft.seeds``), its SFT seed."""
    cells = []
    for model in config["models"]:
        steps = [str(s) for s in model_checkpoints(config, model)] + [FINAL]  # a model may name its own
        for dataset in model_datasets(config, model):
            for sft_seed in sft_seeds(config) or [None]:
                for benchmark in config["benchmarks"]:
                    cells.append((model, dataset, SFT, sft_seed, FINAL, benchmark))
            for variant in model_variants(config, model):
                for seed in config["seeds"]:
                    for step in steps:
                        for benchmark in config["benchmarks"]:
                            cells.append((model, dataset, variant, seed, step, benchmark))
    return cells


def eval_file(results_dir: str | os.PathLike, model: str, dataset: str, variant: str,
              seed: int | None, step: str, benchmark: str) -> Path:
    if variant != SFT:
        return Path(results_dir) / layout.evaluation(model, dataset, variant, seed, step, benchmark)
    return Path(results_dir) / layout.sft_evaluation(model, dataset, benchmark, sft_seed=seed)


_SAMPLE_FIELDS = ["id", "mode", "sample", "correct", "formatted", "length", "extracted"]


# What a per-sample evaluation line must hold (docs/results-format.md); the other fields may be absent.
_SAMPLE_REQUIRED = {"id": (str, int), "correct": (bool, int, float)}
_SAMPLE_OPTIONAL = {"mode": str, "sample": int, "formatted": (bool, int, float), "length": (int, float),
                    "extracted": str}


def _read_samples(path: Path, columns: dict[str, list]) -> int:
    """Append the fields of each line of an evaluation file to ``columns``; return the line count.

    A bad line (not UTF-8, not JSON, a required field missing or null, a field of the wrong type) is
    skipped and named (``path:line``) in the log, with a summary line for the file; the same
    (id, mode, sample) twice is dropped when it agrees and an error naming both lines when not.
    """
    summary = files.ReadSummary(str(path))
    seen: dict[tuple, tuple[int, bool]] = {}
    count = 0
    for line_no, row in files.iter_jsonl(path, summary, fields=_SAMPLE_REQUIRED, optional=_SAMPLE_OPTIONAL):
        key = (str(row["id"]), row.get("mode", "greedy"), int(row.get("sample", 0)))
        if key in seen:
            earlier, correct = seen[key]
            if correct != bool(row["correct"]):
                raise ValueError(f"{path}:{earlier} and {path}:{line_no}: sample {key} appears twice, graded "
                                 "differently")
            summary.duplicates += 1
            continue
        seen[key] = (line_no, bool(row["correct"]))
        length = row.get("length")
        columns["id"].append(key[0])
        columns["mode"].append(key[1])
        columns["sample"].append(key[2])
        columns["correct"].append(float(bool(row["correct"])))
        columns["formatted"].append(float(bool(row.get("formatted"))))
        columns["length"].append(float("nan") if length is None else float(length))
        columns["extracted"].append(row.get("extracted"))  # maj@k's votes
        count += 1
    summary.rows = count
    if summary.total_skipped or summary.duplicates:
        summary.report()
    return count


def collect_samples(results_dir: str | os.PathLike, config: dict) -> pd.DataFrame:
    """One row per evaluated sample of every cell the config names and the folder holds.

    Columns: model, dataset, variant, seed (nullable; empty for SFT, or the SFT seed under ``sft.seeds``), step (``final`` or a step
    number, as text), benchmark, id (text), mode (greedy | sampled), sample, correct, formatted
    (0/1 floats), length (tokens) and extracted (the graded answer, or None). Absent files are skipped
    (see :func:`missing_cells`).
    """
    columns: dict[str, list] = {name: [] for name in KEYS + _SAMPLE_FIELDS}
    for cell in expected_cells(config):
        path = eval_file(results_dir, *cell)
        if not path.is_file():
            continue
        count = _read_samples(path, columns)
        for key, value in zip(KEYS, cell):
            columns[key].extend([value] * count)
    frame = pd.DataFrame({name: pd.Series(values, dtype=_SAMPLE_DTYPES.get(name, "object"))
                          for name, values in columns.items()})
    return frame


_SAMPLE_DTYPES = {"seed": "Int64", "sample": "int64", "correct": "float64", "formatted": "float64",
                  "length": "float64", "model": "category", "dataset": "category", "variant": "category",
                  "step": "category", "benchmark": "category", "mode": "category"}


def summarise(samples: pd.DataFrame) -> pd.DataFrame:
    """One row per model × dataset × variant × seed × step × benchmark.

    accuracy, formatted and mean_length are over the greedy samples (n of them; absent in a sampled-only
    evaluation); when sampled completions exist (k per problem): sampled_accuracy (avg@k: the mean over
    all sampled completions), pass_at_k (the share of problems with a correct sample; the unbiased
    estimator at k = n) and pass_at_1 ... pass_at_<k/2> for the powers of two below k (Chen et al.'s
    unbiased estimator, sampling.pass_at_k), and maj_at_k (the majority answer's verdict, sampling.majority_correct).
    """
    greedy = samples[samples["mode"] == "greedy"]
    summary = (greedy.groupby(KEYS, dropna=False, sort=False, observed=True)
               .agg(n=("correct", "size"), accuracy=("correct", "mean"),
                    formatted=("formatted", "mean"), mean_length=("length", "mean"))
               .reset_index())
    sampled = samples[samples["mode"] == "sampled"]
    if not sampled.empty:
        per_problem = sampled_per_problem(sampled)
        k = int(per_problem["samples"].max())
        estimated = {"pass_at_k": lambda row: pass_at_k(int(row.samples), int(row.right), int(row.samples))}
        for j in (2 ** power for power in range(k.bit_length()) if 2 ** power < k):
            estimated[f"pass_at_{j}"] = lambda row, j=j: pass_at_k(int(row.samples), int(row.right),
                                                                   min(j, int(row.samples)))
        for column, estimate in estimated.items():
            per_problem[column] = [estimate(row) for row in per_problem.itertuples()]
        extra = (per_problem.groupby(KEYS, dropna=False, sort=False, observed=True)
                 .agg(k=("samples", "max"), **{column: (column, "mean") for column in [*estimated, "maj"]})
                 .rename(columns={"maj": "maj_at_k"}))
        extra["sampled_accuracy"] = sampled.groupby(KEYS, dropna=False, sort=False, observed=True)["correct"].mean()
        summary = summary.merge(extra.reset_index(), on=KEYS, how="outer" if summary.empty else "left")
    summary["seed"] = summary["seed"].astype("Int64")
    return summary


def sampled_per_problem(sampled: pd.DataFrame) -> pd.DataFrame:
    """One row per problem of the sampled completions ``sampled``: KEYS, id, ``samples`` (k), ``right``
    (how many are correct) and ``maj`` (the verdict of the majority answer: sampling.majority_correct's rule,
    the most frequent extracted answer, ties to the one seen first, blanks not voting, 0 without votes;
    counted here for all problems at once)."""
    keys = KEYS + ["id"]
    per_problem = (sampled.groupby(keys, dropna=False, sort=False, observed=True)
                   .agg(samples=("correct", "size"), right=("correct", "sum")).reset_index())
    if "extracted" not in sampled:
        return per_problem.assign(maj=0.0)
    votes = sampled["extracted"].notna() & (sampled["extracted"] != "")
    voting = sampled[votes].assign(order=np.arange(int(votes.sum())))
    tally = (voting.groupby(keys + ["extracted"], dropna=False, sort=False, observed=True)
             .agg(votes=("correct", "size"), order=("order", "min"), maj=("correct", "first")).reset_index())
    best = tally.sort_values(["votes", "order"], ascending=[False, True], kind="stable").drop_duplicates(keys)
    per_problem = per_problem.merge(best[keys + ["maj"]], on=keys, how="left", sort=False)
    per_problem["maj"] = per_problem["maj"].fillna(0.0).astype(float)
    return per_problem


def collect(results_dir: str | os.PathLike, config: dict) -> pd.DataFrame:
    """One row per model × dataset × variant × seed × step × benchmark: accuracy, n, formatted,
    mean_length (and pass@k figures when sampled completions exist), from the per-sample files."""
    return summarise(collect_samples(results_dir, config))


def missing_cells(summary: pd.DataFrame, config: dict) -> pd.DataFrame:
    """The cells the config asks for that have no evaluation file."""
    found = {(r.model, r.dataset, r.variant, None if pd.isna(r.seed) else int(r.seed), r.step, r.benchmark)
             for r in summary[KEYS].itertuples(index=False)}
    rows = [cell for cell in expected_cells(config) if cell not in found]
    frame = pd.DataFrame(rows, columns=KEYS)
    frame["seed"] = frame["seed"].astype("Int64")
    return frame


TRAIN_LOG_COLUMNS = ["step", "reward", "reward_std", "frac_reward_zero_std", "kl", "loss", "entropy",
                     "completion_length", "trace_weight", "step_time"]


def collect_train_logs(results_dir: str | os.PathLike, config: dict) -> pd.DataFrame:
    """Every ``train_log.csv`` of the grid, stacked, with model, dataset, variant, seed columns.

    Columns the logs lack are filled with NaN, so plots of an unlogged metric are empty, not errors.
    """
    parts = []
    for model in config["models"]:
        for dataset in model_datasets(config, model):
            for variant in model_variants(config, model):
                for seed in config["seeds"]:
                    path = Path(results_dir) / layout.train_log(model, dataset, variant, seed)
                    if not path.is_file() or path.stat().st_size == 0:
                        continue
                    log = pd.read_csv(path)
                    if "step" not in log.columns or log.empty:
                        continue
                    log = log.assign(model=model, dataset=dataset, variant=variant, seed=seed)
                    parts.append(log)
    keys = ["model", "dataset", "variant", "seed"]
    if not parts:
        return pd.DataFrame(columns=keys + TRAIN_LOG_COLUMNS)
    frame = pd.concat(parts, ignore_index=True)
    for column in TRAIN_LOG_COLUMNS:
        if column not in frame.columns:
            frame[column] = np.nan
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    return frame


def collect_provenance(results_dir: str | os.PathLike, config: dict) -> pd.DataFrame:
    """The distinct version records (grpo_lambda.provenance) of the study's SFT models, trained cells and
    evaluation summaries: one row per stage and record, with the number of files that carry it."""
    import json

    from grpo_lambda.provenance import FIELDS

    sources = []  # (stage, path, key in the file or None for the whole file)
    for model in config["models"]:
        for dataset in model_datasets(config, model):
            for seed in config["seeds"]:
                sft = Path(results_dir) / sft_folder(config, model, dataset, seed) / "provenance.json"
                if ("sft", sft, None) not in sources:  # a shared SFT model (sft.data open_r1) counts once
                    sources.append(("sft", sft, None))
            for variant in model_variants(config, model):
                for seed in config["seeds"]:
                    sources.append(("train", Path(results_dir) / layout.cell(model, dataset, variant, seed)
                                    / "provenance.json", None))
    for model, dataset, variant, seed, step, benchmark in expected_cells(config):
        path = eval_file(results_dir, model, dataset, variant, seed, step, benchmark).with_suffix(".json")
        sources.append(("evaluate", path, "provenance"))
    counts: dict[tuple, int] = {}
    for stage, path, key in sources:
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        record = record.get(key) if key else record
        if isinstance(record, dict):
            row = (stage, *(record.get(field) for field in FIELDS))
            counts[row] = counts.get(row, 0) + 1
    rows = [dict(zip(("stage", *FIELDS), row), files=n) for row, n in counts.items()]
    return pd.DataFrame(rows, columns=["stage", *FIELDS, "files"])


def load_published() -> tuple[pd.DataFrame, pd.DataFrame]:
    """The published Table 1 (wide) and Appendix E (long), as shipped in ``grpo_lambda/published``."""
    folder = resources.files("grpo_lambda.published")
    with folder.joinpath("table1.csv").open(encoding="utf-8") as handle:
        table1 = pd.read_csv(handle)
    with folder.joinpath("appendix_e_benchmarks.csv").open(encoding="utf-8") as handle:
        appendix = pd.read_csv(handle)
    return table1, appendix
