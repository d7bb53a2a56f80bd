"""Intervals of grpo_lambda.stats: exact estimates, the variance by hand, pairing by seed and problem,
coverage by simulation with a known truth, p-values, Holm, TOST and the minimum detectable effect."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from grpo_lambda import multiplicity, smoothing, stats
from grpo_lambda.stats import Interval, Term, linear_interval, mean_interval, paired_difference, t_interval
from grpo_lambda.tables.cells import Cells
from grpo_lambda.config.report import REPORT_DEFAULTS


def test_estimate_is_the_pooled_mean_and_lies_in_its_interval():
    correct = np.array([[1, 0, 1, 1], [0, 0, 1, 1.0]])
    interval = mean_interval(correct)
    assert interval.estimate == pytest.approx(5 / 8)
    assert interval.low <= interval.estimate <= interval.high


def test_missing_entries_are_left_out_of_the_mean():
    correct = np.array([[1, 0, np.nan], [1, 1, 1.0]])
    assert mean_interval(correct).estimate == pytest.approx(4 / 5)


def test_the_variance_is_the_crossed_anova_estimator_by_hand():
    """One arm, S seeds × P problems, complete: V = (MS_seed + MS_problem − MS_error) / (S·P), the unbiased
    estimator of σ²_seed/S + σ²_problem/P + σ²_error/(SP), with Satterthwaite's degrees of freedom."""
    rng = np.random.default_rng(0)
    seeds, problems = 5, 40
    y = rng.normal(0, 1, (seeds, 1)) * 0.5 + rng.normal(0, 1, (1, problems)) + rng.normal(0, 1, (seeds, problems))
    grand, by_seed, by_problem = y.mean(), y.mean(axis=1), y.mean(axis=0)
    ms_seed = problems * ((by_seed - grand) ** 2).sum() / (seeds - 1)
    ms_problem = seeds * ((by_problem - grand) ** 2).sum() / (problems - 1)
    residual = y - by_seed[:, None] - by_problem[None, :] + grand
    ms_error = (residual ** 2).sum() / ((seeds - 1) * (problems - 1))
    n = seeds * problems
    variance = (ms_seed + ms_problem - ms_error) / n
    parts = [(ms_seed / n, seeds - 1), (ms_problem / n, problems - 1), (ms_error / n, (seeds - 1) * (problems - 1))]
    df = variance ** 2 / sum(v * v / d for v, d in parts)
    interval = mean_interval(y)
    assert interval.estimate == pytest.approx(grand)
    assert interval.se == pytest.approx(math.sqrt(variance))
    assert interval.df == pytest.approx(df)
    half = stats.student_t_quantile(0.975, df) * math.sqrt(variance)
    assert (interval.low, interval.high) == pytest.approx((grand - half, grand + half))


def test_a_seed_level_interval_is_the_textbook_t_interval():
    values = np.array([0.31, 0.35, 0.28, 0.40])
    interval = t_interval(values)
    half = 3.182446305 * values.std(ddof=1) / 2  # t(3, 0.975) · s / √4
    assert interval.estimate == pytest.approx(values.mean())
    assert (interval.low, interval.high) == pytest.approx((values.mean() - half, values.mean() + half))
    assert interval.df == 3
    assert np.isnan(t_interval([0.3]).low) and np.isnan(t_interval([]).estimate)


def test_the_same_input_gives_the_same_interval_to_the_bit():
    correct = (np.random.default_rng(0).random((3, 50)) < 0.4).astype(float)
    assert mean_interval(correct) == mean_interval(correct)


# --- coverage by simulation -----------------------------------------------------------------------


def test_seed_level_coverage_at_four_normal_seeds():
    """n = 4 normal draws, 4000 times: the 95% t interval covers the mean at least 92% of the time (the
    percentile bootstrap it replaces covered about 80%)."""
    rng = np.random.default_rng(1)
    draws = rng.normal(0.4, 0.05, (4000, 4))
    covered = [interval.low <= 0.4 <= interval.high for interval in map(t_interval, draws)]
    assert 0.92 <= np.mean(covered) <= 0.975


def test_coverage_over_problems_is_nominal():
    """One seed, 200 Bernoulli(0.3) problems, 400 times: the interval over problems covers 0.3 in about 95%."""
    rng = np.random.default_rng(2)
    hits = 0
    for _ in range(400):
        interval = mean_interval((rng.random(200) < 0.3).astype(float))
        hits += interval.low <= 0.3 <= interval.high
    assert 0.92 <= hits / 400 <= 0.98


def crossed_difference(rng, seeds: int, problems: int, gap: float = 0.05):
    """Two arms of one SFT model under a crossed random-effects model with binary outcomes: a problem's
    difficulty (shared by the arms), its own response to the treatment, a seed effect per arm correlated
    across the arms of one seed (same SFT model and prompts), a seed × problem interaction, then a
    Bernoulli draw. Built on the probability scale, within [0, 1], so the population difference is
    ``gap`` exactly."""
    difficulty = rng.uniform(0.2, 0.7, problems)
    response = rng.uniform(-0.08, 0.08, problems)
    shared = rng.normal(0, 1, seeds)
    seed_effect = [0.04 * (math.sqrt(0.5) * shared + math.sqrt(0.5) * rng.normal(0, 1, seeds)) for _ in range(2)]
    seed_effect = [np.clip(e, -0.09, 0.09) for e in seed_effect]
    interaction = [rng.uniform(-0.05, 0.05, (seeds, problems)) for _ in range(2)]
    treated = difficulty + gap + response + seed_effect[0][:, None] + interaction[0]
    baseline = difficulty + seed_effect[1][:, None] + interaction[1]
    return [(rng.random(p.shape) < p).astype(float) for p in (treated, baseline)]


@pytest.mark.parametrize("seeds", [4, 8])
def test_coverage_of_the_paired_accuracy_difference_under_crossed_random_effects(seeds):
    """300 problems, 4 or 8 seeds, 400 studies each: the paired 95% interval of the accuracy difference
    covers the true gap at least 92% of the time, without being grossly conservative."""
    rng = np.random.default_rng(3 + seeds)
    hits = 0
    for _ in range(400):
        treated, baseline = crossed_difference(rng, seeds, 300)
        interval = paired_difference(treated, baseline)
        hits += interval.low <= 0.05 <= interval.high
    assert 0.92 <= hits / 400 <= 0.985


def test_coverage_of_a_mean_over_seeds_and_problems():
    """One arm's mean over 5 seeds × 100 problems drawn from a population of difficulties, with a seed
    shift: covers the population mean (0.45) about 95% of the time."""
    rng = np.random.default_rng(4)
    hits = 0
    for _ in range(300):
        p = np.clip(rng.uniform(0.2, 0.7, 100)[None, :] + rng.normal(0, 0.04, 5)[:, None], 0, 1)
        interval = mean_interval((rng.random(p.shape) < p).astype(float))
        hits += interval.low <= 0.45 <= interval.high
    assert 0.92 <= hits / 300 <= 0.99


# --- pairing --------------------------------------------------------------------------------------


def test_identical_arms_differ_by_exactly_zero_with_no_width():
    """A check line that writes the baseline's completions (grpo-lambda-0 and grpo): 0 [0, 0], p = 1."""
    rng = np.random.default_rng(5)
    arms = [(rng.random((4, 100)) < 0.6).astype(float) for _ in range(3)]
    terms = [Term(1 / 3, arm, "sft", f"bench{b}", (0, 1, 2, 3)) for b, arm in enumerate(arms)]
    interval = linear_interval(terms + [Term(-t.weight, t.correct, t.seeds, t.problems, t.rows) for t in terms])
    assert (interval.estimate, interval.low, interval.high, interval.se) == (0.0, 0.0, 0.0, 0.0)
    assert interval.p_value() == 1.0 and not interval.excludes(0.0)


def test_pairing_by_seed_removes_the_seed_effect_both_arms_share():
    """Each seed moves both arms alike (same SFT model and prompts): paired by seed the gap is
    resolved; with the seeds of each arm taken as independent runs it is not."""
    rng = np.random.default_rng(6)
    shift = np.array([-0.15, -0.05, 0.05, 0.15])[:, None]
    p = np.clip(rng.uniform(0.2, 0.6, 400)[None, :] + shift, 0, 1)
    baseline = (rng.random(p.shape) < p).astype(float)
    treated = np.maximum(baseline, (rng.random(p.shape) < 0.08))  # the treatment adds some right answers
    paired = paired_difference(treated, baseline)
    apart = linear_interval([Term(1.0, treated, "a", "bench"), Term(-1.0, baseline, "b", "bench")])
    assert paired.estimate == pytest.approx(apart.estimate)
    assert paired.low > 0 and apart.low < 0 < apart.high
    assert paired.high - paired.low < 0.5 * (apart.high - apart.low)


def test_rows_pair_by_seed_name_not_position():
    """Seed 3 of one arm pairs with seed 3 of the other wherever it sits."""
    rng = np.random.default_rng(7)
    base = (rng.random((3, 60)) < 0.5).astype(float)
    order = [2, 0, 1]
    same = linear_interval([Term(1.0, base, "sft", "b", (1, 2, 3)), Term(-1.0, base[order], "sft", "b", (3, 1, 2))])
    assert (same.estimate, same.low, same.high) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="once each"):
        linear_interval([Term(1.0, base, "sft", "b", (1, 1, 2))])


def test_pairing_by_problem_narrows_the_interval_when_problems_dominate():
    rng = np.random.default_rng(8)
    a = (rng.random(400) < 0.5).astype(float)[None, :]
    b = a.copy()
    b[0, :20] = 1 - b[0, :20]  # differ on 20 of 400 problems
    paired = paired_difference(a, b)
    unpaired = linear_interval([Term(1.0, a, "a", "pa"), Term(-1.0, b, "b", "pb")])
    assert paired.estimate == pytest.approx(unpaired.estimate)
    assert (paired.high - paired.low) < 0.5 * (unpaired.high - unpaired.low)


def test_a_null_gap_is_flagged_about_as_often_as_the_level_allows():
    rng = np.random.default_rng(9)
    flagged = 0
    for _ in range(200):
        difficulty = rng.random(300)
        a, b = ((rng.random((4, 300)) < difficulty).astype(float) for _ in range(2))
        flagged += paired_difference(a, b).p_value() < 0.05
    assert flagged <= 18  # 10 expected; 18 or more has probability < 1%


def test_linear_combination_of_benchmarks():
    a, b = np.array([1, 1, 0, 0.0]), np.array([1, 0, 0, 0, 0, 0.0])
    average = linear_interval([Term(0.5, a, "run", "A"), Term(0.5, b, "run", "B")])
    assert average.estimate == pytest.approx(0.5 * 0.5 + 0.5 / 6)


# --- p-values, equivalence, power, Holm ------------------------------------------------------------


def test_p_value_and_interval_agree():
    """The p-value of 0 is below 1 − level exactly when the interval excludes 0."""
    for estimate in (0.01, 0.03, 0.05, -0.06):
        interval = stats._t_from(estimate, 0.02 ** 2, [(0.02 ** 2, 6, 1)], 0.95)
        assert (interval.p_value() < 0.05) == interval.excludes(0.0)
    interval = stats._t_from(0.05, 0.02 ** 2, [(0.02 ** 2, 6, 1)], 0.95)
    assert interval.p_value() == pytest.approx(2 * 0.023264, abs=1e-5)  # t = 2.5 on 6 df: P(T > 2.5) = 0.0233


def test_tost_and_the_minimum_detectable_effect_by_hand():
    interval = Interval(0.004, float("nan"), float("nan"), se=0.01, df=10)
    # TOST at margin 0.03: max(P(T > (0.004 + 0.03)/0.01), P(T < (0.004 − 0.03)/0.01)) on 10 df
    assert interval.equivalence_p(0.03) == pytest.approx(stats.t_sf(2.6, 10))
    assert interval.equivalence_p(0.03) < 0.05 < interval.equivalence_p(0.01)
    # MDE at 80% power, two-sided 5%: (t_{10, 0.975} + t_{10, 0.8}) · se = (2.228 + 0.879) · 0.01
    assert interval.mde() == pytest.approx((2.228139 + 0.879058) * 0.01, rel=1e-5)
    assert Interval(0.0, 0.0, 0.0, 0.0).equivalence_p(0.01) == 0.0


def test_holm_by_hand():
    adjusted = multiplicity.holm([0.01, 0.04, 0.03, np.nan, 0.5])
    # sorted 0.01, 0.03, 0.04, 0.5 over 4 tests: 0.04, 0.09, max(0.09, 0.08), max(0.09, 0.5)
    assert adjusted[:3] == pytest.approx([0.04, 0.09, 0.09]) and adjusted[4] == pytest.approx(0.5)
    assert np.isnan(adjusted[3])
    assert multiplicity.holm([0.3, 0.6]) == pytest.approx([0.6, 0.6])


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="terms"):
        linear_interval([])
    with pytest.raises(ValueError, match="level"):
        mean_interval(np.ones(3), level=1.5)
    with pytest.raises(ValueError, match="disagree"):
        linear_interval([Term(1, np.ones(3), "s", "p"), Term(1, np.ones(4), "s2", "p")])


def test_an_interval_that_touches_the_value_does_not_exclude_it():
    assert not Interval(0.0, 0.0, 0.0).excludes(0.0)
    assert not Interval(0.05, 0.0, 0.1).excludes(0.0)
    assert not Interval(-0.05, -0.1, 0.0).excludes(0.0)
    assert Interval(0.05, 1e-12, 0.1).excludes(0.0) and Interval(-0.05, -0.1, -1e-12).excludes(0.0)


def test_unobserved_entries_add_nothing():
    correct = np.zeros((3, 40))
    correct[:, ::2] = np.nan
    interval = mean_interval(correct)
    assert (interval.estimate, interval.low, interval.high) == (0.0, 0.0, 0.0)
    assert np.isnan(mean_interval(np.full((2, 3), np.nan)).estimate)


def test_shapes_and_levels_at_the_edges():
    single = mean_interval(np.ones((1, 1)))
    assert single.estimate == 1.0 and np.isnan(single.low)  # one seed, one problem: no interval
    with pytest.raises(ValueError, match="shape"):
        mean_interval(np.ones((2, 2, 2)))
    for level in (0.0, 1.0):
        with pytest.raises(ValueError, match="level"):
            mean_interval(np.ones(3), level=level)


# --- width against the binomial width -------------------------------------------------------------


@pytest.mark.parametrize("level", [0.90, 0.95])
def test_interval_width_is_the_binomial_width_of_its_level(level):
    """One seed, n problems, accuracy p: the interval is 2 t_{n−1} √(p(1−p)/(n−1)) wide. The 90% width
    is 16% below the 95% one, so one level cannot pass for the other."""
    n, p = 2000, 0.3
    correct = np.zeros(n)
    correct[: int(p * n)] = 1.0
    analytic = 2 * stats.student_t_quantile((1 + level) / 2, n - 1) * math.sqrt(p * (1 - p) / (n - 1))
    interval = mean_interval(correct, level=level)
    assert (interval.high - interval.low) == pytest.approx(analytic, rel=1e-9)
    # the tables ask for the report's level through Cells
    cells = Cells(_empty_samples(), {"benchmarks": {}}, {"level": level})
    table_interval = cells.interval([Term(1.0, correct, "s", "p")])
    assert (table_interval.high - table_interval.low) == pytest.approx(analytic, rel=1e-9)
    assert REPORT_DEFAULTS["level"] == 0.95


def _empty_samples():
    return pd.DataFrame({column: [] for column in ("mode", "benchmark", "id", "model", "dataset", "variant",
                                                   "step", "seed", "correct")})


# --- the sampled metrics and the smoothing ---------------------------------------------------------


def test_the_unbiased_pass_at_k_by_hand():
    from grpo_lambda.sampling import pass_at_k

    assert pass_at_k(4, 1, 2) == pytest.approx(1 - 3 / 6)     # 1 - C(3,2)/C(4,2)
    assert pass_at_k(5, 2, 3) == pytest.approx(1 - 1 / 10)    # 1 - C(3,3)/C(5,3)
    assert pass_at_k(8, 3, 1) == pytest.approx(3 / 8)         # k = 1: the share of correct samples
    assert pass_at_k(3, 0, 3) == 0.0 and pass_at_k(3, 1, 3) == 1.0 and pass_at_k(6, 5, 2) == 1.0
    with pytest.raises(ValueError, match="n=2, c=3, k=1"):
        pass_at_k(2, 3, 1)


def test_majority_vote_takes_the_most_frequent_answer_first_seen_on_ties_and_ignores_blanks():
    from grpo_lambda.sampling import majority_correct

    assert majority_correct(["4", "5", "4", None], [1, 0, 1, 0]) == 1.0
    assert majority_correct(["5", "4", "5", ""], [0, 1, 0, 0]) == 0.0
    assert majority_correct(["4", "5"], [1, 0]) == 1.0 and majority_correct(["5", "4"], [0, 1]) == 0.0
    assert majority_correct([None, None], [0, 0]) == 0.0


def test_smoothing_is_the_debiased_ema_that_skips_nan():
    """s_t = w s_{t−1} + (1−w) x_t over the finite values, shown as s_t / (1 − w^n), by hand."""
    w = 0.5
    out = smoothing.smooth([np.nan, 1.0, np.nan, 0.0], w)
    assert np.isnan(out[0])
    assert out[1] == pytest.approx(1.0) and out[2] == pytest.approx(1.0)  # carried over the NaN
    assert out[3] == pytest.approx((w * (1 - w) * 1.0) / (1 - w ** 2))


# --- the seed-level procedure, zero standard errors, accuracy intervals inside [0, 1] -------------------


def test_the_sign_flip_interval_is_the_subset_means_and_its_p_never_below_the_floor():
    """8 seeds: of the 255 means of nonempty subsets, the 6th smallest to the 6th largest (k = ⌊0.05·2^7⌋ = 6);
    p of seeds that all agree is 2 of the 2^8 sign patterns; equal seeds give that floor, never 0."""
    import itertools

    from grpo_lambda.seed_level import seed_interval
    from grpo_lambda.signflip import sign_flip_p

    values = np.array([0.3, -0.1, 0.5, 0.2, 0.05, 0.4, -0.2, 0.6])
    means = sorted(np.mean(values[list(c)]) for k in range(1, 9) for c in itertools.combinations(range(8), k))
    interval = seed_interval(values)
    assert (interval.low, interval.high) == pytest.approx((means[5], means[-6]))
    assert interval.estimate == pytest.approx(values.mean()) and interval.df == 7
    assert sign_flip_p(np.abs(values) + 0.01) == pytest.approx(2 / 2**8)
    equal = seed_interval([0.1] * 5)
    assert equal.se == 0 and equal.p_value() == pytest.approx(2 ** (1 - 5)) and equal.p_value() > 0
    assert seed_interval([0.0] * 4).p_value() == 1.0 and (seed_interval([0.0] * 4).low, seed_interval([0.0] * 4).high) == (0, 0)
    # 4 seeds: no 95% interval exists
    assert seed_interval([0.1, 0.2, 0.3, 0.4]).low == -np.inf


def test_a_zero_standard_error_t_statistic_gives_no_p_not_zero():
    from grpo_lambda.stats import Interval

    assert np.isnan(Interval(0.1, 0.1, 0.1, 0.0, 3.0).p_value())
    assert Interval(0.0, 0.0, 0.0, 0.0, 3.0).p_value() == 1.0


@pytest.mark.parametrize("right", [299, 1])
def test_an_accuracy_interval_stays_within_0_and_1_near_both_ends(right):
    """300 problems × 4 seeds with 299 (or 1) of 300 right for every seed: the Wald interval p̂ ± t·se
    crosses 1 (or 0); the accuracy tables' interval (Wilson at the cluster variance's effective size) does
    not, and still holds p̂."""
    from types import SimpleNamespace

    from grpo_lambda.stats import Term, linear_interval
    from grpo_lambda.tables.cells import Cells

    correct = np.zeros((4, 300))
    correct[:, :right] = 1.0
    terms = [Term(1.0, correct, "seeds", "problems")]
    wald = linear_interval(terms)
    assert wald.high > 1 if right == 299 else wald.low < 0
    shown = Cells.level_interval(SimpleNamespace(level=0.95), terms)
    assert 0 <= shown.low < shown.estimate < shown.high <= 1
    assert shown.estimate == pytest.approx(right / 300)
    # all right: [something below 1, 1], not a point
    every = Cells.level_interval(SimpleNamespace(level=0.95), [Term(1.0, np.ones((4, 300)), "seeds", "problems")])
    assert every.high == 1.0 and 0.98 < every.low < 1.0


def test_an_accuracy_interval_holds_its_estimate_at_0_and_1():
    """As found: at an estimate of exactly 0 the Wilson bound landed 1e-17 above it, and Figure 1 refused the
    negative error bar (the preflight's small study, whose SFT model answers nothing right)."""
    from grpo_lambda.stats import Interval, proportion_interval

    for p in (0.0, 1.0, 1e-9, 1 - 1e-9):
        for n in range(1, 200):
            for se, df in ((0.0, math.inf), (0.0, 7.0), (1e-3, 7.0)):
                got = proportion_interval(Interval(p, p - 0.1, p + 0.1, se, df), n)
                assert 0.0 <= got.low <= p <= got.high <= 1.0, (p, n, se, df, got)


def test_a_left_out_seed_stratum_still_counts_in_the_df():
    """Two arms of 8 seeds × 1,000 problems of coin flips: no seed or problem effect, so the seeds' spread
    V_r, the problems' V_b and the seed × problem part V_rb all estimate one noise. Here V_r < V_rb: the
    seed stratum is left out and V = V_b. Its df are not V_b's 999 (p-values no 8 seeds support: the
    horizon run's TOST p of 1.4e-31 at df 1,393) but Welch–Satterthwaite's over every spread that decided
    V, V²/(V_b²/999 + V_r²/7 + V_rb²/(7·999)) = 8.5, near the seeds' 7, by hand."""
    rng = np.random.default_rng(5)
    baseline = (rng.random((8, 1000)) < 0.5).astype(float)
    treated = (rng.random((8, 1000)) < 0.5).astype(float)
    seeds, problems = baseline.shape
    scores = (treated - baseline - (treated - baseline).mean()) / (seeds * problems)
    rows, columns = scores.sum(axis=1), scores.sum(axis=0)
    v_r = seeds / (seeds - 1) * ((rows - rows.mean()) ** 2).sum()
    v_b = problems / (problems - 1) * ((columns - columns.mean()) ** 2).sum()
    centred = scores - scores.mean(axis=1, keepdims=True) - scores.mean(axis=0, keepdims=True) + scores.mean()
    v_rb = seeds * problems / ((seeds - 1) * (problems - 1)) * (centred ** 2).sum()
    assert v_r < v_rb < v_b  # the seeds are left out, the problems kept
    interval = paired_difference(treated, baseline)
    assert interval.se ** 2 == pytest.approx(v_b)
    expected = v_b ** 2 / (v_b ** 2 / 999 + v_r ** 2 / 7 + v_rb ** 2 / (7 * 999))
    assert interval.df == pytest.approx(expected) and 7 < interval.df < 9
    # seeds that answer alike leave nothing out: the interval is the problems' alone, at their df
    same = paired_difference(np.vstack([treated[0]] * 4), np.vstack([baseline[0]] * 4))
    assert same.df == pytest.approx(999)


def test_a_block_whose_seed_and_benchmark_strata_are_both_left_out_counts_once_in_the_df():
    """3 seeds × 4 problems, right only at (1, 3) and (2, 2); the scores (x − 1/6)/12. In units of 1/12²: the seeds'
    totals −2/3, 1/3, 1/3 spread V_r = 3/2 · 6/9 = 1.0 (df 2), the problems' −1/2, −1/2, 1/2, 1/2 spread
    V_b = 4/3 · 1 = 4/3 (df 3), the seed × problem part is V_rb = 7/3 (df 6). Both strata are at or below it, so
    both are left out and V = V_rb, the block on its own; the df count it once and the left-out seeds' V_r²/2:
    V_rb² / (V_rb²/6 + V_r²/2) = 294/76 = 3.868 (counted twice, 294/125 = 2.352)."""
    correct = np.zeros((3, 4))
    correct[1, 3] = correct[2, 2] = 1.0
    interval = mean_interval(correct)
    assert interval.se ** 2 == pytest.approx(7 / 3 / 12 ** 2)
    assert interval.df == pytest.approx(294 / 76)


def test_a_seed_whose_difference_is_exactly_zero_counts_among_the_sign_flips_that_reach_the_observed_sum():
    """Differences 0, 0.1, 0.2, 0.3: of the 16 sign vectors, the identity and the one that flips the 0 alone give
    the observed sum 0.6 (a subset mean equal to μ = 0 counts), so the one-sided p is 2/16 and the two-sided 0.25,
    not the floor 2^(1−4) = 0.125 of four seeds on one side. Likewise a subset mean equal to the TOST's margin."""
    from grpo_lambda.seed_level import seed_interval
    from grpo_lambda.signflip import sign_flip_equivalence_p, sign_flip_p

    assert sign_flip_p([0.0, 0.1, 0.2, 0.3]) == pytest.approx(0.25)
    assert seed_interval([0.0, 0.1, 0.2, 0.3]).p_value() == pytest.approx(0.25)
    assert sign_flip_p([0.1, 0.2, 0.3, 0.4]) == pytest.approx(0.125)
    # 0 and 0.5 at margin 0.5: against H0 mean ≥ 0.5 the subset {0.5} sits on the margin: (1 + 1)/4
    assert sign_flip_equivalence_p([0.0, 0.5], 0.5) == pytest.approx(0.5)


def test_the_sign_flip_equivalence_p_is_the_larger_of_its_two_one_sided_tests():
    """TOST by sign flips at margin 1: five differences of 0 lie inside it, each side's exact p 2^-5; five of 2
    (or −2) lie outside, and the side they are beyond gives 1; none is NaN; above 16 values the t test's."""
    from grpo_lambda.signflip import sign_flip_equivalence_p
    from grpo_lambda.stats import t_interval

    assert sign_flip_equivalence_p([0.0] * 5, 1.0) == pytest.approx(2 ** -5)
    assert sign_flip_equivalence_p([2.0] * 5, 1.0) == 1.0 and sign_flip_equivalence_p([-2.0] * 5, 1.0) == 1.0
    assert math.isnan(sign_flip_equivalence_p([], 1.0))
    assert sign_flip_equivalence_p([0.0] * 16, 1.0) == pytest.approx(2 ** -16)  # 16 values: still exact
    values = np.linspace(-0.2, 0.3, 17)
    assert sign_flip_equivalence_p(values, 0.5) == pytest.approx(t_interval(values).equivalence_p(0.5))
