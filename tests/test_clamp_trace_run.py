"""Conclusion-level claims about the clamp x trace 2 x 2 (docs/clamp-trace-run/, written by
`python scripts/publish_run.py config/clamp-trace.yaml docs/clamp-trace-run`), checked on the tables it
published, and the README's one sentence of prose about it. Never digits: the verdicts the sentence rests on.
That the tables and blocks are what the raw files give is tests/test_publish_run.py's."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs" / "clamp-trace-run"
CONFIG = yaml.safe_load((REPO / "config" / "clamp-trace.yaml").read_text())

pytestmark = pytest.mark.skipif(not (DOCS / "raw").is_dir(), reason=(
    "docs/clamp-trace-run has no raw/: run `snakemake --cores 2 --configfile config/clamp-trace.yaml`, then "
    "`python scripts/publish_run.py config/clamp-trace.yaml docs/clamp-trace-run`"))

# The README's headline sentence about the 2 x 2, which the verdicts below must bear out.
CLAIM = "GRPO-λ's lead on this task is the −0.1 advantage clamp, not the trace."


@pytest.fixture(scope="module")
def effects() -> pd.DataFrame:
    table = pd.read_csv(DOCS / "tables" / "factorial.csv")
    table = table[(table["metric"] == "reward_auc") | (table["benchmark"] == "average")]
    return table.set_index(["metric", "effect"])


def test_the_run_is_the_configs_two_by_two_with_at_least_eight_seeds(effects):
    run = yaml.safe_load((DOCS / "raw" / "config.yaml").read_text())
    assert run["variants"] == CONFIG["variants"] and run["report"]["factorial"] == CONFIG["report"]["factorial"]
    assert len(run["seeds"]) >= 8 and (effects["seeds"] >= 8).all()


def test_the_clamp_is_ahead_and_the_trace_is_not_on_either_metric(effects):
    """What the README's sentence says, as the Holm-corrected verdicts of the 2 x 2's main effects."""
    for metric in ("accuracy", "reward_auc"):
        assert effects.loc[(metric, "clamp"), "verdict"] == "ahead", metric
        assert effects.loc[(metric, "trace"), "verdict"] == "not distinguishable", metric
        assert effects.loc[(metric, "trace"), "estimate"] < effects.loc[(metric, "clamp"), "estimate"], metric


def test_grpo_with_the_clamp_alone_is_ahead_of_grpo_as_grpo_lambda_is():
    paired = pd.read_csv(DOCS / "tables" / "paired.csv")
    paired = paired[(paired["dataset"] != "all") & (paired["benchmark"] == "average")].set_index("method")
    assert paired.loc["grpo-clamp", "verdict"] == "ahead"
    assert paired.loc["recent-trace-0.99", "verdict"] == "ahead"


def test_the_readme_makes_the_claim_beside_the_generated_effects():
    readme = (REPO / "README.md").read_text()
    assert CLAIM in readme
    claim_at = readme.index(CLAIM)
    assert claim_at < readme.index("<!-- generated: clamp-trace-run/factorial -->") < claim_at + 600
