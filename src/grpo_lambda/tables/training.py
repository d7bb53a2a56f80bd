"""The training tables the figures draw, from each run's ``train_log.csv``:

``final_reward``     per model × training set × variant × seed: the mean reward of the run's last
                     ``report.final_window`` logged steps (Figure 3; Figure 4 picks its GRPO-λ
                     variant by it)
``training_curves``  per model × training set × variant × metric (``reward``, ``kl``) × step: the
                     smoothed curve, mean over seeds (``mean``) and its band (``low`` to ``high``:
                     the seeds' minimum and maximum)
``training_gain``    per model × training set × variant: its training reward relative to the
                     baseline's, the paper's "30–40% improved performance during RL training"
                     (:func:`training_gain_table`)

Each seed's curve is smoothed on its own with the debiased EMA of weight ``report.smoothing``
(:func:`grpo_lambda.smoothing.smooth`; "auto": a window of about 2% of the run); a long curve keeps
every k-th step and its last, at most ``MAX_CURVE_POINTS``, which a drawing cannot tell apart.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from grpo_lambda.config import model_datasets, model_variants
from grpo_lambda.smoothing import smooth, smoothing_weight
from grpo_lambda.stats import student_t_quantile
from grpo_lambda.tables.labels import variant_label

MAX_CURVE_POINTS = 500  # per curve; smoothed curves lose nothing visible
CURVE_METRICS = ("reward", "kl")
RUN_KEYS = ["model", "dataset", "variant", "seed"]
FINAL_REWARD_COLUMNS = RUN_KEYS + ["reward"]
CURVE_COLUMNS = ["model", "dataset", "variant", "metric", "step", "mean", "low", "high"]
ALL_DATASETS = "all"
GAIN_COLUMNS = ["model", "dataset", "variant", "label", "seeds", "window", "baseline_final", "final",
                "final_gain", "final_gain_low", "final_gain_high", "auc_gain", "auc_gain_low", "auc_gain_high"]


def final_reward_table(config: dict, logs: pd.DataFrame, window: int) -> pd.DataFrame:
    """Mean reward of the last ``window`` logged steps of each run, in config order."""
    if logs.empty:
        return pd.DataFrame(columns=FINAL_REWARD_COLUMNS)
    tail = logs.dropna(subset=["reward"]).sort_values("step").groupby(RUN_KEYS).tail(window)
    final = tail.groupby(RUN_KEYS, as_index=False)["reward"].mean()[FINAL_REWARD_COLUMNS]
    rank = {"model": list(config["models"]), "dataset": list(config["datasets"]),
            "variant": list(config["variants"])}
    return final.sort_values(RUN_KEYS, key=lambda column: column.map(rank[column.name].index)
                             if column.name in rank else column, kind="stable").reset_index(drop=True)


def seed_curves(log: pd.DataFrame, metric: str, weight: float) -> pd.DataFrame:
    """Per step: mean, min and max over seeds of each seed's smoothed ``metric``."""
    curves = []
    for _, run in log.groupby("seed"):
        run = run.sort_values("step")
        curves.append(pd.Series(smooth(run[metric].to_numpy(), weight), index=run["step"].to_numpy()))
    table = pd.concat(curves, axis=1)
    return pd.DataFrame({"mean": table.mean(axis=1), "low": table.min(axis=1), "high": table.max(axis=1)})


def thin(curve: pd.DataFrame, max_points: int = MAX_CURVE_POINTS) -> pd.DataFrame:
    """Every k-th point of a smoothed curve (and its last), so long runs draw and save quickly."""
    stride = -(-len(curve) // max_points)
    if stride <= 1:
        return curve
    keep = np.unique(np.r_[np.arange(0, len(curve), stride), len(curve) - 1])
    return curve.iloc[keep]


def training_curves_table(config: dict, logs: pd.DataFrame, options: dict) -> pd.DataFrame:
    """The smoothed curve of each metric of ``CURVE_METRICS`` for every model × training set × variant
    with a train log, in config order; a metric a run never logged has no rows."""
    parts = []
    for model in config["models"]:
        for dataset in model_datasets(config, model):
            runs = logs[(logs["model"] == model) & (logs["dataset"] == dataset)]
            for variant in model_variants(config, model):
                for metric in CURVE_METRICS:
                    log = runs[runs["variant"] == variant].dropna(subset=[metric])
                    if log.empty:
                        continue
                    weight = smoothing_weight(options["smoothing"], int(log["step"].nunique()))
                    curve = thin(seed_curves(log, metric, weight))
                    parts.append(curve.rename_axis("step").reset_index().assign(
                        model=model, dataset=dataset, variant=variant, metric=metric))
    if not parts:
        return pd.DataFrame(columns=CURVE_COLUMNS)
    return pd.concat(parts, ignore_index=True)[CURVE_COLUMNS]


def ratio_gain(values, base, level: float) -> tuple[float, float, float]:
    """(gain, low, high): mean(values) / mean(base) − 1 over paired seeds, with its Student t interval.

    The interval is the delta method's for a ratio of means, paired: with R the ratio, the per-seed
    terms d_s = (values_s − R·base_s) / mean(base) have mean 0 and carry the ratio's sampling error,
    so R ± t(n−1)·sd(d)/√n. A t interval rather than a percentile bootstrap because it keeps its
    coverage at four seeds, where a bootstrap over seeds covers about 80% at nominal 95%;
    ``tests/test_figures.py`` checks the coverage by simulation. No interval with one seed; no gain
    where the baseline's mean reward is not positive.
    """
    values, base = np.asarray(values, dtype=float), np.asarray(base, dtype=float)
    if values.size == 0 or not base.mean() > 0:
        return float("nan"), float("nan"), float("nan")
    ratio = values.mean() / base.mean()
    if values.size < 2:
        return ratio - 1, float("nan"), float("nan")
    terms = (values - ratio * base) / base.mean()
    half = student_t_quantile((1 + level) / 2, values.size - 1) * terms.std(ddof=1) / np.sqrt(values.size)
    return ratio - 1, ratio - 1 - half, ratio - 1 + half


def _run_rewards(config: dict, logs: pd.DataFrame, window: int) -> pd.DataFrame:
    """Per run: ``final`` (the final_reward table's mean of the last ``window`` steps) and ``auc`` (the
    mean reward over all logged steps, the area under the curve over its length)."""
    final = final_reward_table(config, logs, window).rename(columns={"reward": "final"})
    auc = logs.dropna(subset=["reward"]).groupby(RUN_KEYS, as_index=False)["reward"].mean()
    return final.merge(auc.rename(columns={"reward": "auc"}), on=RUN_KEYS)


def _gain_row(model: str, dataset: str, variant: str, label: str, pairs: pd.DataFrame, window: int,
              level: float) -> dict:
    """One row of training_gain from ``pairs``: per seed the variant's final and auc and the baseline's."""
    row = {"model": model, "dataset": dataset, "variant": variant, "label": label, "seeds": len(pairs),
           "window": window, "baseline_final": pairs["final_base"].mean(), "final": pairs["final"].mean()}
    for stat in ("final", "auc"):
        gain, low, high = ratio_gain(pairs[stat], pairs[f"{stat}_base"], level)
        row.update({f"{stat}_gain": gain, f"{stat}_gain_low": low, f"{stat}_gain_high": high})
    return row


def training_gain_table(config: dict, logs: pd.DataFrame, options: dict) -> pd.DataFrame:
    """Each variant's training reward relative to the baseline's (report.baseline), paired by seed.

    The paper's abstract: "The training plots demonstrate 30–40% improved performance during RL
    training". Its plots of training show the reward, and Figure 3 the mean reward of the last
    steps, so the reading here is a ratio of training rewards minus 1: ``final_gain`` = final /
    baseline_final − 1, where final is the mean reward of the last ``report.final_window`` logged
    steps (Figure 3's quantity; 100 steps in config/paper.yaml, as the paper's §4.1), mean over the
    seeds the variant and the baseline both have; and beside it ``auc_gain``, the same ratio for the
    mean reward over the whole run (the area under the curve: a method that learns sooner gains here
    even when both end level). A variant and the baseline with the same seed start from the same SFT
    model and see the same prompts in the same order, so the interval is paired by seed
    (:func:`ratio_gain`; none with one seed, as in the paper's grid). Rows with ``dataset`` "all"
    (models with several training sets) take each seed's rewards averaged over the training sets,
    the sets fixed as in Table 1, over the seeds every set has.
    """
    baseline, window, level = options["baseline"], options["final_window"], float(options["level"])
    if logs.empty:
        return pd.DataFrame(columns=GAIN_COLUMNS)
    runs = _run_rewards(config, logs, window)
    rows = []
    for model in config["models"]:
        base = runs[(runs["model"] == model) & (runs["variant"] == baseline)]
        for variant in model_variants(config, model):
            if variant == baseline:
                continue
            pairs = runs[(runs["model"] == model) & (runs["variant"] == variant)].merge(
                base[["dataset", "seed", "final", "auc"]], on=["dataset", "seed"], suffixes=("", "_base"))
            if pairs.empty:
                continue
            label = variant_label(config, variant)
            datasets = [d for d in model_datasets(config, model) if d in set(pairs["dataset"])]
            for dataset in datasets:
                rows.append(_gain_row(model, dataset, variant, label, pairs[pairs["dataset"] == dataset],
                                      window, level))
            if len(datasets) > 1:
                sets = pairs.groupby("seed")["dataset"].nunique()
                shared = pairs[pairs["seed"].isin(sets[sets == len(datasets)].index)]
                per_seed = shared.groupby("seed")[["final", "final_base", "auc", "auc_base"]].mean()
                if not per_seed.empty:
                    rows.append(_gain_row(model, ALL_DATASETS, variant, label, per_seed, window, level))
    return pd.DataFrame(rows, columns=GAIN_COLUMNS)
