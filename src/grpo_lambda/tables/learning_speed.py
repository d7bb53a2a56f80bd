"""Learning speed: how fast each variant's training reward rises, with t intervals over seeds.

The paper's headline is about training ("30–40% improved performance during training"), so besides
the accuracy of the final models the tables report two statistics of each run's training-reward
curve (``reward`` in ``train_log.csv``, the mean reward of the step's sampled completions):

- ``auc``: the area under the training-reward curve divided by its length, i.e. the mean reward over
  the logged steps. A method that learns sooner has a larger area at the same final reward.
- ``steps_to_threshold``: the first step at which the seed's smoothed reward (the figures' EMA,
  :func:`grpo_lambda.smoothing.smooth` with ``report.smoothing``) reaches the threshold. The threshold is
  stated in the table and is the same for every variant of a model × training set: the reward at
  the start (mean first logged reward of all runs, which share the SFT model) plus
  ``THRESHOLD_FRACTION`` of the baseline's gain over the run (mean reward of its last
  ``report.final_window`` steps, default 20, minus the start). So it reads "steps to half of GRPO's
  improvement". A seed that never reaches it counts as ``max_steps + 1`` (the mean is then a lower
  bound; ``reached`` says how many seeds did).

Each statistic is a mean over seeds with its t interval (x̄ ± t_{n−1}·s/√n; approximate where seeds are
skewed: the per-seed values are beside it). The comparison with the baseline is
paired by seed: a variant and the baseline with the same seed start from the same SFT model and see the
same prompts in the same order, so the gap is the interval of the per-seed differences over the seeds
both have (matched by seed, never by position) by the seed-level procedure
(grpo_lambda.seed_level.seed_interval: the exact sign-flip test inverted; no interval below 6 seeds), with its p-values, minimum detectable effect and
verdict (grpo_lambda.tables.verdicts). Both statistics are exploratory: the AUC gaps of one model and
training set are one family, the steps another (fewer steps is ``ahead``), a check line
(``report.checks``) a family of its own, and an AUC gap that is a simple effect of ``report.factorial`` is
counted in the factorial table only (grpo_lambda.config.families.speed_family). Every line's gap shares
the baseline's seeds: ``report.multiplicity`` may give a family the step-down max-T over joint sign flips
of the seeds (grpo_lambda.multiplicity.max_t), which can reject where Holm over many lines cannot (the
``*_procedure`` columns). The per-seed values are in the ``*_per_seed`` columns.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from grpo_lambda.config import model_datasets, model_variants
from grpo_lambda.config.family_names import CHECK, EXPLORATORY, REWARD_AUC, STEPS, speed_family
from grpo_lambda.config.methods import method_variants
from grpo_lambda.stats import Interval, t_interval
from grpo_lambda.seed_level import seed_interval
from grpo_lambda.smoothing import smooth, smoothing_weight
from grpo_lambda.tables.cells import interval_columns, seed_clusters, unit_values
from grpo_lambda.tables.labels import objective, variant_label
from grpo_lambda.tables.verdicts import add_verdicts, comparison_columns, per_seed_text, seed_values_text

THRESHOLD_FRACTION = 0.5
COLUMNS = ["model", "dataset", "method", "variant", "label", "objective", "seeds", "steps", "threshold",
           "auc", "auc_low", "auc_high", "auc_vs_baseline", "auc_vs_baseline_low", "auc_vs_baseline_high",
           "auc_distinguishable", "steps_to_threshold", "steps_to_threshold_low", "steps_to_threshold_high",
           "reached", "steps_vs_baseline", "steps_vs_baseline_low", "steps_vs_baseline_high",
           "steps_distinguishable", "auc_per_seed", "auc_vs_baseline_per_seed", "role", "auc_family",
           "auc_se", "auc_df", "auc_p", "auc_p_floor", "auc_procedure", "auc_p_holm", "auc_p_equivalence", "auc_p_equivalence_holm",
           "auc_mde", "auc_verdict", "steps_family", "steps_se", "steps_df", "steps_p", "steps_p_floor", "steps_procedure", "steps_p_holm",
           "steps_p_equivalence", "steps_p_equivalence_holm", "steps_mde", "steps_verdict"]


def reward_matrix(runs: pd.DataFrame) -> tuple[list[int], np.ndarray]:
    """The seeds of ``runs`` (one variant's train logs) and their rewards, (n_seeds, n_steps); NaN
    where a seed has not logged a step."""
    wide = runs.pivot_table(index="seed", columns="step", values="reward", aggfunc="mean")
    return [int(s) for s in wide.index], wide.to_numpy(dtype=float)


def area(rewards: np.ndarray) -> np.ndarray:
    """Per seed: the area under the reward curve over its length (the mean over logged steps)."""
    return np.nanmean(rewards, axis=1)


def steps_to_threshold(rewards: np.ndarray, steps: np.ndarray, threshold: float, weight: float) -> np.ndarray:
    """Per seed: the first step whose smoothed reward is >= ``threshold``; ``steps[-1] + 1`` if none."""
    first = np.full(rewards.shape[0], float(steps[-1] + 1))
    for i, row in enumerate(rewards):
        hits = np.flatnonzero(smooth(row, weight) >= threshold)
        if hits.size:
            first[i] = float(steps[hits[0]])
    return first


def threshold(runs: pd.DataFrame, baseline: str, final_window: int) -> float:
    """Start reward + THRESHOLD_FRACTION × the baseline's gain (see the module docstring)."""
    first = runs.sort_values("step").groupby(["variant", "seed"])["reward"].first().mean()
    base = runs[runs["variant"] == baseline]
    if base.empty:
        return float("nan")
    last_steps = sorted(base["step"].unique())[-final_window:]
    final = base[base["step"].isin(last_steps)]["reward"].mean()
    return float(first + THRESHOLD_FRACTION * (final - first))


def run_statistics(config: dict, logs: pd.DataFrame, options: dict) -> dict[tuple, tuple[float, dict]]:
    """Per model × training set with train logs: the threshold, and per variant its seeds with each
    seed's area and steps to the threshold."""
    out = {}
    for model in config["models"]:
        for dataset in model_datasets(config, model):
            runs = logs[(logs["model"] == model) & (logs["dataset"] == dataset)].dropna(subset=["reward"])
            if runs.empty:
                continue
            goal = threshold(runs, options["baseline"], options["final_window"])
            per_variant = {}
            for variant in model_variants(config, model):
                part = runs[runs["variant"] == variant]
                if part.empty:
                    continue
                seeds, rewards = reward_matrix(part)
                steps = np.array(sorted(part["step"].unique()))
                weight = smoothing_weight(options["smoothing"], len(steps))
                per_variant[variant] = (seeds, area(rewards), steps_to_threshold(rewards, steps, goal, weight))
            out[(model, dataset)] = (goal, per_variant)
    return out


def learning_speed_table(config: dict, logs: pd.DataFrame, options: dict) -> pd.DataFrame:
    """One row per model × training set × variant with a train log: area, steps to the threshold,
    each with its interval over seeds, and each minus the baseline's, paired by seed, with its verdict."""
    baseline, level = options["baseline"], float(options["level"])
    margin = options["equivalence_margin"].get("reward_auc")
    rows, values = [], {"auc": [], "steps": []}  # each row's per-seed gaps, for a max-T family (verdicts)
    for (model, dataset), (goal, per_variant) in run_statistics(config, logs, options).items():
        method_of = {v: m for m, vs in method_variants(config, model, options).items() for v in vs}
        runs = logs[(logs["model"] == model) & (logs["dataset"] == dataset)].dropna(subset=["reward"])
        for variant, (seeds, auc, first) in per_variant.items():
            # a seed that never reached the threshold has one step past its variant's last (steps_to_threshold)
            last = int(runs[runs["variant"] == variant]["step"].max())
            row = {"model": model, "dataset": dataset, "method": method_of.get(variant, variant),
                   "variant": variant, "label": variant_label(config, variant),
                   "objective": objective(config, variant), "seeds": len(seeds),
                   "steps": last, "threshold": goal,
                   # a variant's own level: the t interval, approximate for skewed seeds (its values are in
                   # auc_per_seed), over the SFT models' means under sft.seeds; the comparisons below use the
                   # seed-level procedure
                   **interval_columns("auc", _unit_interval(auc, seeds, level, config)),
                   **interval_columns("steps_to_threshold", _unit_interval(first, seeds, level, config)),
                   "reached": f"{int(np.sum(first <= last))}/{len(seeds)}"}
            auc_gap = steps_gap = None
            gaps = {"auc": None, "steps": None}
            if variant != baseline and baseline in per_variant:
                auc_gap, steps_gap = paired_gaps(seeds, (auc, first), per_variant[baseline], level, config)
                gaps = per_seed_gaps(seeds, {"auc": auc, "steps": first}, per_variant[baseline], config)
            for name in values:
                values[name].append(gaps[name])
            row.update(interval_columns("auc_vs_baseline", auc_gap))
            row["auc_distinguishable"] = auc_gap.excludes(0.0) if auc_gap else np.nan
            row.update(interval_columns("steps_vs_baseline", steps_gap))
            row["steps_distinguishable"] = steps_gap.excludes(0.0) if steps_gap else np.nan
            row["auc_per_seed"] = seed_values_text(seeds, auc)
            row["auc_vs_baseline_per_seed"] = per_seed_text(auc_gap)
            row["role"] = CHECK if variant in options["checks"] else EXPLORATORY
            row["auc_family"] = "" if auc_gap is None else speed_family(options, config, model, variant, REWARD_AUC)
            row["steps_family"] = "" if steps_gap is None else speed_family(options, config, model, variant, STEPS)
            row.update(comparison_columns(auc_gap, level, margin, prefix="auc_"))
            row.update(comparison_columns(steps_gap, level, None, prefix="steps_"))
            rows.append(row)
    frame = add_verdicts(pd.DataFrame(rows, columns=COLUMNS), "auc_vs_baseline", ["model", "dataset", "auc_family"],
                         level, prefix="auc_", options=options, table="learning_speed", seed_values=values["auc"])
    return add_verdicts(frame, "steps_vs_baseline", ["model", "dataset", "steps_family"], level, prefix="steps_",
                        lower_is_better=True, options=options, table="learning_speed", seed_values=values["steps"])


def _unit_interval(values: np.ndarray, seeds: list[int], level: float, config: dict) -> Interval:
    """The t interval of a variant's per-seed values over its units: the seeds, or each SFT model's mean."""
    return t_interval(np.array(list(unit_values(values, seeds, seed_clusters(config, seeds)).values())), level)


def paired_gaps(seeds: list[int], values: tuple[np.ndarray, ...], base: tuple, level: float,
                config: dict | None = None) -> list[Interval | None]:
    """Per statistic, the seed-level interval of the per-seed differences with the baseline over the seeds
    both have (None when they share none); with several SFT models per condition, over the SFT models'
    mean differences."""
    base_seeds, *base_values = base
    shared = [s for s in seeds if s in base_seeds]
    if not shared:
        return [None] * len(values)
    mine, theirs = [seeds.index(s) for s in shared], [base_seeds.index(s) for s in shared]
    clusters = seed_clusters(config, shared) if config is not None else None
    return [seed_interval(own[mine] - other[theirs], level, shared, clusters)
            for own, other in zip(values, base_values)]


def per_seed_gaps(seeds: list[int], values: dict[str, np.ndarray], base: tuple,
                  config: dict | None = None) -> dict[str, dict | None]:
    """Per statistic, each unit both runs have with its difference to the baseline (unit -> value), as
    :func:`paired_gaps` pairs them: each seed, or with several SFT models per condition each SFT model (its
    seeds' mean difference), the units max-T flips; None where they share no seed."""
    base_seeds, base_auc, base_first = base
    shared = [s for s in seeds if s in base_seeds]
    if not shared:
        return {name: None for name in values}
    mine, theirs = [seeds.index(s) for s in shared], [base_seeds.index(s) for s in shared]
    clusters = seed_clusters(config, shared) if config is not None else None
    theirs_by_name = {"auc": base_auc, "steps": base_first}
    return {name: unit_values(own[mine] - theirs_by_name[name][theirs], shared, clusters)
            for name, own in values.items()}
