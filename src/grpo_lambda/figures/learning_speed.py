"""``learning_speed``: per variant, the mean training reward over the run (AUC) and the steps to the
threshold, each with its 95% interval over seeds and a dot per seed (the ``learning_speed`` table)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from grpo_lambda.figures.style import grid, note, per_seed, variant_colour
from grpo_lambda.tables.labels import variant_label


def learning_speed_figure(config: dict, speed: pd.DataFrame):
    """Per model × training set: each variant's area under the training-reward curve and steps to
    the threshold (``learning_speed`` table), mean over seeds with its 95% interval."""
    groups = list(speed.groupby(["model", "dataset"], sort=False)) if not speed.empty else []
    fig, axes = grid(max(len(groups), 1), 2, height=max(2.6, 0.25 * speed["variant"].nunique() + 1.0))
    if not groups:
        for ax in axes[0]:
            note(ax, "no training logs yet")
        return fig
    labels = {v: variant_label(config, v) for v in speed["variant"].unique()}
    fig.set_figwidth(fig.get_figwidth() + 0.06 * max(len(label) for label in labels.values()))  # room for the names
    for r, ((model, dataset), part) in enumerate(groups):
        y = np.arange(len(part))[::-1]
        colours = [variant_colour(config, v) for v in part["variant"]]
        for ax, stat, xlabel in ((axes[r, 0], "auc", "mean train reward over the run (AUC)"),
                                 (axes[r, 1], "steps_to_threshold",
                                  f"steps to reward {part['threshold'].iloc[0]:.3f}")):
            for yi, colour, (_, row) in zip(y, colours, part.iterrows()):
                ax.errorbar(row[stat], yi, xerr=[[row[stat] - row[f"{stat}_low"]], [row[f"{stat}_high"] - row[stat]]],
                            fmt="o", color=colour, capsize=3)
                seeds = per_seed(row.get(f"{stat}_per_seed"))
                if seeds:  # a dot per seed beside the seed-level interval: skew or a collapsed seed shows
                    ax.scatter(seeds, [yi - 0.2] * len(seeds), s=8, color=colour, alpha=0.6, linewidths=0)
            ax.set_yticks(y, [labels[v] for v in part["variant"]] if ax is axes[r, 0] else [], fontsize=7)
            ax.set_xlabel(xlabel, fontsize=8)
            ax.set_title(f"{model} / {dataset}", fontsize=9)
    return fig
