"""The names of the tables the aggregate stage writes and of the figures drawn from them, in the order
they are written: the one list that the table builders, the table writer, the figures and the
workflow's rules read. Standard library only, so that planning the workflow imports no numerical or
plotting library.

A name with ``{model}`` stands for one table (or figure) per model of the config, in config order; a
name of ``ONLY_WITH`` is there only when the config's ``report:`` sets its option.
"""

from __future__ import annotations

TABLES = ("results", "results_by_variant", "checkpoints", "table1", "learning_speed", "final_reward",
          "figure3_reward", "training_gain", "dataset_gain", "training_curves", "table1_published",
          "appendix_e_{model}", "appendix_e_published", "paired", "completions", "provenance", "missing", "factorial",
          "diagnostics", "horizon", "horizon_errors", "control")
FIGURES = ("figure1", "figure2", "figure3", "appendix_d", "figure4", "reward_curves", "learning_speed", "kl",
           "appendix_c_{model}", "eval_length", "checkpoints_{model}", "horizon")

# Tables and figures of one kind of study only: written when the study's ``report:`` sets the option.
ONLY_WITH = {"horizon": "horizon", "horizon_errors": "horizon", "control": "control"}

TABLE_FORMATS = ("csv", "md", "tex")
# The figures' data, one row per drawn point: too long to read as Markdown or LaTeX, and left out of
# the HTML report.
CSV_ONLY = ("training_curves",)
FIGURE_FORMATS = ("png", "pdf")


def expand(templates: tuple[str, ...], config: dict) -> list[tuple[str, str, dict]]:
    """``(name, template, fields)`` for every name of ``templates``, in order: a template with
    ``{model}`` gives one name per model, with ``fields`` {"model": model}; any other gives itself."""
    out = []
    report = config.get("report") or {}
    for template in templates:
        if template in ONLY_WITH and not report.get(ONLY_WITH[template]):
            continue
        if "{model}" in template:
            out += [(template.format(model=model), template, {"model": model}) for model in config["models"]]
        else:
            out.append((template, template, {}))
    return out


def table_names(config: dict) -> list[str]:
    """The tables the aggregate stage writes (without extension), in order."""
    return [name for name, _, _ in expand(TABLES, config)]


def table_formats(name: str) -> tuple[str, ...]:
    """The formats table ``name`` is written in."""
    return ("csv",) if name in CSV_ONLY else TABLE_FORMATS


def table_files(config: dict) -> list[str]:
    """The file names the aggregate stage writes into its folder, in order."""
    return [f"{name}.{ext}" for name in table_names(config) for ext in table_formats(name)]


def figure_names(config: dict) -> list[str]:
    """The figures the figures stage draws (without extension), in order."""
    return [name for name, _, _ in expand(FIGURES, config)]


def figure_files(config: dict) -> list[str]:
    """The image file names the figures stage writes into its folder, in order."""
    return [f"{name}.{ext}" for name in figure_names(config) for ext in FIGURE_FORMATS]
