"""The published second horizon run (docs/horizon-ii-run): the page's sentences say what its tables say.
tests/test_publish_run.py rebuilds every table and block from the raw files; this file checks the claims
its prose makes from them: the primary family unresolved, the point estimates' signs, where the SFT models
spread more than their RL seeds predict, and the room each arm left."""

from __future__ import annotations

import statistics

import pandas as pd
import pytest

from conftest import ROOT
from grpo_lambda import config as study

RUN = ROOT / "docs" / "horizon-ii-run"
pytestmark = pytest.mark.skipif(not (RUN / "tables" / "horizon.csv").is_file(), reason="no published run")


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return pd.read_csv(RUN / "tables" / "horizon.csv")


@pytest.fixture(scope="module")
def config() -> dict:
    return study.load(str(ROOT / "config" / "horizon-ii.yaml"))


def _by_sft_model(config, per_seed: str) -> list[list[float]]:
    """A per-seed column as one list of effects per SFT model, in sft.seeds order."""
    values = {}
    for pair in per_seed.split():
        seed, value = pair.split(":")
        values.setdefault(study.sft_seed_of(config, int(seed)), []).append(float(value))
    return [values[s] for s in study.sft_seeds(config)]


def test_neither_the_trend_nor_its_lack_of_fit_is_resolved_nor_shown_absent(table):
    trend = table[table["role"] == "trend"].iloc[0]
    curvature = table[table["role"] == "curvature"].iloc[0]
    assert trend["verdict"] == curvature["verdict"] == "not distinguishable"
    assert min(trend["p_holm"], curvature["p_holm"]) >= 0.39
    assert trend["p_equivalence_holm"] > 0.5  # "TOST ... p 0.57"
    assert trend["mde"] > 0.09 and trend["estimate_low"] < -0.034 < trend["estimate_high"]


def test_every_point_estimate_is_positive_and_three_columns_alone_is_resolved(table, config):
    effects = table[table["role"] == "effect"]
    assert (effects["estimate"] > 0).all()
    assert list(effects.loc[effects["verdict"] == "ahead", "columns"]) == [3]
    sft_means = [statistics.mean(block) for per_seed in effects["per_seed"]
                 for block in _by_sft_model(config, per_seed)]
    assert sum(mean > 0 for mean in sft_means) == 11 and len(sft_means) == 12
    six = effects[effects["columns"] == 6].iloc[0]
    assert six["p_equivalence_holm"] > 0.05  # the 6-column effect is not shown equivalent to zero


def test_the_sft_models_spread_more_than_their_rl_seeds_predict_at_two_columns_alone(table, config):
    """The page: at 2 columns the SFT models' means spread 2.7 times what the within-model spread predicts for
    a mean of four RL seeds; at 3, 4 and 6 columns no more than 1.25 times."""
    effects = table[table["role"] == "effect"]
    for _, row in effects.iterrows():
        blocks = _by_sft_model(config, row["per_seed"])
        within = statistics.mean(statistics.variance(block) for block in blocks)
        ratio = statistics.stdev(statistics.mean(block) for block in blocks) / (within / len(blocks[0])) ** 0.5
        assert (ratio > 2.5) if row["columns"] == 2 else (ratio < 1.25), (row["columns"], ratio)


def test_the_trace_left_fewer_carry_errors_than_its_baseline_at_every_horizon_and_the_band_held(table):
    errors = pd.read_csv(RUN / "tables" / "horizon_errors.csv")
    rl = errors[errors["variant"] != "sft"].pivot(index="columns", columns="variant", values="first_error_carry")
    assert (rl["recent-trace-0.99"] < rl["grpo-clamp"]).all()
    sft = errors[errors["variant"] == "sft"].set_index("columns")
    other = errors[errors["variant"] != "sft"].groupby("columns")["first_error_other"].min()
    assert (sft["first_error_other"] <= 0.007).all() and other.loc[6] > 0.15
    assert table.loc[table["role"] == "effect", "in_band"].astype(str).eq("True").all()


def test_the_pooled_row_the_page_reads_as_exploratory_is_ahead_and_a_quarter_of_the_mean_effect(table):
    paired = pd.read_csv(RUN / "tables" / "paired.csv")
    pooled = paired[(paired["dataset"] == "all") & (paired["benchmark"] == "average")].iloc[0]
    assert pooled["verdict"] == "ahead" and pooled["p_holm"] < 0.01
    effects = table[table["role"] == "effect"]
    assert pooled["diff"] == pytest.approx(effects["estimate"].mean() / 4, abs=1e-3)
    three = effects[effects["columns"] == 3].iloc[0]
    assert 4 < three["df"] < 6  # the SFT models' term left out of the variance, its df kept
