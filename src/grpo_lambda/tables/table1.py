"""Table 1: per model × method, the mean over training sets of each benchmark and their average; and
Table 1 beside the published values."""

from __future__ import annotations

import pandas as pd

from grpo_lambda.config import model_datasets
from grpo_lambda.config.methods import method_variants
from grpo_lambda.stats import Term
from grpo_lambda.tables.cells import Cells, interval_columns, scaled, targets
from grpo_lambda.tables.keys import AVERAGE, FINAL, SFT
from grpo_lambda.tables.labels import method_label

def method_terms(cells: Cells, model: str, variants: list[str], members: list[str],
                 datasets: list[str]) -> tuple[list[Term] | None, list[str]]:
    """Terms of the mean over ``datasets`` of the mean over ``variants`` (those present)."""
    per_dataset = {}
    for dataset in datasets:
        present = [terms for v in variants if (terms := cells.terms(model, dataset, v, FINAL, members))]
        if present:
            per_dataset[dataset] = [t for terms in present for t in scaled(terms, 1.0 / len(present))]
    if not per_dataset:
        return None, []
    return [t for terms in per_dataset.values() for t in scaled(terms, 1.0 / len(per_dataset))], list(per_dataset)


def table1(cells: Cells, config: dict, options: dict) -> pd.DataFrame:
    """Table 1: per model × method, the mean over training sets of each benchmark and the average.

    Wide: one column per benchmark and ``average`` with ``_low``/``_high`` interval columns.
    """
    benchmarks = list(config["benchmarks"])
    rows = []
    for model in config["models"]:
        datasets = model_datasets(config, model)
        methods = {SFT: [SFT], **method_variants(config, model, options)}
        for method, variants in methods.items():
            row = {"model": model, "paper_name": config["models"][model].get("paper_name", ""),
                   "method": method, "label": method_label(config, method, variants),
                   "variants": " ".join(variants)}
            used: list[str] = []
            for target, members in [(AVERAGE, benchmarks)] + [(b, [b]) for b in benchmarks]:
                terms, present = method_terms(cells, model, variants, members, datasets)
                row.update(interval_columns(target, cells.level_interval(terms) if terms else None))
                if target == AVERAGE:
                    used = present
            row["datasets"] = " ".join(used)
            if any(not pd.isna(row[t]) for t, _ in targets(benchmarks)):
                rows.append(row)
    columns = ["model", "paper_name", "method", "label", "variants", "datasets"] + [
        c for t in [AVERAGE] + benchmarks for c in (t, f"{t}_low", f"{t}_high")]
    return pd.DataFrame(rows, columns=columns)


def table1_published(ours: pd.DataFrame, published: pd.DataFrame, config: dict) -> pd.DataFrame:
    """Long: every Table 1 cell present both here and in the paper, with ours − published."""
    rows = []
    published = published.set_index(["model", "method"])
    for row in ours.to_dict("records"):  # not itertuples: benchmark names need not be identifiers
        key = (row["paper_name"], row["method"])
        if not row["paper_name"] or key not in published.index:
            continue
        for target in list(config["benchmarks"]) + [AVERAGE]:
            if target not in published.columns or pd.isna(row[target]):
                continue
            value, paper = row[target], float(published.loc[key, target])
            low, high = row[f"{target}_low"], row[f"{target}_high"]
            rows.append({"model": row["model"], "paper_name": row["paper_name"], "method": row["method"],
                         "benchmark": target, "ours": value, "ours_low": low, "ours_high": high,
                         "published": paper, "difference": value - paper,
                         "published_in_interval": bool(low <= paper <= high) if not pd.isna(low) else None})
    columns = ["model", "paper_name", "method", "benchmark", "ours", "ours_low", "ours_high", "published",
               "difference", "published_in_interval"]
    return pd.DataFrame(rows, columns=columns)
