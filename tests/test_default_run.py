"""Conclusion-level claims about the embedded default (docs/default-run/, written by
`python scripts/publish_run.py config/config.yaml docs/default-run`), checked on the tables it published.
Never exact values of a run: only what any machine's run should also show, inside its intervals. That the
tables and the README's blocks are what the raw files give is tests/test_publish_run.py's."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from grpo_lambda.tables.blocks import find_blocks

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs" / "default-run"
TABLES = DOCS / "tables"
CONFIG = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
RL_VARIANTS = list(CONFIG["variants"])

pytestmark = pytest.mark.skipif(not (DOCS / "raw").is_dir(), reason=(
    "docs/default-run has no raw/: it predates scripts/publish_run.py (run `bash scripts/run_default.sh`, then "
    "`python scripts/publish_run.py config/config.yaml docs/default-run`)"))


@pytest.fixture(scope="module")
def average() -> pd.DataFrame:
    table = pd.read_csv(TABLES / "results_by_variant.csv")
    return table[table["benchmark"] == "average"].set_index("variant")


def test_the_run_is_the_configs_and_has_at_least_four_seeds(average):
    run = yaml.safe_load((DOCS / "raw" / "config.yaml").read_text())
    assert list(run["variants"]) == RL_VARIANTS and run["seeds"] == CONFIG["seeds"]
    assert set(average.index) == {"sft", *RL_VARIANTS}
    assert (average.loc[RL_VARIANTS, "n_seeds"] >= 4).all()


def test_sft_leaves_rl_a_reasoning_gap(average):
    assert 0.15 <= average.loc["sft", "accuracy"] <= 0.70


def test_every_rl_variant_beats_sft_by_ten_points_after_holm(average):
    for variant in RL_VARIANTS:
        assert average.loc[variant, "gain"] >= 0.10, variant
        assert average.loc[variant, "gain_verdict"] == "ahead", variant


def test_the_learning_speed_table_has_every_variant_with_intervals_and_verdicts():
    speed = pd.read_csv(TABLES / "learning_speed.csv").set_index("variant")
    assert set(speed.index) == set(RL_VARIANTS)
    assert (speed["seeds"] >= 4).all()
    for stat in ("auc", "steps_to_threshold"):
        assert speed[[stat, f"{stat}_low", f"{stat}_high"]].notna().all().all()
        assert ((speed[f"{stat}_low"] <= speed[stat]) & (speed[stat] <= speed[f"{stat}_high"])).all()
    others = speed.drop(index=CONFIG.get("report", {}).get("baseline", "grpo"))
    assert others[["auc_vs_baseline_low", "auc_vs_baseline_high"]].notna().all().all()
    # a family the config declares descriptive (4 seeds cannot reject) has no verdict; any other has one
    descriptive = others["auc_procedure"] == "descriptive"
    assert descriptive.eq("reward_auc" in CONFIG["report"].get("descriptive", [])).all()
    assert others.loc[descriptive, "auc_verdict"].isna().all() and others.loc[descriptive, "auc_p"].notna().all()
    assert others.loc[~descriptive, "auc_verdict"].isin(["ahead", "behind", "not distinguishable", "equivalent"]).all()


def test_the_run_was_made_from_a_clean_commit_of_this_history():
    made = json.loads((DOCS / "run.json").read_text())["made_by"]
    assert made["commits"] and not made["dirty"]
    for commit in made["commits"]:
        known = subprocess.run(["git", "-C", str(REPO), "merge-base", "--is-ancestor", commit, "HEAD"])
        if known.returncode == 128:
            pytest.skip("not a git checkout with the run's commit")  # e.g. a shallow clone
        assert known.returncode == 0, f"{commit} is not in this checkout's history"


@pytest.mark.skipif(not (DOCS / "spread.csv").is_file(), reason="no spread across SFT seeds in docs/default-run")
def test_across_sft_seeds_rl_beats_sft_and_the_held_out_run_falls_inside():
    """The numbers for another machine (the README's prediction column): intervals over at least four SFT seeds,
    every RL variant's at least ten points above SFT's, with the held-out run (other kernels' rounding)
    inside every paired interval, the rows docs/default-run/README.md tells a user to judge a run by."""
    spread = pd.read_csv(DOCS / "spread.csv").set_index("quantity")
    runs = list(spread.columns[spread.columns.get_loc("dataset") + 1:spread.columns.get_loc("mean")])
    assert len(runs) - 1 >= 4  # the last one is the held-out run (--check)
    assert spread.loc[[name for name in spread.index if name.startswith("paired")], "inside"].all()
    sft = spread.loc["accuracy: SFT"]
    rl = spread.loc[[name for name in spread.index if name.startswith("accuracy:") and name != "accuracy: SFT"]]
    assert len(rl) == len(RL_VARIANTS)
    assert (rl["prediction_low"] >= sft["prediction_high"] + 0.10).all()


@pytest.mark.skipif(not (DOCS / "spread.csv").is_file(), reason="no spread across SFT seeds in docs/default-run")
def test_every_headline_number_has_its_prediction_for_another_machine():
    """The spread names its numbers as today's tables do: no line of the README's headline lacks one."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = dict(find_blocks(readme))["default-run/headline"]
    rows = [line for line in block.strip().splitlines()[2:]]
    assert rows and all(not line.rstrip(" |").endswith("–") for line in rows), block
