"""Every table, by name, from the results folder."""

from __future__ import annotations

import os

import pandas as pd

from grpo_lambda import completions
from grpo_lambda.config import rl_cells
from grpo_lambda.learning_speed import learning_speed_table
from grpo_lambda.tables.appendix_e import appendix_e, appendix_e_published
from grpo_lambda.tables.cells import Cells
from grpo_lambda.tables.collect import (collect_provenance, collect_samples, collect_train_logs, load_published,
                                        missing_cells, summarise)
from grpo_lambda.tables.options import report_options
from grpo_lambda.tables.paired import paired_table
from grpo_lambda.tables.results import checkpoints_table, results_by_variant, results_table
from grpo_lambda.tables.table1 import table1, table1_published

def build_tables(config: dict, results_dir: str | os.PathLike) -> dict[str, pd.DataFrame]:
    """Every table, by name (see :func:`table_names`)."""
    options = report_options(config)
    samples = collect_samples(results_dir, config)
    summary = summarise(samples)
    cells = Cells(samples, config["benchmarks"], options)
    published_table1, published_appendix = load_published()
    by_variant = results_by_variant(summary, cells, config)
    t1 = table1(cells, config, options)
    tables = {
        "results": results_table(summary, cells, config),
        "results_by_variant": by_variant,
        "checkpoints": checkpoints_table(summary, cells, config),
        "table1": t1,
        "learning_speed": learning_speed_table(config, collect_train_logs(results_dir, config), options),
        "table1_published": table1_published(t1, published_table1, config),
    }
    for model in config["models"]:
        tables[f"appendix_e_{model}"] = appendix_e(by_variant, config, model, options)
    tables["appendix_e_published"] = appendix_e_published(by_variant, published_appendix, config, options)
    tables["paired"] = paired_table(cells, config, options)
    tables["completions"] = completions.report_table(results_dir, rl_cells(config))
    tables["provenance"] = collect_provenance(results_dir, config)
    tables["missing"] = missing_cells(summary, config)
    return tables
