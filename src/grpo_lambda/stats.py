"""Intervals, p-values and detectable effects for every number in the tables: analytic, deterministic,
paired by training seed and by problem.

Every accuracy in the tables is a linear combination of cell means: one benchmark's accuracy, the
unweighted average over benchmarks, the mean over training sets or variants, the difference between two
methods, a factorial effect. So one routine, :func:`linear_interval`, serves them all:

    θ = Σ_j w_j · m_j,    m_j = Σ_{(s, p) observed} c_jsp / #{observed (s, p)}

where term j is one run group (the seeds of one model × training set × variant × step) on one
benchmark and ``c_jsp`` is the verdict of seed s on problem p (1 right, 0 wrong, a fraction for avg@k,
NaN where not evaluated).

What is paired. A row of a term is a training run, named by (its ``seeds`` key, its seed): rows with
the same name in different terms are the same draw. The tables give every RL run of one SFT model the
``seeds`` key of that SFT model, so the runs of two variants with the same training seed (same SFT
model, same seed, same prompts in the same order) are one row: their difference is paired by seed. A
column is a problem, named by (the ``problems`` key, its position): every term on one benchmark shares
its problems, so differences are paired by problem too. Runs of other SFT models (another training
set) are independent rows; the SFT model itself is one fixed row (the intervals are conditional on it).

The variance: two-way cluster-robust, by seed and by problem (Cameron, Gelbach & Miller 2011,
"Robust inference with multiway clustering"), with the small-sample form of the crossed random-effects
ANOVA. Write θ̂ − θ ≈ Σ_gh U_gh, U_gh the summed scores a_j·(c_jgh − m_j) (a_j = w_j / #observed) of
seed row g and problem column h. Rows fall in strata r (one per ``seeds`` key: within one the seeds are
exchangeable draws; different keys are independent), columns in strata b (one per benchmark). Then

    V = Σ_r G_r/(G_r−1) Σ_{g∈r} (R_g − R̄_r)²                      seeds   (R_g = Σ_h U_gh)
      + Σ_b H_b/(H_b−1) Σ_{h∈b} (C_h − C̄_b)²                      problems (C_h = Σ_g U_gh)
      − Σ_rb G_r H_b/((G_r−1)(H_b−1)) Σ_{g∈r,h∈b} E_gh²           seed × problem, counted twice above

with E the doubly centred U of the block (r, b). For a complete crossed layout with seed, problem and
interaction effects this is exactly unbiased (the ANOVA estimator (MS_seed + MS_problem − MS_error)/SP);
the plain CGM intersection term (raw U_gh²) would also subtract part of the problem variance, about
1/S of it. A stratum of one seed (a single run, the SFT model) has no seed term: its interval is over
problems alone. A stratum whose spread is no larger than the seed × problem part it holds (its own
variance estimated at or below zero, e.g. two arms whose seeds move them alike) is left out, the
interaction then counted once through the other side: the truncated ANOVA estimator, V ≥ 0. The seeds
still decided V, so their spread still counts in its degrees of freedom: ν's denominator keeps the left-out
stratum's term V_r²/(G_r − 1) and its blocks' V_rb²/((G_r − 1)(H_b − 1)), as it would have held them kept
(so ν does not jump at the truncation). Then ν ≤ (G_r − 1)·(V/V_r)²: the seeds' own df where their
spread is as large as V. Without it ν is the problems' H_b − 1 alone, a thousand at a thousand problems,
whatever the seeds showed: the horizon run's 14-column TOST p was 1.4e-31 from 8 seeds at df 1,393 (36 df,
2e-14, with the seeds' term). Seeds that answer alike (spread and seed × problem part both 0) leave
nothing out.

Nested draws. A study with several SFT models per condition (``sft.seeds``) runs its RL seeds nested in
them: seed s starts from one SFT model k(s), and what a reader wants to know is the method's effect over
SFT models, not on the few it happened to get. The tables then give each RL row the cluster (stratum,
k(s)) (``Term.clusters``) and the SFT model's own row the same cluster, and the statistic is read over
the SFT models (:func:`_sft_level`; Cameron & Miller 2015, "A practitioner's guide to cluster-robust
inference", §IV: cluster at the coarsest level). R_g above is summed over the rows of a cluster, and

    V = Σ_r max(V_r, F_r) + Σ_b max(0, V_b − Σ_r V_rb),      ν = Welch–Satterthwaite over the V_r alone (K_r − 1 each)

V_r is the spread of the K_r SFT models' totals, which holds their RL seeds' spread and the seed × problem
noise too; it is never left out, however closely the SFT models agree, and never below F_r = Σ_k n_k s²_w,
what the RL seeds' spread within the SFT models implies for the totals were the SFT models all alike. The
problems add what V_r does not hold. ν counts the SFT models only: K − 1 for one stratum, t_{0.975, 2} =
4.30 at three, the honest price of asking about SFT models one has three of. Why: the crossed rule above
left a stratum estimated at or below zero out of V but kept its term in ν, so three SFT models that
happened to agree bought df 5–10 and an interval that covered 0.29–0.80 in simulated studies where that
happened, and Holm over four null horizons rejected in 9–11% of worlds. This rule covers ≥ 0.94 in every
simulated world at 3 and 8 SFT models (0.95–0.98 at eight; at three conservative, 0.99), ≥ 0.95 where the
stratum looked empty, and Holm over four null horizons stays under 5% (tests/test_nested_intervals.py).
Where the statistic is a contrast within one stratum, each SFT model's own estimate is kept
(``Interval.sft_means``) and its p-values are the larger of the t test's and the exact sign-flip test's
over the K SFT models (:meth:`Interval.p_value`); below six SFT models that test's floor 2^(1−K) is not
below 0.05 and the t test's normality of K means cannot be checked, so no verdict is read
(:data:`MIN_NORMAL_UNITS`, ``Interval.p_floor``). Without ``sft.seeds`` every row is its own cluster and
the intervals are conditional on the one SFT model per condition; the tables say so.

The interval is θ̂ ± t_{ν}·√V with ν from Welch–Satterthwaite over the components (each seed stratum
has G_r − 1 degrees of freedom, each benchmark H_b − 1, each block their product): ν ≈ S − 1 when the
spread between seeds dominates (four seeds: t = 3.18, not 1.96), large when problems dominate. Why this
and not a bootstrap: resampling 4 seeds shows (S−1)/S of their variance and a percentile interval
over them covers about 80% at a nominal 95% (a t interval is needed at 4–8 seeds); the analytic form
is deterministic (no replicate noise moves a verdict) and instant. Coverage is tested by simulation
(tests/test_stats.py): seed-level t intervals at n = 4, and the accuracy-difference interval under a
crossed random-effects model with binary outcomes at 4 and 8 seeds.

Seed-level quantities (a training-reward AUC, steps to a threshold: one number per run) are terms of one
column: V is then s²/n of the (paired) per-seed values and ν = n − 1, the textbook t interval
(:func:`t_interval`).

The p-value of θ = 0 is the two-sided t test of the same statistic, the equivalence p-value the two
one-sided tests (TOST) against ±margin, and the minimum detectable effect at 80% power (two-sided 5%)
is (t_{ν, 0.975} + t_{ν, 0.80}) · √V.

Training curves are smoothed here too (:func:`smooth`, :func:`smoothing_weight`), so that the
``learning_speed`` table and the ``training_curves`` table the figures draw use one rule.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Sequence
from functools import lru_cache
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import special


@dataclass(frozen=True)
class Term:
    """One cell mean in a linear statistic.

    ``correct`` is (n_seeds, n_problems), or (n_problems,) for a single seed: 1 = correct, 0 = wrong,
    NaN = not evaluated. Columns of terms with the same ``problems`` key must be the same problems in the
    same order. ``rows`` names the seeds (default 0, 1, ...): a row is the same run in every term with
    the same ``seeds`` key and row name (paired), and independent of every other row.

    ``clusters``, where set, names each row's draw one level up, as a (stratum, cluster) pair: the SFT
    model an RL run started from, in a study with several SFT models per condition. Rows of one cluster
    (in any term) are summed before the spread is taken, so the interval is over the clusters of each
    stratum (the SFT models), which holds the spread of the RL seeds within them too (module docstring,
    "Nested draws").
    """

    weight: float
    correct: np.ndarray
    seeds: Hashable
    problems: Hashable
    rows: tuple | None = field(default=None)
    clusters: tuple | None = field(default=None)


@dataclass(frozen=True)
class Interval:
    """A point estimate, its interval, standard error and degrees of freedom (``df``).

    ``values``, where set, are the per-seed values a seed-level interval was computed from (one per
    seed, in seed order: ``seeds`` names them): its p-values are then the exact sign-flip test's
    (:func:`seed_interval`), not the t test's.

    ``sft_units`` (K), where above 0, says the interval was read over K SFT models (module docstring, "Nested
    draws": df K − 1, the SFT stratum never dropped); ``sft_means``, where the statistic is a contrast within
    one stratum, are the K SFT models' own estimates, and the p-values are then the larger of the t test's and
    the exact sign-flip test's over them (:meth:`t_p`, :meth:`exact_p`). Below :data:`MIN_NORMAL_UNITS` SFT
    models (or with no exact test at all at K ≤ 16 and K below it) the floor is 2^(1−K): no verdict."""

    estimate: float
    low: float
    high: float
    se: float = float("nan")
    df: float = float("inf")
    values: tuple | None = field(default=None)
    seeds: tuple | None = field(default=None)
    sft_units: int = 0
    sft_means: tuple | None = field(default=None)

    def excludes(self, value: float = 0.0) -> bool:
        """Whether ``value`` lies outside the interval (e.g. a difference distinguishable from 0)."""
        return bool(self.low > value or self.high < value)

    def p_value(self) -> float:
        """Two-sided p-value of θ = 0: the exact sign-flip test for per-seed values, else the t test; NaN
        without a standard error. A zero standard error never gives 0: the sign-flip test's floor is
        2^(1−n); for a t statistic an exact 0 estimate (a check line) gives 1 and a nonzero one NaN (no
        test, so no verdict)."""
        if math.isnan(self.se) or math.isnan(self.estimate):
            return float("nan")
        if self.values is not None:
            return sign_flip_p(self.values)
        exact = self.exact_p()
        return self.t_p() if math.isnan(exact) else max(self.t_p(), exact)

    def t_p(self) -> float:
        """The two-sided t test's p of θ = 0 at this standard error and df (NaN without one)."""
        if math.isnan(self.se) or math.isnan(self.estimate):
            return float("nan")
        if self.se == 0:
            return 1.0 if self.estimate == 0 else float("nan")
        return float(2 * t_sf(abs(self.estimate) / self.se, self.df))

    def exact_p(self) -> float:
        """The exact sign-flip p over the SFT models' own estimates (``sft_means``), NaN where there are none."""
        return float("nan") if self.sft_means is None else sign_flip_p(self.sft_means)

    def equivalence_p(self, margin: float) -> float:
        """p-value of |θ| ≥ margin by two one-sided tests (TOST; sign-flip for per-seed values, else t):
        small means |θ| < margin."""
        if math.isnan(self.se) or math.isnan(self.estimate):
            return float("nan")
        if self.values is not None:
            return sign_flip_equivalence_p(self.values, margin)
        if self.se == 0:
            t_p = 0.0 if abs(self.estimate) < margin else 1.0
        else:
            above = t_sf((self.estimate + margin) / self.se, self.df)    # H0: θ ≤ −margin
            below = t_sf(-(self.estimate - margin) / self.se, self.df)  # H0: θ ≥ +margin
            t_p = float(max(above, below))
        if self.sft_means is not None:
            return max(t_p, sign_flip_equivalence_p(self.sft_means, margin))
        return t_p

    def p_floor(self) -> float:
        """The smallest two-sided p-value the test can give: 2^(1−n) for the sign-flip test of n seeds,
        0 for a t test; 2^(1−K) read over K SFT models where the exact test backs the t test or K is below
        :data:`MIN_NORMAL_UNITS` (no verdict then). A family of m tests can reject nothing when m · p_floor ≥ α
        (too few seeds or SFT models)."""
        if self.values is not None:
            return 2.0 ** (1 - len(self.values)) if self.values else 1.0
        if self.sft_units and self.sft_units <= MAX_EXACT_SEEDS and (
                self.sft_means is not None or self.sft_units < MIN_NORMAL_UNITS):
            return 2.0 ** (1 - self.sft_units)
        return 0.0

    def mde(self, alpha: float = 0.05, power: float = 0.8) -> float:
        """The smallest |θ| a two-sided level-``alpha`` test detects with probability ``power``, at this
        standard error (:func:`minimum_detectable_effect`, with this test's floor). The tables call it with
        the level the comparison faces in its family, α/m (grpo_lambda.tables.verdicts)."""
        return minimum_detectable_effect(self.se, self.df, alpha, power, self.p_floor())


def minimum_detectable_effect(se: float, df: float, alpha: float = 0.05, power: float = 0.8,
                              p_floor: float = 0.0) -> float:
    """(t_{df, 1 − alpha/2} + t_{df, power}) · se: the smallest |θ| a two-sided level-``alpha`` test detects
    with probability ``power`` (for per-seed values the t approximation of the sign-flip test); infinite
    where the test's smallest p (``p_floor``, 2^(1−n) for n seeds) is not below ``alpha``; NaN without se."""
    if se is None or df is None or math.isnan(se) or math.isnan(df):
        return float("nan")
    if p_floor is not None and not math.isnan(p_floor) and p_floor >= alpha:
        return float("inf")
    return float((student_t_quantile(1 - alpha / 2, df) + student_t_quantile(power, df)) * se)


def student_t_quantile(probability: float, df: float) -> float:
    """Student's t quantile: scipy's ``t.ppf`` (its ufunc ``special.stdtrit``, 100× faster to call)."""
    return float(special.stdtrit(df, probability))


def t_sf(x: float, df: float) -> float:
    """Student's t survival function P(T > x): scipy's ``t.sf`` (``special.stdtr``)."""
    return float(special.stdtr(df, -x))


NO_INTERVAL = Interval(float("nan"), float("nan"), float("nan"))


def _as_matrix(correct) -> np.ndarray:
    matrix = np.asarray(correct, dtype=float)
    if matrix.ndim == 1:
        matrix = matrix[None, :]
    if matrix.ndim != 2 or matrix.size == 0:
        raise ValueError(f"correct must be a non-empty (seeds, problems) array, got shape {matrix.shape}")
    return matrix


def _check_level(level: float) -> None:
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")


def linear_interval(terms: Sequence[Term], level: float = 0.95) -> Interval:
    """θ = Σ_j w_j m_j with its two-way (seed, problem) cluster-robust t interval (module docstring)."""
    if not terms:
        raise ValueError("terms is empty")
    _check_level(level)
    matrices = [_as_matrix(term.correct) for term in terms]
    row_index: dict[tuple, int] = {}       # (seeds key, row name) -> global row
    column_index: dict[Hashable, int] = {}  # problems key -> first global column
    widths: dict[Hashable, int] = {}
    cluster_of: dict[int, tuple] = {}       # global row -> (stratum, cluster): the draw it belongs to
    placed = []
    for term, matrix in zip(terms, matrices):
        names = tuple(range(matrix.shape[0])) if term.rows is None else tuple(term.rows)
        if len(names) != matrix.shape[0] or len(set(names)) != len(names):
            raise ValueError(f"rows {names!r} do not name the {matrix.shape[0]} rows of a term once each")
        if widths.setdefault(term.problems, matrix.shape[1]) != matrix.shape[1]:
            raise ValueError(f"terms sharing problems key {term.problems!r} disagree on its size "
                             f"({matrix.shape[1]} vs {widths[term.problems]})")
        if term.problems not in column_index:
            column_index[term.problems] = sum(widths.values()) - matrix.shape[1]
        if term.clusters is not None and len(term.clusters) != len(names):
            raise ValueError(f"clusters {term.clusters!r} do not name the {len(names)} rows of a term once each")
        rows = [row_index.setdefault((term.seeds, name), len(row_index)) for name in names]
        for row, name, cluster in zip(rows, names, term.clusters or [None] * len(names)):
            drawn = (term.seeds, ("row", name)) if cluster is None else tuple(cluster)
            if cluster_of.setdefault(row, drawn) != drawn:
                raise ValueError(f"row {name!r} of seeds key {term.seeds!r} is in two clusters: "
                                 f"{cluster_of[row]!r} and {drawn!r}")
        placed.append((rows, column_index[term.problems]))

    n_rows, n_columns = len(row_index), sum(widths.values())
    scores = np.zeros((n_rows, n_columns))
    totals = np.zeros((n_rows, n_columns))  # Σ a_j c: identical arms cancel cell by cell, exactly
    for term, matrix, (rows, start) in zip(terms, matrices, placed):
        observed = ~np.isnan(matrix)
        if not observed.any():
            return NO_INTERVAL
        scale = term.weight / observed.sum()
        mean = matrix[observed].mean()
        block = np.ix_(rows, range(start, start + matrix.shape[1]))
        totals[block] += np.where(observed, scale * matrix, 0.0)
        scores[block] += np.where(observed, scale * matrix - scale * mean, 0.0)
    estimate = float(totals.sum())

    # The rows' scores summed per cluster (a row that is its own cluster stays as it is); strata of clusters.
    clusters = list(dict.fromkeys(cluster_of[row] for row in range(n_rows)))
    cluster_index = {cluster: c for c, cluster in enumerate(clusters)}
    summed = np.zeros((len(clusters), n_columns))
    np.add.at(summed, [cluster_index[cluster_of[row]] for row in range(n_rows)], scores)
    row_keys = list(dict.fromkeys(stratum for stratum, _ in clusters))
    row_strata = [np.array([c for c, (stratum, _) in enumerate(clusters) if stratum == k]) for k in row_keys]
    column_strata = [np.arange(start, start + widths[key]) for key, start in column_index.items()]
    columns_of = list(column_index)
    blocks = {(row_keys.index(cluster_of[row][0]), columns_of.index(term.problems))
              for term, (rows, _) in zip(terms, placed) for row in rows}
    # Nested draws: some row's cluster is not the row itself (a default's or a caller's own-row cluster).
    if any(cluster_of[row] != (seeds_key, ("row", name)) for (seeds_key, name), row in row_index.items()) \
            and any(len(rows) > 1 for rows in row_strata):
        row_totals = scores.sum(axis=1)
        within = [(cluster_index[cluster_of[row]], seeds_key, float(row_totals[row]))
                  for (seeds_key, _), row in row_index.items()]
        means = _cluster_estimates(terms, matrices, placed, cluster_of, clusters) if len(row_strata) == 1 else None
        return _sft_level(estimate, summed, row_strata, column_strata, blocks, within, means, clusters, level)
    components, left_out = _components(summed, row_strata, column_strata, blocks)
    return _t_from(estimate, sum(c * v for v, _, c in components), components, level, left_out)


def _sft_level(estimate: float, summed: np.ndarray, row_strata: list[np.ndarray], column_strata: list[np.ndarray],
               blocks: set[tuple[int, int]], within: list[tuple], means: np.ndarray | None, clusters: list,
               level: float) -> Interval:
    """The interval of a statistic read over SFT models (module docstring, "Nested draws"): each stratum's
    SFT-level variance V_r (the spread of its K_r SFT models' summed scores, which holds their RL seeds'
    spread and the seed × problem noise as well) is always kept, never truncated, and never taken below what
    the RL seeds' spread within the SFT models implies for it alone (:func:`_within_floor`): SFT models that
    agree more closely than their own RL seeds allow buy no narrower interval. The problems add their own
    part beyond the SFT × problem part V_r already holds (V_b − Σ_r V_rb, where positive). The df are
    Welch–Satterthwaite's over the strata's K_r − 1 alone (K − 1 for one stratum), never the problems' nor
    the RL seeds'. ``within``: (cluster, seeds key, row total) of every row; ``means``: each SFT model's own
    estimate (:func:`_cluster_estimates`) for the exact test, where the statistic is a contrast within one
    stratum."""
    sft_parts, sft_df = [], []
    for rows in row_strata:
        if len(rows) > 1:
            sft_parts.append(max(_spread(summed[rows].sum(axis=1)), _within_floor(within, set(rows.tolist()))))
            sft_df.append(len(rows) - 1)
    problems = 0.0
    for b, columns in enumerate(column_strata):
        if len(columns) < 2:
            continue
        crossed = 0.0
        for r, rows in enumerate(row_strata):
            if (r, b) in blocks and len(rows) > 1:
                block = summed[np.ix_(rows, columns)]
                residual = block - block.mean(axis=1, keepdims=True) - block.mean(axis=0, keepdims=True) + block.mean()
                g, h = block.shape
                crossed += g * h / ((g - 1) * (h - 1)) * float((residual ** 2).sum())
        problems += max(0.0, _spread(summed[:, columns].sum(axis=0)) - crossed)
    units = min(len(rows) for rows in row_strata if len(rows) > 1)
    names = tuple(cluster for _, cluster in clusters)
    sft_means = None if means is None else tuple(float(v) for v in means)
    variance = sum(sft_parts) + problems
    spread = sum(v * v / df for v, df in zip(sft_parts, sft_df))
    df = sum(sft_parts) ** 2 / spread if spread > 0 else float(sum(sft_df))
    if variance <= 0:
        return Interval(estimate, estimate, estimate, 0.0, df, sft_units=units, sft_means=sft_means, seeds=names)
    half = student_t_quantile((1 + level) / 2, df) * math.sqrt(variance)
    return Interval(estimate, estimate - half, estimate + half, math.sqrt(variance), df, sft_units=units,
                    sft_means=sft_means, seeds=names)


def _within_floor(within: list[tuple], members: set[int]) -> float:
    """Σ_k n_k · s²_w: the variance of the SFT models' summed scores were they all alike, from the spread of
    the row totals of the RL seeds within each SFT model (pooled over the SFT models, one pool per seeds key:
    the SFT model's own row, one per SFT model, adds nothing). 0 where no SFT model has two RL seeds."""
    groups: dict[tuple, list[float]] = {}
    for cluster, seeds_key, total in within:
        if cluster in members:
            groups.setdefault((seeds_key, cluster), []).append(total)
    pooled: dict = {}  # seeds key -> [Σ squares about each SFT model's mean, their df, rows]
    for (seeds_key, _), totals in groups.items():
        entry = pooled.setdefault(seeds_key, [0.0, 0, 0])
        entry[0] += float(((np.asarray(totals) - np.mean(totals)) ** 2).sum())
        entry[1] += len(totals) - 1
        entry[2] += len(totals)
    return sum(squares / df * rows for squares, df, rows in pooled.values() if df > 0)


def _cluster_estimates(terms: Sequence[Term], matrices: list[np.ndarray], placed: list, cluster_of: dict,
                       clusters: list) -> np.ndarray | None:
    """Each SFT model's own estimate of a contrast (Σ_j w_j · the mean of term j over that SFT model's rows):
    the units of the exact sign-flip test over SFT models. None where the weights do not sum to 0 (a level,
    not a contrast: no test of 0 to back) or a term has no observed row in some SFT model."""
    if abs(sum(term.weight for term in terms)) > 1e-9:
        return None
    estimates = np.zeros(len(clusters))
    for term, matrix, (rows, _) in zip(terms, matrices, placed):
        for k, cluster in enumerate(clusters):
            mine = [i for i, row in enumerate(rows) if cluster_of[row] == cluster]
            observed = matrix[mine][~np.isnan(matrix[mine])] if mine else np.zeros(0)
            if observed.size == 0:
                return None
            estimates[k] += term.weight * float(observed.mean())
    return estimates


def _components(scores: np.ndarray, row_strata: list[np.ndarray], column_strata: list[np.ndarray],
                blocks: set[tuple[int, int]]) -> tuple[list[tuple[float, int, float]], float]:
    """The variance components of the module docstring as (variance, degrees of freedom, coefficient), and
    the Welch–Satterthwaite terms v²/df of the seed strata that were left out and of their blocks, which
    the df still count (module docstring).

    Each seed stratum r gives V_r (its seeds' spread), each benchmark b V_b (its problems' spread), each
    block (r, b) of terms V_rb (the seed × problem part, which V_r and V_b both hold). A stratum whose
    spread is no larger than the seed × problem parts it holds has its own variance estimated at or
    below zero; it is left out (the truncated ANOVA estimator), and the blocks it shares count once
    through the other side, or on their own when both sides are left out. A stratum that shares a
    block with a one-seed stratum or a one-column benchmark is kept: there its seed × problem part
    cannot be told apart.
    """
    seeds = {r: (_spread(scores[rows].sum(axis=1)), len(rows) - 1)
             for r, rows in enumerate(row_strata) if len(rows) > 1}
    problems = {b: (_spread(scores[:, columns].sum(axis=0)), len(columns) - 1)
                for b, columns in enumerate(column_strata) if len(columns) > 1}
    crossed = {}
    for r, b in blocks:
        if r in seeds and b in problems:
            block = scores[np.ix_(row_strata[r], column_strata[b])]
            residual = block - block.mean(axis=1, keepdims=True) - block.mean(axis=0, keepdims=True) + block.mean()
            g, h = block.shape
            crossed[(r, b)] = (g * h / ((g - 1) * (h - 1)) * float((residual ** 2).sum()), (g - 1) * (h - 1))
    kept_seeds = {r for r in seeds if any(b not in problems for rr, b in blocks if rr == r)
                  or seeds[r][0] > sum(v for (rr, _), (v, _) in crossed.items() if rr == r)}
    kept_problems = {b for b in problems if any(r not in seeds for r, bb in blocks if bb == b)
                     or problems[b][0] > sum(v for (_, bb), (v, _) in crossed.items() if bb == b)}
    components = [(*seeds[r], 1.0) for r in sorted(kept_seeds)] + [(*problems[b], 1.0) for b in sorted(kept_problems)]
    for (r, b), (variance, df) in crossed.items():
        coefficient = 1.0 - (r in kept_seeds) - (b in kept_problems)
        if coefficient:
            components.append((variance, df, coefficient))
    # The df still count a left-out seed stratum and its blocks (coefficient 0 above), as when it is kept.
    truncated = set(seeds) - kept_seeds
    left_out = sum(seeds[r][0] ** 2 / seeds[r][1] for r in truncated)
    left_out += sum(v * v / df for (r, b), (v, df) in crossed.items() if r in truncated and b in kept_problems)
    return components, left_out


def _spread(totals: np.ndarray) -> float:
    """n/(n−1) Σ (x − x̄)²: n times the unbiased variance of the n exchangeable totals."""
    return len(totals) / (len(totals) - 1) * float(((totals - totals.mean()) ** 2).sum())


def _t_from(estimate: float, variance: float, components: list[tuple[float, int, float]], level: float,
            left_out: float = 0.0) -> Interval:
    """The t interval at ``variance`` with Welch–Satterthwaite degrees of freedom over ``components`` and
    the terms ``left_out`` (Σ v²/df of truncated seed strata and their blocks) that decided the variance."""
    if variance <= 0 or not components:
        return Interval(estimate, estimate, estimate, 0.0, float("inf")) if components else \
            Interval(estimate, float("nan"), float("nan"))
    spread = sum((c * v) ** 2 / df for v, df, c in components if v > 0) + left_out
    df = variance * variance / spread if spread > 0 else float("inf")
    half = student_t_quantile((1 + level) / 2, df) * math.sqrt(variance)
    return Interval(estimate, estimate - half, estimate + half, math.sqrt(variance), df)


def mean_interval(correct, level: float = 0.95) -> Interval:
    """Mean accuracy of one cell (seeds × problems) and its interval over problems and seeds."""
    return linear_interval([Term(1.0, correct, "seeds", "problems")], level)


def paired_difference(treatment, baseline, level: float = 0.95) -> Interval:
    """mean(treatment) − mean(baseline): row i of both is the same training seed, column j the same
    problem, so the difference is paired by seed and by problem."""
    treatment, baseline = _as_matrix(treatment), _as_matrix(baseline)
    terms = [Term(1.0, treatment, "runs", "problems"), Term(-1.0, baseline, "runs", "problems")]
    return linear_interval(terms, level)


def t_interval(values, level: float = 0.95) -> Interval:
    """Mean of independent per-seed values (e.g. paired per-seed differences) with its t interval:
    x̄ ± t_{n−1} · s/√n. One value gives the estimate without an interval."""
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    if values.size == 0:
        return NO_INTERVAL
    return linear_interval([Term(1.0, values[:, None], "seeds", "value")], level)


# Beyond this many seeds the 2^n sign vectors are too many to list; the t interval is used instead (at
# 17 seeds and more the t interval's coverage is near nominal for the skewed cases simulated).
MAX_EXACT_SEEDS = 16
# The fewest SFT models at which a verdict read over them can stand: below, the exact sign-flip test's floor
# 2^(1−K) is not below 0.05 and the t test's normality of K means cannot be checked (Interval.p_floor).
MIN_NORMAL_UNITS = 6


@lru_cache(maxsize=None)
def _subsets(n: int) -> np.ndarray:
    """Every nonempty subset of n seeds as a 0/1 matrix (2^n − 1, n)."""
    return np.array(list(itertools.product((0.0, 1.0), repeat=n))[1:])


def _subset_means(values) -> np.ndarray:
    subsets = _subsets(len(values))
    return np.sort(subsets @ np.asarray(values, dtype=float) / subsets.sum(axis=1))


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
    _check_level(level)
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
        means = _subset_means(values)
        low, high = float(means[k - 1]), float(means[len(means) - k])
    return Interval(mean, low, high, se, values.size - 1, tuple(float(v) for v in values), names)


def _one_sided_p(values, mu: float, upper: bool) -> float:
    """Sign-flip p-value of H0 mean ≤ mu (``upper``: the alternative mean > mu) or mean ≥ mu: the share
    of the 2^n sign vectors (the identity included) whose flipped sum reaches the observed one."""
    means = _subset_means(values)
    beyond = np.sum(means <= mu + 1e-12) if upper else np.sum(means >= mu - 1e-12)
    return float((1 + beyond) / 2 ** len(values))


def sign_flip_p(values) -> float:
    """Two-sided exact sign-flip p-value of mean = 0 for per-seed values: twice the smaller one-sided p,
    at most 1; the floor is 2^(1−n) (every seed on one side), never 0. NaN for no value."""
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        return float("nan")
    if values.size > MAX_EXACT_SEEDS:
        return t_interval(values).p_value()
    if np.all(values == 0):
        return 1.0
    return min(1.0, 2 * min(_one_sided_p(values, 0.0, True), _one_sided_p(values, 0.0, False)))


def sign_flip_equivalence_p(values, margin: float) -> float:
    """TOST by two one-sided sign-flip tests: H0 mean ≤ −margin and H0 mean ≥ +margin; the larger p."""
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        return float("nan")
    if values.size > MAX_EXACT_SEEDS:
        return t_interval(values).equivalence_p(margin)
    return max(_one_sided_p(values, -margin, True), _one_sided_p(values, margin, False))


def proportion_interval(interval: Interval, observations: int, level: float = 0.95) -> Interval:
    """An accuracy's interval kept inside [0, 1]: the Wilson score form at the effective sample size the
    cluster variance implies, n_eff = p̂(1 − p̂)/se² (at most ``observations``; all of them where p̂ is 0
    or 1, whose se is 0), with the t quantile of the interval's df. It equals the Wald form x̂ ± t·se to
    first order away from the bounds and never leaves [0, 1] (a Wald interval at 0.99 with se 0.007
    reaches 1.004)."""
    p, se = interval.estimate, interval.se
    if math.isnan(p) or math.isnan(se) or not 0 <= p <= 1 or observations < 1:
        return interval
    n = observations if se == 0 or p in (0.0, 1.0) else min(observations, p * (1 - p) / se ** 2)
    z = student_t_quantile((1 + level) / 2, interval.df) if math.isfinite(interval.df) else \
        student_t_quantile((1 + level) / 2, 1e9)
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    # The Wilson interval holds p̂; at p̂ = 0 or 1 rounding can land a bound 1e-17 past it.
    return Interval(p, max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half)), se, interval.df)


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
        return np.vstack([np.ones(n), 1.0 - 2.0 * _subsets(n)])  # the subsets of seeds whose sign flips
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
    _check_level(level)
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


def bounded(interval: Interval, low: float = 0.0, high: float = 1.0) -> Interval:
    """``interval`` cut to the range its quantity cannot leave (a share: [0, 1]). The quantity always lies
    in the range, so the cut interval holds it exactly when the uncut one does: the coverage is unchanged.
    A t interval of a share near 0 reaches below 0 otherwise."""
    if math.isnan(interval.low):
        return interval
    return Interval(interval.estimate, min(max(interval.low, low), interval.estimate),
                    max(min(interval.high, high), interval.estimate), interval.se, interval.df, interval.values,
                    interval.seeds)


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
