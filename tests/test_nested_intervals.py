"""Intervals over nested draws (grpo_lambda.stats, "Nested draws"): RL seeds nested in SFT models, the SFT
model a random draw. By hand: the clustered interval of a seed-level value is the t interval over the SFT
models' means; clusters of one row change nothing. By simulation (slow): in worlds where the treatment's
effect varies between SFT models, the nested interval covers the effect over SFT models, the interval
conditional on the SFT models does not."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from grpo_lambda.stats import Term, linear_interval
from grpo_lambda.multiplicity import holm


def test_clustered_rows_give_the_t_interval_over_the_cluster_means():
    """One column (a per-seed value), 3 SFT models × 4 seeds: the interval is the textbook t interval over
    the 3 SFT models' means, with 2 degrees of freedom, whatever the spread within them."""
    values = np.array([0.10, 0.12, 0.08, 0.11, 0.30, 0.26, 0.31, 0.29, 0.02, 0.05, 0.01, 0.04])
    clusters = tuple(("sft", k) for k in (0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2))
    interval = linear_interval([Term(1.0, values[:, None], "runs", "value", tuple(range(12)), clusters)])
    means = values.reshape(3, 4).mean(axis=1)
    half = scipy_stats.t.ppf(0.975, 2) * means.std(ddof=1) / math.sqrt(3)
    assert interval.estimate == pytest.approx(values.mean())
    assert interval.df == pytest.approx(2)
    assert (interval.low, interval.high) == pytest.approx((means.mean() - half, means.mean() + half))
    flat = linear_interval([Term(1.0, values[:, None], "runs", "value")])
    assert flat.df == pytest.approx(11) and flat.high - flat.low < (interval.high - interval.low) / 3


def test_a_cluster_per_row_is_the_unclustered_interval():
    rng = np.random.default_rng(0)
    a, b = ((rng.random((4, 80)) < 0.5).astype(float) for _ in range(2))
    own = tuple(("runs", ("row", s)) for s in range(4))
    plain = linear_interval([Term(1.0, a, "runs", "p"), Term(-1.0, b, "runs", "p")])
    clustered = linear_interval([Term(1.0, a, "runs", "p", None, own), Term(-1.0, b, "runs", "p", None, own)])
    assert (clustered.low, clustered.high, clustered.df) == pytest.approx((plain.low, plain.high, plain.df))


def test_the_sft_models_own_row_joins_its_runs_cluster():
    """A gain over SFT with two SFT models: each SFT model's row and its RL runs are one draw, so the gain's
    interval is over the two (SFT model, runs) pairs, not over the RL seeds alone."""
    sft = np.array([[0.2], [0.4]])
    rl = np.array([[0.5], [0.52], [0.75], [0.73]])
    terms = [Term(1.0, rl, "rl", "v", (0, 1, 2, 3), tuple(("sft", k) for k in (0, 0, 1, 1))),
             Term(-1.0, sft, "sft", "v", (0, 1), (("sft", 0), ("sft", 1)))]
    interval = linear_interval(terms)
    gains = np.array([0.51 - 0.2, 0.74 - 0.4])
    half = scipy_stats.t.ppf(0.975, 1) * gains.std(ddof=1) / math.sqrt(2)
    assert interval.df == pytest.approx(1)
    assert (interval.low, interval.high) == pytest.approx((gains.mean() - half, gains.mean() + half))


def test_a_row_in_two_clusters_is_refused_naming_it():
    with pytest.raises(ValueError, match="row 1 .* two clusters"):
        linear_interval([Term(1.0, np.ones((2, 3)), "rl", "p", (0, 1), (("sft", 0), ("sft", 0))),
                         Term(-1.0, np.zeros((2, 3)), "rl", "p", (0, 1), (("sft", 0), ("sft", 1)))])
    with pytest.raises(ValueError, match="clusters .* do not name the 2 rows"):
        linear_interval([Term(1.0, np.ones((2, 3)), "rl", "p", (0, 1), (("sft", 0),))])


def nested_world(rng, sft_models: int, seeds: int, problems: int, sigma: float, gap: float = 0.05):
    """Two arms, RL seeds nested in SFT models, binary outcomes on shared problems. The treatment's effect on
    SFT model k is gap + u_k, u_k ~ N(0, sigma) (what an SFT model does to the method's effect); each SFT
    model shifts both arms alike; seeds add their own noise per arm; problems differ in difficulty and in
    their response to the treatment. The population effect (over SFT models and problems) is ``gap``."""
    difficulty = rng.uniform(0.25, 0.65, problems)
    response = rng.uniform(-0.08, 0.08, problems)
    model_shift = np.repeat(rng.normal(0, 0.03, sft_models), seeds)
    model_effect = np.repeat(rng.normal(0, sigma, sft_models), seeds)
    arms = []
    for effect, problem_effect in ((gap + model_effect, response), (0.0 * model_effect, 0.0 * response)):
        seed_noise = rng.normal(0, 0.02, sft_models * seeds)
        p = (difficulty + problem_effect)[None, :] + (model_shift + seed_noise + effect)[:, None]
        arms.append((rng.random(p.shape) < np.clip(p, 0, 1)).astype(float))
    return arms


def coverage(sft_models: int, seeds: int, sigma: float, nested: bool, replicates: int, seed: int) -> float:
    """The share of simulated studies whose 95% interval holds the effect over SFT models (0.05)."""
    rng = np.random.default_rng(seed)
    rows = tuple(range(sft_models * seeds))
    clusters = tuple(("sft", s // seeds) for s in rows) if nested else None
    hits = 0
    for _ in range(replicates):
        treated, baseline = nested_world(rng, sft_models, seeds, 200, sigma)
        interval = linear_interval([Term(1.0, treated, "rl", "p", rows, clusters),
                                    Term(-1.0, baseline, "rl", "p", rows, clusters)])
        hits += interval.low <= 0.05 <= interval.high
    return hits / replicates


@pytest.mark.slow
@pytest.mark.parametrize("sigma", [0.01, 0.02, 0.03])
def test_the_nested_interval_covers_where_one_sft_model_does_not(sigma):
    """12 RL runs a condition, 200 problems. Nested (3 SFT models × 4 seeds, clustered by SFT model; 2,000
    studies a world, Monte Carlo SE 0.005): the SFT-level interval (df 2, the SFT stratum never dropped and
    floored at its RL seeds' spread) covers the effect over SFT models at least 94% of the time: at three
    SFT models it is conservative (about 99%). One SFT model × 12 seeds (the design without sft.seeds; 400 studies): its interval, conditional
    on that SFT model, covers less as SFT models differ more (below 90% at sigma 0.02, below 80% at 0.03).
    The same 3 × 4 runs treated as 12 independent seeds fall short too where SFT models differ most: they
    see some of the SFT models' spread, and take it for the seeds'."""
    nested = coverage(3, 4, sigma, True, 2000, seed=int(sigma * 1000))
    one_model = coverage(1, 12, sigma, False, 400, seed=int(sigma * 1000) + 1)
    unclustered = coverage(3, 4, sigma, False, 400, seed=int(sigma * 1000) + 2)
    print(f"sigma {sigma}: nested {nested:.3f}, one SFT model {one_model:.3f}, 3 x 4 unclustered {unclustered:.3f}")
    assert nested >= 0.94
    assert one_model < {0.01: 0.95, 0.02: 0.90, 0.03: 0.80}[sigma]
    if sigma == 0.03:
        assert unclustered < nested - 0.03


def test_cluster_means_average_each_sft_models_seeds_in_the_order_the_models_first_appear():
    """The units of a nested design's seed-level test: each SFT model's mean over its RL seeds, NaN seeds left
    out, a model whose seeds are all NaN dropped; a cluster list of another length is refused, naming both."""
    from grpo_lambda.seed_level import cluster_means

    nan = float("nan")
    means, names = cluster_means([1.0, 3.0, nan, 10.0, 20.0, nan, nan], [0, 1, 2, 3, 4, 5, 6],
                                 ["b", "b", "c", "a", "a", "c", "b"])
    assert names == ("b", "a") and means.tolist() == [2.0, 15.0]
    means, names = cluster_means([1, 2, 4], [0, 1, 2], [7, 7, 7])  # integers are values too
    assert names == (7,) and means.tolist() == pytest.approx([7 / 3])
    with pytest.raises(ValueError, match="3 values but 2 clusters"):
        cluster_means([1.0, 2.0, 3.0], [0, 1, 2], ["a", "b"])


# One seed stratum × one benchmark, 3 × 3 by hand: the seeds' totals 0, 2, 2 → n/(n−1)·Σ(x−x̄)² = 4.0 (df 2);
# the problems' totals 1, 1, 2 → 1.0 (df 2); the seed × problem residual's squares sum to 10/9, times
# gh/((g−1)(h−1)) = 9/4: 2.5 (df 4).
CROSSED = np.array([[0, 0, 0], [0, 1, 1], [1, 0, 1]], dtype=float)


def _components_of(scores, row_strata, column_strata, blocks):
    from grpo_lambda.stats import _components

    return _components(np.asarray(scores, dtype=float), [np.asarray(r) for r in row_strata],
                       [np.asarray(c) for c in column_strata], set(blocks))


def test_the_variance_components_by_hand_with_a_stratum_left_out_on_either_side():
    """The truncated estimator (grpo_lambda.stats module docstring): a stratum whose spread is no larger than the
    seed × problem parts it holds is left out; the seed × problem part then counts through the side kept; a left-
    out seed stratum and its blocks still count in the df (their v²/df: 1²/2 + 2.5²/4 = 2.0625)."""
    r3, c3 = np.arange(3), np.arange(3)
    # the problems' 1.0 ≤ 2.5: left out, the seeds' 4.0 kept, the crossed part through them
    assert _components_of(CROSSED, [r3], [c3], [(0, 0)]) == ([(4.0, 2, 1.0)], 0)
    components, left_out = _components_of(CROSSED.T, [r3], [c3], [(0, 0)])  # the seeds' 1.0 ≤ 2.5: left out
    assert components == [(4.0, 2, 1.0)] and left_out == pytest.approx(1 / 2 + 2.5 ** 2 / 4)
    # Two seed strata, two benchmarks, each stratum on its own benchmark: stratum 1 (2 seeds) on a one-column
    # benchmark is kept (its seed × problem part cannot be told apart), whatever its spread (totals 1, 0: 1.0).
    scores = np.zeros((5, 4))
    scores[:3, :3], scores[3, 3] = CROSSED.T, 1
    components, left_out = _components_of(scores, [r3, [3, 4]], [c3, [3]], [(0, 0), (1, 1)])
    assert components == [(1.0, 1, 1.0), (4.0, 2, 1.0)] and left_out == pytest.approx(2.0625)
    # The same with seeds and problems swapped: benchmark 1 (2 columns) beside a one-seed stratum is kept, and
    # benchmark 0 (1.0 ≤ 2.5) left out; no seed stratum is left out, so nothing is added to the df.
    assert _components_of(scores.T, [r3, [3]], [c3, [3, 4]], [(0, 0), (1, 1)]) == ([(4.0, 2, 1.0), (1.0, 1, 1.0)], 0)


def test_the_seed_level_interval_of_a_nested_design_is_over_the_sft_models_means():
    """seed_interval with clusters: the units are the SFT models' means (8 RL seeds on 4 SFT models are 4
    values, named by model), so its p-value's floor is 2^(1−4), not 2^(1−8)."""
    from grpo_lambda.seed_level import seed_interval

    values = [0.10, 0.30, 0.20, 0.40, -0.10, 0.10, 0.50, 0.70]
    nested = seed_interval(values, seeds=list(range(8)), clusters=["a", "a", "b", "b", "c", "c", "d", "d"])
    alone = seed_interval([0.20, 0.30, 0.00, 0.60], seeds=["a", "b", "c", "d"])
    assert nested.values == pytest.approx(alone.values) and nested.seeds == ("a", "b", "c", "d")
    assert (nested.estimate, nested.low, nested.high, nested.se, nested.df) == pytest.approx(
        (alone.estimate, alone.low, alone.high, alone.se, alone.df))
    assert nested.df == 3 and nested.p_floor() == pytest.approx(2 ** -3)


def test_the_seed_level_interval_at_its_edges_one_value_all_zero_and_beyond_16_units():
    """One value: its estimate, no interval; every value 0 (a check line that is its baseline): 0 with a zero
    width and n − 1 df; the standard error s/√n for the MDE; above 16 units the t interval."""
    from grpo_lambda.seed_level import seed_interval
    from grpo_lambda.stats import t_interval

    one = seed_interval([0.25, float("nan")], seeds=["x", "y"])
    assert one.estimate == 0.25 and math.isnan(one.low) and math.isnan(one.high)
    assert one.seeds == ("x",) and one.values == (0.25,)
    zero = seed_interval([0.0] * 5, seeds=list("abcde"))
    assert (zero.estimate, zero.low, zero.high, zero.se, zero.df) == (0.0, 0.0, 0.0, 0.0, 4)
    assert zero.values == (0.0,) * 5 and zero.seeds == tuple("abcde")
    # where (1 − level)·2^(n−1) is a whole number the interval's rank is that number (0.25 · 4 = 1): finite
    assert math.isfinite(seed_interval([0.1, 0.2, 0.4], 0.75).low)
    five = seed_interval([0.1, 0.3, 0.2, 0.6, 0.3])
    assert five.se == pytest.approx(np.std([0.1, 0.3, 0.2, 0.6, 0.3], ddof=1) / math.sqrt(5)) and five.df == 4
    many = np.linspace(-0.1, 0.5, 17)
    t, wide = t_interval(many, 0.9), seed_interval(many, 0.9, seeds=list(range(17)))
    assert (wide.estimate, wide.low, wide.high, wide.se, wide.df) == pytest.approx((t.estimate, t.low, t.high, t.se, 16))
    assert wide.seeds == tuple(range(17))
    sixteen = seed_interval(many[:16])  # still the exact test: its p never below 2^(1−16)
    assert sixteen.values is not None and sixteen.p_floor() == pytest.approx(2 ** -15)


# --- the SFT-level test at K SFT models: coverage where the SFT stratum looks empty, and Holm's error rate ----

def skewed_world(rng, sft_models: int, seeds: int, problems: int, sigma: float, gap: float, skewed: bool):
    """:func:`nested_world` with the RL seeds' noise either normal or skewed (a centred exponential: most
    seeds a little behind, a few far ahead), the shape of a few RL runs that take off."""
    difficulty = rng.uniform(0.25, 0.65, problems)
    response = rng.uniform(-0.08, 0.08, problems)
    model_shift = np.repeat(rng.normal(0, 0.03, sft_models), seeds)
    model_effect = np.repeat(rng.normal(0, sigma, sft_models), seeds) if sigma else np.zeros(sft_models * seeds)
    arms = []
    for effect, problem_effect in ((gap + model_effect, response), (0.0 * model_effect, 0.0 * response)):
        noise = rng.exponential(0.02, sft_models * seeds) - 0.02 if skewed else rng.normal(0, 0.02, sft_models * seeds)
        p = (difficulty + problem_effect)[None, :] + (model_shift + noise + effect)[:, None]
        arms.append((rng.random(p.shape) < np.clip(p, 0, 1)).astype(float))
    return arms


def stratum_looks_empty(treated: np.ndarray, baseline: np.ndarray, sft_models: int) -> bool:
    """Whether the SFT models' own variance is estimated at or below zero: their totals' spread no larger than
    the SFT × problem part it holds (the event on which the truncating rule left the stratum out)."""
    summed = (treated - baseline).reshape(sft_models, -1, treated.shape[1]).sum(axis=1)
    k, h = summed.shape
    totals = summed.sum(axis=1)
    between = k / (k - 1) * ((totals - totals.mean()) ** 2).sum()
    residual = summed - summed.mean(axis=1, keepdims=True) - summed.mean(axis=0, keepdims=True) + summed.mean()
    return bool(between <= k * h / ((k - 1) * (h - 1)) * (residual ** 2).sum())


def sft_level_study(rng, sft_models, seeds, sigma, gap, skewed):
    treated, baseline = skewed_world(rng, sft_models, seeds, 200, sigma, gap, skewed)
    rows = tuple(range(sft_models * seeds))
    clusters = tuple(("sft", s // seeds) for s in rows)
    interval = linear_interval([Term(1.0, treated, "rl", "p", rows, clusters),
                                Term(-1.0, baseline, "rl", "p", rows, clusters)])
    return interval, stratum_looks_empty(treated, baseline, sft_models)


WORLDS = [(k, n, sigma, skewed) for k in (3, 8) for n in (2, 4) for sigma in (0.0, 0.02, 0.04)
          for skewed in (False, True)]


@pytest.mark.slow
@pytest.mark.parametrize("sft_models", [3, 8])
def test_the_sft_level_interval_covers_even_where_the_sft_stratum_looks_empty(sft_models):
    """3 or 8 SFT models × 2 or 4 RL seeds × 200 binary problems, the SFT models' σ of the effect 0, 0.02 or
    0.04, RL seeds normal or skewed (12 worlds a K, 1,500 studies each). The SFT-level interval (df K − 1,
    the SFT stratum always kept) covers the effect over SFT models ≥ 0.94 in every world, and ≥ 0.94 pooled
    over the studies where the SFT models' variance is estimated ≤ 0 — where the truncating rule covered
    0.29–0.80. Its df are K − 1 in every study."""
    covered, covered_empty, empty, dfs = [], 0, 0, set()
    for i, (k, n, sigma, skewed) in enumerate(w for w in WORLDS if w[0] == sft_models):
        rng = np.random.default_rng(1000 * sft_models + i)
        hits = 0
        for _ in range(1500):
            interval, looks_empty = sft_level_study(rng, k, n, sigma, 0.05, skewed)
            hit = interval.low <= 0.05 <= interval.high
            hits += hit
            empty += looks_empty
            covered_empty += hit and looks_empty
            dfs.add(round(interval.df, 9))
        covered.append(((n, sigma, skewed), hits / 1500))
    print(f"K {sft_models}: coverage by world {covered}; where the stratum looks empty {covered_empty}/{empty}")
    assert dfs == {sft_models - 1}
    assert min(share for _, share in covered) >= 0.94, covered
    assert empty >= 300 and covered_empty / empty >= 0.94


@pytest.mark.slow
@pytest.mark.parametrize("sft_models", [3, 8])
def test_holm_over_four_null_horizons_rejects_at_most_five_percent(sft_models):
    """Four horizons, each its own SFT models, the effect over SFT models exactly 0 at every one (the SFT
    models' σ 0.02, skewed RL seeds at every other horizon): Holm over the four verdict p-values rejects
    somewhere in at most 5% of 2,000 worlds (+ two Monte Carlo standard errors, 0.01), where the truncating
    rule rejected in 8.6–10.8%; the t test alone does too. At 3 SFT models the verdict's p (the larger of the
    t test's and the exact test's) cannot reject at all: its floor 2^(1−3) = 0.25."""
    rng = np.random.default_rng(7 + sft_models)
    verdicts = t_only = 0
    for _ in range(2000):
        studies = [sft_level_study(rng, sft_models, 4, 0.02, 0.0, horizon % 2 == 1)[0] for horizon in range(4)]
        verdicts += bool((holm([s.p_value() for s in studies]) < 0.05).any())
        t_only += bool((holm([s.t_p() for s in studies]) < 0.05).any())
    print(f"K {sft_models}: Holm over 4 rejects in {verdicts / 2000:.4f} (verdict p), {t_only / 2000:.4f} (t alone)")
    assert verdicts / 2000 <= 0.06 and t_only / 2000 <= 0.06
    if sft_models == 3:
        assert verdicts == 0


# --- the SFT-level interval by hand ---------------------------------------------------------------------------

def one_column(values, sft_of):
    """A per-run value (one column) as a nested term pair's difference: treated = value, baseline = 0."""
    values = np.asarray(values, dtype=float)[:, None]
    rows = tuple(range(len(values)))
    clusters = tuple(("sft", k) for k in sft_of)
    return [Term(1.0, values, "rl", "v", rows, clusters), Term(-1.0, np.zeros_like(values), "rl", "v", rows, clusters)]


def test_the_sft_level_interval_is_the_t_interval_over_the_sft_models_at_k_minus_1_df():
    """SFT models that disagree: the variance is their means' (the floor does not bind), df K − 1, and the
    verdict's p the larger of the t test's and the exact sign-flip test's over the three means."""
    values = [0.10, 0.12, 0.30, 0.32, 0.02, 0.04]
    interval = linear_interval(one_column(values, [0, 0, 1, 1, 2, 2]))
    means = np.array([0.11, 0.31, 0.03])
    se = means.std(ddof=1) / math.sqrt(3)
    assert interval.df == pytest.approx(2) and interval.sft_units == 3
    assert interval.se == pytest.approx(se)
    assert interval.sft_means == pytest.approx(tuple(means))
    t_p = 2 * scipy_stats.t.sf(means.mean() / se, 2)
    assert interval.t_p() == pytest.approx(t_p) and interval.exact_p() == pytest.approx(0.25)
    assert interval.p_value() == pytest.approx(max(t_p, 0.25)) and interval.p_floor() == pytest.approx(0.25)


def test_sft_models_that_agree_more_than_their_seeds_allow_buy_no_narrower_interval():
    """Three SFT models with equal means but RL seeds 0.1 apart within each: the SFT models' spread is 0, so
    the variance is the floor Σ_k n_k s²_w (here 3 · 2 · 0.005 in totals), never 0, and df stay 2."""
    values = [0.05, 0.15, 0.05, 0.15, 0.05, 0.15]
    interval = linear_interval(one_column(values, [0, 0, 1, 1, 2, 2]))
    # a row's total is a·(value − mean), a = 1/6 (six runs): within an SFT model the two totals differ by
    # 0.1/6, s²_w is their variance, and the floor sums n_k = 2 of them over the 3 SFT models
    within = np.var([0.05 / 6, 0.15 / 6], ddof=1)
    assert interval.se == pytest.approx(math.sqrt(6 * within))
    assert interval.df == pytest.approx(2) and interval.high - interval.low > 0


def test_the_exact_test_over_sft_models_counts_a_mean_of_exactly_zero_and_backs_the_verdict_at_eight():
    """At 8 SFT models the floor is 2^(1−8); an SFT model whose mean effect is exactly 0 still counts in the
    sign-flip test (a subset mean equal to the observed one reaches it), so its p is the exact test's."""
    from grpo_lambda.signflip import sign_flip_p
    means = [0.0, 0.05, 0.06, 0.04, 0.07, 0.05, 0.06, 0.05]
    values = [m for m in means for _ in range(2)]
    interval = linear_interval(one_column(values, [k for k in range(8) for _ in range(2)]))
    assert interval.sft_units == 8 and interval.p_floor() == pytest.approx(2 ** -7)
    assert interval.exact_p() == pytest.approx(sign_flip_p(means))
    assert interval.p_value() == pytest.approx(max(interval.t_p(), sign_flip_p(means)))


def test_a_statistic_spanning_strata_has_no_exact_test_and_needs_six_sft_models():
    """A contrast of two training sets, each its own SFT models: no SFT model holds both, so no exact test;
    its floor is 2^(1−K) below 6 SFT models (no verdict), 0 from 6 on, and its df at most Σ (K_r − 1)."""
    def two_strata(k):
        a = np.array([[0.2 + 0.01 * i] for i in range(k)])
        b = np.array([[0.1 + 0.02 * i] for i in range(k)])
        return [Term(1.0, a, ("rl", "x"), "v", tuple(range(k)), tuple((("sft", "x"), i) for i in range(k))),
                Term(-1.0, b, ("rl", "y"), "v", tuple(range(k)), tuple((("sft", "y"), i) for i in range(k)))]
    small, large = linear_interval(two_strata(3)), linear_interval(two_strata(8))
    assert small.sft_means is None and small.p_floor() == pytest.approx(0.25) and small.df <= 4 + 1e-9
    assert large.sft_means is None and large.p_floor() == 0 and large.df <= 14 + 1e-9
