"""grpo_lambda.prepare: the rows a prepare job writes, in-process (the CLI and the DAG run it in
tests/test_data_sources.py, tests/test_bad_rows.py and tests/test_pipeline.py). The synthetic task's
settings each reach the generator: its size, seed, levels, box and carry-error rates, the row ids' prefix,
and held-out problems for a benchmark."""

import json

import pytest

from grpo_lambda import files, prepare
from grpo_lambda.data import arith

TRAIN = {"key": "sums", "role": "train", "source": "synthetic", "n": 12, "seed": 3, "levels": [3], "box_rate": 0.0,
         "carry_error_rate": 1.0}
BENCHMARK = {"key": "held", "role": "benchmark", "source": "synthetic", "n": 6, "seed": 1, "level": 2}


def test_a_synthetic_training_set_follows_every_setting():
    summary = files.ReadSummary("sums")
    rows, dropped = prepare.rows_for(TRAIN, summary)
    assert (len(rows), dropped, summary.rows) == (12, 0, 12)
    assert [row["id"] for row in rows] == [f"sums-{i}" for i in range(12)]
    assert {row["level"] for row in rows} == {3}
    assert not any(arith.is_held_out(row["problem"]) for row in rows)
    assert not any("\\boxed" in row["solution"] for row in rows)  # box_rate 0
    # carry_error_rate 1: every carry written one less, so a problem with a carry has step errors
    assert all(row["step_errors"] == len(arith.carry_columns([int(x) for x in row["problem"].removesuffix("=?")
                                                                  .split("+")])) for row in rows)
    assert any(row["step_errors"] > 0 for row in rows)
    again, _ = prepare.rows_for(TRAIN)
    other, _ = prepare.rows_for({**TRAIN, "seed": 4})
    assert again == rows and other != rows  # deterministic in the seed
    # the defaults: every level, every solution boxed, no carry errors
    default, _ = prepare.rows_for({"key": "sums", "role": "train", "source": "synthetic", "n": 40, "seed": 3})
    assert {row["level"] for row in default} == set(arith.LEVELS)
    assert all("\\boxed" in row["solution"] for row in default) and not any(row["step_errors"] for row in default)


def test_a_synthetic_benchmark_is_held_out_problems_at_its_level():
    rows, dropped = prepare.rows_for(BENCHMARK)
    assert (len(rows), dropped) == (6, 0)
    assert [row["id"] for row in rows] == [f"held-{i}" for i in range(6)]
    assert {row["level"] for row in rows} == {2} and all(arith.is_held_out(row["problem"]) for row in rows)
    assert prepare.rows_for(BENCHMARK)[0] == rows and prepare.rows_for({**BENCHMARK, "seed": 2})[0] != rows


def test_a_files_limit_keeps_its_first_usable_rows(tmp_path):
    path = tmp_path / "rows.jsonl"
    files.write_jsonl(path, [{"id": f"r{i}", "problem": f"{i}+1?", "answer": str(i + 1)} for i in range(5)])
    settings = {"key": "mine", "role": "train", "source": "file", "path": str(path), "limit": 2}
    assert [row["id"] for row in prepare.rows_for(settings)[0]] == ["r0", "r1"]
    assert len(prepare.rows_for({**settings, "limit": None})[0]) == 5


def test_the_prompt_limit_per_role():
    assert prepare.prompt_limit(TRAIN) == prepare.DEFAULT_MAX_PROMPT_CHARS == 4096
    assert prepare.prompt_limit(BENCHMARK) == prepare.DEFAULT_MAX_BENCHMARK_CHARS == 32768
    assert prepare.prompt_limit({**TRAIN, "max_prompt_chars": 10}) == 10
    assert prepare.prompt_limit({"role": "sft", "max_prompt_chars": 10}) is None


def test_run_writes_the_rows_and_their_summary_and_drops_long_prompts(tmp_path):
    out = tmp_path / "data" / "sums.jsonl"
    settings = {key: value for key, value in TRAIN.items() if key != "levels"}  # every level: prompts of 5 lengths
    rows, _ = prepare.rows_for(settings)
    limit = sorted(len(row["problem"]) for row in rows)[5]  # keeps the shortest prompts, drops the longer ones
    kept = [row for row in rows if len(row["problem"]) <= limit]
    assert 0 < len(kept) < len(rows)
    assert prepare.run({**settings, "max_prompt_chars": limit}, str(out)) == len(kept)
    assert files.read_jsonl(out) == kept
    summary = json.loads(prepare.summary_path(str(out)).read_text())
    assert prepare.summary_path(str(out)) == tmp_path / "data" / "sums.summary.json"
    assert summary["max_prompt_chars"] == limit and summary["rows"] == len(kept)
    assert summary["skipped_by_reason"] == {"prompt too long": len(rows) - len(kept)}
    with pytest.raises(ValueError, match=r"^sums: no usable rows"):
        prepare.run({**settings, "max_prompt_chars": 1}, str(tmp_path / "none.jsonl"))
    assert not (tmp_path / "none.jsonl").exists()


def test_an_sft_set_is_read_as_conversations_up_to_its_limit(tmp_path):
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps({"messages": [{"role": "user", "content": f"{i}+1?"},
                                                     {"role": "assistant", "content": f"\\boxed{{{i + 1}}}"}]}) + "\n"
                            for i in range(3)))
    settings = {"key": "bespoke-stratos-17k", "role": "sft", "source": "registry", "path": str(path), "limit": 2}
    summary = files.ReadSummary("chat")
    rows, dropped = prepare.rows_for(settings, summary)
    assert [row["messages"][0]["content"] for row in rows] == ["0+1?", "1+1?"] and dropped == 0
    assert summary.rows == 2


def test_a_hub_source_is_read_at_the_commit_its_prefetch_record_holds(tmp_path, caplog):
    """gsm8k from the hub with `revision: main` in the study: prepare reads it at the commit prefetch recorded
    for that hub id, config, split and revision, and records it; without the record file it reads the named
    revision and says so; a record that lacks the dataset is an error naming the dataset and the record."""
    settings = {"key": "gsm8k", "role": "train", "source": "registry", "revision": "main",
                "prefetch_record": str(tmp_path / "prefetched.json")}
    entry = {"hub_id": "openai/gsm8k", "config": "main", "split": "train", "revision": "main", "commit": "c0ffee"}
    other = {**entry, "split": "test", "commit": "bad"}  # another split of the same dataset: not this one
    (tmp_path / "prefetched.json").write_text(json.dumps({"datasets": {"a": other, "b": entry}}))
    read, record = prepare.pinned(settings)
    assert record == entry
    assert (read["source"], read["hub_id"], read["split"], read["revision"]) == ("hub", "openai/gsm8k", "train",
                                                                                 "c0ffee")
    # the record named on the command line wins over the settings' own
    (tmp_path / "given.json").write_text(json.dumps({"datasets": {"b": {**entry, "commit": "beef"}}}))
    assert prepare.pinned(settings, str(tmp_path / "given.json"))[0]["revision"] == "beef"
    missing = {**settings, "prefetch_record": str(tmp_path / "none.json")}
    with caplog.at_level("WARNING"):
        assert prepare.pinned(missing) == (missing, None)
    assert "gsm8k: no prefetch record" in caplog.text and "read at revision main" in caplog.text
    (tmp_path / "prefetched.json").write_text(json.dumps({"datasets": {"a": other}}))
    with pytest.raises(ValueError, match=r"^gsm8k: openai/gsm8k \(config main, split train, revision main\) is not in "
                                         r".*prefetched\.json; run the prefetch rule again$"):
        prepare.pinned(settings)
    local = {"key": "mine", "role": "train", "source": "file", "path": "x.jsonl",
             "prefetch_record": str(tmp_path / "prefetched.json")}
    assert prepare.pinned(local) == (local, None) and prepare.pinned(TRAIN) == (TRAIN, None)
