"""``horizon``: a horizon study's effect per chain length with its trend, and each arm's accuracy (the
``horizon`` table)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from grpo_lambda.figures.style import (error_bars, GRPO_COLOUR, GRPO_LAMBDA_METHOD_COLOUR, grid, note, per_seed,
                                       SFT_COLOUR)


def horizon_figure(config: dict, horizon: pd.DataFrame):
    """The ``horizon`` table: per pair (a panel each), the simple effect at each horizon against its chain
    length (log scale) with its 95% interval, a dot per seed, and the fitted trend (the table's slope,
    through the effects' mean); each arm's accuracy on a second row, so a ceiling or a floor shows."""
    effects = horizon[horizon["role"] == "effect"] if not horizon.empty else horizon
    pairs = list(dict.fromkeys(effects["pair"])) if not effects.empty else []
    fig, axes = grid(2, max(len(pairs), 1), width=4.2, height=3.0)
    if not pairs:
        note(axes[0, 0], "no horizon study (report.horizon) or no results yet")
        note(axes[1, 0], "")
        return fig
    for c, pair in enumerate(pairs):
        rows = effects[effects["pair"] == pair].sort_values("chain_length")
        ax = axes[0, c]
        x = rows["chain_length"].to_numpy(float)
        ax.axhline(0.0, color="#888888", lw=0.8)
        for xi, text in zip(x, rows["per_seed"]):
            values = per_seed(text)
            jitter = xi * np.exp(np.linspace(-0.04, 0.04, len(values))) if values else []
            ax.scatter(jitter, values, s=9, color="#7f7f7f", alpha=0.7, zorder=2)
        for xi, yi, inside in zip(x, rows["estimate"], rows["in_band"]):
            if str(inside) == "False":  # the design's difficulty band missed: an effect at a floor or ceiling
                ax.annotate("SFT outside\nthe band", (xi, yi), textcoords="offset points", xytext=(-10, 18),
                            fontsize=7, ha="center", color="#555555")
        estimates = rows["estimate"].to_numpy(float)
        ax.errorbar(x, estimates, yerr=error_bars(estimates, rows["estimate_low"].to_numpy(float),
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
            arms.errorbar(x, values, yerr=error_bars(values, rows[f"{column}_low"].to_numpy(float),
                                                  rows[f"{column}_high"].to_numpy(float)),
                          fmt="o-", color=colour, capsize=3, label=label)
        arms.set_xscale("log")
        arms.set_ylim(0, 1)
        arms.set_xlabel("chain length (characters of the worked solution)", fontsize=8)
        arms.set_ylabel("held-out accuracy", fontsize=8)
        arms.legend(fontsize=7)
    return fig
