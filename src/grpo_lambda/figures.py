"""The paper's figures, drawn from the tables the aggregate stage writes (their CSV files), as PNG and
PDF (matplotlib, Agg backend). Each figure draws the numbers of one or two tables and computes
nothing of its own: what it shows is in a table.

``figure1``            per-benchmark accuracy of GRPO and GRPO-λ for one model (report.figure1_model),
                       mean over training sets, with 95% intervals (``table1``)
``figure3``            final training accuracy reward per variant: mean of the last
                       report.final_window logged steps, one dot per seed (``final_reward``)
``figure4``            training reward curves, GRPO vs the best GRPO-λ variant (by ``final_reward``), per
                       model × training set (``training_curves``)
``reward_curves``      training reward curves of every variant (``training_curves``)
``learning_speed``     area under the reward curve and steps to the threshold (``learning_speed``)
``kl``                 KL to the reference model over training (Appendix C), every variant
                       (``training_curves``)
``eval_length``        mean generation length of the final models during evaluation (Appendix E.3),
                       mean over seeds, then over training sets (``results_by_variant``)
``checkpoints_{model}`` accuracy on each benchmark at each evaluated checkpoint, SFT at step 0
                       (``checkpoints``)

Training curves are smoothed with a debiased exponential moving average (TensorBoard's rule) of
weight report.smoothing ("auto": a window of about 2% of the run, see
:func:`grpo_lambda.stats.smoothing_weight`): the paper's figures are smoothed, but its text as
available here does not say how, so the EMA is this pipeline's choice. Each seed is smoothed on its
own; the line is the mean over seeds and the band spans the seeds (min to max); the
``training_curves`` table holds them (:mod:`grpo_lambda.tables.training`). Every variant keeps one
colour in every figure (:func:`variant_colour`). A figure whose data do not exist yet is still
written, with a note saying so, so that a partial run has a complete report.

Beside each figure, ``{name}.json`` holds what it draws, read back from its artists
(:func:`figure_data`): per panel the title, axis labels, notes, and each labelled curve, bar series
and point set with its values. It is a by-product for checks and reuse, not one of the rule's
declared outputs.
"""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.colors as mcolors  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from grpo_lambda.config import model_datasets, model_variants  # noqa: E402
from grpo_lambda.files import atomic_path, write_json  # noqa: E402
from grpo_lambda.tables.keys import AVERAGE, SFT  # noqa: E402
from grpo_lambda.tables.labels import objective, variant_label  # noqa: E402
from grpo_lambda.tables.names import expand, FIGURE_FORMATS, FIGURES  # noqa: E402
from grpo_lambda.tables.options import report_options  # noqa: E402
from matplotlib.collections import PathCollection  # noqa: E402
from matplotlib.container import BarContainer  # noqa: E402

GRPO_COLOUR = "#222222"
SFT_COLOUR = "#9e9e9e"
GRPO_LAMBDA_METHOD_COLOUR = "#d62728"  # Table 1's GRPO-λ row (a mean over variants)
# tab10 without its grey and red (kept for GRPO, SFT and the GRPO-λ method), then tab20's light tones.
_PALETTE = [c for i, c in enumerate(plt.get_cmap("tab10").colors) if i not in (3, 7)] + [
    c for i, c in enumerate(plt.get_cmap("tab20").colors) if i % 2 == 1 and i not in (7, 15)]


def variant_colour(config: dict, variant: str):
    """The colour of a variant (or of ``sft``, or of a Table 1 method) in every figure.

    The first variant with objective ``grpo`` is near-black, SFT grey, Table 1's GRPO-λ method red;
    the other variants take the palette in config order, so adding a variant at the end of the
    config leaves the existing colours unchanged.
    """
    if variant == SFT:
        return SFT_COLOUR
    if variant == "grpo_lambda" and variant not in config["variants"]:
        return GRPO_LAMBDA_METHOD_COLOUR
    if variant not in config["variants"]:
        raise ValueError(f"variant {variant!r} is not in the config (known: {list(config['variants'])})")
    grpo = [v for v, spec in config["variants"].items() if spec["objective"] == "grpo"]
    if grpo and variant == grpo[0]:
        return GRPO_COLOUR
    others = [v for v in config["variants"] if not (grpo and v == grpo[0])]
    return _PALETTE[others.index(variant) % len(_PALETTE)]


# ---- the figures -------------------------------------------------------------------------------

def _note(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=9, color="#555555", wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


def _grid(n_rows: int, n_cols: int, width: float = 3.4, height: float = 2.6):
    n_rows, n_cols = max(n_rows, 1), max(n_cols, 1)
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(width * n_cols, height * n_rows), squeeze=False)
    return fig, axes


def figure1(config: dict, t1: pd.DataFrame, options: dict):
    model = options["figure1_model"]
    rows = t1[(t1["model"] == model) & t1["method"].isin(["grpo", "grpo_lambda"])]
    targets = list(config["benchmarks"]) + [AVERAGE]
    fig, axes = _grid(1, 1, width=1.2 * len(targets) + 1.5, height=3.4)
    ax = axes[0, 0]
    if rows.empty:
        _note(ax, f"no GRPO / GRPO-λ results for {model} yet")
        return fig
    width = 0.8 / len(rows)
    x = np.arange(len(targets))
    # records, not itertuples: benchmark names such as "arith-1" are not attribute names
    for i, row in enumerate(rows.to_dict("records")):
        values = np.array([row[t] for t in targets], dtype=float)
        low = np.array([row[f"{t}_low"] for t in targets], dtype=float)
        high = np.array([row[f"{t}_high"] for t in targets], dtype=float)
        names = row["variants"].split()
        colour = variant_colour(config, names[0]) if len(names) == 1 else GRPO_LAMBDA_METHOD_COLOUR
        errors = np.vstack([values - low, high - values])
        ax.bar(x + (i - (len(rows) - 1) / 2) * width, values, width, color=colour,
               yerr=None if np.isnan(errors).all() else np.nan_to_num(errors), capsize=2,
               label=f"{row['label']} ({row['variants']})" if row["method"] != "grpo" else row["label"])
    ax.set_xticks(x, targets, rotation=20)
    ax.set_ylabel("accuracy (mean over training sets)")
    ax.set_title(f"{config['models'][model].get('paper_name', model)}: GRPO vs GRPO-λ")
    ax.legend(fontsize=7)
    return fig


def figure3(config: dict, final: pd.DataFrame, options: dict):
    """``final``: the ``final_reward`` table."""
    models = list(config["models"])
    fig, axes = _grid(1, len(models), width=4.5, height=3.2)
    for ax, model in zip(axes[0], models):
        data = final[final["model"] == model]
        if data.empty:
            _note(ax, f"{model}: no training logs yet")
            continue
        datasets = model_datasets(config, model)
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
        ax.set_ylabel(f"train reward (last {options['final_window']} steps)")
        ax.set_title(config["models"][model].get("paper_name", model), fontsize=9)
        top = np.nanmax(data["reward"].to_numpy())
        if np.isfinite(top) and top > 0:
            ax.set_ylim(0, 1.4 * top)  # room for the legend above the bars
        ax.legend(fontsize=6, ncol=2, loc="upper left")
    return fig


def _best_lambda(config: dict, final: pd.DataFrame, model: str, dataset: str) -> str | None:
    """The GRPO-λ variant with the highest mean final training reward on this model × dataset."""
    data = final[(final["model"] == model) & (final["dataset"] == dataset)]
    data = data[data["variant"].map(lambda v: objective(config, v) == "grpo_lambda")]
    if data.empty:
        return None
    return data.groupby("variant")["reward"].mean().idxmax()


def _curves(config: dict, curves: pd.DataFrame, metric: str, pick, ylabel: str):
    """A grid of models × training sets; ``pick(model, dataset)`` lists the variants drawn, from the
    ``training_curves`` table."""
    models = list(config["models"])
    n_cols = max(len(model_datasets(config, m)) for m in models)
    fig, axes = _grid(len(models), n_cols)
    for r, model in enumerate(models):
        datasets = model_datasets(config, model)
        for c in range(n_cols):
            ax = axes[r, c]
            if c >= len(datasets):
                ax.axis("off")
                continue
            dataset = datasets[c]
            runs = curves[(curves["model"] == model) & (curves["dataset"] == dataset) & (curves["metric"] == metric)]
            drawn = 0
            for variant in pick(model, dataset):
                curve = runs[runs["variant"] == variant]
                if curve.empty:
                    continue
                colour = variant_colour(config, variant)
                ax.plot(curve["step"], curve["mean"], color=colour, lw=1.2,
                        label=variant_label(config, variant))
                ax.fill_between(curve["step"], curve["low"], curve["high"], color=colour, alpha=0.2, lw=0)
                drawn += 1
            ax.set_title(f"{model} / {dataset}", fontsize=9)
            if not drawn:
                _note(ax, f"no {metric} logged yet")
                continue
            ax.set_xlabel("step")
            ax.set_ylabel(ylabel)
            ax.legend(fontsize=6)
    return fig


def figure4(config: dict, curves: pd.DataFrame, final: pd.DataFrame, options: dict):
    """``curves``: the ``training_curves`` table; ``final``: the ``final_reward`` table."""
    baseline = options["baseline"]

    def pick(model, dataset):
        best = _best_lambda(config, final, model, dataset)
        return [baseline] + ([best] if best else [])
    return _curves(config, curves, "reward", pick, "train reward")


def kl_figure(config: dict, curves: pd.DataFrame):
    def pick(model, dataset):
        return model_variants(config, model)
    return _curves(config, curves, "kl", pick, "KL to reference")


def reward_curves_figure(config: dict, curves: pd.DataFrame):
    """Training reward of every variant (the comparison of all methods), with the seed spread."""
    def pick(model, dataset):
        return model_variants(config, model)
    return _curves(config, curves, "reward", pick, "train reward")


def learning_speed_figure(config: dict, speed: pd.DataFrame):
    """Per model × training set: each variant's area under the training-reward curve and steps to
    the threshold (``learning_speed`` table), mean over seeds with its 95% interval."""
    groups = list(speed.groupby(["model", "dataset"], sort=False)) if not speed.empty else []
    fig, axes = _grid(max(len(groups), 1), 2)
    if not groups:
        for ax in axes[0]:
            _note(ax, "no training logs yet")
        return fig
    for r, ((model, dataset), part) in enumerate(groups):
        y = np.arange(len(part))[::-1]
        colours = [variant_colour(config, v) for v in part["variant"]]
        for ax, stat, xlabel in ((axes[r, 0], "auc", "mean train reward over the run (AUC)"),
                                 (axes[r, 1], "steps_to_threshold",
                                  f"steps to reward {part['threshold'].iloc[0]:.3f}")):
            for yi, colour, (_, row) in zip(y, colours, part.iterrows()):
                ax.errorbar(row[stat], yi, xerr=[[row[stat] - row[f"{stat}_low"]], [row[f"{stat}_high"] - row[stat]]],
                            fmt="o", color=colour, capsize=3)
            ax.set_yticks(y, part["variant"], fontsize=7)
            ax.set_xlabel(xlabel, fontsize=8)
            ax.set_title(f"{model} / {dataset}", fontsize=9)
    return fig


def eval_length_figure(config: dict, by_variant: pd.DataFrame):
    """``by_variant``: the ``results_by_variant`` table (final models, mean over seeds)."""
    final = by_variant[by_variant["benchmark"] != AVERAGE]
    models = list(config["models"])
    benchmarks = list(config["benchmarks"])
    fig, axes = _grid(len(models), 1, width=1.1 * len(benchmarks) + 2.5, height=3.0)
    for ax, model in zip(axes[:, 0], models):
        data = final[final["model"] == model]
        if data.empty:
            _note(ax, f"{model}: no evaluations yet")
            continue
        variants = [v for v in [SFT] + model_variants(config, model) if v in set(data["variant"])]
        width = 0.8 / len(variants)
        for i, variant in enumerate(variants):
            rows = data[data["variant"] == variant]
            # the table's mean over seeds within a training set, then the mean over training sets
            per_bench = rows.groupby("benchmark")["mean_length"].mean()
            ax.bar(np.arange(len(benchmarks)) + (i - (len(variants) - 1) / 2) * width,
                   per_bench.reindex(benchmarks).to_numpy(), width, color=variant_colour(config, variant),
                   label=variant_label(config, variant))
        ax.set_xticks(np.arange(len(benchmarks)), benchmarks)
        ax.set_ylabel("mean completion length (tokens)")
        ax.set_title(config["models"][model].get("paper_name", model), fontsize=9)
        ax.legend(fontsize=6)
    return fig


def checkpoints_figure(config: dict, table: pd.DataFrame, model: str):
    datasets = model_datasets(config, model)
    targets = list(config["benchmarks"]) + [AVERAGE]
    fig, axes = _grid(len(datasets), len(targets), width=2.8, height=2.4)
    data = table[table["model"] == model]
    for r, dataset in enumerate(datasets):
        for c, target in enumerate(targets):
            ax = axes[r, c]
            cell = data[(data["dataset"] == dataset) & (data["benchmark"] == target)]
            ax.set_title(f"{dataset} / {target}", fontsize=8)
            if cell.empty:
                _note(ax, "no evaluations yet")
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
            if r == 0 and c == 0:
                ax.legend(fontsize=6)
    fig.suptitle(config["models"][model].get("paper_name", model))
    return fig


# ---- writing -----------------------------------------------------------------------------------

# Read as text whatever the values look like: names such as "7b" or "2024" are names, not numbers.
_TEXT_COLUMNS = ("model", "dataset", "variant", "benchmark", "method", "variants", "metric")


def read_table(tables_dir: str | os.PathLike, name: str) -> pd.DataFrame:
    """The table ``name`` from the CSV file the aggregate stage wrote into ``tables_dir``."""
    path = Path(tables_dir) / f"{name}.csv"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: the figures are drawn from the tables of "
                                f"`grpo-lambda aggregate`; write them first")
    return pd.read_csv(path, dtype={column: str for column in _TEXT_COLUMNS})


def _numbers(values) -> list:
    """Floats for JSON (NaN and infinities as None)."""
    return [float(v) if np.isfinite(v) else None for v in np.asarray(values, dtype=float).ravel()]


def figure_data(fig) -> dict:
    """What ``fig`` draws, from its artists: per panel its text and its labelled series' values.

    Lines (``kind`` "line": x, y), bar series ("bar": bar centres x, heights y) and scatter points
    ("points": x, y); unlabelled lines (error bars, helpers) are left out.
    """
    panels = []
    for ax in fig.axes:
        series = []
        for line in ax.get_lines():
            if not line.get_label().startswith("_"):
                x, y = line.get_data()
                series.append({"kind": "line", "label": line.get_label(), "colour": mcolors.to_hex(line.get_color()),
                               "x": _numbers(x), "y": _numbers(y)})
        for container in ax.containers:
            if isinstance(container, BarContainer):
                bars = list(container)
                series.append({"kind": "bar", "label": container.get_label(),
                               "colour": mcolors.to_hex(bars[0].get_facecolor()) if bars else None,
                               "x": _numbers([b.get_x() + b.get_width() / 2 for b in bars]),
                               "y": _numbers([b.get_height() for b in bars])})
        for collection in ax.collections:
            if isinstance(collection, PathCollection):
                offsets = np.asarray(collection.get_offsets(), dtype=float).reshape(-1, 2)
                series.append({"kind": "points", "x": _numbers(offsets[:, 0]), "y": _numbers(offsets[:, 1])})
        panels.append({"title": ax.get_title(), "xlabel": ax.get_xlabel(), "ylabel": ax.get_ylabel(),
                       "xticklabels": [t.get_text() for t in ax.get_xticklabels()],
                       "notes": [t.get_text() for t in ax.texts], "series": series})
    return {"suptitle": fig._suptitle.get_text() if fig._suptitle else "", "panels": panels}


def save(fig, out_dir: str | os.PathLike, name: str) -> list[str]:
    """Write ``name``.png and .pdf atomically (temporary name, then rename), and ``name``.json with
    :func:`figure_data`; close the figure. Returns the image paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    paths = []
    for ext in FIGURE_FORMATS:
        path = out_dir / f"{name}.{ext}"
        # No timestamps in the files, so an unchanged figure is byte-identical when rebuilt.
        metadata = {"CreationDate": None} if ext == "pdf" else {"Software": None}
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=ext, dpi=150, metadata=metadata)
        paths.append(str(path))
    write_json(out_dir / f"{name}.json", figure_data(fig))
    plt.close(fig)
    return paths


def main(config: dict, tables_dir: str | os.PathLike, out_dir: str | os.PathLike) -> list[str]:
    """Draw every figure from the tables in ``tables_dir`` (CSV, as the aggregate stage writes them)
    into ``out_dir``; return the paths in :func:`grpo_lambda.tables.names.figure_files` order. Tables
    without rows give figures that say so, never an error."""
    options = report_options(config)
    tables = {}

    def table(name: str) -> pd.DataFrame:
        if name not in tables:
            tables[name] = read_table(tables_dir, name)
        return tables[name]
    # One drawing per entry of names.FIGURES; a {model} entry's drawing takes the model.
    drawings = {
        "figure1": lambda: figure1(config, table("table1"), options),
        "figure3": lambda: figure3(config, table("final_reward"), options),
        "figure4": lambda: figure4(config, table("training_curves"), table("final_reward"), options),
        "reward_curves": lambda: reward_curves_figure(config, table("training_curves")),
        "learning_speed": lambda: learning_speed_figure(config, table("learning_speed")),
        "kl": lambda: kl_figure(config, table("training_curves")),
        "eval_length": lambda: eval_length_figure(config, table("results_by_variant")),
        "checkpoints_{model}": lambda model: checkpoints_figure(config, table("checkpoints"), model),
    }
    paths = []
    for name, template, fields in expand(FIGURES, config):
        paths += save(drawings[template](**fields), out_dir, name)
    return paths
