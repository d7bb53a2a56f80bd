"""Write one training set or benchmark as normalised JSONL (id, problem, answer[, solution])."""

from __future__ import annotations

import logging

from grpo_lambda import files
from grpo_lambda.data import arith

log = logging.getLogger(__name__)


def rows_for(settings: dict) -> tuple[list[dict], int]:
    """The normalised rows and the number of source rows dropped as unusable."""
    key, role = settings["key"], settings["role"]
    if settings["source"] == "synthetic":
        if role == "train":
            rows = arith.generate(settings["n"], seed=settings["seed"], levels=settings.get("levels"),
                                  box_rate=settings.get("box_rate", 1.0),
                                  carry_error_rate=settings.get("carry_error_rate", 0.0), prefix=key)
        else:
            rows = arith.generate(settings["n"], seed=settings["seed"], levels=[settings["level"]],
                                  held_out=True, prefix=key)
        return rows, 0
    from grpo_lambda.data.registry import load_rows

    return load_rows(settings.get("name", key), settings.get("path"), limit=settings.get("limit"))


def run(settings: dict, out_path: str) -> int:
    rows, dropped = rows_for(settings)
    if not rows:
        raise ValueError(f"{settings['key']}: no usable rows ({dropped} dropped)")
    files.write_jsonl(out_path, rows)
    log.info("%s: wrote %d rows to %s; dropped %d unusable rows", settings["key"], len(rows), out_path, dropped)
    return len(rows)
