"""Verdicts: the one rule every comparison table applies, by code, to its intervals.

A comparison is an estimate of a difference (a method minus the baseline, a variant minus SFT, a
factorial effect) with its interval (:mod:`grpo_lambda.stats`). Its columns, with the table's prefix
(``""`` for a table of one statistic, ``"auc_"`` and so on for several):

``df``            degrees of freedom of the t interval (Welch–Satterthwaite; S − 1 for seed-level values)
``p``             two-sided p-value of "no difference", from the same statistic as the interval
``p_holm``        ``p`` adjusted by Holm's step-down method within the comparison's family
``p_equivalence`` the equivalence p-value (two one-sided t tests against ±margin), NaN without a margin
``p_equivalence_holm`` the same, Holm-adjusted within the family
``mde``           the minimum detectable effect: the smallest |difference| a two-sided test at level
                  1 − ``report.level`` (5%) detects with 80% power at this standard error and df,
                  (t_{df, 1 − α/2} + t_{df, 0.80}) · se
``verdict``       ``ahead`` / ``behind`` when ``p_holm`` < α (the sign says which; for a quantity where
                  lower is better, steps to a threshold, a negative difference is ``ahead``),
                  else ``equivalent`` when a margin is set (``report.equivalence_margin``) and
                  ``p_equivalence_holm`` < α, else ``not distinguishable``

The family is every comparison of one table that shares the baseline, the model and training set and
the metric (one benchmark, the average, one training statistic): every method compared with GRPO on the
average accuracy is one family, each benchmark another. So a verdict stands after the other lines of
its comparison are counted. Lines that share seeds and baseline (the five GRPO-λ lines of the
comparison) are correlated: they are one result seen five times, not five results. Holm is valid under
any such dependence, and conservative under it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from grpo_lambda.stats import Interval, holm

AHEAD, BEHIND, EQUIVALENT, UNRESOLVED = "ahead", "behind", "equivalent", "not distinguishable"
POWER = 0.8


def comparison_columns(interval: Interval | None, level: float, margin: float | None, prefix: str = "") -> dict:
    """The raw test columns of one comparison (Holm and the verdict come with :func:`add_verdicts`)."""
    alpha = 1.0 - level
    if interval is None:
        return {f"{prefix}df": np.nan, f"{prefix}p": np.nan, f"{prefix}p_equivalence": np.nan,
                f"{prefix}mde": np.nan}
    return {f"{prefix}df": interval.df, f"{prefix}p": interval.p_value(),
            f"{prefix}p_equivalence": interval.equivalence_p(margin) if margin else np.nan,
            f"{prefix}mde": interval.mde(alpha, POWER)}


def add_verdicts(frame: pd.DataFrame, estimate: str, family: Sequence[str], level: float, prefix: str = "",
                 lower_is_better: bool = False) -> pd.DataFrame:
    """Set ``{prefix}p_holm``, ``{prefix}p_equivalence_holm`` and ``{prefix}verdict`` of ``frame`` (a copy),
    whose ``estimate`` column holds the differences and whose test columns :func:`comparison_columns` wrote.
    Holm runs within each group of equal ``family`` columns."""
    frame = frame.copy()
    for column in ("p", "p_equivalence"):
        source = f"{prefix}{column}"
        if frame.empty:
            frame[f"{source}_holm"] = pd.Series(dtype=float)
            continue
        frame[source] = frame[source].astype(float)
        frame[f"{source}_holm"] = (frame.groupby(list(family), sort=False, dropna=False)[source]
                                   .transform(lambda p: pd.Series(holm(p.to_numpy()), index=p.index)))
    alpha = 1.0 - level
    frame[f"{prefix}verdict"] = pd.Series([
        verdict(value, p, p_eq, alpha, lower_is_better)
        for value, p, p_eq in zip(frame[estimate], frame[f"{prefix}p_holm"], frame[f"{prefix}p_equivalence_holm"])],
        index=frame.index, dtype=object)
    return frame


def verdict(difference: float, p_holm: float, p_equivalence_holm: float, alpha: float,
            lower_is_better: bool = False) -> str | None:
    """The rule of the module docstring; None where there is no test (no interval)."""
    if pd.isna(p_holm) or pd.isna(difference):
        return None
    if p_holm < alpha:
        return AHEAD if (difference > 0) != lower_is_better else BEHIND
    if not pd.isna(p_equivalence_holm) and p_equivalence_holm < alpha:
        return EQUIVALENT
    return UNRESOLVED
