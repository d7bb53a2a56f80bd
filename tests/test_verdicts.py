"""The verdict bookkeeping (grpo_lambda.tables.verdicts) and the tables that feed it: Holm within declared
families, equivalence against the Holm-adjusted p and the row's own margin, the MDE at the level the
verdict faces, per-seed values matched by seed when a run is missing, ``reached`` at the last step.
Each input is small and built by hand; the right answer is stated beside it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from grpo_lambda.stats import minimum_detectable_effect, student_t_quantile
from grpo_lambda.seed_level import seed_interval
from grpo_lambda.signflip import sign_flip_equivalence_p
from grpo_lambda.tables import factorial, learning_speed
from grpo_lambda.config.report import report_options
from grpo_lambda.tables.verdicts import add_verdicts, comparison_columns

ALPHA = 0.05


def family_frame(p_equivalence, p=(0.5, 0.6, 0.7), se=(0.01, 0.02, 0.03), df=(11.0, 11.0, 11.0)) -> pd.DataFrame:
    return pd.DataFrame({"family": ["f"] * len(p), "estimate": [0.001] * len(p), "se": se, "df": df,
                         "p": p, "p_floor": [0.0] * len(p), "p_equivalence": p_equivalence})


def test_equivalence_is_judged_on_the_holm_adjusted_p():
    """Three TOST p-values 0.02, 0.03, 0.04 in one family: Holm makes them 0.06 each, over α = 0.05, so
    none is equivalent (each alone would be)."""
    frame = add_verdicts(family_frame([0.02, 0.03, 0.04]), "estimate", ["family"], 1 - ALPHA)
    assert frame["p_equivalence_holm"].tolist() == pytest.approx([0.06, 0.06, 0.06])
    assert set(frame["verdict"]) == {"not distinguishable"}
    # the same three rows, each a family of its own: each equivalent
    alone = family_frame([0.02, 0.03, 0.04]).assign(family=["a", "b", "c"])
    assert set(add_verdicts(alone, "estimate", ["family"], 1 - ALPHA)["verdict"]) == {"equivalent"}


def test_a_row_in_no_family_gets_no_adjusted_p_and_no_verdict():
    frame = family_frame([0.01, 0.01, 0.01]).assign(family=["f", "", np.nan])
    out = add_verdicts(frame, "estimate", ["family"], 1 - ALPHA)
    assert out["p_holm"].tolist()[0] == pytest.approx(0.5)
    assert out["p_holm"].iloc[1:].isna().all() and out["verdict"].iloc[1:].isna().all()


def test_the_mde_is_at_the_level_the_family_faces():
    """A family of 3: the MDE is at α/3 (Holm's first step), (t(11, 1 − 0.05/6) + t(11, 0.8)) · se."""
    frame = add_verdicts(family_frame([np.nan] * 3), "estimate", ["family"], 1 - ALPHA)
    expected = [(student_t_quantile(1 - ALPHA / 6, 11) + student_t_quantile(0.8, 11)) * se for se in (0.01, 0.02, 0.03)]
    assert frame["mde"].tolist() == pytest.approx(expected)
    unadjusted = (student_t_quantile(1 - ALPHA / 2, 11) + student_t_quantile(0.8, 11)) * 0.01
    assert frame["mde"].iloc[0] > 1.2 * unadjusted
    # a test that cannot reach α/m (the sign-flip floor 2^(1-4) = 0.125) detects nothing
    assert minimum_detectable_effect(0.01, 3, ALPHA, p_floor=0.125) == np.inf


def test_too_few_seeds_when_no_outcome_could_reject():
    """Sign-flip tests of 6 seeds (floor 2^-5 = 0.031) in a family of 2: 2 × 0.031 = 0.0625 ≥ α."""
    values = [0.1, 0.2, 0.3, 0.15, 0.25, 0.12]  # every seed agrees: p is the floor
    rows = [{"family": "f", "estimate": float(np.mean(values)), **comparison_columns(seed_interval(values), 0.95, None)}
            for _ in range(2)]
    out = add_verdicts(pd.DataFrame(rows), "estimate", ["family"], 0.95)
    assert out["p"].tolist() == pytest.approx([2 ** -5] * 2)
    assert set(out["verdict"]) == {"too few seeds"}
    alone = add_verdicts(pd.DataFrame(rows[:1]), "estimate", ["family"], 0.95)
    assert alone["verdict"].iloc[0] == "ahead"


# --- learning speed: each metric its own margin; per-seed values matched by seed; reached at the last step


def speed_config(variants: dict, seeds: list[int], margins: dict) -> dict:
    return {"models": {"tiny": {"source": "tiny"}}, "datasets": {"arith": {"source": "synthetic"}},
            "benchmarks": {"arith-1": {"source": "synthetic"}}, "variants": variants, "seeds": seeds,
            "rl": {"max_steps": 4},
            "report": {"smoothing": 0.0, "final_window": 2, "baseline": "grpo", "equivalence_margin": margins}}


def flat_logs(rewards: dict[tuple[str, int], list[float]]) -> pd.DataFrame:
    return pd.DataFrame([{"model": "tiny", "dataset": "arith", "variant": v, "seed": s, "step": t + 1, "reward": r}
                         for (v, s), curve in rewards.items() for t, r in enumerate(curve)])


GRPO = {"objective": "grpo"}
TRACE = {"objective": "grpo_lambda", "lam": 0.99, "style": "recent", "update": "trace"}


def test_a_missing_run_leaves_the_other_seeds_matched_by_seed():
    """grpo holds seeds 0-6, the trace seeds 0-6 but 2. Per seed s the trace's AUC is grpo's + 0.01·s, so
    the gaps over the shared seeds are 0.00, 0.01, 0.03, 0.04, 0.05, 0.06 (mean 0.031667); matched by
    position they would be other numbers."""
    seeds = list(range(7))
    base = {s: 0.1 * (s + 1) ** 2 / 10 for s in seeds}  # far apart, so a shift by one seed shows
    rewards = {("grpo", s): [base[s]] * 4 for s in seeds}
    rewards.update({("trace", s): [base[s] + 0.01 * s] * 4 for s in seeds if s != 2})
    cfg = speed_config({"grpo": GRPO, "trace": TRACE}, seeds, {})
    row = learning_speed.learning_speed_table(cfg, flat_logs(rewards), report_options(cfg)).set_index("variant").loc["trace"]
    assert row["auc_vs_baseline"] == pytest.approx(np.mean([0.0, 0.01, 0.03, 0.04, 0.05, 0.06]))
    assert row["auc_vs_baseline_per_seed"].split()[:3] == ["0:0", "1:0.01", "3:0.03"]


def test_the_auc_gap_is_tested_against_the_auc_margin_not_the_accuracy_one():
    """Margins: accuracy 0.5 (wide), reward AUC 0.001 (narrow). Gaps of about 0.01 are far outside the AUC
    margin: p_equivalence near 1, as the AUC margin gives; the accuracy margin would make them equivalent."""
    seeds = list(range(8))
    rewards = {("grpo", s): [0.3 + 0.01 * s] * 4 for s in seeds}
    rewards.update({("trace", s): [0.31 + 0.01 * s + 0.001 * (s % 3)] * 4 for s in seeds})
    cfg = speed_config({"grpo": GRPO, "trace": TRACE}, seeds, {"accuracy": 0.5, "reward_auc": 0.001})
    row = learning_speed.learning_speed_table(cfg, flat_logs(rewards), report_options(cfg)).set_index("variant").loc["trace"]
    gaps = [float(pair.split(":")[1]) for pair in row["auc_vs_baseline_per_seed"].split()]
    assert row["auc_p_equivalence"] == pytest.approx(sign_flip_equivalence_p(gaps, 0.001))
    assert row["auc_p_equivalence"] > 0.5 and row["auc_verdict"] != "equivalent"


def test_a_seed_that_reaches_the_threshold_at_the_last_step_has_reached_it():
    """Start 0.2, grpo's last two steps 0.8: threshold 0.5. Seed 1 of the trace reaches 0.5 exactly at step
    4, the last logged: it reached it (2/2), at step 4, not censored at 5."""
    rewards = {("grpo", 0): [0.2, 0.8, 0.8, 0.8], ("grpo", 1): [0.2, 0.8, 0.8, 0.8],
               ("trace", 0): [0.2, 0.8, 0.8, 0.8], ("trace", 1): [0.2, 0.2, 0.2, 0.5]}
    cfg = speed_config({"grpo": GRPO, "trace": TRACE}, [0, 1], {})
    table = learning_speed.learning_speed_table(cfg, flat_logs(rewards), report_options(cfg)).set_index("variant")
    assert table.loc["trace", "threshold"] == pytest.approx(0.5)
    assert table.loc["trace", "reached"] == "2/2" and table.loc["trace", "steps_to_threshold"] == pytest.approx(3.0)


class NoAccuracy:
    """Cells with no evaluation: the factorial table then has training-reward rows only."""

    def terms(self, *args, **kwargs):
        return None


def test_the_factorial_auc_matches_seeds_across_the_four_cells_when_one_run_is_missing():
    """Six seeds; the clamp-only cell lacks seed 0. Cell AUCs: grpo s/10, clamp s/10 + 0.02, trace
    s/10 + 0.01·s, both s/10 + 0.02 + 0.01·s + 0.005. Over the shared seeds 1-5 the interaction is 0.005
    for every seed, the trace with the clamp off 0.01·s (0.01 to 0.05)."""
    seeds = list(range(6))
    auc = {"grpo": lambda s: s / 10, "grpo-clamp": lambda s: s / 10 + 0.02, "trace-noclamp": lambda s: s / 10 + 0.01 * s,
           "trace": lambda s: s / 10 + 0.02 + 0.01 * s + 0.005}
    rewards = {(v, s): [f(s)] * 4 for v, f in auc.items() for s in seeds if not (v == "grpo-clamp" and s == 0)}
    variants = {"grpo": GRPO, "grpo-clamp": {**GRPO, "advantage_clamp": -0.1},
                "trace-noclamp": {**TRACE, "advantage_clamp": None}, "trace": TRACE}
    cfg = speed_config(variants, seeds, {})
    cfg["report"]["factorial"] = {"factors": ["trace", "clamp"], "cells": {
        "grpo": {"trace": False, "clamp": False}, "grpo-clamp": {"trace": False, "clamp": True},
        "trace-noclamp": {"trace": True, "clamp": False}, "trace": {"trace": True, "clamp": True}}}
    options = report_options(cfg)
    table = factorial.factorial_table(NoAccuracy(), cfg, flat_logs(rewards), options).set_index("effect")
    interaction = table.loc["trace × clamp"]
    assert interaction["seeds"] == 5 and interaction["estimate"] == pytest.approx(0.005)
    assert [float(p.split(":")[1]) for p in interaction["per_seed"].split()] == pytest.approx([0.005] * 5)
    assert table.loc["trace with clamp off", "estimate"] == pytest.approx(0.03)
    assert [p.split(":")[0] for p in table.loc["trace with clamp off", "per_seed"].split()] == ["1", "2", "3", "4", "5"]
