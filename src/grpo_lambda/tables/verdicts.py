"""Verdicts: the one rule every comparison table applies, by code, to its intervals.

A comparison is an estimate of a difference (a method minus the baseline, a variant minus SFT, a
factorial effect) with its interval (:mod:`grpo_lambda.stats`). Its columns, with the table's prefix
(``""`` for a table of one statistic, ``"auc_"`` and so on for several):

``family``        the comparison's Holm family (a name; empty: in no family, e.g. a row that repeats
                  another or has no test); ``role`` says what the family is for: ``primary`` (the one
                  family per study the headline rests on, ``report.primary``), ``exploratory`` (per-suite
                  rows, AUC, diagnostics: their own families), ``check`` (a line that should equal its
                  baseline, ``report.checks``: a family of its own, counted in no other)
``se``, ``df``    the standard error and degrees of freedom of the interval
``p``             two-sided p-value of "no difference", from the same statistic as the interval (the exact
                  sign-flip test for per-seed values, grpo_lambda.stats.seed_interval)
``p_floor``       the smallest p that test can give (2^(1−n) for n seeds, 0 for a t test)
``p_holm``        ``p`` adjusted by Holm's step-down method within the family
``p_equivalence`` the equivalence p-value (two one-sided tests against ±margin, the margin of the row's own
                  metric, ``report.equivalence_margin``), NaN without a margin
``p_equivalence_holm`` the same, Holm-adjusted within the family
``mde``           the minimum detectable effect at the level the verdict faces: the smallest |difference| a
                  two-sided test at α/m (m the family's size, Holm's first step) detects with 80% power at
                  this standard error and df, (t_{df, 1 − α/(2m)} + t_{df, 0.80}) · se; infinite where the
                  test cannot reach α/m at all
``verdict``       ``ahead`` / ``behind`` when ``p_holm`` < α (the sign says which; for a quantity where
                  lower is better, a negative difference is ``ahead``), else ``equivalent`` when
                  ``p_equivalence_holm`` < α (Holm-adjusted, never the unadjusted p), else ``too few seeds``
                  when m · ``p_floor`` ≥ α (no outcome of the seeds could reject: a sign-flip test of 4
                  seeds), else ``not distinguishable``

Why Holm within declared families: a verdict stands after the other tests of its question are counted,
and a row is counted once. Lines that share seeds and baseline are correlated; Holm is valid under any
such dependence, and conservative under it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from grpo_lambda.stats import Interval, holm, minimum_detectable_effect

AHEAD, BEHIND, EQUIVALENT, UNRESOLVED, TOO_FEW = "ahead", "behind", "equivalent", "not distinguishable", \
    "too few seeds"
PRIMARY, EXPLORATORY, CHECK = "primary", "exploratory", "check"
POWER = 0.8


def comparison_columns(interval: Interval | None, level: float, margin: float | None, prefix: str = "") -> dict:
    """The raw test columns of one comparison (Holm, the MDE and the verdict come with :func:`add_verdicts`).
    ``margin`` must be the margin of this comparison's own metric."""
    if interval is None:
        return {f"{prefix}se": np.nan, f"{prefix}df": np.nan, f"{prefix}p": np.nan, f"{prefix}p_floor": np.nan,
                f"{prefix}p_equivalence": np.nan}
    return {f"{prefix}se": interval.se, f"{prefix}df": interval.df, f"{prefix}p": interval.p_value(),
            f"{prefix}p_floor": interval.p_floor(),
            f"{prefix}p_equivalence": interval.equivalence_p(margin) if margin else np.nan}


def add_verdicts(frame: pd.DataFrame, estimate: str, family: Sequence[str], level: float, prefix: str = "",
                 lower_is_better: bool = False) -> pd.DataFrame:
    """Set ``{prefix}p_holm``, ``{prefix}p_equivalence_holm``, ``{prefix}mde`` and ``{prefix}verdict`` of
    ``frame`` (a copy), whose ``estimate`` column holds the differences and whose test columns
    :func:`comparison_columns` wrote. Holm runs within each group of equal ``family`` columns; a row with
    an empty family column is in no family (no adjusted p, no verdict)."""
    frame = frame.copy()
    alpha = 1.0 - level
    keys = list(family)
    member = frame[keys].notna().all(axis=1) & (frame[keys].astype(str) != "").all(axis=1) if len(frame) else \
        pd.Series(dtype=bool)
    sizes = pd.Series(np.nan, index=frame.index, dtype=float)
    for column in ("p", "p_equivalence"):
        source = f"{prefix}{column}"
        frame[f"{source}_holm"] = np.nan
        if frame.empty:
            continue
        frame[source] = frame[source].astype(float)
        inside = frame[member]
        if not inside.empty:
            frame.loc[member, f"{source}_holm"] = (
                inside.groupby(keys, sort=False)[source].transform(lambda p: pd.Series(holm(p.to_numpy()), index=p.index)))
            if column == "p":
                sizes[member] = inside.groupby(keys, sort=False)[source].transform(lambda p: float(p.notna().sum()))
    frame[f"{prefix}mde"] = [minimum_detectable_effect(se, df, alpha / m, POWER, floor) if m and not pd.isna(m) else np.nan
                             for se, df, floor, m in zip(frame[f"{prefix}se"], frame[f"{prefix}df"],
                                                         frame[f"{prefix}p_floor"], sizes)] if len(frame) else []
    frame[f"{prefix}verdict"] = pd.Series([
        verdict(value, p, p_eq, alpha, lower_is_better, floor * m if not pd.isna(m) else np.nan)
        for value, p, p_eq, floor, m in zip(frame[estimate], frame[f"{prefix}p_holm"],
                                             frame[f"{prefix}p_equivalence_holm"], frame[f"{prefix}p_floor"], sizes)],
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
