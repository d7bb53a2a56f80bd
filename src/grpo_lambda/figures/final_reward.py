"""``figure3`` and ``appendix_d``: the final training reward per variant and training set, a bar per
variant (the mean over seeds) and a dot per seed (the ``figure3_reward`` table)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from grpo_lambda.config import model_datasets, model_variants
from grpo_lambda.figures.style import figure_legend, grid, note, variant_colour
from grpo_lambda.tables.labels import variant_label

# The caption's cells of the paper's Figure 3: "both 1.5B models trained on the ORZMath57K dataset".
FIGURE3_PAPER_MODELS = ("Qwen2.5-Math-1.5B-Instruct", "DeepSeek-R1-Distill-Qwen-1.5B")
FIGURE3_PAPER_DATASET = "orz57k"


def _figure3_cells(config: dict, options: dict, appendix_d: bool) -> list[tuple[str, list[str]]]:
    """(model, training sets) of Figure 3, or with ``appendix_d`` of Appendix D (the same models' other
    training sets). With report.figure3_paper_cells off, Figure 3 has every cell and Appendix D none."""
    if not options["figure3_paper_cells"]:
        return [] if appendix_d else [(m, model_datasets(config, m)) for m in config["models"]]
    cells = []
    for model in config["models"]:
        if config["models"][model].get("paper_name") not in FIGURE3_PAPER_MODELS:
            continue
        paper = [d for d in model_datasets(config, model)
                 if config["datasets"][d].get("name", d) == FIGURE3_PAPER_DATASET]
        chosen = [d for d in model_datasets(config, model) if (d in paper) != appendix_d]
        if chosen:
            cells.append((model, chosen))
    return cells


def figure3(config: dict, final: pd.DataFrame, options: dict, appendix_d: bool = False):
    """``final``: the ``figure3_reward`` table (the mean of each run's last report.figure3_window logged steps;
    the paper's caption: "smoothened over the last 20 training iterations"). With report.figure3_paper_cells,
    the caption's cells (the 1.5B models on ORZMath57K); ``appendix_d`` draws their other training sets."""
    cells = _figure3_cells(config, options, appendix_d)
    if not cells:
        fig, axes = grid(1, 1)
        note(axes[0, 0], "report.figure3_paper_cells is off: figure3 draws every cell" if appendix_d
                          else "no 1.5B model trained on ORZMath57K in this config")
        return fig
    most_bars = max(len(datasets) * len(model_variants(config, m)) for m, datasets in cells)
    fig, axes = grid(1, len(cells), width=max(4.5, 0.2 * most_bars + 1.5), height=3.2)
    for ax, (model, datasets) in zip(axes[0], cells):
        data = final[final["model"] == model]
        if data.empty:
            note(ax, f"{model}: no training logs yet")
            continue
        variants = [v for v in model_variants(config, model) if v in set(data["variant"])]
        width = 0.8 / len(variants)
        for i, variant in enumerate(variants):
            offset = (i - (len(variants) - 1) / 2) * width
            runs = data[data["variant"] == variant]
            means = [runs[runs["dataset"] == d]["reward"].mean() for d in datasets]
            ax.bar(np.arange(len(datasets)) + offset, means, width, color=variant_colour(config, variant),
                   label=variant_label(config, variant))
            for j, dataset in enumerate(datasets):
                seeds = runs[runs["dataset"] == dataset]["reward"]
                ax.scatter(np.full(len(seeds), j + offset), seeds, s=8, color="black", zorder=3)
        ax.set_xticks(np.arange(len(datasets)), datasets)
        ax.set_ylabel(f"train reward (last {options['figure3_window']} steps)")
        ax.set_title(config["models"][model].get("paper_name", model), fontsize=9)
    figure_legend(fig)
    return fig
