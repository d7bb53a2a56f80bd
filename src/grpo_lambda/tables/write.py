"""Writing the tables: CSV (numbers), Markdown and LaTeX (booktabs, formatted for people)."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pandas as pd

from grpo_lambda.files import write_text
from grpo_lambda.tables.build import build_tables
from grpo_lambda.tables.names import table_formats, TABLE_FORMATS, table_names


def _display(frame: pd.DataFrame) -> pd.DataFrame:
    """Text for people: x, x_low, x_high become "x [low, high]"; floats 3 decimals; NaN "–"."""
    out = pd.DataFrame(index=frame.index)
    skip = set()
    for column in frame.columns:
        if column in skip:
            continue
        low, high = f"{column}_low", f"{column}_high"
        values = frame[column]
        if low in frame.columns and high in frame.columns:
            skip |= {low, high}
            out[column] = [_number(v) + (f" [{_number(lo)}, {_number(hi)}]" if not pd.isna(lo) else "")
                           if not pd.isna(v) else "–" for v, lo, hi in zip(values, frame[low], frame[high])]
        elif pd.api.types.is_bool_dtype(values) or values.map(lambda v: isinstance(v, (bool, np.bool_))).any():
            out[column] = values.map(lambda v: "–" if v is None or (isinstance(v, float) and math.isnan(v))
                                     else ("yes" if v else "no"))
        elif pd.api.types.is_float_dtype(values) and column in ("seed", "n", "step"):
            # Whole numbers that a missing value (the SFT row's seed) turned into floats.
            out[column] = values.map(lambda v: "–" if pd.isna(v) else str(int(v)))
        elif pd.api.types.is_float_dtype(values) and _is_p_value(column):
            out[column] = values.map(lambda v: "–" if pd.isna(v) else "<0.001" if v < 0.001 else f"{v:.3f}")
        elif pd.api.types.is_float_dtype(values):
            digits = 1 if "length" in column or column.endswith("df") else 3
            out[column] = values.map(lambda v: "–" if pd.isna(v) else f"{v:.{digits}f}")
        else:
            out[column] = values.map(lambda v: "–" if v is None or (not isinstance(v, str) and pd.isna(v))
                                     else str(v))
    return out


def _is_p_value(column: str) -> bool:
    """p, p_holm, auc_p, gain_p_equivalence_holm, ...: the p-value columns (grpo_lambda.tables.verdicts)."""
    return column == "p" or column.startswith("p_") or "_p_" in column or column.endswith("_p")


def _number(value: float) -> str:
    return f"{value:.3f}"


def write_table(frame: pd.DataFrame, out_dir: str | os.PathLike, name: str,
                formats: tuple[str, ...] = TABLE_FORMATS) -> list[str]:
    """Write ``name``.csv (numbers), .md and .tex (booktabs, formatted), or those of ``formats``;
    return the paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    shown = _display(frame) if set(formats) - {"csv"} else None
    paths = []
    for ext in formats:
        path = out_dir / f"{name}.{ext}"
        write_text(path, _text(frame, shown, ext))  # temporary name, then renamed
        paths.append(str(path))
    return paths


def _text(frame: pd.DataFrame, shown: pd.DataFrame | None, ext: str) -> str:
    """``frame`` as CSV, or ``shown`` (its :func:`_display`) as Markdown or LaTeX."""
    if ext == "csv":
        return frame.to_csv(index=False)
    if ext == "md":
        # disable_numparse: tabulate would otherwise re-format the already formatted numbers
        return (shown.to_markdown(index=False, disable_numparse=True) + "\n" if not shown.empty else
                "| " + " | ".join(frame.columns) + " |\n|" + "---|" * len(frame.columns) + "\n")
    return shown.to_latex(index=False, escape=True).replace("λ", r"$\lambda$")


def main(config: dict, results_dir: str | os.PathLike, out_dir: str | os.PathLike) -> list[str]:
    """Write every table (CSV, Markdown, LaTeX; see :mod:`grpo_lambda.tables.names`) to ``out_dir``;
    return the paths, in :func:`grpo_lambda.tables.names.table_files` order. Cells absent from
    ``results_dir`` are left out (and listed in ``missing``); the tables are written even when nothing
    has been evaluated yet."""
    tables = build_tables(config, results_dir)
    paths = []
    for name in table_names(config):
        paths += write_table(tables[name], out_dir, name, table_formats(name))
    return paths
