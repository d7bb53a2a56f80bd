"""``figure2``: GRPO-λ's trace weights W[t, c] (:func:`grpo_lambda.traces.trace_matrix`, no run needed) for each
style, in the main text's relative form and the absolute form with the run's n."""

from __future__ import annotations

import matplotlib.colors as mcolors
import numpy as np

from grpo_lambda.config import model_variants, rl_settings, TRL_MAX_COMPLETION_LENGTH
from grpo_lambda.config.methods import variant_spec
from grpo_lambda.figures.style import grid
from grpo_lambda.tables.labels import objective
from grpo_lambda.traces import STYLES, trace_matrix
from grpo_lambda.variants import BATCH_MAX, PER_SEQUENCE

# The paper's λ where the config has no GRPO-λ variant; a completion this long (or the trace length n,
# if shorter); the lowest weight on the profiles' log scale.
FIGURE2_LAM = 0.99
FIGURE2_TOKENS = 64
FIGURE2_FLOOR = 1e-4


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
    fig, axes = grid(3, len(STYLES), width=3.3, height=3.0)
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
