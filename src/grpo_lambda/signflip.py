"""The exact paired sign-flip test of per-unit values (a seed's paired difference, an SFT model's mean effect):
under the null each unit's value is as likely as its negation, so the 2^n − 1 nonempty subsets of n units
whose signs flip give the exact distribution of the mean (Hartigan 1969). Its p-value is never below
2^(1−n). Used by the seed-level intervals (grpo_lambda.seed_level), by an interval read over SFT models
(grpo_lambda.stats) and by max-T (grpo_lambda.multiplicity)."""

from __future__ import annotations

import itertools
import math
from functools import lru_cache

import numpy as np
from scipy import special

# Beyond this many seeds the 2^n sign vectors are too many to list; the t interval is used instead (at
# 17 seeds and more the t interval's coverage is near nominal for the skewed cases simulated).
MAX_EXACT_SEEDS = 16
@lru_cache(maxsize=None)
def sign_subsets(n: int) -> np.ndarray:
    """Every nonempty subset of n seeds as a 0/1 matrix (2^n − 1, n)."""
    return np.array(list(itertools.product((0.0, 1.0), repeat=n))[1:])


def subset_means(values) -> np.ndarray:
    subsets = sign_subsets(len(values))
    return np.sort(subsets @ np.asarray(values, dtype=float) / subsets.sum(axis=1))


def _one_sided_p(values, mu: float, upper: bool) -> float:
    """Sign-flip p-value of H0 mean ≤ mu (``upper``: the alternative mean > mu) or mean ≥ mu: the share
    of the 2^n sign vectors (the identity included) whose flipped sum reaches the observed one."""
    means = subset_means(values)
    beyond = np.sum(means <= mu + 1e-12) if upper else np.sum(means >= mu - 1e-12)
    return float((1 + beyond) / 2 ** len(values))


def sign_flip_p(values) -> float:
    """Two-sided exact sign-flip p-value of mean = 0 for per-seed values: twice the smaller one-sided p,
    at most 1; the floor is 2^(1−n) (every seed on one side), never 0. NaN for no value."""
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        return float("nan")
    if values.size > MAX_EXACT_SEEDS:
        return _t_test(values)[0]
    if np.all(values == 0):
        return 1.0
    return min(1.0, 2 * min(_one_sided_p(values, 0.0, True), _one_sided_p(values, 0.0, False)))


def sign_flip_equivalence_p(values, margin: float) -> float:
    """TOST by two one-sided sign-flip tests: H0 mean ≤ −margin and H0 mean ≥ +margin; the larger p."""
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        return float("nan")
    if values.size > MAX_EXACT_SEEDS:
        return _t_test(values, margin)[1]
    return max(_one_sided_p(values, -margin, True), _one_sided_p(values, margin, False))


def _t_test(values: np.ndarray, margin: float = 0.0) -> tuple[float, float]:
    """The one-sample t test's two-sided p of mean 0 and its TOST p against ±``margin``, n − 1 df: the test
    beyond MAX_EXACT_SEEDS units, where the sign vectors are too many to list."""
    n = values.size
    mean, se = float(values.mean()), float(values.std(ddof=1) / math.sqrt(n))
    if se == 0:
        return (1.0 if mean == 0 else float("nan")), (0.0 if abs(mean) < margin else 1.0)
    p = float(2 * special.stdtr(n - 1, -abs(mean) / se))
    tost = max(float(special.stdtr(n - 1, -(mean + margin) / se)), float(special.stdtr(n - 1, (mean - margin) / se)))
    return p, tost
