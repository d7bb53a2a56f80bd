"""Bootstrap intervals: exact estimates, coverage on simulated data with a known truth, pairing."""

from __future__ import annotations

import math

import numpy as np
import pytest

from grpo_lambda import stats
from grpo_lambda.tables.cells import Cells
from grpo_lambda.tables.options import REPORT_DEFAULTS
from grpo_lambda.stats import Term, bootstrap_linear, bootstrap_mean, paired_difference


def test_estimate_is_the_pooled_mean_and_lies_in_its_interval():
    correct = np.array([[1, 0, 1, 1], [0, 0, 1, 1.0]])
    interval = bootstrap_mean(correct, n_boot=500)
    assert interval.estimate == pytest.approx(5 / 8)
    assert interval.low <= interval.estimate <= interval.high


def test_missing_entries_are_left_out_of_the_mean():
    correct = np.array([[1, 0, np.nan], [1, 1, 1.0]])
    assert bootstrap_mean(correct, n_boot=0).estimate == pytest.approx(4 / 5)
    assert np.isnan(bootstrap_mean(correct, n_boot=0).low)


def test_same_seed_gives_the_same_interval_and_another_seed_another():
    correct = (np.random.default_rng(0).random((3, 50)) < 0.4).astype(float)
    assert bootstrap_mean(correct, seed=7) == bootstrap_mean(correct, seed=7)
    assert bootstrap_mean(correct, seed=7) != bootstrap_mean(correct, seed=8)


def test_coverage_over_problems_is_nominal():
    """Many simulated benchmarks of 200 Bernoulli(0.3) problems: the 95% interval covers 0.3 in
    about 95% of them (binomial s.e. of the coverage with 300 datasets ≈ 1.3 points)."""
    rng = np.random.default_rng(1)
    truth, datasets = 0.3, 300
    hits = 0
    for i in range(datasets):
        interval = bootstrap_mean((rng.random(200) < truth).astype(float), n_boot=1000, seed=i)
        hits += interval.low <= truth <= interval.high
    assert 0.92 <= hits / datasets <= 0.98


def test_coverage_over_problems_and_seeds():
    """Problems drawn from a population of difficulties, seeds shifting accuracy: the two-way
    bootstrap covers the population mean at least nominally (it is slightly conservative)."""
    rng = np.random.default_rng(2)
    truth, datasets, hits = 0.4, 200, 0
    for i in range(datasets):
        difficulty = rng.beta(2, 3, size=100)  # mean 0.4
        shift = rng.normal(0, 0.05, size=5)
        p = np.clip(difficulty[None, :] + shift[:, None], 0, 1)
        interval = bootstrap_mean((rng.random(p.shape) < p).astype(float), n_boot=1000, seed=i)
        hits += interval.low <= truth <= interval.high
    assert 0.92 <= hits / datasets <= 0.995


def test_paired_difference_detects_a_real_gap():
    rng = np.random.default_rng(3)
    difficulty = rng.random(300)
    baseline = (rng.random((2, 300)) < difficulty).astype(float)
    better = (rng.random((2, 300)) < np.clip(difficulty + 0.15, 0, 1)).astype(float)
    interval = paired_difference(better, baseline, n_boot=1000)
    assert interval.estimate == pytest.approx(better.mean() - baseline.mean())
    assert interval.excludes(0.0) and interval.low > 0


def test_paired_difference_does_not_flag_a_null_gap():
    rng = np.random.default_rng(4)
    flagged = 0
    for i in range(40):
        difficulty = rng.random(300)
        a = (rng.random((2, 300)) < difficulty).astype(float)
        b = (rng.random((2, 300)) < difficulty).astype(float)
        flagged += paired_difference(a, b, n_boot=500, seed=i).excludes(0.0)
    assert flagged <= 6  # about 5% of 40 expected; 6 or more has probability < 5%


def test_pairing_narrows_the_interval_when_problems_dominate():
    """The same problems answered by two close methods: the paired interval is far narrower than
    one that resamples the two arms' problems independently."""
    rng = np.random.default_rng(5)
    easy = rng.random(400) < 0.5
    a = easy.astype(float)[None, :]
    b = a.copy()
    b[0, :20] = 1 - b[0, :20]  # differ on 20 of 400 problems
    paired = paired_difference(a, b, n_boot=1000)
    unpaired = bootstrap_linear([Term(1.0, a, "a", "pa"), Term(-1.0, b, "b", "pb")], n_boot=1000)
    assert paired.estimate == pytest.approx(unpaired.estimate)
    assert (paired.high - paired.low) < 0.5 * (unpaired.high - unpaired.low)


def test_linear_combination_of_benchmarks():
    a = np.array([1, 1, 0, 0.0])
    b = np.array([1, 0, 0, 0, 0, 0.0])
    average = bootstrap_linear([Term(0.5, a, "run", "A"), Term(0.5, b, "run", "B")], n_boot=200)
    assert average.estimate == pytest.approx(0.5 * 0.5 + 0.5 / 6)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="terms"):
        bootstrap_linear([])
    with pytest.raises(ValueError, match="level"):
        bootstrap_mean(np.ones(3), level=1.5)
    with pytest.raises(ValueError, match="n_boot"):
        bootstrap_mean(np.ones(3), n_boot=-1)
    with pytest.raises(ValueError, match="disagree"):
        bootstrap_linear([Term(1, np.ones(3), "s", "p"), Term(1, np.ones(4), "s2", "p")])


def test_cache_only_saves_time():
    rng = np.random.default_rng(6)
    a, b = (rng.random((3, 80)) < 0.5).astype(float), (rng.random((3, 80)) < 0.6).astype(float)
    terms = [Term(1.0, a, "run a", "bench"), Term(-1.0, b, "run b", "bench")]
    cache: dict = {}
    first = bootstrap_linear(terms, n_boot=300, cache=cache)
    assert cache  # the draws were kept
    assert bootstrap_linear(terms, n_boot=300, cache=cache) == first == bootstrap_linear(terms, n_boot=300)


# Pinned after a mutation run (docs/testing.md): each test below fails under a surviving mutant.


def test_an_interval_that_touches_the_value_does_not_exclude_it():
    from grpo_lambda.stats import Interval

    # e.g. a paired gap of steps whose replicates are all 0: [0, 0] is not distinguishable from 0
    assert not Interval(0.0, 0.0, 0.0).excludes(0.0)
    assert not Interval(0.05, 0.0, 0.1).excludes(0.0)
    assert not Interval(-0.05, -0.1, 0.0).excludes(0.0)
    assert Interval(0.05, 1e-12, 0.1).excludes(0.0) and Interval(-0.05, -0.1, -1e-12).excludes(0.0)


def test_unobserved_entries_add_nothing_to_a_replicate():
    # Every observed verdict is wrong; the unobserved ones must not count as right in any replicate.
    correct = np.zeros((3, 40))
    correct[:, ::2] = np.nan
    interval = bootstrap_mean(correct, n_boot=300)
    assert (interval.estimate, interval.low, interval.high) == (0.0, 0.0, 0.0)


def test_shapes_and_levels_at_the_edges():
    assert bootstrap_mean(np.ones((1, 1)), n_boot=50).estimate == 1.0  # one seed, one problem
    with pytest.raises(ValueError, match="shape"):
        bootstrap_mean(np.ones((2, 2, 2)))
    for level in (0.0, 1.0):
        with pytest.raises(ValueError, match="level"):
            bootstrap_mean(np.ones(3), level=level)


def test_the_unbiased_pass_at_k_by_hand():
    from grpo_lambda.stats import pass_at_k

    assert pass_at_k(4, 1, 2) == pytest.approx(1 - 3 / 6)     # 1 - C(3,2)/C(4,2)
    assert pass_at_k(5, 2, 3) == pytest.approx(1 - 1 / 10)    # 1 - C(3,3)/C(5,3)
    assert pass_at_k(8, 3, 1) == pytest.approx(3 / 8)         # k = 1: the share of correct samples
    assert pass_at_k(3, 0, 3) == 0.0 and pass_at_k(3, 1, 3) == 1.0 and pass_at_k(6, 5, 2) == 1.0
    with pytest.raises(ValueError, match="n=2, c=3, k=1"):
        pass_at_k(2, 3, 1)


def test_majority_vote_takes_the_most_frequent_answer_first_seen_on_ties_and_ignores_blanks():
    from grpo_lambda.stats import majority_correct

    assert majority_correct(["4", "5", "4", None], [1, 0, 1, 0]) == 1.0
    assert majority_correct(["5", "4", "5", ""], [0, 1, 0, 0]) == 0.0
    assert majority_correct(["4", "5"], [1, 0]) == 1.0 and majority_correct(["5", "4"], [0, 1]) == 0.0
    assert majority_correct([None, None], [0, 0]) == 0.0


# --- interval width against the binomial width -----------------------------------------------------


@pytest.mark.parametrize("level, z", [(0.90, 1.6448536), (0.95, 1.9599640)])
def test_bootstrap_width_is_the_binomial_width_of_its_level(level, z):
    """One seed, n problems, accuracy p: the percentile interval is about 2 z √(p(1−p)/n) wide. The
    90% width is 16% below the 95% one, twice the tolerance, so one level cannot pass for the other."""
    n, p = 2000, 0.3
    correct = np.zeros(n)
    correct[: int(p * n)] = 1.0
    analytic = 2 * z * math.sqrt(p * (1 - p) / n)
    interval = stats.bootstrap_mean(correct, n_boot=4000, level=level, seed=1)
    assert (interval.high - interval.low) == pytest.approx(analytic, rel=0.06)
    # the tables ask for the report's level through Cells
    options = {"bootstrap": 4000, "level": level, "seed": 1}
    cells = Cells(_empty_samples(), [], options)
    table_interval = cells.interval([stats.Term(1.0, correct, "s", "p")])
    assert (table_interval.high - table_interval.low) == pytest.approx(analytic, rel=0.06)
    assert REPORT_DEFAULTS["level"] == 0.95


def _empty_samples():
    import pandas as pd

    return pd.DataFrame({column: [] for column in ("mode", "benchmark", "id", "model", "dataset", "variant",
                                                   "step", "seed", "correct")})
