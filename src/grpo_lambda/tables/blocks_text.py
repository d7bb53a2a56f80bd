"""Numbers as the generated blocks write them (grpo_lambda.tables.blocks, study_blocks, horizon_blocks): three
decimals, signed with a true minus, "–" for none, intervals in brackets, p-values below 0.001 as such; and how
a row's p was adjusted (Holm, max-T, or no verdict in a descriptive family)."""

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


# --- how a row was adjusted, as text (a row of any comparison table: its procedure, p_holm, verdict columns)

PROCEDURE_NAMES = {"holm": "Holm", "max_t": "max-T"}  # grpo_lambda.config.families' procedures, as the pages name them
NO_VERDICT = "no verdict (descriptive)"


def procedure_of(row, prefix: str = "") -> str:
    """The procedure that adjusted a row's p (its ``procedure`` column; Holm in a table written before it)."""
    value = row.get(f"{prefix}procedure") if hasattr(row, "get") else getattr(row, f"{prefix}procedure", None)
    return value if isinstance(value, str) and value else "holm"


def adjusted_p(row, prefix: str = "") -> str:
    """"Holm p 0.067", "max-T p 0.031", or, for a descriptive family, that it has no verdict."""
    chosen = procedure_of(row, prefix)
    if chosen == "descriptive":
        return NO_VERDICT
    value = row.get(f"{prefix}p_holm") if hasattr(row, "get") else getattr(row, f"{prefix}p_holm")
    return f"{PROCEDURE_NAMES[chosen]} p {p_value(value)}"


def verdict_of(row, prefix: str = "") -> str:
    value = row.get(f"{prefix}verdict") if hasattr(row, "get") else getattr(row, f"{prefix}verdict")
    return "descriptive" if procedure_of(row, prefix) == "descriptive" else (value or "–")


def p_cell(row, prefix: str = "") -> str:
    """An adjusted p in a table's cell: the value, marked when max-T made it; "–" for a descriptive family."""
    chosen = procedure_of(row, prefix)
    if chosen == "descriptive":
        return "–"
    value = row.get(f"{prefix}p_holm") if hasattr(row, "get") else getattr(row, f"{prefix}p_holm")
    return p_value(value) + (" (max-T)" if chosen == "max_t" else "")
