"""Multiplicity: Holm's step-down adjustment, and the step-down max-T over joint sign flips of the units
(Westfall & Young) for a family of seed-level comparisons that share their units."""

from __future__ import annotations

import math

import numpy as np

from grpo_lambda.signflip import MAX_EXACT_SEEDS, sign_subsets
from grpo_lambda.stats import check_level


def holm(p_values) -> np.ndarray:
    """Holm's step-down adjustment (family-wise error) of ``p_values``; NaN entries are left out of the
    family and stay NaN. (scipy offers Benjamini–Hochberg only; statsmodels would be a large
    dependency for these lines.)"""
    p = np.asarray(p_values, dtype=float)
    adjusted = np.full(p.shape, np.nan)
    present = np.flatnonzero(~np.isnan(p))
    order = present[np.argsort(p[present], kind="stable")]
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(order) - rank) * p[index]))
        adjusted[index] = running
    return adjusted


# Beyond MAX_EXACT_SEEDS units max-T draws this many sign vectors (and the identity), from a fixed seed.
MAX_T_DRAWS = 2 ** 16


def _sign_vectors(n: int) -> np.ndarray:
    """The sign vectors a joint sign-flip test runs over, the identity first: all 2^n for n up to
    MAX_EXACT_SEEDS, else the identity and MAX_T_DRAWS drawn with a fixed seed (so the same every run)."""
    if n <= MAX_EXACT_SEEDS:
        return np.vstack([np.ones(n), 1.0 - 2.0 * sign_subsets(n)])  # the subsets of seeds whose sign flips
    drawn = np.random.default_rng(0).choice([-1.0, 1.0], size=(MAX_T_DRAWS, n))
    return np.vstack([np.ones(n), drawn])


def max_t(values, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Westfall–Young step-down max-T over joint sign flips of the units (RL seeds, or SFT models), for a
    family of m comparisons with one value each per unit: ``values`` is (n units, m), e.g. each line's
    per-seed paired difference with the one baseline they share (NaN: that unit lacks the comparison,
    which then adds nothing to it).

    Each comparison's statistic is T_j = |Σ_s ε_s d_sj| / √(Σ_s d_sj²), the sign-flip form of |t| (the
    denominator does not change under a flip, and |t| is monotone in T_j). Under the joint null the vector
    of a unit's m differences is as likely as its negation, so every joint flip ε (one sign per unit, the
    same for every comparison: it keeps their dependence) is equally likely; the adjusted p of the k-th
    largest T is the share of flips whose maximum over that comparison and the less significant ones
    reaches it, made monotone (Westfall & Young 1993, Algorithm 2.8; strong control of the family-wise
    error under subset pivotality). Exact at up to MAX_EXACT_SEEDS units (all 2^n flips); above, from
    MAX_T_DRAWS flips drawn with a fixed seed. The smallest adjusted p is 2^(1−n) (a flip and its negation
    give the same T), whatever m: Holm over m sign-flip tests cannot go below m · 2^(1−n).

    Returns the adjusted p-values and the level each comparison faces at the first step: the chance under
    the flips that its own T exceeds the family's critical value (between α/m and α; 0 where it cannot).
    One comparison alone gets the two-sided sign-flip p (:func:`sign_flip_p`).
    """
    check_level(level)
    d = np.asarray(values, dtype=float)
    if d.ndim != 2:
        raise ValueError(f"max_t needs (units, comparisons) values, got shape {d.shape}")
    n, m = d.shape
    if m == 0:
        return np.zeros(0), np.zeros(0)
    d = np.where(np.isnan(d), 0.0, d)
    norms = np.sqrt((d ** 2).sum(axis=0))
    flips = _sign_vectors(n)
    with np.errstate(invalid="ignore", divide="ignore"):
        t = np.where(norms > 0, np.abs(flips @ d) / np.where(norms > 0, norms, 1.0), 0.0)  # (flips, m)
    observed = t[0]
    reaches = lambda sums, bound: sums >= bound - 1e-12 * max(1.0, bound)  # noqa: E731 (ties within rounding)
    order = np.argsort(-observed, kind="stable")
    adjusted = np.empty(m)
    running = np.zeros(len(flips))
    for k in range(m - 1, -1, -1):  # successive maxima, from the least significant comparison up
        running = np.maximum(running, t[:, order[k]])
        adjusted[k] = reaches(running, observed[order[k]]).mean()
    p = np.empty(m)
    p[order] = np.maximum.accumulate(adjusted)
    # The first step rejects comparison j when fewer than α·F flips' maxima reach T_j: T_j above the
    # ⌈α·F⌉-th largest maximum. The level j faces is the share of flips whose own T_j lies above it.
    largest = np.sort(t.max(axis=1))[::-1]
    critical = largest[int(math.ceil((1 - level) * len(flips))) - 1]
    faced = np.mean(t > critical + 1e-12 * max(1.0, critical), axis=0)
    return p, faced
