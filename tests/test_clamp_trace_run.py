"""Conclusion-level claims about the clamp x trace 2 x 2 (docs/clamp-trace-run/, written by
`python scripts/publish_run.py config/clamp-trace.yaml docs/clamp-trace-run`), checked on the tables it
published, and the README's one sentence of prose about it. Never digits: the verdicts the sentence rests on
(the replication's hand-written table of predictions against outcomes, docs/clamp-trace-sft-run, is checked
digit by digit against its table). That the tables and blocks are what the raw files give is
tests/test_publish_run.py's."""

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

# The README's sentences about the 2 x 2, each with the verdicts of the published tables it states.
CLAIM = ("On this task GRPO-λ's lead is mostly its −0.1 advantage clamp: the clamp is ahead with the trace off\n"
         "and on; with the clamp on, the trace's effect is not resolved at 12 seeds")
# Its TOST within ±0.05 holds, but the margin was set after the run: no claim of equivalence.
POST_HOC = "It lies within ±0.05 by TOST, but that margin was set after the run, so this is\nno claim of equivalence"
UNRESOLVED = "Without the clamp the trace is not resolved at 12 seeds, though ahead on arith-5 in the per-suite family"


@pytest.fixture(scope="module")
def effects() -> pd.DataFrame:
    table = pd.read_csv(DOCS / "tables" / "factorial.csv")
    return table.set_index(["metric", "benchmark", "effect"])


def test_the_run_is_the_configs_two_by_two_with_at_least_eight_seeds(effects):
    run = yaml.safe_load((DOCS / "raw" / "config.yaml").read_text())
    assert run["variants"] == CONFIG["variants"] and run["report"]["factorial"] == CONFIG["report"]["factorial"]
    assert run["report"] == CONFIG["report"]  # the published tables analyse the run as the config says
    assert len(run["seeds"]) >= 8 and (effects["seeds"] >= 8).all()


def test_the_primary_family_is_the_four_simple_effects_on_the_mean_accuracy(effects):
    primary = effects[effects["family"] == "primary"]
    assert sorted(primary.index.get_level_values("effect")) == sorted(
        ["trace with clamp off", "trace with clamp on", "clamp with trace off", "clamp with trace on"])
    assert set(primary.index.get_level_values("benchmark")) == {"average"}
    assert effects.loc[("accuracy", "average", "trace × clamp"), "family"] == "interaction"


def test_the_readme_says_what_the_simple_effects_and_tost_say(effects):
    """Each clause of the one-SFT-model study's claim (on its page; the README's headline is the replication
    over eight SFT models) against the published verdicts: a change of either fails here."""
    readme = (DOCS / "README.md").read_text()
    assert CLAIM in readme and UNRESOLVED in readme and POST_HOC in readme
    simple = effects.xs(("accuracy", "average"), level=("metric", "benchmark"))
    # "the clamp is ahead with the trace off and on"
    assert simple.loc["clamp with trace off", "verdict"] == simple.loc["clamp with trace on", "verdict"] == "ahead"
    # "with the clamp on ... not resolved at 12 seeds ... within ±0.05 by TOST" (a post-hoc margin): TOST, Holm
    assert CONFIG["report"]["equivalence_margin"]["accuracy"] == 0.05
    assert simple.loc["trace with clamp on", "verdict"] == "within a post-hoc margin"  # TOST passed, margin post hoc
    assert simple.loc["trace with clamp on", "p_equivalence_holm"] < 0.05
    # "mostly": the trace's simple effects are each smaller than the clamp's
    assert max(simple.loc[["trace with clamp off", "trace with clamp on"], "estimate"]) < min(
        simple.loc[["clamp with trace off", "clamp with trace on"], "estimate"])
    # "without the clamp the trace is not resolved at 12 seeds, though ahead on arith-5 in the per-suite family"
    assert simple.loc["trace with clamp off", "verdict"] == "not distinguishable"
    suite = effects.loc[("accuracy", "arith-5", "trace with clamp off")]
    assert suite["family"] == "per-suite accuracy" and suite["verdict"] == "ahead"


def test_the_readme_makes_the_claim_beside_the_generated_primary_family():
    readme = (DOCS / "README.md").read_text()
    claim_at = readme.index(CLAIM)
    assert claim_at < readme.index("<!-- generated: clamp-trace-run/primary -->") < claim_at + 800


def test_the_readme_says_the_margin_was_set_after_the_run():
    readme = (DOCS / "README.md").read_text()
    assert "margin set after the run" in readme
    assert "Set after this run" in (REPO / "config" / "clamp-trace.yaml").read_text()


def test_the_run_page_says_what_the_exploratory_families_say(effects):
    """docs/clamp-trace-run/README.md's further clauses: the trace's main effect on accuracy is ahead in its
    own family; on the training reward the clamp is ahead both ways and the trace's main effect is
    within the AUC margin, a post-hoc one (no verdict reads equivalent); the interaction is not resolved."""
    page = (DOCS / "README.md").read_text()
    assert "its main effect, averaged\nover the clamp, is ahead in the exploratory main-effects family" in page
    assert effects.loc[("accuracy", "average", "trace"), ["family", "verdict"]].tolist() == ["main effects", "ahead"]
    auc = effects.xs("reward_auc", level="metric").droplevel("benchmark")
    assert auc.loc["clamp with trace off", "verdict"] == auc.loc["clamp with trace on", "verdict"] == "ahead"
    assert "the trace's main effect lies within ±0.012 by TOST, a post-hoc margin" in page.replace("\n", " ")
    assert auc.loc["trace", "verdict"] == "within a post-hoc margin"
    assert CONFIG["report"]["equivalence_margin"]["reward_auc"] == 0.012
    assert "The interaction is not resolved" in page
    assert effects.loc[("accuracy", "average", "trace × clamp"), "verdict"] == "not distinguishable"


REPLICATION = REPO / "docs" / "clamp-trace-sft-run"
def test_the_readme_headline_is_generated_from_the_replication_over_sft_models():
    """The README's headline about the clamp and the trace is the replication's factorial_finding block, the first
    finding under its heading (tests/test_publish_run.py checks the block's text against the raw files), and it
    says what the tables hold: the clamp with the trace off ahead, the trace with the clamp on within the declared
    ±0.03 (not a post-hoc margin), each read over 8 SFT models."""
    readme = (REPO / "README.md").read_text()
    finding = readme.index("## What the studies find")
    block = readme.index("<!-- generated: clamp-trace-sft-run/factorial_finding -->")
    assert finding < block < readme.index("<!-- generated: ", finding + 1) + 1
    text = readme[block:readme.index("<!-- end generated -->", block)]
    assert "the clamp is ahead with the trace off" in text and "within ±0.03 of no trace with the clamp on" in text
    table = pd.read_csv(REPLICATION / "tables" / "factorial.csv").set_index(["metric", "benchmark", "effect"])
    simple = table.xs(("accuracy", "average"), level=("metric", "benchmark"))
    assert simple.loc["clamp with trace off", "verdict"] == "ahead"
    assert simple.loc["trace with clamp on", "verdict"] == "equivalent"
    assert (simple.loc[["clamp with trace off", "trace with clamp on"], "sft_models"] == 8).all()
    config = yaml.safe_load((REPO / "config" / "clamp-trace-sft.yaml").read_text())
    assert config["report"]["equivalence_margin"]["accuracy"] == 0.03
    assert not config["report"]["history"].get("margins_set_after_data", False)


def test_the_replication_page_s_predictions_table_quotes_the_published_verdicts():
    """docs/clamp-trace-sft-run's table of predictions against outcomes: each row's estimate, adjusted p (TOST's
    for an equivalence) and MDE are the factorial table's, and "yes" stands exactly where the verdict is the
    prediction."""
    page = (REPLICATION / "README.md").read_text()
    table = pd.read_csv(REPLICATION / "tables" / "factorial.csv")
    rows = table[(table["metric"] == "accuracy") & (table["benchmark"] == "average")].set_index("effect")
    said = {"ahead": "ahead", "not distinguishable": "not resolved", "equivalent": "equivalent"}
    section = page[page.index("## Against the predictions"):page.index("## Every line against GRPO")]
    lines = [line for line in section.splitlines() if line.startswith("| ") and " with " in line.split("|")[1]]
    assert len(lines) == 4
    for line in lines:
        effect, predicted, outcome, held = (cell.strip() for cell in line.strip("|").split("|"))
        row = rows.loc[effect]
        p = row["p_equivalence_holm"] if row["verdict"] == "equivalent" else row["p_holm"]
        assert outcome == f"{row['estimate']:+.3f}".replace("-", "−") + \
            f", {'TOST ' if row['verdict'] == 'equivalent' else ''}Holm p {p:.3f}: {said[row['verdict']]}", effect
        expected = "within ±0.03" if row["verdict"] == "equivalent" else row["verdict"]
        assert (held == "yes") == predicted.startswith(expected), effect
        if held != "yes":
            assert held.endswith(f"(MDE {row['mde']:.3f})"), effect
