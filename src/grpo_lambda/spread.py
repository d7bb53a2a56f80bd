"""How a study's headline numbers vary across whole reruns: other SFT seeds, other machines.

The intervals of the tables cover RL seeds and problems, for the one SFT model a run fine-tunes. A
rerun on another machine fine-tunes another SFT model (floating-point rounding sends training
elsewhere), and what RL reaches depends on it. This module reads the tables of several complete runs
of one study (their results folders) and gives, per headline number, each run's value, their mean
with its confidence interval, and a prediction interval for one more run:

    x̄ ± t(K−1, (1 + level)/2) · s · √(1/K)        the mean over such runs
    x̄ ± t(K−1, (1 + level)/2) · s · √(1 + 1/K)    one more run

over K runs, s their sample standard deviation: the textbook t intervals for normal draws (a run's
paired differences are per-run values too, so the mean gap over SFT models is the t interval of the
per-run gaps). Each run
is also set against the interval the others give (leave one out), and with ``check`` a further run
(another machine's, say) against the interval of them all.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pandas as pd

from grpo_lambda.stats import student_t_quantile

# The kinds of headline number, as named in the table's quantity column.
_ACCURACY = "accuracy"
_PAIRED = "paired accuracy"
_AUC = "reward AUC"
_PAIRED_AUC = "paired reward AUC"


def _read(tables: Path, name: str) -> pd.DataFrame:
    path = tables / f"{name}.csv"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: is {tables.parent} the results folder of a finished run?")
    return pd.read_csv(path)


def headline_numbers(results_dir: str | os.PathLike) -> pd.DataFrame:
    """One run's headline numbers, one row each: model, dataset, quantity, value.

    Mean accuracy over the benchmarks of every Table 1 row; the paired difference of every variant
    with its baseline, on that average; the area under the training-reward curve of every variant,
    and its paired difference with the baseline.
    """
    tables = Path(results_dir) / "tables"
    rows = []
    for row in _read(tables, "table1").itertuples():
        rows.append((row.model, row.datasets, f"{_ACCURACY}: {row.label}", row.average))
    paired = _read(tables, "paired")
    for row in paired[(paired["benchmark"] == "average") & (paired["dataset"] != "all")].itertuples():
        rows.append((row.model, row.dataset, f"{_PAIRED}: {row.label} − {row.baseline}", row.diff))
    for row in _read(tables, "learning_speed").itertuples():
        rows.append((row.model, row.dataset, f"{_AUC}: {row.label}", row.auc))
        if not pd.isna(row.auc_vs_baseline):
            rows.append((row.model, row.dataset, f"{_PAIRED_AUC}: {row.label}", row.auc_vs_baseline))
    return pd.DataFrame(rows, columns=["model", "dataset", "quantity", "value"])


def _t_interval(values, level: float, scale) -> tuple[float, float, float]:
    values = [float(value) for value in values]
    count = len(values)
    if count < 2:
        raise ValueError(f"an interval over runs needs at least 2 runs, got {count}")
    mean = sum(values) / count
    spread = math.sqrt(sum((value - mean) ** 2 for value in values) / (count - 1))
    half = student_t_quantile((1 + level) / 2, count - 1) * spread * scale(count)
    return mean, mean - half, mean + half


def prediction_interval(values, level: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high): where one more run's value should fall, given these runs' values."""
    return _t_interval(values, level, lambda count: math.sqrt(1 + 1 / count))


def mean_interval(values, level: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high): the confidence interval of the mean over runs (x̄ ± t · s/√K)."""
    return _t_interval(values, level, lambda count: math.sqrt(1 / count))


def spread_table(runs: dict[str, str | os.PathLike], level: float = 0.95,
                 check: tuple[str, str | os.PathLike] | None = None) -> pd.DataFrame:
    """Per headline number: each run's value, their mean with its interval, and the prediction interval.

    ``runs`` maps a name to a results folder. With three runs or more, ``left_out_inside`` says how
    many of them fall inside the interval the others give (a leave-one-out check of the interval).
    With ``check`` = (name, folder), that run's value and whether it lies inside the interval are
    added; it does not enter the interval. A number some run lacks (a variant it did not train) is
    left out: the runs must be of one study.
    """
    if len(runs) < 2:
        raise ValueError(f"give at least 2 runs to measure a spread, got {len(runs)}")
    named = dict(runs)
    if check is not None:
        if check[0] in named:
            raise ValueError(f"the checked run {check[0]!r} is also one of the runs")
        named[check[0]] = check[1]
    keys = ["model", "dataset", "quantity"]
    frames = []
    for name, folder in named.items():
        numbers = headline_numbers(folder)
        if numbers.duplicated(keys).any():
            raise ValueError(f"{folder}: a headline number appears twice")
        frames.append(numbers.rename(columns={"value": name}).set_index(keys))
    table = pd.concat(frames, axis=1, join="inner", sort=False)
    if table.empty:
        raise ValueError(f"the runs {', '.join(named)} share no headline number: are they of the same study?")
    # Both columns hold the mean of the runs, with the confidence interval of that mean and the
    # prediction interval for one more run as _low and _high (write_table shows "x [low, high]").
    for column, interval in (("mean", mean_interval), ("prediction", prediction_interval)):
        bounds = [interval(table.loc[key, list(runs)], level) for key in table.index]
        table[column] = [mean for mean, _, _ in bounds]
        table[f"{column}_low"] = [low for _, low, _ in bounds]
        table[f"{column}_high"] = [high for _, _, high in bounds]
    if len(runs) >= 3:
        # Each run in turn against the interval the others give: how often one more run fell inside.
        names = list(runs)
        counts = []
        for key in table.index:
            values = table.loc[key, names]
            counts.append(sum(_inside(values[name], values.drop(name), level) for name in names))
        table["left_out_inside"] = [f"{count}/{len(names)}" for count in counts]
    if check is not None:
        table["inside"] = [bool(low <= value <= high) for value, low, high in
                           zip(table[check[0]], table["prediction_low"], table["prediction_high"])]
    return table.reset_index()


def _inside(value: float, others, level: float) -> bool:
    _, low, high = prediction_interval(others, level)
    return bool(low <= value <= high)
