"""The ``factorial`` table: the main effects and the interaction of a 2 × 2 design (``report.factorial``),
such as the −0.1 clamp of negative advantages × the eligibility trace.

With factors A and B and the variant of each cell (a, b) ∈ {off, on}²:

    main effect of A   ½ [(on, off) − (off, off)] + ½ [(on, on) − (off, on)]   (A on − off, mean over B)
    main effect of B   the same with the roles swapped
    interaction        (on, on) − (on, off) − (off, on) + (off, off)          (how much B changes A's effect)

each for the accuracy (``report.metric``; every benchmark and their average) and the training-reward
AUC (the mean reward over the run, grpo_lambda.tables.learning_speed), paired by seed (the four
variants of a seed start from one SFT model) and, for accuracy, by problem; with its interval,
p-values, minimum detectable effect and verdict (grpo_lambda.tables.verdicts; Holm's family: the three
effects of one metric; ``ahead`` means a positive effect).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from grpo_lambda.config import model_datasets, model_variants
from grpo_lambda.stats import t_interval
from grpo_lambda.tables.cells import Cells, interval_columns, scaled, targets
from grpo_lambda.tables.keys import FINAL
from grpo_lambda.tables.learning_speed import run_statistics
from grpo_lambda.tables.paired import seed_count
from grpo_lambda.tables.verdicts import add_verdicts, comparison_columns

COLUMNS = ["model", "dataset", "metric", "benchmark", "effect", "contrast", "estimate", "estimate_low",
           "estimate_high", "seeds", "df", "p", "p_holm", "p_equivalence", "p_equivalence_holm", "mde", "verdict"]
FAMILY = ["model", "dataset", "metric", "benchmark"]  # the three effects of one metric
REWARD_AUC = "reward_auc"


def contrasts(design: dict) -> list[tuple[str, str, dict[str, float]]]:
    """(effect, what it contrasts, {variant: weight}) for the two main effects and the interaction."""
    a, b = design["factors"]
    cell = design["cells"]
    main_a = {cell[(True, False)]: 0.5, cell[(True, True)]: 0.5, cell[(False, False)]: -0.5, cell[(False, True)]: -0.5}
    main_b = {cell[(False, True)]: 0.5, cell[(True, True)]: 0.5, cell[(False, False)]: -0.5, cell[(True, False)]: -0.5}
    both = {cell[(True, True)]: 1.0, cell[(True, False)]: -1.0, cell[(False, True)]: -1.0, cell[(False, False)]: 1.0}
    return [(a, f"{a} on − off, mean over {b}", main_a), (b, f"{b} on − off, mean over {a}", main_b),
            (f"{a} × {b}", f"{a}'s effect with {b} on − with {b} off", both)]


def factorial_table(cells: Cells, config: dict, logs: pd.DataFrame, options: dict) -> pd.DataFrame:
    """The effects of ``report.factorial`` per model × training set whose runs hold all four cells."""
    design = options["factorial"]
    level, margins = float(options["level"]), options["equivalence_margin"]
    rows = []
    if design is None:
        return pd.DataFrame(columns=COLUMNS)
    effects = contrasts(design)
    speed = run_statistics(config, logs, options)
    for model in config["models"]:
        if not set(design["cells"].values()) <= set(model_variants(config, model)):
            continue
        for dataset in model_datasets(config, model):
            for target, members in targets(config["benchmarks"]):
                for effect, contrast, weights in effects:
                    parts = [cells.terms(model, dataset, v, FINAL, members) for v in weights]
                    if not all(parts):
                        continue
                    terms = [t for part, w in zip(parts, weights.values()) for t in scaled(part, w)]
                    interval = cells.interval(terms)
                    rows.append({"model": model, "dataset": dataset, "metric": "accuracy", "benchmark": target,
                                 "effect": effect, "contrast": contrast, **interval_columns("estimate", interval),
                                 "seeds": seed_count(*parts),
                                 **comparison_columns(interval, level, margins.get("accuracy"))})
            per_variant = speed.get((model, dataset), (None, {}))[1]
            if not set(design["cells"].values()) <= set(per_variant):
                continue
            shared = sorted(set.intersection(*(set(per_variant[v][0]) for v in design["cells"].values())))
            for effect, contrast, weights in effects:
                per_seed = sum(w * _auc_of(per_variant[v], shared) for v, w in weights.items())
                interval = t_interval(per_seed, level)
                rows.append({"model": model, "dataset": dataset, "metric": REWARD_AUC, "benchmark": "",
                             "effect": effect, "contrast": contrast, **interval_columns("estimate", interval),
                             "seeds": len(shared), **comparison_columns(interval, level, margins.get(REWARD_AUC))})
    return add_verdicts(pd.DataFrame(rows, columns=COLUMNS), "estimate", FAMILY, level)


def _auc_of(statistics: tuple, seeds: list[int]) -> np.ndarray:
    """One variant's per-seed AUC on ``seeds``, in that order."""
    own_seeds, auc, _ = statistics
    return np.array([auc[own_seeds.index(s)] for s in seeds], dtype=float)
