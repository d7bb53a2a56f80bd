"""Seed-level intervals: one number per unit (a training-reward AUC gap, steps to a threshold: one per RL
seed, or per SFT model where a study draws several), the mean with the interval that inverts the exact
sign-flip test (grpo_lambda.signflip)."""

from __future__ import annotations

import math

import numpy as np

from grpo_lambda.signflip import MAX_EXACT_SEEDS, subset_means
from grpo_lambda.stats import NO_INTERVAL, Interval, check_level, t_interval


def cluster_means(values, seeds, clusters) -> tuple[np.ndarray, tuple]:
    """Per-seed values averaged within their clusters (the SFT model each RL seed started from, in the order
    clusters first appear; NaN values left out), and the clusters' names: the exchangeable units of a
    nested design, whose seed-level test flips the SFT models' means, not the seeds'."""
    values = np.asarray(values, dtype=float)
    if len(clusters) != len(values):
        raise ValueError(f"cluster_means: {len(values)} values but {len(clusters)} clusters (one per value)")
    names = tuple(dict.fromkeys(c for c, v in zip(clusters, values) if not np.isnan(v)))
    means = [float(np.mean([v for c, v in zip(clusters, values) if c == name and not np.isnan(v)]))
             for name in names]
    return np.array(means), names


def seed_interval(values, level: float = 0.95, seeds=None, clusters=None) -> Interval:
    """The seed-level procedure: the mean of per-seed values (a run's AUC, a per-seed paired difference)
    with the interval of the exact paired sign-flip test inverted (Hartigan 1969: the 2^n − 1 subset
    means cut the line into 2^n pieces of equal chance under symmetry, so [m_(k), m_(2^n − k)] with
    k = ⌊(1 − level)·2^(n−1)⌋ is the set of μ the equal-tailed test keeps). Its p-values are the same
    test's (:func:`sign_flip_p`), never below 2^(1−n). Where k = 0 (fewer than 6 seeds at 95%) no
    interval exists: low and high are ∓inf (the tables say "too few seeds"). Chosen over the t interval,
    a bootstrap and Hodges–Lehmann by simulation (docs/statistics.md, tests/test_seed_interval.py).
    ``se`` and ``df`` are the t statistic's (s/√n, n − 1), for the MDE. ``seeds`` names the values.
    ``clusters`` (one per value: the SFT model of each RL seed, in a nested design) makes the units the
    clusters' means (:func:`cluster_means`), named by cluster."""
    check_level(level)
    if clusters is not None:
        values, seeds = cluster_means(values, seeds, clusters)
    values = np.asarray(values, dtype=float)
    keep = ~np.isnan(values)
    names = None if seeds is None else tuple(s for s, k in zip(seeds, keep) if k)
    values = values[keep]
    if values.size == 0:
        return NO_INTERVAL
    mean = float(values.mean())
    if values.size == 1:
        return Interval(mean, float("nan"), float("nan"), values=(mean,), seeds=names)
    se = float(values.std(ddof=1) / math.sqrt(values.size))
    if np.all(values == 0):
        # identical arms (a check line that writes the baseline's runs): every sign pattern gives 0
        return Interval(0.0, 0.0, 0.0, 0.0, values.size - 1, tuple(values.tolist()), names)
    if values.size > MAX_EXACT_SEEDS:
        t = t_interval(values, level)
        return Interval(t.estimate, t.low, t.high, t.se, t.df, None, names)
    k = int(math.floor((1 - level) * 2 ** (values.size - 1) + 1e-9))
    if k == 0:
        low, high = -math.inf, math.inf
    else:
        means = subset_means(values)
        low, high = float(means[k - 1]), float(means[len(means) - k])
    return Interval(mean, low, high, se, values.size - 1, tuple(float(v) for v in values), names)
