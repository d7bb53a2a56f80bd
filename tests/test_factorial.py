"""The 2 × 2 table (report.factorial), the verdict rule every comparison table shares, the pooling rule of
Table 1 and the diagnostics table, on the synthetic study of results_tree.py."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from grpo_lambda import config as study
from grpo_lambda.multiplicity import holm
from grpo_lambda.seed_level import seed_interval
from grpo_lambda.stats import t_interval
from grpo_lambda.tables.build import build_tables
from grpo_lambda.tables.labels import variant_label
from grpo_lambda.config.report import report_options
from grpo_lambda.tables.verdicts import verdict
from results_tree import STUDY_SEEDS, build_study_tree, make_study_config, study_train_log


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("study")
    config = study.validate(make_study_config(str(root)))
    build_study_tree(root, config)
    return root, config, build_tables(config, root)


CELLS = {"grpo": (False, False), "grpo-clamp": (False, True), "trace-noclamp": (True, False), "trace": (True, True)}


def test_the_effects_are_the_contrasts_of_the_four_cells(run):
    _, _, tables = run
    accuracy = (tables["results_by_variant"].query("benchmark == 'average'").set_index("variant")["accuracy"])
    factorial = tables["factorial"].set_index(["metric", "benchmark", "effect"])
    a = {levels: accuracy[v] for v, levels in CELLS.items()}  # (trace, clamp) -> accuracy
    expected = {"trace with clamp off": a[True, False] - a[False, False],
                "trace with clamp on": a[True, True] - a[False, True],
                "clamp with trace off": a[False, True] - a[False, False],
                "clamp with trace on": a[True, True] - a[True, False],
                "trace": ((a[True, False] - a[False, False]) + (a[True, True] - a[False, True])) / 2,
                "clamp": ((a[False, True] - a[False, False]) + (a[True, True] - a[True, False])) / 2,
                "trace × clamp": a[True, True] - a[False, True] - a[True, False] + a[False, False]}
    for effect, value in expected.items():
        assert factorial.loc[("accuracy", "average", effect), "estimate"] == pytest.approx(value)
    # the training-reward AUC: the seed-level interval of the per-seed contrasts (the four cells of a seed),
    # whose values the table lists by seed; at 4 seeds the sign-flip test has no 95% interval
    auc = {v: np.array([study_train_log(v, s)["reward"].mean() for s in STUDY_SEEDS]) for v in CELLS}
    per_seed = auc["trace"] - auc["grpo-clamp"] - auc["trace-noclamp"] + auc["grpo"]
    row = tables["factorial"].query("metric == 'reward_auc' and effect == 'trace × clamp'").iloc[0]
    expected_interval = seed_interval(per_seed)
    assert row["estimate"] == pytest.approx(expected_interval.estimate)
    assert row["estimate_low"] == -np.inf and row["estimate_high"] == np.inf
    shown = dict(pair.split(":") for pair in row["per_seed"].split())
    assert [int(s) for s in shown] == STUDY_SEEDS
    assert [float(v) for v in shown.values()] == pytest.approx(per_seed, abs=1e-5)
    assert row["seeds"] == len(STUDY_SEEDS) and row["df"] == len(STUDY_SEEDS) - 1


def test_holm_runs_within_each_declared_family(run):
    """The simple effects, the main effects and the interaction are three families on the mean accuracy
    (the interaction alone), per-suite rows one family, the AUC's three more; no row in two."""
    _, config, tables = run
    level = report_options(config)["level"]
    factorial = tables["factorial"]
    average = factorial[(factorial["metric"] == "accuracy") & (factorial["benchmark"] == "average")]
    assert average.groupby("family")["effect"].count().to_dict() == {"simple effects": 4, "main effects": 2,
                                                                     "interaction": 1}
    suites = factorial[(factorial["metric"] == "accuracy") & (factorial["benchmark"] != "average")]
    assert set(suites["family"]) == {"per-suite accuracy"}
    for _, rows in factorial.groupby(["model", "dataset", "family"]):
        assert rows["p_holm"].to_numpy() == pytest.approx(holm(rows["p"].to_numpy()))
        for row in rows.itertuples():
            floor = row.p_floor * len(rows)
            assert row.verdict == verdict(row.estimate, row.p_holm, row.p_equivalence_holm, 1 - level,
                                          family_floor=floor)
            assert not pd.isna(row.p_equivalence)


def test_the_primary_family_of_a_factorial_study_is_its_simple_effects(run):
    root, config, _ = run
    primary = {**config, "report": {**config["report"], "primary": "factorial"}}
    tables = build_tables(primary, root)
    factorial, paired = tables["factorial"], tables["paired"]
    chosen = factorial[factorial["family"] == "primary"]
    assert set(chosen["kind"]) == {"simple"} and set(chosen["benchmark"]) == {"average"} and len(chosen) == 4
    # a paired row that is one of those simple effects is counted there only
    moved = paired[paired["role"] == "factorial"]
    assert set(moved["method"]) == {"grpo-clamp", "trace-noclamp"}
    assert moved["p_holm"].isna().all() and moved["verdict"].isna().all()
    assert "primary" not in set(paired["family"])


def test_each_metric_is_tested_against_its_own_margin(run):
    """results_tree's margins differ (accuracy 0.2, reward AUC 0.05): each row's TOST p is its own metric's."""
    _, config, tables = run
    margins = report_options(config)["equivalence_margin"]
    from grpo_lambda.stats import Interval

    factorial = tables["factorial"]
    checked = 0
    for row in factorial[factorial["metric"] == "accuracy"].itertuples():
        interval = Interval(row.estimate, row.estimate_low, row.estimate_high, row.se, row.df)
        own, other = interval.equivalence_p(margins["accuracy"]), interval.equivalence_p(margins["reward_auc"])
        assert row.p_equivalence == pytest.approx(own), row.effect
        checked += own != pytest.approx(other, abs=1e-3)
    assert checked > 10  # the two margins give other p-values on most rows: the test can tell them apart
    for row in factorial[factorial["metric"] == "reward_auc"].itertuples():
        values = [float(pair.split(":")[1]) for pair in row.per_seed.split()]
        assert row.p_equivalence == pytest.approx(seed_interval(values).equivalence_p(margins["reward_auc"]),
                                                  abs=1e-5)


def test_four_agreeing_seeds_are_too_few_for_a_verdict_on_the_training_reward(run):
    """The synthetic study's trace adds 0.10 to the reward's rise for every seed; at 4 seeds the exact
    sign-flip test's smallest p is 2^(1-4) = 0.125, so no outcome could reject: "too few seeds", no MDE."""
    _, _, tables = run
    row = tables["factorial"].query("metric == 'reward_auc' and effect == 'trace'").iloc[0]
    assert row["estimate"] > 0.05 and row["p"] == pytest.approx(0.125) and row["p_floor"] == pytest.approx(0.125)
    assert row["verdict"] == "too few seeds" and row["mde"] == np.inf


def test_without_a_margin_nothing_is_equivalent(run):
    root, config, _ = run
    bare = {**config, "report": {k: v for k, v in config["report"].items() if k != "equivalence_margin"}}
    tables = build_tables(bare, root)
    for name, column in (("paired", "verdict"), ("factorial", "verdict"), ("learning_speed", "auc_verdict")):
        assert "equivalent" not in set(tables[name][column]), name
        assert tables[name][column.replace("verdict", "p_equivalence")].isna().all(), name


def test_the_verdict_rule():
    assert verdict(0.05, 0.01, np.nan, 0.05) == "ahead" and verdict(-0.05, 0.01, np.nan, 0.05) == "behind"
    assert verdict(-3.0, 0.01, np.nan, 0.05, lower_is_better=True) == "ahead"  # fewer steps
    assert verdict(0.01, 0.3, 0.01, 0.05) == "equivalent"
    assert verdict(0.01, 0.3, 0.2, 0.05) == "not distinguishable"
    assert verdict(0.01, 0.3, np.nan, 0.05) == "not distinguishable"
    assert verdict(0.01, np.nan, np.nan, 0.05) is None
    # Holm first: a raw p under α does not make a verdict when the adjusted one is over it
    assert verdict(0.05, 0.06, np.nan, 0.05) == "not distinguishable"
    # a family whose test cannot reach α (m × the smallest p ≥ α) says so instead
    assert verdict(0.05, 0.125, np.nan, 0.05, family_floor=0.125) == "too few seeds"
    assert verdict(0.05, 0.125, 0.01, 0.05, family_floor=0.125) == "equivalent"


# --- report.factorial and report.equivalence_margin are checked before any job -----------------------


@pytest.mark.parametrize("change, message", [
    (lambda f: f["cells"].update({"nope": f["cells"].pop("grpo")}), "'nope' is not a variant"),
    (lambda f: f["cells"].update({"grpo": {"trace": True, "clamp": True}}), "are the same cell"),
    (lambda f: f["cells"].pop("grpo"), "no variant for trace: False, clamp: False"),
    (lambda f: f["cells"]["grpo"].update({"trace": "off"}), "report.factorial.cells.grpo.trace"),
    (lambda f: f["cells"]["grpo"].pop("clamp"), "must give each factor of"),
    (lambda f: f.update({"factors": ["trace", "trace"]}), "two different factors"),
], ids=["not a variant", "two variants in a cell", "a cell empty", "not a boolean", "a factor left out",
     "one factor twice"])
def test_a_bad_factorial_is_refused_naming_the_culprit(tmp_path, change, message):
    config = make_study_config(str(tmp_path))
    change(config["report"]["factorial"])
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    with pytest.raises(study.ConfigError, match=message):
        study.load(path)


def test_a_bad_margin_is_refused(tmp_path):
    config = make_study_config(str(tmp_path))
    config["report"]["equivalence_margin"] = {"accuracy": 0}
    with pytest.raises(study.ConfigError, match="equivalence_margin"):
        study.validate(config)


def test_the_clamp_trace_config_declares_its_two_by_two():
    from conftest import ROOT

    config = study.load(ROOT / "config" / "clamp-trace.yaml")
    design = report_options(config)["factorial"]
    assert set(design["cells"].values()) == set(config["variants"])
    assert {design["cells"][(True, True)], design["cells"][(False, False)]} == {"recent-trace-0.99", "grpo"}


# --- Table 1's rows and one label per variant ------------------------------------------------------


def test_table1_pools_only_the_chosen_grpo_lambda_variants_and_a_check_line_stays_apart(run):
    """The rule: a row pools several variants only by report.grpo_lambda_variant; every other row is one
    variant under its own label. P-trace's check line (gspo-as-trace) is not pooled into P-trace."""
    _, config, tables = run
    t1 = tables["table1"].set_index("method")
    assert t1.loc["ptrace", "variants"] == "ptrace" and t1.loc["gspo-as-trace", "variants"] == "gspo-as-trace"
    for method, row in t1.iterrows():
        if method != "sft" and len(row["variants"].split()) == 1:
            assert row["label"] == variant_label(config, row["variants"]), method
    assert t1["label"].is_unique


def test_one_label_per_variant_in_every_table(run):
    _, config, tables = run
    for name in ("results", "results_by_variant", "paired", "learning_speed", "diagnostics"):
        frame = tables[name]
        key = "method" if name == "paired" else "variant"
        rows = frame[frame["dataset"] != "all"] if name == "paired" else frame
        for variant, label in zip(rows[key], rows["label"]):
            assert label == variant_label(config, variant), (name, variant)
    labels = [variant_label(config, v) for v in config["variants"]]
    assert len(set(labels)) == len(labels)
    assert variant_label(config, "dapo") == "DAPO" and variant_label(config, "grpo-clamp") == "GRPO, clamp -0.1"
    assert variant_label(config, "trace-noclamp") == "recent/trace/0.99, no clamp"


def test_diagnostics_are_seed_means_of_step_means_with_t_intervals(run):
    _, _, tables = run
    diagnostics = tables["diagnostics"].set_index("variant")
    per_seed = np.array([study_train_log("dapo", s)["dropped_groups"].mean() for s in STUDY_SEEDS])
    expected = t_interval(per_seed)
    row = diagnostics.loc["dapo"]
    assert (row["dropped_groups"], row["dropped_groups_low"], row["dropped_groups_high"]) == pytest.approx(
        (expected.estimate, expected.low, expected.high))
    assert diagnostics.drop(index="dapo")["dropped_groups"].isna().all()  # logged by DAPO's sampling only
    entropy = np.mean([study_train_log("grpo", s)["entropy"].mean() for s in STUDY_SEEDS])
    assert diagnostics.loc["grpo", "entropy"] == pytest.approx(entropy)
    assert (diagnostics["seeds"] == len(STUDY_SEEDS)).all()
