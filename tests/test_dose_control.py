"""The dose-response control (config/dose-control.yaml, grpo_lambda.tables.control's trend): its levels
ordered by the deciding carry's relative weight as the loss's own gradient gives it, the trend's one-sided
verdict on a hand-built nested study, and the declaration's checks."""

from __future__ import annotations

import copy
import math
import re

import numpy as np
import pandas as pd
import pytest
import yaml

from conftest import ROOT
from control_weights import relative_weight
from grpo_lambda import config as study
from grpo_lambda.config.families import declared_families
from grpo_lambda.config.report import report_options
from grpo_lambda.data import arith
from grpo_lambda.stats import minimum_detectable_effect
from grpo_lambda.tables.cells import Cells
from grpo_lambda.tables.control import COLUMNS, DOSE_COLUMNS, control_table, one_sided, trend_mde
from grpo_lambda.tables.horizon import slope_weights
from grpo_lambda.tables.keys import KEYS

PATH = ROOT / "config" / "dose-control.yaml"
CONFIG = study.load(PATH)
CONTROL = CONFIG["report"]["control"]
POSITIVE = study.load(ROOT / "config" / "positive-control.yaml")
PUBLISHED_EFFECT = 0.141  # the positive control's decoys-after effect (docs/positive-control-run)


@pytest.fixture(scope="module")
def weights() -> dict[str, float]:
    return {dataset: relative_weight(spec) for dataset, spec in CONFIG["datasets"].items()}


def test_the_declared_levels_are_the_loss_s_own_relative_weights_in_order(weights):
    """Each level's r (report.control.levels) is what policy_loss's gradient gives at the carries of its own
    training problems, to the digits declared; r falls as the tail grows, and stays above 1 (GRPO's), so
    every level is predicted ahead."""
    for dataset, declared in CONTROL["levels"].items():
        assert round(weights[dataset], 3) == pytest.approx(declared, abs=1e-9), dataset
        assert CONTROL["predicted"][dataset] == "ahead" and weights[dataset] > 1
    by_tail = sorted(CONFIG["datasets"], key=lambda d: CONFIG["datasets"][d]["tail_sums"])
    assert len(by_tail) >= 4
    assert all(weights[a] > weights[b] for a, b in zip(by_tail, by_tail[1:]))


def test_the_levels_span_from_the_published_layout_down_to_an_effect_of_about_0_03(weights):
    """The top level is the positive control's decoys-after layout (no tail: r within 2% of it); the effect
    predicted by the declared model (0.141 · ln r / ln r_published) is about 0.03 at the bottom level."""
    published = relative_weight(POSITIVE["datasets"]["decoys-after"])
    assert max(weights.values()) == pytest.approx(published, rel=0.02)
    predicted = {d: PUBLISHED_EFFECT * math.log(r) / math.log(published) for d, r in weights.items()}
    assert 0.025 < min(predicted.values()) < 0.035
    assert max(predicted.values()) == pytest.approx(PUBLISHED_EFFECT, rel=0.02)


def test_every_level_trains_on_the_same_problems_and_only_its_tail_differs():
    specs = list(CONFIG["datasets"].values()) + list(CONFIG["benchmarks"].values())
    for group in ("datasets", "benchmarks"):
        drop = [{k: v for k, v in spec.items() if k != "tail_sums"} for spec in CONFIG[group].values()]
        assert all(spec == drop[0] for spec in drop), group
    assert sorted(spec["tail_sums"] for spec in CONFIG["datasets"].values()) == [0, 1, 2, 3]
    assert all(spec["decoys"] == 2 and spec["decoy_position"] == "after" for spec in specs)
    suites = CONTROL["suites"]
    assert all(CONFIG["benchmarks"][suites[d]]["tail_sums"] == CONFIG["datasets"][d]["tail_sums"] for d in suites)
    rows = {d: arith.generate(50, seed=s["seed"], columns=2, carry_free_share=0.35, decoys=2, tail_sums=s["tail_sums"])
            for d, s in CONFIG["datasets"].items()}
    graded = {d: [r["problem"].split("; then ")[0].rstrip(")") for r in rs] for d, rs in rows.items()}
    assert all(g == graded["tail-0"] for g in graded.values())


def test_the_completions_fit_the_lengths_the_config_allows():
    longest = max(len(row["solution"]) + 1 for spec in CONFIG["datasets"].values()
                  for row in arith.generate(300, seed=spec["seed"], columns=2, carry_free_share=0.35, decoys=2,
                                            tail_sums=spec["tail_sums"]))
    assert longest <= CONFIG["rl"]["max_completion_length"] == CONFIG["evaluation"]["max_new_tokens"]
    assert longest + 80 <= CONFIG["sft"]["max_length"]  # and the prompt (about 60 characters at tail 3)


# ---- the declaration ------------------------------------------------------------------------------------

def _seeds(config: dict) -> tuple[set, set, set]:
    """(RL seeds, SFT seeds, generator seeds of its training sets and suites) of a config."""
    generators = {spec["seed"] for group in ("datasets", "benchmarks") for spec in (config.get(group) or {}).values()
                  if isinstance(spec, dict) and "seed" in spec}
    sft = set((config.get("sft") or {}).get("seeds") or []) if isinstance(config.get("sft"), dict) else set()
    return set(config.get("seeds") or []), sft, generators


def assert_fresh_against_every_other_config(config: dict, path) -> None:
    """No other config under config/ draws ``config``'s RL seeds, SFT seeds or generator seeds, nor any of its
    SFT seeds as an RL seed."""
    rl, sft, generators = _seeds(config)
    for other_path in sorted((ROOT / "config").rglob("*.yaml")):
        if other_path == path:
            continue
        other = yaml.safe_load(other_path.read_text()) or {}
        if not isinstance(other, dict):
            continue
        o_rl, o_sft, o_gen = _seeds(other)
        assert not (rl & o_rl or sft & o_sft or generators & o_gen), other_path
        assert not sft & o_rl, other_path  # an SFT seed no earlier run drew as anything


def test_its_seeds_and_generators_are_fresh_against_every_other_config():
    rl, sft, generators = _seeds(CONFIG)
    assert len(sft) == 8 and len(rl) == 32 and generators == {1401, 401}
    assert_fresh_against_every_other_config(CONFIG, PATH)


def test_the_config_passes_validation_and_the_design_check_with_both_control_families():
    config = study.validate(study.load(PATH))
    study.check_design(config)
    options = report_options(config)
    families = {f.label: f for f in declared_families(config, options) if f.table == "control"}
    assert families["control"].size == 4 and families["control trend"].size == 1
    assert families["control trend"].spans and families["control trend"].procedure == "holm"
    assert families["control"].procedure == "holm" and families["control"].floor() == 2.0 ** -7
    assert options["control"]["trend"] == "ahead"


def test_the_trend_mde_the_config_quotes_follows_from_the_pilot():
    """"0.142 per unit ln r from the decoys-after layout's se (0.128 from decoys-before's)": the pilot's
    effect standard errors, scaled to 8 SFT models as the design check scales them, through trend_mde."""
    from grpo_lambda.design import pilot_tables

    text = " ".join(line.lstrip("# ") for line in PATH.read_text().splitlines())
    found = re.search(r"([\d.]+) per unit ln r from the decoys-after layout's se \(([\d.]+) from decoys-before's\)",
                      text)
    assert found
    config = study.validate(study.load(PATH))
    _, tables = pilot_tables(ROOT / "docs" / "positive-control-run", config)
    effects = tables["control"][tables["control"]["role"] == "effect"].set_index("dataset")["se"].astype(float)
    k, pilot_k = len(config["sft"]["seeds"]), len(POSITIVE["sft"]["seeds"])
    for quoted, layout in zip(found.groups(), ("decoys-after", "decoys-before")):
        mde = trend_mde(effects[layout] * math.sqrt(pilot_k / k), CONTROL["levels"], k)
        assert round(mde, 3) == float(quoted), (layout, mde)


@pytest.mark.parametrize("change, message", [
    (lambda c: c.pop("trend"), r"levels and trend go together"),
    (lambda c: c["levels"].pop("tail-3"), r"levels must give every training set"),
    (lambda c: c["levels"].update({"tail-3": 0.8}), r"levels\.tail-3: relative weight 0\.8 predicts behind"),
    (lambda c: c["levels"].update({"tail-3": 1}), r"levels\.tail-3: relative weight 1 predicts nothing"),
    (lambda c: c["levels"].update({"tail-3": "big"}), r"levels\.tail-3: a relative weight must be a positive"),
    (lambda c: c["levels"].update({"tail-3": 1.373}), r"two levels with the same relative weight"),
    (lambda c: c.update(trend="up"), r"report\.control\.trend must be one of"),
])
def test_a_bad_dose_declaration_is_refused_naming_the_key(change, message):
    config = copy.deepcopy(CONFIG)
    change(config["report"]["control"])
    with pytest.raises(ValueError, match=message):
        report_options(config)


def test_fewer_than_three_levels_are_refused():
    config = copy.deepcopy(POSITIVE)
    config["report"]["control"].update(levels={"decoys-after": 2.7, "decoys-before": 0.45}, trend="ahead")
    with pytest.raises(ValueError, match=r"3 levels at least"):
        report_options(config)


# ---- the trend on a hand-built nested study ---------------------------------------------------------------

N = 40
SFT_SEEDS = [1, 2, 3, 4, 5, 6]
SEEDS = list(range(12))  # two RL seeds on each SFT model
LEVELS = {"tail-0": 2.758, "tail-1": 1.682, "tail-2": 1.373, "tail-3": 1.232}
BASE = [20, 22, 21, 23, 19, 22, 21, 20, 22, 24, 20, 21]  # grpo-clamp's right answers out of 40, per RL seed
NOISE = [1, -1, 0, 2, -2, 1, 0, -1, 1, 0, -1, 2]


def dose_counts(scale: float) -> dict:
    """The treatment's right answers: the baseline's plus an effect that grows as scale · ln r (in answers
    out of 40), with the same per-seed noise at every level."""
    counts = {}
    for dataset, r in LEVELS.items():
        lift = round(scale * math.log(r))
        counts[(dataset, "grpo-clamp")] = BASE
        counts[(dataset, "recent-trace-0.99")] = [b + lift + n for b, n in zip(BASE, NOISE)]
    return counts


def nested_config() -> dict:
    config = copy.deepcopy(CONFIG)
    config["sft"] = {**{k: v for k, v in config["sft"].items() if k != "seeds"}, "seeds": SFT_SEEDS}
    config["seeds"] = SEEDS
    config["report"]["control"]["levels"] = dict(LEVELS)
    return study.validate(config)


def nested_samples(counts: dict) -> pd.DataFrame:
    rows = []
    for (dataset, variant), per_seed in counts.items():
        suite = CONTROL["suites"][dataset]
        for seed, k in zip(SEEDS, per_seed):
            rows += [{"model": "tiny", "dataset": dataset, "variant": variant, "seed": seed, "step": "final",
                      "benchmark": suite, "id": f"p{p}", "mode": "greedy", "correct": float(p < k)} for p in range(N)]
        for sft_seed in SFT_SEEDS:
            rows += [{"model": "tiny", "dataset": dataset, "variant": "sft", "seed": sft_seed, "step": "final",
                      "benchmark": suite, "id": f"p{p}", "mode": "greedy", "correct": float(p < 12)} for p in range(N)]
    return pd.DataFrame(rows).astype({"seed": "Int64"})[KEYS + ["id", "mode", "correct"]]


def dose_table(counts: dict) -> pd.DataFrame:
    config = nested_config()
    options = report_options(config)
    return control_table(Cells(nested_samples(counts), config, options), config, pd.DataFrame(), options)


@pytest.fixture(scope="module")
def rising() -> pd.DataFrame:
    return dose_table(dose_counts(8.0))


def test_the_trend_is_the_least_squares_slope_of_the_levels_effects_on_ln_r(rising):
    assert list(rising.columns) == DOSE_COLUMNS
    effects = rising[rising["role"] == "effect"].set_index("dataset")
    assert list(effects["relative_weight"]) == list(LEVELS.values())
    x = np.log(list(LEVELS.values()))
    slope = np.polyfit(x, effects.loc[list(LEVELS), "estimate"].to_numpy(), 1)[0]
    trend = rising[rising["role"] == "trend"].iloc[0]
    assert trend["estimate"] == pytest.approx(slope)
    assert trend["family"] == "control trend" and set(effects["family"]) == {"control"}
    assert trend["predicted"] == "ahead" and np.isnan(trend["relative_weight"])


def test_a_trend_the_way_predicted_is_resolved_as_predicted_one_sided(rising):
    trend = rising[rising["role"] == "trend"].iloc[0]
    assert trend["verdict"] == "ahead" and trend["outcome"] == "as predicted"
    assert trend["p"] < 0.5 and trend["p_holm"] == pytest.approx(trend["p"])  # a family of one
    # its MDE is the one-sided test's: below the two-sided test's at the same α
    assert trend["mde"] == pytest.approx(minimum_detectable_effect(trend["se"], trend["df"], 0.10, 0.8))
    assert trend["mde"] < minimum_detectable_effect(trend["se"], trend["df"], 0.05, 0.8)
    # the levels' own family: Holm over the four effects, apart from the trend
    effects = rising[rising["role"] == "effect"]
    order = np.argsort(effects["p"].to_numpy())
    assert effects["p_holm"].to_numpy()[order[0]] == pytest.approx(min(1.0, 4 * effects["p"].to_numpy()[order[0]]))


def test_a_trend_against_the_prediction_is_never_resolved_and_its_p_mirrors(rising):
    """The same study with the arms swapped: every effect and the slope change sign; the one-sided p is one
    minus the predicted-way p, and the outcome is not resolved, however steep the slope."""
    counts = dose_counts(8.0)
    swapped = {(d, v): counts[(d, "grpo-clamp" if v == "recent-trace-0.99" else "recent-trace-0.99")]
               for d, v in counts}
    falling = dose_table(swapped)
    up, down = (frame[frame["role"] == "trend"].iloc[0] for frame in (rising, falling))
    assert down["estimate"] == pytest.approx(-up["estimate"])
    assert down["p"] == pytest.approx(1 - up["p"])
    assert down["verdict"] != "ahead" and down["outcome"] == "not resolved"


def test_a_flat_dose_leaves_the_trend_unresolved():
    flat = dose_table(dose_counts(0.0))
    trend = flat[flat["role"] == "trend"].iloc[0]
    assert trend["estimate"] == pytest.approx(0.0, abs=1e-12)
    assert trend["outcome"] == "not resolved"


def test_one_sided_halves_the_p_the_predicted_way_only():
    assert one_sided(0.04, 0.2, "ahead") == pytest.approx(0.02)
    assert one_sided(0.04, -0.2, "ahead") == pytest.approx(0.98)
    assert one_sided(0.04, -0.2, "behind") == pytest.approx(0.02)
    assert np.isnan(one_sided(float("nan"), 0.1, "ahead"))


def test_trend_mde_scales_the_level_se_by_the_slope_weights():
    se, k = 0.03, 8
    expected = minimum_detectable_effect(se * math.sqrt((slope_weights(list(LEVELS.values())) ** 2).sum()), k - 1,
                                         0.10, 0.8)
    assert trend_mde(se, LEVELS, k) == pytest.approx(expected)


def test_a_plain_control_s_table_keeps_its_published_columns():
    from test_control import samples, small_config

    config = small_config()
    options = report_options(config)
    table = control_table(Cells(samples(), config, options), config, pd.DataFrame(), options)
    assert list(table.columns) == COLUMNS
