"""The accuracy of the evaluated models: ``figure1`` (the SFT model and every variant of one cell per benchmark,
or Table 1's methods), ``checkpoints_{model}`` (accuracy at every evaluated checkpoint)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from grpo_lambda.config import model_datasets, model_variants
from grpo_lambda.figures.style import error_bars, figure_legend, grid, method_colour, note, variant_colour
from grpo_lambda.tables.keys import AVERAGE, SFT
from grpo_lambda.tables.labels import variant_label

GROUPED_BARS_MAX = 4   # Figure 1: bars side by side per benchmark up to this many lines, else a panel each


def _cell_bars(config: dict, by_variant: pd.DataFrame, model: str, dataset: str, targets: list[str]) -> list[dict]:
    """The SFT model and every variant of one model × training set (``results_by_variant``)."""
    cell = by_variant[(by_variant["model"] == model) & (by_variant["dataset"] == dataset)]
    bars = []
    for variant in [SFT] + model_variants(config, model):
        rows = cell[cell["variant"] == variant].set_index("benchmark").reindex(targets)
        if rows["accuracy"].isna().all():
            continue
        bars.append({"label": variant_label(config, variant), "colour": variant_colour(config, variant),
                     **{key: rows[f"accuracy{suffix}"].to_numpy(dtype=float)
                        for key, suffix in (("value", ""), ("low", "_low"), ("high", "_high"))}})
    return bars


def _method_bars(config: dict, t1: pd.DataFrame, model: str, targets: list[str]) -> list[dict]:
    """Table 1's rows of one model (SFT and every method), mean over training sets."""
    bars = []
    # records, not itertuples: benchmark names such as "arith-1" are not attribute names
    for row in t1[t1["model"] == model].to_dict("records"):
        bars.append({"label": row["label"],  # Table 1's name of the row: a one-variant method by its variant
                     "colour": method_colour(config, row["method"], row["variants"].split()),
                     **{key: np.array([row[f"{t}{suffix}"] for t in targets], dtype=float)
                        for key, suffix in (("value", ""), ("low", "_low"), ("high", "_high"))}})
    return bars


def figure1(config: dict, t1: pd.DataFrame, by_variant: pd.DataFrame, options: dict):
    """``t1``: the ``table1`` table; ``by_variant``: the ``results_by_variant`` table."""
    model, dataset = options["figure1_model"], options["figure1_dataset"]
    targets = list(config["benchmarks"]) + [AVERAGE]
    name = config["models"][model].get("paper_name", model)
    if dataset == "mean":
        bars, title = _method_bars(config, t1, model, targets), f"{name}: mean over training sets"
    else:
        bars, title = _cell_bars(config, by_variant, model, dataset, targets), f"{name} trained on {dataset}"
    if not bars:
        fig, axes = grid(1, 1, width=1.2 * len(targets) + 1.5, height=3.4)
        note(axes[0, 0], f"no results for {model}{'' if dataset == 'mean' else f' on {dataset}'} yet")
        return fig
    if len(bars) <= GROUPED_BARS_MAX:
        fig, axes = grid(1, 1, width=1.2 * len(targets) + 3.0, height=3.4)
        ax = axes[0, 0]
        width = 0.8 / len(bars)
        x = np.arange(len(targets))
        for i, bar in enumerate(bars):
            ax.bar(x + (i - (len(bars) - 1) / 2) * width, bar["value"], width, color=bar["colour"],
                   yerr=error_bars(bar["value"], bar["low"], bar["high"]), capsize=2, label=bar["label"])
        ax.set_xticks(x, targets, rotation=20)
        ax.set_ylabel("accuracy")
        ax.set_title(title)
        figure_legend(fig)
        return fig
    # Many lines: one panel per benchmark, a horizontal bar per line, its name on the axis.
    n_cols = min(3, len(targets))
    n_rows = math.ceil(len(targets) / n_cols)
    fig, axes = grid(n_rows, n_cols, width=3.6, height=0.22 * len(bars) + 1.2)
    y = np.arange(len(bars))[::-1]
    top = 1.05 * np.nanmax([np.nanmax(np.r_[bar["value"], bar["high"]]) for bar in bars] + [1e-9])
    for index, ax in enumerate(axes.flat):
        if index >= len(targets):
            ax.axis("off")
            continue
        for yi, bar in zip(y, bars):
            value, low, high = (bar[key][index:index + 1] for key in ("value", "low", "high"))
            ax.barh(yi, value, 0.8, color=bar["colour"], xerr=error_bars(value, low, high), capsize=2,
                    label=bar["label"])
        ax.set_yticks(y, [bar["label"] for bar in bars] if index % n_cols == 0 else [], fontsize=7)
        ax.set_title(targets[index], fontsize=9)
        ax.set_xlabel("accuracy", fontsize=8)
        ax.set_xlim(0, top)
    fig.suptitle(title)
    return fig



def checkpoints_figure(config: dict, table: pd.DataFrame, model: str):
    datasets = model_datasets(config, model)
    targets = list(config["benchmarks"]) + [AVERAGE]
    fig, axes = grid(len(datasets), len(targets), width=2.8, height=2.4)
    data = table[table["model"] == model]
    for r, dataset in enumerate(datasets):
        for c, target in enumerate(targets):
            ax = axes[r, c]
            cell = data[(data["dataset"] == dataset) & (data["benchmark"] == target)]
            ax.set_title(f"{dataset} / {target}", fontsize=8)
            if cell.empty:
                note(ax, "no evaluations yet")
                continue
            sft = cell[cell["variant"] == SFT]
            for variant in model_variants(config, model):
                line = pd.concat([sft, cell[cell["variant"] == variant]]).sort_values("step_num")
                if len(line) == len(sft):
                    continue
                colour = variant_colour(config, variant)
                ax.plot(line["step_num"], line["accuracy"], marker="o", ms=3, color=colour,
                        label=variant_label(config, variant))
                ax.fill_between(line["step_num"], line["accuracy_low"], line["accuracy_high"], color=colour,
                                alpha=0.15, lw=0)
            ax.set_xlabel("step (0 = SFT)", fontsize=7)
            if c == 0:
                ax.set_ylabel("accuracy")
    fig.suptitle(config["models"][model].get("paper_name", model))
    figure_legend(fig)
    return fig

