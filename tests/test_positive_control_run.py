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


def test_no_verdict_is_read_at_three_sft_models_and_every_sft_model_points_the_predicted_way(table):
    """Read over the three SFT models a layout (df 2 an effect, the contrast spanning two layouts' strata at
    most 4), no accuracy family has a verdict; the SFT models' means still point the predicted way."""
    after, before = table.loc["decoys-after"], table.loc["decoys-before"]
    contrast = table[table["role"] == "contrast"].iloc[0]
    assert (table["procedure"] == "descriptive").all() and (table["outcome"] == "no verdict").all()
    assert after["df"] == pytest.approx(2) and before["df"] == pytest.approx(2) and contrast["df"] <= 4
    assert after["estimate_low"] < 0 < after["estimate_high"]  # the interval that was [+0.065, +0.218]
    assert contrast["estimate_low"] > 0 and contrast["p_t"] < 0.05 and after["p_t"] > 0.1
    assert all(mean > 0 for mean in _sft_means(after["per_seed"]))  # "each SFT model's mean effect is positive"
    assert all(mean < 0 for mean in _sft_means(before["per_seed"]))  # the page's −0.021, −0.146, −0.167


def test_the_pages_say_what_the_design_could_see_not_that_the_instrument_is_not_blind(table):
    """The control's last line gives the MDE, in numbers, and nowhere does a page claim that a null elsewhere
    is not blindness of the instrument; the README says the instrument's reach from the dose-response control
    (docs/dose-lambda-run), which replaced this control's block there."""
    effects = table[table["role"] == "effect"]
    low, high = effects["mde"].min(), effects["mde"].max()
    for page in (RUN / "README.md", ROOT / "README.md"):
        text = page.read_text(encoding="utf-8")
        assert "not blindness" not in text and "is not an instrument that sees nothing" not in text, page
    assert f"could have seen: an effect of {low:.3f} to {high:.3f} or more" in (RUN / "README.md").read_text()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "<!-- generated: dose-lambda-run/control_finding -->" in readme
    assert "<!-- generated: positive-control-run/control_finding -->" not in readme
    finding = (RUN / "README.md").read_text(encoding="utf-8").split("<!-- generated: positive-control-run/control_finding")[1]
    assert "as predicted**" not in finding.split("<!-- end generated")[0]
