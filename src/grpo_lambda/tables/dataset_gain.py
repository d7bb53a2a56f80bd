"""§4.3's per-training-set gain: for each training set, GRPO-λ's average accuracy minus GRPO's, mean over the
models that train on it ("post-training on the MathRL-16k dataset results in [...] an improvement of over 5 points
(0.0552)"). The paper does not say which GRPO-λ variant its number is; its MathRL-16K 0.0552 equals the mean over
the four models of the λ = 0.99 recent ε-trace gain in its Appendix E (0.05525), so that variant is the default
(report.dataset_gain_variant). Beside each row, the same number computed from the published Appendix E for the
models and training sets the paper has (``published_gain``)."""

from __future__ import annotations

import pandas as pd

from grpo_lambda.config import model_datasets, model_variants
from grpo_lambda.config.methods import matches, variant_spec
from grpo_lambda.tables.keys import AVERAGE
from grpo_lambda.tables.labels import _lam_text, objective

COLUMNS = ["dataset", "variant_selector", "models", "grpo", "grpo_lambda", "gain", "published_models",
           "published_gain"]


def chosen_variant(config: dict, model: str, selector: dict) -> str | None:
    """The model's first GRPO-λ variant (config order) whose fields match ``selector``; None if none does."""
    return next((v for v in model_variants(config, model)
                 if objective(config, v) == "grpo_lambda" and matches(variant_spec(config, v), selector)), None)


def dataset_gain_table(by_variant: pd.DataFrame, published: pd.DataFrame, config: dict,
                       options: dict) -> pd.DataFrame:
    """One row per training set: the mean over models of (chosen GRPO-λ − baseline) average accuracy of the
    final models (``results_by_variant``: mean over seeds), and the published counterpart."""
    selector, baseline = options["dataset_gain_variant"], options["baseline"]
    average = by_variant[by_variant["benchmark"] == AVERAGE].set_index(["model", "dataset", "variant"])["accuracy"]
    paper = published[published["benchmark"] == "average"]
    rows = []
    for dataset in config["datasets"]:
        pairs, published_gains = [], []
        for model in config["models"]:
            if dataset not in model_datasets(config, model):
                continue
            variant = chosen_variant(config, model, selector)
            if variant is None:
                continue
            keys = [(model, dataset, baseline), (model, dataset, variant)]
            if all(key in average.index for key in keys):
                pairs.append((average[keys[0]], average[keys[1]]))
            published_gains += _published_gain(paper, config, model, dataset, variant)
        if not pairs:
            continue
        base = sum(p[0] for p in pairs) / len(pairs)
        lam = sum(p[1] for p in pairs) / len(pairs)
        rows.append({"dataset": dataset, "variant_selector": _selector_text(selector), "models": len(pairs),
                     "grpo": base, "grpo_lambda": lam, "gain": lam - base, "published_models": len(published_gains),
                     "published_gain": sum(published_gains) / len(published_gains) if published_gains else None})
    return pd.DataFrame(rows, columns=COLUMNS)


def _published_gain(paper: pd.DataFrame, config: dict, model: str, dataset: str, variant: str) -> list[float]:
    """[the published Appendix E gain of this cell] if the paper has the model, the training set and the variant's
    twin (style, update, λ), else []."""
    name = config["models"][model].get("paper_name")
    spec = variant_spec(config, variant)
    names = {dataset, config["datasets"][dataset].get("name", dataset)}
    cell = paper[(paper["model"] == name) & paper["train_dataset"].isin(names)]
    grpo = cell[cell["trace_style"] == "grpo"]["accuracy"]
    twin = cell[(cell["trace_style"] == spec.get("style")) & (cell["update_style"] == spec.get("update"))
                & (cell["lam"].map(_lam_text) == _lam_text(spec.get("lam")))]["accuracy"]
    return [float(twin.iloc[0]) - float(grpo.iloc[0])] if len(grpo) == 1 and len(twin) == 1 else []


def _selector_text(selector: dict) -> str:
    return ", ".join(f"{key} {value}" for key, value in selector.items())
