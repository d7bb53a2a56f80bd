"""Publishing a finished run into docs/<run>/ so that anyone can re-derive it from the committed files:

    docs/<run>/raw/        the run's data, compressed (grpo_lambda.tables.raw: per-sample verdicts of every
                           evaluated cell, every train log row, provenance records, logged completions,
                           the config)
    docs/<run>/tables/     every table, rebuilt from raw/ with this checkout's code (CSV and Markdown)
    docs/<run>/figures/    every figure, drawn from those tables (grpo_lambda.figures.main)
    docs/<run>/run.json    what made the run: commits, dirty flag, config hash, versions, job times
    docs/<run>/spread.*    the spread across SFT seeds, where given (grpo-lambda spread)

and the generated blocks of README.md and docs/**/*.md named ``<run>/...`` rewritten from the tables
(grpo_lambda.tables.blocks). :func:`check_published` is the other direction: it rebuilds the tables
and blocks of a published run from its raw files and names every committed table (CSV) and block that
differs (the test of the published runs calls it; the Markdown tables and figures are written from
those CSVs). Run it as ``python scripts/publish_run.py CONFIG DOCS_DIR``.

:func:`republish` (``scripts/publish_run.py CONFIG DOCS_DIR --from-raw``) rebuilds a published run whose
results folder is gone from its committed raw files: the run's data and config stay as committed but for
the config's ``report:`` section, which is taken from CONFIG (how the tables analyse the run, not what
was trained; a CONFIG whose study has grown since the run, more lines or seeds, is named in a warning,
and its report: must fit the run's variants), and run.json keeps what made the run,
updating only the checkout that rebuilt it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import tempfile
from importlib import metadata
from pathlib import Path

import pandas as pd

from grpo_lambda import config as study
from grpo_lambda.files import write_json, write_text
from grpo_lambda.provenance import git_commit
from grpo_lambda.tables.blocks import fill_blocks, find_blocks, run_blocks
from grpo_lambda.tables.study_blocks import UNCHECKED
from grpo_lambda.tables.build import rebuild
from grpo_lambda.tables.collect import missing_cells, summarise
from grpo_lambda.tables.keys import KEYS
from grpo_lambda.tables.names import table_formats, table_names
from grpo_lambda.tables.raw import has_raw, read_results, write_raw
from grpo_lambda.tables.write import write_table

log = logging.getLogger(__name__)

RUN_INFO = "run.json"
SPREAD = "spread.csv"
LIBRARIES = ("python", "torch", "transformers", "trl", "accelerate", "peft", "vllm", "cuda")
REBUILD_LIBRARIES = ("numpy", "pandas", "scipy", "matplotlib")


def publish(config_path: str | Path, docs_dir: str | Path, results_dir: str | Path | None = None,
            spread_dir: str | Path | None = None, partial: bool = False) -> list[Path]:
    """Publish the finished run of ``config_path`` (its results folder, or ``results_dir``) into ``docs_dir``;
    return the files written. The repository is ``docs_dir``'s grandparent (docs/<run>/)."""
    docs_dir = Path(docs_dir)
    commit = git_commit()  # before anything here is written: the checkout the tables are rebuilt with
    config = study.load(config_path)
    results = Path(results_dir or config["results"])
    data = read_results(config, results)
    missing = missing_cells(summarise(data.samples), config)
    if not missing.empty and not partial:
        first = ", ".join(str(v) for v in missing.iloc[0].tolist())
        raise ValueError(f"{results}: {len(missing)} evaluation file(s) missing (the first: {first}); publish a "
                         "finished run, or pass --partial")
    written = write_raw(config, data, docs_dir / "raw")
    config, tables = rebuild(docs_dir / "raw")
    for name in table_names(config):
        formats = tuple(ext for ext in table_formats(name) if ext != "tex")
        written += [Path(p) for p in write_table(tables[name], docs_dir / "tables", name, formats)]
    written += _figures(config, docs_dir)
    if spread_dir is not None:
        for ext in ("csv", "md"):
            shutil.copyfile(Path(spread_dir) / f"spread.{ext}", docs_dir / f"spread.{ext}")
            written.append(docs_dir / f"spread.{ext}")
    write_json(docs_dir / RUN_INFO, run_info(config, str(config_path), results, data, commit))
    written.append(docs_dir / RUN_INFO)
    readme = docs_dir / "README.md"
    if not readme.is_file():
        write_text(readme, f"# {docs_dir.name}\n\n" + "".join(
            f"<!-- generated: {docs_dir.name}/{name} -->\n<!-- end generated -->\n\n"
            for name in ("summary", "comparison", "factorial", "diagnostics", "provenance")))
    return written + _fill_run_blocks(docs_dir, published_blocks(docs_dir))


def republish(config_path: str | Path, docs_dir: str | Path) -> list[Path]:
    """Rebuild the published run in ``docs_dir`` from its raw files with CONFIG's ``report:`` section (the
    module docstring); return the files written."""
    import yaml

    from grpo_lambda.tables.raw import CONFIG

    docs_dir = Path(docs_dir)
    commit = git_commit()
    if not has_raw(docs_dir / "raw"):
        raise FileNotFoundError(f"{docs_dir}/raw: no raw files to republish from")
    config = study.load(config_path)
    run_config = yaml.safe_load((docs_dir / "raw" / CONFIG).read_text(encoding="utf-8"))
    differs = [key for key in ("models", "datasets", "benchmarks", "variants", "seeds")
               if config.get(key) != run_config.get(key)]
    if differs:  # the study grew since the run (new lines, more seeds): its report: still reads the run
        log.warning("%s: %s differ from the run's (%s/raw/%s); only its report: section is used, checked "
                    "against the run's config", config_path, ", ".join(differs), docs_dir, CONFIG)
    run_config["report"] = dict(config.get("report") or {})
    try:
        study.validate(run_config)
    except Exception as error:
        raise ValueError(f"{config_path}: its report: section does not fit the run in {docs_dir}: {error}") from error
    path = docs_dir / "raw" / CONFIG
    write_text(path, yaml.safe_dump(run_config, sort_keys=False, allow_unicode=True))
    written = [path]
    config, tables = rebuild(docs_dir / "raw")
    for name in table_names(config):
        formats = tuple(ext for ext in table_formats(name) if ext != "tex")
        written += [Path(p) for p in write_table(tables[name], docs_dir / "tables", name, formats)]
    written += _figures(config, docs_dir)
    info = json.loads((docs_dir / RUN_INFO).read_text(encoding="utf-8"))
    info["config_sha256"] = hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()
    info["published_with"] = {"commit": commit.removesuffix("+changes"), "dirty": commit.endswith("+changes"),
                              "versions": {name: _version(name) for name in REBUILD_LIBRARIES}}
    write_json(docs_dir / RUN_INFO, info)
    written.append(docs_dir / RUN_INFO)
    return written + _fill_run_blocks(docs_dir, published_blocks(docs_dir, tables, config))


def _fill_run_blocks(docs_dir: Path, generated: dict[str, str]) -> list[Path]:
    """Fill the run's generated blocks in README.md and docs/**/*.md; return the files that changed."""
    changed = []
    for path in markdown_files(docs_dir):
        text = path.read_text(encoding="utf-8")
        filled = fill_blocks(text, generated, docs_dir.name)
        if filled != text:
            write_text(path, filled)
            changed.append(path)
    return changed


def _figures(config: dict, docs_dir: Path) -> list[Path]:
    """Every figure as PNG in docs/<run>/figures/, drawn from the published tables."""
    from grpo_lambda import figures  # matplotlib, only when publishing

    folder = docs_dir / "figures"
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory() as scratch:
        for path in map(Path, figures.main(config, docs_dir / "tables", scratch)):
            if path.suffix == ".png":
                shutil.copyfile(path, folder / path.name)
                written.append(folder / path.name)
    return written


def markdown_files(docs_dir: Path) -> list[Path]:
    """README.md and docs/**/*.md of the repository ``docs_dir`` sits in (docs/<run>/)."""
    repo = docs_dir.resolve().parents[1]
    return [path for path in [repo / "README.md", *sorted((repo / "docs").rglob("*.md"))] if path.is_file()]


def published_blocks(docs_dir: Path, tables: dict | None = None, config: dict | None = None) -> dict[str, str]:
    """The generated blocks of a published run, from its raw files (or the tables given), run.json and
    spread.csv."""
    if tables is None:
        config, tables = rebuild(docs_dir / "raw")
    info = json.loads((docs_dir / RUN_INFO).read_text(encoding="utf-8"))
    spread = pd.read_csv(docs_dir / SPREAD) if (docs_dir / SPREAD).is_file() else None
    return run_blocks(docs_dir.name, config, tables, info, spread)


def check_published(docs_dir: str | Path) -> list[str]:
    """What differs between a published run's committed tables and blocks and what today's code makes
    of its raw files ([] when nothing does)."""
    docs_dir = Path(docs_dir)
    if not has_raw(docs_dir / "raw"):
        return [f"{docs_dir}/raw: no raw files"]
    config, tables = rebuild(docs_dir / "raw")
    problems = []
    for name in table_names(config):
        path = docs_dir / "tables" / f"{name}.csv"
        if not path.is_file():
            problems.append(f"{path}: missing")
            continue
        problems += _differs(path, tables[name])
    generated = published_blocks(docs_dir, tables, config)
    for path in markdown_files(docs_dir):
        for name, body in find_blocks(path.read_text(encoding="utf-8")):
            if name.split("/")[0] != docs_dir.name:
                continue
            if name not in generated:
                problems.append(f"{path}: block {name!r} is not a block the code writes")
            elif body != generated[name] and UNCHECKED not in generated[name]:
                # (a history block that git cannot check here, a shallow clone's, is left as committed)
                problems.append(f"{path}: block {name!r} differs from what the tables give:\n{generated[name]}")
    return problems


def _differs(path: Path, table: pd.DataFrame) -> list[str]:
    """The committed CSV ``path`` against ``table`` written and read back as CSV, numbers to 1e-9."""
    import io

    committed = pd.read_csv(path)
    rebuilt = pd.read_csv(io.StringIO(table.to_csv(index=False)))
    try:
        pd.testing.assert_frame_equal(committed, rebuilt, check_exact=False, rtol=1e-9, atol=1e-12, check_dtype=False)
    except AssertionError as error:
        return [f"{path}: differs from the table rebuilt from raw/: {str(error).splitlines()[0]}"]
    return []


def run_info(config: dict, config_path: str, results: Path, data, commit: str) -> dict:
    """What made the run (run.json): the config and its hash, the commits and versions its files name,
    the cells, the jobs' wall and CPU time, and the checkout that rebuilt the tables."""
    records = data.provenance
    commits = sorted({str(c) for c in records.get("commit", pd.Series(dtype=object)).dropna()})
    libraries = {name: ", ".join(sorted({str(v) for v in records[name].dropna()}))
                 for name in LIBRARIES if name in records and records[name].notna().any()}
    evaluated = data.samples[KEYS].drop_duplicates()
    return {
        "config": config_path,
        "config_sha256": hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest(),
        "cells": {"rl": len(study.rl_cells(config)), "evaluated": len(evaluated)},
        "made_by": {"commits": commits, "dirty": any(c.endswith("+changes") for c in commits), "libraries": libraries},
        "time": job_times(results),
        "published_with": {"commit": commit.removesuffix("+changes"), "dirty": commit.endswith("+changes"),
                           "versions": {name: _version(name) for name in REBUILD_LIBRARIES}},
    }


def job_times(results: Path) -> dict:
    """Per stage (logs/<stage>/...), the jobs' count and summed wall and CPU seconds from Snakemake's
    benchmark files, and the study's wall time where ``wall_seconds.txt`` records it."""
    stages: dict[str, dict] = {}
    for path in sorted((results / "logs").rglob("*.benchmark.tsv")):
        relative = path.relative_to(results / "logs")
        stage = relative.parts[0] if len(relative.parts) > 1 else relative.name.split(".")[0]
        try:
            row = pd.read_csv(path, sep="\t").iloc[-1]
        except (OSError, ValueError, IndexError):
            continue
        spent = stages.setdefault(stage, {"jobs": 0, "wall_seconds": 0.0, "cpu_seconds": 0.0})
        spent["jobs"] += 1
        spent["wall_seconds"] += float(row.get("s", 0.0))
        spent["cpu_seconds"] += float(row.get("cpu_time", 0.0))
    out: dict = {"stages": stages}
    wall = results / "wall_seconds.txt"
    if wall.is_file():
        out["wall_seconds"] = float(wall.read_text().split()[0])
    return out


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
