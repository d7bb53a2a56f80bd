"""Appendix E (the paper's Tables 3–6): rows benchmark × training set, one column per variant; and its
cells beside the published values."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from grpo_lambda.config import model_datasets, model_variants
from grpo_lambda.config.methods import variant_spec
from grpo_lambda.tables.cells import targets
from grpo_lambda.tables.keys import SFT
from grpo_lambda.tables.labels import _lam_text, _published_variant, objective, variant_label

def _variant_order(config: dict, variants: Iterable[str], baseline: str) -> list[str]:
    """Baseline first, then GRPO-λ variants as in the paper (style, update, λ), then the rest; each
    variant once, also when the baseline is a GRPO-λ variant (a config without GRPO)."""
    variants = list(variants)
    lam = [v for v in variants if objective(config, v) == "grpo_lambda" and v != baseline]
    lam.sort(key=lambda v: tuple(str(variant_spec(config, v)[f]) for f in ("style", "update", "lam", "form")))
    rest = [v for v in variants if v != baseline and v not in lam and v != SFT]
    return ([baseline] if baseline in variants else []) + lam + rest


def appendix_e(by_variant: pd.DataFrame, config: dict, model: str, options: dict) -> pd.DataFrame:
    """Tables 3–6 for one model: rows benchmark × training set, one column per variant."""
    rows = by_variant[(by_variant["model"] == model) & (by_variant["variant"] != SFT)]
    order = _variant_order(config, model_variants(config, model), options["baseline"])
    labels = [variant_label(config, v) for v in order]
    if rows.empty:
        return pd.DataFrame(columns=["benchmark", "dataset"] + labels)
    wide = rows.pivot_table(index=["benchmark", "dataset"], columns="label", values="accuracy", sort=False)
    wide = wide.reindex(columns=labels)
    shown = [t for t, _ in targets(config["benchmarks"])]
    datasets = model_datasets(config, model)
    index = [(t, d) for t in shown for d in datasets if (t, d) in wide.index]
    wide = wide.reindex(pd.MultiIndex.from_tuples(index, names=["benchmark", "dataset"]) if index else wide.index[:0])
    wide.columns.name = None
    return wide.reset_index()


def appendix_e_published(by_variant: pd.DataFrame, published: pd.DataFrame, config: dict,
                         options: dict) -> pd.DataFrame:
    """Long: every Appendix E cell present both here and in the paper, with ours − published."""
    index = {(r.model, r.train_dataset, r.trace_style, r.update_style, _lam_text(r.lam), r.benchmark):
             float(r.accuracy) for r in published.itertuples(index=False)}
    rows = []
    for r in by_variant[by_variant["variant"] != SFT].itertuples(index=False):
        paper_model = config["models"][r.model].get("paper_name")
        twin = _published_variant(config, r.variant, options["baseline"])
        if not paper_model or twin is None:
            continue
        # the dataset's key, or its registry name, as the paper names it
        names = (r.dataset, config["datasets"].get(r.dataset, {}).get("name"))
        paper = next((index[key] for name in names
                      if (key := (paper_model, name, *twin, r.benchmark)) in index), None)
        if paper is None:
            continue
        rows.append({"model": r.model, "paper_name": paper_model, "dataset": r.dataset, "variant": r.variant,
                     "label": r.label, "form": r.form, "benchmark": r.benchmark, "ours": r.accuracy,
                     "ours_low": r.accuracy_low, "ours_high": r.accuracy_high, "published": paper,
                     "difference": r.accuracy - paper,
                     "published_in_interval": bool(r.accuracy_low <= paper <= r.accuracy_high)
                     if not pd.isna(r.accuracy_low) else None})
    columns = ["model", "paper_name", "dataset", "variant", "label", "form", "benchmark", "ours", "ours_low",
               "ours_high", "published", "difference", "published_in_interval"]
    return pd.DataFrame(rows, columns=columns)
