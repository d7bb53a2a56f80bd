"""Numbers as the generated blocks write them (grpo_lambda.tables.blocks, grpo_lambda.tables.study_blocks):
three decimals, signed with a true minus, "–" for none, intervals in brackets, p-values below 0.001 as such."""

from __future__ import annotations

import numpy as np
import pandas as pd


def level(value) -> str:
    return "–" if pd.isna(value) else f"{value:.3f}"


def signed_number(value) -> str:
    return "–" if pd.isna(value) else f"{value:+.3f}".replace("-", "−")


def interval(value, low, high, signed: bool = False) -> str:
    show = signed_number if signed else level
    if pd.isna(value):
        return "–"
    if not pd.isna(low) and np.isinf(low):
        return f"{show(value)} [no interval: too few seeds]"
    return show(value) if pd.isna(low) else f"{show(value)} [{show(low)}, {show(high)}]"


def p_value(value) -> str:
    return "–" if pd.isna(value) else "<0.001" if value < 0.001 else f"{value:.3f}"


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows]) + "\n"
