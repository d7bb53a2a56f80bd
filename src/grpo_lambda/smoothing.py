"""Training curves smoothed by one rule, so that the ``learning_speed`` table and the ``training_curves`` table the
figures draw agree."""

from __future__ import annotations

import numpy as np
import pandas as pd


def smooth(values, weight: float) -> np.ndarray:
    """Debiased exponential moving average: s_t = w·s_{t−1} + (1−w)·x_t, shown as s_t / (1 − w^n_t)
    where n_t counts the finite values so far; NaN values are skipped (the average carries over).
    That is pandas' ``ewm(alpha=1−w, adjust=True, ignore_na=True).mean()``."""
    if not 0 <= weight < 1:
        raise ValueError(f"weight must lie in [0, 1), got {weight}")
    series = pd.Series(np.asarray(values, dtype=float))
    return series.ewm(alpha=1.0 - weight, adjust=True, ignore_na=True).mean().to_numpy()


def smoothing_weight(setting, n_steps: int) -> float:
    """report.smoothing as an EMA weight: a number is used as is; "auto" gives
    w = 1 − 1/(1 + n_steps/50), an effective window of about 1 + n_steps/50 steps."""
    if setting == "auto":
        return 1.0 - 1.0 / (1.0 + n_steps / 50.0)
    return float(setting)
