"""Learning-speed statistics of training-reward curves: area, steps to the threshold, paired gaps."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from grpo_lambda import figures
from grpo_lambda.tables import learning_speed
from grpo_lambda.tables.collect import collect_train_logs
from grpo_lambda.config.report import report_options
from grpo_lambda.tables.write import write_table

STEPS = np.arange(1, 41)
SEEDS = [0, 1, 2, 3]


def config() -> dict:
    return {
        "models": {"tiny": {"source": "tiny"}},
        "datasets": {"arith": {"source": "synthetic"}},
        "benchmarks": {"arith-1": {"source": "synthetic"}},
        "variants": {
            "grpo": {"objective": "grpo"},
            "fast": {"objective": "grpo_lambda", "lam": 0.99, "style": "recent", "update": "trace"},
            "never": {"objective": "grpo_lambda", "lam": 0.99, "style": "both", "update": "trace"},
        },
        "seeds": SEEDS,
        "rl": {"max_steps": int(STEPS[-1])},
        "report": {"smoothing": 0.0, "final_window": 5},
    }


def curve(variant: str, seed: int) -> np.ndarray:
    """Rewards rising from 0.2 to 0.8; "fast" rises at step 10 instead of 20, "never" stays flat.
    Each seed adds its own offset, the same for every variant (a paired design)."""
    rise = {"grpo": 20, "fast": 10, "never": 10**6}[variant]
    return np.where(STEPS >= rise, 0.8, 0.2) + 0.01 * seed


def logs() -> pd.DataFrame:
    rows = [{"model": "tiny", "dataset": "arith", "variant": v, "seed": s, "step": int(t), "reward": r}
            for v in config()["variants"] for s in SEEDS for t, r in zip(STEPS, curve(v, s))]
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    cfg = config()
    return learning_speed.learning_speed_table(cfg, logs(), report_options(cfg)).set_index("variant")


def test_threshold_is_half_the_baselines_gain(table):
    # start 0.2 (+ mean seed offset 0.015), baseline final 0.8 (+0.015): halfway is 0.515
    assert table["threshold"].nunique() == 1
    assert table["threshold"].iloc[0] == pytest.approx(0.515)


def test_area_and_steps_to_threshold_follow_the_curves(table):
    assert table.loc["grpo", "auc"] == pytest.approx(np.mean([curve("grpo", s).mean() for s in SEEDS]))
    assert table.loc["fast", "auc"] > table.loc["grpo", "auc"] > table.loc["never", "auc"]
    assert table.loc["grpo", "steps_to_threshold"] == 20
    assert table.loc["fast", "steps_to_threshold"] == 10
    # never reached: censored at max_steps + 1 and said so
    assert table.loc["never", "steps_to_threshold"] == STEPS[-1] + 1
    assert table.loc["never", "reached"] == "0/4" and table.loc["fast", "reached"] == "4/4"


def test_paired_gaps_to_the_baseline_have_intervals(table):
    assert np.isnan(table.loc["grpo", "auc_vs_baseline"])
    fast = table.loc["fast"]
    assert fast["steps_vs_baseline"] == -10
    # the seed offsets are shared by both arms, so pairing leaves no spread: the interval is the point
    assert fast["steps_vs_baseline_low"] == fast["steps_vs_baseline_high"] == -10
    assert fast["auc_vs_baseline_low"] > 0 and bool(fast["auc_distinguishable"])
    assert fast["auc_verdict"] == "ahead" and fast["steps_verdict"] == "ahead"  # fewer steps is ahead
    assert table.loc["never", "auc_verdict"] == "behind" and table.loc["never", "steps_verdict"] == "behind"
    assert pd.isna(table.loc["grpo", "auc_verdict"])
    never = table.loc["never"]
    assert never["auc_vs_baseline_high"] < 0 and bool(never["steps_distinguishable"])
    for stat in ("auc", "steps_to_threshold"):
        assert (table[f"{stat}_low"] <= table[stat]).all() and (table[stat] <= table[f"{stat}_high"]).all()


def test_a_missing_seed_widens_nothing_and_pairs_only_shared_seeds():
    cfg = config()
    partial = logs()
    partial = partial[~((partial["variant"] == "fast") & (partial["seed"] == 3))]
    frame = learning_speed.learning_speed_table(cfg, partial, report_options(cfg)).set_index("variant")
    assert frame.loc["fast", "seeds"] == 3 and frame.loc["grpo", "seeds"] == 4
    assert frame.loc["fast", "steps_vs_baseline"] == -10


def test_the_table_and_figure_are_written_with_every_variant(tmp_path):
    cfg = config()
    frame = learning_speed.learning_speed_table(cfg, logs(), report_options(cfg))
    paths = write_table(frame, tmp_path, "learning_speed")
    markdown = (tmp_path / "learning_speed.md").read_text()
    assert len(paths) == 3 and all(v in markdown for v in cfg["variants"])
    fig = figures.learning_speed_figure(cfg, frame)
    assert len(fig.axes) == 2 and len(fig.axes[0].lines) >= len(cfg["variants"])
    figures.save(fig, tmp_path, "learning_speed")
    assert (tmp_path / "learning_speed.png").stat().st_size > 1000


def test_no_logs_gives_an_empty_table_and_a_figure_that_says_so():
    cfg = config()
    empty = collect_train_logs("/nonexistent", cfg)
    frame = learning_speed.learning_speed_table(cfg, empty, report_options(cfg))
    assert frame.empty and list(frame.columns) == learning_speed.COLUMNS
    fig = figures.learning_speed_figure(cfg, frame)
    assert "no training logs" in fig.axes[0].texts[0].get_text()


# --------------------------------------------------------------------------------------------------
# Pairing by seed, with seeds far apart and a small gap that varies from seed to seed
# --------------------------------------------------------------------------------------------------

SPREAD_SEEDS = list(range(8))


def spread_rise(variant: str, seed: int) -> int:
    """The step where the reward jumps from 0.2 to 0.8: the baseline's seeds rise at steps 10 to 31,
    three apart; "close" rises 1, 2 or 3 steps before the baseline's run of the same seed."""
    base = 10 + 3 * seed
    return base if variant == "grpo" else base - (1 + seed % 3)


def spread_logs() -> pd.DataFrame:
    rows = [{"model": "tiny", "dataset": "arith", "variant": v, "seed": s, "step": int(t),
             "reward": 0.8 if t >= spread_rise(v, s) else 0.2}
            for v in ("grpo", "close") for s in SPREAD_SEEDS for t in STEPS]
    return pd.DataFrame(rows)


def test_gaps_to_the_baseline_are_paired_by_seed():
    cfg = config()
    cfg["variants"] = {"grpo": cfg["variants"]["grpo"], "close": cfg["variants"]["fast"]}
    cfg["seeds"] = SPREAD_SEEDS
    frame = learning_speed.learning_speed_table(cfg, spread_logs(), report_options(cfg))
    frame = frame.set_index("variant")
    # start 0.2, the baseline's last 5 steps 0.8 (every seed has risen by step 31): threshold 0.5,
    # reached at the rise itself (no smoothing)
    assert frame.loc["close", "threshold"] == pytest.approx(0.5)
    rise = {v: np.array([spread_rise(v, s) for s in SPREAD_SEEDS], dtype=float) for v in ("grpo", "close")}
    # a seed's area is 0.2 + 0.6 × (the share of the 40 steps at or after its rise)
    auc = {v: 0.2 + 0.6 * (STEPS[-1] - rise[v] + 1) / len(STEPS) for v in rise}
    close = frame.loc["close"]
    for stat, values in (("steps", rise), ("auc", auc)):
        per_seed = values["close"] - values["grpo"]  # steps -1, -2, -3; area +0.015, +0.03, +0.045
        n = len(SPREAD_SEEDS)
        # Resampling the two arms apart would spread the gap by the seeds' own spread (rises 10 to 31):
        # its normal interval would straddle 0 and be far wider than the per-seed gaps' range.
        unpaired_sd = np.sqrt((np.var(values["close"]) + np.var(values["grpo"])) / n)
        assert 1.96 * unpaired_sd > abs(per_seed.mean())
        assert 2 * 1.96 * unpaired_sd > 3 * (per_seed.max() - per_seed.min())
        # Paired by seed: the t interval of the per-seed gaps, x̄ ± t(7, 0.975) · s/√8; the gaps differ,
        # so it is not a point.
        low, high = close[f"{stat}_vs_baseline_low"], close[f"{stat}_vs_baseline_high"]
        half = 2.364624 * per_seed.std(ddof=1) / np.sqrt(n)
        assert close[f"{stat}_vs_baseline"] == pytest.approx(per_seed.mean())
        assert (low, high) == pytest.approx((per_seed.mean() - half, per_seed.mean() + half), rel=1e-6)
        assert low < high and bool(close[f"{stat}_distinguishable"])
        assert close[f"{stat}_p"] < 0.05 and close[f"{stat}_verdict"] == "ahead"
        assert close[f"{stat}_mde"] == pytest.approx((2.364624 + 0.896030) * per_seed.std(ddof=1) / np.sqrt(n),
                                                     rel=1e-5)


def test_a_run_whose_log_stops_early_and_never_reached_the_threshold_is_not_counted_as_reaching_it():
    cfg = config()
    short = logs()
    short = short[~((short["variant"] == "never") & (short["step"] > 15))]  # its logs end at step 15
    frame = learning_speed.learning_speed_table(cfg, short, report_options(cfg)).set_index("variant")
    assert frame.loc["never", "steps"] == 15 and frame.loc["never", "steps_to_threshold"] == 16
    assert frame.loc["never", "reached"] == "0/4" and frame.loc["fast", "reached"] == "4/4"
