"""grpo_lambda.tables.cells: per-problem values as (seeds x problems) matrices per cell, and the pairing key
that decides which runs of two cells are the same run (started from the same SFT model with the same seed)."""

import numpy as np
import pandas as pd
import pytest

from grpo_lambda.stats import linear_interval
from grpo_lambda.tables.cells import Cells, estimate, pairing_key, scaled, targets, verdicts

CONFIG = {"models": {"tiny": {}, "big": {}}, "benchmarks": {"b1": {}, "b2": {}}}
OPTIONS = {"level": 0.95}


def test_the_pairing_key_names_the_sft_model_a_run_starts_from_model_and_training_set_both():
    key = lambda model, dataset, variant, config=CONFIG: pairing_key(config, model, dataset, variant)  # noqa: E731
    assert key("tiny", "arith", "grpo") == key("tiny", "arith", "lam") == ("rl", "tiny/arith/sft")
    different = {key("tiny", "arith", "grpo"), key("tiny", "gsm8k", "grpo"), key("big", "arith", "grpo"),
                 key("tiny", "arith", "sft"), key("tiny", "gsm8k", "sft"), key("big", "arith", "sft")}
    assert len(different) == 6  # every model, every training set, RL apart from the SFT stratum
    assert key("tiny", "arith", "sft") == ("sft", "tiny", "arith")
    # One SFT model for all of tiny's training sets (sft.data open_r1): its RL runs pair across them.
    shared = {**CONFIG, "models": {"tiny": {"sft": {"data": "open_r1"}}, "big": {}}}
    assert key("tiny", "arith", "grpo", shared) == key("tiny", "gsm8k", "lam", shared) == ("rl", "tiny/sft")
    assert key("big", "arith", "grpo", shared) != key("big", "gsm8k", "grpo", shared)
    assert key("tiny", "arith", "sft", shared) != key("tiny", "gsm8k", "sft", shared)


def greedy(rows):
    """A samples frame of greedy verdicts: (model, dataset, variant, seed, benchmark, id, correct) rows."""
    frame = pd.DataFrame(rows, columns=["model", "dataset", "variant", "seed", "benchmark", "id", "correct"])
    return frame.assign(step="final", mode="greedy", sample=0).astype({"seed": "Int64"})


def test_cells_place_each_verdict_at_its_seed_and_problem_whatever_the_row_order():
    samples = greedy([("tiny", "arith", "grpo", 1, "b1", "q", 1.0), ("tiny", "arith", "grpo", 0, "b1", "r", 1.0),
                      ("tiny", "arith", "grpo", 0, "b1", "p", 0.0), ("tiny", "arith", "lam", 3, "b1", "p", 1.0),
                      ("tiny", "arith", "sft", None, "b1", "q", 0.0)])
    cells = Cells(samples, CONFIG, OPTIONS)
    seeds, matrix = cells.matrices[("tiny", "arith", "grpo", "final", "b1")]
    assert seeds == [0, 1]  # columns: the benchmark's problems sorted, p q r, the same in every cell
    np.testing.assert_array_equal(matrix, [[0.0, np.nan, 1.0], [np.nan, 1.0, np.nan]])
    assert cells.matrices[("tiny", "arith", "sft", "final", "b1")][0] == [None]
    assert cells.seeds("tiny", "arith", "grpo") == [0, 1] and cells.seeds("tiny", "arith", "lam") == [3]
    assert cells.terms("tiny", "arith", "grpo", "final", ["b1", "b2"]) is None  # b2 not evaluated
    (term,) = cells.terms("tiny", "arith", "grpo", "final", ["b1"], seed=1)
    assert (term.seeds, term.problems, term.rows, term.weight) == (("rl", "tiny/arith/sft"), "b1", (1,), 1.0)
    assert cells.terms("tiny", "arith", "grpo", "final", ["b1"], seed=2) is None
    assert estimate(cells.terms("tiny", "arith", "grpo", "final", ["b1"])) == pytest.approx(2 / 3)
    assert estimate(scaled(cells.terms("tiny", "arith", "grpo", "final", ["b1"]), -1.0)) == pytest.approx(-2 / 3)
    assert targets(["b1", "b2"]) == [("b1", ["b1"]), ("b2", ["b2"]), ("average", ["b1", "b2"])]


def test_two_variants_pair_by_seed_on_one_sft_model_and_not_across_training_sets():
    """Two arms with the same verdicts: on one training set (one SFT model) their seeds are the same runs and
    the difference is exactly 0 with no width; across training sets (two SFT models) the runs are independent,
    so the same numbers leave a difference of 0 with a nonzero width."""
    rows = []
    verdicts_by_seed = {0: [1.0, 0.0, 1.0, 0.0], 1: [1.0, 1.0, 0.0, 0.0], 2: [0.0, 1.0, 1.0, 1.0]}
    for dataset in ("arith", "gsm8k"):
        for variant in ("grpo", "lam"):
            for seed, values in verdicts_by_seed.items():
                rows += [("tiny", dataset, variant, seed, "b1", f"p{i}", v) for i, v in enumerate(values)]
    cells = Cells(greedy(rows), CONFIG, OPTIONS)
    same = cells.terms("tiny", "arith", "lam", "final", ["b1"]) + scaled(
        cells.terms("tiny", "arith", "grpo", "final", ["b1"]), -1.0)
    paired = linear_interval(same, 0.95)
    assert (paired.estimate, paired.low, paired.high) == (0.0, 0.0, 0.0)
    across = cells.terms("tiny", "gsm8k", "lam", "final", ["b1"]) + scaled(
        cells.terms("tiny", "arith", "grpo", "final", ["b1"]), -1.0)
    unpaired = linear_interval(across, 0.95)
    assert unpaired.estimate == pytest.approx(0.0, abs=1e-12) and unpaired.high - unpaired.low > 0.1


def test_a_sampled_metric_is_one_value_per_problem():
    """Four samples of one problem, answers 5 (right), 6, 6, none: avg@4 1/4, pass@4 1, maj@4 0 (6 wins)."""
    samples = pd.DataFrame({"model": "tiny", "dataset": "arith", "variant": "grpo", "seed": 0, "step": "final",
                            "benchmark": "b1", "id": "p", "mode": "sampled", "sample": range(4),
                            "correct": [1.0, 0.0, 0.0, 0.0],
                            "extracted": pd.Series(["5", "6", "6", None], dtype=object)}).astype({"seed": "Int64"})
    values = {metric: verdicts(samples, metric)["correct"].tolist() for metric in ("avg", "pass_at_k", "maj_at_k")}
    assert values == {"avg": [0.25], "pass_at_k": [1.0], "maj_at_k": [0.0]}
    assert verdicts(samples, "greedy").empty
