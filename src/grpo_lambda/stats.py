"""Bootstrap intervals for benchmark accuracies, over problems and over training seeds.

Every number in the tables is a linear combination of cell means: one benchmark's accuracy, the
unweighted average over benchmarks, the mean over training datasets or over variants, the difference
between two methods. So one routine, :func:`bootstrap_linear`, serves them all:

    θ = Σ_j w_j · m_j,    m_j = Σ_s Σ_p c_jsp / #{observed (s, p)}

where term j is one run group (the seeds of one model × dataset × variant × step) on one benchmark,
``c_jsp`` ∈ {0, 1} is the verdict of seed s on problem p (NaN where not evaluated). A bootstrap
replicate draws multinomial counts u over the seeds of each run group and v over the problems of
each benchmark, and computes

    m_j* = Σ_s u_s Σ_p v_p c_jsp / Σ_s u_s Σ_p v_p o_jsp     (o = 1 where c is observed).

Terms that share a run group share u (the same trained models answer every benchmark); terms that
share a benchmark share v (every model answers the same problems), which makes a difference of two
methods a *paired* comparison over problems. Seeds of different run groups are drawn independently.
The interval is the percentile interval of the replicates.

Known limitation: with very few seeds (2 or 3), resampling seeds can only show part of the
between-seed spread (the bootstrap variance of a mean of S values is (S−1)/S of the plug-in one), so
with 2 seeds the intervals lean narrow on that component; the problem component is well covered.

Training curves are smoothed here too (:func:`smooth`, :func:`smoothing_weight`), so that the
``learning_speed`` table and the ``training_curves`` table the figures draw use one rule.
"""

from __future__ import annotations

import functools
import math
import zlib
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Term:
    """One cell mean in a linear statistic.

    ``correct`` is (n_seeds, n_problems), or (n_problems,) for a single seed: 1 = correct,
    0 = wrong, NaN = not evaluated. Columns of terms with the same ``problems`` key must be the same
    problems in the same order; rows of terms with the same ``seeds`` key the same runs.
    """

    weight: float
    correct: np.ndarray
    seeds: Hashable
    problems: Hashable


@dataclass(frozen=True)
class Interval:
    """A point estimate with its bootstrap percentile interval."""

    estimate: float
    low: float
    high: float

    def excludes(self, value: float = 0.0) -> bool:
        """Whether ``value`` lies outside the interval (e.g. a difference distinguishable from 0)."""
        return bool(self.low > value or self.high < value)


def _as_matrix(correct) -> np.ndarray:
    matrix = np.asarray(correct, dtype=float)
    if matrix.ndim == 1:
        matrix = matrix[None, :]
    if matrix.ndim != 2 or matrix.size == 0:
        raise ValueError(f"correct must be a non-empty (seeds, problems) array, got shape {matrix.shape}")
    return matrix


def _resample_counts(rng: np.random.Generator, size: int, n_boot: int) -> np.ndarray:
    """(n_boot, size) multinomial counts: how often each item is drawn in each replicate.

    Drawing indices and counting them is several times faster than ``rng.multinomial``.
    """
    draws = rng.integers(0, size, (n_boot, size)) + np.arange(n_boot)[:, None] * size
    return np.bincount(draws.ravel(), minlength=n_boot * size).reshape(n_boot, size).astype(float)


def _counts(seed: int, kind: str, key: Hashable, size: int, n_boot: int, cache: dict | None) -> np.ndarray:
    """The resampling counts of one run group (kind "seeds") or benchmark (kind "problems").

    Their generator is seeded by (seed, the key), so a key is resampled the same way in every
    statistic: the draws depend on nothing else, and caching them changes no result.
    """
    cache_key = (seed, kind, key, size, n_boot)
    if cache is not None and cache_key in cache:
        return cache[cache_key]
    rng = np.random.default_rng([seed, zlib.crc32(repr((kind, key)).encode())])
    counts = _resample_counts(rng, size, n_boot)
    if cache is not None:
        cache[cache_key] = counts
    return counts


def bootstrap_linear(
    terms: Sequence[Term], n_boot: int = 1000, level: float = 0.95, seed: int = 0, cache: dict | None = None
) -> Interval:
    """Estimate θ = Σ_j w_j m_j and its percentile interval (see the module docstring).

    n_boot = 0 returns the estimate with a NaN interval. ``cache`` (a dict kept by the caller)
    holds the resampling counts between calls: a pure speed-up, the intervals are the same.
    """
    if not terms:
        raise ValueError("terms is empty")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    if n_boot < 0:
        raise ValueError(f"n_boot must be >= 0, got {n_boot}")
    matrices = [_as_matrix(term.correct) for term in terms]
    weights = np.array([term.weight for term in terms], dtype=float)

    shapes: dict[tuple[str, Hashable], int] = {}
    for term, matrix in zip(terms, matrices):
        for kind, key, size in (("seeds", term.seeds, matrix.shape[0]), ("problems", term.problems, matrix.shape[1])):
            if shapes.setdefault((kind, key), size) != size:
                raise ValueError(f"terms sharing {kind} key {key!r} disagree on its size "
                                 f"({size} vs {shapes[(kind, key)]})")

    observed = [~np.isnan(matrix) for matrix in matrices]
    means = np.array([np.nanmean(matrix) if mask.any() else np.nan for matrix, mask in zip(matrices, observed)])
    estimate = float(weights @ means)
    if n_boot == 0 or np.isnan(estimate):
        return Interval(estimate, float("nan"), float("nan"))

    counts = {(kind, key): _counts(seed, kind, key, size, n_boot, cache) for (kind, key), size in shapes.items()}

    replicates = np.zeros(n_boot)
    for term, weight, matrix, mask in zip(terms, weights, matrices, observed):
        seed_counts = counts[("seeds", term.seeds)]          # (B, S)
        problem_counts = counts[("problems", term.problems)]  # (B, P)
        # Σ_s u_s Σ_p v_p c_sp, computed as rows of (S, P) @ (P, B) then weighted by u.
        numerator = np.einsum("bs,sb->b", seed_counts, np.where(mask, matrix, 0.0) @ problem_counts.T)
        denominator = np.einsum("bs,sb->b", seed_counts, mask.astype(float) @ problem_counts.T)
        with np.errstate(invalid="ignore", divide="ignore"):
            replicates += weight * numerator / denominator
    replicates = replicates[np.isfinite(replicates)]  # a draw that saw no observed entry of some term
    if replicates.size == 0:
        return Interval(estimate, float("nan"), float("nan"))
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(replicates, [alpha, 1.0 - alpha])
    return Interval(estimate, float(low), float(high))


def bootstrap_mean(correct, n_boot: int = 1000, level: float = 0.95, seed: int = 0) -> Interval:
    """Mean accuracy of one cell and its interval, resampling problems and (if several rows) seeds."""
    return bootstrap_linear([Term(1.0, correct, "seeds", "problems")], n_boot, level, seed)


def paired_difference(
    treatment, baseline, n_boot: int = 1000, level: float = 0.95, seed: int = 0
) -> Interval:
    """mean(treatment) − mean(baseline) over the same problems (columns aligned).

    Problems are resampled once for both arms (the comparison is paired); the seeds of each arm are
    resampled independently, since they are separate training runs.
    """
    terms = [Term(1.0, treatment, "treatment", "problems"), Term(-1.0, baseline, "baseline", "problems")]
    return bootstrap_linear(terms, n_boot, level, seed)


@functools.lru_cache(maxsize=None)
def student_t_quantile(probability: float, df: int) -> float:
    """The ``probability`` quantile of Student's t distribution with ``df`` degrees of freedom.

    No scipy here, so it is computed: with x = √df · tan θ the density becomes proportional to
    cos(θ)^(df−1) on (−π/2, π/2), bounded and smooth, whose cumulative integral (trapezoids on a fine
    grid) is inverted by interpolation. Accurate to about 1e-6 for the levels intervals use.
    """
    if not 0 < probability < 1:
        raise ValueError(f"probability must lie in (0, 1), got {probability}")
    if df < 1:
        raise ValueError(f"df must be at least 1, got {df}")
    if probability < 0.5:
        return -student_t_quantile(1 - probability, df)
    theta = np.linspace(0.0, np.pi / 2, 200_001)
    density = np.cos(theta) ** (df - 1)
    cumulative = np.concatenate([[0.0], np.cumsum((density[1:] + density[:-1]) / 2 * (theta[1] - theta[0]))])
    angle = np.interp((2 * probability - 1) * cumulative[-1], cumulative, theta)
    return float(np.sqrt(df) * np.tan(angle))


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of pass@k from ``n`` samples of which ``c`` are correct: the chance that
    ``k`` of them drawn without replacement hold a correct one, 1 - C(n-c, k) / C(n, k) (Chen et al.
    2021, "Evaluating Large Language Models Trained on Code", Eq. 1)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def majority_correct(answers: list, correct: list) -> float:
    """maj@k of one problem: the verdict of the most frequent extracted answer among its samples (ties
    go to the answer seen first; samples without an answer do not vote; 0 when none has one)."""
    counts: dict = {}
    for answer, verdict in zip(answers, correct):
        if answer is None or answer == "" or (isinstance(answer, float) and math.isnan(answer)):
            continue
        count, first_verdict = counts.get(answer, (0, verdict))
        counts[answer] = (count + 1, first_verdict)
    if not counts:
        return 0.0
    best = max(counts.values(), key=lambda entry: entry[0])  # max keeps the first of equal counts
    return float(best[1])


def smooth(values, weight: float) -> np.ndarray:
    """Debiased exponential moving average: s_t = w·s_{t−1} + (1−w)·x_t, shown as s_t / (1 − w^n_t)
    where n_t counts the finite values so far; NaN values are skipped (the average carries over)."""
    values = np.asarray(values, dtype=float)
    if not 0 <= weight < 1:
        raise ValueError(f"weight must lie in [0, 1), got {weight}")
    out = np.full(values.shape, np.nan)
    state, seen = 0.0, 0
    for i, x in enumerate(values):
        if np.isfinite(x):
            state = weight * state + (1 - weight) * x
            seen += 1
        if seen:
            out[i] = state / (1 - weight ** seen)
    return out


def smoothing_weight(setting, n_steps: int) -> float:
    """report.smoothing as an EMA weight: a number is used as is; "auto" gives
    w = 1 − 1/(1 + n_steps/50), an effective window of about 1 + n_steps/50 steps."""
    if setting == "auto":
        return 1.0 - 1.0 / (1.0 + n_steps / 50.0)
    return float(setting)
