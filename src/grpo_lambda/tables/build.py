"""Every table, by name, from the results folder."""

from __future__ import annotations

import os

import pandas as pd

from grpo_lambda import completions
from grpo_lambda.config import rl_cells
from grpo_lambda.tables.appendix_e import appendix_e, appendix_e_published
from grpo_lambda.tables.cells import Cells
from grpo_lambda.tables.collect import (collect_provenance, collect_samples, collect_train_logs, load_published,
                                        missing_cells, summarise)
from grpo_lambda.tables.learning_speed import learning_speed_table
from grpo_lambda.tables.names import expand, TABLES
from grpo_lambda.tables.options import report_options
from grpo_lambda.tables.paired import paired_table
from grpo_lambda.tables.results import checkpoints_table, results_by_variant, results_table
from grpo_lambda.tables.table1 import table1, table1_published
from grpo_lambda.tables.training import final_reward_table, training_curves_table, training_gain_table


def build_tables(config: dict, results_dir: str | os.PathLike) -> dict[str, pd.DataFrame]:
    """Every table, by name, in the order of :func:`grpo_lambda.tables.names.table_names`."""
    options = report_options(config)
    samples = collect_samples(results_dir, config)
    summary = summarise(samples)
    cells = Cells(samples, config["benchmarks"], options)
    logs = collect_train_logs(results_dir, config)
    published_table1, published_appendix = load_published()
    by_variant = results_by_variant(summary, cells, config)
    t1 = table1(cells, config, options)
    # One builder per entry of names.TABLES; a {model} entry's builder takes the model.
    builders = {
        "results": lambda: results_table(summary, cells, config),
        "results_by_variant": lambda: by_variant,
        "checkpoints": lambda: checkpoints_table(summary, cells, config),
        "table1": lambda: t1,
        "learning_speed": lambda: learning_speed_table(config, logs, options),
        "final_reward": lambda: final_reward_table(config, logs, options["final_window"]),
        "training_gain": lambda: training_gain_table(config, logs, options),
        "training_curves": lambda: training_curves_table(config, logs, options),
        "table1_published": lambda: table1_published(t1, published_table1, config),
        "appendix_e_{model}": lambda model: appendix_e(by_variant, config, model, options),
        "appendix_e_published": lambda: appendix_e_published(by_variant, published_appendix, config, options),
        "paired": lambda: paired_table(cells, config, options),
        "completions": lambda: completions.report_table(results_dir, rl_cells(config)),
        "provenance": lambda: collect_provenance(results_dir, config),
        "missing": lambda: missing_cells(summary, config),
    }
    return {name: builders[template](**fields) for name, template, fields in expand(TABLES, config)}
