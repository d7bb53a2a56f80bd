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
(so ν does not jump at the truncation; without it ν was the problems' alone, a thousand at a thousand
problems, whatever the seeds showed). Seeds that answer alike leave nothing out. This rule is for one SFT
model per condition; several are read by the next.

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
problems add what V_r does not hold. ν counts the SFT models only: K − 1 for one stratum. Why, and the
simulated coverage and error rates: docs/statistics.md ("Accuracy read over SFT models") and
tests/test_nested_intervals.py.
Where the statistic is a contrast within one stratum, each SFT model's own estimate is kept
(``Interval.sft_means``) and its p-values are the larger of the t test's and the exact sign-flip test's
over the K SFT models (:meth:`Interval.p_value`); below six SFT models that test's floor 2^(1−K) is not
below 0.05 and the t test's normality of K means cannot be checked, so no verdict is read
(:data:`MIN_NORMAL_UNITS`, ``Interval.p_floor``). Without ``sft.seeds`` every row is its own cluster and
the intervals are conditional on the one SFT model per condition; the tables say so.

The interval is θ̂ ± t_{ν}·√V with ν from Welch–Satterthwaite over the components (each seed stratum
has G_r − 1 degrees of freedom, each benchmark H_b − 1, each block their product): ν ≈ S − 1 when the
spread between seeds dominates (four seeds: t = 3.18, not 1.96), large when problems dominate. Not a
bootstrap: resampling 4 seeds shows (S−1)/S of their variance (a percentile interval covers about 80% at
a nominal 95%); the analytic form is deterministic and instant. Coverage is tested by simulation
(tests/test_stats.py).

One number per run (a training-reward AUC) is a term of one column: V = s²/n, ν = n − 1, the textbook t
interval (:func:`t_interval`). The p-value of θ = 0 is the t test of the same statistic, the equivalence
p-value two one-sided tests (TOST), the MDE at 80% power (t_{ν, 0.975} + t_{ν, 0.80}) · √V.

The exact sign-flip test is grpo_lambda.signflip, the seed-level intervals grpo_lambda.seed_level, Holm and
max-T grpo_lambda.multiplicity.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import special

from grpo_lambda.signflip import MAX_EXACT_SEEDS, sign_flip_equivalence_p, sign_flip_p


@dataclass(frozen=True)
class Term:
    """One cell mean in a linear statistic.

    ``correct`` is (n_seeds, n_problems), or (n_problems,) for a single seed: 1 = correct, 0 = wrong,
    NaN = not evaluated. Columns of terms with the same ``problems`` key must be the same problems in the
    same order. ``rows`` names the seeds (default 0, 1, ...): a row is the same run in every term with
    the same ``seeds`` key and row name (paired), and independent of every other row.

    ``clusters``, where set, names each row's draw one level up, as a (stratum, cluster) pair: the SFT
    model an RL run started from, in a study with several SFT models per condition; the interval is then
    read over the clusters of each stratum (module docstring, "Nested draws")."""

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
    (grpo_lambda.seed_level.seed_interval), not the t test's.

    ``sft_units`` (K > 0): read over K SFT models (module docstring, "Nested draws"); ``sft_means``, for a
    contrast within one stratum, the K SFT models' own estimates: the p-values are then the larger of the t
    test's and the exact sign-flip test's over them (:meth:`t_p`, :meth:`exact_p`)."""

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


def check_level(level: float) -> None:
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")


def linear_interval(terms: Sequence[Term], level: float = 0.95) -> Interval:
    """θ = Σ_j w_j m_j with its two-way (seed, problem) cluster-robust t interval (module docstring)."""
    if not terms:
        raise ValueError("terms is empty")
    check_level(level)
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


# The fewest SFT models at which a verdict read over them can stand: below, the exact sign-flip test's floor
# 2^(1−K) is not below 0.05 and the t test's normality of K means cannot be checked (Interval.p_floor).
MIN_NORMAL_UNITS = 6


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


def bounded(interval: Interval, low: float = 0.0, high: float = 1.0) -> Interval:
    """``interval`` cut to the range its quantity cannot leave (a share: [0, 1]). The quantity always lies
    in the range, so the cut interval holds it exactly when the uncut one does: the coverage is unchanged.
    A t interval of a share near 0 reaches below 0 otherwise."""
    if math.isnan(interval.low):
        return interval
    return Interval(interval.estimate, min(max(interval.low, low), interval.estimate),
                    max(min(interval.high, high), interval.estimate), interval.se, interval.df, interval.values,
                    interval.seeds)
