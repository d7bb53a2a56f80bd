"""Verdicts: the one rule every comparison table applies, by code, to its intervals.

A comparison is an estimate of a difference (a method minus the baseline, a variant minus SFT, a
factorial effect) with its interval (:mod:`grpo_lambda.stats`). Its columns, with the table's prefix
(``""`` for a table of one statistic, ``"auc_"`` and so on for several):

``family``        the comparison's family (a name, by a rule of grpo_lambda.config.families; empty: in no
                  family, e.g. a row that repeats another or has no test); ``role`` says what the family
                  is for: ``primary`` (the one
                  family per study the headline rests on, ``report.primary``), ``exploratory`` (per-suite
                  rows, AUC, diagnostics: their own families), ``check`` (a line that should equal its
                  baseline, ``report.checks``: a family of its own, counted in no other)
``se``, ``df``    the standard error and degrees of freedom of the interval
``p``             two-sided p-value of "no difference", from the same statistic as the interval (the exact
                  sign-flip test for per-seed values, grpo_lambda.seed_level.seed_interval)
``p_floor``       the smallest p that test can give (2^(1−n) for n seeds, 0 for a t test; 2^(1−K) for a
                  comparison read over K SFT models that an exact test backs, or K < 6: grpo_lambda.stats)
``sft_models``, ``p_t``, ``p_exact``  for a comparison read over K SFT models (``sft.seeds``): K, the t test's p
                  at its df (K − 1), and the exact sign-flip test's over the K SFT models' own estimates (NaN
                  where the comparison spans strata); ``p`` is the larger of the two; NaN elsewhere
``procedure``     how the family is adjusted (report.multiplicity, report.descriptive): ``holm``;
                  ``max_t``, the step-down max-T over joint sign flips of the units (grpo_lambda.multiplicity.max_t)
                  for seed-level lines that share a baseline; ``descriptive``: no adjusted p, no verdict
``p_holm``        ``p`` adjusted within the family by its procedure (Holm's step-down method, or max-T's)
``p_equivalence`` the equivalence p-value (two one-sided tests against ±margin, the margin of the row's own
                  metric, ``report.equivalence_margin``), NaN without a margin
``p_equivalence_holm`` the same, Holm-adjusted within the family
``mde``           the minimum detectable effect at the level the verdict faces: the smallest |difference| a
                  two-sided test at α/m (m the family's size, Holm's first step) detects with 80% power at
                  this standard error and df, (t_{df, 1 − α/(2m)} + t_{df, 0.80}) · se; infinite where the
                  test cannot reach α/m at all; under max-T at the level its first step gives the row; in a
                  descriptive family the t test's at α/m, whatever its floor (what the design could have seen)
``verdict``       ``ahead`` / ``behind`` when ``p_holm`` < α (the sign says which; for a quantity where
                  lower is better, a negative difference is ``ahead``), else ``equivalent`` when
                  ``p_equivalence_holm`` < α (Holm-adjusted, never the unadjusted p), else ``too few seeds``
                  when m · ``p_floor`` ≥ α (``p_floor`` ≥ α under max-T: no outcome of the seeds could
                  reject, a sign-flip test of 4 seeds), else ``not distinguishable``; none in a descriptive
                  family

Why Holm within declared families: a verdict stands after the other tests of its question are counted,
and a row is counted once. Lines that share seeds and baseline are correlated; Holm is valid under any
such dependence, and conservative under it: max-T uses it (docs/statistics.md says when each applies).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from grpo_lambda.config.family_names import CHECK, DESCRIPTIVE, EXPLORATORY, HOLM, MAX_T, PRIMARY, procedure
from grpo_lambda.stats import Interval, minimum_detectable_effect
from grpo_lambda.multiplicity import holm, max_t

AHEAD, BEHIND, EQUIVALENT, UNRESOLVED, TOO_FEW = "ahead", "behind", "equivalent", "not distinguishable", \
    "too few seeds"
# An "equivalent" on margins set after the run's data was seen (report.history.margins_set_after_data): a
# TOST that passed on a margin chosen knowing the data is no claim that an effect is absent.
POST_HOC = "within a post-hoc margin"
POWER = 0.8


def comparison_columns(interval: Interval | None, level: float, margin: float | None, prefix: str = "") -> dict:
    """The raw test columns of one comparison (Holm, the MDE and the verdict come with :func:`add_verdicts`).
    ``margin`` must be the margin of this comparison's own metric."""
    if interval is None:
        return {f"{prefix}se": np.nan, f"{prefix}df": np.nan, f"{prefix}p": np.nan, f"{prefix}p_floor": np.nan,
                f"{prefix}p_equivalence": np.nan, f"{prefix}sft_models": np.nan, f"{prefix}p_t": np.nan,
                f"{prefix}p_exact": np.nan}
    nested = interval.sft_units > 0
    return {f"{prefix}se": interval.se, f"{prefix}df": interval.df, f"{prefix}p": interval.p_value(),
            f"{prefix}p_floor": interval.p_floor(),
            f"{prefix}p_equivalence": interval.equivalence_p(margin) if margin else np.nan,
            f"{prefix}sft_models": interval.sft_units if nested else np.nan,
            f"{prefix}p_t": interval.t_p() if nested else np.nan,
            f"{prefix}p_exact": interval.exact_p() if nested else np.nan}


def add_verdicts(frame: pd.DataFrame, estimate: str, family: Sequence[str], level: float, prefix: str = "",
                 lower_is_better: bool = False, options: dict | None = None, table: str = "",
                 seed_values: Sequence[dict | None] | None = None) -> pd.DataFrame:
    """Set ``{prefix}procedure``, ``{prefix}p_holm``, ``{prefix}p_equivalence_holm``, ``{prefix}mde`` and
    ``{prefix}verdict`` of ``frame`` (a copy), whose ``estimate`` column holds the differences and whose test
    columns :func:`comparison_columns` wrote. The adjustment runs within each group of equal ``family``
    columns (the last names the family); a row with an empty family column is in no family (no adjusted p,
    no verdict).

    The procedure of a family (grpo_lambda.config.families.procedure, from ``options``, the report options,
    and ``table``, the table's name; Holm without them): ``holm``; ``max_t``, the step-down max-T over joint
    sign flips of the units (grpo_lambda.multiplicity.max_t), for a family whose rows have ``seed_values`` (one
    mapping unit -> value per row of ``frame``, None for a row without); or ``descriptive``, no adjusted p and
    no verdict. The equivalence p-values are Holm-adjusted in every family that has a verdict."""
    frame = frame.copy()
    position = dict(zip(frame.index, range(len(frame))))  # seed_values are in the frame's row order
    alpha = 1.0 - level
    keys = list(family)
    p_column, eq_column = f"{prefix}p", f"{prefix}p_equivalence"
    frame[p_column] = frame[p_column].astype(float)
    frame[eq_column] = frame[eq_column].astype(float)
    procedures = pd.Series("", index=frame.index, dtype=object)
    adjusted = {column: pd.Series(np.nan, index=frame.index, dtype=float) for column in (p_column, eq_column)}
    mde = pd.Series(np.nan, index=frame.index, dtype=float)
    floors = pd.Series(np.nan, index=frame.index, dtype=float)
    member = (frame[keys].notna().all(axis=1) & (frame[keys].astype(str) != "").all(axis=1)) if len(frame) else \
        pd.Series(dtype=bool)
    for _, rows in frame[member].groupby(keys, sort=False):
        index = rows.index
        values = {i: seed_values[position[i]] if seed_values is not None else None for i in index}
        seed_level = all(value is not None for value in values.values())
        chosen = HOLM if options is None else procedure(options, table, str(rows[keys[-1]].iloc[0]), seed_level)
        procedures[index] = chosen
        tested = index[rows[p_column].notna().to_numpy()]
        m = len(tested)
        if chosen == DESCRIPTIVE:
            # no verdict is read; the MDE still says what the design could have seen: the t test's at Holm's
            # α/m and the row's df, whatever a floor would have barred
            if m:
                mde[index] = [minimum_detectable_effect(frame.at[i, f"{prefix}se"], frame.at[i, f"{prefix}df"],
                                                        alpha / m, POWER) for i in index]
            continue
        adjusted[eq_column][index] = holm(rows[eq_column].to_numpy())
        if chosen == MAX_T and m:
            units = list(dict.fromkeys(unit for i in tested for unit in values[i]))
            matrix = np.array([[values[i].get(unit, np.nan) for i in tested] for unit in units], dtype=float)
            p_max_t, faced = max_t(matrix, level)
            adjusted[p_column][tested] = p_max_t
            mde[tested] = [minimum_detectable_effect(frame.at[i, f"{prefix}se"], frame.at[i, f"{prefix}df"], a, POWER)
                           if a > 0 else np.inf for i, a in zip(tested, faced)]
            floors[tested] = 2.0 ** (1 - len(units))
        else:
            adjusted[p_column][index] = holm(rows[p_column].to_numpy())
            if m:
                mde[index] = [minimum_detectable_effect(frame.at[i, f"{prefix}se"], frame.at[i, f"{prefix}df"], alpha / m,
                                                        POWER, frame.at[i, f"{prefix}p_floor"]) for i in index]
                floors[index] = frame.loc[index, f"{prefix}p_floor"].astype(float) * m
    frame[f"{prefix}procedure"] = procedures
    frame[f"{prefix}p_holm"] = adjusted[p_column]
    frame[f"{prefix}p_equivalence_holm"] = adjusted[eq_column]
    frame[f"{prefix}mde"] = mde
    frame[f"{prefix}verdict"] = pd.Series([
        verdict(value, p, p_eq, alpha, lower_is_better, floor)
        for value, p, p_eq, floor in zip(frame[estimate], frame[f"{prefix}p_holm"],
                                         frame[f"{prefix}p_equivalence_holm"], floors)],
        index=frame.index, dtype=object)
    return frame


def verdict(difference: float, p_holm: float, p_equivalence_holm: float, alpha: float,
            lower_is_better: bool = False, family_floor: float = 0.0) -> str | None:
    """The rule of the module docstring; None where there is no test (no interval, no family).
    ``family_floor``: the family's size times the test's smallest p."""
    if pd.isna(p_holm) or pd.isna(difference):
        return None
    if p_holm < alpha:
        return AHEAD if (difference > 0) != lower_is_better else BEHIND
    if not pd.isna(p_equivalence_holm) and p_equivalence_holm < alpha:
        return EQUIVALENT
    if not pd.isna(family_floor) and family_floor >= alpha:
        return TOO_FEW
    return UNRESOLVED


def per_seed_text(interval: Interval | None) -> str:
    """The per-seed values of a seed-level interval, "seed:value" separated by spaces (the CSVs' column
    beside every seed-level interval), "" for any other."""
    if interval is None or interval.values is None:
        return ""
    names = interval.seeds if interval.seeds is not None else range(len(interval.values))
    return seed_values_text(names, interval.values)


def seed_values_text(seeds, values) -> str:
    """Per-seed values as the tables' CSVs hold them: "seed:value" separated by spaces."""
    return " ".join(f"{seed}:{value:.6g}" for seed, value in zip(seeds, values))


def post_hoc_margins(tables: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """Every table with its ``equivalent`` verdicts read as :data:`POST_HOC`: for a run whose margins were set
    after its data was seen; the equivalence p-values stay, so a reader sees the TOST and what it is worth."""
    out = {}
    for name, frame in tables.items():
        columns = [c for c in frame.columns if c == "verdict" or c.endswith("_verdict")]
        if columns:
            frame = frame.copy()
            for column in columns:
                frame[column] = frame[column].where(frame[column] != EQUIVALENT, POST_HOC)
        out[name] = frame
    return out

