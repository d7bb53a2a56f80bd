"""Every table, by name: from a results folder (the aggregate stage) or from a published run's raw files
(a rebuild), through one code path, :func:`tables_from`."""

from __future__ import annotations

import functools
import os

import pandas as pd

from grpo_lambda.tables.appendix_e import appendix_e, appendix_e_published
from grpo_lambda.tables.cells import Cells
from grpo_lambda.tables.collect import load_published, missing_cells, summarise
from grpo_lambda.tables.control import control_table
from grpo_lambda.tables.dataset_gain import dataset_gain_table
from grpo_lambda.tables.diagnostics import diagnostics_table
from grpo_lambda.tables.factorial import factorial_table
from grpo_lambda.tables.horizon import horizon_errors_table, horizon_table
from grpo_lambda.tables.learning_speed import learning_speed_table
from grpo_lambda.tables.names import expand, TABLES
from grpo_lambda.config.report import report_options
from grpo_lambda.tables.paired import paired_table
from grpo_lambda.tables.raw import read_raw, read_results, RunData
from grpo_lambda.tables.results import checkpoints_table, results_by_variant, results_table, sampled_cells
from grpo_lambda.tables.table1 import table1, table1_published
from grpo_lambda.tables.training import final_reward_table, training_curves_table, training_gain_table
from grpo_lambda.tables.verdicts import post_hoc_margins


def build_tables(config: dict, results_dir: str | os.PathLike, only: set[str] | None = None) -> dict[str, pd.DataFrame]:
    """Every table of a results folder (or ``only`` those), in the order of
    :func:`grpo_lambda.tables.names.table_names`."""
    return tables_from(config, read_results(config, results_dir), only)


def rebuild(raw_dir: str | os.PathLike, only: set[str] | None = None) -> tuple[dict, dict[str, pd.DataFrame]]:
    """The config and every table (or ``only`` those) of a published run, from its raw files alone
    (grpo_lambda.tables.raw)."""
    config, data = read_raw(raw_dir)
    return config, tables_from(config, data, only)


def tables_from(config: dict, data: RunData, only: set[str] | None = None) -> dict[str, pd.DataFrame]:
    """Every table, by name, from the run's data (``only``: those tables alone, each built as in the whole set:
    the design check's tests read the family tables without the rest)."""
    options = report_options(config)
    summary = summarise(data.samples)
    cells = Cells(data.samples, config, options)
    sampled = sampled_cells(data.samples, config, options)
    # Tables several others read, built once and only when one of them is asked for.
    published = functools.cache(load_published)
    by_variant = functools.cache(lambda: results_by_variant(summary, cells, config, options, sampled))
    t1 = functools.cache(lambda: table1(cells, config, options))
    # One builder per entry of names.TABLES; a {model} entry's builder takes the model.
    builders = {
        "results": lambda: results_table(summary, cells, config, sampled),
        "results_by_variant": by_variant,
        "checkpoints": lambda: checkpoints_table(summary, cells, config),
        "table1": t1,
        "learning_speed": lambda: learning_speed_table(config, data.logs, options),
        "diagnostics": lambda: diagnostics_table(config, data.logs, options),
        "final_reward": lambda: final_reward_table(config, data.logs, options["final_window"]),
        "figure3_reward": lambda: final_reward_table(config, data.logs, options["figure3_window"]),
        "dataset_gain": lambda: dataset_gain_table(by_variant(), published()[1], config, options),
        "training_gain": lambda: training_gain_table(config, data.logs, options),
        "training_curves": lambda: training_curves_table(config, data.logs, options),
        "table1_published": lambda: table1_published(t1(), published()[0], config),
        "appendix_e_{model}": lambda model: appendix_e(by_variant(), config, model, options),
        "appendix_e_published": lambda: appendix_e_published(by_variant(), published()[1], config, options),
        "paired": lambda: paired_table(cells, config, options),
        "factorial": lambda: factorial_table(cells, config, data.logs, options),
        "completions": lambda: data.completions,
        "provenance": lambda: data.provenance,
        "missing": lambda: missing_cells(summary, config),
        "horizon": lambda: horizon_table(cells, config, data.logs, options),
        "horizon_errors": lambda: horizon_errors_table(data.errors, config, options),
        "control": lambda: control_table(cells, config, data.logs, options),
    }
    tables = {name: builders[template](**fields) for name, template, fields in expand(TABLES, config)
              if only is None or name in only}
    return post_hoc_margins(tables) if options["history"]["margins_set_after_data"] else tables
