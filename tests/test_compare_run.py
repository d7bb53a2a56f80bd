"""The published comparison (docs/compare-run/, written by `python scripts/publish_run.py config/compare.yaml
docs/compare-run`): conclusion-level properties of its tables, never their digits. That the tables and the
blocks are what the raw files give is tests/test_publish_run.py's."""

import json

import pandas as pd
import pytest
import yaml

from conftest import ROOT

RUN = ROOT / "docs" / "compare-run"
TABLES = RUN / "tables"

pytestmark = pytest.mark.skipif(not (RUN / "raw").is_dir(), reason=(
    "docs/compare-run has no raw/: it predates scripts/publish_run.py (run `snakemake --cores 2 --configfile "
    "config/compare.yaml`, then `python scripts/publish_run.py config/compare.yaml docs/compare-run`)"))


@pytest.fixture(scope="module")
def config():
    """The config the published run was made with (its raw/config.yaml)."""
    return yaml.safe_load((RUN / "raw" / "config.yaml").read_text())


@pytest.fixture(scope="module")
def paired():
    return pd.read_csv(TABLES / "paired.csv").query("dataset != 'all'").set_index(["method", "benchmark"])


@pytest.fixture(scope="module")
def speed():
    return pd.read_csv(TABLES / "learning_speed.csv").set_index("variant")


def test_every_method_of_the_config_is_compared_with_grpo_with_an_interval_and_a_verdict(config, paired, speed):
    others = set(config["variants"]) - {"grpo"}
    average = paired.xs("average", level="benchmark")
    assert set(average.index) == others
    assert (average["diff_low"] <= average["diff"] + 1e-9).all() and (average["diff"] <= average["diff_high"] + 1e-9).all()
    assert average["verdict"].notna().all() and average["mde"].notna().all()
    assert set(speed.index) == set(config["variants"])
    rest = speed.drop(index="grpo")
    assert rest["auc_vs_baseline_low"].le(rest["auc_vs_baseline"] + 1e-9).all()
    assert rest["seeds"].eq(len(config["seeds"])).all()
    # every AUC gap has a verdict; the reward AUC family by the step-down max-T the config declares for it
    assert rest["auc_verdict"].notna().all()
    assert config["report"]["multiplicity"]["reward_auc"] == "max_t"
    assert rest.loc[rest["auc_family"] == "reward AUC", "auc_procedure"].eq("max_t").all()


def test_grpo_lambda_at_zero_is_grpo_exactly(paired, speed):
    """grpo-lambda-0 writes GRPO's completions: paired by seed and problem its gap is 0 with no width, on
    every suite, and its training rewards are GRPO's."""
    check = paired.xs("grpo-lambda-0", level="method")
    assert (check["diff"] == 0).all() and (check["diff_low"] == 0).all() and (check["diff_high"] == 0).all()
    assert speed.loc["grpo-lambda-0", "auc_vs_baseline"] == 0 == speed.loc["grpo-lambda-0", "auc_vs_baseline_high"]


def test_gspo_as_trace_agrees_with_gspo(paired):
    """gspo-as-trace computes GSPO's loss: its gap to GRPO and GSPO's agree within their intervals."""
    check, method = paired.loc[("gspo-as-trace", "average")], paired.loc[("gspo", "average")]
    low, high = max(check["diff_low"], method["diff_low"]), min(check["diff_high"], method["diff_high"])
    assert low <= high and abs(check["diff"] - method["diff"]) <= high - low


def test_the_published_run_was_made_in_one_environment_by_the_pipeline(config):
    provenance = pd.read_csv(TABLES / "provenance.csv")
    assert sorted(provenance["stage"]) == ["evaluate", "sft", "train"]
    assert provenance.set_index("stage").loc["train", "files"] == len(config["variants"]) * len(config["seeds"])
    made = json.loads((RUN / "run.json").read_text())["made_by"]
    assert len(made["commits"]) == 1 and not made["dirty"]
    diagnostics = pd.read_csv(TABLES / "diagnostics.csv")
    assert set(diagnostics["variant"]) == set(config["variants"])
    for figure in ("reward_curves.png", "learning_speed.png", "figure1.png"):
        assert (RUN / "figures" / figure).stat().st_size > 10_000


def test_check_lines_are_each_a_family_of_their_own_and_no_comparison_is_counted_twice(config):
    paired = pd.read_csv(TABLES / "paired.csv")
    checks = config["report"]["checks"]
    assert set(checks) == {"gspo-as-trace", "grpo-lambda-0"}
    for variant in checks:
        rows = paired[paired["method"] == variant]
        assert set(rows["family"]) == {f"check: {variant}"} and set(rows["role"]) == {"check"}
    primary = paired[paired["family"] == "primary"]
    assert not set(primary["method"]) & set(checks) and set(primary["benchmark"]) == {"average"}
    # one training set: no `all` row repeats a set's row; each comparison is in exactly one row
    assert "all" not in set(paired["dataset"])
    assert not paired.duplicated(["model", "dataset", "method", "benchmark"]).any()


def test_a_check_lines_holm_runs_over_its_six_rows_as_the_config_and_the_page_say(config):
    """A check line is a family of its own: on accuracy its rows are the five suites and their mean, corrected
    together (Holm), which config/compare.yaml and the page's own words say in so many rows."""
    paired = pd.read_csv(TABLES / "paired.csv")
    suites = set(config["benchmarks"])
    for variant in config["report"]["checks"]:
        family = paired[paired["family"] == f"check: {variant}"]
        assert set(family["benchmark"]) == suites | {"average"} and len(family) == len(suites) + 1 == 6
        assert set(family["procedure"]) == {"holm"}
    words = {"config/compare.yaml": " ".join(line.split("#", 1)[1].strip() for line in
                                             (ROOT / "config" / "compare.yaml").read_text().splitlines() if "#" in line),
             "docs/compare-run/README.md": " ".join((RUN / "README.md").read_text().split())}
    for where, text in words.items():
        assert "Holm over that line's six rows" in text and "five suites and their mean" in text, where
