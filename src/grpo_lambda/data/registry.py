"""Where a training set or benchmark lives and how its rows become normalised rows.

A normalised row is ``{"id": str, "problem": str, "answer": str | list[str]}`` (plus ``solution``
where the source has one); a list answer holds the accepted forms of one answer (Minerva,
OlympiadBench), any of which the grader accepts.

A study describes each dataset in its config (config/README.md, "Datasets and benchmarks"):

- ``source: file``: a local JSONL, JSON, CSV or Parquet file, or a ``save_to_disk`` folder;
- ``source: hub``: any hub dataset id (``datasets.load_dataset``: ``hub_id``, ``config``, ``split``,
  ``revision``);
- ``source: registry``: an entry of ``registry.yaml``, which holds exactly what a study would write
  itself for the paper's datasets; keys given beside it win;

with a field mapping (``fields``: the source's column for ``problem``, ``answer`` and, optionally,
``solution`` and ``id``) and an answer normaliser (``answer_kind``, one of ``rows.ANSWER_KINDS``).
``resolve`` turns any of them into that one full description; the stages read rows by it
(``load_rows``, ``load_conversations``), each source row made a normalised row by ``grpo_lambda.data.rows``.
"""

from __future__ import annotations

import csv
import functools
import itertools
import json
import logging
import os
import re
from importlib import resources
from pathlib import Path
from typing import Iterable, Iterator

from grpo_lambda import files
from grpo_lambda.data.rows import FIELDS, conversation_messages, normalize_row

log = logging.getLogger(__name__)

FILE_SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")  # or a save_to_disk folder
# The config group of each role a dataset plays (prepare's settings name the role).
ROLE_GROUPS = {"train": "datasets", "benchmark": "benchmarks", "sft": "sft_sets"}
# Rows read to learn a JSONL file's fields at validation, and the largest JSON file read whole for it.
PEEK_ROWS = 100
PEEK_JSON_BYTES = 64 << 20
# The prefetch stage's record under a study's results folder: the columns and commit of each hub dataset.
PREFETCH_RECORD = "hub/prefetched.json"


# --------------------------------------------------------------------------------------------------
# The registry and the full description of a source
# --------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def entries() -> dict:
    """The registry: ``{"datasets": {name: entry}, "benchmarks": ..., "sft_sets": ...}`` (registry.yaml)."""
    import yaml

    return yaml.safe_load(resources.files("grpo_lambda.data").joinpath("registry.yaml").read_text(encoding="utf-8"))


def registry_names(group: str) -> list[str]:
    """The names ``source: registry`` may use in a group (a benchmark may serve as a training set and back)."""
    found = entries()
    if group == "sft_sets":
        return sorted(found["sft_sets"])
    return sorted({*found["datasets"], *found["benchmarks"]})


def registry_entry(name: str, group: str) -> dict:
    """The registry's entry ``name`` for ``group``; ValueError naming the known ones otherwise."""
    found = entries()
    for where in ([group] if group == "sft_sets" else [group, *(g for g in ("datasets", "benchmarks") if g != group)]):
        if name in found[where]:
            return found[where][name]
    what = "an SFT set of the dataset registry" if group == "sft_sets" else "in the dataset registry"
    raise ValueError(f"{name!r} is not {what} (grpo_lambda/data/registry.yaml; known: "
                     f"{', '.join(registry_names(group))})")


def resolve(spec: dict, key: str, group: str = "datasets") -> dict:
    """The full description of one dataset of a config (``datasets.<key>``, ``benchmarks.<key>`` or the
    SFT set): ``source`` file or hub, where it is, ``fields`` (problem and answer at least), ``answer_kind``,
    ``split`` and ``name`` (the row ids' prefix). A registry entry becomes its entry with the config's keys
    over it, marked ``registry: <name>``. A synthetic source is returned as it is."""
    if spec["source"] == "synthetic":
        return dict(spec)
    if spec["source"] == "registry":
        name = spec.get("name", key)
        entry = registry_entry(name, group)
        own = {k: v for k, v in spec.items() if k not in ("source", "name")}
        spec = {**entry, **own, "source": "file" if own.get("path") else "hub", "registry": name}
        if group != "sft_sets":
            spec["fields"] = {**entry.get("fields", {}), **own.get("fields", {})}
        key = name
    resolved = {"split": "train", "config": None, **spec, "name": spec.get("name", key)}
    if group != "sft_sets":
        resolved["answer_kind"] = spec.get("answer_kind", "text")
        resolved["fields"] = {"problem": "problem", "answer": "answer", **spec.get("fields", {})}
    return resolved


def _registry_spec(name: str, path, group: str) -> dict:
    return resolve({"source": "registry", "name": name, **({"path": str(path)} if path is not None else {})},
                   name, group)


# --------------------------------------------------------------------------------------------------
# Sources
# --------------------------------------------------------------------------------------------------


def _json_document(path: Path) -> list:
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not UTF-8 (byte {error.start + 1} of the file)") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}:{error.lineno}: not JSON ({error.msg} at column {error.colno})") from None
    except RecursionError:  # one document: a record nested past the recursion limit ends the whole file
        raise ValueError(f"{path}: not JSON that Python can hold (nested too deeply); write it as JSONL, "
                         "where a bad row is skipped") from None
    except ValueError as error:  # an integer past Python's digit limit
        raise ValueError(f"{path}: not JSON that Python can hold ({str(error).split(';')[0]}); write it as "
                         "JSONL, where a bad row is skipped") from None
    if isinstance(data, dict):  # {"train": [...]} or {"data": [...]}: the one list it holds
        lists = [value for value in data.values() if isinstance(value, list)]
        if len(lists) != 1:
            raise ValueError(f"{path}: a JSON object must hold exactly one list of records")
        data = lists[0]
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a JSON list of records")
    return data


def _read_json_records(path: Path, summary: files.ReadSummary) -> Iterator[tuple[str, object]]:
    # Read with the json module rather than datasets: an answer column may mix strings, numbers and
    # lists, which an Arrow table cannot hold, and ORZ's file is a list of lists.
    if path.suffix == ".jsonl":
        # A JSONL line may hold an ORZ pair (a list) too: no field check here, _normalize_row does it.
        for line_no, record in files.iter_jsonl(path, summary, objects_only=False):
            yield f"{path}:{line_no}", record
        return
    for index, record in enumerate(_json_document(path)):
        yield f"{path}[{index}]", record


def _read_csv_records(path: Path, summary: files.ReadSummary) -> Iterator[tuple[str, dict]]:
    # The csv module rather than pandas or datasets: every cell stays the text it is (no type guessing
    # that would turn an answer "007" into 7), and a bad row is skipped, not the end of the file.
    with open(path, newline="", encoding="utf-8", errors="surrogateescape") as handle:
        reader = csv.DictReader(handle)
        for record in reader:
            where = f"{path}:{reader.line_num}"
            if None in record:
                summary.skip(where, "wrong field count", f"{len(reader.fieldnames) + len(record[None])} fields, "
                                                         f"the header has {len(reader.fieldnames)}")
            elif any(isinstance(value, str) and not value.isascii() and _has_surrogate(value)
                     for value in record.values()):
                summary.skip(where, "not UTF-8", "a byte that is not UTF-8")
            else:
                yield where, record


def _has_surrogate(text: str) -> bool:
    return any("\udc80" <= char <= "\udcff" for char in text)


def _read_disk_dataset(path: Path, split: str) -> Iterable:
    import datasets

    loaded = datasets.load_from_disk(str(path))
    if isinstance(loaded, datasets.DatasetDict):
        if split in loaded:
            return loaded[split]
        if len(loaded) == 1:
            return next(iter(loaded.values()))
        raise ValueError(f"{path}: no split {split!r}; it has {', '.join(loaded)}")
    return loaded


def _table_records(spec: dict, table, where: str) -> Iterator[tuple[str, object]]:
    """The records of a ``datasets.Dataset``, once its columns hold every mapped field."""
    refuse_unmapped(spec, set(table.column_names))
    return ((f"{where}[{index}]", record) for index, record in enumerate(table))


_COMMIT = re.compile(r"[0-9a-f]{40}")


def load_hub_split(spec: dict):
    """A hub dataset's split, by ``datasets.load_dataset`` (also what ``prefetch`` calls, online).

    Offline, ``datasets`` reads the newest copy in its cache whatever the revision asked, and its cache
    folder is named by the commit it holds: a ``revision`` that is a commit must be that one, or this
    refuses (two revisions of one dataset in one ``$HF_HOME``), rather than read other bytes silently.
    """
    import datasets

    revision = spec.get("revision")
    table = datasets.load_dataset(spec["hub_id"], spec.get("config"), split=spec["split"], revision=revision)
    held = {part for cache in getattr(table, "cache_files", None) or [] for part in Path(cache["filename"]).parts
            if _COMMIT.fullmatch(part)}
    if revision and _COMMIT.fullmatch(revision) and held and revision not in held:
        raise ValueError(f"{spec['hub_id']}: the datasets cache holds commit {', '.join(sorted(held))}, not {revision}; "
                         "fetch it again (snakemake results/hub/prefetched.json --forcerun prefetch), one revision "
                         "of a dataset per HF_HOME")
    return table


def _source_records(spec: dict, summary: files.ReadSummary) -> Iterable[tuple[str, object]]:
    """``(where, record)`` for each source record; ``where`` is ``path:line`` or ``source[row]``."""
    if spec["source"] == "hub":
        return _table_records(spec, load_hub_split(spec), spec["hub_id"])
    path = Path(spec["path"]).expanduser()
    if path.is_dir():
        return _table_records(spec, _read_disk_dataset(path, spec["split"]), str(path))
    if not path.exists():
        raise FileNotFoundError(f"path {str(path)!r} does not exist")
    if path.suffix in (".jsonl", ".json", ".csv"):
        refuse_unmapped(spec, source_columns(spec, quiet=True))  # a mapping error, not thousands of bad rows
        return (_read_csv_records if path.suffix == ".csv" else _read_json_records)(path, summary)
    if path.suffix == ".parquet":
        import datasets

        return _table_records(spec, datasets.Dataset.from_parquet(str(path)), str(path))
    raise ValueError(f"path {str(path)!r}: expected a {', '.join(FILE_SUFFIXES)} file or a save_to_disk folder")


def where_from(spec: dict) -> str:
    """The source as a log names it: its path, or its hub id and split."""
    return str(spec["path"]) if spec["source"] == "file" else f"{spec['hub_id']} ({spec['split']})"


def load_rows(source: str | dict, path: str | os.PathLike | None = None, *, limit: int | None = None,
              summary: files.ReadSummary | None = None) -> tuple[list[dict], int]:
    """The normalised rows of a dataset and the number of source rows dropped as unusable.

    ``source`` is a resolved spec (``resolve``) or a registry name, read from the hub or from ``path``
    (a .jsonl, .json, .csv or .parquet file or a ``save_to_disk`` folder). ``limit`` keeps the first
    ``limit`` usable rows. A line that is not UTF-8 or not JSON, or a row with no problem or no usable
    answer, is skipped, counted and named in the log (``path:line``); a repeated id is dropped when its
    answer agrees and an error naming both lines when it does not. ``summary`` (a
    ``files.ReadSummary``) receives the counts, and its caller logs them; without one, the counts are logged here.
    """
    spec = _registry_spec(source, path, "datasets") if isinstance(source, str) else source
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be a positive integer or None, got {limit!r}")

    def usable():
        for index, (where, raw) in enumerate(_source_records(spec, summary)):
            row = normalize_row(raw, spec, index)
            if row is None:
                summary.skip(where, "no problem or no usable answer", "unusable row")
            else:
                yield where, row

    reported_here = summary is None
    summary = summary if summary is not None else files.ReadSummary(where_from(spec))
    rows = [row for _, row in itertools.islice(files.drop_duplicate_ids(usable(), summary), limit)]
    summary.rows = len(rows)
    if reported_here:  # a caller's summary is logged by the caller, once, when it has everything
        summary.report()
    return rows, summary.total_skipped + summary.duplicates


def refuse_unmapped(spec: dict, columns: set[str] | None) -> None:
    """ValueError naming the mapped field whose column ``columns`` lacks, if one does."""
    missing = missing_field(spec, columns)
    if missing:
        role, column = missing
        raise ValueError(f"fields.{role}: column {column!r} is not in {where_from(spec)} "
                         f"(its columns: {', '.join(sorted(columns)) or 'none'})")


# --------------------------------------------------------------------------------------------------
# Fields, checked before any job
# --------------------------------------------------------------------------------------------------


def source_columns(spec: dict, *, quiet: bool = False) -> set[str] | None:
    """The field names of a local source's rows, from its header, schema or first rows; None where they
    cannot be told cheaply (a hub dataset: see ``prefetch``; a JSON file over PEEK_JSON_BYTES; rows that
    are lists). ValueError when the file cannot be read at all.

    A JSONL file's rows are read by the guarded reader ``prepare`` reads them with (``files.iter_jsonl``):
    a row Python cannot hold (nested past the recursion limit, a 5,000-digit integer, a lone surrogate)
    is skipped and named in one warning (unless ``quiet``: the caller reads the file next and names them
    itself), and only the good rows decide the columns."""
    if spec["source"] != "file":
        return None
    path = Path(spec["path"]).expanduser()
    if path.is_dir():
        return _disk_dataset_columns(path, spec.get("split", "train"))
    if path.suffix == ".csv":
        with open(path, newline="", encoding="utf-8", errors="replace") as handle:
            header = next(csv.reader(handle), None)
        if header is None:
            raise ValueError(f"{spec['path']} is empty: it holds no header and no rows")
        return set(header)
    if path.suffix == ".parquet":
        import pyarrow.parquet

        return set(pyarrow.parquet.read_schema(path).names)
    peeked = files.ReadSummary(str(path), log_each=False)
    if path.suffix == ".jsonl":
        records = (record for _, record in files.iter_jsonl(path, peeked, objects_only=False))
    elif path.suffix == ".json" and path.stat().st_size <= PEEK_JSON_BYTES:
        records = iter(_json_document(path))
    else:
        return None
    found, seen = set(), 0
    try:
        for record in itertools.islice(records, PEEK_ROWS):
            if not isinstance(record, dict):
                return None  # ORZ's pairs: read by their shape, not by fields
            found.update(record)
            seen += 1
    finally:
        if peeked.lines and not quiet:
            log.warning("%s: %d bad rows skipped in reading its columns (%s)", path, peeked.total_skipped,
                        "; ".join(line.removesuffix("; skipped") for line in peeked.lines))
    if not seen and not peeked.total_skipped:
        raise ValueError(f"{spec['path']} is empty: it holds no rows")
    return found


def _disk_dataset_columns(path: Path, split: str) -> set[str] | None:
    info = path / "dataset_info.json"
    try:
        if not info.is_file():  # a DatasetDict: one folder per split
            splits = json.loads((path / "dataset_dict.json").read_text(encoding="utf-8"))["splits"]
            chosen = split if split in splits else (splits[0] if len(splits) == 1 else None)
            if chosen is None:
                return None
            info = path / chosen / "dataset_info.json"
        return set(json.loads(info.read_text(encoding="utf-8"))["features"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def missing_field(spec: dict, columns: set[str] | None) -> tuple[str, str] | None:
    """``(field, column)`` of the first mapped column that ``columns`` lacks; None when all are there,
    when the columns are unknown, or when a registry dataset's local copy holds normalised rows."""
    if columns is None or (spec.get("registry") and {"problem", "answer"} <= columns):
        return None
    for role in FIELDS:
        column = spec.get("fields", {}).get(role)
        if column is not None and column not in columns:
            return role, column
    return None


def recorded_dataset(record: dict, spec: dict) -> dict | None:
    """The prefetch record's entry of a hub dataset (by hub id, config, split and asked revision)."""
    for entry in record.get("datasets", {}).values():
        if all(entry.get(key) == spec.get(key) for key in ("hub_id", "config", "split", "revision")):
            return entry
    return None


def recorded_columns(results: str, spec: dict) -> set[str] | None:
    """A hub dataset's columns as the study's prefetch record holds them; None before it is fetched."""
    try:
        record = json.loads((Path(results) / PREFETCH_RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    entry = recorded_dataset(record, spec)
    return set(entry["columns"]) if entry and "columns" in entry else None


# --------------------------------------------------------------------------------------------------
# SFT conversations
# --------------------------------------------------------------------------------------------------


def load_conversations(source: str | dict, path: str | os.PathLike | None = None, *, limit: int | None = None,
                       summary: files.ReadSummary | None = None) -> tuple[list[dict], int]:
    """The rows ``{"id", "messages"}`` of an SFT set (a resolved spec or the name of one in the registry's
    ``sft_sets``) and the number of source rows dropped as unusable; ``path`` and ``limit`` as in
    ``load_rows``."""
    spec = _registry_spec(source, path, "sft_sets") if isinstance(source, str) else source
    reported_here = summary is None  # else the caller logs it, as in load_rows
    summary = summary if summary is not None else files.ReadSummary(where_from(spec))
    rows = []
    for index, (where, raw) in enumerate(_source_records(spec, summary)):
        messages = conversation_messages(raw)
        if messages is None:
            summary.skip(where, "no user and assistant turn", "unusable row")
            continue
        rows.append({"id": f"{spec['name']}-{index}", "messages": messages})
        if limit is not None and len(rows) == limit:
            break
    summary.rows = len(rows)
    if reported_here:
        summary.report()
    return rows, summary.total_skipped
