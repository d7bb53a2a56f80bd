"""The training tables the figures draw, from each run's ``train_log.csv``:

``final_reward``     per model × training set × variant × seed: the mean reward of the run's last
                     ``report.final_window`` logged steps (Figure 3; Figure 4 picks its GRPO-λ
                     variant by it)
``training_curves``  per model × training set × variant × metric (``reward``, ``kl``) × step: the
                     smoothed curve, mean over seeds (``mean``) and its band (``low`` to ``high``:
                     the seeds' minimum and maximum)

Each seed's curve is smoothed on its own with the debiased EMA of weight ``report.smoothing``
(:func:`grpo_lambda.stats.smooth`; "auto": a window of about 2% of the run); a long curve keeps
every k-th step and its last, at most ``MAX_CURVE_POINTS``, which a drawing cannot tell apart.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from grpo_lambda.config import model_datasets, model_variants
from grpo_lambda.stats import smooth, smoothing_weight

MAX_CURVE_POINTS = 500  # per curve; smoothed curves lose nothing visible
CURVE_METRICS = ("reward", "kl")
RUN_KEYS = ["model", "dataset", "variant", "seed"]
FINAL_REWARD_COLUMNS = RUN_KEYS + ["reward"]
CURVE_COLUMNS = ["model", "dataset", "variant", "metric", "step", "mean", "low", "high"]


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
