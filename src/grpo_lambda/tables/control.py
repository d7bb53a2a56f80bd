"""The ``control`` table (``report.control``): a treatment's effect where the objective predicts its sign.

A control study trains one pair of variants (treatment, baseline) on training sets built so that the
treatment's own weighting of token positions predicts whether it helps (the positive control) or hurts
(the negative control), and declares the predicted direction before the run. Per training set d, on its
own held-out suite,

    Δ_d = accuracy(treatment, d) − accuracy(baseline, d)      paired by seed and problem

and, with two training sets of opposite predictions, their contrast Δ_ahead − Δ_behind (independent SFT
models: independent strata), predicted positive. Every row of a model is one family, the study's primary
(Holm over the effects and the contrast). ``outcome`` reads the verdict against the prediction: ``as
predicted`` (resolved in the predicted direction), ``opposite`` (resolved the other way), or ``not resolved``.
With several SFT models per training set (``sft.seeds``) the intervals are over them.

A dose-response control (``report.control.levels``: training set -> r_d, the deciding token's weight under
the treatment relative to the other decisions', derived from the loss's gradient) adds one row, its own
family: the trend, the least-squares slope of the effect on ln r_d,

    b = Σ_d c_d Δ_d,      c_d = (x_d − x̄) / Σ_d (x_d − x̄)²,      x_d = ln r_d,

whose interval spans the levels' independent SFT models (grpo_lambda.tables.horizon reads a horizon's trend
the same way). Its sign is declared (``report.control.trend``) and it is tested one-sided: p is half the
two-sided p where the slope points the declared way, one minus that half where it does not, so a trend
against the prediction is never "as predicted" and never resolved. Its MDE is the one-sided test's; its
interval stays the two-sided 95% one.
The table then also carries each row's ``level``, ``treatment``, ``relative_weight`` and ``family``. In a dose
over variants (``pair.treatment`` a list, one training set) each level is a treatment against the one
baseline, Δ_v = accuracy(v) − accuracy(baseline); the trend's weights sum to 0, so the baseline's cells cancel
from it and its interval holds the treatments' spread alone.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from grpo_lambda.config.family_names import CONTROL, CONTROL_TREND, DESCRIPTIVE
from grpo_lambda.stats import minimum_detectable_effect
from grpo_lambda.tables.cells import Cells, interval_columns, scaled
from grpo_lambda.tables.horizon import _accuracy, _per_seed, signal, slope_weights
from grpo_lambda.tables.keys import FINAL, SFT
from grpo_lambda.tables.verdicts import AHEAD, BEHIND, POWER, add_verdicts, comparison_columns

EFFECT, CONTRAST, TREND = "effect", "contrast", "trend"
TREND_NAME = "slope on ln(relative weight)"
NO_VERDICT = "no verdict"
COLUMNS = ["model", "role", "dataset", "benchmark", "predicted", "sft_accuracy", "sft_accuracy_low",
           "sft_accuracy_high", "steps_with_signal", "baseline_accuracy", "baseline_accuracy_low",
           "baseline_accuracy_high", "treatment_accuracy", "treatment_accuracy_low", "treatment_accuracy_high",
           "estimate", "estimate_low", "estimate_high", "seeds", "per_seed", "se", "df", "p", "p_floor",
           "sft_models", "p_t", "p_exact", "procedure", "p_holm", "p_equivalence", "p_equivalence_holm", "mde",
           "verdict", "outcome"]
# A dose-response control's table (report.control.levels): each level's relative weight, and the family column
# that tells the levels' effects from the trend (and lets a later design check read this run as its pilot).
DOSE_COLUMNS = [*COLUMNS[:2], "level", "dataset", "treatment", *COLUMNS[3:5], "relative_weight", *COLUMNS[5:],
                "family"]


def outcome(verdict: str, predicted: str, procedure: str = "") -> str:
    """The verdict read against the declared prediction ("no verdict" in a descriptive family)."""
    if procedure == DESCRIPTIVE:
        return NO_VERDICT
    if verdict not in (AHEAD, BEHIND):
        return "not resolved"
    return "as predicted" if verdict == predicted else "opposite"


def control_table(cells: Cells, config: dict, logs: pd.DataFrame, options: dict) -> pd.DataFrame:
    design = options.get("control")
    if design is None:
        return pd.DataFrame(columns=COLUMNS)
    level, margin = float(options["level"]), design["equivalence_margin"]
    baseline = design["pair"]["baseline"]
    levels = design.get("levels")
    slopes = dict(zip(levels, slope_weights(list(levels.values())))) if levels else {}
    rows = []
    for model in config["models"]:
        differences = {}
        for name, (dataset, benchmark, treatment) in design["arms"].items():
            arms = [cells.terms(model, dataset, v, FINAL, [benchmark]) for v in (treatment, baseline)]
            row = {"model": model, "role": EFFECT, "level": name, "dataset": dataset, "treatment": treatment,
                   "benchmark": benchmark, "predicted": design["predicted"][name],
                   **_accuracy(cells, "sft_accuracy", model, dataset, SFT, benchmark),
                   "steps_with_signal": signal(logs, model, dataset, [treatment, baseline])[0],
                   **_accuracy(cells, "baseline_accuracy", model, dataset, baseline, benchmark),
                   **_accuracy(cells, "treatment_accuracy", model, dataset, treatment, benchmark)}
            if not all(arms):
                rows.append({**row, **interval_columns("estimate", None), "seeds": 0, "per_seed": "",
                             **comparison_columns(None, level, None)})
                continue
            differences[name] = scaled(arms[0], 1.0) + scaled(arms[1], -1.0)
            interval = cells.interval(differences[name])
            shared = set(arms[0][0].rows or ()) & set(arms[1][0].rows or ())
            rows.append({**row, **interval_columns("estimate", interval), "seeds": len(shared),
                         "per_seed": _per_seed(cells, model, dataset, treatment, baseline, benchmark),
                         **comparison_columns(interval, level, margin)})
        ahead = [d for d, p in design["predicted"].items() if p == AHEAD]
        behind = [d for d, p in design["predicted"].items() if p == BEHIND]
        if len(ahead) == 1 and len(behind) == 1:
            complete = ahead[0] in differences and behind[0] in differences
            interval = cells.interval(differences[ahead[0]] + scaled(differences[behind[0]], -1.0)) \
                if complete else None
            rows.append({"model": model, "role": CONTRAST, "dataset": f"{ahead[0]} − {behind[0]}", "benchmark": "",
                         "predicted": AHEAD, **interval_columns("estimate", interval), "seeds": np.nan,
                         "per_seed": "", **comparison_columns(interval, level, None)})
        if levels:
            rows.append(trend_row(cells, model, differences, slopes, design["trend"], level))
    columns = DOSE_COLUMNS if levels else COLUMNS
    frame = pd.DataFrame(rows, columns=columns)
    if frame.empty:
        return frame
    frame["family"] = [CONTROL_TREND if role == TREND else CONTROL for role in frame["role"]]
    if levels:
        frame["relative_weight"] = [levels.get(name, np.nan) for name in frame["level"]]
    frame = add_verdicts(frame.drop(columns=["p_holm", "p_equivalence_holm", "verdict", "outcome"]), "estimate",
                         ["model", "family"], level, options=options, table="control")
    trends = (frame["role"] == TREND) & np.isfinite(frame["mde"].astype(float))
    # the one-sided test's MDE (its family is the trend alone, m = 1): a two-sided test at 2α has the
    # one-sided test's critical value at α
    frame.loc[trends, "mde"] = [minimum_detectable_effect(se, df, 2 * (1 - level), POWER)
                                for se, df in zip(frame.loc[trends, "se"], frame.loc[trends, "df"])]
    frame["outcome"] = [outcome(v, p, c) for v, p, c in zip(frame["verdict"], frame["predicted"], frame["procedure"])]
    return frame[columns]


def trend_mde(level_se: float, levels: dict[str, float], sft_models: int, level: float = 0.95) -> float:
    """The smallest slope the one-sided trend test detects with 80% power, where each level's effect has
    standard error ``level_se`` over ``sft_models`` SFT models (df K − 1): the slope's standard error is
    level_se · √Σ c_d² (independent levels), a design check's MDE for the trend from its levels' MDE."""
    weights = slope_weights(list(levels.values()))
    se = level_se * float(np.sqrt((weights ** 2).sum()))
    return minimum_detectable_effect(se, sft_models - 1, 2 * (1 - level), POWER)


def one_sided(p: float, estimate: float, predicted: str) -> float:
    """The one-sided p of a two-sided ``p`` (a symmetric test), against the declared direction ``predicted``:
    half of it where ``estimate`` points that way, one minus the half where it does not."""
    if np.isnan(p) or np.isnan(estimate):
        return p
    agrees = (estimate > 0) == (predicted == AHEAD)
    return p / 2 if agrees else 1 - p / 2


def trend_row(cells: Cells, model: str, differences: dict, slopes: dict, predicted: str, level: float) -> dict:
    """The dose-response trend of ``model``'s effects (the module docstring), tested one-sided against
    ``predicted``; no interval unless every level has its effect."""
    complete = set(slopes) <= set(differences)
    terms = [term for dataset, c in slopes.items() for term in scaled(differences[dataset], c)] if complete else []
    interval = cells.interval(terms) if complete else None
    row = {"model": model, "role": TREND, "level": TREND_NAME, "dataset": TREND_NAME, "benchmark": "",
           "predicted": predicted,
           **interval_columns("estimate", interval), "seeds": np.nan, "per_seed": "",
           **comparison_columns(interval, level, None)}
    for column in ("p", "p_t"):
        row[column] = one_sided(row[column], row["estimate"], predicted)
    return row
