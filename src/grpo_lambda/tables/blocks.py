"""The generated blocks of the published runs' pages: verdicts written by code from the tables, never by
hand. A Markdown file holds a block between two markers,

    <!-- generated: compare-run/comparison -->
    ...
    <!-- end generated -->

named ``<run>/<block>`` with ``<run>`` the folder under docs/ (``default-run``, ``compare-run``,
``clamp-trace-run``). ``scripts/publish_run.py`` fills every block of the run it publishes, in README.md
and docs/**/*.md, from the tables it rebuilt from the run's raw files; tests/test_publish_run.py fails
when a committed block differs from what this module writes from the committed raw files.

The blocks (:func:`run_blocks`): ``headline`` (Table 1's average accuracies, the paired GRPO-λ gap and,
where docs/<run>/spread.csv holds them, the predictions for a run on another machine), ``summary``
(the verdicts, as sentences), ``comparison`` (every line against the baseline: accuracy and
training-reward AUC), ``factorial`` (the effects of report.factorial), ``diagnostics`` (clip
fractions, entropy, KL, DAPO's dropped groups), ``spread`` (docs/<run>/spread.csv: the headline numbers
of one run per SFT seed, their mean and the prediction for one more run), ``provenance`` (what made
the run), and a horizon study's (report.horizon) ``horizon``, ``horizon_errors`` and ``horizon_finding``
(grpo_lambda.tables.horizon_blocks); and those of grpo_lambda.tables.study_blocks: ``control``,
``control_finding`` (a control study's effects against the directions declared before the run),
``factorial_finding`` (a 2 × 2's primary simple effects as a sentence a factor) and ``history`` (the run's
seeds against the study's earlier runs', and what was decided after data was seen).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from grpo_lambda.tables import horizon_blocks, study_blocks
from grpo_lambda.tables.blocks_text import (PROCEDURE_NAMES, adjusted_p, interval, level, p_cell, p_value, procedure_of,
                                            signed_number, table, verdict_of)
from grpo_lambda.tables.keys import ALL_DATASETS, AVERAGE
from grpo_lambda.tables.labels import variant_label
from grpo_lambda.config.report import report_options
from grpo_lambda.tables.verdicts import AHEAD, BEHIND, CHECK, EQUIVALENT, POST_HOC, PRIMARY, TOO_FEW, UNRESOLVED

MARKER = re.compile(r"<!-- generated: (?P<name>[\w.-]+/[\w.-]+) -->\n(?P<body>.*?)<!-- end generated -->", re.S)
BLOCKS = ("headline", "primary", "summary", "comparison", "factorial", "diagnostics", "spread", "provenance",
          "horizon", "horizon_errors", "horizon_finding", "control", "control_finding", "factorial_finding",
          "history")
VERDICT_ORDER = (AHEAD, BEHIND, EQUIVALENT, POST_HOC, UNRESOLVED, TOO_FEW)


def find_blocks(text: str) -> list[tuple[str, str]]:
    """(name, body) of every generated block of a Markdown text, in order."""
    return [(match["name"], match["body"]) for match in MARKER.finditer(text)]


def fill_blocks(text: str, generated: dict[str, str], run: str) -> str:
    """``text`` with the body of every block of ``run`` replaced by ``generated[name]``; a block of the run
    that names no known block is an error, blocks of other runs are left as they are."""
    def replace(match: re.Match) -> str:
        name = match["name"]
        if name.split("/")[0] != run:
            return match[0]
        if name not in generated:
            raise ValueError(f"generated block {name!r}: no such block (known: {sorted(generated)})")
        return f"<!-- generated: {name} -->\n{generated[name]}<!-- end generated -->"
    return MARKER.sub(replace, text)


def run_blocks(run: str, config: dict, tables: dict[str, pd.DataFrame], info: dict,
               spread: pd.DataFrame | None = None) -> dict[str, str]:
    """Every block of ``run``, by name, from its tables, its provenance (``info``, run.json) and the
    spread across SFT seeds where measured."""
    options = report_options(config)
    makers = {"headline": lambda: _headline(config, tables, options, spread),
              "primary": lambda: _primary(config, tables, options),
              "summary": lambda: _summary(config, tables, options),
              "comparison": lambda: _comparison(config, tables, options),
              "factorial": lambda: _factorial(tables["factorial"], options),
              "diagnostics": lambda: _diagnostics(tables["diagnostics"]),
              "spread": lambda: _spread(spread),
              "provenance": lambda: _provenance(info),
              "horizon": lambda: horizon_blocks.horizon(tables.get("horizon")),
              "horizon_errors": lambda: horizon_blocks.horizon_errors(config, tables.get("horizon_errors")),
              "horizon_finding": lambda: horizon_blocks.horizon_finding(config, tables.get("horizon"), options),
              "control": lambda: study_blocks.control(config, tables.get("control")),
              "control_finding": lambda: study_blocks.control_finding(config, tables.get("control"), options),
              "factorial_finding": lambda: study_blocks.factorial_finding(config, tables.get("factorial"), options),
              "history": lambda: study_blocks.history(config, options, info)}
    return {f"{run}/{name}": makers[name]() for name in BLOCKS}


# --- numbers as text: grpo_lambda.tables.blocks_text ------------------------------------------------

_level, _signed, _interval, _p, _table = level, signed_number, interval, p_value, table


def _over(rows: pd.DataFrame, prefix: str, count: str) -> str:
    """How a family's p-values were adjusted, in words: "Holm over 18 lines", "max-T over 18 lines", or
    "descriptive, 18 lines"."""
    chosen = procedure_of(rows.iloc[0], prefix) if len(rows) else "holm"
    return f"descriptive, {count}" if chosen == "descriptive" else f"{PROCEDURE_NAMES[chosen]} over {count}"


def _groups(frame: pd.DataFrame) -> list[tuple[tuple, pd.DataFrame]]:
    """The frame's rows per model × training set, in order."""
    if frame.empty:
        return []
    return list(frame.groupby(["model", "dataset"], sort=False))


def _titled(parts: list[tuple[tuple, str]]) -> str:
    """One text per model × training set, each under a bold "model / dataset" line when there are several."""
    if len(parts) == 1:
        return parts[0][1]
    return "\n".join(f"**{model} / {dataset}**\n\n{text}" for (model, dataset), text in parts)


def _metric_text(config: dict, options: dict) -> str:
    metric = options["metric"]
    benchmarks = len(config["benchmarks"])
    shown = {"greedy": "greedy accuracy", "avg": "avg@k", "pass_at_k": "pass@k", "maj_at_k": "maj@k"}[metric]
    return f"{shown}, mean of the {benchmarks} benchmarks" if benchmarks > 1 else shown


# --- the blocks ------------------------------------------------------------------------------------

def _headline(config: dict, tables: dict, options: dict, spread: pd.DataFrame | None) -> str:
    """Table 1's average of the first model, the paired GRPO-λ gap per training set, and the prediction
    for one more run where the spread across SFT seeds was measured."""
    t1 = tables["table1"]
    if t1.empty:
        return "No results yet.\n"
    model = t1["model"].iloc[0]
    predictions = {}
    if spread is not None and not spread.empty:
        # keyed as grpo_lambda.spread.headline_numbers keys them: one study may hold several models and sets
        predictions = {(row.model, row.dataset, row.quantity): (row.prediction_low, row.prediction_high)
                       for row in spread.itertuples()}

    def predicted(dataset: str, quantity: str) -> str:
        low, high = predictions.get((model, dataset, quantity), (np.nan, np.nan))
        return "–" if pd.isna(low) else f"[{_level(low)}, {_level(high)}]"

    signed = lambda low, high: "–" if pd.isna(low) else f"[{_signed(low)}, {_signed(high)}]"  # noqa: E731
    rows = [[row.label, _interval(row.average, row.average_low, row.average_high),
             predicted(row.datasets, f"accuracy: {row.label}")]
            for row in t1[t1["model"] == model].itertuples()]
    paired, speed = tables["paired"], tables["learning_speed"]
    chosen = t1[(t1["model"] == model) & (t1["method"] == "grpo_lambda")]["variants"]
    for variant in (chosen.iloc[0].split() if len(chosen) else []):
        gaps = paired[(paired["model"] == model) & (paired["method"] == variant) & (paired["dataset"] != ALL_DATASETS)
                      & (paired["benchmark"] == AVERAGE)]
        for gap in gaps.itertuples():
            quantity = f"paired accuracy: {gap.label} − {gap.baseline}"
            low, high = predictions.get((model, gap.dataset, quantity), (np.nan, np.nan))
            where = f" on {gap.dataset}" if len(gaps) > 1 else ""  # a study of several training sets
            rows.append([f"{gap.label} − {variant_label(config, gap.baseline)}{where}, paired",
                         f"{_interval(gap.diff, gap.diff_low, gap.diff_high, True)}, {adjusted_p(gap)}"
                         + (f": **{gap.verdict}**" if procedure_of(gap) != "descriptive" else ""), signed(low, high)])
        auc = speed[(speed["model"] == model) & (speed["variant"] == variant)]
        for row in auc.itertuples():
            low, high = predictions.get((model, row.dataset, f"paired reward AUC: {row.label}"), (np.nan, np.nan))
            where = f" on {row.dataset}" if len(auc) > 1 else ""
            rows.append([f"training-reward AUC, {row.label} − {variant_label(config, options['baseline'])}{where}",
                         f"{_interval(row.auc_vs_baseline, row.auc_vs_baseline_low, row.auc_vs_baseline_high, True)}, "
                         f"{adjusted_p(row, 'auc_')}"
                         + (f": **{row.auc_verdict}**" if procedure_of(row, "auc_") != "descriptive" else ""),
                         signed(low, high)])
    runs = _spread_runs(spread)
    where = (f"one more run, approximately (95% prediction from {runs} runs, assuming normality)" if runs
             else "one more run (no spread across runs measured)")
    return _table(["", "this run (one SFT model)", where], rows)


def _spread_runs(spread: pd.DataFrame | None) -> int:
    """How many runs the spread's intervals are computed from (the held-out check run not counted)."""
    if spread is None or spread.empty:
        return 0
    columns = list(spread.columns)
    runs = columns[columns.index("quantity") + 1:columns.index("mean")]
    return len(runs) - ("inside" in columns)


def _verdict_sentence(what: str, rows: pd.DataFrame, estimate: str, verdict: str, mde: str, prefix: str = "") -> str:
    """"what: ahead: A (+x [lo, hi]), ...; not distinguishable: ..." with each line named, or, for more
    than four lines of one verdict, their count and range (and for the undecided their detectable gap); a
    descriptive family's lines under "no verdict"."""
    parts = []
    descriptive = len(rows) and procedure_of(rows.iloc[0], prefix) == "descriptive"
    for word in ("no verdict",) if descriptive else VERDICT_ORDER:
        chosen = rows if descriptive else rows[rows[verdict] == word]
        if chosen.empty:
            continue
        if len(chosen) > 4:
            # a line identical to the baseline (a check line) has no spread and detects any gap: left out
            detectable = chosen[mde][(chosen[mde] > 0) & np.isfinite(chosen[mde].astype(float))]
            note = (f"; smallest gap detectable at 80% power {_level(detectable.min())} to {_level(detectable.max())}"
                    if word == UNRESOLVED and not detectable.empty else "")
            parts.append(f"**{word}**: {len(chosen)} lines ({_signed(chosen[estimate].min())} to "
                         f"{_signed(chosen[estimate].max())}{note})")
            continue
        named = ", ".join(
            f"{row['label']} ({_interval(row[estimate], row[f'{estimate}_low'], row[f'{estimate}_high'], True)})"
            for _, row in chosen.iterrows())
        parts.append(f"**{word}**: {named}")
    return f"- {what}: " + "; ".join(parts) + ".\n" if parts else ""


def _count(count: int, what: str) -> str:
    return f"{count} {what}{'s' if count != 1 else ''}"


def _lines(count: int) -> str:
    return _count(count, "line")


def _summary(config: dict, tables: dict, options: dict) -> str:
    baseline = variant_label(config, options["baseline"])
    paired = tables["paired"]
    paired = paired[(paired["dataset"] != ALL_DATASETS) & (paired["benchmark"] == AVERAGE)]
    speed = tables["learning_speed"].dropna(subset=["auc_vs_baseline"])
    gains = tables["results_by_variant"]
    gains = gains[(gains["benchmark"] == AVERAGE) & gains["gain"].notna()]
    texts: dict[tuple, str] = {}
    for key, rows in _groups(gains):
        texts[key] = _verdict_sentence(f"Accuracy ({_metric_text(config, options)}) gained over SFT, Holm over "
                                       f"{_lines(len(rows))}", rows, "gain", "gain_verdict", "gain_mde")
    for key, rows in _groups(paired):
        fewest, most = int(rows["seeds"].min()), int(rows["seeds"].max())
        seeds = f"{most}" if fewest == most else f"{fewest}–{most}"
        auc = speed[(speed["model"] == key[0]) & (speed["dataset"] == key[1])]
        for what, frame, column, prefix in ((f"Accuracy against {baseline}, {seeds} seeds paired", rows, "diff", ""),
                                            (f"Training-reward AUC against {baseline}", auc, "auc_vs_baseline", "auc_")):
            family = frame[f"{prefix}family"].fillna("")
            for name, members in frame[(family != "") & ~family.str.startswith("check")].groupby(
                    f"{prefix}family", sort=False):
                text = _verdict_sentence(f"{what}, {name} family, {_over(members, prefix, _lines(len(members)))}",
                                         members, column, f"{prefix}verdict", f"{prefix}mde", prefix)
                texts[key] = texts.get(key, "") + text
            checks = frame[family.str.startswith("check")]
            if not checks.empty:
                # a check line's accuracy family holds its rows on every suite and the mean; its AUC family one row
                own = (f" (Holm over its {len(config['benchmarks']) + 1} rows: each suite and the mean)"
                       if prefix == "" else "")
                texts[key] = texts.get(key, "").rstrip(".\n") + f"; check lines, each a family of its own{own}: " + ", ".join(
                    f"{row['label']} {_interval(row[column], row[f'{column}_low'], row[f'{column}_high'], True)} "
                    f"**{verdict_of(row, prefix)}**" for _, row in checks.iterrows()) + ".\n"
    for key, rows in _groups(tables["factorial"]):
        for name, frame in (("accuracy", rows[(rows["metric"] == "accuracy") & (rows["benchmark"] == AVERAGE)]),
                            ("training-reward AUC", rows[rows["metric"] == "reward_auc"])):
            for family, members in frame.groupby("family", sort=False):
                effects = "; ".join(f"{row.effect} {_interval(row.estimate, row.estimate_low, row.estimate_high, True)}"
                                    f" **{verdict_of(row)}**" for row in members.itertuples())
                texts[key] = texts.get(key, "") + (f"- 2 × 2 on {name}, {family} family "
                                                   f"({_over(members, '', str(len(members)))}): {effects}.\n")
    return _titled(list(texts.items())) if texts else "No comparison yet.\n"


def _comparison(config: dict, tables: dict, options: dict) -> str:
    baseline, shown = options["baseline"], variant_label(config, options["baseline"])
    by_variant, paired, speed = tables["results_by_variant"], tables["paired"], tables["learning_speed"]
    by_variant = by_variant[by_variant["benchmark"] == AVERAGE].set_index(["model", "dataset", "variant"])
    paired = paired[(paired["dataset"] != ALL_DATASETS) & (paired["benchmark"] == AVERAGE)]
    paired = paired.set_index(["model", "dataset", "method"])
    speed = speed.set_index(["model", "dataset", "variant"])
    auc_p = "Holm p" if (speed.reset_index().get("auc_procedure", pd.Series(dtype=object)) != "max_t").all() \
        else "adjusted p (Holm or max-T)"
    header = ["line", "label", "accuracy [95% CI]", f"− {shown} [95% CI]", "Holm p", "MDE at α/m", "verdict",
              "training-reward AUC", f"− {shown} [95% CI]", auc_p, "verdict"]
    parts = []
    for (model, dataset), rows in _groups(by_variant.reset_index()):
        lines = []
        for row in rows.itertuples():
            if row.variant == "sft":
                continue
            key = (model, dataset, row.variant)
            gap = paired.loc[key] if key in paired.index else None
            auc = speed.loc[key] if key in speed.index else None
            cells = [f"`{row.variant}`", row.label, _interval(row.accuracy, row.accuracy_low, row.accuracy_high)]
            if gap is None:
                cells += ["—", "—", "—", "baseline" if row.variant == baseline else "–"]
            else:
                shown_verdict = ("in the 2 × 2's primary family" if gap["role"] == "factorial"
                                 else f"{verdict_of(gap)} (check)" if gap["role"] == CHECK else verdict_of(gap))
                cells += [_interval(gap["diff"], gap["diff_low"], gap["diff_high"], True), p_cell(gap),
                          _level(gap["mde"]), shown_verdict]
            if auc is None:
                cells += ["–", "–", "–", "–"]
            else:
                is_base = row.variant == baseline
                cells += [_level(auc["auc"]),
                          "—" if is_base else _interval(auc["auc_vs_baseline"], auc["auc_vs_baseline_low"],
                                                        auc["auc_vs_baseline_high"], True),
                          "—" if is_base else p_cell(auc, "auc_"),
                          "baseline" if is_base else ("in the 2 × 2" if not auc["auc_family"] and
                                                      not pd.isna(auc["auc_vs_baseline"]) else verdict_of(auc, "auc_"))]
            lines.append(cells)
        parts.append(((model, dataset), _table(header, lines)))
    return _titled(parts) if parts else "No results yet.\n"


def _factorial(factorial: pd.DataFrame, options: dict) -> str:
    if factorial.empty:
        return "No 2 × 2 design (report.factorial) in this run.\n"
    margins = options["equivalence_margin"]
    tost = {metric: f"TOST Holm p (±{margins[metric]:g})" if metric in margins else "TOST" for metric in
            ("accuracy", "reward_auc")}
    header = ["effect", "family (Holm)", "accuracy [95% CI]", "Holm p", tost["accuracy"], "MDE at α/m", "verdict",
              "training-reward AUC [95% CI]", "Holm p", tost["reward_auc"], "verdict"]
    parts = []
    for key, rows in _groups(factorial):
        accuracy = rows[(rows["metric"] == "accuracy") & (rows["benchmark"] == AVERAGE)].set_index("effect")
        auc = rows[rows["metric"] == "reward_auc"].set_index("effect")
        lines = []
        for effect in dict.fromkeys(accuracy.index.tolist() + auc.index.tolist()):
            family = accuracy.loc[effect, "family"] if effect in accuracy.index else "–"
            sizes = accuracy.groupby("family")["p"].count() if not accuracy.empty else {}
            cells = [effect, f"{family} ({sizes[family]})" if family in sizes else family]
            for frame, columns in ((accuracy, ("p_holm", "p_equivalence_holm", "mde")),
                                   (auc, ("p_holm", "p_equivalence_holm"))):
                if effect in frame.index:
                    r = frame.loc[effect]
                    cells += [_interval(r["estimate"], r["estimate_low"], r["estimate_high"], True),
                              *[(_level(r[c]) if c == "mde" else p_cell(r) if c == "p_holm" else _p(r[c]))
                                for c in columns], verdict_of(r)]
                else:
                    cells += ["–"] * (len(columns) + 2)
            lines.append(cells)
        parts.append((key, _table(header, lines)))
    return _titled(parts)


def _primary(config: dict, tables: dict, options: dict) -> str:
    """The study's primary family (report.primary; the endpoint: the mean accuracy), one line per
    comparison with its Holm p (m: the family's size) and TOST, then the per-suite rows of the same
    comparisons that their own exploratory family resolves (ahead or behind)."""
    factorial = options["primary"] == "factorial"
    source = tables["factorial"] if factorial else tables["paired"]
    if source.empty:
        return "No comparison yet.\n"
    name, estimate = ("effect", "estimate") if factorial else ("label", "diff")
    margin = options["equivalence_margin"].get("accuracy")
    parts = []
    for key, rows in _groups(source):
        primary = rows[rows["family"] == PRIMARY]
        lines = []
        for _, row in primary.iterrows():
            tost = f", TOST (±{margin:g}) Holm p {_p(row['p_equivalence_holm'])}" if margin else ""
            lines.append(f"- {row[name]}: {_interval(row[estimate], row[f'{estimate}_low'], row[f'{estimate}_high'], True)}"
                         f", {adjusted_p(row)} (of {len(primary)}){tost}: **{verdict_of(row)}**")
        family = rows[rows["family"] == "per-suite accuracy"]
        chosen = family[family["verdict"].isin([AHEAD, BEHIND])
                        & (family["kind"] == "simple" if factorial else family[name].isin(primary[name]))]
        if not family.empty:
            named = "; ".join(f"{row['benchmark']}: {row[name]} {_signed(row[estimate])} **{row['verdict']}**"
                              for _, row in chosen.iterrows()) or "none ahead or behind"
            lines.append(f"- Per suite (exploratory, Holm over {len(family)}): {named}.")
        parts.append((key, "\n".join(lines) + "\n"))
    return _titled(parts)


DIAGNOSTIC_NAMES = {"clip_ratio_region": "clipped (either side)", "clip_ratio_low": "clipped below",
                    "clip_ratio_high": "clipped above", "entropy": "entropy", "kl": "KL",
                    "frac_reward_zero_std": "groups without signal", "dropped_groups": "groups dropped per step"}


def _diagnostics(diagnostics: pd.DataFrame) -> str:
    if diagnostics.empty:
        return "No training logs.\n"
    shown = [name for name in DIAGNOSTIC_NAMES if diagnostics[name].notna().any()]
    header = ["line", *[DIAGNOSTIC_NAMES[name] for name in shown]]
    parts = []
    for key, rows in _groups(diagnostics):
        lines = [[row["label"], *[_interval(row[name], row[f"{name}_low"], row[f"{name}_high"]) for name in shown]]
                 for _, row in rows.iterrows()]
        parts.append((key, _table(header, lines)))
    return _titled(parts)


def _spread(spread: pd.DataFrame | None) -> str:
    """One row per headline number: each SFT seed's run, the mean over them with its interval, the
    prediction for one more run, how many runs fell inside the others' prediction, and the held-out
    check run (the column before ``mean`` when ``inside`` is present), which enters no interval."""
    if spread is None or spread.empty:
        return "No spread across SFT seeds published.\n"
    columns = list(spread.columns)
    runs = columns[columns.index("quantity") + 1:columns.index("mean")]
    check = runs.pop() if "inside" in columns else None
    header = ["quantity", *runs, "mean over runs [95% CI]", "one more run (95% prediction)"]
    header += ["left out, inside the others'"] if "left_out_inside" in columns else []
    header += [f"{check} (held out)"] if check else []
    rows = []
    for _, row in spread.iterrows():
        show = _signed if row["quantity"].startswith("paired") else _level  # a gap carries its sign
        line = [row["quantity"], *[show(row[run]) for run in runs],
                _interval(row["mean"], row["mean_low"], row["mean_high"], show is _signed),
                f"[{show(row['prediction_low'])}, {show(row['prediction_high'])}]"]
        line += [row["left_out_inside"]] if "left_out_inside" in columns else []
        line += [f"{show(row[check])}, {'inside' if row['inside'] else 'outside'}"] if check else []
        rows.append(line)
    return _table(header, rows)


def _state(dirty: bool) -> str:
    return "with uncommitted changes" if dirty else "clean"


def _provenance(info: dict) -> str:
    made, cells = info.get("made_by", {}), info.get("cells", {})
    commits = ", ".join(f"`{commit[:12]}{'+changes' if commit.endswith('+changes') else ''}`"
                        for commit in made.get("commits", [])) or "unknown"
    versions = ", ".join(f"{name} {version}" for name, version in made.get("libraries", {}).items()) or "unknown"
    lines = [f"- Config `{info.get('config', '?')}` (sha256 of the validated config "
             f"`{info.get('config_sha256', '?')[:12]}`): {cells.get('rl', '?')} RL cells, "
             f"{cells.get('evaluated', '?')} evaluated cell × benchmark files.",
             f"- Trained and evaluated by commit {commits} ({_state(made.get('dirty'))}); {versions}."]
    timing = info.get("time", {})
    stages = timing.get("stages", {})
    if stages:
        lines.append("- Jobs: " + "; ".join(
            f"{stage} {_count(spent['jobs'], 'job')}, {spent['wall_seconds'] / 60:.1f} min wall, "
            f"{spent['cpu_seconds'] / 60:.1f} min CPU" for stage, spent in stages.items()) + ".")
    if timing.get("wall_seconds"):
        lines.append(f"- The whole study: {timing['wall_seconds'] / 60:.1f} min wall (wall_seconds.txt).")
    published = info.get("published_with", {})
    lines.append(f"- Tables rebuilt from `raw/` by commit `{str(published.get('commit', 'unknown'))[:12]}` "
                 f"({_state(published.get('dirty'))}).")
    return "\n".join(lines) + "\n"
