"""The dose-response control dosed by λ (config/dose-lambda.yaml): its levels are the loss's own relative weights,
its declaration is fresh and checked, and a dose over variants (several treatments on one training set against
one baseline) is read as declared: each level paired with the one baseline, the trend's weights cancelling it."""

from __future__ import annotations

import copy
import math
import re

import numpy as np
import pandas as pd
import pytest

from conftest import ROOT
from control_weights import TRACE, relative_weight
from grpo_lambda import config as study
from grpo_lambda.config.families import declared_families
from grpo_lambda.config.report import report_options
from grpo_lambda.objectives import ObjectiveParams
from grpo_lambda.stats import minimum_detectable_effect
from grpo_lambda.tables import study_blocks
from grpo_lambda.tables.cells import Cells
from grpo_lambda.tables.control import DOSE_COLUMNS, control_table
from grpo_lambda.tables.horizon import slope_weights
from grpo_lambda.tables.keys import KEYS
from test_dose_control import _seeds, assert_fresh_against_every_other_config

PATH = ROOT / "config" / "dose-lambda.yaml"
CONFIG = study.load(PATH)
CONTROL = CONFIG["report"]["control"]
POSITIVE = study.load(ROOT / "config" / "positive-control.yaml")
PUBLISHED_EFFECT, PUBLISHED_R = 0.141, 2.722  # the positive control's decoys-after effect and its r


def trace_of(variant: str) -> ObjectiveParams:
    spec = CONFIG["variants"][variant]
    return ObjectiveParams(objective=spec["objective"], lam=spec["lam"], style=spec["style"], update=spec["update"],
                           form=spec["form"], advantage_clamp=TRACE.advantage_clamp)


@pytest.fixture(scope="module")
def weights() -> dict[str, float]:
    (spec,) = CONFIG["datasets"].values()
    return {variant: relative_weight(spec, trace_of(variant)) for variant in CONTROL["levels"]}


def test_each_level_s_r_is_the_loss_s_own_at_its_lambda_and_falls_with_it(weights):
    """report.control.levels, to the digits declared, is what policy_loss's gradient gives each treatment at the
    carries of this training set's problems; r falls with λ and stays above GRPO's 1 (every level ahead)."""
    for variant, declared in CONTROL["levels"].items():
        assert round(weights[variant], 3) == pytest.approx(declared, abs=1e-9), variant
        assert CONTROL["predicted"][variant] == "ahead" and weights[variant] > 1
    by_lambda = sorted(CONTROL["levels"], key=lambda v: -CONFIG["variants"][v]["lam"])
    assert len(by_lambda) >= 4 and all(weights[a] > weights[b] for a, b in zip(by_lambda, by_lambda[1:]))


def test_the_levels_span_the_positive_control_down_to_an_effect_of_about_0_03(weights):
    """The top level is the positive control's variant on its layout (r within 2%); the declared model
    (0.141 · ln r / ln 2.722) predicts about 0.03 at the bottom level."""
    published = relative_weight(POSITIVE["datasets"]["decoys-after"])
    assert round(published, 3) == PUBLISHED_R
    assert max(weights.values()) == pytest.approx(published, rel=0.02)
    predicted = {v: PUBLISHED_EFFECT * math.log(r) / math.log(published) for v, r in weights.items()}
    assert 0.025 < min(predicted.values()) < 0.035
    assert max(predicted.values()) == pytest.approx(PUBLISHED_EFFECT, rel=0.02)


def test_the_task_is_the_positive_control_s_layout_and_only_lambda_differs_between_treatments():
    (spec,) = CONFIG["datasets"].values()
    drop = {k: v for k, v in spec.items() if k not in ("seed", "n")}
    assert drop == {k: v for k, v in POSITIVE["datasets"]["decoys-after"].items() if k not in ("seed", "n")}
    assert CONFIG["rl"] == POSITIVE["rl"] and CONFIG["sft"]["max_length"] == POSITIVE["sft"]["max_length"]
    treatments = [{k: v for k, v in CONFIG["variants"][t].items() if k != "lam"} for t in CONTROL["pair"]["treatment"]]
    assert all(t == treatments[0] for t in treatments)
    assert CONFIG["variants"][CONTROL["pair"]["baseline"]] == {"objective": "grpo", "advantage_clamp": -0.1}


def test_its_seeds_and_generators_are_fresh_against_every_other_config():
    rl, sft, generators = _seeds(CONFIG)
    assert len(sft) == 8 and len(rl) == 24 and generators == {1501, 601}
    assert_fresh_against_every_other_config(CONFIG, PATH)


def test_the_design_check_backs_both_control_families_with_the_exact_test():
    """One training set: the trend stays within it, so the exact sign-flip test over the 8 SFT models backs it
    (it does not span strata), as it backs the levels' family (Holm over 4: 4 · 2^-7 < 0.05)."""
    config = study.validate(study.load(PATH))
    study.check_design(config)
    options = report_options(config)
    families = {f.label: f for f in declared_families(config, options) if f.table == "control"}
    assert families["control"].size == 4 and families["control trend"].size == 1
    assert not families["control trend"].spans and families["control trend"].dataset == "decoys-after"
    assert families["control"].floor() == families["control trend"].floor() == 2.0 ** -7
    assert options["control"]["arms"] == {v: ("decoys-after", "suite-after", v) for v in CONTROL["pair"]["treatment"]}


def test_the_mdes_the_config_quotes_follow_from_the_pilot():
    """"MDE 0.154 (... 0.138 from decoys-before's se)" for a level and "one-sided MDE 0.120 (0.108)" for the
    trend: the pilot's effect se scaled to 8 SFT models × 3 RL seeds, the trend's by √Σc²/√2."""
    from grpo_lambda.design import pilot_tables

    text = " ".join(line.lstrip("# ") for line in PATH.read_text().splitlines())
    level_quote = re.search(r"MDE ([\d.]+) \(the first of Holm's four, df 7; ([\d.]+) from decoys-before's se\)", text)
    trend_quote = re.search(r"one-sided MDE ([\d.]+) \(([\d.]+)\) per unit ln r", text)
    assert level_quote and trend_quote
    config = study.validate(study.load(PATH))
    _, tables = pilot_tables(ROOT / "docs" / "positive-control-run", config)
    effects = tables["control"][tables["control"]["role"] == "effect"].set_index("dataset")["se"].astype(float)
    k, pilot_k = len(config["sft"]["seeds"]), len(POSITIVE["sft"]["seeds"])
    rl_each, pilot_rl_each = len(config["seeds"]) // k, len(POSITIVE["seeds"]) // pilot_k
    weights = slope_weights(list(CONTROL["levels"].values()))
    for i, layout in enumerate(("decoys-after", "decoys-before")):
        se = effects[layout] * math.sqrt(pilot_k / k) * math.sqrt(pilot_rl_each / rl_each)
        assert round(minimum_detectable_effect(se, k - 1, 0.05 / 4, 0.8), 3) == float(level_quote.groups()[i])
        trend_se = se * math.sqrt((weights ** 2).sum()) / math.sqrt(2)
        assert round(minimum_detectable_effect(trend_se, k - 1, 0.10, 0.8), 3) == float(trend_quote.groups()[i])


@pytest.mark.parametrize("change, message", [
    (lambda c: c["suites"].update({"other": "suite-after"}), r"report\.control\.suites: 'other' is not a training set"),
    (lambda c: c["pair"]["treatment"].append("grpo-clamp"), r"a baseline not among them"),
    (lambda c: c["pair"]["treatment"].append("trace-0.99"), r"two or more distinct treatments"),
    (lambda c: c["pair"]["treatment"].append("nope"), r"pair\.treatment: 'nope' is not a variant"),
    (lambda c: c["predicted"].pop("trace-0.91"), r"predicted must give every treatment of pair\.treatment"),
    (lambda c: c["levels"].pop("trace-0.91"), r"levels must give every treatment of pair\.treatment"),
    (lambda c: [c.pop("levels"), c.pop("trend")], r"a list of treatments is a dose: declare levels and trend"),
])
def test_a_bad_dose_over_variants_is_refused_naming_the_key(change, message):
    config = copy.deepcopy(CONFIG)
    change(config["report"]["control"])
    with pytest.raises(ValueError, match=message):
        report_options(config)


def test_a_dose_over_variants_needs_one_training_set():
    config = copy.deepcopy(CONFIG)
    config["datasets"]["other"] = dict(config["datasets"]["decoys-after"])
    config["report"]["control"]["suites"]["other"] = "suite-after"
    with pytest.raises(ValueError, match=r"needs one training set in suites"):
        report_options(config)


# ---- a hand-built dose over variants: 8 SFT models x 2 RL seeds, 40 problems ----------------------------------

N, SFT_SEEDS, SEEDS = 40, [1, 2, 3, 4, 5, 6, 7, 8], list(range(16))
BASE = [20, 22, 21, 23, 19, 22, 21, 20, 22, 24, 20, 21, 23, 19, 21, 22]  # the baseline's right answers, per RL seed
NOISE = [1, -1, 0, 2, -2, 1, 0, -1, 1, 0, -1, 2, 0, 1, -2, 1]


def small_config() -> dict:
    config = copy.deepcopy(CONFIG)
    config["sft"] = {**{k: v for k, v in config["sft"].items() if k != "seeds"}, "seeds": SFT_SEEDS}
    config["seeds"] = SEEDS
    config["report"].pop("history")  # its seeds were drawn before, in no study
    return study.validate(config)


def counts(scale: float, baseline_shift: int = 0) -> dict:
    """Right answers per RL seed: the baseline's (shifted by ``baseline_shift``), and each treatment's, the
    unshifted baseline's plus an effect of scale · ln r answers and per-seed noise that differs by level."""
    out = {"grpo-clamp": [b + baseline_shift for b in BASE]}
    for i, (variant, r) in enumerate(CONTROL["levels"].items()):
        noise = NOISE[i:] + NOISE[:i]
        out[variant] = [b + round(scale * math.log(r)) + n for b, n in zip(BASE, noise)]
    return out


def samples(per_variant: dict) -> pd.DataFrame:
    rows = []
    for variant, per_seed in per_variant.items():
        for seed, k in zip(SEEDS, per_seed):
            rows += [{"model": "tiny", "dataset": "decoys-after", "variant": variant, "seed": seed, "step": "final",
                      "benchmark": "suite-after", "id": f"p{p}", "mode": "greedy", "correct": float(p < k)}
                     for p in range(N)]
    for sft_seed in SFT_SEEDS:
        rows += [{"model": "tiny", "dataset": "decoys-after", "variant": "sft", "seed": sft_seed, "step": "final",
                  "benchmark": "suite-after", "id": f"p{p}", "mode": "greedy", "correct": float(p < 12)}
                 for p in range(N)]
    return pd.DataFrame(rows).astype({"seed": "Int64"})[KEYS + ["id", "mode", "correct"]]


def table(per_variant: dict) -> pd.DataFrame:
    config = small_config()
    options = report_options(config)
    return control_table(Cells(samples(per_variant), config, options), config, pd.DataFrame(), options)


def test_each_level_is_its_treatment_against_the_one_baseline_and_the_trend_is_their_slope():
    frame = table(counts(8.0))
    assert list(frame.columns) == DOSE_COLUMNS
    effects = frame[frame["role"] == "effect"].set_index("level")
    assert list(effects.index) == list(CONTROL["levels"]) and set(effects["dataset"]) == {"decoys-after"}
    assert list(effects["treatment"]) == list(CONTROL["levels"])
    per = counts(8.0)
    for variant in CONTROL["levels"]:
        expected = (np.mean(per[variant]) - np.mean(per["grpo-clamp"])) / N
        assert effects.loc[variant, "estimate"] == pytest.approx(expected)
    trend = frame[frame["role"] == "trend"].iloc[0]
    slope = np.polyfit(np.log(list(CONTROL["levels"].values())), effects["estimate"].to_numpy(), 1)[0]
    assert trend["estimate"] == pytest.approx(slope)
    assert trend["outcome"] == "as predicted" and trend["family"] == "control trend"


def test_the_trend_does_not_see_the_baseline_the_levels_do():
    """Shift the baseline by 3 answers on every seed: each level's effect moves by 3/40, the trend (its weights
    sum to 0) keeps its estimate and its standard error to rounding."""
    plain, shifted = table(counts(8.0)), table(counts(8.0, baseline_shift=3))
    a, b = (f[f["role"] == "effect"].set_index("level") for f in (plain, shifted))
    assert (a["estimate"] - b["estimate"]).to_numpy() == pytest.approx(np.full(4, 3 / N))
    ta, tb = (f[f["role"] == "trend"].iloc[0] for f in (plain, shifted))
    assert tb["estimate"] == pytest.approx(ta["estimate"], abs=1e-12)
    assert tb["se"] == pytest.approx(ta["se"], rel=1e-9)


def test_the_finding_names_each_level_its_r_and_the_smallest_level_resolved():
    config = small_config()
    options = report_options(config)
    frame = table(counts(8.0))
    text = study_blocks.control_finding(config, frame, options)
    for variant, r in CONTROL["levels"].items():
        assert f"**{variant} (r {r:.3g})** (predicted ahead)" in text
    assert "**the trend**" in text and "per unit ln r" in text
    resolved = frame[(frame["role"] == "effect") & (frame["outcome"] == "as predicted")]
    assert "trace-0.99" in set(resolved["level"]) and len(resolved) < 4  # the top level, not every level
    smallest = resolved.sort_values("relative_weight").iloc[0]["level"]
    assert f"the smallest level resolved as predicted is {smallest} (r" in text
    flat = study_blocks.control_finding(config, table(counts(0.0)), options)
    assert "no level is resolved as predicted" in flat


def test_the_readme_and_the_page_quote_the_units_an_effect_of_0_03_needs():
    """"an effect of 0.03 would need about 47 SFT models": the design check with this run as its own pilot."""
    from grpo_lambda import design

    config = study.validate(study.load(PATH))
    run = ROOT / "docs" / "dose-lambda-run"
    table = design.design_table(config, design.pilot_tables(str(run), config), {"accuracy": 0.03})
    (needed,) = table[(table["table"] == "control") & (table["family"] == "control")]["units_for_effect"]
    needed = int(needed)
    assert f"an effect of 0.03 would need about {needed} SFT models × 3 RL seeds" in (ROOT / "README.md").read_text()
    assert f"about {needed} SFT models × 3 RL seeds" in (run / "README.md").read_text()
