"""The paper's figures, drawn from the tables the aggregate stage writes (their CSV files), as PNG and
PDF (matplotlib, Agg backend). Each figure draws the numbers of one or two tables and computes
nothing of its own: what it shows is in a table (Figure 2 excepted: it draws the trace weights of
:func:`grpo_lambda.traces.trace_matrix`, which need no run).

``figure1``            accuracy per benchmark of the SFT model and every variant of one cell: the
                       model report.figure1_model trained on report.figure1_dataset (the paper's
                       Figure 1 is DeepSeek-R1-Distill-Qwen-7B on MathRL-16K), with 95% intervals
                       (``results_by_variant``); with figure1_dataset "mean", Table 1's methods, mean
                       over training sets (``table1``). Up to ``GROUPED_BARS_MAX`` bars side by side per
                       benchmark, more as one panel per benchmark with a bar per line
``figure2``            the trace styles (recent, both, early) in both forms (relative: Eq. 1–2;
                       absolute with the run's n), as heatmaps of W[t, c] and the last token's weights
``figure3``            final training accuracy reward per variant: mean of the last
                       report.figure3_window logged steps (the paper's caption: 20), one dot per seed
                       (``figure3_reward``); with report.figure3_paper_cells the caption's cells only
                       (the 1.5B models on ORZMath57K)
``appendix_d``         the same for those models' other training sets (the paper's Appendix D)
``figure4``            training reward curves, GRPO vs the GRPO-λ variant of report.figure4_variant
                       (λ 0.99, recent ε-trace; or the best by ``final_reward``), per model × training
                       set of report.figure4_datasets (the paper leaves GSM8K out) (``training_curves``)
``reward_curves``      training reward curves of every variant (``training_curves``)
``learning_speed``     area under the reward curve and steps to the threshold (``learning_speed``)
``kl``                 KL to the reference model over training, every variant (``training_curves``)
``appendix_c_{model}`` Appendix C: training reward and KL of the model's GRPO-λ variants beside the
                       baseline, one column per λ and metric, one row per training set
                       (``training_curves``)
``eval_length``        mean generation length of the final models during evaluation (Appendix E.3),
                       mean over seeds, then over training sets (``results_by_variant``); with
                       report.eval_length_pooled GRPO-λ's variants as one bar, as the paper
``checkpoints_{model}`` accuracy on each benchmark at each evaluated checkpoint, SFT at step 0
                       (``checkpoints``)

Training curves are smoothed with a debiased exponential moving average (TensorBoard's rule) of
weight report.smoothing ("auto": a window of about 2% of the run, see
:func:`grpo_lambda.stats.smoothing_weight`): the paper's figures are smoothed, but its text as
available here does not say how, so the EMA is this pipeline's choice. Each seed is smoothed on its
own; the line is the mean over seeds and the band spans the seeds (min to max); the
``training_curves`` table holds them (:mod:`grpo_lambda.tables.training`). A panel of curves holds
the baseline and at most ``CURVES_PER_PANEL`` other variants; more make small multiples, the
baseline in each. Every variant keeps one colour (:func:`variant_colour`) and one name
(:func:`grpo_lambda.tables.labels.variant_label`, as in the tables) in every figure, and a figure's
legend sits outside its panels and names each line once. A figure whose data do not exist yet is
still written, with a note saying so, so that a partial run has a complete report.

Beside each figure, ``{name}.json`` holds what it draws, read back from its artists
(:func:`figure_data`): per panel the title, axis labels, notes, and each labelled curve, bar series,
point set and image with its values, and the legend entries. It is a by-product for checks and
reuse, not one of the rule's declared outputs.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.colors as mcolors  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from grpo_lambda.config import model_datasets, model_variants, rl_settings, TRL_MAX_COMPLETION_LENGTH  # noqa: E402
from grpo_lambda.files import atomic_path, write_text  # noqa: E402
from grpo_lambda.tables.dataset_gain import chosen_variant  # noqa: E402
from grpo_lambda.tables.keys import AVERAGE, SFT  # noqa: E402
from grpo_lambda.tables.labels import method_label, objective, variant_label, variant_spec  # noqa: E402
from grpo_lambda.tables.names import expand, FIGURE_FORMATS, FIGURES  # noqa: E402
from grpo_lambda.config.report import report_options  # noqa: E402
from grpo_lambda.traces import STYLES, trace_matrix  # noqa: E402
from grpo_lambda.variants import BATCH_MAX, PER_SEQUENCE  # noqa: E402
from matplotlib.collections import PathCollection  # noqa: E402
from matplotlib.container import BarContainer  # noqa: E402

GRPO_COLOUR = "#222222"
SFT_COLOUR = "#9e9e9e"
GRPO_LAMBDA_METHOD_COLOUR = "#d62728"  # Table 1's GRPO-λ row (a mean over variants)
# tab10 without its grey and red (kept for GRPO, SFT and the GRPO-λ method), then tab20's light tones.
_PALETTE = [c for i, c in enumerate(plt.get_cmap("tab10").colors) if i not in (3, 7)] + [
    c for i, c in enumerate(plt.get_cmap("tab20").colors) if i % 2 == 1 and i not in (7, 15)]

GROUPED_BARS_MAX = 4   # Figure 1: bars side by side per benchmark up to this many lines, else a panel each
CURVES_PER_PANEL = 5   # variants besides the baseline in one panel of curves; more make small multiples
# Figure 2: the paper's λ where the config has no GRPO-λ variant; a completion this long (or the
# trace length n, if shorter); the lowest weight on the profiles' log scale.
FIGURE2_LAM = 0.99
FIGURE2_TOKENS = 64
FIGURE2_FLOOR = 1e-4
IMAGE_DIGITS = 6  # significant digits of an image's values in figure_data (a 64 × 64 image is 4,096 numbers)


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


def _method_colour(config: dict, method: str, variants: list[str]):
    """A Table 1 row's colour: its variant's when it has one, the GRPO-λ method's red for a GRPO-λ
    mean over several, else its first variant's."""
    if method == SFT:
        return SFT_COLOUR
    if len(variants) > 1 and method == "grpo_lambda":
        return GRPO_LAMBDA_METHOD_COLOUR
    return variant_colour(config, variants[0])


# ---- layout ------------------------------------------------------------------------------------

def _note(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=9, color="#555555", wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


def _grid(n_rows: int, n_cols: int, width: float = 3.4, height: float = 2.6):
    """A grid of panels, laid out by matplotlib's constrained layout (room for a legend outside)."""
    n_rows, n_cols = max(n_rows, 1), max(n_cols, 1)
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(width * n_cols, height * n_rows), squeeze=False,
                             layout="constrained")
    return fig, axes


def _figure_legend(fig) -> None:
    """One legend for the whole figure, right of its panels, naming each label once (first drawn first)."""
    handles: dict = {}
    for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="outside right upper", fontsize=7)
        # widen the figure by about the legend's width, so the panels keep theirs
        fig.set_figwidth(fig.get_figwidth() + 0.8 + 0.06 * max(len(label) for label in handles))


def _chunks(items: list, size: int) -> list[list]:
    """``items`` in order, split into the fewest groups of at most ``size``, as even as possible."""
    if not items:
        return [[]]
    count = math.ceil(len(items) / size)
    return [list(part) for part in np.array_split(np.array(items, dtype=object), count)]


# ---- Figure 1 ----------------------------------------------------------------------------------

def _errors(value: np.ndarray, low: np.ndarray, high: np.ndarray):
    errors = np.vstack([value - low, high - value])
    return None if np.isnan(errors).all() else np.nan_to_num(errors)


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
                     "colour": _method_colour(config, row["method"], row["variants"].split()),
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
        fig, axes = _grid(1, 1, width=1.2 * len(targets) + 1.5, height=3.4)
        _note(axes[0, 0], f"no results for {model}{'' if dataset == 'mean' else f' on {dataset}'} yet")
        return fig
    if len(bars) <= GROUPED_BARS_MAX:
        fig, axes = _grid(1, 1, width=1.2 * len(targets) + 3.0, height=3.4)
        ax = axes[0, 0]
        width = 0.8 / len(bars)
        x = np.arange(len(targets))
        for i, bar in enumerate(bars):
            ax.bar(x + (i - (len(bars) - 1) / 2) * width, bar["value"], width, color=bar["colour"],
                   yerr=_errors(bar["value"], bar["low"], bar["high"]), capsize=2, label=bar["label"])
        ax.set_xticks(x, targets, rotation=20)
        ax.set_ylabel("accuracy")
        ax.set_title(title)
        _figure_legend(fig)
        return fig
    # Many lines: one panel per benchmark, a horizontal bar per line, its name on the axis.
    n_cols = min(3, len(targets))
    n_rows = math.ceil(len(targets) / n_cols)
    fig, axes = _grid(n_rows, n_cols, width=3.6, height=0.22 * len(bars) + 1.2)
    y = np.arange(len(bars))[::-1]
    top = 1.05 * np.nanmax([np.nanmax(np.r_[bar["value"], bar["high"]]) for bar in bars] + [1e-9])
    for index, ax in enumerate(axes.flat):
        if index >= len(targets):
            ax.axis("off")
            continue
        for yi, bar in zip(y, bars):
            value, low, high = (bar[key][index:index + 1] for key in ("value", "low", "high"))
            ax.barh(yi, value, 0.8, color=bar["colour"], xerr=_errors(value, low, high), capsize=2,
                    label=bar["label"])
        ax.set_yticks(y, [bar["label"] for bar in bars] if index % n_cols == 0 else [], fontsize=7)
        ax.set_title(targets[index], fontsize=9)
        ax.set_xlabel("accuracy", fontsize=8)
        ax.set_xlim(0, top)
    fig.suptitle(title)
    return fig


# ---- Figure 2 ----------------------------------------------------------------------------------

def trace_settings(config: dict, options: dict) -> tuple[float, int, int]:
    """(λ, n, tokens) that Figure 2 draws: the largest λ below 1 of Figure 1's model's GRPO-λ variants
    (else FIGURE2_LAM), the absolute form's n of that model's runs (``rl.trl.trace_length``, else
    ``rl.max_completion_length``, the trainer's default), and a completion of FIGURE2_TOKENS tokens (n
    if shorter). With ``trace_length: batch_max`` n is each batch's longest completion, which no config
    fixes: the figure draws its bound, ``rl.max_completion_length`` (a batch with one completion at full
    length), where the absolute form leaves a short completion the least credit."""
    model = options["figure1_model"]
    lams = [variant_spec(config, v)["lam"] for v in model_variants(config, model)
            if objective(config, v) == "grpo_lambda" and 0 < variant_spec(config, v)["lam"] < 1]
    rl = rl_settings(config, model)
    trace_length = rl["trl"].get("trace_length")
    if trace_length is None or trace_length in (BATCH_MAX, PER_SEQUENCE):  # no fixed n: its bound
        trace_length = rl.get("max_completion_length", TRL_MAX_COMPLETION_LENGTH)
    n = int(trace_length)
    return (max(lams) if lams else FIGURE2_LAM), n, min(FIGURE2_TOKENS, n)


def figure2(config: dict, options: dict):
    """The trace weights W[t, c] of ``trace_matrix`` for each style, relative and absolute form side by
    side (rows), and below them the weights the last token gives each earlier one (log scale; its
    legend gives their sum, the off-diagonal credit)."""
    lam, n, tokens = trace_settings(config, options)
    fig, axes = _grid(3, len(STYLES), width=3.3, height=3.0)
    forms = (("relative", None, "relative (Eq. 1–2)"), ("absolute", n, f"absolute, n = {n}"))
    # A linear scale: the styles differ between 0.5 and 1 at λ = 0.99; the profiles below are logarithmic.
    norm = mcolors.Normalize(vmin=0.0, vmax=1.0)
    image = None
    for c, style in enumerate(STYLES):
        profile_ax = axes[2, c]
        for r, (form, length, name) in enumerate(forms):
            weights = trace_matrix(tokens, lam, style=style, form=form, length=length).numpy()
            shown = np.where(np.tril(np.ones_like(weights, dtype=bool)), weights, np.nan)
            image = axes[r, c].imshow(shown, norm=norm, cmap="viridis", interpolation="nearest")
            axes[r, c].set_title(f"{style}, {name}", fontsize=9)
            axes[r, c].set_xlabel("earlier token c", fontsize=8)
            axes[r, c].set_ylabel("token t", fontsize=8)
            last = weights[-1, :-1]
            profile_ax.plot(np.arange(tokens - 1), last, lw=1.4, ls="-" if form == "relative" else "--",
                            label=f"{name}: Σ {last.sum():.1f}")
        profile_ax.set_yscale("log")
        profile_ax.set_ylim(FIGURE2_FLOOR / 10, 2.0)
        profile_ax.set_title(f"{style}: the last token's weights", fontsize=9)
        profile_ax.set_xlabel("earlier token c", fontsize=8)
        profile_ax.set_ylabel(f"W[{tokens - 1}, c]", fontsize=8)
        profile_ax.legend(fontsize=7)
    fig.colorbar(image, ax=axes[:2, :].ravel().tolist(), label="W[t, c]", shrink=0.8)
    fig.suptitle(f"Trace weights of a {tokens}-token completion, λ = {lam:g}, γ = 1, ε = 0")
    return fig


# ---- Figure 3 ----------------------------------------------------------------------------------

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
        fig, axes = _grid(1, 1)
        _note(axes[0, 0], "report.figure3_paper_cells is off: figure3 draws every cell" if appendix_d
                          else "no 1.5B model trained on ORZMath57K in this config")
        return fig
    most_bars = max(len(datasets) * len(model_variants(config, m)) for m, datasets in cells)
    fig, axes = _grid(1, len(cells), width=max(4.5, 0.2 * most_bars + 1.5), height=3.2)
    for ax, (model, datasets) in zip(axes[0], cells):
        data = final[final["model"] == model]
        if data.empty:
            _note(ax, f"{model}: no training logs yet")
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
    _figure_legend(fig)
    return fig


# ---- training curves ---------------------------------------------------------------------------

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
    fig, axes = _grid(len(rows), n_cols)
    if not rows:
        _note(axes[0, 0], "no training sets to draw")
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
                _note(ax, f"no {panel['metric']} logged yet")
                continue
            ax.set_xlabel("step")
            ax.set_ylabel(METRIC_LABELS[panel["metric"]])
        _share_y([(ax, panel) for ax, panel in zip(axes[r], row) if ax.get_lines()])
    if suptitle:
        fig.suptitle(suptitle)
    _figure_legend(fig)
    return fig


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
        groups = _chunks([v for v in variants if v not in first], CURVES_PER_PANEL)
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
        fig, axes = _grid(1, 1)
        _note(axes[0, 0], f"{model} has no GRPO-λ variant")
        return fig
    rows = [[_panel(model, dataset, metric, first + [v for v in lam_variants if variant_spec(config, v)["lam"] == lam],
                    f"{dataset}: {METRIC_LABELS[metric]}, λ = {lam:g}")
             for metric in ("reward", "kl") for lam in lams]
            for dataset in model_datasets(config, model)]
    return _curves(config, curves, rows, f"{config['models'][model].get('paper_name', model)}: GRPO-λ by λ")


# ---- the other figures -------------------------------------------------------------------------

def learning_speed_figure(config: dict, speed: pd.DataFrame):
    """Per model × training set: each variant's area under the training-reward curve and steps to
    the threshold (``learning_speed`` table), mean over seeds with its 95% interval."""
    groups = list(speed.groupby(["model", "dataset"], sort=False)) if not speed.empty else []
    fig, axes = _grid(max(len(groups), 1), 2, height=max(2.6, 0.25 * speed["variant"].nunique() + 1.0))
    if not groups:
        for ax in axes[0]:
            _note(ax, "no training logs yet")
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
                seeds = _per_seed(row.get(f"{stat}_per_seed"))
                if seeds:  # a dot per seed beside the seed-level interval: skew or a collapsed seed shows
                    ax.scatter(seeds, [yi - 0.2] * len(seeds), s=8, color=colour, alpha=0.6, linewidths=0)
            ax.set_yticks(y, [labels[v] for v in part["variant"]] if ax is axes[r, 0] else [], fontsize=7)
            ax.set_xlabel(xlabel, fontsize=8)
            ax.set_title(f"{model} / {dataset}", fontsize=9)
    return fig


def _per_seed(text) -> list[float]:
    """The values of a table's "seed:value ..." per-seed column (grpo_lambda.tables.verdicts.per_seed_text)."""
    if not isinstance(text, str) or not text.strip():
        return []
    return [float(pair.split(":")[1]) for pair in text.split()]


POOLED = "grpo_lambda_pooled"


def eval_length_figure(config: dict, by_variant: pd.DataFrame, options: dict | None = None):
    """``by_variant``: the ``results_by_variant`` table (final models, mean over seeds). With
    report.eval_length_pooled, GRPO-λ's variants make one bar, their mean (Appendix E.3: "GRPO-λ shows the
    average length across hyperparameter settings"), beside SFT and the other variants."""
    pooled = bool(options and options["eval_length_pooled"])
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
                   color=_method_colour(config, "grpo_lambda", lam) if bar == POOLED else variant_colour(config, bar),
                   label=method_label(config, "grpo_lambda", lam) if bar == POOLED else variant_label(config, bar))
        ax.set_xticks(np.arange(len(benchmarks)), benchmarks)
        ax.set_ylabel("mean completion length (tokens)")
        ax.set_title(config["models"][model].get("paper_name", model), fontsize=9)
    _figure_legend(fig)
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
    fig.suptitle(config["models"][model].get("paper_name", model))
    _figure_legend(fig)
    return fig


# ---- writing -----------------------------------------------------------------------------------

# Read as text whatever the values look like: names such as "7b" or "2024" are names, not numbers.
_TEXT_COLUMNS = ("model", "dataset", "variant", "benchmark", "method", "variants", "metric")


def horizon_figure(config: dict, horizon: pd.DataFrame):
    """The ``horizon`` table: per pair (a panel each), the simple effect at each horizon against its chain
    length (log scale) with its 95% interval, a dot per seed, and the fitted trend (the table's slope,
    through the effects' mean); each arm's accuracy on a second row, so a ceiling or a floor shows."""
    effects = horizon[horizon["role"] == "effect"] if not horizon.empty else horizon
    pairs = list(dict.fromkeys(effects["pair"])) if not effects.empty else []
    fig, axes = _grid(2, max(len(pairs), 1), width=4.2, height=3.0)
    if not pairs:
        _note(axes[0, 0], "no horizon study (report.horizon) or no results yet")
        _note(axes[1, 0], "")
        return fig
    for c, pair in enumerate(pairs):
        rows = effects[effects["pair"] == pair].sort_values("chain_length")
        ax = axes[0, c]
        x = rows["chain_length"].to_numpy(float)
        ax.axhline(0.0, color="#888888", lw=0.8)
        for xi, text in zip(x, rows["per_seed"]):
            values = _per_seed(text)
            jitter = xi * np.exp(np.linspace(-0.04, 0.04, len(values))) if values else []
            ax.scatter(jitter, values, s=9, color="#7f7f7f", alpha=0.7, zorder=2)
        for xi, yi, inside in zip(x, rows["estimate"], rows["in_band"]):
            if str(inside) == "False":  # the design's difficulty band missed: an effect at a floor or ceiling
                ax.annotate("SFT outside\nthe band", (xi, yi), textcoords="offset points", xytext=(-10, 18),
                            fontsize=7, ha="center", color="#555555")
        estimates = rows["estimate"].to_numpy(float)
        ax.errorbar(x, estimates, yerr=_errors(estimates, rows["estimate_low"].to_numpy(float),
                                               rows["estimate_high"].to_numpy(float)),
                    fmt="o", color=GRPO_LAMBDA_METHOD_COLOUR, capsize=3, zorder=3, label="effect, 95% CI")
        trend = horizon[(horizon["role"] == "trend") & (horizon["pair"] == pair)]
        if len(trend) and np.isfinite(trend["estimate"].iloc[0]) and np.isfinite(rows["estimate"]).all():
            slope = float(trend["estimate"].iloc[0])
            logs = np.log(x)
            centre = float(np.mean(rows["estimate"])) - slope * float(np.mean(logs))
            ax.plot(x, centre + slope * logs, "--", color=GRPO_LAMBDA_METHOD_COLOUR, lw=1,
                    label=f"slope {slope:+.3f} [{trend['estimate_low'].iloc[0]:+.3f}, "
                          f"{trend['estimate_high'].iloc[0]:+.3f}]")
        ax.set_xscale("log")
        ax.set_title(pair, fontsize=9)
        ax.set_ylabel("accuracy, treatment − baseline", fontsize=8)
        ax.legend(fontsize=7)
        arms = axes[1, c]
        for column, label, colour in (("sft_accuracy", "SFT", SFT_COLOUR),
                                      ("baseline_accuracy", "baseline", GRPO_COLOUR),
                                      ("treatment_accuracy", "treatment", GRPO_LAMBDA_METHOD_COLOUR)):
            values = rows[column].to_numpy(float)
            arms.errorbar(x, values, yerr=_errors(values, rows[f"{column}_low"].to_numpy(float),
                                                  rows[f"{column}_high"].to_numpy(float)),
                          fmt="o-", color=colour, capsize=3, label=label)
        arms.set_xscale("log")
        arms.set_ylim(0, 1)
        arms.set_xlabel("chain length (characters of the worked solution)", fontsize=8)
        arms.set_ylabel("held-out accuracy", fontsize=8)
        arms.legend(fontsize=7)
    return fig


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


def _bar_series(container: BarContainer) -> dict:
    """A labelled bar series: bar centres ``x`` and values ``y`` (for horizontal bars, the centres on
    the vertical axis and the bar lengths)."""
    bars = list(container)
    horizontal = getattr(container, "orientation", "vertical") == "horizontal"
    centres = [b.get_y() + b.get_height() / 2 if horizontal else b.get_x() + b.get_width() / 2 for b in bars]
    values = [b.get_width() if horizontal else b.get_height() for b in bars]
    return {"kind": "bar", "label": container.get_label(), "orientation": "horizontal" if horizontal else "vertical",
            "colour": mcolors.to_hex(bars[0].get_facecolor()) if bars else None,
            "x": _numbers(centres), "y": _numbers(values)}


def _legend_texts(legend) -> list[str]:
    return [text.get_text() for text in legend.get_texts()] if legend is not None else []


def figure_data(fig) -> dict:
    """What ``fig`` draws, from its artists: per panel its text and its labelled series' values.

    Lines (``kind`` "line": x, y), bar series ("bar": bar centres x, values y), scatter points
    ("points": x, y) and images ("image": rows of values, None where blank); unlabelled lines (error
    bars, helpers) are left out. ``legend``: the entries of the figure's own legends; a panel's
    ``legend``, those of its legend.
    """
    panels = []
    for ax in fig.axes:
        if ax.get_label() == "<colorbar>":
            continue
        series = []
        for line in ax.get_lines():
            if not line.get_label().startswith("_"):
                x, y = line.get_data()
                series.append({"kind": "line", "label": line.get_label(), "colour": mcolors.to_hex(line.get_color()),
                               "x": _numbers(x), "y": _numbers(y)})
        series += [_bar_series(container) for container in ax.containers if isinstance(container, BarContainer)]
        for collection in ax.collections:
            if isinstance(collection, PathCollection):
                offsets = np.asarray(collection.get_offsets(), dtype=float).reshape(-1, 2)
                series.append({"kind": "points", "x": _numbers(offsets[:, 0]), "y": _numbers(offsets[:, 1])})
        for image in ax.get_images():
            values = np.ma.filled(np.ma.asarray(image.get_array(), dtype=float), np.nan)
            rounded = [[None if v is None else float(f"{v:.{IMAGE_DIGITS}g}") for v in _numbers(row)] for row in values]
            series.append({"kind": "image", "values": rounded})
        panels.append({"title": ax.get_title(), "xlabel": ax.get_xlabel(), "ylabel": ax.get_ylabel(),
                       "ylim": _numbers(ax.get_ylim()),
                       "xticklabels": [t.get_text() for t in ax.get_xticklabels()],
                       "yticklabels": [t.get_text() for t in ax.get_yticklabels()],
                       "notes": [t.get_text() for t in ax.texts], "legend": _legend_texts(ax.get_legend()),
                       "series": series})
    return {"suptitle": fig._suptitle.get_text() if fig._suptitle else "", "panels": panels,
            "legend": [text for legend in fig.legends for text in _legend_texts(legend)]}


def save(fig, out_dir: str | os.PathLike, name: str) -> list[str]:
    """Write ``name``.png and .pdf atomically (temporary name, then rename), and ``name``.json with
    :func:`figure_data`; close the figure. Returns the image paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext in FIGURE_FORMATS:
        path = out_dir / f"{name}.{ext}"
        # No timestamps in the files, so an unchanged figure is byte-identical when rebuilt.
        metadata = {"CreationDate": None} if ext == "pdf" else {"Software": None}
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=ext, dpi=150, metadata=metadata)
        paths.append(str(path))
        # The first drawing placed the panels; the other formats keep them (layout is the costly part).
        fig.set_layout_engine("none")
    # One line: Figure 2's images are thousands of numbers, one per line when indented.
    write_text(out_dir / f"{name}.json", json.dumps(figure_data(fig), ensure_ascii=False) + "\n")
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
        "figure1": lambda: figure1(config, table("table1"), table("results_by_variant"), options),
        "figure2": lambda: figure2(config, options),
        "figure3": lambda: figure3(config, table("figure3_reward"), options),
        "appendix_d": lambda: figure3(config, table("figure3_reward"), options, appendix_d=True),
        "figure4": lambda: figure4(config, table("training_curves"), table("final_reward"), options),
        "reward_curves": lambda: reward_curves_figure(config, table("training_curves"), options),
        "learning_speed": lambda: learning_speed_figure(config, table("learning_speed")),
        "kl": lambda: kl_figure(config, table("training_curves"), options),
        "appendix_c_{model}": lambda model: appendix_c_figure(config, table("training_curves"), options, model),
        "eval_length": lambda: eval_length_figure(config, table("results_by_variant"), options),
        "checkpoints_{model}": lambda model: checkpoints_figure(config, table("checkpoints"), model),
        "horizon": lambda: horizon_figure(config, table("horizon")),
    }
    paths = []
    for name, template, fields in expand(FIGURES, config):
        paths += save(drawings[template](**fields), out_dir, name)
    return paths
