"""The ``horizon`` tables (``report.horizon``): the trace's simple effect at each chain length, and its
trend with the length of the chain it assigns credit over.

A horizon study trains one SFT model per training set, each set one chain length of the ``arith`` task
at one difficulty (grpo_lambda.data.arith, ``columns`` and ``carry_free_share``), and evaluates each on
its own held-out suite (``report.horizon.chains``: training set -> suite). For each declared pair
(``report.horizon.pairs``: a name -> {treatment, baseline}, e.g. the trace with the clamp on) and each
horizon h, the simple effect

    Δ_h = accuracy(treatment, h) − accuracy(baseline, h)       on h's own suite, paired by seed and problem

and, the study's primary test, its trend with the chain length L_h (the mean length of the suite's
correct worked solution, in characters: the tiny model's tokens), the least-squares slope of Δ_h on
ln L_h,

    slope = Σ_h c_h Δ_h,   c_h = (x_h − x̄) / Σ_k (x_k − x̄)²,   x_h = ln L_h

a linear combination of cell means like every other accuracy statistic, so its interval is
grpo_lambda.stats.linear_interval's (paired by seed and problem within a horizon; the horizons'
SFT models are independent strata, and with several SFT models per horizon, ``sft.seeds``, the interval is
over them). With three horizons or more a slope can hide a step: ``report.horizon.curvature`` adds, per
pair, its lack-of-fit test, the quadratic coefficient c of Δ_h ≈ a + b·x_h + c·x_h² (a ``curvature`` row,
Σ_h q_h Δ_h, in the trend's family), so a trend that is a step between two horizons shows as curvature. Families: the trends of the pairs are the primary family (Holm
over the pairs), except those of pairs declared ``exploratory`` (the clamp's effect beside the trace's,
say), which are a family of their own; the per-horizon effects of one pair are a family each. A margin of
equivalence per statistic (``report.horizon.equivalence_margin``: ``effect``, ``slope``) makes a TOST
verdict possible: "equivalent" is the only verdict that says an effect or a trend is absent.

Beside each effect the row shows what decides whether it can be read: the SFT model's greedy accuracy
on the suite and the share of RL steps with signal (some group whose rewards differ), which the study's
design holds in one band at every horizon, and each arm's accuracy, so that a ceiling or a floor is
visible; whether the SFT accuracy lies in the band the design declares (``report.horizon.band``: an
effect measured at a floor or a ceiling says nothing, and a trend through such a horizon does not answer
the question); and the per-seed effects (seed: effect), so a reader sees skewed or collapsed seeds.

The ``horizon_errors`` table says where the credit went: per horizon and arm (the SFT model and the
final models, seeds pooled), the share of greedy chains that are right, that first go wrong at a carry
(the taught error), or first go wrong elsewhere, and where the first carry error sits in the chain
(its column over the chain's columns), from grpo_lambda.data.arith.first_error.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pandas as pd

from grpo_lambda import files
from grpo_lambda.config import model_datasets, model_variants, sft_seeds
from grpo_lambda.config.family_names import horizon_family
from grpo_lambda.data import arith
from grpo_lambda.tables.collect import eval_file
from grpo_lambda.tables.cells import Cells, interval_columns, scaled
from grpo_lambda.tables.keys import FINAL, SFT
from grpo_lambda.tables.verdicts import add_verdicts, comparison_columns, seed_values_text

EFFECT, TREND, CURVATURE = "effect", "trend", "curvature"
COLUMNS = ["model", "pair", "role", "dataset", "benchmark", "columns", "chain_length", "sft_accuracy",
           "sft_accuracy_low", "sft_accuracy_high", "in_band", "steps_with_signal", "groups_with_signal",
           "baseline_accuracy", "baseline_accuracy_low", "baseline_accuracy_high", "treatment_accuracy",
           "treatment_accuracy_low", "treatment_accuracy_high", "estimate", "estimate_low", "estimate_high", "seeds",
           "per_seed", "family", "se", "df", "p", "p_floor", "sft_models", "p_t", "p_exact", "procedure", "p_holm",
           "p_equivalence", "p_equivalence_holm", "mde", "verdict"]
ERROR_COLUMNS = ["model", "dataset", "benchmark", "columns", "variant", "answers", "correct", "first_error_carry",
                 "first_error_other", "carry_error_position"]


def chain_length(settings: dict) -> float:
    """The mean length, in characters, of the correct worked solution of a synthetic suite's problems."""
    rows = arith.generate(settings["n"], seed=settings["seed"], held_out=True, columns=settings["columns"],
                          carry_free_share=settings.get("carry_free_share", 1.0))
    return float(np.mean([len(row["solution"]) for row in rows]))


def slope_weights(lengths: list[float]) -> np.ndarray:
    """c_h of the module docstring: the least-squares slope of y on ln(length) is Σ c_h y_h."""
    x = np.log(np.asarray(lengths, dtype=float))
    centred = x - x.mean()
    return centred / float((centred ** 2).sum())


def curvature_weights(lengths: list[float]) -> np.ndarray:
    """q_h: the least-squares quadratic coefficient of y on x = ln(length), fitted with an intercept and a
    slope (y ≈ a + b·x + c·x²), is c = Σ q_h y_h; zero for a trend that is a straight line in x, the test of
    lack of fit of the slope (at least three horizons)."""
    x = np.log(np.asarray(lengths, dtype=float))
    design = np.column_stack([np.ones_like(x), x, x * x])
    return np.linalg.pinv(design)[2]


def band_check(summary: dict, band: list[float]) -> dict:
    """Whether an SFT model's greedy accuracy on its horizon's suite (its evaluation summary) lies in the
    declared band (``report.horizon.band``), as a record; a ValueError naming the horizon when it does
    not: RL at that horizon would measure a floor or a ceiling, so the study stops before spending it."""
    accuracy, (low, high) = float(summary["accuracy"]), band
    where = f"{summary['model']}/{summary['dataset']}"
    if not low <= accuracy <= high:
        raise ValueError(f"{where}: the SFT model's greedy accuracy on {summary['benchmark']} is {accuracy:.3f}, "
                         f"outside report.horizon.band [{low}, {high}]; an effect measured there would say nothing "
                         "(a floor or a ceiling). Change this horizon's data (columns, carry_free_share, "
                         "carry_error_rate) or the model, or remove report.horizon.band to train anyway.")
    return {"model": summary["model"], "dataset": summary["dataset"], "benchmark": summary["benchmark"],
            "n": summary["n"], "accuracy": accuracy, "band": [low, high], "in_band": True}


def signal(logs: pd.DataFrame, model: str, dataset: str, variants: list[str]) -> tuple[float, float]:
    """(share of RL steps with some group whose rewards differ, mean share of such groups) over the
    runs of ``variants`` on ``dataset``; NaN without logs."""
    if logs.empty or "frac_reward_zero_std" not in logs:
        return math.nan, math.nan
    rows = logs[(logs["model"] == model) & (logs["dataset"] == dataset) & logs["variant"].isin(variants)]
    zero = rows["frac_reward_zero_std"].astype(float).dropna()
    if zero.empty:
        return math.nan, math.nan
    return float((zero < 1).mean()), float(1 - zero.mean())


def _per_seed(cells: Cells, model: str, dataset: str, treatment: str, baseline: str, benchmark: str) -> str:
    """Each seed both arms hold with its effect, the mean over the problems both answered (the tables'
    "seed:value" text)."""
    a = cells.matrices.get((model, dataset, treatment, FINAL, benchmark))
    b = cells.matrices.get((model, dataset, baseline, FINAL, benchmark))
    if a is None or b is None:
        return ""
    seeds, effects = [], []
    for seed in sorted(set(a[0]) & set(b[0]), key=lambda s: -1 if s is None else s):
        difference = a[1][a[0].index(seed)] - b[1][b[0].index(seed)]
        if (~np.isnan(difference)).any():
            seeds.append(seed)
            effects.append(float(np.nanmean(difference)))
    return seed_values_text(seeds, effects)


def _accuracy(cells: Cells, prefix: str, model: str, dataset: str, variant: str, benchmark: str) -> dict:
    terms = cells.terms(model, dataset, variant, FINAL, [benchmark])
    return interval_columns(prefix, cells.level_interval(terms) if terms else None)


def horizon_table(cells: Cells, config: dict, logs: pd.DataFrame, options: dict) -> pd.DataFrame:
    """The rows of the module docstring, per model: each pair's effect at each horizon, then its trend."""
    design = options.get("horizon")
    if design is None:
        return pd.DataFrame(columns=COLUMNS)
    level = float(options["level"])
    margins = design["equivalence_margin"]
    chains = design["chains"]
    lengths = {dataset: chain_length(config["benchmarks"][bench]) for dataset, bench in chains.items()}
    weights = dict(zip(chains, slope_weights([lengths[d] for d in chains])))
    bends = dict(zip(chains, curvature_weights([lengths[d] for d in chains]))) if design.get("curvature") else None
    rows = []
    for model in config["models"]:
        for name, pair in design["pairs"].items():
            treatment, baseline = pair["treatment"], pair["baseline"]
            trend_terms, bend_terms, complete = [], [], True
            for dataset, benchmark in chains.items():
                arms = [cells.terms(model, dataset, v, FINAL, [benchmark]) for v in (treatment, baseline)]
                steps, groups = signal(logs, model, dataset, [treatment, baseline])
                row = {"model": model, "pair": name, "role": EFFECT, "dataset": dataset, "benchmark": benchmark,
                       "columns": config["benchmarks"][benchmark]["columns"], "chain_length": lengths[dataset],
                       **_accuracy(cells, "sft_accuracy", model, dataset, SFT, benchmark),
                       "in_band": None, "steps_with_signal": steps, "groups_with_signal": groups,
                       **_accuracy(cells, "baseline_accuracy", model, dataset, baseline, benchmark),
                       **_accuracy(cells, "treatment_accuracy", model, dataset, treatment, benchmark)}
                if not all(arms):
                    complete = False
                    rows.append({**row, **interval_columns("estimate", None), "seeds": 0, "per_seed": "",
                                 **comparison_columns(None, level, None)})
                    continue
                difference = scaled(arms[0], 1.0) + scaled(arms[1], -1.0)
                interval = cells.interval(difference)
                shared = set(arms[0][0].rows or ()) & set(arms[1][0].rows or ())
                rows.append({**row, **interval_columns("estimate", interval), "seeds": len(shared),
                             "per_seed": _per_seed(cells, model, dataset, treatment, baseline, benchmark),
                             **comparison_columns(interval, level, margins.get(EFFECT))})
                trend_terms += scaled(difference, weights[dataset])
                if bends is not None:
                    bend_terms += scaled(difference, bends[dataset])
            for role, terms, margin in ((TREND, trend_terms, margins.get("slope")), (CURVATURE, bend_terms, None)):
                if role == CURVATURE and bends is None:
                    continue
                interval = cells.interval(terms) if complete else None
                rows.append({"model": model, "pair": name, "role": role, "dataset": "", "benchmark": "",
                             "columns": np.nan, "chain_length": np.nan, **interval_columns("estimate", interval),
                             "seeds": np.nan, "per_seed": "", **comparison_columns(interval, level, margin)})
    frame = pd.DataFrame(rows, columns=COLUMNS)
    if frame.empty:
        return frame
    band = design.get("band")
    if band is not None:
        effects = frame["role"] == EFFECT
        frame["in_band"] = frame["in_band"].astype(object)
        frame.loc[effects, "in_band"] = frame.loc[effects, "sft_accuracy"].between(band[0], band[1])
    # Holm: the trends of the primary pairs are one family (the primary test), the exploratory pairs' trends
    # another, each pair's effects another (grpo_lambda.config.families.horizon_family).
    frame["family"] = [horizon_family(design, pair, role != EFFECT) for pair, role in zip(frame["pair"], frame["role"])]
    frame = add_verdicts(frame, "estimate", ["model", "family"], level, options=options, table="horizon")
    return frame[COLUMNS]


def collect_first_errors(results_dir: str | os.PathLike, config: dict, options: dict) -> pd.DataFrame | None:
    """Every final greedy chain of the horizon study's cells on their own suite, with its first error
    (grpo_lambda.data.arith.first_error: its kind, and the column it sits in); None for a study without
    ``report.horizon``."""
    design = options.get("horizon")
    if design is None:
        return None
    results_dir = Path(results_dir)
    records = []
    for model in config["models"]:
        for dataset in model_datasets(config, model):
            benchmark = design["chains"].get(dataset)
            if benchmark is None:
                continue
            bench = results_dir / "bench" / f"{benchmark}.jsonl"
            if not bench.is_file():
                continue
            suite = files.iter_jsonl(bench, files.ReadSummary(str(bench)))
            problems = {str(row["id"]): row["problem"] for _, row in suite}
            runs = ([(SFT, k) for k in sft_seeds(config) or [None]]
                    + [(v, s) for v in model_variants(config, model) for s in config["seeds"]])
            for variant, seed in runs:
                path = eval_file(results_dir, model, dataset, variant, seed, FINAL, benchmark)
                if not path.is_file():
                    continue
                for _, row in files.iter_jsonl(path, files.ReadSummary(str(path))):
                    if row.get("mode", "greedy") == "greedy" and str(row["id"]) in problems:
                        kind, step = arith.first_error(problems[str(row["id"])], str(row.get("completion", "")))
                        records.append({"model": model, "dataset": dataset, "variant": variant, "seed": seed,
                                        "benchmark": benchmark, "id": str(row["id"]), "error": kind,
                                        "error_step": step, "columns": config["benchmarks"][benchmark]["columns"]})
    columns = ["model", "dataset", "variant", "seed", "benchmark", "id", "error", "error_step", "columns"]
    frame = pd.DataFrame(records, columns=columns)
    return frame.astype({"seed": "Int64", "error_step": "float64"})


def horizon_errors_table(errors: pd.DataFrame, config: dict, options: dict) -> pd.DataFrame:
    """Per horizon, its suite and arm (SFT first, then the variants): the shares of greedy chains that are
    right, first wrong at a carry, first wrong elsewhere, and the mean relative position (column /
    columns) of the first carry error."""
    design = options.get("horizon")
    if design is None or errors is None or errors.empty:
        return pd.DataFrame(columns=ERROR_COLUMNS)
    rows = []
    for model in config["models"]:
        for dataset, benchmark in design["chains"].items():
            here = errors[(errors["model"] == model) & (errors["dataset"] == dataset)
                          & (errors["benchmark"] == benchmark)]
            for variant in [SFT, *config["variants"]]:
                chains = here[here["variant"] == variant]
                if chains.empty:
                    continue
                carry = chains[chains["error"] == "carry"]
                rows.append({"model": model, "dataset": dataset, "benchmark": benchmark,
                             "columns": config["benchmarks"][benchmark]["columns"], "variant": variant,
                             "answers": len(chains), "correct": float((chains["error"] == "correct").mean()),
                             "first_error_carry": len(carry) / len(chains),
                             "first_error_other": float(((chains["error"] != "correct")
                                                         & (chains["error"] != "carry")).mean()),
                             "carry_error_position": float((carry["error_step"] / carry["columns"]).mean())
                             if len(carry) else np.nan})
    return pd.DataFrame(rows, columns=ERROR_COLUMNS)


