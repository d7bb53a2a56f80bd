"""The published comparison (docs/compare-run/, made by scripts/update_compare_docs.sh from a run of
config/compare.yaml): conclusion-level properties of the committed tables, never their digits."""

import pandas as pd
import pytest

from conftest import ROOT
from grpo_lambda import config as study

RUN = ROOT / "docs" / "compare-run"
CONFIG = study.load(str(ROOT / "config" / "compare.yaml"))


@pytest.fixture(scope="module")
def paired():
    table = pd.read_csv(RUN / "paired.csv")
    return table[(table["dataset"] != "all") & (table["benchmark"] == "average")].set_index("method")


@pytest.fixture(scope="module")
def speed():
    return pd.read_csv(RUN / "learning_speed.csv").set_index("variant")


def test_every_method_of_the_config_is_compared_with_grpo_with_an_interval(paired, speed):
    others = set(CONFIG["variants"]) - {"grpo"}
    assert set(paired.index) == others
    assert (paired["diff_low"] <= paired["diff"] + 1e-9).all() and (paired["diff"] <= paired["diff_high"] + 1e-9).all()
    assert set(speed.index) == set(CONFIG["variants"])
    rest = speed.drop(index="grpo")
    assert rest["auc_vs_baseline_low"].le(rest["auc_vs_baseline"] + 1e-9).all()
    assert rest["seeds"].eq(len(CONFIG["seeds"])).all()


def test_the_check_lines_agree_with_the_methods_they_restate(paired, speed):
    """gspo-as-trace computes gspo's loss and grpo-lambda-0 grpo's: their results must agree within the
    intervals (in this run they are identical)."""
    for check, method in (("gspo-as-trace", "gspo"), ("grpo-lambda-0", None)):
        if method is None:
            assert paired.loc[check, "diff_low"] <= 0 <= paired.loc[check, "diff_high"]
            assert abs(speed.loc[check, "auc"] - speed.loc["grpo", "auc"]) <= 1e-9 + (
                speed.loc[check, "auc_vs_baseline_high"] - speed.loc[check, "auc_vs_baseline_low"])
            continue
        low = max(paired.loc[check, "diff_low"], paired.loc[method, "diff_low"])
        high = min(paired.loc[check, "diff_high"], paired.loc[method, "diff_high"])
        assert low <= high, (check, method)  # the two intervals overlap
        assert abs(paired.loc[check, "diff"] - paired.loc[method, "diff"]) <= high - low


def test_the_published_run_was_made_in_one_environment_by_the_pipeline():
    provenance = pd.read_csv(RUN / "provenance.csv")
    assert sorted(provenance["stage"]) == ["evaluate", "sft", "train"]
    assert provenance.set_index("stage").loc["train", "files"] == len(CONFIG["variants"]) * len(CONFIG["seeds"])
    for figure in ("reward_curves.png", "learning_speed.png", "figure1.png"):
        assert (RUN / figure).stat().st_size > 10_000
