"""``eval_length``: the mean completion length of the final models on each benchmark (the paper's
Appendix E.3; ``mean_length`` of ``results_by_variant``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from grpo_lambda.config import model_variants
from grpo_lambda.figures.style import figure_legend, grid, method_colour, note, variant_colour
from grpo_lambda.tables.keys import AVERAGE, SFT
from grpo_lambda.tables.labels import method_label, objective, variant_label

POOLED = "grpo_lambda_pooled"


def eval_length_figure(config: dict, by_variant: pd.DataFrame, options: dict | None = None):
    """``by_variant``: the ``results_by_variant`` table (final models, mean over seeds). With
    report.eval_length_pooled, GRPO-λ's variants make one bar, their mean (Appendix E.3: "GRPO-λ shows the
    average length across hyperparameter settings"), beside SFT and the other variants."""
    pooled = bool(options and options["eval_length_pooled"])
    final = by_variant[by_variant["benchmark"] != AVERAGE]
    models = list(config["models"])
    benchmarks = list(config["benchmarks"])
    fig, axes = grid(len(models), 1, width=1.1 * len(benchmarks) + 2.5, height=3.0)
    for ax, model in zip(axes[:, 0], models):
        data = final[final["model"] == model]
        if data.empty:
            note(ax, f"{model}: no evaluations yet")
            continue
        variants = [v for v in [SFT] + model_variants(config, model) if v in set(data["variant"])]
        lam = [v for v in variants if v != SFT and objective(config, v) == "grpo_lambda"] if pooled else []
        bars = [v for v in variants if v not in lam] + ([POOLED] if lam else [])
        width = 0.8 / len(bars)
        for i, bar in enumerate(bars):
            members = lam if bar == POOLED else [bar]
            rows = data[data["variant"].isin(members)]
            # the table's mean over seeds within a training set, then the mean over training sets and variants
            per_bench = rows.groupby("benchmark")["mean_length"].mean()
            ax.bar(np.arange(len(benchmarks)) + (i - (len(bars) - 1) / 2) * width,
                   per_bench.reindex(benchmarks).to_numpy(), width,
                   color=method_colour(config, "grpo_lambda", lam) if bar == POOLED else variant_colour(config, bar),
                   label=method_label(config, "grpo_lambda", lam) if bar == POOLED else variant_label(config, bar))
        ax.set_xticks(np.arange(len(benchmarks)), benchmarks)
        ax.set_ylabel("mean completion length (tokens)")
        ax.set_title(config["models"][model].get("paper_name", model), fontsize=9)
    figure_legend(fig)
    return fig
