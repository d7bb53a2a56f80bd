"""grpo-lambda design-check (grpo_lambda.design) on the studies with several SFT models: an accuracy family is
judged as the tables read it (over the K SFT models: floor 2^(1−K), MDE at df K − 1, no verdict below 6), the
widest MDE is the largest, the nesting is printed, and docs/statistics.md's worked example is the command's
own output."""

from __future__ import annotations

import copy
import math
import re

import pandas as pd
import pytest
import yaml

from conftest import ROOT
from grpo_lambda import config as study
from grpo_lambda.config.families import Family
from grpo_lambda.design import design_table, nesting, pilot_tables, render, scaled_mde, t_mde
from grpo_lambda.stats import minimum_detectable_effect


def family(**changes) -> Family:
    base = dict(table="paired", model="tiny", dataset="arith", name="primary", key="primary", size=1, units=8,
                seed_level=False, procedure="holm", nested=True)
    return Family(**{**base, **changes})


def test_an_accuracy_family_over_sft_models_has_the_exact_floor_and_needs_six():
    """Within one training set the exact test over K SFT models backs each verdict: floor 2^(1−K), Holm
    m · 2^(1−K) < α; below 6 SFT models nothing can reject; a trend spanning horizons has no exact test and
    needs 6 alone. One SFT model per condition (not nested): a t test with no floor, as before."""
    assert family(units=3).floor() == 0.25 and not family(units=3).reachable(0.05)
    assert family(units=3).units_needed(0.05) == 6
    assert family(units=6).reachable(0.05) and not family(units=6, size=2).reachable(0.05)
    assert family(units=8, size=4).units_needed(0.05) == 8 and family(units=8, size=6).reachable(0.05)
    trend = family(units=5, spans=True, key="trend", table="horizon", name="trend")
    assert trend.floor() == 2 ** -4 and not trend.reachable(0.05) and trend.units_needed(0.05) == 6
    assert family(units=6, spans=True).floor() == 0 and family(units=6, spans=True, size=40).reachable(0.05)
    assert family(units=3, nested=False).floor() == 0 and family(units=3, nested=False).reachable(0.05)
    assert family(units=3, seed_level=True).floor() == 0.25  # a seed-level family keeps its own rule


def test_the_mde_over_sft_models_is_at_df_k_minus_1_and_none_below_six():
    """The pilot's se scaled to K SFT models, at df K − 1 (never the pilot's problems-dominated df); none
    where the family cannot reject, the t test's own beside it."""
    over = family(units=8)
    expected = minimum_detectable_effect(0.02 * math.sqrt(3 / 8), 7, 0.05, 0.8)
    assert scaled_mde(0.02, 400.0, 3, 8, over, 0.05) == pytest.approx(expected)
    assert scaled_mde(0.02, 400.0, 3, 3, over, 0.05) == math.inf
    assert t_mde(0.02, 400.0, 3, 3, over, 0.05) == pytest.approx(minimum_detectable_effect(0.02, 2, 0.05, 0.8))
    plain = family(nested=False)
    assert t_mde(0.02, 400.0, 3, 3, plain, 0.05) == pytest.approx(minimum_detectable_effect(0.02, 400.0, 0.05, 0.8))


def shipped(name: str) -> dict:
    return study.validate(study.load(str(ROOT / "config" / f"{name}.yaml")))


@pytest.mark.parametrize("name", ["positive-control", "horizon-ii"])
def test_the_nested_studies_accuracy_families_report_floor_and_mde_at_df_2(name):
    """At 3 SFT models every accuracy family has floor 0.25, cannot reject (it is descriptive: the config
    says so), and prints the t test's MDE at 2 df from the study's own run; the nesting line names each
    SFT model's RL seeds."""
    config = shipped(name)
    pilot = pilot_tables(ROOT / "docs" / f"{name}-run", config)
    table = design_table(config, pilot)
    accuracy = table[(table["metric"] == "accuracy") & (table["pilot_comparisons"] > 0)]
    assert len(accuracy) and (accuracy["floor"] == 0.25).all()
    assert (accuracy["can_reject"] == "no, descriptive").all()
    assert accuracy["mde"].map(math.isinf).all() and accuracy["mde_t"].map(math.isfinite).all()
    text = render(table, config, f"docs/{name}-run")
    assert "none (t alone " in text and "below 6 SFT models no verdict stands" in text
    assert nesting(config) in text
    starts = {1: [0, 1, 2, 3], 2: [4, 5, 6, 7], 3: [8, 9, 10, 11]} if name == "positive-control" else \
        {1: [8, 9, 10, 11], 2: [12, 13, 14, 15], 3: [16, 17, 18, 19]}
    for sft, seeds in starts.items():
        assert f"{seeds[0]}–{seeds[-1]} start from SFT seed {sft}" in nesting(config)


def test_a_confirmatory_accuracy_family_at_three_sft_models_is_refused_naming_why():
    raw = yaml.safe_load((ROOT / "config" / "positive-control.yaml").read_text())
    raw = copy.deepcopy(raw)
    raw["report"]["descriptive"] = ["reward_auc", "steps_to_threshold"]
    with pytest.raises(study.ConfigError, match=r"read over 3 SFT models .* 2 df .* normality .* "
                                                r"2\^\(1−3\) = 0.25 .* needs \d+ SFT models, or .*report\.descriptive"):
        study.check_design(study.validate(raw))


def test_the_widest_mde_is_the_largest_not_the_largest_standard_errors():
    """A comparison with a larger se but many more df can have the smaller MDE: the widest column is the
    largest MDE of the family's comparisons (the design check once printed a median above its 'widest')."""
    config = shipped("config")
    pilot = pd.DataFrame({"model": "tiny", "dataset": "arith", "family": "primary", "se": [0.021, 0.02],
                          "df": [400.0, 3.0]})
    row = design_table(config, (config, {"paired": pilot})).set_index("family").loc["primary"]
    fam = family(nested=False, units=len(config["seeds"]), size=int(row["m"]))
    few_df = scaled_mde(0.02, 3.0, len(config["seeds"]), len(config["seeds"]), fam, 0.05)
    many_df = scaled_mde(0.021, 400.0, len(config["seeds"]), len(config["seeds"]), fam, 0.05)
    assert few_df > many_df  # the premise: the smaller se has the larger MDE
    assert row["mde_widest"] == pytest.approx(few_df) and row["mde_widest"] >= row["mde"]


def test_the_worked_example_in_the_statistics_page_is_the_commands_output():
    """docs/statistics.md quotes design-check on config/compare.yaml with its published run as the pilot:
    the primary family's median MDE and the seeds 0.02 needs, the reward AUC family's and the seeds 0.01
    needs."""
    text = " ".join((ROOT / "docs" / "statistics.md").read_text().split())
    quoted = re.search(r"the primary family's median MDE is ([\d.]+) \(0\.02 needs (\d+) seeds\), the reward AUC "
                       r"family's under max-T ([\d.]+) \(0\.01 needs (\d+)\)", text)
    assert quoted, "the worked example is missing from docs/statistics.md"
    config = shipped("compare")
    table = design_table(config, pilot_tables(ROOT / "docs" / "compare-run", config),
                         {"accuracy": 0.02, "reward_auc": 0.01})
    primary = table[table["family"] == "primary"].iloc[0]
    auc = table[table["family"] == "reward AUC"].iloc[0]
    assert float(quoted[1]) == pytest.approx(primary["mde"], abs=5e-4)
    assert int(quoted[2]) == primary["units_for_effect"]
    assert float(quoted[3]) == pytest.approx(auc["mde"], abs=5e-5)
    assert int(quoted[4]) == auc["units_for_effect"]


def test_the_config_readme_points_at_a_statistics_section_that_exists():
    """config/README.md sends the reader of sft.seeds to a named part of docs/statistics.md: it must be there."""
    readme = " ".join((ROOT / "config" / "README.md").read_text().split())
    named = re.findall(r"\(\[docs/statistics\.md\]\([^)]*\), \"([^\"]+)\"", readme)
    assert named, "config/README.md names no part of docs/statistics.md"
    statistics = (ROOT / "docs" / "statistics.md").read_text()
    for part in named:
        assert part in statistics, f"config/README.md points at {part!r}, which docs/statistics.md does not hold"
