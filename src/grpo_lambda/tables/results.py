"""The per-run tables: ``results`` (per seed), ``results_by_variant`` (mean over seeds) and
``checkpoints`` (accuracy at every evaluated step), with the config-order sort they share."""

from __future__ import annotations

import numpy as np
import pandas as pd

from grpo_lambda.config.methods import variant_spec
from grpo_lambda.tables.cells import SAMPLED_COLUMNS, Cells, estimate, interval_columns, scaled, targets
from grpo_lambda.tables.collect import final_step
from grpo_lambda.tables.keys import AVERAGE, FINAL, SFT
from grpo_lambda.tables.labels import objective, variant_label
from grpo_lambda.tables.verdicts import add_verdicts, comparison_columns

def _variant_columns(config: dict, variant: str) -> dict:
    spec = {} if variant == SFT else variant_spec(config, variant)
    return {"label": variant_label(config, variant), "objective": objective(config, variant),
            "form": spec["form"] if spec.get("objective") == "grpo_lambda" else ""}



def results_table(summary: pd.DataFrame, cells: Cells, config: dict,
                  sampled: dict[str, Cells] | None = None) -> pd.DataFrame:
    """Final models, one row per model × dataset × variant × seed × benchmark (and the average); the
    intervals of one seed are over problems. ``sampled``: Cells per sampled metric (cells.SAMPLED_COLUMNS),
    whose values get intervals too."""
    final = summary[summary["step"] == FINAL]
    sampled = sampled or {}
    rows = []
    for (model, dataset, variant, seed), group in final.groupby(["model", "dataset", "variant", "seed"],
                                                                sort=False, dropna=False, observed=True):
        seed = None if pd.isna(seed) else int(seed)
        by_bench = group.set_index("benchmark")
        seed_key = "all" if seed is None else seed
        for target, members in targets(config["benchmarks"]):
            if not set(members) <= set(by_bench.index):
                continue
            terms = cells.terms(model, dataset, variant, FINAL, members, seed=seed_key)
            sft_terms = cells.terms(model, dataset, SFT, FINAL, members)
            accuracy = cells.level_interval(terms)
            sft = estimate(sft_terms)
            part = by_bench.loc[members]
            rows.append({"model": model, "dataset": dataset, "variant": variant, "seed": seed,
                         **_variant_columns(config, variant), "benchmark": target, "n": int(part["n"].sum()),
                         **interval_columns("accuracy", accuracy),
                         "formatted": part["formatted"].mean(), "mean_length": part["mean_length"].mean(),
                         "sft_accuracy": sft, "gain": accuracy.estimate - sft if variant != SFT else np.nan,
                         **{column: part[column].mean() for column in sampled_columns(summary)},
                         **_sampled_intervals(sampled, model, dataset, variant, members, seed_key)})
    columns = _RESULTS_COLUMNS + _with_intervals(sampled_columns(summary), sampled)
    return _order(pd.DataFrame(rows, columns=columns), config)


def sampled_columns(summary: pd.DataFrame) -> list[str]:
    """The sampled-completion figures the summary holds (collect.summarise), in reading order."""
    passes = sorted((c for c in summary.columns if c.startswith("pass_at_") and c[8:].isdigit()),
                    key=lambda c: int(c[8:]))
    return [c for c in ["k", "sampled_accuracy", *passes, "pass_at_k", "maj_at_k"] if c in summary.columns]


def sampled_cells(samples: pd.DataFrame, config: dict, options: dict) -> dict[str, Cells]:
    """Cells per sampled metric (avg@k, pass@k, maj@k) when the evaluation sampled completions."""
    if not (samples["mode"] == "sampled").any():
        return {}
    return {metric: Cells(samples, config, options, metric) for metric in SAMPLED_COLUMNS}


def _sampled_intervals(sampled: dict[str, Cells], model, dataset, variant, members, seed="all") -> dict:
    """Each sampled metric's value and interval, under its summary column's name."""
    out = {}
    for metric, metric_cells in sampled.items():
        terms = metric_cells.terms(model, dataset, variant, FINAL, members, seed=seed)
        out.update(interval_columns(SAMPLED_COLUMNS[metric], metric_cells.level_interval(terms)))
    return out


def _with_intervals(columns: list[str], sampled: dict[str, Cells]) -> list[str]:
    """``columns`` with ``_low``/``_high`` after each sampled metric that has an interval."""
    shown = {SAMPLED_COLUMNS[metric] for metric in sampled}
    return [name for column in columns
            for name in ([column, f"{column}_low", f"{column}_high"] if column in shown else [column])]


_RESULTS_COLUMNS = ["model", "dataset", "variant", "seed", "label", "objective", "form", "benchmark", "n",
                    "accuracy", "accuracy_low", "accuracy_high", "formatted", "mean_length", "sft_accuracy", "gain"]
_BY_VARIANT_COLUMNS = ["model", "dataset", "variant", "label", "objective", "form", "benchmark", "n_seeds",
                       "accuracy", "accuracy_low", "accuracy_high", "formatted", "mean_length", "sft_accuracy",
                       "gain", "gain_low", "gain_high", "gain_distinguishable", "gain_se", "gain_df", "gain_p",
                       "gain_p_floor", "gain_sft_models", "gain_p_t", "gain_p_exact", "gain_procedure", "gain_p_holm", "gain_p_equivalence", "gain_p_equivalence_holm", "gain_mde", "gain_verdict"]
# Holm's family of the gains over SFT: every variant on one metric of one model and training set.
GAIN_FAMILY = ["model", "dataset", "benchmark"]


def results_by_variant(summary: pd.DataFrame, cells: Cells, config: dict, options: dict,
                       sampled: dict[str, Cells] | None = None) -> pd.DataFrame:
    """Final models, mean over seeds: accuracy and gain over SFT (paired by problem), each with its
    interval, and the gain's p-values and verdict (grpo_lambda.tables.verdicts)."""
    final = summary[summary["step"] == FINAL]
    sampled = sampled or {}
    level, margin = float(options["level"]), options["equivalence_margin"].get("accuracy")
    rows = []
    for (model, dataset, variant), group in final.groupby(["model", "dataset", "variant"], sort=False, observed=True):
        for target, members in targets(config["benchmarks"]):
            part = group[group["benchmark"].isin(members)]
            if set(part["benchmark"]) != set(members):
                continue
            terms = cells.terms(model, dataset, variant, FINAL, members)
            sft_terms = cells.terms(model, dataset, SFT, FINAL, members)
            gain = None
            if variant != SFT and sft_terms:
                gain = cells.interval(terms + scaled(sft_terms, -1.0))
            rows.append({"model": model, "dataset": dataset, "variant": variant,
                         **_variant_columns(config, variant), "benchmark": target,
                         "n_seeds": len(cells.seeds(model, dataset, variant)),
                         **interval_columns("accuracy", cells.level_interval(terms)),
                         "formatted": part["formatted"].mean(), "mean_length": part["mean_length"].mean(),
                         "sft_accuracy": estimate(sft_terms),
                         **interval_columns("gain", gain),
                         "gain_distinguishable": gain.excludes(0.0) if gain is not None else None,
                         **comparison_columns(gain, level, margin, prefix="gain_"),
                         **_sampled_intervals(sampled, model, dataset, variant, members)})
    shown = [SAMPLED_COLUMNS[metric] for metric in sampled]
    frame = pd.DataFrame(rows, columns=_BY_VARIANT_COLUMNS + _with_intervals(shown, sampled))
    return _order(add_verdicts(frame, "gain", GAIN_FAMILY, level, prefix="gain_", options=options,
                               table="results_by_variant"), config)


def checkpoints_table(summary: pd.DataFrame, cells: Cells, config: dict) -> pd.DataFrame:
    """Accuracy at each evaluated step, mean over seeds with its interval; SFT sits at step 0."""
    rows = []
    runs = summary.groupby(["model", "dataset", "variant", "step"], sort=False, observed=True)
    for (model, dataset, variant, step), _ in runs:
        step_num = 0 if variant == SFT else (final_step(config, model) if step == FINAL else int(step))
        for target, members in targets(config["benchmarks"]):
            terms = cells.terms(model, dataset, variant, step, members)
            if terms is None:
                continue
            rows.append({"model": model, "dataset": dataset, "variant": variant,
                         "label": variant_label(config, variant), "step": step, "step_num": step_num,
                         "benchmark": target,
                         "n_seeds": len(cells.seeds(model, dataset, variant, step)),
                         **interval_columns("accuracy", cells.level_interval(terms))})
    columns = ["model", "dataset", "variant", "label", "step", "step_num", "benchmark", "n_seeds",
               "accuracy", "accuracy_low", "accuracy_high"]
    frame = pd.DataFrame(rows, columns=columns)
    return _order(frame, config, extra=["step_num"])


def _order(frame: pd.DataFrame, config: dict, extra: list[str] | None = None) -> pd.DataFrame:
    """Sort rows in config order: model, dataset, variant (SFT first), seed, benchmark (average last)."""
    if frame.empty:
        return frame
    rank = {
        "model": {m: i for i, m in enumerate(config["models"])},
        "dataset": {d: i for i, d in enumerate(config["datasets"])},
        "variant": {v: i for i, v in enumerate([SFT] + list(config["variants"]))},
        "benchmark": {b: i for i, b in enumerate(list(config["benchmarks"]) + [AVERAGE])},
    }
    keys = [k for k in ("model", "dataset", "variant", "seed") if k in frame.columns] + (extra or []) + ["benchmark"]

    def sort_key(column: pd.Series) -> pd.Series:
        if column.name in rank:
            return column.map(rank[column.name])
        return column
    return frame.sort_values(keys, key=sort_key, kind="stable", na_position="first").reset_index(drop=True)
