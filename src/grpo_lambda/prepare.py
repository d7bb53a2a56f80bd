"""Write one training set or benchmark as normalised JSONL (id, problem, answer[, solution]), or a chat SFT set
(id, messages), from the source its config describes (grpo_lambda.data.registry).

Beside it, ``<name>.summary.json`` says what was kept and what was dropped, and why (bad lines with
their ``path:line``, repeated ids, prompts over ``max_prompt_chars``): nothing is left out silently,
and a problem too long to train on is dropped here, before any job loads a model.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from grpo_lambda import files
from grpo_lambda.data import arith

log = logging.getLogger(__name__)

# Training sets: problems longer than this many characters are dropped unless max_prompt_chars says
# otherwise (a guard against a runaway row; the exact token limit is the trainer's). Characters, not
# tokens: no tokenizer is loaded at this stage, and ~4096 characters is ~1000 tokens of math text.
DEFAULT_MAX_PROMPT_CHARS = 4096
# Benchmarks: a problem is dropped (and counted, so the denominator change is visible) only past this
# many characters, far above any real benchmark problem (the longest of the five: OlympiadBench's, 4,415
# characters) but below what would exhaust an evaluation job's memory (a 5 MB problem did).
DEFAULT_MAX_BENCHMARK_CHARS = 32768
# What a prepared hub dataset's summary says of its source (from the prefetch record): the training
# fingerprint's data part and the provenance of the cells that train on it read it there.
SOURCE_RECORD = ("hub_id", "config", "split", "revision", "commit")


def rows_for(settings: dict, summary: files.ReadSummary | None = None) -> tuple[list[dict], int]:
    """The normalised rows and the number of source rows dropped as unusable."""
    key, role = settings["key"], settings["role"]
    if settings["source"] == "synthetic":
        horizon = {"columns": settings["columns"], "carry_free_share": settings.get("carry_free_share", 1.0)} \
            if "columns" in settings else {}
        horizon.update({key: settings[key] for key in ("decoys", "decoy_position", "tail_sums") if key in settings})
        if role == "train":
            rows = arith.generate(settings["n"], seed=settings["seed"], levels=settings.get("levels"),
                                  box_rate=settings.get("box_rate", 1.0),
                                  carry_error_rate=settings.get("carry_error_rate", 0.0), prefix=key, **horizon)
        else:
            levels = None if horizon else [settings["level"]]
            rows = arith.generate(settings["n"], seed=settings["seed"], levels=levels, held_out=True,
                                  carry_error_rate=0.0, prefix=key, **horizon)
        if summary is not None:
            summary.rows = len(rows)
        return rows, 0
    from grpo_lambda.data import registry

    spec = registry.resolve(settings, key, registry.ROLE_GROUPS[role])
    if role == "sft":  # a chat SFT set (sft.data: open_r1): rows {"id", "messages"}
        return registry.load_conversations(spec, limit=settings.get("limit"), summary=summary)
    return registry.load_rows(spec, limit=settings.get("limit"), summary=summary)


def pinned(settings: dict, prefetched: str | None = None) -> tuple[dict, dict | None]:
    """A hub source's settings with the revision pinned to the commit ``prefetch`` recorded, and that
    record; other sources as they are, and None. The record is the file ``prefetched``, else the settings'
    ``prefetch_record`` (under the results folder) when it exists: a stage run by hand, online, without
    the prefetch rule reads the config's revision and records no commit."""
    from grpo_lambda.data import registry

    if settings["source"] == "synthetic":
        return settings, None
    spec = registry.resolve(settings, settings["key"], registry.ROLE_GROUPS[settings["role"]])
    path = prefetched or spec.get("prefetch_record")
    if spec["source"] != "hub" or path is None:
        return settings, None
    if not prefetched and not Path(path).is_file():
        log.warning("%s: no prefetch record %s: read at revision %s, no commit recorded", settings["key"], path,
                    spec.get("revision") or "of the default branch")
        return settings, None
    record = registry.recorded_dataset(json.loads(Path(path).read_text(encoding="utf-8")), spec)
    if record is None:
        raise ValueError(f"{settings['key']}: {spec['hub_id']} (config {spec.get('config')}, split {spec['split']}, "
                         f"revision {spec.get('revision')}) is not in {path}; run the prefetch rule again")
    return {**spec, "revision": record["commit"]}, record


def prompt_limit(settings: dict) -> int | None:
    if settings["role"] == "sft":
        return None  # conversations: SFT's max_length truncates them
    if "max_prompt_chars" in settings:
        return settings["max_prompt_chars"]
    return DEFAULT_MAX_PROMPT_CHARS if settings["role"] == "train" else DEFAULT_MAX_BENCHMARK_CHARS


def summary_path(out_path: str) -> Path:
    return Path(out_path).with_suffix(".summary.json")


def run(settings: dict, out_path: str, prefetched: str | None = None) -> int:
    """Write the rows; ``prefetched``: the prefetch record, whose commit a hub source is read at and
    recorded with (``source`` in the summary)."""
    settings, record = pinned(settings, prefetched)
    summary = files.ReadSummary(str(settings.get("path") or settings["key"]))
    rows, _ = rows_for(settings, summary)
    limit = prompt_limit(settings)
    if limit is not None:
        kept = []
        for row in rows:
            if len(row["problem"]) > limit:
                summary.skip(f"{settings['key']} id {row['id']}", "prompt too long",
                             f"{len(row['problem'])} characters > max_prompt_chars {limit}")
            else:
                kept.append(row)
        rows, summary.rows = kept, len(kept)
    report = summary.report()
    if not rows:
        raise ValueError(f"{settings['key']}: no usable rows: {report}")
    source = {"source": {key: record[key] for key in SOURCE_RECORD if key in record}} if record else {}
    files.write_json(summary_path(out_path), {**summary.as_dict(), "max_prompt_chars": limit, **source})
    files.write_jsonl(out_path, rows)  # last: the rule's output exists only with its summary beside it
    log.info("%s: wrote %d rows to %s", settings["key"], len(rows), out_path)
    return len(rows)
