"""The data a run's tables are built from, read from its results folder or from the compressed raw files
a published run commits (docs/<run>/raw/), so that the aggregate stage and a rebuild of a published
run go through one code path (grpo_lambda.tables.build.tables_from).

A raw folder holds:

``samples.csv.gz``     one row per evaluated completion of every cell: model, dataset, variant, seed
                       (empty for SFT), step, benchmark, id, mode (greedy | sampled), sample, correct,
                       formatted (0/1), length (tokens), extracted (the graded answer: maj@k's votes)
``train_logs.csv.gz``  every row of every cell's ``train_log.csv``, with model, dataset, variant, seed
``provenance.csv``     the distinct version records of the run's files (the ``provenance`` table's rows)
``completions.csv.gz`` the logged training completions the ``completions`` table shows
``config.yaml``        the study's config, as the run used it
``first_errors.csv.gz`` a horizon study's only (``report.horizon``): every final greedy chain on its own
                       suite with its first error (grpo_lambda.tables.horizon)

CSV compressed with gzip, not Parquet: readable by any tool and by pandas without pyarrow (which the
pinned sets do not list), and byte-reproducible (gzip's timestamp is set to 0 and rows keep the order
the results folder gives), so republishing unchanged data changes no committed byte. Measured: 81 KB
for the 16,500 evaluated completions and 384 train-log rows of tests/results_tree.py's study, about 5
bytes a completion.
"""

from __future__ import annotations

import gzip
import io
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from grpo_lambda import completions
from grpo_lambda.config import rl_cells
from grpo_lambda.files import atomic_path, write_text
from grpo_lambda.tables.collect import _SAMPLE_DTYPES, collect_provenance, collect_samples, collect_train_logs
from grpo_lambda.tables.horizon import collect_first_errors
from grpo_lambda.tables.keys import KEYS
from grpo_lambda.config.report import report_options

SAMPLES, LOGS, PROVENANCE, COMPLETIONS, CONFIG = ("samples.csv.gz", "train_logs.csv.gz", "provenance.csv",
                                                  "completions.csv.gz", "config.yaml")
RAW_FILES = (SAMPLES, LOGS, PROVENANCE, COMPLETIONS, CONFIG)
ERRORS = "first_errors.csv.gz"  # optional: a horizon study's
_TEXT = {"model": str, "dataset": str, "variant": str, "step": str, "benchmark": str, "id": str, "mode": str,
         "extracted": str}


@dataclass
class RunData:
    """Everything the tables of one run are computed from."""

    samples: pd.DataFrame       # collect.collect_samples
    logs: pd.DataFrame          # collect.collect_train_logs
    provenance: pd.DataFrame    # collect.collect_provenance
    completions: pd.DataFrame   # completions.report_table
    errors: pd.DataFrame | None = None  # horizon.collect_first_errors (a horizon study's)


def read_results(config: dict, results_dir: str | os.PathLike) -> RunData:
    """The run's data from its results folder."""
    return RunData(collect_samples(results_dir, config), collect_train_logs(results_dir, config),
                   collect_provenance(results_dir, config), completions.report_table(results_dir, rl_cells(config)),
                   collect_first_errors(results_dir, config, report_options(config)))


def write_raw(config: dict, data: RunData, folder: str | os.PathLike) -> list[Path]:
    """Write the raw files of ``data`` (and ``config``) into ``folder``; return their paths."""
    folder = Path(folder)
    samples = data.samples.copy()
    for column in ("correct", "formatted"):
        samples[column] = samples[column].astype(int)
    samples["length"] = samples["length"].astype("Int64")
    written = [(SAMPLES, samples), (LOGS, data.logs), (COMPLETIONS, data.completions)]
    if data.errors is not None:
        written.append((ERRORS, data.errors))
    paths = []
    for name, frame in written:
        paths.append(folder / name)
        with atomic_path(paths[-1]) as tmp:
            tmp.write_bytes(_gzip(frame.to_csv(index=False, lineterminator="\n").encode("utf-8")))
    paths.append(folder / PROVENANCE)
    write_text(paths[-1], data.provenance.to_csv(index=False, lineterminator="\n"))
    paths.append(folder / CONFIG)
    write_text(paths[-1], yaml.safe_dump(config, sort_keys=False, allow_unicode=True))
    return paths


def has_raw(folder: str | os.PathLike) -> bool:
    return all((Path(folder) / name).is_file() for name in RAW_FILES)


def read_raw(folder: str | os.PathLike) -> tuple[dict, RunData]:
    """The config and the data of a published run, from its raw files alone."""
    folder = Path(folder)
    missing = [name for name in RAW_FILES if not (folder / name).is_file()]
    if missing:
        raise FileNotFoundError(f"{folder}: raw file(s) {missing} missing (scripts/publish_run.py writes them)")
    config = yaml.safe_load((folder / CONFIG).read_text(encoding="utf-8"))
    samples = pd.read_csv(folder / SAMPLES, dtype={**_TEXT, "sample": "int64"}, keep_default_na=False,
                          na_values={"seed": [""], "length": [""], "extracted": [""]})
    samples = samples.astype({"seed": "Int64", "correct": "float64", "formatted": "float64", "length": "float64"})
    samples["extracted"] = samples["extracted"].astype(object).where(samples["extracted"].notna(), None)
    samples = samples.astype({key: value for key, value in _SAMPLE_DTYPES.items() if key in KEYS + ["mode"]})
    logs = pd.read_csv(folder / LOGS, dtype={"model": str, "dataset": str, "variant": str})
    provenance = pd.read_csv(folder / PROVENANCE, dtype=object, keep_default_na=False, na_values=[""])
    provenance = provenance.astype(object).where(provenance.notna(), None)  # as collect_provenance leaves them
    if "files" in provenance:
        provenance["files"] = provenance["files"].astype(int)
    table = pd.read_csv(folder / COMPLETIONS, dtype={"model": str, "dataset": str, "variant": str, "phase": str,
                                                      "prompt": str, "completion": str},
                        keep_default_na=False, na_values={column: [""] for column in completions.NUMBERS})
    errors = None
    if (folder / ERRORS).is_file():
        errors = pd.read_csv(folder / ERRORS, dtype={"model": str, "dataset": str, "variant": str, "benchmark": str,
                                                     "id": str, "error": str}, keep_default_na=False,
                             na_values={"seed": [""], "error_step": [""]})
        errors = errors.astype({"seed": "Int64", "error_step": "float64"})
    return config, RunData(samples, logs, provenance, table, errors)


def _gzip(data: bytes) -> bytes:
    """gzip with no timestamp or name in the header: the same data gives the same bytes."""
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", fileobj=buffer, mode="wb", compresslevel=9, mtime=0) as handle:
        handle.write(data)
    return buffer.getvalue()
