"""Which of the study's made files the Snakemake report shows (``reported`` in workflow/rules/common.smk): a
table only when it has a row, a figure only when it draws something. A header-only table (``factorial`` of a
study without a 2 × 2, ``missing`` when nothing is missing, the published comparisons of a model the paper did
not run) and a figure that is only its note (``kl`` when β = 0 and no KL is logged, ``appendix_d`` when
``report.figure3_paper_cells`` is off) stay on disk, where the figures' and tables' writers put them, and out
of the report. Until the headline exists (a partial run), the report shows each evaluated model's summary per
benchmark instead (category Cells), labelled with its accuracy (:func:`evaluation_labels`). Standard library only:
the workflow imports it to plan.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path


def table_has_rows(path: str | os.PathLike) -> bool:
    """Whether the CSV file at ``path`` holds a row below its header."""
    with open(path, newline="", encoding="utf-8") as handle:
        rows = csv.reader(handle)
        next(rows, None)
        return any(row for row in rows)


def figure_draws(path: str | os.PathLike) -> bool:
    """Whether the figure at ``path`` draws a series in some panel, read from the ``{name}.json`` the figures
    stage writes beside it (grpo_lambda.figures.data); a figure without one counts as drawing."""
    drawn = Path(path).with_suffix(".json")
    if not drawn.is_file():
        return True
    return any(panel["series"] for panel in json.loads(drawn.read_text(encoding="utf-8"))["panels"])


def shows_something(path: str | os.PathLike) -> bool:
    """Whether the made file at ``path`` has anything to show: a CSV table a row, a PNG figure a series."""
    suffix = Path(path).suffix
    if suffix == ".csv":
        return table_has_rows(path)
    if suffix == ".png":
        return figure_draws(path)
    return True


def evaluation_labels(path: str | os.PathLike) -> dict[str, str | int]:
    """An evaluation summary's (``grpo-lambda evaluate``) labels in the report's list of cells: the model it
    evaluated (``cell``: the cell's folder, or the SFT model's), its checkpoint ``step``, the ``benchmark``, its greedy
    ``accuracy`` (avg@k when only sampled) and its number of ``problems``."""
    summary = json.loads(Path(path).read_text(encoding="utf-8"))
    accuracy = summary["accuracy"] if "accuracy" in summary else summary["sampled"]["mean_accuracy"]
    seed = "" if summary["seed"] is None or summary["variant"] == "sft" else f"/seed{summary['seed']}"
    return {"cell": f"{summary['model']}/{summary['dataset']}/{summary['variant']}{seed}", "step": str(summary["step"]),
            "benchmark": summary["benchmark"], "accuracy": f"{accuracy:.3f}", "problems": int(summary["n"])}
