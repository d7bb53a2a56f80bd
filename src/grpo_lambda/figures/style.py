"""What every figure shares: matplotlib's Agg backend (chosen here, before pyplot is imported), one colour
per variant in every figure, the panel grid, a note in an empty panel and one legend per figure."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
import numpy as np  # noqa: E402

from grpo_lambda.tables.keys import SFT  # noqa: E402

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


def method_colour(config: dict, method: str, variants: list[str]):
    """A Table 1 row's colour: its variant's when it has one, the GRPO-λ method's red for a GRPO-λ
    mean over several, else its first variant's."""
    if method == SFT:
        return SFT_COLOUR
    if len(variants) > 1 and method == "grpo_lambda":
        return GRPO_LAMBDA_METHOD_COLOUR
    return variant_colour(config, variants[0])


def note(ax, text: str) -> None:
    """``text`` in the middle of an empty panel (data not there yet, or a figure this config has none of)."""
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=9, color="#555555", wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


def grid(n_rows: int, n_cols: int, width: float = 3.4, height: float = 2.6):
    """A grid of panels, laid out by matplotlib's constrained layout (room for a legend outside)."""
    n_rows, n_cols = max(n_rows, 1), max(n_cols, 1)
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(width * n_cols, height * n_rows), squeeze=False,
                             layout="constrained")
    return fig, axes


def close(fig) -> None:
    """Let pyplot forget a written figure (it keeps every figure it made until then)."""
    plt.close(fig)


def figure_legend(fig) -> None:
    """One legend for the whole figure, right of its panels, naming each label once (first drawn first)."""
    handles: dict = {}
    for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="outside right upper", fontsize=7)
        # widen the figure by about the legend's width, so the panels keep theirs
        fig.set_figwidth(fig.get_figwidth() + 0.8 + 0.06 * max(len(label) for label in handles))


def chunks(items: list, size: int) -> list[list]:
    """``items`` in order, split into the fewest groups of at most ``size``, as even as possible."""
    if not items:
        return [[]]
    count = math.ceil(len(items) / size)
    return [list(part) for part in np.array_split(np.array(items, dtype=object), count)]


def error_bars(value: np.ndarray, low: np.ndarray, high: np.ndarray):
    """matplotlib's ``yerr``/``xerr`` for an interval [low, high] around each value (None when there is none)."""
    errors = np.vstack([value - low, high - value])
    return None if np.isnan(errors).all() else np.nan_to_num(errors)


def per_seed(text) -> list[float]:
    """The values of a table's "seed:value ..." per-seed column (grpo_lambda.tables.verdicts.per_seed_text)."""
    if not isinstance(text, str) or not text.strip():
        return []
    return [float(pair.split(":")[1]) for pair in text.split()]
