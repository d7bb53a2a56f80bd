"""The seed-level procedure (grpo_lambda.seed_level.seed_interval: the exact sign-flip test inverted) against
the alternatives it was chosen over, by simulation: coverage of the 95% interval of a mean of n per-seed
values (a run's AUC, a per-seed paired difference) when seeds are normal, skewed (lognormal) or collapse
(15% of seeds fall to 0), at n = 4, 8, 12. The numbers docs/statistics.md quotes are this test's output
(the same seed, so the same digits); the test fails if they differ, or if the chosen procedure falls
below what the docs claim for it.

    python tests/test_seed_interval.py          # prints the table (about 3 minutes on 2 cores)
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from grpo_lambda.seed_level import seed_interval
from grpo_lambda.stats import student_t_quantile, t_interval

REPO = Path(__file__).resolve().parents[1]
REPLICATES = 4000
SEED = 20261127
SIZES = (4, 8, 12)
BOOTSTRAP = 500
PROCEDURES = ("sign-flip", "t", "bootstrap-t", "percentile bootstrap", "Hodges-Lehmann")


def draw(scenario: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """n per-seed values and their true mean."""
    if scenario == "normal":
        return rng.normal(0.0, 1.0, n), 0.0
    if scenario == "lognormal(0, 0.5)":
        return rng.lognormal(0.0, 0.5, n), float(np.exp(0.125))
    if scenario == "lognormal(0, 1)":
        return rng.lognormal(0.0, 1.0, n), float(np.exp(0.5))
    if scenario == "15% collapsed":  # a seed's run collapses (value 0) with chance 0.15, else near 0.5
        collapsed = rng.random(n) < 0.15
        return np.where(collapsed, 0.0, rng.normal(0.5, 0.1, n)), 0.85 * 0.5
    raise ValueError(scenario)


SCENARIOS = ("normal", "lognormal(0, 0.5)", "lognormal(0, 1)", "15% collapsed")


def _bootstrap(values: np.ndarray, rng: np.random.Generator) -> tuple[tuple, tuple]:
    """(percentile, studentized) 95% bootstrap intervals of the mean."""
    n = len(values)
    resampled = values[rng.integers(0, n, (BOOTSTRAP, n))]
    means = resampled.mean(axis=1)
    percentile = tuple(np.quantile(means, [0.025, 0.975]))
    se = values.std(ddof=1) / np.sqrt(n)
    spread = resampled.std(axis=1, ddof=1) / np.sqrt(n)
    ok = spread > 0
    if not ok.any() or se == 0:
        return percentile, (values.mean(), values.mean())
    t = (means[ok] - values.mean()) / spread[ok]
    low_q, high_q = np.quantile(t, [0.025, 0.975])
    return percentile, (values.mean() - high_q * se, values.mean() - low_q * se)


@lru_cache(maxsize=None)
def _signed_rank_critical(n: int) -> int:
    """The count c of Walsh averages cut from each end: the largest c with P(W < c) ≤ 0.025 (exact)."""
    masks = np.arange(2 ** n)[:, None] >> np.arange(n) & 1
    sums = masks @ np.arange(1, n + 1)
    c = 0
    while np.mean(sums <= c) <= 0.025:
        c += 1
    return c


def _hodges_lehmann(values: np.ndarray) -> tuple[float, float]:
    """The Walsh-average interval of the Wilcoxon signed-rank test (exact critical value)."""
    n = len(values)
    c = _signed_rank_critical(n)
    if c == 0:
        return -np.inf, np.inf
    i, j = np.triu_indices(n)
    walsh = np.sort((values[i] + values[j]) / 2)
    return walsh[c - 1], walsh[len(walsh) - c]


def coverage(replicates: int = REPLICATES, seed: int = SEED) -> dict[tuple[str, int], dict[str, float]]:
    """{(scenario, n): {procedure: share of replicates whose 95% interval holds the true mean}}."""
    rng = np.random.default_rng(seed)
    out = {}
    for n in SIZES:
        for scenario in SCENARIOS:
            hits = dict.fromkeys(PROCEDURES, 0)
            for _ in range(replicates):
                values, truth = draw(scenario, n, rng)
                percentile, studentized = _bootstrap(values, rng)
                found = {"sign-flip": seed_interval(values), "t": t_interval(values)}
                bounds = {name: (i.low, i.high) for name, i in found.items()}
                bounds.update({"bootstrap-t": studentized, "percentile bootstrap": percentile,
                               "Hodges-Lehmann": _hodges_lehmann(values)})
                for name, (low, high) in bounds.items():
                    hits[name] += bool(low <= truth <= high)
            out[(scenario, n)] = {name: count / replicates for name, count in hits.items()}
    return out


def size(replicates: int = REPLICATES, seed: int = SEED + 1) -> dict[tuple[str, int], dict[str, float]]:
    """{(scenario, n): {procedure: share of replicates that call a difference}} when the two arms of a
    seed are exchangeable (no effect): the per-seed difference x − x' of two draws of the scenario. Every
    procedure's 95% interval is read as a test (0 outside: a difference), at level 0.05."""
    rng = np.random.default_rng(seed)
    out = {}
    for n in SIZES:
        for scenario in SCENARIOS:
            calls = dict.fromkeys(PROCEDURES, 0)
            for _ in range(replicates):
                values = draw(scenario, n, rng)[0] - draw(scenario, n, rng)[0]
                percentile, studentized = _bootstrap(values, rng)
                found = {"sign-flip": seed_interval(values), "t": t_interval(values)}
                bounds = {name: (i.low, i.high) for name, i in found.items()}
                bounds.update({"bootstrap-t": studentized, "percentile bootstrap": percentile,
                               "Hodges-Lehmann": _hodges_lehmann(values)})
                for name, (low, high) in bounds.items():
                    calls[name] += bool(low > 0 or high < 0)
            out[(scenario, n)] = {name: count / replicates for name, count in calls.items()}
    return out


def table(result) -> str:
    """The Markdown table docs/statistics.md quotes."""
    lines = ["| seeds | per-seed values | " + " | ".join(PROCEDURES) + " |", "|---|---|" + "---|" * len(PROCEDURES)]
    for (scenario, n), shares in result.items():
        lines.append(f"| {n} | {scenario} | " + " | ".join(f"{shares[p]:.3f}" for p in PROCEDURES) + " |")
    return "\n".join(lines) + "\n"


def test_the_exact_floor_and_no_interval_at_four_seeds():
    """Fast: the facts the choice rests on, at their stated values."""
    agreeing = seed_interval([0.1, 0.2, 0.15, 0.3])
    assert agreeing.p_value() == pytest.approx(2 ** (1 - 4)) and agreeing.low == -np.inf
    assert seed_interval(np.linspace(0.1, 0.8, 8)).p_value() == pytest.approx(2 ** (1 - 8))
    # the t test calls the same four seeds decisive: p 0.022
    assert t_interval([0.1, 0.2, 0.15, 0.3]).p_value() == pytest.approx(0.021875, abs=1e-5)
    assert student_t_quantile(0.975, 3) == pytest.approx(3.182446, rel=1e-6)


@pytest.mark.slow
def test_coverage_of_the_seed_level_procedures_is_what_the_docs_quote():
    result, null = coverage(), size()
    print("\n" + table(result) + "\n" + table(null))
    docs = (REPO / "docs" / "statistics.md").read_text(encoding="utf-8")
    for name, shown in (("coverage", result), ("size", null)):
        quoted = re.search(rf"<!-- {name} table -->\n(.*?)<!-- end {name} table -->", docs, re.S)
        assert quoted, f"docs/statistics.md has no {name} table"
        assert quoted.group(1) == table(shown), f"docs/statistics.md quotes other {name} figures than the simulation"
    # the sign-flip test never calls a difference between exchangeable arms more often than 5% (it is exact
    # there, whatever the seeds' skew); the t test and the bootstraps do, at 4 seeds or with skewed seeds
    for key, shares in null.items():
        assert shares["sign-flip"] <= 0.05 + 0.01, key
    # the bootstrap-t, which covers skewed means best, calls differences that are not there
    assert null[("lognormal(0, 1)", 8)]["bootstrap-t"] > 0.07 and null[("lognormal(0, 1)", 12)]["bootstrap-t"] > 0.07
    chosen = {key: shares["sign-flip"] for key, shares in result.items()}
    # at 4 seeds no 95% sign-flip interval exists (the tables say "too few seeds"): every replicate covers
    # but those whose four seeds all collapsed to exactly 0 (a point interval, 0.15^4 of them)
    assert all(chosen[(s, 4)] >= 0.99 for s in SCENARIOS)
    # the claims docs/statistics.md makes for the chosen procedure (Monte Carlo SE about 0.005)
    for n in (8, 12):
        assert chosen[("normal", n)] >= 0.935
        assert chosen[("lognormal(0, 0.5)", n)] >= 0.915
        assert chosen[("15% collapsed", n)] >= 0.87
        assert chosen[("lognormal(0, 1)", n)] >= 0.84
        # never worse than the t interval by more than Monte Carlo noise
        for scenario in SCENARIOS:
            assert chosen[(scenario, n)] >= result[(scenario, n)]["t"] - 0.01
    # where the chosen procedure stays under 93% no simulated one reaches it reliably (the docs say so):
    # 15% collapsed seeds at 8
    assert max(result[("15% collapsed", 8)].values()) < 0.93


if __name__ == "__main__":
    print("<!-- coverage table -->\n" + table(coverage()) + "<!-- end coverage table -->\n")
    print("<!-- size table -->\n" + table(size()) + "<!-- end size table -->")
