"""The published horizon run (docs/horizon-run): the run page's sentences say what its tables say (the README
quotes horizon study II instead). tests/test_publish_run.py rebuilds every table and block from the raw files; this file checks
that the sentences a reader takes away agree with the table's verdicts and band column."""

from __future__ import annotations

import pandas as pd
import pytest

from conftest import ROOT

RUN = ROOT / "docs" / "horizon-run"
pytestmark = pytest.mark.skipif(not (RUN / "tables" / "horizon.csv").is_file(), reason="no published horizon run")

WORDS = {"ahead": "grows with the chain's length", "behind": "shrinks as the chain grows",
         "equivalent": "does not change with the chain's length", "not distinguishable": "is not resolved"}


def finding(path) -> str:
    text = path.read_text(encoding="utf-8")
    start = text.index("<!-- generated: horizon-run/horizon_finding -->")
    return text[start:text.index("<!-- end generated -->", start)]


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return pd.read_csv(RUN / "tables" / "horizon.csv")


@pytest.mark.parametrize("page", ["docs/horizon-run/README.md"])
def test_the_finding_states_each_pair_s_trend_verdict_and_no_other(table, page):
    text = finding(ROOT / page)
    sentences = {line.split("**")[1]: line for line in text.splitlines() if line.startswith("- **")}
    trends = table[table["role"] == "trend"]
    assert set(sentences) == set(trends["pair"])
    for _, trend in trends.iterrows():
        sentence = sentences[trend["pair"]]
        assert WORDS[trend["verdict"]] in sentence
        assert all(words not in sentence for verdict, words in WORDS.items() if verdict != trend["verdict"])


@pytest.mark.parametrize("page", ["docs/horizon-run/README.md"])
def test_the_finding_says_the_band_failed_exactly_where_the_table_marks_a_horizon_outside_it(table, page):
    text = finding(ROOT / page)
    outside = table[(table["role"] == "effect") & (table["in_band"].astype(str) == "False")]
    assert ("did not hold" in text) == (len(outside) > 0)
    for _, row in outside.iterrows():
        assert f"{int(row['columns'])} columns {row['sft_accuracy']:.3f}" in text


def test_the_run_spans_six_times_in_chain_length_with_eight_seeds_per_arm(table):
    effects = table[table["role"] == "effect"]
    assert effects["chain_length"].max() / effects["chain_length"].min() >= 6
    assert (effects["seeds"] >= 8).all() and len(effects) >= 3
