"""The positive control (config/positive-control.yaml, grpo_lambda.tables.control): its prediction derived from
the loss's own gradient at the deciding token's position, the control table's effects, contrast and outcomes,
and the declaration's checks."""

from __future__ import annotations

import copy
import re

import numpy as np
import pandas as pd
import pytest

from conftest import ROOT
from control_weights import carry_weights, token_weights
from grpo_lambda import config as study
from grpo_lambda.config.report import report_options
from grpo_lambda.objectives import ObjectiveParams
from grpo_lambda.tables.cells import Cells
from grpo_lambda.tables.control import control_table
from grpo_lambda.tables.keys import KEYS

CONFIG = study.load(ROOT / "config" / "positive-control.yaml")


def layout_weights(position: str) -> tuple[float, list[float], float, list[float]]:
    """The trace's and GRPO's weights of the deciding carry and of the decoys' carries (control_weights)."""
    return carry_weights(CONFIG["datasets"][f"decoys-{position}"])


@pytest.mark.parametrize("path", ["config/positive-control.yaml", "docs/positive-control-run/README.md"])
def test_the_weights_the_design_quotes_are_the_loss_s_own(path):
    """"w_c = 57.4 at c = 20 and 18.2 at c = 85 of a 105-token completion": each number as the recent/relative
    ε-trace's gradient gives it (λ 0.99, on policy), to the digits written; GRPO's 1."""
    text = " ".join(line.lstrip("# ") for line in (ROOT / path).read_text().splitlines())
    found = re.search(r"w_c = ([\d.]+) at c = (\d+) and ([\d.]+) at c = (\d+) of a (\d+)-token completion", text)
    assert found, path
    early, at_early, late, at_late, length = found.groups()
    trace = token_weights(ObjectiveParams(objective="grpo_lambda", lam=0.99, style="recent", update="trace",
                                          form="relative"), int(length))
    for quoted, position in ((early, at_early), (late, at_late)):
        digits = len(quoted.partition(".")[2])
        assert round(float(trace[int(position)]), digits) == float(quoted), (path, quoted, trace[int(position)])
    assert token_weights(ObjectiveParams(objective="grpo"), int(length)) == pytest.approx(1.0)


def test_the_prediction_follows_from_the_loss_s_gradient_at_the_deciding_carry():
    """decoys-after: the trace weights the deciding carry above both decoys' (GRPO weights all three 1):
    predicted ahead. decoys-before: below both: predicted behind. The weights are the loss's own gradient
    (dapo, on policy), not a formula written beside it."""
    trace_g, trace_d, grpo_g, grpo_d = layout_weights("after")
    assert grpo_g == pytest.approx(1.0) and grpo_d == pytest.approx([1.0, 1.0])
    assert trace_g > 1.25 * max(trace_d) and trace_g > 45
    trace_g, trace_d, grpo_g, grpo_d = layout_weights("before")
    assert grpo_g == pytest.approx(1.0)
    assert trace_g < 0.6 * min(trace_d) and trace_g < 25
    assert CONFIG["report"]["control"]["predicted"] == {"decoys-after": "ahead", "decoys-before": "behind"}


def test_the_two_layouts_train_on_the_same_problems():
    after, before = (CONFIG["datasets"][f"decoys-{p}"] for p in ("after", "before"))
    assert {k: v for k, v in after.items() if k != "decoy_position"} == \
        {k: v for k, v in before.items() if k != "decoy_position"}


# ---- the control table on a hand-built nested study ---------------------------------------------------

N = 40
SFT_SEEDS, SEEDS = [1, 2], [0, 1, 2, 3]
# Right answers out of 40 per RL seed: per layout and arm.
# The effect differs between the two SFT models (RL seeds 0-1 on SFT seed 1, 2-3 on SFT seed 2).
COUNTS = {("decoys-after", "grpo-clamp"): [20, 21, 22, 23], ("decoys-after", "recent-trace-0.99"): [22, 24, 32, 33],
          ("decoys-before", "grpo-clamp"): [24, 22, 23, 25], ("decoys-before", "recent-trace-0.99"): [23, 22, 17, 18]}


def small_config() -> dict:
    config = copy.deepcopy(CONFIG)
    config["sft"] = {**{k: v for k, v in config["sft"].items() if k != "seeds"}, "seeds": SFT_SEEDS}
    config["seeds"] = SEEDS
    # the Holm mechanics of a control family with a verdict: the shipped config publishes it descriptive
    config["report"] = {**config["report"], "descriptive": ["reward_auc", "steps_to_threshold"]}
    return study.validate(config)


def samples() -> pd.DataFrame:
    rows = []
    for (dataset, variant), counts in COUNTS.items():
        suite = CONFIG["report"]["control"]["suites"][dataset]
        for seed, k in zip(SEEDS, counts):
            rows += [{"model": "tiny", "dataset": dataset, "variant": variant, "seed": seed, "step": "final",
                      "benchmark": suite, "id": f"p{p}", "mode": "greedy", "correct": float(p < k)} for p in range(N)]
        for sft_seed in SFT_SEEDS:
            rows += [{"model": "tiny", "dataset": dataset, "variant": "sft", "seed": sft_seed, "step": "final",
                      "benchmark": suite, "id": f"p{p}", "mode": "greedy", "correct": float(p < 12)}
                     for p in range(N)]
    return pd.DataFrame(rows).astype({"seed": "Int64"})[KEYS + ["id", "mode", "correct"]]


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    config = small_config()
    options = report_options(config)
    return control_table(Cells(samples(), config, options), config, pd.DataFrame(), options)


def test_each_effect_is_the_paired_difference_on_its_own_suite_over_the_sft_models(table):
    effects = table[table["role"] == "effect"].set_index("dataset")
    for dataset in ("decoys-after", "decoys-before"):
        trace, base = COUNTS[(dataset, "recent-trace-0.99")], COUNTS[(dataset, "grpo-clamp")]
        assert effects.loc[dataset, "estimate"] == pytest.approx((np.mean(trace) - np.mean(base)) / N)
        assert effects.loc[dataset, "sft_accuracy"] == pytest.approx(12 / N)
        # The SFT models differ most: the interval's df comes from the two SFT models (about one).
        assert effects.loc[dataset, "df"] < 3
    assert list(effects["predicted"]) == ["ahead", "behind"]


def test_each_arms_accuracy_is_read_from_that_arms_own_runs(table):
    """baseline_accuracy is the baseline's (grpo-clamp's) mean over its seeds, treatment_accuracy the treatment's:
    on decoys-after 21.5/40 and 27.75/40, on decoys-before 23.5/40 and 20/40."""
    effects = table[table["role"] == "effect"].set_index("dataset")
    for dataset in ("decoys-after", "decoys-before"):
        for column, variant in (("baseline_accuracy", "grpo-clamp"), ("treatment_accuracy", "recent-trace-0.99")):
            assert effects.loc[dataset, column] == pytest.approx(np.mean(COUNTS[(dataset, variant)]) / N)
            assert effects.loc[dataset, f"{column}_low"] < effects.loc[dataset, column] < effects.loc[
                dataset, f"{column}_high"]


def test_the_contrast_is_the_difference_of_the_effects_and_all_three_are_one_family(table):
    effects = table[table["role"] == "effect"].set_index("dataset")["estimate"]
    contrast = table[table["role"] == "contrast"].iloc[0]
    assert contrast["estimate"] == pytest.approx(effects["decoys-after"] - effects["decoys-before"])
    assert contrast["predicted"] == "ahead"
    p = table["p"].to_numpy()
    order = np.argsort(p)
    assert table["p_holm"].to_numpy()[order[0]] == pytest.approx(min(1.0, 3 * p[order[0]]))


def test_the_outcome_reads_the_verdict_against_the_prediction():
    from grpo_lambda.tables.control import outcome
    assert outcome("ahead", "ahead") == "as predicted"
    assert outcome("ahead", "behind") == "opposite"
    assert outcome("behind", "behind") == "as predicted"
    assert outcome("equivalent", "ahead") == outcome("not distinguishable", "behind") == "not resolved"


@pytest.mark.parametrize("change, message", [
    (lambda c: c.update(predicted={"decoys-after": "ahead"}), r"predicted must give every training set"),
    (lambda c: c.update(predicted={"decoys-after": "up", "decoys-before": "behind"}), r"predicted must give"),
    (lambda c: c["pair"].update(treatment="nope"), r"report\.control\.pair\.treatment: 'nope' is not a variant"),
    (lambda c: c["suites"].update({"decoys-after": "nope"}), r"suites\.decoys-after: 'nope' is not a benchmark"),
])
def test_a_bad_control_declaration_is_refused_naming_the_key(change, message):
    config = copy.deepcopy(CONFIG)
    change(config["report"]["control"])
    with pytest.raises(ValueError, match=message):
        report_options(config)
