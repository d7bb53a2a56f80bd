"""The ``paired`` table: each method minus the baseline over the same problems, with its interval."""

from __future__ import annotations

import pandas as pd

from grpo_lambda.config import model_datasets, model_variants
from grpo_lambda.tables.cells import Cells, _estimate, _interval_columns, _scaled, _targets
from grpo_lambda.tables.keys import ALL_DATASETS, FINAL
from grpo_lambda.tables.labels import method_label, method_variants, variant_label
from grpo_lambda.tables.table1 import _method_terms

def paired_table(cells: Cells, config: dict, options: dict) -> pd.DataFrame:
    """Each variant minus the baseline per model × dataset, and each Table 1 method minus the
    baseline over all training sets (dataset ``all``), paired over problems."""
    baseline = options["baseline"]
    benchmarks = list(config["benchmarks"])
    rows = []

    def add(model, dataset, method, label, variants, datasets):
        for target, members in _targets(benchmarks):
            common = [d for d in datasets if cells.terms(model, d, baseline, FINAL, members)
                      and any(cells.terms(model, d, v, FINAL, members) for v in variants)]
            treated, _ = _method_terms(cells, config, model, variants, members, common)
            base, _ = _method_terms(cells, config, model, [baseline], members, common)
            if not treated or not base:
                continue
            diff = cells.interval(treated + _scaled(base, -1.0))
            rows.append({"model": model, "dataset": dataset, "method": method, "label": label,
                         "baseline": baseline, "benchmark": target,
                         "accuracy": _estimate(treated), "baseline_accuracy": _estimate(base),
                         **_interval_columns("diff", diff), "distinguishable": diff.excludes(0.0)})

    for model in config["models"]:
        datasets = model_datasets(config, model)
        others = [v for v in model_variants(config, model) if v != baseline]
        for dataset in datasets:
            for variant in others:
                add(model, dataset, variant, variant_label(config, variant), [variant], [dataset])
        for method, variants in method_variants(config, model, options).items():
            if method != "grpo":
                add(model, ALL_DATASETS, method, method_label(config, method), variants, datasets)
    columns = ["model", "dataset", "method", "label", "baseline", "benchmark", "accuracy", "baseline_accuracy",
               "diff", "diff_low", "diff_high", "distinguishable"]
    return pd.DataFrame(rows, columns=columns)
