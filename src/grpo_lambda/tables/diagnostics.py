"""The ``diagnostics`` table: what each method's update did while it trained, from the train logs.

Per model × training set × variant, for each column of ``DIAGNOSTICS`` (``train_log.csv``,
docs/results-format.md): each seed's mean over its logged steps, then the mean over seeds with its t
interval over seeds, or over the SFT models' means under sft.seeds (grpo_lambda.stats.t_interval); the interval of a share (``SHARES``: a clip fraction,
the groups without signal) cut to [0, 1], which a share cannot leave (grpo_lambda.stats.bounded: the
coverage is unchanged), where a t interval near 0 reaches below it. A column a run never logged (DAPO's
dropped groups outside dynamic sampling, the KL at β = 0 where TRL does not compute it) is empty.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from grpo_lambda.config import model_datasets, model_variants
from grpo_lambda.stats import bounded, t_interval
from grpo_lambda.tables.cells import interval_columns, seed_clusters, unit_values
from grpo_lambda.tables.labels import variant_label

# The share of tokens the clip removed from the gradient (below, above, either side of the ratio's
# range), the policy's entropy and KL to the reference, the share of groups whose rewards all agree
# (no signal), the groups DAPO's dynamic sampling dropped per step, and the completions' length.
DIAGNOSTICS = ("clip_ratio_region", "clip_ratio_low", "clip_ratio_high", "entropy", "kl", "frac_reward_zero_std",
               "dropped_groups", "completion_length")
SHARES = ("clip_ratio_region", "clip_ratio_low", "clip_ratio_high", "frac_reward_zero_std")
COLUMNS = ["model", "dataset", "variant", "label", "seeds", "steps",
           *[c for name in DIAGNOSTICS for c in (name, f"{name}_low", f"{name}_high")]]


def diagnostics_table(config: dict, logs: pd.DataFrame, options: dict) -> pd.DataFrame:
    """One row per model × training set × variant with a train log, in config order."""
    rows = []
    for model in config["models"]:
        for dataset in model_datasets(config, model):
            for variant in model_variants(config, model):
                runs = logs[(logs["model"] == model) & (logs["dataset"] == dataset) & (logs["variant"] == variant)]
                if runs.empty:
                    continue
                row = {"model": model, "dataset": dataset, "variant": variant,
                       "label": variant_label(config, variant), "seeds": runs["seed"].nunique(),
                       "steps": int(runs["step"].max())}
                for name in DIAGNOSTICS:
                    per_seed = runs.groupby("seed")[name].mean() if name in runs else pd.Series(dtype=float)
                    units = unit_values(per_seed.to_numpy(dtype=float), list(per_seed.index),
                                        seed_clusters(config, list(per_seed.index)))  # SFT models' means, nested
                    interval = t_interval(np.array(list(units.values())), float(options["level"]))
                    interval = bounded(interval) if name in SHARES else interval
                    row.update(interval_columns(name, interval))
                rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS).astype({name: float for name in DIAGNOSTICS})
