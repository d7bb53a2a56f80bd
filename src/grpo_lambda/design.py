"""``grpo-lambda design-check``: a study's comparison families before it runs, and, with a pilot run's
variances, the smallest effect each can detect and the units a stated effect needs.

Per family the tables will declare (grpo_lambda.config.families.declared_families): its size m, the units
its tests have (RL seeds, or SFT models under ``sft.seeds``), the smallest p one test can give (the
sign-flip floor 2^(1−n) of a seed-level test, 0 of a t test), whether the family's procedure can reject at
all (Holm: m · floor < α; max-T: floor < α), and the units it would need.

With ``--pilot DIR`` (a published run's folder or its ``raw/``: grpo_lambda.tables.build.rebuild) each
family's comparisons in the pilot's tables give their standard errors; scaled to the study's units as
se · √(n_pilot / n) (the seeds' part of the variance shrinks as 1/n; the problems' part does not, so where
problems dominate, the df column far above n − 1, the prediction is optimistic), the minimum detectable
effect at 80% power at Holm's first step α/m (max-T's first step is at least as lenient), and with
``--effect X`` the fewest units at which the family's median comparison detects |X| (X an accuracy
difference; ``--effect reward_auc=X``, ``steps=X``, ``slope=X`` for the families of those metrics). A pilot run with one
SFT model holds none of the SFT models' own spread: the prediction for a study of several SFT models is
then a lower bound.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from grpo_lambda.config.family_names import DESCRIPTIVE, HOLM, MAX_T
from grpo_lambda.config.families import MIN_NORMAL_UNITS, Family, declared_families, units
from grpo_lambda.config.report import report_options
from grpo_lambda.config.settings import sft_seed_of, sft_seeds
from grpo_lambda.stats import minimum_detectable_effect

POWER = 0.8
MOST_UNITS = 256  # the units --effect searches up to
METRICS = ("accuracy", "reward_auc", "steps", "slope")  # grpo_lambda.config.families.Family.metric
COLUMNS = ["table", "model", "dataset", "family", "key", "metric", "m", "units", "floor", "procedure", "reachable",
           "can_reject",
           "units_needed", "pilot_comparisons", "pilot_units", "mde", "mde_widest", "mde_t", "units_for_effect"]


def pilot_tables(folder: str | Path, config: dict) -> tuple[dict, dict[str, pd.DataFrame]]:
    """The config and tables of a pilot run: its raw files (DIR/raw or DIR itself) rebuilt, only the tables
    that ``config``'s declared families are read from (the rest of a run's tables is most of the rebuild)."""
    from grpo_lambda.tables.build import rebuild

    folder = Path(folder)
    tables = {family.table for family in declared_families(config, report_options(config))}
    return rebuild(folder / "raw" if (folder / "raw" / "config.yaml").is_file() else folder, only=tables)


def pilot_rows(family: Family, tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The comparisons of ``family`` in the pilot's tables: the same table and family name, in the same model
    and training set where the pilot has them (else wherever the pilot has that family); those with a
    standard error above 0 (a check line identical to its baseline has none)."""
    frame = tables.get(family.table, pd.DataFrame())
    if frame.empty or family.column not in frame:
        return frame.iloc[0:0]
    rows = frame[frame[family.column] == family.name]
    for key, value in (("model", family.model), ("dataset", family.dataset)):
        if value and key in rows and (rows[key] == value).any():
            rows = rows[rows[key] == value]
    se = rows[f"{family.prefix}se"].astype(float)
    return rows[np.isfinite(se) & (se > 0)]


def scaled_mde(se: float, df: float, pilot_units: int, n: int, family: Family, alpha: float) -> float:
    """The MDE at Holm's first step α/m of a comparison whose pilot standard error ``se`` (with ``df``) came
    from ``pilot_units`` units, at ``n`` units (:func:`t_mde`), infinite where the family's own floor at n
    units (Family.family_floor: a sign-flip test's, and below 6 SFT models no verdict) cannot reach α."""
    if n < 2:
        return math.inf
    if (family.seed_level or family.over_sft_models) and replace(family, units=n).family_floor() >= alpha:
        return math.inf
    return t_mde(se, df, pilot_units, n, family, alpha)


def t_mde(se: float, df: float, pilot_units: int, n: int, family: Family, alpha: float) -> float:
    """The t test's MDE at α/m at ``n`` units, whatever the family's floor: se·√(n_pilot/n), df n − 1 for a
    seed-level family or one read over SFT models (the units', never the problems'), else the pilot's df
    scaled by (n − 1)/(n_pilot − 1)."""
    if n < 2:
        return math.inf
    se_n = se * math.sqrt(pilot_units / n)
    if family.seed_level or family.over_sft_models:
        return minimum_detectable_effect(se_n, n - 1, alpha / family.size, POWER)
    df_n = df * (n - 1) / (pilot_units - 1) if pilot_units > 1 and math.isfinite(df) else df
    return minimum_detectable_effect(se_n, df_n, alpha / family.size, POWER)


def parse_effects(given: list[str] | None) -> dict[str, float]:
    """``--effect`` values: ``X`` (an accuracy difference) or ``METRIC=X`` (METRICS), by metric."""
    effects = {}
    for text in given or []:
        metric, _, value = text.rpartition("=")
        metric = metric or "accuracy"
        if metric not in METRICS:
            raise ValueError(f"--effect {text}: {metric!r} is not a metric (one of {', '.join(METRICS)})")
        try:
            effects[metric] = abs(float(value))
        except ValueError:
            raise ValueError(f"--effect {text}: {value!r} is not a number") from None
    return effects


def design_table(config: dict, pilot: tuple[dict, dict] | None = None,
                 effects: dict[str, float] | None = None) -> pd.DataFrame:
    """One row per declared family of ``config`` (:data:`COLUMNS`); the pilot's columns NaN without one, the
    units for an effect NaN where ``effects`` (by metric, :func:`parse_effects`) gives none for its metric."""
    effects = effects or {}
    options = report_options(config)
    alpha = 1 - float(options["level"])
    n, _ = units(config)
    pilot_n = units(pilot[0])[0] if pilot else 0
    rows = []
    for family in declared_families(config, options):
        row = {"table": family.table, "model": family.model, "dataset": family.dataset, "family": family.label,
               "key": family.key, "metric": family.metric, "m": family.size, "units": n, "floor": family.floor(),
               "procedure": family.procedure, "reachable": family.reachable(alpha), "can_reject": _can_reject(family, alpha),
               "units_needed": family.units_needed(alpha, HOLM if family.procedure == DESCRIPTIVE else None),
               "pilot_comparisons": 0, "pilot_units": pilot_n, "mde": np.nan, "mde_widest": np.nan,
               "mde_t": np.nan, "units_for_effect": np.nan}
        if pilot:
            found = pilot_rows(family, pilot[1])
            if len(found):
                se = found[f"{family.prefix}se"].astype(float).to_numpy()
                df = found[f"{family.prefix}df"].astype(float).to_numpy()
                typical = int(np.argsort(se)[len(se) // 2])  # the median comparison (the upper of two middles)
                # the widest is the largest MDE, not the largest se: a row's own df moves its t quantile
                mdes = [scaled_mde(se[i], df[i], pilot_n, n, family, alpha) for i in range(len(se))]
                row.update(pilot_comparisons=len(found), mde=mdes[typical], mde_widest=max(mdes),
                           mde_t=t_mde(se[typical], df[typical], pilot_n, n, family, alpha))
                if family.metric in effects:
                    row["units_for_effect"] = next(
                        (k for k in range(2, MOST_UNITS + 1)
                         if scaled_mde(se[typical], df[typical], pilot_n, k, family, alpha) <= effects[family.metric]),
                        math.inf)
        rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)


def _can_reject(family: Family, alpha: float) -> str:
    """"yes", "NO" (validate refuses the study), "no test" (one unit) or, for a descriptive family, whether
    Holm could have rejected; a family read over SFT models says on which test."""
    if (family.seed_level or family.over_sft_models) and family.units < 2:
        return "no test (1 unit)"
    if family.procedure == DESCRIPTIVE:
        tested = replace(family, procedure=HOLM).reachable(alpha)
        return f"{'yes' if tested else 'no'}, descriptive"
    if not family.reachable(alpha):
        return "NO"
    if family.over_sft_models:
        return "yes, t (df K−1)" + (" alone" if family.floor() == 0 else " and exact")
    return "yes"


def nesting(config: dict) -> str:
    """Which RL seeds start from which SFT model, as a line: "RL seeds 8–11 start from SFT seed 1, ..."."""
    starts: dict[int, list[int]] = {}
    for seed in config["seeds"]:
        starts.setdefault(sft_seed_of(config, seed), []).append(seed)
    return "RL seeds " + "; ".join(f"{_span(seeds)} start from SFT seed {sft}"
                                   for sft, seeds in ((s, starts.get(s, [])) for s in sft_seeds(config))) + "."


def _span(seeds: list[int]) -> str:
    seeds = sorted(seeds)
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}–{seeds[-1]}"
    return ", ".join(map(str, seeds)) or "none"


def _number(value, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float) and math.isinf(value):
        return "none"
    return f"{value:.{digits}g}" if isinstance(value, float) else str(value)


def render(table: pd.DataFrame, config: dict, pilot: str | None, effects: dict[str, float] | None = None) -> str:
    """The design table as text: one line per family, then what the columns mean."""
    n, what = units(config)
    effects = effects or {}
    header = ["table", "where", "family", "m", what, "floor", "procedure", "can reject", f"{what} needed"]
    if pilot:
        header += ["MDE median", "MDE widest"] + ([f"{what} for the effect"] if effects else [])
    lines = []
    for row in table.itertuples():
        where = f"{row.model}/{row.dataset}" if row.dataset else row.model
        cells = [row.table, where, row.family, str(row.m), str(row.units), _number(row.floor), row.procedure,
                 row.can_reject, str(row.units_needed)]
        if pilot:
            median = _number(row.mde) if math.isfinite(row.mde) or math.isnan(row.mde_t) else \
                f"none (t alone {_number(row.mde_t)})"
            cells += ["no pilot rows", "–"] if not row.pilot_comparisons else [median, _number(row.mde_widest)]
            if effects:
                cells += [(f"none up to {MOST_UNITS}" if math.isinf(row.units_for_effect) else str(int(row.units_for_effect)))
                          if row.metric in effects and row.pilot_comparisons else "–"]
        lines.append(cells)
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *lines)]
    text = [" | ".join(str(cell).ljust(width) for cell, width in zip(cells, widths)) for cells in [header, *lines]]
    notes = [f"{len(table)} families at {n} {what}; {int((~table['reachable']).sum())} cannot reject."]
    if what == "SFT models":
        notes.append(nesting(config))
        notes.append("An accuracy family is read over the SFT models: its t test has df K − 1, the exact sign-flip "
                     "test over them backs each verdict within a training set (floor 2^(1−K)), and below "
                     f"{MIN_NORMAL_UNITS} SFT models no verdict stands (docs/statistics.md).")
    if pilot:
        notes.append(f"MDE: 80% power at α/m, from {pilot}'s standard errors scaled to {n} {what} "
                     "(se·√(n_pilot/n): optimistic where problems dominate the variance), in each family's metric; "
                     "the median comparison's and the largest; \"none\" where the family cannot reject (with the t test's "
                     "own MDE at its df, were its floor no bar).")
        if effects:
            notes.append(f"{what} for the effect: the fewest at which the median comparison detects "
                         + ", ".join(f"{metric} {value:g}" for metric, value in effects.items()) + ".")
        if what == "SFT models":
            notes.append("The pilot's standard errors hold the spread of RL seeds on its SFT model(s); with one SFT "
                         "model they hold none of the SFT models' own spread, and the MDE is a lower bound.")
    if (table["procedure"] == HOLM).any() and (~table["reachable"]).any():
        notes.append(f"A family that cannot reject: more {what}, report.multiplicity {{key: {MAX_T}}} for a "
                     "seed-level family (floor 2^(1-n) whatever m), or report.descriptive: [key].")
    return "\n".join(text + [""] + notes) + "\n"
