"""The report's first screen: the study's headline as one HTML fragment, written from the tables' CSV files
and Figure 1 by ``grpo-lambda headline`` (the rule ``headline``), and shown at the top of the Snakemake
report's front page (``workflow/report/workflow.rst`` includes it).

It holds Table 1 with its intervals, the verdicts of the study's declared primary family
(``report.primary``), Figure 1 with a caption that says what its bars and error bars are and over how
many seeds and problems (counted in the tables, not read from the config), and what made the run (the
``provenance`` table). Every number is a table's, formatted; nothing is computed here but counts.

The fragment carries a ``<style>`` element: Snakemake's front page centres its description in a 32rem
column beside the job graph, which leaves no room for a table; while the fragment is on the page the
description takes the width and the job graph goes below it (docs/running.md, "The report").
"""

from __future__ import annotations

import base64
import html
import math
import os
from pathlib import Path

import pandas as pd

from grpo_lambda.captions import counted, problems_text, seeds_text
from grpo_lambda.config.report import report_options
from grpo_lambda.files import write_text
from grpo_lambda.tables.keys import AVERAGE, SFT
from grpo_lambda.tables.labels import variant_label
from grpo_lambda.tables.verdicts import AHEAD, BEHIND, EQUIVALENT, PRIMARY

# The tables the headline reads, and the figure it shows.
TABLES = ("table1", "results", "results_by_variant", "paired", "factorial", "provenance")
FIGURE = "figure1"
# Read as text whatever the values look like: names such as "7b" are names, not numbers.
TEXT_COLUMNS = ("model", "dataset", "variant", "benchmark", "method", "variants", "label", "family", "verdict",
                "effect", "commit", "datasets")
NO_PRIMARY = "No comparison in the primary family (report.primary) yet."
METRIC_NAMES = {"greedy": "greedy accuracy", "avg": "avg@k accuracy", "pass_at_k": "pass@k", "maj_at_k": "maj@k"}

STYLE = """
/* Snakemake's front page centres a 32rem description beside the job graph: with the headline in it, the
   description takes the width, starts at the top, and the job graph goes below. */
div.h-screen:has(#grpo-headline) { align-items: flex-start; justify-content: flex-start; }
div.flex:has(> div > div.prose #grpo-headline) { flex-direction: column; }
div.prose:has(#grpo-headline) { max-width: 68rem; }
#grpo-headline { font-size: 0.85rem; line-height: 1.35; }
#grpo-headline h1 { font-size: 1.35rem; margin: 0 0 0.2rem 0; }
#grpo-headline h2 { font-size: 1rem; margin: 0.6rem 0 0.2rem 0; }
#grpo-headline p { margin: 0.2rem 0; }
#grpo-headline table { margin: 0.2rem 0; font-size: 0.8rem; width: auto; }
#grpo-headline th, #grpo-headline td { padding: 0.15rem 0.6rem; text-align: right; white-space: nowrap; }
#grpo-headline th:first-child, #grpo-headline td:first-child { text-align: left; }
#grpo-headline td.average { font-weight: 600; }
#grpo-headline .interval { color: #64748b; font-size: 0.72rem; }
#grpo-headline ul { margin: 0.2rem 0; padding-left: 1.1rem; }
#grpo-headline li { margin: 0.1rem 0; }
#grpo-headline .verdict { font-weight: 700; }
#grpo-headline .ahead { color: #15803d; } #grpo-headline .behind { color: #b91c1c; }
#grpo-headline .equivalent { color: #1d4ed8; }
#grpo-headline figure { margin: 0.5rem 0 0 0; }
#grpo-headline figure img { max-height: 330px; margin: 0; }
#grpo-headline figcaption { margin-top: 0.2rem; font-size: 0.78rem; color: #334155; max-width: 60rem; }
#grpo-headline .provenance { font-size: 0.72rem; color: #64748b; }
"""


# ---- numbers as text ------------------------------------------------------------------------------

def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _level(value) -> str:
    return "–" if _missing(value) else f"{value:.3f}"


def _signed(value) -> str:
    return "–" if _missing(value) else f"{value:+.3f}".replace("-", "−")


def _p(value) -> str:
    return "–" if _missing(value) else "<0.001" if value < 0.001 else f"{value:.3f}"


def _bounds(low, high, show) -> str:
    """"[low, high]", or what stands for an interval that does not exist (one seed) or is infinite."""
    if _missing(low) or _missing(high):
        return ""
    if math.isinf(low) or math.isinf(high):
        return "[no interval: too few seeds]"
    return f"[{show(low)}, {show(high)}]"


# ---- reading ----------------------------------------------------------------------------------------

def read_tables(tables_dir: str | os.PathLike) -> dict[str, pd.DataFrame]:
    """The tables the headline reads, from the CSV files the aggregate stage wrote."""
    tables = {}
    for name in TABLES:
        path = Path(tables_dir) / f"{name}.csv"
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing: the headline is written from the tables of "
                                    f"`grpo-lambda aggregate`; write them first")
        tables[name] = pd.read_csv(path, dtype={column: str for column in TEXT_COLUMNS})
    return tables


def _text(value) -> str:
    return "" if _missing(value) else str(value)


# ---- the parts --------------------------------------------------------------------------------------

def tally(config: dict, tables: dict[str, pd.DataFrame]) -> dict:
    """What the numbers are computed over, counted in the tables, as text: ``seeds`` (each RL variant's
    seeds), ``problems`` (of each benchmark), and the ``models``, ``datasets`` and ``variants`` with results."""
    results, by_variant = tables["results"], tables["results_by_variant"]
    trained = by_variant[(by_variant["variant"] != SFT) & (by_variant["benchmark"] == AVERAGE)]
    seeds = trained["n_seeds"].dropna().astype(int)
    problems = {benchmark: (int(results[results["benchmark"] == benchmark]["n"].max()), "")
                for benchmark in config["benchmarks"] if (results["benchmark"] == benchmark).any()}
    return {"seeds": seeds_text(int(seeds.min()), int(seeds.max())) if len(seeds) else "no RL seed",
            "problems": problems_text(problems) if problems else "no benchmark",
            "models": list(dict.fromkeys(results["model"])), "datasets": list(dict.fromkeys(results["dataset"])),
            "variants": list(dict.fromkeys(trained["variant"]))}


def _table1(config: dict, t1: pd.DataFrame) -> str:
    """Table 1: per model, a row per method, the average first, then each benchmark; value over interval."""
    targets = [AVERAGE] + [b for b in config["benchmarks"] if b in t1.columns]
    several = t1["model"].nunique() > 1
    header = "".join(f"<th>{html.escape(t)}</th>" for t in (["model"] if several else []) + ["", *targets])
    rows = []
    for row in t1.to_dict("records"):
        cells = [f"<td>{html.escape(row['model'])}</td>"] if several else []
        cells.append(f"<td>{html.escape(_text(row['label']))}</td>")
        for target in targets:
            bounds = _bounds(row.get(f"{target}_low"), row.get(f"{target}_high"), _level)
            shown = _level(row.get(target)) + (f"<br><span class=\"interval\">{bounds}</span>" if bounds else "")
            cells.append(f"<td class=\"{'average' if target == AVERAGE else 'benchmark'}\">{shown}</td>")
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return f"<table class=\"table1\"><thead><tr>{header}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def table1_heading(t1: pd.DataFrame) -> str:
    """Table 1's heading: what its rows are means over (its ``datasets`` column), or the one training set."""
    used = {tuple(_text(names).split()) for names in t1["datasets"]} - {()}
    if len(used) == 1:
        [datasets] = used
        if len(datasets) == 1:
            return f"Table 1: accuracy, trained on {datasets[0]}"
        return f"Table 1: accuracy, mean over the {len(datasets)} training sets ({', '.join(datasets)})"
    return "Table 1: accuracy, mean over each model's training sets"


def _verdict(word) -> str:
    word = _text(word) or "–"
    kind = {AHEAD: "ahead", BEHIND: "behind", EQUIVALENT: "equivalent"}.get(word, "unresolved")
    return f"<span class=\"verdict {kind}\">{html.escape(word)}</span>"


def primary_rows(config: dict, tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The comparisons of the declared primary family (report.primary: every line against the baseline, or
    a 2 × 2's simple effects), as rows of ``name``, ``estimate`` and the interval and test columns."""
    options = report_options(config)
    if options["primary"] == "factorial":
        rows = tables["factorial"]
        rows = rows[rows["family"] == PRIMARY].rename(columns={"effect": "name"})
    else:
        rows = tables["paired"]
        rows = rows[rows["family"] == PRIMARY].rename(columns={"diff": "estimate"})
        baseline = variant_label(config, options["baseline"])
        rows = rows.assign(name=rows["label"] + f" − {baseline}")
        rows = rows.rename(columns={"diff_low": "estimate_low", "diff_high": "estimate_high"})
    return rows


def primary_lines(config: dict, tables: dict[str, pd.DataFrame]) -> list[tuple[str, str, str]]:
    """Each primary comparison as (where: "model / dataset" when the family spans several, else ""; its numbers
    as text, up to the verdict; the verdict)."""
    options = report_options(config)
    rows = primary_rows(config, tables)
    margin = options["equivalence_margin"].get("accuracy")
    several = rows[["model", "dataset"]].drop_duplicates().shape[0] > 1
    lines = []
    for (model, dataset), group in rows.groupby(["model", "dataset"], sort=False):
        for row in group.to_dict("records"):
            tost = f", TOST (±{margin:g}) Holm p {_p(row.get('p_equivalence_holm'))}" if margin else ""
            bounds = _bounds(row["estimate_low"], row["estimate_high"], _signed)
            text = (f"{row['name']}: {_signed(row['estimate'])} {bounds}, Holm p {_p(row['p_holm'])} "
                    f"(of {len(group)}){tost}: ")
            lines.append((f"{model} / {dataset}" if several else "", text, _text(row["verdict"]) or "–"))
    return lines


def _primary(config: dict, tables: dict[str, pd.DataFrame]) -> str:
    lines = primary_lines(config, tables)
    if not lines:
        return f"<p>{NO_PRIMARY}</p>"
    parts = [f"<li>{f'<b>{html.escape(where)}</b>: ' if where else ''}{html.escape(text)}{_verdict(verdict)}</li>"
             for where, text, verdict in lines]
    return f"<ul class=\"primary\">{''.join(parts)}</ul>"


def figure1_caption(config: dict, counts: dict) -> str:
    """What Figure 1 draws, with the counts (:func:`tally`) it is drawn over."""
    options = report_options(config)
    model, dataset = options["figure1_model"], options["figure1_dataset"]
    what = ("Table 1's rows: SFT and each method, mean over training sets" if dataset == "mean"
            else f"the SFT model and every variant of {model} trained on {dataset}")
    metric = METRIC_NAMES[options["metric"]]
    return (f"Figure 1. {metric[0].upper() + metric[1:]} per benchmark and their unweighted average, "
            f"{what}. Bars: the mean over {counts['seeds']} (SFT: one model), on {counts['problems']}; error "
            f"bars: the {options['level']:.0%} interval over seeds and problems (two-way cluster-robust t interval, "
            f"grpo_lambda.stats); the numbers of Table 1 and results_by_variant.")


def _provenance(provenance: pd.DataFrame) -> str:
    if provenance.empty:
        return ""
    commits = sorted({_text(c)[:12] + ("+changes" if _text(c).endswith("+changes") else "")
                      for c in provenance["commit"] if _text(c)})
    libraries = [c for c in ("torch", "transformers", "trl") if c in provenance.columns]
    versions = "; ".join(f"{name} " + ", ".join(sorted({_text(v) for v in provenance[name] if _text(v)}))
                         for name in libraries)
    return (f"<p class=\"provenance\">Made by commit {html.escape(', '.join(commits) or 'unknown')}; "
            f"{html.escape(versions)} (the provenance table, under Tables).</p>")


def _summary(config: dict, counts: dict) -> str:
    """One sentence: what was trained, on what, over how many seeds and problems, and how it is measured."""
    options = report_options(config)
    return (f"{', '.join(counts['models']) or 'no model'} trained on {', '.join(counts['datasets']) or 'nothing'}: "
            f"{counted(len(counts['variants']), 'RL variant')}, {counts['seeds']} each, evaluated on "
            f"{counts['problems']}. Metric: {METRIC_NAMES[options['metric']]}; intervals: "
            f"{options['level']:.0%}, over seeds and problems; differences paired by both.")


def _primary_heading(config: dict) -> str:
    options = report_options(config)
    baseline = variant_label(config, options["baseline"])
    primary = "the 2 × 2's simple effects" if options["primary"] == "factorial" else f"every line − {baseline}"
    return f"Primary comparisons ({primary}; Holm within the family)"


def headline_text(config: dict, tables: dict[str, pd.DataFrame]) -> str:
    """The headline as plain text, for the terminal at the end of a run: the summary, Table 1's averages with
    their intervals, and the primary comparisons with their verdicts."""
    t1 = tables["table1"]
    several = t1["model"].nunique() > 1
    names = [(f"{row['model']} " if several else "") + _text(row["label"]) for row in t1.to_dict("records")]
    width = max((len(name) for name in names), default=0)
    lines = [f"Results: {_summary(config, tally(config, tables))}",
             f"{table1_heading(t1)} (the average over benchmarks [interval]):"]
    for name, row in zip(names, t1.to_dict("records")):
        bounds = _bounds(row.get(f"{AVERAGE}_low"), row.get(f"{AVERAGE}_high"), _level)
        lines.append(f"  {name:<{width}}  {_level(row.get(AVERAGE))} {bounds}".rstrip())
    lines.append(f"{_primary_heading(config)}:")
    primary = primary_lines(config, tables)
    lines += [f"  {where + ': ' if where else ''}{text}{verdict}" for where, text, verdict in primary]
    if not primary:
        lines.append(f"  {NO_PRIMARY}")
    return "\n".join(lines) + "\n"


def headline_html(config: dict, tables: dict[str, pd.DataFrame], figure_png: bytes | None) -> str:
    """The fragment: the style, then the title, Table 1, the primary verdicts, Figure 1 and its caption."""
    counts = tally(config, tables)
    summary = _summary(config, counts)
    figure = ""
    if figure_png is not None:
        encoded = base64.b64encode(figure_png).decode("ascii")
        figure = (f"<figure><img alt=\"Figure 1\" src=\"data:image/png;base64,{encoded}\">"
                  f"<figcaption>{html.escape(figure1_caption(config, counts))}</figcaption></figure>")
    return (f"<style>{STYLE}</style>\n<section id=\"grpo-headline\">"
            f"<h1>Results</h1><p class=\"summary\">{html.escape(summary)}</p>"
            f"<h2>{html.escape(table1_heading(tables['table1']))}</h2>{_table1(config, tables['table1'])}"
            f"<h2>{html.escape(_primary_heading(config))}</h2>"
            f"{_primary(config, tables)}{figure}{_provenance(tables['provenance'])}</section>\n")


def text_path(out: str | os.PathLike) -> Path:
    """Where the plain-text headline goes beside the fragment ``out``: ``headline.txt``."""
    return Path(out).with_suffix(".txt")


def main(config: dict, tables_dir: str | os.PathLike, figures_dir: str | os.PathLike,
         out: str | os.PathLike) -> str:
    """Write the headline fragment of the tables in ``tables_dir`` and Figure 1 of ``figures_dir`` to ``out``, and
    the headline as text beside it (:func:`text_path`), which a run prints at its end."""
    figure = Path(figures_dir) / f"{FIGURE}.png"
    if not figure.is_file():
        raise FileNotFoundError(f"{figure} is missing: the headline shows the figure of `grpo-lambda figures`; "
                                f"draw them first")
    tables = read_tables(tables_dir)
    write_text(out, headline_html(config, tables, figure.read_bytes()))
    write_text(text_path(out), headline_text(config, tables))
    return str(out)
