"""Conclusion-level claims about the embedded default (the README's headline, docs/default-run/README.md in
full), checked on the tables the last measured run wrote (docs/default-run/, copied there by
scripts/update_docs.sh). Never exact values of a run: only what any machine's run should also show, inside
its intervals; the one exact check is that the README's headline table quotes those tables as they are."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs" / "default-run"
CONFIG = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
RL_VARIANTS = list(CONFIG["variants"])

pytestmark = pytest.mark.skipif(not (DOCS / "results_by_variant.csv").is_file()
                                or not (DOCS / "learning_speed.csv").is_file(),
                                reason="no measured default run in docs/default-run")


@pytest.fixture(scope="module")
def average() -> pd.DataFrame:
    table = pd.read_csv(DOCS / "results_by_variant.csv")
    return table[table["benchmark"] == "average"].set_index("variant")


def test_the_run_is_the_configs_and_has_at_least_four_seeds(average):
    assert set(average.index) == {"sft", *RL_VARIANTS}
    assert (average.loc[RL_VARIANTS, "n_seeds"] >= 4).all()


def test_sft_leaves_rl_a_reasoning_gap(average):
    assert 0.15 <= average.loc["sft", "accuracy"] <= 0.70


def test_every_rl_variant_beats_sft_by_ten_points_with_its_interval(average):
    for variant in RL_VARIANTS:
        assert average.loc[variant, "gain"] >= 0.10, variant
        assert average.loc[variant, "gain_low"] > 0.0, variant


def test_the_learning_speed_table_has_every_variant_with_intervals():
    speed = pd.read_csv(DOCS / "learning_speed.csv").set_index("variant")
    assert set(speed.index) == set(RL_VARIANTS)
    assert (speed["seeds"] >= 4).all()
    for stat in ("auc", "steps_to_threshold"):
        assert speed[[stat, f"{stat}_low", f"{stat}_high"]].notna().all().all()
        assert ((speed[f"{stat}_low"] <= speed[stat]) & (speed[stat] <= speed[f"{stat}_high"])).all()
    others = speed.drop(index=CONFIG.get("report", {}).get("baseline", "grpo"))
    assert others[["auc_vs_baseline_low", "auc_vs_baseline_high"]].notna().all().all()


@pytest.mark.skipif(not (DOCS / "spread.csv").is_file(), reason="no spread across SFT seeds in docs/default-run")
def test_across_sft_seeds_rl_beats_sft_and_the_held_out_run_falls_inside():
    """The numbers for another machine (the README's prediction column): intervals over at least four SFT seeds,
    every RL variant's at least ten points above SFT's, with the held-out run inside every one."""
    spread = pd.read_csv(DOCS / "spread.csv").set_index("quantity")
    runs = list(spread.columns[spread.columns.get_loc("dataset") + 1:spread.columns.get_loc("mean")])
    assert len(runs) - 1 >= 4  # the last one is the held-out run (--check)
    assert spread["inside"].all()
    sft = spread.loc["accuracy: SFT"]
    rl = spread.loc[[name for name in spread.index if name.startswith("accuracy:") and name != "accuracy: SFT"]]
    assert len(rl) == len(RL_VARIANTS)
    assert (rl["prediction_low"] >= sft["prediction_high"] + 0.10).all()


def readme_headline() -> dict[str, list[list[float]]]:
    """The README's headline table: row label → the numbers of each column after the label."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index("| | this run")
    rows = {}
    for line in text[start:].split("\n\n", 1)[0].splitlines()[2:]:
        label, *cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows[label] = [[float(n) for n in re.findall(r"[-+]?\d+\.\d+", cell.replace("−", "-"))] for cell in cells]
    return rows


@pytest.mark.skipif(not (DOCS / "spread.csv").is_file(), reason="no spread across SFT seeds in docs/default-run")
def test_the_readme_headline_quotes_the_committed_tables():
    """The README types its headline table by hand: every number must be the committed tables' own, rounded."""
    table1 = pd.read_csv(DOCS / "table1.csv").set_index("method")
    paired = pd.read_csv(DOCS / "paired.csv")
    paired = paired[(paired["dataset"] != "all") & (paired["benchmark"] == "average")].iloc[0]
    spread = pd.read_csv(DOCS / "spread.csv").set_index("quantity")
    baseline = CONFIG.get("report", {}).get("baseline", "grpo")
    expected = {
        "SFT": ([table1.loc["sft", f"average{s}"] for s in ("", "_low", "_high")], "accuracy: SFT"),
        "GRPO": ([table1.loc["grpo", f"average{s}"] for s in ("", "_low", "_high")], "accuracy: GRPO"),
        "GRPO-λ": ([table1.loc["grpo_lambda", f"average{s}"] for s in ("", "_low", "_high")], "accuracy: GRPO-λ"),
        "paired": ([paired["diff"], paired["diff_low"], paired["diff_high"]],
                   f"paired accuracy: {paired['label']} − {baseline}"),
    }
    rows = readme_headline()
    assert len(rows) == len(expected)
    for label, (this_run, prediction) in rows.items():
        key = "paired" if "paired" in label else "GRPO-λ" if label.startswith("GRPO-λ") else label
        run, quantity = expected[key]
        assert this_run == pytest.approx(run, abs=0.0005 + 1e-9), label
        assert prediction == pytest.approx(list(spread.loc[quantity, ["prediction_low", "prediction_high"]]),
                                           abs=0.0005 + 1e-9), label
