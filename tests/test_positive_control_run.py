"""The published positive-control run (docs/positive-control-run): the sentences of its page and of the
README say what its control table says. tests/test_publish_run.py rebuilds the table and the blocks from the
raw files; this file checks the claims the prose makes from them."""

from __future__ import annotations

import statistics

import pandas as pd
import pytest

from conftest import ROOT
from grpo_lambda import config as study

RUN = ROOT / "docs" / "positive-control-run"
pytestmark = pytest.mark.skipif(not (RUN / "tables" / "control.csv").is_file(), reason="no published run")


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return pd.read_csv(RUN / "tables" / "control.csv").set_index("dataset")


def _sft_means(per_seed: str) -> list[float]:
    config = study.load(str(ROOT / "config" / "positive-control.yaml"))
    values = {}
    for pair in per_seed.split():
        seed, value = pair.split(":")
        values.setdefault(study.sft_seed_of(config, int(seed)), []).append(float(value))
    return [statistics.mean(values[s]) for s in study.sft_seeds(config)]


def test_the_positive_control_and_the_contrast_are_as_predicted_the_negative_one_not_resolved(table):
    after, before = table.loc["decoys-after"], table.loc["decoys-before"]
    contrast = table[table["role"] == "contrast"].iloc[0]
    assert after["predicted"] == "ahead" and after["outcome"] == "as predicted"
    assert contrast["predicted"] == "ahead" and contrast["outcome"] == "as predicted"
    assert before["predicted"] == "behind" and before["outcome"] == "not resolved" and before["estimate"] < 0
    assert all(mean > 0 for mean in _sft_means(after["per_seed"]))  # "each SFT model's mean effect is positive"
    assert all(mean < 0 for mean in _sft_means(before["per_seed"]))  # the page's −0.021, −0.146, −0.167


def test_the_page_and_the_readme_say_the_instrument_sees_the_trace_only_where_the_table_does(table):
    seen = "The instrument sees the trace's effect where its gradient says it must"
    as_predicted = table.loc["decoys-after", "outcome"] == "as predicted"
    for page in (RUN / "README.md", ROOT / "README.md"):
        assert (seen in page.read_text(encoding="utf-8")) == as_predicted, page
    assert "The positive control comes out as predicted" in (RUN / "README.md").read_text(encoding="utf-8")
