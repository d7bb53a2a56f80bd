"""The real training sets and benchmarks: where each lives and how its rows become normalised rows.

A normalised row is ``{"id": str, "problem": str, "answer": str | list[str]}``; a list answer holds
the accepted forms of one answer (Minerva, OlympiadBench), any of which the grader accepts. A source
may be the Hugging Face hub (``datasets.load_dataset``) or a local copy: a JSONL/JSON file, a parquet
file or a ``save_to_disk`` folder, holding either normalised rows or the hub's raw fields.
"""

from __future__ import annotations

import itertools
import json
import logging
import numbers
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from grpo_lambda import files

log = logging.getLogger(__name__)

ANSWER_KINDS = ("text", "gsm8k", "number", "list")
_THOUSANDS = re.compile(r"-?[0-9]{1,3}(,[0-9]{3})+(\.[0-9]+)?")
ROLES = ("train", "benchmark")


@dataclass(frozen=True)
class DatasetSpec:
    """Where a dataset lives and how to read its rows.

    ``answer_kind`` names the answer normalisation: ``text`` (a string kept as is), ``gsm8k`` (the
    number after ``####``, thousands commas dropped), ``number`` (a float such as 27.0, written ``27``) or ``list`` (accepted
    forms, each stripped of an enclosing ``$...$``). A ``problem_field`` of ``messages`` reads the
    first user message of a chat.
    """

    name: str
    hub_id: str
    config: str | None
    split: str
    problem_field: str
    answer_field: str
    answer_kind: str
    role: str
    id_field: str | None = None

    def __post_init__(self):
        if self.answer_kind not in ANSWER_KINDS:
            raise ValueError(f"{self.name}: answer_kind must be one of {ANSWER_KINDS}, got {self.answer_kind!r}")
        if self.role not in ROLES:
            raise ValueError(f"{self.name}: role must be one of {ROLES}, got {self.role!r}")


DATASETS: dict[str, DatasetSpec] = {spec.name: spec for spec in (
    # Training sets
    DatasetSpec("gsm8k", "openai/gsm8k", "main", "train", "question", "answer", "gsm8k", "train"),
    DatasetSpec("math12k", "hiyouga/math12k", None, "train", "problem", "answer", "text", "train"),
    DatasetSpec("mathrl16k", "riddickz/math-rl-16k", None, "train", "problem", "solution", "text", "train"),
    # Open-Reasoner-Zero's 57k collection as re-uploaded in chat form (messages + ground_truth); its
    # original JSON file (pairs of human/assistant turns) is read too, see ``_orz_pair_to_row``.
    DatasetSpec("orz57k", "hamishivi/rlvr_orz_math_57k_collected", None, "train", "messages", "ground_truth",
                "text", "train"),
    # Benchmarks (the five of the Dr. GRPO evaluation suite)
    DatasetSpec("aime24", "HuggingFaceH4/aime_2024", None, "train", "problem", "answer", "text", "benchmark",
                id_field="id"),
    DatasetSpec("amc", "AI-MO/aimo-validation-amc", None, "train", "problem", "answer", "number", "benchmark",
                id_field="id"),
    DatasetSpec("math500", "HuggingFaceH4/MATH-500", None, "test", "problem", "answer", "text", "benchmark",
                id_field="unique_id"),
    DatasetSpec("minerva", "math-ai/minervamath", None, "test", "question", "answer", "list", "benchmark"),
    DatasetSpec("olympiadbench", "math-ai/olympiadbench", None, "test", "question", "final_answer", "list",
                "benchmark", id_field="id"),
)}


@dataclass(frozen=True)
class SftSetSpec:
    """A hub SFT set of chat conversations (``sft.data: open_r1``): rows of ``messages`` [{role, content}],
    or ShareGPT's ``system`` + ``conversations`` [{from, value}], which the same rows carry too."""

    name: str
    hub_id: str
    config: str | None
    split: str


SFT_SETS: dict[str, SftSetSpec] = {spec.name: spec for spec in (
    # open-r1's SFT recipe (the SFT block of the paper's Table 2): R1's reasoning traces on math, code and
    # puzzle problems, re-uploaded by HuggingFaceH4 with a TRL-ready `messages` column.
    SftSetSpec("bespoke-stratos-17k", "HuggingFaceH4/Bespoke-Stratos-17k", None, "train"),
)}


def get_spec(name: str) -> DatasetSpec:
    """The registry entry called ``name``; ValueError naming the known ones otherwise."""
    try:
        return DATASETS[name]
    except KeyError:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(sorted(DATASETS))}") from None


# --------------------------------------------------------------------------------------------------
# Answers
# --------------------------------------------------------------------------------------------------


def _number_text(value: numbers.Real) -> str | None:
    value = float(value) if not isinstance(value, numbers.Integral) else int(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return None
        return str(int(value)) if value.is_integer() else repr(value)
    return str(value)


def _answer_text(value, kind: str) -> str | None:
    """One answer as a non-empty string, or None when it is unusable."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, numbers.Real):
        return _number_text(value)
    if not isinstance(value, str):
        return None
    text = value.strip()
    if kind == "gsm8k":
        if "####" in text:
            text = text.rsplit("####", 1)[1].strip()
        if _THOUSANDS.fullmatch(text):
            text = text.replace(",", "")
    if kind == "list" and text.count("$") == 2 and text[0] == "$" and text[-1] == "$":
        text = text[1:-1].strip()
    return text or None


def normalize_answer(value, kind: str) -> str | list[str] | None:
    """The normalised answer of one source row, or None when it has no usable answer.

    ``list`` answers stay lists (a string becomes a list of one); a list given to another kind is
    kept as a list of accepted forms too.
    """
    if kind not in ANSWER_KINDS:
        raise ValueError(f"kind must be one of {ANSWER_KINDS}, got {kind!r}")
    if isinstance(value, (list, tuple)):
        forms = [form for form in (_answer_text(item, kind) for item in value) if form is not None]
        return forms or None
    text = _answer_text(value, kind)
    if text is None:
        return None
    return [text] if kind == "list" else text


# --------------------------------------------------------------------------------------------------
# Rows
# --------------------------------------------------------------------------------------------------


def _first_user_message(messages) -> str | None:
    if not isinstance(messages, list):
        return None
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "user":
            return message.get("content")
    return None


def _orz_pair_to_row(pair: list) -> dict:
    """An Open-Reasoner-Zero record ``[{"from": "human", "value": problem},
    {"from": "assistant", "ground_truth": {"value": answer}}]`` as a row with problem and answer."""
    row = {}
    for turn in pair:
        if not isinstance(turn, dict):
            continue
        if turn.get("from") == "human":
            row["problem"] = turn.get("value")
        elif turn.get("from") == "assistant":
            truth = turn.get("ground_truth")
            row["answer"] = truth.get("value") if isinstance(truth, dict) else truth
    return row


def _normalize_row(raw, spec: DatasetSpec, index: int) -> dict | None:
    """A source row as ``{"id", "problem", "answer"}``; None when it has no problem or no usable answer.

    A row already in normalised form (``problem`` and ``answer`` fields) is read as such; otherwise
    the spec's raw field names are used.
    """
    if isinstance(raw, list):
        raw = _orz_pair_to_row(raw)
    if not isinstance(raw, dict):
        return None
    normalised = "problem" in raw and "answer" in raw
    problem = raw.get("problem") if normalised else raw.get(spec.problem_field)
    if spec.problem_field == "messages" and not normalised:
        problem = _first_user_message(problem)
    answer = raw.get("answer") if normalised else raw.get(spec.answer_field)
    answer = normalize_answer(answer, spec.answer_kind)
    if not isinstance(problem, str) or not problem.strip() or answer is None:
        return None
    row_id = raw.get("id")
    if row_id is None and spec.id_field is not None:
        row_id = raw.get(spec.id_field)
    return {"id": str(row_id) if row_id is not None else f"{spec.name}-{index}",
            "problem": problem.strip(), "answer": answer}


# --------------------------------------------------------------------------------------------------
# Sources
# --------------------------------------------------------------------------------------------------


def _read_json_records(path: Path, summary: files.ReadSummary) -> Iterator[tuple[str, object]]:
    # Read with the json module rather than datasets: an answer column may mix strings, numbers and
    # lists, which an Arrow table cannot hold, and ORZ's file is a list of lists.
    if path.suffix == ".jsonl":
        # A JSONL line may hold an ORZ pair (a list) too: no field check here, _normalize_row does it.
        for line_no, record in files.iter_jsonl(path, summary, objects_only=False):
            yield f"{path}:{line_no}", record
        return
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not UTF-8 (byte {error.start + 1} of the file)") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}:{error.lineno}: not JSON ({error.msg} at column {error.colno})") from None
    if isinstance(data, dict):  # {"train": [...]} or {"data": [...]}: the one list it holds
        lists = [value for value in data.values() if isinstance(value, list)]
        if len(lists) != 1:
            raise ValueError(f"{path}: a JSON object must hold exactly one list of records")
        data = lists[0]
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a JSON list of records")
    for index, record in enumerate(data):
        yield f"{path}[{index}]", record


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


def _numbered(records: Iterable, where: str) -> Iterator[tuple[str, object]]:
    return ((f"{where}[{index}]", record) for index, record in enumerate(records))


def _source_records(spec: DatasetSpec, path: str | os.PathLike | None,
                    summary: files.ReadSummary) -> Iterable[tuple[str, object]]:
    """``(where, record)`` for each source record; ``where`` is ``path:line`` or ``source[row]``."""
    if path is None:
        import datasets

        return _numbered(datasets.load_dataset(spec.hub_id, spec.config, split=spec.split), spec.hub_id)
    path = Path(path)
    if path.is_dir():
        return _numbered(_read_disk_dataset(path, spec.split), str(path))
    if not path.exists():
        raise FileNotFoundError(f"path {str(path)!r} does not exist")
    if path.suffix in (".jsonl", ".json"):
        return _read_json_records(path, summary)
    if path.suffix == ".parquet":
        import datasets

        return _numbered(datasets.Dataset.from_parquet(str(path)), str(path))
    raise ValueError(f"path {str(path)!r}: expected a .jsonl, .json or .parquet file or a save_to_disk folder")


def load_rows(name: str, path: str | os.PathLike | None = None, *, limit: int | None = None,
              summary: files.ReadSummary | None = None) -> tuple[list[dict], int]:
    """The normalised rows of dataset ``name`` and the number of source rows dropped as unusable.

    ``path`` is a local copy (.jsonl, .json, .parquet or a ``save_to_disk`` folder); None loads the
    hub dataset. ``limit`` keeps the first ``limit`` usable rows. A line that is not UTF-8 or not
    JSON, or a row with no problem or no usable answer, is skipped, counted and named in the log
    (``path:line``); a repeated id is dropped when its answer agrees and an error naming both lines
    when it does not. ``summary`` (a ``files.ReadSummary``) receives the counts.
    """
    spec = get_spec(name)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be a positive integer or None, got {limit!r}")
    source = str(path) if path is not None else f"{spec.hub_id} ({spec.split})"
    summary = summary if summary is not None else files.ReadSummary(source)

    def usable():
        for index, (where, raw) in enumerate(_source_records(spec, path, summary)):
            row = _normalize_row(raw, spec, index)
            if row is None:
                summary.skip(where, "no problem or no usable answer", "unusable row")
            else:
                yield where, row

    rows = [row for _, row in itertools.islice(files.drop_duplicate_ids(usable(), summary), limit)]
    summary.rows = len(rows)
    summary.report()
    return rows, summary.total_skipped + summary.duplicates


# --------------------------------------------------------------------------------------------------
# SFT conversations
# --------------------------------------------------------------------------------------------------

SHAREGPT_ROLES = {"system": "system", "human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant"}


def conversation_messages(raw) -> list[dict] | None:
    """A source row's conversation as ``[{"role", "content"}]``; None unless it holds a user turn and an
    assistant turn with text. ``messages`` is read as it is (what TRL's SFTTrainer reads); a row without
    it is read from ShareGPT's ``system`` and ``conversations`` [{from, value}]."""
    if not isinstance(raw, dict):
        return None
    if isinstance(raw.get("messages"), list):
        turns = [(turn.get("role"), turn.get("content")) for turn in raw["messages"] if isinstance(turn, dict)]
    elif isinstance(raw.get("conversations"), list):
        turns = [("system", raw["system"])] if isinstance(raw.get("system"), str) and raw["system"].strip() else []
        turns += [(SHAREGPT_ROLES.get(turn.get("from")), turn.get("value"))
                  for turn in raw["conversations"] if isinstance(turn, dict)]
    else:
        return None
    if any(role not in ("system", "user", "assistant") or not isinstance(text, str) for role, text in turns):
        return None
    roles = [role for role, text in turns if text.strip()]
    if "user" not in roles or "assistant" not in roles:
        return None
    return [{"role": role, "content": text} for role, text in turns]


def load_conversations(name: str, path: str | os.PathLike | None = None, *, limit: int | None = None,
                       summary: files.ReadSummary | None = None) -> tuple[list[dict], int]:
    """The rows ``{"id", "messages"}`` of SFT set ``name`` and the number of source rows dropped as unusable;
    ``path`` and ``limit`` as in ``load_rows``."""
    try:
        spec = SFT_SETS[name]
    except KeyError:
        raise ValueError(f"unknown SFT set {name!r}; known: {', '.join(sorted(SFT_SETS))}") from None
    summary = summary if summary is not None else files.ReadSummary(str(path) if path else spec.hub_id)
    rows = []
    for index, (where, raw) in enumerate(_source_records(spec, path, summary)):
        messages = conversation_messages(raw)
        if messages is None:
            summary.skip(where, "no user and assistant turn", "unusable row")
            continue
        rows.append({"id": f"{name}-{index}", "messages": messages})
        if limit is not None and len(rows) == limit:
            break
    summary.rows = len(rows)
    summary.report()
    return rows, summary.total_skipped
