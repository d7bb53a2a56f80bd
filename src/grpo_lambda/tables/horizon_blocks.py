"""A horizon study's generated blocks (report.horizon; grpo_lambda.tables.horizon computes its tables):
``horizon`` (each pair's effect per chain length, its trend and lack of fit), ``horizon_errors`` (where the
first carry error sits, per arm) and ``horizon_finding`` (what the trend says, as sentences: "grows" or
"shrinks" only on a resolved slope, the t test's reading where the family has no verdict)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from grpo_lambda.config import sft_seeds
from grpo_lambda.tables import study_blocks
from grpo_lambda.tables.blocks_text import interval as _interval
from grpo_lambda.tables.blocks_text import level as _level
from grpo_lambda.tables.blocks_text import p_value as _p
from grpo_lambda.tables.blocks_text import procedure_of, signed_number as _signed, table as _table, verdict_of
from grpo_lambda.tables.labels import variant_label
from grpo_lambda.tables.verdicts import AHEAD, BEHIND, EQUIVALENT, TOO_FEW, UNRESOLVED



def horizon(horizon: pd.DataFrame | None) -> str:
    if horizon is None or horizon.empty:
        return "No horizon study (report.horizon) in this run.\n"
    header = ["pair", "chain (columns, tokens)", "SFT accuracy", "in band", "steps with signal", "baseline",
              "treatment",
              "effect [95% CI]", "Holm p", "TOST p (Holm)", "MDE", "verdict", "per seed"]
    lines = []
    for _, row in horizon.iterrows():
        if row["role"] in ("trend", "curvature"):
            what = "**trend**: slope per unit ln(chain length)" if row["role"] == "trend" else \
                "**curvature**: quadratic coefficient on ln(chain length), the slope's lack of fit"
            lines.append([row["pair"], what, "", "", "", "", "",
                          _interval(row["estimate"], row["estimate_low"], row["estimate_high"], True),
                          _p(row["p_holm"]), _p(row["p_equivalence_holm"]), _level(row["mde"]),
                          f"**{verdict_of(row)}**", ""])
            continue
        lines.append([row["pair"], f"{int(row['columns'])}, {row['chain_length']:.0f}",
                      _interval(row["sft_accuracy"], row["sft_accuracy_low"], row["sft_accuracy_high"]),
                      {True: "yes", False: "**no**"}.get(row["in_band"], "–"), _level(row["steps_with_signal"]),
                      _interval(row["baseline_accuracy"], row["baseline_accuracy_low"], row["baseline_accuracy_high"]),
                      _interval(row["treatment_accuracy"], row["treatment_accuracy_low"],
                                row["treatment_accuracy_high"]),
                      _interval(row["estimate"], row["estimate_low"], row["estimate_high"], True),
                      _p(row["p_holm"]), _p(row["p_equivalence_holm"]), _level(row["mde"]), verdict_of(row),
                      _seed_effects(row["per_seed"])])
    return _table(header, lines)


def _seed_effects(text) -> str:
    """A table's "seed:value" per-seed column as "seed: +value; ..." (grpo_lambda.tables.verdicts.seed_values_text)."""
    pairs = (pair.split(":") for pair in (text if isinstance(text, str) else "").split())
    return "; ".join(f"{seed}: {_signed(float(value))}" for seed, value in pairs)


def horizon_errors(config: dict, errors: pd.DataFrame | None) -> str:
    if errors is None or errors.empty:
        return "No horizon study (report.horizon) in this run.\n"
    header = ["chain (columns)", "arm", "greedy chains", "right", "first error a carry", "first error elsewhere",
              "first carry error at (column / columns)"]
    lines = [[str(int(row["columns"])), "SFT" if row["variant"] == "sft" else variant_label(config, row["variant"]),
              str(int(row["answers"])), _level(row["correct"]), _level(row["first_error_carry"]),
              _level(row["first_error_other"]), _level(row["carry_error_position"])]
             for _, row in errors.iterrows()]
    return _table(header, lines)


TREND_WORDS = {AHEAD: "grows with the chain's length", BEHIND: "shrinks as the chain grows",
               EQUIVALENT: "does not change with the chain's length by more than the declared margin",
               UNRESOLVED: "is not resolved", TOO_FEW: "cannot be resolved by this design (too few units)"}


def _t_reading(row) -> str:
    """A comparison without a verdict (a descriptive family), as what its t test alone says: "t p 0.052 at 2
    df, MDE 0.171" (the MDE: what the design could have seen at 80% power)."""
    p_t = row.get("p_t") if not pd.isna(row.get("p_t", np.nan)) else row.get("p")
    return f"t p {_p(p_t)} at {row['df']:.3g} df, MDE {_level(row['mde'])}"


def _horizon_without_verdict(pair: str, what: str, trend, rows: pd.DataFrame, effects: pd.DataFrame, span: str,
                             runs: str) -> str:
    """A pair whose trend is published without a verdict (report.descriptive): its numbers and what its t
    tests alone say, each with the smallest effect the design could have seen."""
    bend = rows[rows["role"] == "curvature"]
    shape = "" if bend.empty else (
        f"; its lack of fit (the quadratic coefficient on ln(chain length)) "
        f"{_interval(bend.iloc[0]['estimate'], bend.iloc[0]['estimate_low'], bend.iloc[0]['estimate_high'], True)}, "
        f"{_t_reading(bend.iloc[0])}")
    per = "; ".join(f"{int(r['columns'])} columns {_interval(r['estimate'], r['estimate_low'], r['estimate_high'], True)}"
                    f" ({_t_reading(r)})" for _, r in effects.iterrows())
    return (f"- **{pair}** ({what}): no verdict at {runs} (published without one: a verdict read over SFT models "
            f"needs 6 of them, `grpo-lambda design-check`). The slope of the effect on held-out accuracy "
            f"{_interval(trend['estimate'], trend['estimate_low'], trend['estimate_high'], True)} per unit ln(chain length) over {span}, {_t_reading(trend)}{shape}. Per horizon: "
            f"{per}.")


def horizon_finding(config: dict, horizon: pd.DataFrame | None, options: dict) -> str:
    """The trend's verdict and the per-horizon effects of each pair, as sentences: "grows" or "shrinks"
    only on a resolved slope, "does not change" only on a TOST verdict, else "not resolved at N seeds";
    then, once, whether the design's band held and how far each arm was from a floor or a ceiling."""
    if horizon is None or horizon.empty:
        return "No horizon study (report.horizon) in this run.\n"
    design = options["horizon"]
    sentences = []
    for pair, rows in horizon.groupby("pair", sort=False):
        effects, trend = rows[rows["role"] == "effect"], rows[rows["role"] == "trend"].iloc[0]
        spec = design["pairs"][pair]
        seeds = int(effects["seeds"].min()) if effects["seeds"].notna().all() else 0
        drawn = len(sft_seeds(config) or [None])
        runs = f"{seeds} seeds" + (f" on {drawn} SFT models a horizon" if drawn > 1 else "")
        what = (f"{variant_label(config, spec['treatment'])} − {variant_label(config, spec['baseline'])}"
                + (", exploratory" if spec.get("exploratory") else ""))
        verdict = trend["verdict"]
        slope = _interval(trend["estimate"], trend["estimate_low"], trend["estimate_high"], True)
        span = (f"{effects['chain_length'].min():.0f} to {effects['chain_length'].max():.0f} tokens")
        if procedure_of(trend) == "descriptive" and not pd.isna(trend["estimate"]):
            sentences.append(_horizon_without_verdict(pair, what, trend, rows, effects, span, runs))
            if drawn > 1:
                sentences.append(study_blocks.by_sft_model(
                    config, [(f"{int(r['columns'])} columns", r["per_seed"]) for _, r in effects.iterrows()]))
            continue
        if verdict is None:
            sentences.append(f"- **{pair}** ({what}): no trend yet (a horizon lacks an arm).")
            continue
        words = TREND_WORDS[verdict]
        if verdict == UNRESOLVED:
            words += f" at {runs}: neither a growth nor its absence is shown"
        elif verdict in (AHEAD, BEHIND) and trend["p_equivalence_holm"] < 1 - float(options["level"]):
            words += ", by less than the declared margin (TOST)"
        margin = design["equivalence_margin"].get("slope")
        tost = f", TOST p {_p(trend['p_equivalence_holm'])} against ±{margin}" if margin else ""
        per = "; ".join(f"{int(r['columns'])} columns "
                        f"{_interval(r['estimate'], r['estimate_low'], r['estimate_high'], True)}"
                        f" ({r['verdict'] or '–'})" for _, r in effects.iterrows())
        bend = rows[rows["role"] == "curvature"]
        shape = ""
        if len(bend):
            bend = bend.iloc[0]
            shape = (f"; its lack of fit (the quadratic coefficient on ln(chain length)) "
                     f"{_interval(bend['estimate'], bend['estimate_low'], bend['estimate_high'], True)}, Holm p "
                     f"{_p(bend['p_holm'])}: " + ("**the trend is not a straight line in ln(chain length)**"
                                                 if bend["verdict"] in (AHEAD, BEHIND) else
                                                 f"no curvature resolved at {runs}"))
        sentences.append(f"- **{pair}** ({what}): the effect on held-out accuracy {words} (slope {slope} per unit "
                         f"ln(chain length) over {span}, Holm p {_p(trend['p_holm'])}{tost}{shape}). "
                         f"Per horizon: {per}.")
        if drawn > 1:
            sentences.append(study_blocks.by_sft_model(
                config, [(f"{int(r['columns'])} columns", r["per_seed"]) for _, r in effects.iterrows()]))
    effects = horizon[horizon["role"] == "effect"]
    horizons = effects.drop_duplicates(["model", "dataset"])
    outside = horizons[horizons["in_band"] == False]  # noqa: E712 (None: no band declared)
    if len(outside):
        low, high = design["band"]
        where = "; ".join(f"{int(r['columns'])} columns {_level(r['sft_accuracy'])}" for _, r in outside.iterrows())
        sentences.append("  **The design's difficulty band did not hold**: the SFT model's greedy accuracy lies "
                         "outside "
                         f"the declared [{low:.2f}, {high:.2f}] at {where}. An effect at a floor or a ceiling says "
                         "nothing, so a trend that includes it does not answer whether the effect grows with the "
                         "chain; only the horizons inside the band can be read.")
    arms, sft = pd.concat([effects["baseline_accuracy"], effects["treatment_accuracy"]]), horizons["sft_accuracy"]
    sentences.append(f"  The SFT models' greedy accuracy on their own suite: {_level(sft.min())} to "
                     f"{_level(sft.max())}; RL steps with signal: "
                     f"{_level(effects['steps_with_signal'].min())} to {_level(effects['steps_with_signal'].max())}; "
                     f"every arm's accuracy after RL: {_level(arms.min())} to {_level(arms.max())}.")
    return "\n".join(sentences) + "\n"
