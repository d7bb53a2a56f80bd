"""The design check (grpo_lambda.config.families, grpo_lambda.design): every comparison family the tables will
declare, read from the config alone, equals what the tables hold; a family whose test cannot reject at the
study's seeds is refused where jobs are about to run, naming the family, its size, the floor and the seeds it
would need, unless the config declares it descriptive or gives it max-T; ``grpo-lambda design-check`` and,
with a pilot run, the minimum detectable effect and the units an effect needs."""

from __future__ import annotations

import copy
import math
from dataclasses import replace
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from conftest import ROOT, run_main
from grpo_lambda import config as study
from grpo_lambda.config.family_names import KEYS
from grpo_lambda.config.families import declared_families
from grpo_lambda.config.report import report_options
from grpo_lambda.design import design_table, parse_effects, pilot_tables
from grpo_lambda.tables.build import build_tables, rebuild
from grpo_lambda.stats import minimum_detectable_effect

DEFAULT = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
COMPARE = ROOT / "config" / "compare.yaml"


def test_every_shipped_config_passes_the_design_check():
    for path in [*sorted((ROOT / "config").glob("*.yaml")), *sorted((ROOT / "tests" / "data").glob("*.yaml"))]:
        study.check_design(study.load(path), str(path))


def test_holm_over_18_sign_flip_tests_at_8_seeds_is_refused_naming_what_would_do():
    """compare.yaml's reward AUC family under Holm: 18 × 2^(1−8) = 0.14 ≥ 0.05. The line names the family,
    its size, the floor, the seeds Holm needs (10: 18 × 2^-9 = 0.035), those max-T needs (6) and the key
    that publishes it without a verdict."""
    config = study.load(COMPARE, ["report.multiplicity=holm"])
    with pytest.raises(study.ConfigError) as refused:
        study.check_design(config, "compare.yaml")
    text = str(refused.value)
    for part in ("'reward AUC' family (learning_speed, tiny/arith: 18 comparisons)", "at 8 seeds",
                 "2^(1−8) = 0.007812", "0.05/18 = 0.002778 (18 × 0.007812 = 0.141 ≥ 0.05)",
                 "it needs 10 seeds", "or 6 under report.multiplicity: {reward_auc: max_t}",
                 "report.descriptive: [reward_auc]"):
        assert part in text, (part, text)
    # as the config ships: max-T for both 18-line families, floor 2^(1−8) < 0.05
    study.check_design(study.load(COMPARE), "compare.yaml")


def test_the_default_study_declares_its_seed_level_families_descriptive_at_4_seeds():
    """At 4 seeds a sign-flip test's p is at least 2^(1−4) = 0.125: even a family of one cannot reject;
    max-T cannot either (its floor is the same); 6 seeds can."""
    config = copy.deepcopy(DEFAULT)
    study.check_design(study.validate(config))
    del config["report"]["descriptive"]
    with pytest.raises(study.ConfigError, match=r"'reward AUC' family .*1 comparison\) cannot reject at 4 seeds.*"
                                                r"it needs 6 seeds; or publish it without a verdict"):
        study.check_design(study.validate(config))
    with pytest.raises(study.ConfigError, match=r"≥ 0.05 even under max-T; it needs 6 seeds"):
        study.check_design(study.validate({**config, "report": {**config["report"], "multiplicity": "max_t"}}))
    study.check_design(study.validate({**config, "seeds": list(range(6))}))
    # one seed is no test at all (no p, no verdict): nothing to refuse
    study.check_design(study.validate({**config, "seeds": [0]}))


def test_the_units_are_the_sft_models_where_a_study_declares_several():
    """Under sft.seeds the seed-level units are the SFT models: 12 RL seeds on 3 SFT models are 3 units."""
    from grpo_lambda.config.families import units

    config = {**copy.deepcopy(DEFAULT), "seeds": list(range(12))}
    assert units(config) == (12, "seeds")
    assert units({**config, "sft": {**config.get("sft", {}), "seeds": [0, 1, 2]}}) == (3, "SFT models")


@pytest.mark.parametrize("report, message", [
    ({"descriptive": ["reward_aucs"]}, r"report.descriptive: \['reward_aucs'\] are not family keys"),
    ({"descriptive": "reward_auc"}, r"invalid value at 'report.descriptive'"),
    ({"multiplicity": {"primary": "max_t"}}, r"report.multiplicity.primary: max_t needs one value per seed"),
    ({"multiplicity": {"reward_auc": "bonferroni"}}, r"invalid value at 'report.multiplicity"),
    ({"multiplicity": {"reward_aucs": "max_t"}}, r"report.multiplicity.reward_aucs: not a family key"),
    ({"multiplicity": "sidak"}, r"invalid value at 'report.multiplicity'.*one of: holm, max_t"),
])
def test_bad_report_families_are_refused_naming_the_key(report, message):
    config = copy.deepcopy(DEFAULT)
    config["report"] = {**config["report"], **report}
    with pytest.raises(study.ConfigError, match=message):
        study.validate(config)


# The tables that hold comparison families (FAMILY_COLUMNS's, and the control table's).
FAMILY_TABLES = {"paired", "results_by_variant", "learning_speed", "factorial", "horizon", "control"}


@pytest.fixture(scope="module", params=["default-run", "clamp-trace-run", "horizon-run", "compare-run",
                                        "positive-control-run", "horizon-ii-run"])
def published(request):
    return request.param, rebuild(ROOT / "docs" / request.param / "raw", only=FAMILY_TABLES)


# Where each table writes its families: (table, family column) -> the prefix of its procedure column.
FAMILY_COLUMNS = {("paired", "family"): "", ("results_by_variant", "benchmark"): "gain_",
                  ("learning_speed", "auc_family"): "auc_", ("learning_speed", "steps_family"): "steps_",
                  ("factorial", "family"): "", ("horizon", "family"): ""}


def tables_families(tables: dict) -> dict:
    """(table, model, dataset, family column, name) -> (size, procedures) of every family the tables hold."""
    found = {}
    control = tables.get("control")
    if control is not None and not control.empty:  # the effects' family and a trend's, told apart by role
        families = control["family"] if "family" in control else pd.Series("control", index=control.index)
        for (model, name), rows in control.groupby([control["model"], families]):
            role = {"control": "effect", "control trend": "trend"}[name]
            found[("control", model, "", "role", role)] = (len(rows), set(rows["procedure"]))
    for (table, column), prefix in FAMILY_COLUMNS.items():
        frame = tables.get(table)
        if frame is None or column not in frame:
            continue
        members = frame[frame[column].fillna("").astype(str) != ""]
        if table == "results_by_variant":
            members = members[members["gain"].notna()]  # the SFT model's own row has no gain
        spans_datasets = table == "horizon"  # a horizon family holds every training set's effect
        for key, rows in members.groupby(["model", column] if spans_datasets else ["model", "dataset", column]):
            model, dataset, name = (key[0], "", key[1]) if spans_datasets else key
            found[(table, model, dataset, column, name)] = (len(rows), set(rows[f"{prefix}procedure"]))
    return found


def declared(config: dict) -> dict:
    return {(f.table, f.model, f.dataset, f.column, f.name): (f.size, {f.procedure})
            for f in declared_families(config, report_options(config))}


def test_the_declared_families_are_the_tables_families(published):
    """From the config alone, each family's table, model, training set, name, size m and procedure, as the
    rebuilt tables of a published run hold them (a 2 × 2, a horizon study with three training sets, one with
    a lack-of-fit test on 3 SFT models, a check-free default, a comparison with max-T families, a positive
    control): the design check and the tables read one rule."""
    _, (config, tables) = published
    assert tables_families(tables) == declared(config)
    # report.descriptive and report.multiplicity name a family by its key: every family has one they accept
    assert all(f.key in KEYS for f in declared_families(config, report_options(config)))


def test_a_familys_floor_and_the_units_it_needs_at_the_edges():
    """The sign-flip test's floor is 2^(1−n) up to 16 units (enumerated) and 0 above (a t test), 0 for a t
    test; Holm's family floor is m times it, max-T's the floor itself; a floor equal to α cannot reject (a
    verdict asks p < α); two units of a seed-level test cannot reject at α 0.05, one is no test; a t test
    needs 2 units, and no count above 17 is asked for (a t test from there)."""
    from grpo_lambda.config.family_names import HOLM, MAX_T
    from grpo_lambda.config.families import Family

    def family(units, size=1, procedure=HOLM, seed_level=True):
        return Family("learning_speed", "m", "d", "reward AUC", "reward_auc", size, units, seed_level, procedure)

    assert family(16).floor() == 2.0 ** -15 and family(17).floor() == 0.0
    assert family(5, seed_level=False).floor() == 0.0
    assert family(5, size=3).family_floor() == 3 * 2.0 ** -4
    assert family(5, size=3, procedure=MAX_T).family_floor() == 2.0 ** -4
    assert not family(3).reachable(0.25) and family(4).reachable(0.25)  # 2^-2 = α; 2^-3 < α
    assert not family(2).reachable(0.05) and family(1).reachable(0.05)
    assert family(8, seed_level=False).units_needed(0.05) == 2
    assert family(2).units_needed(0.6) == 2  # 2^-1 < 0.6
    assert family(4, size=10**6).units_needed(0.05) == 17
    assert family(4, size=18).units_needed(0.05) == 10 and family(4, size=18, procedure=MAX_T).units_needed(0.05) == 6


@pytest.mark.parametrize("report", [
    {},  # GRPO-λ's row: the recent-style trace variants (λ 0.98 and 0.99) by the default selector
    {"grpo_lambda_variant": "mean", "checks": ["same"],
     "descriptive": ["gain_over_sft", "per_suite_accuracy", "reward_auc"], "multiplicity": {"steps_to_threshold": "max_t"}},
    {"grpo_lambda_variant": {"qwen15": "bw99", "small": "mean"}},
    {"grpo_lambda_variant": {"lam": 0.98, "gamma": 1.0, "eps": 0.0, "form": "relative"}},  # γ, ε, form by default
    {"grpo_lambda_variant": {"lam": 0.5}},  # matches none: every GRPO-λ variant
    {"baseline": "rt99"},  # a baseline of another objective: GRPO is a row of its own
], ids=["default", "mean-check-descriptive-max-t", "per-model", "lam-0.98", "no-match", "lambda-baseline"])
def test_the_declared_families_are_the_tables_families_on_a_tree_with_several_training_sets(tree, report):
    """The synthetic tree (a model on two training sets with three GRPO-λ variants, one on one set with a
    check line): which variants Table 1's GRPO-λ row pools, which lines get a row over all training sets,
    which families a check line or report.descriptive takes out, and each family's procedure are one rule
    for the tables and the design check. The tree's variants leave γ, ε and the style to their defaults."""
    root, config = tree
    config = copy.deepcopy(config)
    for name in ("rt98", "rt99"):
        config["variants"][name] = {"objective": "grpo_lambda", "lam": config["variants"][name]["lam"]}
    config["report"] = report
    expected = declared(config)
    found = tables_families(build_tables(config, root, only=FAMILY_TABLES))
    assert found == expected
    assert {key for _, _, _, _, key in expected} >= {"per-suite accuracy"}
    assert all(f.key in KEYS for f in declared_families(config, report_options(config)))


def test_with_a_pilot_the_mde_is_the_tables_at_the_same_seeds_and_shrinks_as_one_over_root_n():
    """config.yaml against its own published run (4 seeds): the primary family's MDE is the paired table's
    (same se, df, m = 1); at 16 seeds se halves (√(4/16)) and the df scales by 15/3. The seeds an accuracy
    gap of 0.03 needs are the fewest whose MDE is ≤ 0.03."""
    config = study.load(ROOT / "config" / "config.yaml")
    pilot = pilot_tables(ROOT / "docs" / "default-run", config)
    row = design_table(config, pilot).set_index(["table", "family"]).loc[("paired", "primary")]
    paired = pilot[1]["paired"]
    primary = paired[paired["family"] == "primary"].iloc[0]
    assert row["mde"] == pytest.approx(primary["mde"])
    bigger = design_table({**config, "seeds": list(range(16))}, pilot, parse_effects(["0.03"]))
    row = bigger.set_index(["table", "family"]).loc[("paired", "primary")]
    by_hand = minimum_detectable_effect(primary["se"] / 2, primary["df"] * 15 / 3, 0.05)
    assert row["mde"] == pytest.approx(by_hand)
    needed = int(row["units_for_effect"])

    def mde_at(n):
        return minimum_detectable_effect(primary["se"] * math.sqrt(4 / n), primary["df"] * (n - 1) / 3, 0.05)
    assert mde_at(needed) <= 0.03 < mde_at(needed - 1)
    # the reward AUC family is descriptive at 4 seeds, and its effect is in its own metric
    auc = bigger.set_index(["table", "family"]).loc[("learning_speed", "reward AUC")]
    assert auc["metric"] == "reward_auc" and math.isnan(auc["units_for_effect"])
    with pytest.raises(ValueError, match="not a metric"):
        parse_effects(["auc=0.01"])


def test_a_pilots_typical_and_widest_comparisons_give_the_two_mdes_and_a_descriptive_family_counts_holms_units():
    """With a pilot, a family's MDE is its median comparison's and the widest its largest standard error's, at
    α/m (config.yaml against its own run: the 5 per-suite gaps, at the pilot's 4 seeds); a descriptive family's
    units needed are Holm's (compare.yaml's 18 reward AUC gaps: 10 seeds, not max-T's 6)."""
    from grpo_lambda.design import pilot_rows

    config = study.load(ROOT / "config" / "config.yaml")
    pilot = pilot_tables(ROOT / "docs" / "default-run", config)
    row = design_table(config, pilot).set_index(["table", "family"]).loc[("paired", "per-suite accuracy")]
    family = next(f for f in declared_families(config, report_options(config))
                  if (f.table, f.name) == ("paired", "per-suite accuracy"))
    rows = pilot_rows(family, pilot[1]).sort_values("se")
    assert row["pilot_comparisons"] == len(rows) == family.size == 5
    median, widest = rows.iloc[len(rows) // 2], rows.iloc[-1]
    assert row["mde"] == pytest.approx(minimum_detectable_effect(median["se"], median["df"], 0.05 / 5))
    assert row["mde_widest"] == pytest.approx(minimum_detectable_effect(widest["se"], widest["df"], 0.05 / 5))
    assert row["mde"] < row["mde_widest"]
    compare = study.load(COMPARE, ["report.multiplicity=holm", "report.descriptive=[reward_auc]"])
    auc = design_table(compare).set_index(["table", "family"]).loc[("learning_speed", "reward AUC")]
    assert (auc["units_needed"], auc["can_reject"]) == (10, "no, descriptive")


def run_cli(*argv):
    return subprocess.run([sys.executable, "-m", "grpo_lambda.cli", *argv], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)


def test_design_check_prints_every_family_and_exits_1_when_one_cannot_reject():
    done = run_main("design-check", "--configfile", COMPARE, "--set", "report.multiplicity=holm", cwd=ROOT)
    assert done.returncode == 1, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("learning_speed")]
    auc = next(line for line in lines if "| reward AUC " in line)
    assert [cell.strip() for cell in auc.split("|")][3:9] == ["18", "8", "0.00781", "holm", "NO", "10"]
    assert "cannot reject" in done.stdout
    refused = run_cli("validate", "--config-only", "--configfile", str(COMPARE), "--set", "report.multiplicity=holm")
    assert refused.returncode == 2 and "'reward AUC' family" in refused.stderr
    shipped = run_main("design-check", "--configfile", COMPARE, cwd=ROOT)
    assert shipped.returncode == 0 and "| max_t " in shipped.stdout


def test_the_mde_at_n_units_scales_the_pilot_and_is_none_where_the_family_cannot_reject():
    """A pilot standard error from 4 units at n units is se·√(4/n); a seed-level family's MDE has df n − 1 at
    Holm's α/m, and none where the family's own floor at n units reaches α (Holm over 3 at 6 units: 3 × 2^-5 =
    0.094; max-T: 2^-5 = 0.031; beyond 16 units a t test, no floor); a t-test family's df scale by (n − 1)/3."""
    from grpo_lambda.config.family_names import HOLM, MAX_T
    from grpo_lambda.config.families import Family
    from grpo_lambda.design import POWER, scaled_mde

    seed_level = Family("learning_speed", "m", "d", "reward AUC", "reward_auc", 3, 4, True, HOLM)
    assert scaled_mde(0.02, 3.0, 4, 16, seed_level, 0.05) == pytest.approx(
        minimum_detectable_effect(0.01, 15, 0.05 / 3, POWER))
    assert scaled_mde(0.02, 3.0, 4, 6, seed_level, 0.05) == math.inf
    assert scaled_mde(0.02, 3.0, 4, 6, replace(seed_level, procedure=MAX_T), 0.05) == pytest.approx(
        minimum_detectable_effect(0.02 * math.sqrt(4 / 6), 5, 0.05 / 3, POWER))
    huge = replace(seed_level, size=10**6)
    assert scaled_mde(0.02, 3.0, 4, 16, huge, 0.05) == math.inf and math.isfinite(scaled_mde(0.02, 3.0, 4, 17, huge, 0.05))
    t_test = replace(seed_level, seed_level=False)
    assert scaled_mde(0.02, 30.0, 4, 16, t_test, 0.05) == pytest.approx(
        minimum_detectable_effect(0.01, 30.0 * 15 / 3, 0.05 / 3, POWER))
    assert math.isfinite(scaled_mde(0.02, 30.0, 4, 2, t_test, 0.05)) and scaled_mde(0.02, 30.0, 4, 1, t_test, 0.05) == math.inf
    # a pilot of two units scales its df by (n − 1)/1; one of one unit keeps its df (no spread to scale)
    assert scaled_mde(0.02, 4.0, 2, 4, t_test, 0.05) == pytest.approx(
        minimum_detectable_effect(0.02 * math.sqrt(2 / 4), 12.0, 0.05 / 3, POWER))
    assert scaled_mde(0.02, 5.0, 1, 4, t_test, 0.05) == pytest.approx(
        minimum_detectable_effect(0.01, 5.0, 0.05 / 3, POWER))


def test_a_pilots_rows_are_the_familys_in_its_model_with_a_standard_error_above_zero():
    """The pilot's comparisons of a family: in the family's model (and training set) where the pilot has it,
    else wherever the pilot has the family; a comparison whose standard error is 0 (a check line identical to
    its baseline) or undefined is no pilot; a table or column the pilot lacks gives none."""
    import pandas as pd

    from grpo_lambda.config.family_names import HOLM
    from grpo_lambda.config.families import Family
    from grpo_lambda.design import pilot_rows

    frame = pd.DataFrame({"model": ["a", "a", "b", "b", "a"], "dataset": ["x", "x", "x", "x", "y"],
                          "family": ["primary"] * 5, "se": [0.01, 0.0, 0.02, float("nan"), 0.03]})
    family = Family("paired", "a", "x", "primary", "primary", 1, 4, False, HOLM)
    assert pilot_rows(family, {"paired": frame})["se"].tolist() == [0.01]
    assert pilot_rows(replace(family, model="b"), {"paired": frame})["se"].tolist() == [0.02]
    assert pilot_rows(replace(family, model="c", dataset="z"), {"paired": frame})["se"].tolist() == [0.01, 0.02, 0.03]
    assert pilot_rows(family, {"factorial": frame}).empty
    assert pilot_rows(replace(family, column="auc_family"), {"paired": frame}).empty


def test_can_reject_says_yes_no_no_test_or_what_holm_would_have_done_for_a_descriptive_family():
    from grpo_lambda.config.family_names import DESCRIPTIVE, HOLM
    from grpo_lambda.config.families import Family
    from grpo_lambda.design import _can_reject

    family = Family("learning_speed", "m", "d", "reward AUC", "reward_auc", 3, 8, True, HOLM)
    assert _can_reject(family, 0.05) == "yes"  # 3 × 2^-7 < 0.05
    assert _can_reject(replace(family, units=6), 0.05) == "NO"  # 3 × 2^-5 ≥ 0.05
    assert _can_reject(replace(family, units=1), 0.05) == "no test (1 unit)"
    assert _can_reject(replace(family, units=2, size=1), 0.05) == "NO"  # two units: a test, floor 0.5
    assert _can_reject(replace(family, procedure=DESCRIPTIVE), 0.05) == "yes, descriptive"
    assert _can_reject(replace(family, units=6, procedure=DESCRIPTIVE), 0.05) == "no, descriptive"
    assert _can_reject(replace(family, units=1, seed_level=False), 0.05) == "yes"  # a t test has no floor
