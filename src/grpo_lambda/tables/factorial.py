"""The ``factorial`` table: the simple effects, main effects and interaction of a 2 × 2 design
(``report.factorial``), such as the −0.1 clamp of negative advantages × the eligibility trace.

With factors A and B and the variant of each cell (a, b) ∈ {off, on}²:

    A with B off       (on, off) − (off, off)                                  (a simple effect)
    A with B on        (on, on) − (off, on)
    B with A off, B with A on   the same with the roles swapped
    main effect of A   ½ (A with B off) + ½ (A with B on)                      (A on − off, mean over B)
    main effect of B   the same with the roles swapped
    interaction        (A with B on) − (A with B off)                          (how much B changes A's effect)

each for the accuracy (``report.metric``; every benchmark and their average) and the training-reward
AUC (the mean reward over the run, grpo_lambda.tables.learning_speed), paired by seed (the four
variants of a seed start from one SFT model) and, for accuracy, by problem; with its interval,
p-values, minimum detectable effect and verdict (grpo_lambda.tables.verdicts; ``ahead`` means a
positive effect). The simple effects are what the design asks when the factors may interact (a main
effect averages an effect that may differ between the other factor's levels), so they are the rows a
claim about one factor rests on.

Families (Holm): on the mean accuracy, the four simple effects are the study's primary family when
``report.primary`` is ``factorial`` (else an exploratory family of their own); the two main effects
are a family (they are averages of the simple effects, so counting them with those would test one
question twice); the interaction is a family of one, since it asks another question (whether the
effects differ), and Holm over it with the effects would spend the effects' α on it. Per-suite rows
are one exploratory family per model × training set; the training-reward AUC's simple effects, main
effects and interaction are three more, as on accuracy. A line's AUC gap to the baseline that is one of
the simple effects is counted here only (the learning_speed table leaves it out of its reward AUC family).
The rules are grpo_lambda.config.families' (the design check reads them too); ``report.multiplicity`` may
give the AUC families the step-down max-T over joint sign flips of the seeds (the ``procedure`` column).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from grpo_lambda.config import model_datasets, model_variants
from grpo_lambda.config.family_names import (FACTORIAL_REWARD_AUC as REWARD_AUC, INTERACTION, MAIN, SIMPLE,
                                             factorial_family as family_of)
from grpo_lambda.seed_level import seed_interval
from grpo_lambda.tables.cells import Cells, interval_columns, scaled, seed_clusters, targets, unit_values
from grpo_lambda.tables.keys import AVERAGE, FINAL
from grpo_lambda.tables.learning_speed import run_statistics
from grpo_lambda.tables.paired import seed_count
from grpo_lambda.tables.verdicts import add_verdicts, comparison_columns, per_seed_text

COLUMNS = ["model", "dataset", "metric", "benchmark", "effect", "kind", "contrast", "estimate", "estimate_low",
           "estimate_high", "seeds", "per_seed", "role", "family", "se", "df", "p", "p_floor", "sft_models", "p_t",
           "p_exact", "procedure", "p_holm", "p_equivalence", "p_equivalence_holm", "mde", "verdict"]
FAMILY = ["model", "dataset", "family"]


def contrasts(design: dict) -> list[tuple[str, str, str, dict[str, float]]]:
    """(effect, kind, what it contrasts, {variant: weight}) for the four simple effects, the two main
    effects and the interaction."""
    a, b = design["factors"]
    cell = design["cells"]
    out = []
    for factor, other, at in ((a, b, lambda x, y: (x, y)), (b, a, lambda x, y: (y, x))):
        for level in (False, True):
            out.append((f"{factor} with {other} {'on' if level else 'off'}", SIMPLE,
                        f"{factor} on − off, {other} {'on' if level else 'off'}",
                        {cell[at(True, level)]: 1.0, cell[at(False, level)]: -1.0}))
    main_a = {cell[(True, False)]: 0.5, cell[(True, True)]: 0.5, cell[(False, False)]: -0.5, cell[(False, True)]: -0.5}
    main_b = {cell[(False, True)]: 0.5, cell[(True, True)]: 0.5, cell[(False, False)]: -0.5, cell[(True, False)]: -0.5}
    both = {cell[(True, True)]: 1.0, cell[(True, False)]: -1.0, cell[(False, True)]: -1.0, cell[(False, False)]: 1.0}
    return out + [(a, MAIN, f"{a} on − off, mean over {b}", main_a), (b, MAIN, f"{b} on − off, mean over {a}", main_b),
                  (f"{a} × {b}", INTERACTION, f"{a}'s effect with {b} on − with {b} off", both)]


def factorial_table(cells: Cells, config: dict, logs: pd.DataFrame, options: dict) -> pd.DataFrame:
    """The effects of ``report.factorial`` per model × training set whose runs hold all four cells."""
    design = options["factorial"]
    level, margins = float(options["level"]), options["equivalence_margin"]
    rows, seed_values = [], []  # seed_values: each row's per-seed values, for a max-T family (verdicts)
    if design is None:
        return pd.DataFrame(columns=COLUMNS)
    effects = contrasts(design)
    speed = run_statistics(config, logs, options)
    for model in config["models"]:
        if not set(design["cells"].values()) <= set(model_variants(config, model)):
            continue
        for dataset in model_datasets(config, model):
            for target, members in targets(config["benchmarks"]):
                for effect, kind, contrast, weights in effects:
                    parts = [cells.terms(model, dataset, v, FINAL, members) for v in weights]
                    if not all(parts):
                        continue
                    terms = [t for part, w in zip(parts, weights.values()) for t in scaled(part, w)]
                    interval = cells.interval(terms)
                    role, family = family_of("accuracy", target, kind, options["primary"])
                    rows.append({"model": model, "dataset": dataset, "metric": "accuracy", "benchmark": target,
                                 "effect": effect, "kind": kind, "contrast": contrast,
                                 **interval_columns("estimate", interval), "seeds": seed_count(*parts),
                                 "per_seed": "", "role": role, "family": family,
                                 **comparison_columns(interval, level, margins.get("accuracy"))})
                    seed_values.append(None)
            per_variant = speed.get((model, dataset), (None, {}))[1]
            if not set(design["cells"].values()) <= set(per_variant):
                continue
            shared = sorted(set.intersection(*(set(per_variant[v][0]) for v in design["cells"].values())))
            for effect, kind, contrast, weights in effects:
                per_seed = sum(w * _auc_of(per_variant[v], shared) for v, w in weights.items())
                interval = seed_interval(per_seed, level, shared, seed_clusters(config, shared))
                role, family = family_of(REWARD_AUC, "", kind, options["primary"])
                rows.append({"model": model, "dataset": dataset, "metric": REWARD_AUC, "benchmark": "",
                             "effect": effect, "kind": kind, "contrast": contrast,
                             **interval_columns("estimate", interval), "seeds": len(shared),
                             "per_seed": per_seed_text(interval), "role": role, "family": family,
                             **comparison_columns(interval, level, margins.get(REWARD_AUC))})
                seed_values.append(unit_values(per_seed, shared, seed_clusters(config, shared)))
    return add_verdicts(pd.DataFrame(rows, columns=COLUMNS), "estimate", FAMILY, level, options=options,
                        table="factorial", seed_values=seed_values)


def _auc_of(statistics: tuple, seeds: list[int]) -> np.ndarray:
    """One variant's per-seed AUC on ``seeds``, in that order."""
    own_seeds, auc, _ = statistics
    return np.array([auc[own_seeds.index(s)] for s in seeds], dtype=float)
