"""The ``paired`` table: each method minus the baseline, paired by training seed and by problem, with its
interval, p-values, minimum detectable effect and verdict (:mod:`grpo_lambda.tables.verdicts`).

Families (Holm; the ``role`` and ``family`` columns). The primary endpoint is the mean accuracy over
the benchmarks. When ``report.primary`` is ``paired`` the lines' gaps on it are the primary family:
over all training sets (dataset ``all``) when a model trains on several, else on its one training set
(whose ``all`` row would repeat it, so none is written). Per-training-set rows of a model with several
sets are the ``mean accuracy`` family, per-benchmark rows the ``per-suite accuracy`` family (one per
model × training set). A check line (``report.checks``) is a family of its own. When the primary
table is ``factorial``, a line whose gap with the baseline is one of the 2 × 2's simple effects is
counted there only (role ``factorial``: in no family here). The rule is grpo_lambda.config.families'
(``paired_family``), which the design check reads too; the ``procedure`` column says how ``p_holm`` was
adjusted (grpo_lambda.tables.verdicts)."""

from __future__ import annotations

import pandas as pd

from grpo_lambda.config import model_datasets, model_variants
from grpo_lambda.config.family_names import paired_family as family_of
from grpo_lambda.config.methods import method_variants
from grpo_lambda.stats import Term
from grpo_lambda.tables.cells import Cells, estimate, interval_columns, scaled, targets
from grpo_lambda.tables.keys import ALL_DATASETS, FINAL
from grpo_lambda.tables.labels import method_label, variant_label
from grpo_lambda.tables.table1 import method_terms
from grpo_lambda.tables.verdicts import add_verdicts, comparison_columns

COLUMNS = ["model", "dataset", "method", "label", "baseline", "benchmark", "accuracy", "baseline_accuracy", "diff",
           "diff_low", "diff_high", "distinguishable", "seeds", "role", "family", "se", "df", "p", "p_floor",
           "sft_models", "p_t", "p_exact", "procedure", "p_holm", "p_equivalence", "p_equivalence_holm", "mde",
           "verdict"]
FAMILY = ["model", "dataset", "family"]


def seed_count(*arms: list[Term]) -> int:
    """How many training runs (SFT model × seed) every arm holds: the runs a difference of the arms pairs."""
    runs = [{(term.seeds, row) for term in terms for row in term.rows} for terms in arms]
    return len(set.intersection(*runs))


def paired_table(cells: Cells, config: dict, options: dict) -> pd.DataFrame:
    """Each variant minus the baseline per model × dataset, and each Table 1 method minus the baseline
    over all training sets (dataset ``all``): paired over problems, and over training seeds, since a
    variant and the baseline with the same seed start from the same SFT model (grpo_lambda.stats)."""
    baseline = options["baseline"]
    level, margin = float(options["level"]), options["equivalence_margin"].get("accuracy")
    rows = []

    def add(model, dataset, method, label, variants, datasets):
        for target, members in targets(config["benchmarks"]):
            common = [d for d in datasets if cells.terms(model, d, baseline, FINAL, members)
                      and any(cells.terms(model, d, v, FINAL, members) for v in variants)]
            treated, _ = method_terms(cells, model, variants, members, common)
            base, _ = method_terms(cells, model, [baseline], members, common)
            if not treated or not base:
                continue
            diff = cells.interval(treated + scaled(base, -1.0))
            rows.append({"model": model, "dataset": dataset, "method": method, "label": label,
                         "baseline": baseline, "benchmark": target,
                         "accuracy": estimate(treated), "baseline_accuracy": estimate(base),
                         **interval_columns("diff", diff), "distinguishable": diff.excludes(0.0),
                         "seeds": seed_count(treated, base),
                         **dict(zip(("role", "family"), family_of(options, variants, dataset, target, several))),
                         **comparison_columns(diff, level, margin)})

    for model in config["models"]:
        datasets = model_datasets(config, model)
        several = len(datasets) > 1  # a model with several training sets: its primary rows pool them (`all`)
        for dataset in datasets:
            for variant in model_variants(config, model):
                if variant != baseline:
                    add(model, dataset, variant, variant_label(config, variant), [variant], [dataset])
        for method, variants in method_variants(config, model, options).items():
            # over one training set the `all` row would repeat the set's own row: written once
            if method != "grpo" and variants != [baseline] and len(datasets) > 1:
                add(model, ALL_DATASETS, method, method_label(config, method, variants), variants, datasets)
    return add_verdicts(pd.DataFrame(rows, columns=COLUMNS), "diff", FAMILY, level, options=options, table="paired")
