"""The published second horizon run (docs/horizon-ii-run): the page's sentences say what its tables say.
tests/test_publish_run.py rebuilds every table and block from the raw files; this file checks the claims
its prose makes from them: no verdict at three SFT models a horizon, the point estimates' signs, where the SFT
models spread more than their RL seeds predict, and the room each arm left."""

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
    """Read over the three SFT models a horizon the trend family is descriptive: no verdict, its t test alone
    far from resolving (p ≥ 0.2), its TOST against ±0.03 not passing, its MDE (0.105) three times the slope
    the horizon study found."""
    trend = table[table["role"] == "trend"].iloc[0]
    curvature = table[table["role"] == "curvature"].iloc[0]
    assert trend["procedure"] == curvature["procedure"] == "descriptive"
    assert pd.isna(trend["verdict"]) and pd.isna(curvature["verdict"])
    assert min(trend["p_t"], curvature["p_t"]) >= 0.2
    assert trend["p_equivalence"] > 0.5  # "TOST ... p 0.57"
    assert trend["mde"] > 0.1 and trend["estimate_low"] < -0.034 < trend["estimate_high"]
    assert trend["df"] <= 2 * 4  # Welch–Satterthwaite over four horizons' K − 1 = 2, never more


def test_every_point_estimate_is_positive_and_none_is_read_at_three_sft_models(table, config):
    """Every per-horizon effect has df K − 1 = 2 and no verdict; the 3-column effect that was read as ahead
    (from an SFT stratum estimated at zero whose df were kept) now includes zero."""
    effects = table[table["role"] == "effect"]
    assert (effects["estimate"] > 0).all()
    assert list(effects["df"]) == pytest.approx([2.0] * 4) and effects["verdict"].isna().all()
    assert (effects["sft_models"] == 3).all() and (effects["p_floor"] == 0.25).all()
    three = effects[effects["columns"] == 3].iloc[0]
    assert three["estimate_low"] < 0 < three["estimate_high"] and three["p_t"] > 0.1
    sft_means = [statistics.mean(block) for per_seed in effects["per_seed"]
                 for block in _by_sft_model(config, per_seed)]
    assert sum(mean > 0 for mean in sft_means) == 11 and len(sft_means) == 12
    six = effects[effects["columns"] == 6].iloc[0]
    assert six["p_equivalence"] > 0.05  # the 6-column effect is not shown equivalent to zero


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


def test_the_pooled_row_the_page_reads_as_exploratory_has_no_verdict_and_is_a_quarter_of_the_mean_effect(table):
    paired = pd.read_csv(RUN / "tables" / "paired.csv")
    pooled = paired[(paired["dataset"] == "all") & (paired["benchmark"] == "average")].iloc[0]
    assert pooled["procedure"] == "descriptive" and pd.isna(pooled["verdict"]) and pooled["p_t"] < 0.01
    assert pooled["df"] < 8  # four horizons' SFT models, K − 1 = 2 each
    effects = table[table["role"] == "effect"]
    assert pooled["diff"] == pytest.approx(effects["estimate"].mean() / 4, abs=1e-3)
