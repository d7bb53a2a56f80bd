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
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from grpo_lambda.config.family_names import DESCRIPTIVE
from grpo_lambda.tables.cells import Cells, interval_columns, scaled
from grpo_lambda.tables.horizon import _accuracy, _per_seed, signal
from grpo_lambda.tables.keys import FINAL, SFT
from grpo_lambda.tables.verdicts import AHEAD, BEHIND, add_verdicts, comparison_columns

EFFECT, CONTRAST = "effect", "contrast"
NO_VERDICT = "no verdict"
COLUMNS = ["model", "role", "dataset", "benchmark", "predicted", "sft_accuracy", "sft_accuracy_low",
           "sft_accuracy_high", "steps_with_signal", "baseline_accuracy", "baseline_accuracy_low",
           "baseline_accuracy_high", "treatment_accuracy", "treatment_accuracy_low", "treatment_accuracy_high",
           "estimate", "estimate_low", "estimate_high", "seeds", "per_seed", "se", "df", "p", "p_floor",
           "sft_models", "p_t", "p_exact", "procedure", "p_holm", "p_equivalence", "p_equivalence_holm", "mde",
           "verdict", "outcome"]


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
    treatment, baseline = design["pair"]["treatment"], design["pair"]["baseline"]
    rows = []
    for model in config["models"]:
        differences = {}
        for dataset, benchmark in design["suites"].items():
            arms = [cells.terms(model, dataset, v, FINAL, [benchmark]) for v in (treatment, baseline)]
            row = {"model": model, "role": EFFECT, "dataset": dataset, "benchmark": benchmark,
                   "predicted": design["predicted"][dataset],
                   **_accuracy(cells, "sft_accuracy", model, dataset, SFT, benchmark),
                   "steps_with_signal": signal(logs, model, dataset, [treatment, baseline])[0],
                   **_accuracy(cells, "baseline_accuracy", model, dataset, baseline, benchmark),
                   **_accuracy(cells, "treatment_accuracy", model, dataset, treatment, benchmark)}
            if not all(arms):
                rows.append({**row, **interval_columns("estimate", None), "seeds": 0, "per_seed": "",
                             **comparison_columns(None, level, None)})
                continue
            differences[dataset] = scaled(arms[0], 1.0) + scaled(arms[1], -1.0)
            interval = cells.interval(differences[dataset])
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
    frame = pd.DataFrame(rows, columns=COLUMNS)
    if frame.empty:
        return frame
    frame["family"] = "control"
    frame = add_verdicts(frame.drop(columns=["p_holm", "p_equivalence_holm", "verdict", "outcome"]), "estimate",
                         ["model", "family"], level, options=options, table="control")
    frame["outcome"] = [outcome(v, p, c) for v, p, c in zip(frame["verdict"], frame["predicted"], frame["procedure"])]
    return frame.drop(columns=["family"])[COLUMNS]
