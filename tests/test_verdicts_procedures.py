"""How a family's p-values are adjusted (grpo_lambda.tables.verdicts with report.multiplicity and
report.descriptive): the step-down max-T over joint sign flips where the config chooses it, named in the
``procedure`` columns; a descriptive family without adjusted p or verdict; a training-reward AUC gap that is a
simple effect of the 2 × 2 counted in the factorial table only; shares' intervals within [0, 1]. Each input
is small and built by hand; the right answer is stated beside it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from grpo_lambda.config.report import report_options
from grpo_lambda.multiplicity import max_t
from grpo_lambda.stats import t_interval
from grpo_lambda.tables import diagnostics, factorial, learning_speed

GRPO = {"objective": "grpo"}
TRACE = {"objective": "grpo_lambda", "lam": 0.99, "style": "recent", "update": "trace"}
SEEDS = list(range(8))


def config_of(variants: dict, report: dict) -> dict:
    return {"models": {"tiny": {"source": "tiny"}}, "datasets": {"arith": {"source": "synthetic"}},
            "benchmarks": {"arith-1": {"source": "synthetic"}}, "variants": variants, "seeds": SEEDS,
            "rl": {"max_steps": 4},
            "report": {"smoothing": 0.0, "final_window": 2, "baseline": "grpo", **report}}


def logs_of(rewards: dict[tuple[str, int], list[float]], **columns) -> pd.DataFrame:
    return pd.DataFrame([{"model": "tiny", "dataset": "arith", "variant": v, "seed": s, "step": t + 1, "reward": r,
                          **{name: values[(v, s)][t] for name, values in columns.items()}}
                         for (v, s), curve in rewards.items() for t, r in enumerate(curve)])


def nine_lines_ahead() -> tuple[dict, pd.DataFrame]:
    """grpo's AUC per seed 0.30 + 0.01·s; line k's 0.05 + 0.002·k + 0.003·(s mod 3) above it: every seed of
    every line ahead, the lines correlated through grpo's seeds."""
    variants = {"grpo": GRPO, **{f"line{k}": {**TRACE, "lam": 0.9 + 0.01 * k} for k in range(9)}}
    rewards = {("grpo", s): [0.30 + 0.01 * s] * 4 for s in SEEDS}
    rewards.update({(f"line{k}", s): [0.35 + 0.01 * s + 0.002 * k + 0.003 * (s % 3)] * 4
                    for k in range(9) for s in SEEDS})
    return variants, logs_of(rewards)


def speed_table(variants: dict, logs: pd.DataFrame, report: dict) -> pd.DataFrame:
    cfg = config_of(variants, report)
    return learning_speed.learning_speed_table(cfg, logs, report_options(cfg)).set_index("variant")


def test_holm_over_nine_lines_cannot_reject_at_8_seeds_and_max_t_can():
    """9 lines, every seed ahead: each sign-flip p is 2^(1−8); Holm gives 9 × 2^-7 = 0.070 ≥ α to all
    (too few seeds); max-T gives 2^-7 = 0.0078 to all (ahead), as multiplicity.max_t on the per-seed gaps."""
    variants, logs = nine_lines_ahead()
    holm = speed_table(variants, logs, {}).drop(index="grpo")
    assert (holm["auc_procedure"] == "holm").all()
    assert holm["auc_p_holm"].tolist() == pytest.approx([9 * 2 ** -7] * 9)
    assert set(holm["auc_verdict"]) == {"too few seeds"}
    chosen = speed_table(variants, logs, {"multiplicity": {"reward_auc": "max_t"}}).drop(index="grpo")
    assert (chosen["auc_procedure"] == "max_t").all() and (chosen["steps_procedure"] == "holm").all()
    gaps = np.array([[float(pair.split(":")[1]) for pair in text.split()] for text in chosen["auc_vs_baseline_per_seed"]])
    expected, faced = max_t(gaps.T)
    assert chosen["auc_p_holm"].to_numpy() == pytest.approx(expected, abs=1e-12)
    assert chosen["auc_p_holm"].tolist() == pytest.approx([2 ** -7] * 9)
    assert set(chosen["auc_verdict"]) == {"ahead"}
    # the MDE at the level each line faces at max-T's first step: finite, where Holm's is not
    assert np.isfinite(chosen["auc_mde"]).all() and np.isinf(holm["auc_mde"]).all() and (faced > 0).all()
    # `max_t` for every seed-level family at once
    both = speed_table(variants, logs, {"multiplicity": "max_t"}).drop(index="grpo")
    assert (both["auc_procedure"] == "max_t").all() and (both["steps_procedure"] == "max_t").all()


def test_a_descriptive_family_has_its_estimates_p_and_mde_but_no_adjusted_p_or_verdict():
    """No verdict is read; the MDE still says what the design could have seen: the t test's at Holm's α/m and
    the row's df, whatever the sign-flip floor (9 × 2^-7 ≥ 0.05 here) would have barred."""
    from grpo_lambda.stats import minimum_detectable_effect
    variants, logs = nine_lines_ahead()
    table = speed_table(variants, logs, {"descriptive": ["reward_auc"]}).drop(index="grpo")
    assert (table["auc_procedure"] == "descriptive").all() and (table["auc_family"] == "reward AUC").all()
    assert table["auc_p_holm"].isna().all() and table["auc_p_equivalence_holm"].isna().all()
    assert table["auc_verdict"].isna().all()
    expected = [minimum_detectable_effect(se, df, 0.05 / 9, 0.8) for se, df in zip(table["auc_se"], table["auc_df"])]
    assert table["auc_mde"].tolist() == pytest.approx(expected) and np.isfinite(table["auc_mde"]).all()
    assert table["auc_p"].tolist() == pytest.approx([2 ** -7] * 9) and table["auc_vs_baseline"].notna().all()
    assert set(table["steps_verdict"]) != {None}  # the other family keeps its verdicts


def two_by_two() -> tuple[dict, dict]:
    variants = {"grpo": GRPO, "grpo-clamp": {**GRPO, "advantage_clamp": -0.1},
                "trace-noclamp": {**TRACE, "advantage_clamp": None}, "trace": TRACE}
    design = {"factors": ["trace", "clamp"],
              "cells": {"grpo": {"trace": False, "clamp": False}, "grpo-clamp": {"trace": False, "clamp": True},
                        "trace-noclamp": {"trace": True, "clamp": False}, "trace": {"trace": True, "clamp": True}}}
    return variants, design


def test_an_auc_gap_that_is_a_simple_effect_is_counted_in_the_2x2_only():
    """grpo-clamp − grpo and trace-noclamp − grpo are simple effects of the 2 × 2 (one factor apart): their
    AUC gaps are in the factorial table's simple-effects family, and in no family of the learning-speed
    table (before, they were Holm-counted in both); trace − grpo (both factors) stays there, a family of 1.
    The steps-to-threshold family, which the 2 × 2 does not hold, keeps all three."""
    variants, design = two_by_two()
    auc = {"grpo": 0.30, "grpo-clamp": 0.33, "trace-noclamp": 0.31, "trace": 0.34}
    logs = logs_of({(v, s): [a + 0.01 * s + 0.002 * (s % 2)] * 4 for v, a in auc.items() for s in SEEDS})
    cfg = config_of(variants, {"factorial": design})
    options = report_options(cfg)
    speed = learning_speed.learning_speed_table(cfg, logs, options).set_index("variant")
    assert speed.loc["grpo-clamp", "auc_family"] == "" and speed.loc["trace-noclamp", "auc_family"] == ""
    assert speed.loc[["grpo-clamp", "trace-noclamp"], "auc_verdict"].isna().all()
    assert speed.loc["trace", "auc_family"] == "reward AUC"
    assert speed.loc["trace", "auc_p_holm"] == pytest.approx(speed.loc["trace", "auc_p"])  # m = 1
    assert (speed.drop(index="grpo")["steps_family"] == "steps to threshold").all()
    effects = factorial.factorial_table(NoAccuracy(), cfg, logs, options).set_index("effect")
    simple = effects[effects["family"] == "reward AUC simple effects"]
    assert set(simple.index) == {"trace with clamp off", "trace with clamp on", "clamp with trace off",
                                 "clamp with trace on"}
    assert simple.loc["clamp with trace off", "estimate"] == pytest.approx(speed.loc["grpo-clamp", "auc_vs_baseline"])


class NoAccuracy:
    """Cells with no evaluation: the factorial table then has training-reward rows only."""

    def terms(self, *args, **kwargs):
        return None


def test_a_share_s_interval_stays_within_0_and_1():
    """A clip fraction of 0 on three seeds and 0.002 on the fourth: the t interval reaches below 0
    (0.0005 ± 3.18 · 0.0005); the table's stops at 0, its estimate unchanged. The entropy, no share, keeps
    its t interval."""
    seeds = [0, 1, 2, 3]
    rewards = {("grpo", s): [0.3] * 4 for s in seeds}
    clip = {("grpo", s): [0.002 if s == 3 else 0.0] * 4 for s in seeds}
    entropy = {("grpo", s): [-0.5 + 0.4 * s] * 4 for s in seeds}
    logs = logs_of(rewards, clip_ratio_low=clip, entropy=entropy)
    cfg = {**config_of({"grpo": GRPO}, {}), "seeds": seeds}
    row = diagnostics.diagnostics_table(cfg, logs, report_options(cfg)).iloc[0]
    unbounded = t_interval([0.0, 0.0, 0.0, 0.002])
    assert unbounded.low < 0
    assert row["clip_ratio_low"] == pytest.approx(0.0005)
    assert row["clip_ratio_low_low"] == 0.0 and row["clip_ratio_low_high"] == pytest.approx(unbounded.high)
    assert row["entropy_low"] == pytest.approx(t_interval([-0.5, -0.1, 0.3, 0.7]).low) and row["entropy_low"] < 0
