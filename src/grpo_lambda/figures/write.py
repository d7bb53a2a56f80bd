"""Reading the tables the figures are drawn from, writing a figure (PNG, PDF and what it draws), and
:func:`main`: every figure of a study, in :func:`grpo_lambda.tables.names.figure_files` order."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

from grpo_lambda.config.report import report_options
from grpo_lambda.figures.accuracy import checkpoints_figure, figure1
from grpo_lambda.figures.curves import appendix_c_figure, figure4, kl_figure, reward_curves_figure
from grpo_lambda.figures.data import figure_data
from grpo_lambda.figures.eval_length import eval_length_figure
from grpo_lambda.figures.final_reward import figure3
from grpo_lambda.figures.horizon import horizon_figure
from grpo_lambda.figures.learning_speed import learning_speed_figure
from grpo_lambda.figures.style import close
from grpo_lambda.figures.trace_weights import figure2
from grpo_lambda.files import atomic_path, write_text
from grpo_lambda.tables.names import expand, FIGURE_FORMATS, FIGURES

# Read as text whatever the values look like: names such as "7b" or "2024" are names, not numbers.
_TEXT_COLUMNS = ("model", "dataset", "variant", "benchmark", "method", "variants", "metric")


def read_table(tables_dir: str | os.PathLike, name: str) -> pd.DataFrame:
    """The table ``name`` from the CSV file the aggregate stage wrote into ``tables_dir``."""
    path = Path(tables_dir) / f"{name}.csv"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: the figures are drawn from the tables of "
                                f"`grpo-lambda aggregate`; write them first")
    return pd.read_csv(path, dtype={column: str for column in _TEXT_COLUMNS})


def save(fig, out_dir: str | os.PathLike, name: str) -> list[str]:
    """Write ``name``.png and .pdf atomically (temporary name, then rename), and ``name``.json with
    :func:`figure_data`; close the figure. Returns the image paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext in FIGURE_FORMATS:
        path = out_dir / f"{name}.{ext}"
        # No timestamps in the files, so an unchanged figure is byte-identical when rebuilt.
        metadata = {"CreationDate": None} if ext == "pdf" else {"Software": None}
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=ext, dpi=150, metadata=metadata)
        paths.append(str(path))
        # The first drawing placed the panels; the other formats keep them (layout is the costly part).
        fig.set_layout_engine("none")
    # One line: Figure 2's images are thousands of numbers, one per line when indented.
    write_text(out_dir / f"{name}.json", json.dumps(figure_data(fig), ensure_ascii=False) + "\n")
    close(fig)
    return paths


def main(config: dict, tables_dir: str | os.PathLike, out_dir: str | os.PathLike) -> list[str]:
    """Draw every figure from the tables in ``tables_dir`` (CSV, as the aggregate stage writes them)
    into ``out_dir``; return the paths in :func:`grpo_lambda.tables.names.figure_files` order. Tables
    without rows give figures that say so, never an error."""
    options = report_options(config)
    tables = {}

    def table(name: str) -> pd.DataFrame:
        if name not in tables:
            tables[name] = read_table(tables_dir, name)
        return tables[name]
    # One drawing per entry of names.FIGURES; a {model} entry's drawing takes the model.
    drawings = {
        "figure1": lambda: figure1(config, table("table1"), table("results_by_variant"), options),
        "figure2": lambda: figure2(config, options),
        "figure3": lambda: figure3(config, table("figure3_reward"), options),
        "appendix_d": lambda: figure3(config, table("figure3_reward"), options, appendix_d=True),
        "figure4": lambda: figure4(config, table("training_curves"), table("final_reward"), options),
        "reward_curves": lambda: reward_curves_figure(config, table("training_curves"), options),
        "learning_speed": lambda: learning_speed_figure(config, table("learning_speed")),
        "kl": lambda: kl_figure(config, table("training_curves"), options),
        "appendix_c_{model}": lambda model: appendix_c_figure(config, table("training_curves"), options, model),
        "eval_length": lambda: eval_length_figure(config, table("results_by_variant"), options),
        "checkpoints_{model}": lambda model: checkpoints_figure(config, table("checkpoints"), model),
        "horizon": lambda: horizon_figure(config, table("horizon")),
    }
    paths = []
    for name, template, fields in expand(FIGURES, config):
        paths += save(drawings[template](**fields), out_dir, name)
    return paths
