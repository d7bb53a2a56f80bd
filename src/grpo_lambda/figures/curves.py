"""Training curves (the ``training_curves`` table: each seed smoothed, the line their mean, the band their
minimum to maximum): ``figure4`` (GRPO and one GRPO-λ variant), ``reward_curves`` and ``kl`` (every
variant), ``appendix_c_{model}`` (a model's GRPO-λ variants by λ)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from grpo_lambda.config import model_datasets, model_variants
from grpo_lambda.config.methods import variant_spec
from grpo_lambda.figures.style import chunks, figure_legend, grid, note, variant_colour
from grpo_lambda.tables.dataset_gain import chosen_variant
from grpo_lambda.tables.labels import objective, variant_label

CURVES_PER_PANEL = 5   # variants besides the baseline in one panel of curves; more make small multiples


def _best_lambda(config: dict, final: pd.DataFrame, model: str, dataset: str) -> str | None:
    """The GRPO-λ variant with the highest mean final training reward on this model × dataset."""
    data = final[(final["model"] == model) & (final["dataset"] == dataset)]
    data = data[data["variant"].map(lambda v: objective(config, v) == "grpo_lambda")]
    if data.empty:
        return None
    return data.groupby("variant")["reward"].mean().idxmax()


def _panel(model: str, dataset: str, metric: str, variants: list[str], title: str) -> dict:
    return {"model": model, "dataset": dataset, "metric": metric, "variants": variants, "title": title}


METRIC_LABELS = {"reward": "train reward", "kl": "KL to reference"}


def _curves(config: dict, curves: pd.DataFrame, rows: list[list[dict]], suptitle: str = ""):
    """Panels of curves from the ``training_curves`` table: ``rows`` of panels (:func:`_panel`), each
    drawing its variants' smoothed ``metric`` with the seed band; one legend for the figure."""
    n_cols = max((len(row) for row in rows), default=1)
    fig, axes = grid(len(rows), n_cols)
    if not rows:
        note(axes[0, 0], "no training sets to draw")
    for r, row in enumerate(rows):
        for c in range(n_cols):
            ax = axes[r, c]
            if c >= len(row):
                ax.axis("off")
                continue
            panel = row[c]
            runs = curves[(curves["model"] == panel["model"]) & (curves["dataset"] == panel["dataset"])
                          & (curves["metric"] == panel["metric"])]
            drawn = 0
            for variant in panel["variants"]:
                curve = runs[runs["variant"] == variant]
                if curve.empty:
                    continue
                colour = variant_colour(config, variant)
                ax.plot(curve["step"], curve["mean"], color=colour, lw=1.2, label=variant_label(config, variant))
                ax.fill_between(curve["step"], curve["low"], curve["high"], color=colour, alpha=0.2, lw=0)
                drawn += 1
            ax.set_title(panel["title"], fontsize=9)
            if not drawn:
                note(ax, _nothing_logged(config, panel))
                continue
            ax.set_xlabel("step")
            ax.set_ylabel(METRIC_LABELS[panel["metric"]])
        _share_y([(ax, panel) for ax, panel in zip(axes[r], row) if ax.get_lines()])
    if suptitle:
        fig.suptitle(suptitle)
    figure_legend(fig)
    return fig


def kl_penalty(config: dict, variant: str) -> float:
    """The variant's β (its own, else rl.beta; TRL's default 0): at 0 TRL neither computes nor logs the KL."""
    return float(variant_spec(config, variant).get("beta", (config.get("rl") or {}).get("beta", 0.0)))


def _nothing_logged(config: dict, panel: dict) -> str:
    """The note of a panel without curves: why a KL panel of variants that all train at β = 0 stays empty, or
    that the metric is not logged yet."""
    if panel["metric"] == "kl" and not any(kl_penalty(config, v) for v in panel["variants"]):
        return "β = 0: no KL to the reference model\nis computed or logged (rl.beta)"
    return f"no {panel['metric']} logged yet"


def _share_y(drawn: list[tuple]) -> None:
    """One y range for the drawn panels (ax, panel) of a row that show the same metric: small
    multiples compare."""
    for metric in {panel["metric"] for _, panel in drawn}:
        same = [ax for ax, panel in drawn if panel["metric"] == metric]
        if len(same) > 1:
            limits = np.array([ax.get_ylim() for ax in same])
            for ax in same:
                ax.set_ylim(limits[:, 0].min(), limits[:, 1].max())


def figure4(config: dict, curves: pd.DataFrame, final: pd.DataFrame, options: dict):
    """``curves``: the ``training_curves`` table; ``final``: the ``final_reward`` table. One row per
    model, one panel per training set of report.figure4_datasets the model trains on: the baseline and the
    model's GRPO-λ variant of report.figure4_variant (default λ 0.99, recent ε-trace; "best": the highest
    final training reward of the cell, which selects on the plotted outcome)."""
    baseline = options["baseline"]
    rows = []
    for model in config["models"]:
        row = []
        for dataset in [d for d in model_datasets(config, model) if d in options["figure4_datasets"]]:
            if options["figure4_variant"] == "best":  # chosen on the reward it plots: a choice on the outcome
                lam = _best_lambda(config, final, model, dataset)
            else:
                lam = chosen_variant(config, model, options["figure4_variant"])
            row.append(_panel(model, dataset, "reward", [baseline] + ([lam] if lam else []), f"{model} / {dataset}"))
        if row:
            rows.append(row)
    return _curves(config, curves, rows)


def _every_variant(config: dict, curves: pd.DataFrame, metric: str, options: dict):
    """One row per model × training set; the variants besides the baseline in groups of at most
    CURVES_PER_PANEL (config order), the baseline drawn in each group's panel."""
    baseline = options["baseline"]
    rows = []
    for model in config["models"]:
        variants = model_variants(config, model)
        first = [baseline] if baseline in variants else []
        groups = chunks([v for v in variants if v not in first], CURVES_PER_PANEL)
        for dataset in model_datasets(config, model):
            rows.append([_panel(model, dataset, metric, first + group,
                                f"{model} / {dataset}" + (f" ({i + 1}/{len(groups)})" if len(groups) > 1 else ""))
                         for i, group in enumerate(groups)])
    return _curves(config, curves, rows)


def reward_curves_figure(config: dict, curves: pd.DataFrame, options: dict):
    """Training reward of every variant (the comparison of all methods), with the seed spread."""
    return _every_variant(config, curves, "reward", options)


def kl_figure(config: dict, curves: pd.DataFrame, options: dict):
    """KL to the reference model over training of every variant."""
    return _every_variant(config, curves, "kl", options)


def appendix_c_figure(config: dict, curves: pd.DataFrame, options: dict, model: str):
    """The paper's Appendix C for one model: per training set (rows), the training reward and the KL
    of its GRPO-λ variants of each λ beside the baseline (columns: reward per λ, then KL per λ)."""
    variants = model_variants(config, model)
    # the baseline leads every panel, and is drawn once even where it is itself a GRPO-λ variant
    lam_variants = [v for v in variants if objective(config, v) == "grpo_lambda" and v != options["baseline"]]
    lams = sorted({float(variant_spec(config, v)["lam"]) for v in lam_variants})
    first = [options["baseline"]] if options["baseline"] in variants else []
    if not lams:
        fig, axes = grid(1, 1)
        note(axes[0, 0], f"{model} has no GRPO-λ variant")
        return fig
    rows = [[_panel(model, dataset, metric, first + [v for v in lam_variants if variant_spec(config, v)["lam"] == lam],
                    f"{dataset}: {METRIC_LABELS[metric]}, λ = {lam:g}")
             for metric in ("reward", "kl") for lam in lams]
            for dataset in model_datasets(config, model)]
    return _curves(config, curves, rows, f"{config['models'][model].get('paper_name', model)}: GRPO-λ by λ")
