"""Generated blocks of a run's page that say what the study was and what it found beyond the comparison
tables (grpo_lambda.tables.blocks holds those): ``control`` and ``control_finding`` (a control study's
effects against their declared directions, report.control), ``factorial_finding`` (a 2 × 2's primary simple
effects as one sentence a factor: what a headline quotes), ``history`` (which seeds were fresh, and what was
decided after earlier data was seen, report.history)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from grpo_lambda.config import sft_seeds
from grpo_lambda.config.history import own_sft_seeds
from grpo_lambda.provenance import is_ancestor
from grpo_lambda.tables.blocks_text import adjusted_p, interval, level, p_value, signed_number, table
from grpo_lambda.tables.labels import variant_label
from grpo_lambda.tables.verdicts import AHEAD, BEHIND, EQUIVALENT


def control(config: dict, frame: pd.DataFrame | None) -> str:
    if frame is None or frame.empty:
        return "No control study (report.control) in this run.\n"
    dose = "level" in frame.columns
    header = ["level (relative weight r)" if dose else "training set", "predicted", "SFT accuracy",
              "steps with signal", "baseline", "treatment", "effect [95% CI]", "Holm p", "MDE", "verdict", "outcome"]
    rows = []
    for _, row in frame.iterrows():
        if row["role"] in ("contrast", "trend"):
            rows.append([f"**{row['role']}** {row['dataset']}", row["predicted"], "", "", "", "",
                         interval(row["estimate"], row["estimate_low"], row["estimate_high"], True),
                         p_value(row["p_holm"]), level(row["mde"]), f"**{row['verdict'] or '–'}**",
                         f"**{row['outcome']}**"])
            continue
        rows.append([_level_name(row), row["predicted"],
                     interval(row["sft_accuracy"], row["sft_accuracy_low"], row["sft_accuracy_high"]),
                     level(row["steps_with_signal"]),
                     interval(row["baseline_accuracy"], row["baseline_accuracy_low"], row["baseline_accuracy_high"]),
                     interval(row["treatment_accuracy"], row["treatment_accuracy_low"], row["treatment_accuracy_high"]),
                     interval(row["estimate"], row["estimate_low"], row["estimate_high"], True),
                     p_value(row["p_holm"]), level(row["mde"]), row["verdict"] or "–", row["outcome"]])
    return table(header, rows)


def _level_name(row) -> str:
    """A control row's name: its training set, or a dose's level with its relative weight."""
    if "level" not in row or pd.isna(row.get("relative_weight")):
        return row["dataset"]
    return f"{row['level']} (r {row['relative_weight']:.3g})"


def control_finding(config: dict, frame: pd.DataFrame | None, options: dict) -> str:
    """What the control shows, as sentences: each effect's outcome against its prediction, then what that
    says of the instrument."""
    if frame is None or frame.empty:
        return "No control study (report.control) in this run.\n"
    if "level" in frame.columns:
        return dose_finding(config, frame, options)
    design = options["control"]
    pair = f"{variant_label(config, design['pair']['treatment'])} − {variant_label(config, design['pair']['baseline'])}"
    drawn = len(sft_seeds(config) or [None])
    effects = frame[frame["role"] == "effect"]
    runs = _runs(effects, drawn, " a training set")
    lines = []
    for _, row in frame.iterrows():
        name = f"the contrast {row['dataset']}" if row["role"] == "contrast" else row["dataset"]
        effect = interval(row["estimate"], row["estimate_low"], row["estimate_high"], True)
        if row.get("procedure") == "descriptive":
            lines.append(f"- **{name}** (predicted {row['predicted']}): {pair} {effect}, t p {p_value(_t_p(row))} at "
                         f"{row['df']:.3g} df, MDE {level(row['mde'])}: **no verdict** (published without one).")
            continue
        lines.append(f"- **{name}** (predicted {row['predicted']}): {pair} {effect}, Holm p {p_value(row['p_holm'])}: "
                     f"**{row['outcome']}**" + (f" at {runs}" if row["outcome"] == "not resolved" else "") + ".")
    if drawn > 1:
        lines.append(by_sft_model(config, [(r["dataset"], r["per_seed"]) for _, r in effects.iterrows()]))
    lines.append(_reach(frame, effects, runs))
    return "\n".join(lines) + "\n"


def dose_finding(config: dict, frame: pd.DataFrame, options: dict) -> str:
    """A dose-response control in sentences: each level's effect against its prediction, the trend's one-sided
    verdict, the SFT models' own effects, then the instrument's reach in numbers: the smallest level resolved
    as predicted, and the effect the levels' and the trend's MDEs say the design could have seen."""
    baseline = variant_label(config, options["control"]["pair"]["baseline"])
    drawn = len(sft_seeds(config) or [None])
    effects = frame[frame["role"] == "effect"]
    runs = _runs(effects, drawn, " a training set" if len(set(effects["dataset"])) > 1 else "")
    lines = []
    for _, row in effects.iterrows():
        effect = interval(row["estimate"], row["estimate_low"], row["estimate_high"], True)
        lines.append(f"- **{_level_name(row)}** (predicted {row['predicted']}): {variant_label(config, row['treatment'])}"
                     f" − {baseline} {effect}, {_verdict_p(row)}, MDE {level(row['mde'])}: **{row['outcome']}**.")
    for _, row in frame[frame["role"] == "trend"].iterrows():
        effect = interval(row["estimate"], row["estimate_low"], row["estimate_high"], True)
        lines.append(f"- **the trend**, the {row['dataset']} (predicted {row['predicted']}, one-sided): {effect} per "
                     f"unit ln r, {_verdict_p(row)}, MDE {level(row['mde'])}: **{row['outcome']}**.")
    if drawn > 1:
        lines.append(by_sft_model(config, [(r["level"], r["per_seed"]) for _, r in effects.iterrows()]))
    resolved = effects[effects["outcome"] == "as predicted"].sort_values("relative_weight")
    mdes = effects["mde"].astype(float)
    smallest = (f"the smallest level resolved as predicted is {_level_name(resolved.iloc[0])}, its effect "
                f"{signed_number(resolved.iloc[0]['estimate'])}" if len(resolved) else "no level is resolved as predicted")
    if len(mdes) and np.isfinite(mdes).all():
        spans = f" to {level(mdes.max())}" if mdes.max() > mdes.min() + 5e-4 else ""
        reach = (f"a level's MDE is {level(mdes.min())}{spans}: a single effect smaller than that, such as the ±0.03 "
                 "a horizon question asks about, this design would usually miss on its own")
    else:
        reach = "a level's effect cannot be resolved at this many SFT models"
    lines.append(f"  At {runs}, {smallest}; {reach}.")
    trend = frame[frame["role"] == "trend"]
    if len(trend) and np.isfinite(float(trend.iloc[0]["mde"])):
        spread = np.log(effects["relative_weight"].astype(float))
        mde = float(trend.iloc[0]["mde"])
        lines.append(f"  The trend's MDE is {level(mde)} per unit ln r: across these levels (ln r {spread.min():.2f} to "
                     f"{spread.max():.2f}) it sees an effect that rises by {level(mde * (spread.max() - spread.min()))} "
                     "or more from the lowest dose to the highest, with 80% power.")
    return "\n".join(lines) + "\n"


def _runs(effects: pd.DataFrame, drawn: int, each: str) -> str:
    """"12 RL seeds on 3 SFT models a training set": the fewest RL seeds an effect had, and the SFT models."""
    seeds = int(effects["seeds"].min()) if len(effects) and effects["seeds"].notna().all() else 0
    return f"{seeds} RL seeds" + (f" on {drawn} SFT models{each}" if drawn > 1 else " on one SFT model")


def _verdict_p(row) -> str:
    if row.get("procedure") == "descriptive":
        return f"t p {p_value(_t_p(row))} at {row['df']:.3g} df, no verdict (descriptive)"
    return f"Holm p {p_value(row['p_holm'])}"


def _t_p(row) -> float:
    return row["p_t"] if "p_t" in row and not pd.isna(row["p_t"]) else row["p"]


def _reach(frame: pd.DataFrame, effects: pd.DataFrame, runs: str) -> str:
    """What the control says of the instrument, in numbers: the effects it resolved and the smallest effect it
    could have seen (the MDE), never more than that."""
    mdes = effects["mde"].astype(float)
    seen = f"{level(mdes.min())}" + (f" to {level(mdes.max())}" if mdes.max() > mdes.min() + 5e-4 else "")
    positive = effects[effects["predicted"] == "ahead"]
    if "procedure" in frame and (frame["procedure"] == "descriptive").all():
        return (f"  At {runs} no verdict is read (a verdict over SFT models needs 6). What this design could have "
                f"seen: an effect of {seen} or more, with 80% power; a smaller one, such as the ±0.03 a horizon "
                "question asks about, it would usually miss.")
    if len(positive) and (positive["outcome"] == "as predicted").all():
        return (f"  The instrument resolves the trace's effect where its gradient says it must be, at this size; "
                f"its MDE here is {seen}: a null elsewhere on this model and budget rules out effects of about "
                "that size, not smaller ones.")
    return (f"  The trace is not resolved even where its gradient says it must be; this design's MDE is {seen}: a "
            "null elsewhere says as much about the instrument as about the trace.")


def sft_model_means(config: dict, text) -> str:
    """A per-seed column ("seed:value ...") as the mean effect of each SFT model's block of RL seeds, in
    sft.seeds order: how far apart the SFT models put the effect, beside the interval that counts them."""
    from grpo_lambda.config import sft_seed_of

    values = {}
    for pair in (text if isinstance(text, str) else "").split():
        seed, value = pair.split(":")
        values.setdefault(sft_seed_of(config, int(seed)), []).append(float(value))
    return ", ".join(signed_number(float(np.mean(values[s]))) if s in values else "–" for s in sft_seeds(config))


def by_sft_model(config: dict, named_per_seed: list[tuple[str, str]]) -> str:
    """A finding's line of each SFT model's mean effect, one entry per (name, per-seed column)."""
    return ("  By SFT model (the mean effect over its RL seeds, SFT seeds "
            f"{', '.join(str(s) for s in sft_seeds(config))}): "
            + "; ".join(f"{name} {sft_model_means(config, per_seed)}" for name, per_seed in named_per_seed) + ".")


def factorial_finding(config: dict, frame: pd.DataFrame | None, options: dict) -> str:
    """The primary family of a 2 × 2 (report.primary: factorial) as one bold sentence a factor, its two simple
    effects each with its verdict, interval and adjusted p; the factor with more effects ahead or behind first. What
    the README's headline is, written from the table so that it says what the run shows, whichever way."""
    rows = frame[(frame["family"] == "primary") & (frame["kind"] == "simple")] if frame is not None and \
        not frame.empty and options.get("primary") == "factorial" else None
    if rows is None or rows.empty:
        return "No factorial primary family (report.primary: factorial) in this run.\n"
    margin = options["equivalence_margin"].get("accuracy")
    factors = list(options["factorial"]["factors"])
    by_factor = {f: rows[rows["effect"].str.startswith(f"{f} with ")] for f in factors}
    factors.sort(key=lambda f: (-by_factor[f]["verdict"].isin([AHEAD, BEHIND]).sum(),
                                -(by_factor[f]["verdict"] == EQUIVALENT).sum()))
    sentences = []
    for factor in factors:
        clauses = []
        for _, row in by_factor[factor].iterrows():
            other = row["effect"].removeprefix(f"{factor} with ")
            effect = interval(row["estimate"], row["estimate_low"], row["estimate_high"], True)
            if row["verdict"] == EQUIVALENT:
                clauses.append(f"within ±{margin:g} of no {factor} with the {other} ({effect}, TOST Holm p "
                               f"{p_value(row['p_equivalence_holm'])})")
            else:
                said = row["verdict"] if row["verdict"] in (AHEAD, BEHIND) else "not resolved"
                clauses.append(f"{said} with the {other} ({effect}, {adjusted_p(row)})")
        sentences.append(f"the {factor} is " + " and ".join(clauses))
    sft = rows["sft_models"].dropna()
    over = (f"Over {int(sft.max())} SFT models ({int(rows['seeds'].max())} RL seeds)" if len(sft) and sft.max() > 1
            else f"On one SFT model ({int(rows['seeds'].max())} RL seeds)")
    return f"**{over}, {'; '.join(sentences)}.**\n"


UNCHECKED = "not checked here: this checkout's history lacks a commit"


def history(config: dict, options: dict, info: dict | None = None, ancestor=is_ancestor) -> str:
    """The run's seeds against the study's earlier runs', the draws it shares with earlier runs, what it
    declared before the run (each item's commit checked against git: declared before the run only where it
    is an ancestor of every commit that made the run, ``info``'s made_by), and the design choices made after
    data was seen. ``ancestor(commit, of)``: True, False, or None where git cannot tell."""
    record = options["history"]
    before = record["seeds_run_before"]
    lines = [f"- RL seeds {_span(config['seeds'])}, SFT seeds {_span(own_sft_seeds(config))}"
             + (f"; the study's earlier runs used RL seeds {_span(before['rl'])} and SFT seeds "
                f"{_span(before['sft'])}: none is reused here" if before["rl"] or before["sft"]
                else "; no earlier run's seeds declared")
             + "."]
    lines += [f"- Shared with an earlier run (not a fresh draw): {d['what']} ({d['run']})."
              for d in record.get("shared_with_earlier_runs", [])]
    run_commits = [c for c in ((info or {}).get("made_by") or {}).get("commits", []) if c]
    before_run, during_or_after, unchecked = [], [], []
    for declared in record.get("declared", []):
        answers = [ancestor(declared["commit"], run) for run in run_commits]
        if not run_commits or None in answers:
            unchecked.append(declared)
        elif all(answers):
            before_run.append(declared)
        else:
            during_or_after.append(declared)
    run = ", ".join(f"`{c[:7]}`" for c in run_commits)
    if before_run:
        lines.append(f"- Declared before the run (each commit an ancestor of the run's, {run}, by git):")
        lines += [f"  - {d['item']} (`{d['commit'][:7]}`)" for d in before_run]
    if during_or_after:
        lines.append(f"- Declared during or after the run (the commit is not an ancestor of the run's, {run}):")
        lines += [f"  - {d['item']} (`{d['commit'][:7]}`)" for d in during_or_after]
    if unchecked:
        lines.append(f"- Declared, with the commit ({UNCHECKED}):")
        lines += [f"  - {d['item']} (`{d['commit'][:7]}`)" for d in unchecked]
    changes = record["changed_after_data"]
    if changes or record["margins_set_after_data"]:
        lines.append("- Decided after data was seen:")
        lines += [f"  - {c['change']}" + (f" (`{c['commit']}`)" if c.get("commit") else "")
                  + (f"; seen: {c['seen']}" if c.get("seen") else "") for c in changes]
        if record["margins_set_after_data"]:
            lines.append("  - the equivalence margins (report.history.margins_set_after_data): a TOST that passes "
                         "reads \"within a post-hoc margin\", never \"equivalent\"")
    elif record.get("given", True):
        lines.append("- Nothing in the design was changed after data was seen.")
    else:
        lines.append("- No report.history declared: the config records neither earlier runs' seeds nor changes "
                     "made after data was seen (the page says what it knows).")
    return "\n".join(lines) + "\n"


def _span(seeds: list[int]) -> str:
    """Seeds as text: a run of consecutive numbers as "a–b"."""
    seeds = sorted(seeds)
    if not seeds:
        return "none"
    if seeds == list(range(seeds[0], seeds[-1] + 1)) and len(seeds) > 2:
        return f"{seeds[0]}–{seeds[-1]}"
    return ", ".join(map(str, seeds))
