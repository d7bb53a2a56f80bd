"""Atomic file output: everything a stage writes appears complete or not at all.

A job killed halfway leaves only a temporary name behind (``*.tmp-<pid>``), never a truncated file
that a later rule would take for a finished one.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

log = logging.getLogger(__name__)


def _tmp_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it to ``path`` once the block ends cleanly.

    Works for files and folders alike; an existing ``path`` is replaced.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp_name(path)
    remove_path(tmp)
    try:
        yield tmp
    except BaseException:
        remove_path(tmp)
        raise
    replace_path(tmp, path)


def replace_path(src: Path, dst: Path) -> None:
    """``os.replace(src, dst)``, also where ``src`` is a folder and ``dst`` exists (os.replace cannot
    put a folder over a file or a non-empty folder, so ``dst`` is removed first)."""
    if src.is_dir():
        remove_path(dst)
    os.replace(src, dst)


def remove_path(path: Path) -> None:
    """Remove a file, a symlink or a whole folder; nothing if absent."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


class CellBusy(RuntimeError):
    """Another process holds a cell folder's lock."""


@contextlib.contextmanager
def exclusive(folder: str | os.PathLike, what: str = "trainer") -> Iterator[None]:
    """Hold ``folder/.lock`` for the block, or raise CellBusy naming its holder at once.

    Snakemake's own lock is per working folder: two runs from different folders on one results tree would
    otherwise train the same cell at once. Under ``accelerate launch`` the main process (RANK 0) holds it
    for all. filelock's flock, released by the kernel when its holder dies, so a killed job leaves no stale
    lock; its soft-marker fallback (where a filesystem lacks flock) is off, as such a marker outlives a
    killed job. The lock file names its holder (``pid N on HOST``), which ``grpo-lambda status`` reads.
    """
    import socket

    from filelock import Timeout, UnixFileLock

    if int(os.environ.get("RANK", "0")) != 0:
        yield
        return
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)

    def name_holder(descriptor: int) -> None:
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, f"pid {os.getpid()} on {socket.gethostname()}".encode(), 0)

    lock = UnixFileLock(folder / ".lock", timeout=0, fallback_to_soft=False, preserve_lock_file=True,
                        on_acquired=name_holder)
    try:
        lock.acquire()
    except Timeout:
        holder = (folder / ".lock").read_text(errors="replace").strip() or "an unnamed process"
        raise CellBusy(f"{folder}: another {what} is writing this cell ({holder}); "
                       "wait for it or stop it, then run again") from None
    try:
        yield
    finally:
        lock.release()


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: str | os.PathLike, obj) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def write_jsonl(path: str | os.PathLike, rows: Iterable[dict]) -> None:
    write_text(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


# ---- reading: a bad line is skipped, counted and named, never the end of the file ----------------

REPORTED_LINES = 20  # skipped lines logged one by one per file; the rest are counted


@dataclass
class ReadSummary:
    """What reading one file kept and skipped: ``skipped`` maps a reason to its count, ``lines``
    holds the first ``REPORTED_LINES`` skipped lines as ``path:line: reason``."""

    path: str
    rows: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    duplicates: int = 0
    log_each: bool = True  # False: the caller names the skipped lines itself, in one line

    def skip(self, where: str, kind: str, detail: str) -> None:
        """Record one skipped row; ``where`` is ``path:line`` (or ``hub-id[row]``)."""
        self.skipped[kind] = self.skipped.get(kind, 0) + 1
        if len(self.lines) < REPORTED_LINES:
            self.lines.append(f"{where}: {kind}: {detail}; skipped")
            if self.log_each:
                log.warning(self.lines[-1])

    @property
    def total_skipped(self) -> int:
        return sum(self.skipped.values())

    def as_dict(self) -> dict:
        return {"path": self.path, "rows": self.rows, "skipped": self.total_skipped,
                "skipped_by_reason": dict(self.skipped), "duplicates_dropped": self.duplicates,
                "skipped_lines": list(self.lines)}

    def report(self) -> str:
        """One summary line for the job's log (a warning when anything was left out)."""
        reasons = [f"{count} {kind}" for kind, count in sorted(self.skipped.items())]
        if self.duplicates:
            reasons.append(f"{self.duplicates} repeated ids with the same answer")
        dropped = self.total_skipped + self.duplicates
        text = (f"{self.path}: kept {self.rows} rows, dropped {dropped} of {self.rows + dropped} rows"
                + (f" ({', '.join(reasons)})" if reasons else ""))
        (log.warning if self.total_skipped or self.duplicates else log.info)(text)
        return text


def _type_names(types) -> str:
    types = types if isinstance(types, tuple) else (types,)
    return " or ".join({"str": "a string", "list": "a list", "int": "an integer", "float": "a number",
                        "bool": "true/false", "dict": "an object"}.get(t.__name__, t.__name__) for t in types)


def iter_jsonl(path: str | os.PathLike, summary: ReadSummary, *, fields: dict[str, type | tuple] | None = None,
               optional: dict[str, type | tuple] | None = None, objects_only: bool = True) -> Iterator[tuple[int, dict]]:
    """``(line number, row)`` for each usable line of a JSONL file. A line that is not UTF-8, not
    JSON, not an object (unless ``objects_only`` is False), lacks one of ``fields`` (missing, null or
    of another type) or holds one of ``optional`` with another type is skipped and recorded in
    ``summary``; blank lines are ignored."""
    with open(path, "rb") as handle:
        for line_no, raw in enumerate(handle, 1):
            where = f"{path}:{line_no}"
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                summary.skip(where, "not UTF-8", f"byte 0x{raw[error.start]:02x} at column {error.start + 1}")
                continue
            if not text.strip():
                continue
            try:
                row = json.loads(text)
            except json.JSONDecodeError as error:
                summary.skip(where, "not JSON", f"{error.msg} at column {error.colno}")
                continue
            except ValueError as error:  # an integer past Python's digit limit
                summary.skip(where, "not JSON", str(error).split(";")[0])
                continue
            except RecursionError:
                summary.skip(where, "not JSON", "nested too deeply")
                continue
            try:  # a lone surrogate ("\\ud800") parses, but no UTF-8 file can hold it
                json.dumps(row, ensure_ascii=False).encode("utf-8")
            except UnicodeEncodeError as error:
                summary.skip(where, "not UTF-8", f"a lone surrogate {error.object[error.start]!r}")
                continue
            if not isinstance(row, dict):
                if objects_only:
                    summary.skip(where, "not an object", f"a JSON {type(row).__name__}")
                    continue
            else:
                present = {name: types for name, types in (optional or {}).items() if row.get(name) is not None}
                problem = _field_problem(row, fields or {}) or _field_problem(row, present)
                if problem:
                    summary.skip(where, *problem)
                    continue
            summary.rows += 1
            yield line_no, row


def _field_problem(row: dict, fields: dict) -> tuple[str, str] | None:
    for name, types in fields.items():
        value = row.get(name)
        if value is None:
            return ("missing field", f"{name!r} is {'null' if name in row else 'absent'}")
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in (
                types if isinstance(types, tuple) else (types,))):
            return ("wrong type", f"{name!r} is {type(value).__name__}, expected {_type_names(types)}")
    return None


def drop_duplicate_ids(located_rows: Iterable[tuple[str, dict]], summary: ReadSummary | None = None, *,
                       id_field: str = "id", answer_field: str = "answer") -> Iterator[tuple[str, dict]]:
    """The ``(where, row)`` pairs with the first occurrence of each id, lazily. A repeated id whose
    answer agrees is dropped and counted; one whose answer differs raises ValueError naming both
    places (``path:line``)."""
    first: dict[str, tuple[str, dict]] = {}
    for where, row in located_rows:
        key = str(row[id_field])
        if key in first:
            earlier_where, earlier = first[key]
            if earlier.get(answer_field) != row.get(answer_field):
                raise ValueError(f"{earlier_where} and {where}: id {key!r} appears twice with different answers "
                                 f"({earlier.get(answer_field)!r} and {row.get(answer_field)!r})")
            if summary is not None:
                summary.duplicates += 1
            log.warning("%s: id %r repeats %s with the same answer; dropped", where, key, earlier_where)
            continue
        first[key] = (where, row)
        yield where, row


def read_jsonl(path: str | os.PathLike, *, fields: dict[str, type | tuple] | None = None,
               unique_ids: bool = False) -> list[dict]:
    """The rows of a JSONL file; bad lines are skipped and named in the log (see ``iter_jsonl``),
    with a summary line for the file. ``unique_ids``: see ``drop_duplicate_ids``."""
    summary = ReadSummary(str(path))
    located = [(f"{path}:{line}", row) for line, row in iter_jsonl(path, summary, fields=fields)]
    if unique_ids:
        located = list(drop_duplicate_ids(located, summary))
        summary.rows = len(located)
    rows = [row for _, row in located]
    if summary.total_skipped or summary.duplicates:
        summary.report()
    return rows


# A normalised problem row (prepare's output, a benchmark): what every reader needs of a line.
PROBLEM_FIELDS = {"id": (str, int), "problem": str, "answer": (str, list, int, float)}
