"""The ``paired`` table pairs over problems and seeds: a small gap between two arms that get mostly the same
problems right is distinguishable, although each arm's accuracy alone is uncertain by far more than the gap.

The synthetic tree of results_tree.py give every pair of arms either a large gap or none, where a paired
and an unpaired interval reach the same verdict; here the arms agree on most problems and differ on a
few, in both directions, so the per-problem differences are small and not constant.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from grpo_lambda.tables.cells import Cells
from grpo_lambda.tables.collect import collect_samples
from grpo_lambda.config.report import report_options
from grpo_lambda.tables.paired import paired_table

SEEDS = [0, 1]
Z = 1.959964  # the standard normal's 0.975 quantile


def _right(n: int, ranges: list[tuple[int, int]]) -> np.ndarray:
    """A 0/1 verdict vector of ``n`` problems, 1 on the half-open ``ranges``."""
    verdicts = np.zeros(n)
    for start, stop in ranges:
        verdicts[start:stop] = 1.0
    return verdicts


# Per benchmark: the baseline's verdicts and the variant's. The variant gets the baseline's problems
# right but for a few (lost) and a few more (gained).
VERDICTS = {
    # 300 problems: baseline 0..149 right; variant loses 0, 1 and gains 150..163: +12/300 = +0.04
    "b300": (_right(300, [(0, 150)]), _right(300, [(2, 164)])),
    # 200 problems: baseline 0..59 right; variant loses 0 and gains 60..69: +9/200 = +0.045
    "b200": (_right(200, [(0, 60)]), _right(200, [(1, 70)])),
}


def make_config() -> dict:
    return {
        "models": {"m": {"source": "x"}},
        "datasets": {"d": {"source": "registry"}},
        "benchmarks": {b: {"source": "registry"} for b in VERDICTS},
        "variants": {
            "grpo": {"objective": "grpo"},
            "lam": {"objective": "grpo_lambda", "lam": 0.99, "style": "recent", "update": "trace"},
        },
        "seeds": SEEDS,
        "rl": {"max_steps": 10},
        "evaluation": {"checkpoints": []},
    }


@pytest.fixture(scope="module")
def paired(tmp_path_factory):
    """The paired table of a results tree holding VERDICTS; both seeds of an arm answer alike, so
    resampling seeds moves nothing and the interval is the problems' alone."""
    root = tmp_path_factory.mktemp("paired")
    config = make_config()
    for benchmark, arms in VERDICTS.items():
        for variant, verdicts in zip(("grpo", "lam"), arms):
            for seed in SEEDS:
                folder = Path(root) / "m" / "d" / variant / f"seed{seed}" / "eval" / "final"
                folder.mkdir(parents=True, exist_ok=True)
                lines = [json.dumps({"id": pid, "mode": "greedy", "sample": 0, "correct": bool(right)})
                         for pid, right in enumerate(verdicts)]
                (folder / f"{benchmark}.jsonl").write_text("\n".join(lines) + "\n")
    options = report_options(config)
    cells = Cells(collect_samples(root, config), config, options)
    return paired_table(cells, config, options)


def _spread(benchmarks: list[str]) -> tuple[float, float, float]:
    """(gap, paired sd, unpaired sd) of the unweighted mean over ``benchmarks`` of variant − baseline:
    the sd of a mean of n values is their sd / √n (n − 1 in the variance); paired over the per-problem
    differences, unpaired over the two arms on their own; benchmarks are independent."""
    gap, paired_var, unpaired_var = 0.0, 0.0, 0.0
    w = 1.0 / len(benchmarks)
    for benchmark in benchmarks:
        base, variant = VERDICTS[benchmark]
        n = len(base)
        gap += w * (variant.mean() - base.mean())
        paired_var += w**2 * np.var(variant - base, ddof=1) / n
        unpaired_var += w**2 * (np.var(variant, ddof=1) + np.var(base, ddof=1)) / n
    return gap, float(np.sqrt(paired_var)), float(np.sqrt(unpaired_var))


@pytest.mark.parametrize("benchmark, members", [("b300", ["b300"]), ("b200", ["b200"]),
                                                ("average", ["b300", "b200"])])
@pytest.mark.parametrize("dataset, method", [("d", "lam")])
def test_a_small_gap_on_mostly_shared_problems_is_distinguishable(paired, benchmark, members, dataset, method):
    gap, paired_sd, unpaired_sd = _spread(members)
    # The fixture's point: resampling the arms apart would give an interval around the gap wider
    # than the gap on either side, and over 2.5 times as wide as the paired one (2.9 to 3.1 here).
    assert Z * unpaired_sd > gap > 0 and unpaired_sd > 2.5 * paired_sd
    row = paired[(paired.dataset == dataset) & (paired.method == method) & (paired.benchmark == benchmark)]
    assert len(row) == 1
    row = row.iloc[0]
    assert row["diff"] == pytest.approx(gap)
    width = row.diff_high - row.diff_low
    # The seeds agree, so the interval is over problems alone: 2·t·sd with t on many degrees of freedom.
    assert 2 * Z * paired_sd < width < 1.02 * 2 * Z * paired_sd
    assert row.df > 100 and row.p < 0.01 and row.verdict == "ahead"
    assert row.diff_low < gap < row.diff_high
    # The gap is at least 2.7 paired sds (3.0, 2.8 and 4.1 here): the paired interval excludes 0.
    assert gap > 2.7 * paired_sd
    assert row.diff_low > 0 and bool(row.distinguishable)


def test_a_model_of_one_training_set_has_no_all_row_repeating_it(paired):
    """Over one training set the pooled row would be the set's own row again: a comparison counted twice."""
    assert "all" not in set(paired["dataset"])
    average = paired[paired["benchmark"] == "average"]
    assert list(average["family"]) == ["primary"] and list(average["role"]) == ["primary"]
    assert set(paired[paired["benchmark"] != "average"]["family"]) == {"per-suite accuracy"}


def test_the_seed_count_is_of_the_runs_both_arms_hold():
    from grpo_lambda.stats import Term
    from grpo_lambda.tables.paired import seed_count

    treated = [Term(1.0, np.ones((4, 3)), "runs", "p", rows=(0, 1, 2, 3))]
    base = [Term(-1.0, np.ones((2, 3)), "runs", "p", rows=(0, 2))]  # the baseline lacks seeds 1 and 3
    assert seed_count(treated) == 4 and seed_count(treated, base) == 2
    other_sft = [Term(-1.0, np.ones((2, 3)), "other", "p", rows=(0, 2))]  # same seeds, another SFT model
    assert seed_count(treated, other_sft) == 0


def test_each_row_has_one_family_a_check_line_its_own_and_a_simple_effect_only_in_the_2x2():
    from grpo_lambda.tables.paired import family_of

    options = {"checks": ["chk"], "primary": "paired", "factorial": None, "baseline": "grpo"}
    assert family_of(options, ["chk"], "d", "average", False) == ("check", "check: chk")
    assert family_of(options, ["lam"], "d", "average", False) == ("primary", "primary")
    assert family_of(options, ["lam"], "d", "b300", False) == ("exploratory", "per-suite accuracy")
    # several training sets: the pooled row is primary, each set's own row exploratory
    assert family_of(options, ["lam"], "all", "average", True) == ("primary", "primary")
    assert family_of(options, ["lam"], "d", "average", True) == ("exploratory", "mean accuracy")
    cells = {(False, False): "grpo", (False, True): "clamp", (True, False): "trace0", (True, True): "trace"}
    two_by_two = {**options, "primary": "factorial", "factorial": {"factors": ("trace", "clamp"), "cells": cells}}
    assert family_of(two_by_two, ["clamp"], "d", "average", False) == ("factorial", "")
    assert family_of(two_by_two, ["trace"], "d", "average", False) == ("exploratory", "mean accuracy")


def test_a_methods_pooled_row_takes_only_the_training_sets_both_it_and_the_baseline_ran_on():
    """Two training sets, the baseline run on d1 only (then the method on d1 only): the row pooled over training
    sets is the difference on d1, not the method's mean over d1 and d2 minus the baseline's on d1 (unpaired sets
    mixed in)."""
    import pandas as pd

    from grpo_lambda.tables.keys import KEYS

    config = {**make_config(), "datasets": {"d1": {"source": "registry"}, "d2": {"source": "registry"}}}
    options = report_options(config)
    # correct answers of 100 per seed: the method is +5 on d1, and much higher again on d2 (its easier set)
    right = {("d1", "grpo"): 40, ("d1", "lam"): 45, ("d2", "grpo"): 70, ("d2", "lam"): 90}
    rows = [{"model": "m", "dataset": dataset, "variant": variant, "seed": seed, "step": "final", "benchmark": b,
             "id": f"p{p}", "mode": "greedy", "correct": float(p < k + seed)}
            for (dataset, variant), k in right.items() for seed in SEEDS for b in VERDICTS for p in range(100)]
    samples = pd.DataFrame(rows).astype({"seed": "Int64"})[KEYS + ["id", "mode", "correct"]]
    for missing in ("grpo", "lam"):
        present = samples[~((samples["dataset"] == "d2") & (samples["variant"] == missing))]
        table = paired_table(Cells(present, config, options), config, options)
        rows = table[table["benchmark"] == "average"].set_index("dataset")  # lam's rows: d1's, and GRPO-λ's pooled
        assert set(rows.index) == {"d1", "all"}, missing
        assert rows.loc["all", "diff"] == pytest.approx(0.05, abs=1e-12), missing
        assert rows.loc["all", "accuracy"] == pytest.approx(rows.loc["d1", "accuracy"], abs=1e-12), missing
        assert rows.loc["all", "diff"] == pytest.approx(rows.loc["d1", "diff"], abs=1e-12), missing
        assert rows.loc["all", "seeds"] == len(SEEDS), missing
