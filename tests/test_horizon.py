"""The horizon study: the arith generator's horizon knob (difficulty held while the chain grows) and the
horizon tables (each pair's simple effect per horizon and its trend with ln chain length)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import yaml

from grpo_lambda.data import arith
from grpo_lambda.tables.cells import Cells
from grpo_lambda.tables.horizon import (chain_length, curvature_weights, horizon_errors_table, horizon_table,
                                        slope_weights)
from grpo_lambda.tables.keys import KEYS
from grpo_lambda.tables.names import figure_names, table_names
from grpo_lambda.config.report import report_options


@pytest.mark.parametrize("columns", [2, 6, 14])
def test_a_horizon_holds_its_carry_free_share_and_its_carries_per_problem(columns):
    # 1000 problems: at 2 columns there are only 6,480 distinct training problems, and drawing half of
    # them without repeats shifts the shares (3000 draws: 0.31 carry-free, 0.91 carries a problem).
    rows = arith.generate(1000, seed=7, columns=columns, carry_free_share=0.35, carry_error_rate=0.65)
    free = np.mean([row["carries"] == 0 for row in rows])
    carries = np.mean([row["carries"] for row in rows])
    # Binomial(1000, 0.35) has sd 0.015.
    assert abs(free - 0.35) < 0.05
    # Each column carries with p = 1 - 0.35^(1/H): a mean of H*p carries, about -ln 0.35 = 1.05 for large H.
    assert abs(carries - columns * arith.carry_rate(columns, 0.35)) < 0.08
    for row in rows[:200]:
        top, bottom = row["problem"].removesuffix("=?").split("+")
        assert len(top) == len(bottom) == columns
        assert int(row["answer"]) == int(top) + int(bottom)
        assert row["carries"] == len(arith.carry_columns([int(top), int(bottom)]))
        assert row["level"] == columns


def test_the_chain_grows_with_the_horizon_while_the_carries_do_not():
    lengths = {h: np.mean([len(r["solution"]) for r in arith.generate(400, seed=1, columns=h, carry_free_share=0.35)])
               for h in (2, 5, 14)}
    assert lengths[14] / lengths[2] > 6.0
    assert lengths[2] < lengths[5] < lengths[14]


def test_the_teacher_drops_carries_only_where_the_chain_carries_and_the_answer_is_then_wrong():
    rows = arith.generate(500, seed=3, columns=8, carry_free_share=0.35, carry_error_rate=1.0)
    for row in rows:
        wrong = row["step_errors"] > 0
        assert row["step_errors"] == row["carries"]
        boxed = row["solution"].rsplit("\\boxed{", 1)[1].rstrip("}")
        assert (boxed != row["answer"]) == wrong
        kind, _ = arith.first_error(row["problem"], row["solution"])
        assert kind == ("carry" if wrong else "correct")


def test_held_out_suites_never_share_a_problem_with_training():
    train = {r["problem"] for r in arith.generate(2000, seed=1, columns=3, carry_free_share=0.35)}
    held = {r["problem"] for r in arith.generate(300, seed=2, columns=3, carry_free_share=0.35, held_out=True)}
    assert not train & held


@pytest.mark.parametrize("kwargs, message", [
    ({"columns": 0, "carry_free_share": 0.3}, "columns"),
    ({"columns": 3}, "carry_free_share"),
    ({"columns": 3, "carry_free_share": 0.0}, "carry_free_share"),
    ({"carry_free_share": 0.3}, "only with columns"),
    ({"columns": 3, "carry_free_share": 0.3, "levels": [1]}, "not both"),
])
def test_a_bad_horizon_is_refused_naming_the_setting(kwargs, message):
    with pytest.raises(ValueError, match=message):
        arith.generate(10, seed=0, **kwargs)


@pytest.mark.parametrize("share", [{"carry_free_share": 0.35}, {}])  # a suite may leave the share out
def test_the_chain_length_is_the_mean_worked_solution_of_the_suite_the_models_are_evaluated_on(share):
    from grpo_lambda import prepare
    settings = {"source": "synthetic", "columns": 6, "n": 50, "seed": 4, **share}
    suite, _ = prepare.rows_for({**settings, "key": "suite-h6", "role": "benchmark"})
    assert chain_length(settings) == pytest.approx(np.mean([len(row["solution"]) for row in suite]), abs=1e-12)


def test_the_slope_weights_give_the_least_squares_slope():
    lengths = [40.0, 85.0, 220.0]
    y = np.array([0.01, 0.04, 0.12])
    expected = np.polyfit(np.log(lengths), y, 1)[0]
    assert float(slope_weights(lengths) @ y) == pytest.approx(expected, abs=1e-12)


# ---- the horizon table on a hand-built study --------------------------------------------------------

HORIZONS = {"h2": 2, "h4": 4, "h8": 8}
N_PROBLEMS = 40
SEEDS = [0, 1, 2, 3]
# Correct answers out of 40 per seed: the baseline's and the trace's, per horizon. The effect per seed
# is (trace - base)/40; per horizon the mean of the four.
BASE = {"h2": [20, 22, 21, 23], "h4": [16, 15, 18, 17], "h8": [10, 12, 11, 9]}
TRACE = {"h2": [20, 23, 21, 22], "h4": [18, 17, 20, 19], "h8": [16, 17, 15, 16]}


def horizon_config() -> dict:
    return {
        "models": {"tiny": {"source": "tiny"}},
        "datasets": {f"arith-{h}": {"source": "synthetic", "columns": c, "carry_free_share": 0.35, "n": 100, "seed": 1}
                     for h, c in HORIZONS.items()},
        "benchmarks": {f"suite-{h}": {"source": "synthetic", "columns": c, "carry_free_share": 0.35, "n": 30,
                                      "seed": 10 + c} for h, c in HORIZONS.items()},
        "variants": {"base": {"objective": "grpo", "advantage_clamp": -0.1},
                     "trace": {"objective": "grpo_lambda", "lam": 0.99, "style": "recent", "update": "trace"}},
        "seeds": SEEDS,
        "rl": {"max_steps": 3},
        "report": {"baseline": "base",
                   "horizon": {"chains": {f"arith-{h}": f"suite-{h}" for h in HORIZONS},
                               "pairs": {"trace, clamp on": {"treatment": "trace", "baseline": "base"}},
                               "equivalence_margin": {"effect": 0.05, "slope": 0.03}}},
    }


def samples() -> pd.DataFrame:
    rows = []
    for h in HORIZONS:
        for variant, counts in (("base", BASE[h]), ("trace", TRACE[h])):
            for seed, k in zip(SEEDS, counts):
                for p in range(N_PROBLEMS):
                    rows.append({"model": "tiny", "dataset": f"arith-{h}", "variant": variant, "seed": seed,
                                 "step": "final", "benchmark": f"suite-{h}", "id": f"p{p}", "mode": "greedy",
                                 "correct": float(p < k)})
        for p in range(N_PROBLEMS):
            rows.append({"model": "tiny", "dataset": f"arith-{h}", "variant": "sft", "seed": None, "step": "final",
                         "benchmark": f"suite-{h}", "id": f"p{p}", "mode": "greedy", "correct": float(p < 14)})
    frame = pd.DataFrame(rows)
    return frame.astype({"seed": "Int64"})[KEYS + ["id", "mode", "correct"]]


def logs() -> pd.DataFrame:
    rows = []
    for h in HORIZONS:
        for variant in ("base", "trace"):
            for seed in SEEDS:
                for step, zero in enumerate([0.5, 1.0, 0.75], 1):
                    rows.append({"model": "tiny", "dataset": f"arith-{h}", "variant": variant, "seed": seed,
                                 "step": step, "frac_reward_zero_std": zero})
    return pd.DataFrame(rows)


@pytest.fixture  # per test: mutmut (scripts/mutation.sh) credits a module fixture's calls to its first test only
def table():
    config = horizon_config()
    options = report_options(config)
    return config, horizon_table(Cells(samples(), config, options), config, logs(), options)


def test_each_horizon_s_effect_is_the_paired_difference_on_its_own_suite(table):
    _, frame = table
    effects = frame[frame["role"] == "effect"].set_index("dataset")
    for h in HORIZONS:
        expected = (np.mean(TRACE[h]) - np.mean(BASE[h])) / N_PROBLEMS
        row = effects.loc[f"arith-{h}"]
        assert row["estimate"] == pytest.approx(expected, abs=1e-12)
        assert row["benchmark"] == f"suite-{h}"
        assert row["baseline_accuracy"] == pytest.approx(np.mean(BASE[h]) / N_PROBLEMS)
        assert row["treatment_accuracy"] == pytest.approx(np.mean(TRACE[h]) / N_PROBLEMS)
        assert row["sft_accuracy"] == pytest.approx(14 / N_PROBLEMS)
        assert row["seeds"] == 4
        per_seed = [float(part.split(":")[1]) for part in row["per_seed"].split()]
        assert per_seed == pytest.approx([(t - b) / N_PROBLEMS for t, b in zip(TRACE[h], BASE[h])], abs=5e-4)
        # Two of three steps have a group with signal; groups with signal: 1 - mean(0.5, 1, 0.75).
        assert row["steps_with_signal"] == pytest.approx(2 / 3)
        assert row["groups_with_signal"] == pytest.approx(0.25)


def test_the_trend_is_the_least_squares_slope_of_the_effects_on_ln_chain_length(table):
    config, frame = table
    effects = frame[frame["role"] == "effect"]
    lengths = [chain_length(config["benchmarks"][f"suite-{h}"]) for h in HORIZONS]
    assert list(effects["chain_length"]) == pytest.approx(lengths)
    expected = np.polyfit(np.log(lengths), effects["estimate"].to_numpy(), 1)[0]
    trend = frame[frame["role"] == "trend"].iloc[0]
    assert trend["estimate"] == pytest.approx(expected, abs=1e-12)
    assert trend["estimate_low"] < trend["estimate"] < trend["estimate_high"]
    assert (trend["dataset"], trend["benchmark"], trend["per_seed"]) == ("", "", "")
    assert np.isnan([trend["columns"], trend["chain_length"], trend["seeds"]]).all()
    assert 0 <= trend["p_equivalence"] <= 1  # against the slope's own margin
    # The effect grows from 0 to 0.14 over a 5x span: a positive slope that the test resolves.
    assert trend["verdict"] == "ahead"


def test_holm_runs_over_the_horizons_of_a_pair_and_separately_over_the_trends(table):
    _, frame = table
    effects = frame[frame["role"] == "effect"]
    from grpo_lambda.multiplicity import holm
    assert effects["p_holm"].to_numpy() == pytest.approx(holm(effects["p"].to_numpy()))
    trend = frame[frame["role"] == "trend"].iloc[0]
    assert trend["p_holm"] == pytest.approx(trend["p"])  # a family of one: the study's one primary test
    # The shortest chain's effect is 0 at every seed but one: not resolved, and inside the 0.05 margin.
    h2 = effects[effects["dataset"] == "arith-h2"].iloc[0]
    assert h2["verdict"] in ("equivalent", "not distinguishable")
    assert not np.isnan(h2["p_equivalence"])


def test_an_exploratory_pair_s_trend_is_holm_corrected_outside_the_primary_family():
    from grpo_lambda.tables import horizon_blocks
    config = horizon_config()
    mirror = {"treatment": "base", "baseline": "trace", "exploratory": True}
    config["report"]["horizon"]["pairs"]["mirror"] = mirror
    options = report_options(config)
    frame = horizon_table(Cells(samples(), config, options), config, logs(), options)
    trends = frame[frame["role"] == "trend"].set_index("pair")
    # The mirror's slope is the primary pair's negated; each trend is a family of one, so Holm leaves its
    # p as it is (in one family of two, the smaller p would double).
    assert trends.loc["mirror", "estimate"] == pytest.approx(-trends.loc["trace, clamp on", "estimate"])
    assert list(trends["p_holm"]) == pytest.approx(list(trends["p"]))
    assert trends.loc["mirror", "verdict"] == "behind" and trends.loc["trace, clamp on", "verdict"] == "ahead"
    text = horizon_blocks.horizon_finding(config, frame, options)
    assert text.count("- **") == 2 and "recent/trace/0.99, exploratory)" in text
    assert text.count("SFT models' greedy") == 1  # the band line once, not per pair
    mirror["exploratory"] = False
    options = report_options(config)
    trends = horizon_table(Cells(samples(), config, options), config, logs(), options)
    trends = trends[trends["role"] == "trend"]
    assert list(trends["p_holm"]) == pytest.approx([min(2 * trends["p"].min(), 1)] * 2)


@pytest.mark.parametrize("missing", ["arith-h4", "arith-h8"])
def test_a_missing_arm_leaves_its_horizon_and_the_trend_without_a_test(missing):
    config = horizon_config()
    options = report_options(config)
    data = samples()
    data = data[~((data["dataset"] == missing) & (data["variant"] == "trace"))]
    frame = horizon_table(Cells(data, config, options), config, logs(), options)
    effects = frame[frame["role"] == "effect"].set_index("dataset")
    assert np.isnan(effects.loc[missing, "estimate"]) and effects.loc[missing, "seeds"] == 0
    assert effects.loc[missing, "per_seed"] == ""
    assert list(effects.index) == [f"arith-{h}" for h in HORIZONS]
    assert effects.drop(index=missing)["estimate"].notna().all()  # the other horizons keep their effects
    assert frame[frame["role"] == "trend"]["estimate"].isna().all()
    assert frame[frame["role"] == "trend"]["verdict"].isna().all()


def test_the_errors_table_places_the_first_carry_error():
    config = horizon_config()
    options = report_options(config)
    errors = pd.DataFrame([
        {"model": "tiny", "dataset": "arith-h4", "variant": "sft", "seed": None, "benchmark": "suite-h4", "id": "a",
         "error": "carry", "error_step": 1.0, "columns": 4},
        {"model": "tiny", "dataset": "arith-h4", "variant": "sft", "seed": None, "benchmark": "suite-h4", "id": "b",
         "error": "correct", "error_step": np.nan, "columns": 4},
        {"model": "tiny", "dataset": "arith-h4", "variant": "trace", "seed": 0, "benchmark": "suite-h4", "id": "a",
         "error": "carry", "error_step": 3.0, "columns": 4},
        {"model": "tiny", "dataset": "arith-h4", "variant": "trace", "seed": 0, "benchmark": "suite-h4", "id": "b",
         "error": "digits", "error_step": 0.0, "columns": 4},
    ])
    # another model's chains on the same suite are that model's
    config["models"]["tiny2"] = {"source": "tiny"}
    errors = pd.concat([errors, errors.assign(model="tiny2", error="digits")], ignore_index=True)
    table = horizon_errors_table(errors, config, options)
    assert list(table["model"]) == ["tiny", "tiny", "tiny2", "tiny2"]
    assert set(table["dataset"]) == {"arith-h4"} and set(table["benchmark"]) == {"suite-h4"}
    assert set(table["columns"]) == {4}
    table = table[table["model"] == "tiny"].set_index("variant")
    assert table.loc["sft", "correct"] == 0.5 and table.loc["sft", "first_error_carry"] == 0.5
    assert table.loc["sft", "first_error_other"] == 0 and table.loc["sft", "carry_error_position"] == 0.25
    assert table.loc["trace", "first_error_other"] == 0.5 and table.loc["trace", "carry_error_position"] == 0.75
    for nothing in (None, errors.iloc[:0]):
        empty = horizon_errors_table(nothing, config, options)
        assert empty.empty and list(empty.columns) == list(horizon_errors_table(errors, config, options).columns)


def test_the_horizon_tables_and_figure_exist_only_for_a_horizon_study():
    config = horizon_config()
    assert "horizon" in table_names(config) and "horizon_errors" in table_names(config)
    assert "horizon" in figure_names(config)
    config["report"].pop("horizon")
    assert "horizon" not in table_names(config) and "horizon" not in figure_names(config)


@pytest.mark.parametrize("change, message", [
    (lambda h: h["chains"].update({"nope": "suite-h2"}), "not a training set"),
    (lambda h: h["chains"].update({"arith-h2": "nope"}), "not a benchmark"),
    (lambda h: h["pairs"].update({"x": {"treatment": "trace"}}), "pairs.x"),
    (lambda h: h["pairs"].update({"x": {"treatment": "trace", "baseline": "nope"}}), "pairs.x.baseline"),
    (lambda h: h["pairs"]["trace, clamp on"].update({"exploratory": "yes"}), "exploratory must be true or false"),
    (lambda h: h["pairs"]["trace, clamp on"].update({"exploratory": True}), "every pair is exploratory"),
    (lambda h: h["equivalence_margin"].update({"slope": -1}), "slope"),
    (lambda h: h.update({"chains": {"arith-h2": "suite-h2"}}), "at least two"),
])
def test_a_bad_horizon_design_is_refused_naming_the_key(change, message):
    config = horizon_config()
    change(config["report"]["horizon"])
    with pytest.raises(ValueError, match=message):
        report_options(config)


def test_the_shipped_horizon_config_declares_its_primary_test_and_margins():
    config = yaml.safe_load(open("config/horizon.yaml"))
    design = report_options(config)["horizon"]
    primary = {name: pair for name, pair in design["pairs"].items() if not pair["exploratory"]}
    assert primary == {
        "trace, clamp on": {"treatment": "recent-trace-0.99", "baseline": "grpo-clamp", "exploratory": False},
        "trace, clamp off": {"treatment": "recent-trace-0.99-noclamp", "baseline": "grpo", "exploratory": False}}
    # The two arms of each primary pair differ only in the trace; the clamp's own pairs are exploratory.
    variants = config["variants"]
    for pair in primary.values():
        treatment, baseline = variants[pair["treatment"]], variants[pair["baseline"]]
        assert treatment["objective"] == "grpo_lambda" and baseline["objective"] == "grpo"
        assert (treatment.get("advantage_clamp", -0.1) is None) == (baseline.get("advantage_clamp") is None)
    assert set(design["equivalence_margin"]) == {"effect", "slope"}
    lengths = [chain_length(config["benchmarks"][b]) for b in design["chains"].values()]
    assert max(lengths) / min(lengths) >= 6.0
    assert len(config["seeds"]) >= 8
    assert config["rl"]["max_completion_length"] > max(
        max(len(r["solution"]) for r in arith.generate(200, seed=9, columns=config["benchmarks"][b]["columns"],
                                                         carry_free_share=0.35)) for b in design["chains"].values())
    assert not math.isnan(lengths[0])


def test_the_finding_says_grows_only_on_a_resolved_slope_and_absent_only_on_tost(table):
    from grpo_lambda.tables import horizon_blocks
    config, frame = table
    options = report_options(config)
    text = horizon_blocks.horizon_finding(config, frame, options)
    assert "grows with the chain's length" in text
    trend = frame[frame["role"] == "trend"].iloc[0]
    assert f"{trend['estimate']:+.3f}".replace("-", "−") in text
    for verdict, words in (("not distinguishable", "is not resolved at 4 seeds"),
                           ("equivalent", "does not change with the chain's length"),
                           ("behind", "shrinks as the chain grows")):
        changed = frame.copy()
        changed.loc[changed["role"] == "trend", "verdict"] = verdict
        text = horizon_blocks.horizon_finding(config, changed, options)
        assert words in text and "grows with" not in text


@pytest.mark.parametrize("entry, message", [
    ({"source": "synthetic", "columns": 3, "level": 2, "n": 10, "seed": 1}, "columns"),
    ({"source": "synthetic", "carry_free_share": 0.3, "level": 2, "n": 10, "seed": 1}, "columns"),
    ({"source": "synthetic", "n": 10, "seed": 1}, "benchmarks.bad.level is required"),
])
def test_a_synthetic_suite_takes_a_level_or_a_horizon_not_both(entry, message):
    from grpo_lambda.config import ConfigError, validate
    config = yaml.safe_load(open("config/horizon.yaml"))
    config["benchmarks"]["bad"] = entry
    with pytest.raises(ConfigError, match=message):
        validate(config)
    assert validate(yaml.safe_load(open("config/horizon.yaml")))["benchmarks"]["suite-h14"]["columns"] == 14


def _summary(accuracy: float) -> dict:
    return {"model": "tiny", "dataset": "arith-h13", "benchmark": "suite-h13", "n": 200, "accuracy": accuracy}


def test_the_band_check_passes_a_horizon_inside_the_band_and_names_one_outside():
    from grpo_lambda.tables.horizon import band_check
    assert band_check(_summary(0.25), [0.25, 0.45]) == {  # the bounds belong to the band
        "model": "tiny", "dataset": "arith-h13", "benchmark": "suite-h13", "n": 200, "accuracy": 0.25,
        "band": [0.25, 0.45], "in_band": True}
    assert band_check(_summary(0.45), [0.25, 0.45])["accuracy"] == 0.45
    for accuracy in (0.02, 0.451, 0.92):
        with pytest.raises(ValueError, match=r"tiny/arith-h13: .* suite-h13 is .*outside report.horizon.band \[0.25, 0.45\]"):
            band_check(_summary(accuracy), [0.25, 0.45])


def test_check_band_exits_1_naming_the_horizon_and_writes_no_record_outside_the_band(tmp_path):
    import json
    import subprocess
    import sys
    for accuracy, status in ((0.02, 1), (0.33, 0)):
        summary, record = tmp_path / f"{accuracy}.json", tmp_path / f"band-{accuracy}.json"
        summary.write_text(json.dumps(_summary(accuracy)))
        run = subprocess.run([sys.executable, "-m", "grpo_lambda.cli", "check-band", "--eval", str(summary),
                              "--band", "0.25", "0.45", "--out", str(record)], capture_output=True, text=True)
        assert run.returncode == status, run.stderr
        assert record.exists() == (status == 0)
        if status:
            assert "tiny/arith-h13" in run.stderr and "0.020" in run.stderr and "Traceback" not in run.stderr
        else:
            assert json.loads(record.read_text())["accuracy"] == 0.33


def _dry_run(tmp_path, config: dict) -> str:
    from conftest import snakemake
    tmp_path.mkdir()
    (tmp_path / "study.yaml").write_text(yaml.safe_dump({**config, "results": str(tmp_path / "results")}))
    return snakemake("-n", workdir=tmp_path, configfiles=[tmp_path / "study.yaml"], timeout=600).stdout


def test_a_banded_horizon_study_trains_a_horizon_only_after_its_band_check(tmp_path):
    config = yaml.safe_load(open("config/horizon.yaml"))
    plan = _dry_run(tmp_path / "banded", config)
    trains = [block for block in plan.split("rule ")[1:] if block.startswith("train:")]
    assert len(trains) == len(config["variants"]) * len(config["datasets"]) * len(config["seeds"])
    for block in trains:
        dataset = block.split("dataset=")[1].split(",")[0]
        assert f"/{dataset}/sft/band.json" in block.split("output:")[0]
    assert plan.count("rule check_band:") == len(config["datasets"])
    del config["report"]["horizon"]["band"]
    plan = _dry_run(tmp_path / "unbanded", config)
    assert "check_band" not in plan and "band.json" not in plan


def test_the_lambda_config_is_the_horizon_study_s_longest_horizon_with_lambda_and_the_trace_form_varied(tmp_path):
    horizon = yaml.safe_load(open("config/horizon.yaml"))
    longest = yaml.safe_load(open("config/horizon-lambda.yaml"))
    # The same data, suite, model, SFT and RL as the horizon study's 14 columns: its arms read beside that run.
    assert longest["datasets"] == {"arith-h14": horizon["datasets"]["arith-h14"]}
    assert longest["benchmarks"] == {"suite-h14": horizon["benchmarks"]["suite-h14"]}
    for key in ("models", "sft", "rl", "seeds", "evaluation"):
        assert longest[key] == horizon[key], key
    assert longest["variants"]["grpo-clamp"] == horizon["variants"]["grpo-clamp"]
    assert longest["variants"]["recent-trace-0.99"] == horizon["variants"]["recent-trace-0.99"]
    traces = {name: v for name, v in longest["variants"].items() if v["objective"] == "grpo_lambda"}
    assert sorted(v["lam"] for v in traces.values() if v["form"] == "relative") == [0.9, 0.99, 1.0]
    assert [v["lam"] for v in traces.values() if v["form"] == "absolute"] == [0.99]
    validated = report_options(longest)
    assert validated["baseline"] == "grpo-clamp" and validated["primary"] == "paired"
    plan = _dry_run(tmp_path / "lambda", longest)
    trains = [block for block in plan.split("rule ")[1:] if block.startswith("train:")]
    assert len(trains) == len(longest["variants"]) * len(longest["seeds"])


# ---- the table's bookkeeping: a missing run, horizons out of order, several models, the band, greedy chains ----

def _horizon_frame(config: dict, data: pd.DataFrame | None = None, study_logs: pd.DataFrame | None = None):
    options = report_options(config)
    data = samples() if data is None else data
    return horizon_table(Cells(data, config, options), config, logs() if study_logs is None else study_logs, options)


def test_the_signal_columns_read_each_horizon_s_own_runs_of_the_pair():
    """A horizon's share of RL steps with signal is that of its own training set's runs of the pair's arms: not
    another horizon's, another model's or another variant's (each of those logs no signal at all here)."""
    zero_std = {"arith-h2": [1.0, 1.0, 0.5], "arith-h4": [0.5, 1.0, 0.75], "arith-h8": [0.0, 0.0, 0.0]}
    rows = [{"model": model, "dataset": dataset, "variant": variant, "seed": seed, "step": step,
             "frac_reward_zero_std": zero if (model, variant) in (("tiny", "base"), ("tiny", "trace")) else 1.0}
            for model in ("tiny", "elsewhere") for dataset, values in zero_std.items()
            for variant in ("base", "trace", "elsewhere") for seed in SEEDS for step, zero in enumerate(values, 1)]
    effects = _horizon_frame(horizon_config(), study_logs=pd.DataFrame(rows)).query("role == 'effect'")
    assert list(effects["steps_with_signal"]) == pytest.approx([1 / 3, 2 / 3, 1.0])
    assert list(effects["groups_with_signal"]) == pytest.approx([1 / 6, 0.25, 1.0])
    # logs without TRL's zero-std column (or none at all): no signal columns, and the table still builds
    for study_logs in (pd.DataFrame(rows).drop(columns="frac_reward_zero_std"), pd.DataFrame()):
        effects = _horizon_frame(horizon_config(), study_logs=study_logs).query("role == 'effect'")
        assert effects["steps_with_signal"].isna().all() and effects["estimate"].notna().all()


def test_a_seed_missing_from_one_arm_leaves_the_other_seeds_paired_by_seed_number():
    """The trace lacks seed 1 at 4 columns: each remaining seed's effect is its own trace run minus its own
    baseline run (+2/40 at every seed), never the baseline row that comes next in order (5/40, 1/40)."""
    data = samples()
    data = data[~((data["dataset"] == "arith-h4") & (data["variant"] == "trace") & (data["seed"] == 1))]
    row = _horizon_frame(horizon_config(), data).set_index(["role", "dataset"]).loc[("effect", "arith-h4")]
    pairs = dict(part.split(":") for part in row["per_seed"].split())
    assert list(pairs) == ["0", "2", "3"]
    expected = {seed: (TRACE["h4"][seed] - BASE["h4"][seed]) / N_PROBLEMS for seed in (0, 2, 3)}
    assert [float(pairs[str(seed)]) for seed in expected] == pytest.approx(list(expected.values()), abs=5e-4)
    assert row["seeds"] == 3
    # the effect's estimate is each arm's mean over the runs it holds
    assert row["estimate"] == pytest.approx((np.mean([18, 20, 19]) - np.mean(BASE["h4"])) / N_PROBLEMS, abs=1e-12)


def test_horizons_listed_out_of_order_of_length_weigh_each_effect_by_its_own_chain_length():
    """The slope's weight of a horizon follows its chain's length, not its place in report.horizon.chains:
    listed 8, 2, 4 columns the trend is the one listed 2, 4, 8 (a weight gone to the wrong chain would
    change it, and can flip its sign)."""
    in_order = _horizon_frame(horizon_config())
    config = horizon_config()
    chains = config["report"]["horizon"]["chains"]
    config["report"]["horizon"]["chains"] = {d: chains[d] for d in ("arith-h8", "arith-h2", "arith-h4")}
    shuffled = _horizon_frame(config)
    assert list(shuffled[shuffled["role"] == "effect"]["dataset"]) == ["arith-h8", "arith-h2", "arith-h4"]
    effects = shuffled[shuffled["role"] == "effect"]
    slope = np.polyfit(np.log(effects["chain_length"].to_numpy(float)), effects["estimate"].to_numpy(float), 1)[0]
    trend = shuffled[shuffled["role"] == "trend"].iloc[0]
    expected = in_order[in_order["role"] == "trend"].iloc[0]
    assert trend["estimate"] == pytest.approx(slope, abs=1e-12)
    assert trend["estimate"] == pytest.approx(expected["estimate"], abs=1e-12)
    assert (trend["estimate_low"], trend["estimate_high"]) == pytest.approx(
        (expected["estimate_low"], expected["estimate_high"]), abs=1e-12)
    assert trend["verdict"] == expected["verdict"] == "ahead"


def test_each_model_s_primary_trends_are_a_holm_family_of_their_own():
    """Two models with the same results: each model's one primary trend is a family of one (Holm leaves its
    p as it is), not one family of two across the models (which would double both p-values)."""
    config = horizon_config()
    config["models"]["tiny2"] = {"source": "tiny"}
    data, study_logs = samples(), logs()
    data = pd.concat([data, data.assign(model="tiny2")], ignore_index=True)
    study_logs = pd.concat([study_logs, study_logs.assign(model="tiny2")], ignore_index=True)
    frame = _horizon_frame(config, data, study_logs)
    trends = frame[frame["role"] == "trend"].set_index("model")
    assert list(trends.index) == ["tiny", "tiny2"]
    assert trends.loc["tiny", "estimate"] == pytest.approx(trends.loc["tiny2", "estimate"], abs=1e-12)
    assert 0 < trends.loc["tiny", "p"] < 0.25  # so that a family of two would change it
    assert list(trends["p_holm"]) == pytest.approx(list(trends["p"]))
    for model in ("tiny", "tiny2"):  # each model's horizons a family of three, as with one model
        effects = frame[(frame["role"] == "effect") & (frame["model"] == model)]
        assert len(effects) == len(HORIZONS)
        from grpo_lambda.multiplicity import holm
        assert effects["p_holm"].to_numpy() == pytest.approx(holm(effects["p"].to_numpy()))


@pytest.mark.parametrize("band, inside", [([0.30, 0.45], True), ([0.36, 0.60], False), ([0.10, 0.34], False)])
def test_the_band_column_judges_the_sft_accuracy_s_estimate_not_its_interval(band, inside):
    """The SFT models answer 14 of 40 (0.35), with an interval about [0.22, 0.50]: the band column says
    whether 0.35 lies in the band, whichever of the interval's bounds does."""
    config = horizon_config()
    config["report"]["horizon"]["band"] = band
    effects = _horizon_frame(config).query("role == 'effect'")
    assert list(effects["sft_accuracy"]) == pytest.approx([0.35] * len(HORIZONS))
    # each band holds the estimate or not as the interval's bounds do not: the cases tell the columns apart
    assert (effects["sft_accuracy_low"] < 0.30).all() and (effects["sft_accuracy_high"] > 0.45).all()
    assert effects["sft_accuracy_low"].max() > 0.10 and effects["sft_accuracy_high"].min() > 0.36
    assert list(effects["in_band"]) == [inside] * len(HORIZONS)


def test_the_first_error_table_reads_the_greedy_chains_only(tmp_path):
    """The trace's final models at 4 columns answer greedily right but for one carry dropped, and
    their sampled completions all drop every carry: the table's chains are the greedy ones (one carry error in
    six), not those and the samples pooled. A greedy line may leave out its mode (docs/results-format.md); a
    training set outside the horizons is passed over."""
    from grpo_lambda.tables.collect import eval_file
    from grpo_lambda.tables.horizon import collect_first_errors
    import json

    config = horizon_config()
    config["datasets"] = {"other": {"source": "synthetic", "level": 1, "n": 10, "seed": 1}, **config["datasets"]}
    options = report_options(config)
    assert collect_first_errors(tmp_path, config, options).empty  # nothing evaluated yet
    operands = [[1234, 5678], [4567, 3658], [1111, 2222]]
    suite = [{"id": f"p{i}", **arith.make_problem(ops)} for i, ops in enumerate(operands)]
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "suite-h4.jsonl").write_text("".join(json.dumps(row) + "\n" for row in suite))
    for seed in (0, 1):
        lines = []
        for i, ops in enumerate(operands):
            dropped = frozenset([1]) if (seed, i) == (1, 0) else frozenset()  # 1234+5678's carry out of the tens
            greedy = {"id": f"p{i}", "sample": 0, "correct": not dropped,
                      "completion": arith.make_problem(ops, wrong_carries=dropped)["solution"]}
            lines.append(greedy if i == 2 else {**greedy, "mode": "greedy"})
            wrong = arith.make_problem(ops, wrong_carries=frozenset(arith.carry_columns(ops)))["solution"]
            lines += [{"id": f"p{i}", "mode": "sampled", "sample": k, "correct": False, "completion": wrong}
                      for k in range(2) if arith.carry_columns(ops)]
        path = eval_file(tmp_path, "tiny", "arith-h4", "trace", seed, "final", "suite-h4")
        path.parent.mkdir(parents=True)
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    errors = collect_first_errors(tmp_path, config, options)
    assert list(errors["seed"]) == [0, 0, 0, 1, 1, 1] and list(errors["id"]) == ["p0", "p1", "p2"] * 2
    assert list(errors["error"]) == ["correct"] * 3 + ["carry", "correct", "correct"]
    row = horizon_errors_table(errors, config, options).set_index("variant").loc["trace"]
    assert row["answers"] == 6 and row["correct"] == pytest.approx(5 / 6)
    # the carry out of the tens goes wrong where it is added, in the hundreds: column 2 of 4
    assert row["first_error_carry"] == pytest.approx(1 / 6) and row["carry_error_position"] == 0.5


def test_the_curvature_weights_give_the_quadratic_coefficient_and_ignore_a_straight_line():
    lengths = [41.0, 55.0, 70.0, 100.0]
    x = np.log(lengths)
    q = curvature_weights(lengths)
    assert float(q @ (0.3 - 0.05 * x)) == pytest.approx(0.0, abs=1e-10)  # a straight line in ln length: none
    y = np.array([0.06, 0.01, 0.0, 0.002])  # a step between the first two horizons
    assert float(q @ y) == pytest.approx(np.polyfit(x, y, 2)[0], abs=1e-10)


def test_a_declared_curvature_is_tested_in_the_trend_s_family():
    config = horizon_config()
    config["report"]["horizon"]["curvature"] = True
    options = report_options(config)
    frame = horizon_table(Cells(samples(), config, options), config, logs(), options)
    bend, trend = (frame[frame["role"] == role].iloc[0] for role in ("curvature", "trend"))
    effects = frame[frame["role"] == "effect"]
    expected = np.polyfit(np.log(effects["chain_length"].to_numpy()), effects["estimate"].to_numpy(), 2)[0]
    assert bend["estimate"] == pytest.approx(expected, abs=1e-10)
    # Holm over the two: the smaller p is doubled, and the trend's adjusted p is at least its own p doubled
    # or the curvature's, whichever the step-down gives.
    ps = sorted([bend["p"], trend["p"]])
    adjusted = sorted([bend["p_holm"], trend["p_holm"]])
    assert adjusted[0] == pytest.approx(min(1.0, 2 * ps[0]))
    assert adjusted[1] == pytest.approx(max(adjusted[0], ps[1]))
    config["report"]["horizon"]["chains"] = dict(list(config["report"]["horizon"]["chains"].items())[:2])
    with pytest.raises(ValueError, match="curvature needs at least three horizons"):
        report_options(config)
