"""A bad row is skipped, counted and named with its path:line; it never ends a whole file."""

import json
import subprocess

import pytest
import yaml

from conftest import E2E_CONFIG
from grpo_lambda import config as study
from grpo_lambda import files, prepare


def write_lines(path, lines: list[bytes]):
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_every_kind_of_bad_line_is_skipped_counted_and_named(tmp_path, caplog):
    path = write_lines(tmp_path / "bench.jsonl", [
        b'{"id": "a", "problem": "1+1", "answer": "2"}',
        b'{"id": "b", "problem": "2+2", "answer": "4"',              # malformed JSON
        b'{"id": "c", "problem": "caf\xe9", "answer": "1"}',           # Latin-1 byte
        b'["not", "an", "object"]',
        b'{"id": "d", "problem": null, "answer": "1"}',
        b'{"id": "e", "answer": "1"}',
        b'{"id": "f", "problem": 3, "answer": "1"}',
        b'{"id": true, "problem": "x", "answer": "1"}',
        b'',
        b'{"id": "g", "problem": "3+3", "answer": ["6", "6.0"]}',
    ])
    rows = files.read_jsonl(path, fields=files.PROBLEM_FIELDS)
    assert [row["id"] for row in rows] == ["a", "g"]
    for line, reason in ((2, "not JSON"), (3, "not UTF-8: byte 0xe9 at column"), (4, "not an object"),
                         (5, "missing field: 'problem' is null"), (6, "missing field: 'problem' is absent"),
                         (7, "wrong type: 'problem' is int"), (8, "wrong type: 'id' is bool")):
        assert f"bench.jsonl:{line}: {reason}" in caplog.text, line
    assert "kept 2 rows, dropped 7 of 9 rows" in caplog.text


def test_rows_json_accepts_but_python_cannot_hold_are_skipped_not_fatal(tmp_path, caplog):
    """A 5,000-digit integer (past Python's int-from-text limit), 100,000 nested arrays (past the
    recursion limit) and a lone surrogate (no UTF-8 file can hold it) each end only their own line."""
    path = write_lines(tmp_path / "bench.jsonl", [
        b'{"id": "a", "problem": "1+1", "answer": "2"}',
        b'{"id": "b", "problem": "x", "answer": ' + b"7" * 5000 + b'}',
        b'{"id": "c", "problem": "x", "answer": ' + b"[" * 100_000 + b"]" * 100_000 + b'}',
        b'{"id": "d", "problem": "caf\\ud800", "answer": "1"}',
        b'{"id": "e", "problem": "2+2", "answer": "4"}',
    ])
    rows = files.read_jsonl(path, fields=files.PROBLEM_FIELDS)
    assert [row["id"] for row in rows] == ["a", "e"]
    assert "bench.jsonl:2: not JSON: Exceeds the limit" in caplog.text
    assert "bench.jsonl:3: not JSON: nested too deeply" in caplog.text
    assert "bench.jsonl:4: not UTF-8: a lone surrogate" in caplog.text
    files.write_jsonl(tmp_path / "out.jsonl", rows)  # what survives can be written


def test_repeated_ids_are_dropped_when_they_agree_and_an_error_naming_both_lines_when_not(tmp_path):
    agree = write_lines(tmp_path / "agree.jsonl", [
        b'{"id": 1, "problem": "p", "answer": "2"}', b'{"id": 2, "problem": "q", "answer": "3"}',
        b'{"id": "1", "problem": "p", "answer": "2"}'])
    assert [row["id"] for row in files.read_jsonl(agree, fields=files.PROBLEM_FIELDS, unique_ids=True)] == [1, 2]
    conflict = write_lines(tmp_path / "conflict.jsonl", [
        b'{"id": "x", "problem": "p", "answer": "2"}', b'{"id": "y", "problem": "q", "answer": "3"}',
        b'{"id": "x", "problem": "p", "answer": "5"}'])
    with pytest.raises(ValueError, match=r"conflict\.jsonl:1 and .*conflict\.jsonl:3: id 'x' appears twice "
                                         r"with different answers \('2' and '5'\)"):
        files.read_jsonl(conflict, fields=files.PROBLEM_FIELDS, unique_ids=True)


def prepare_settings(path, **extra):
    return {"key": "local", "role": "train", "source": "registry", "name": "math12k", "path": str(path), **extra}


def test_prepare_drops_long_prompts_and_repeats_and_writes_a_summary(tmp_path, caplog):
    source = write_lines(tmp_path / "source.jsonl", [
        json.dumps({"problem": "What is 1+1?", "answer": "2", "id": "a"}).encode(),
        json.dumps({"problem": "x" * 1_000_000, "answer": "1", "id": "huge"}).encode(),
        json.dumps({"problem": "What is 1+1?", "answer": "2", "id": "a"}).encode(),
        json.dumps({"problem": "What is 2+2?", "answer": "4", "id": "b"}).encode()])
    out = tmp_path / "data" / "local.jsonl"
    assert prepare.run(prepare_settings(source), str(out)) == 2
    assert [row["id"] for row in files.read_jsonl(out)] == ["a", "b"]
    summary = json.loads(prepare.summary_path(str(out)).read_text())
    assert summary["rows"] == 2 and summary["duplicates_dropped"] == 1
    assert summary["skipped_by_reason"] == {"prompt too long": 1}
    assert summary["max_prompt_chars"] == prepare.DEFAULT_MAX_PROMPT_CHARS
    assert "local id huge: prompt too long: 1000000 characters > max_prompt_chars 4096" in caplog.text


def test_a_configured_limit_of_nothing_left_is_an_error(tmp_path):
    source = write_lines(tmp_path / "source.jsonl", [json.dumps({"problem": "What is 1+1?", "answer": "2"}).encode()])
    with pytest.raises(ValueError, match=r"local: no usable rows: .*1 prompt too long"):
        prepare.run(prepare_settings(source, max_prompt_chars=5), str(tmp_path / "out.jsonl"))


@pytest.mark.slow  # a prepare job through the CLI, then two training steps (96 s on a shared, loaded 2-core machine)
def test_a_dataset_with_a_bad_byte_on_line_3_trains_on_the_other_lines(tmp_path, cli, tiny_model_dir):
    from grpo_lambda import train

    good = [json.dumps({"problem": f"What is {i} + {i}?", "answer": str(2 * i)}).encode() for i in range(8)]
    source = write_lines(tmp_path / "mine.jsonl", good[:2] + [b'{"problem": "What is 1 + \xff?", "answer": "2"}'] + good[2:])
    out = tmp_path / "data" / "mine.jsonl"
    job = subprocess.run([cli, "prepare", "--settings", json.dumps(prepare_settings(source)), "--out", str(out)],
                         capture_output=True, text=True, timeout=300)
    assert job.returncode == 0, job.stderr[-2000:]
    assert f"{source}:3: not UTF-8" in job.stderr
    assert f"{source}: kept 8 rows, dropped 1 of 9 rows (1 not UTF-8)" in job.stderr
    assert len(files.read_jsonl(out)) == 8

    raw = yaml.safe_load(E2E_CONFIG.read_text())
    raw["rl"].update(max_steps=2, save_steps=2)
    raw["evaluation"]["checkpoints"] = [1]
    settings = study.stage_settings(study.validate(raw), "train", model="tiny", dataset="arith", variant="grpo")
    cell = tmp_path / "cell"
    train.run(settings, base=str(tiny_model_dir), data_path=str(out), cell_dir=str(cell), seed=0)
    assert (cell / "model" / "model.safetensors").exists()
    assert len((cell / "train_log.csv").read_text().splitlines()) == 3
    # the prompt as the model reads it is recorded, whatever rl.log_completions says
    assert "What is 0 + 0?" in (cell / "prompt.txt").read_text()


def test_prepare_refuses_a_repeated_id_with_another_answer_naming_both_lines(tmp_path):
    source = write_lines(tmp_path / "source.jsonl", [
        json.dumps({"problem": "What is 1+1?", "answer": "2", "id": "a"}).encode(),
        json.dumps({"problem": "What is 1+1?", "answer": "3", "id": "a"}).encode()])
    with pytest.raises(ValueError, match=r"source\.jsonl:1 and .*source\.jsonl:2: id 'a' appears twice"):
        prepare.run(prepare_settings(source), str(tmp_path / "out.jsonl"))


def test_a_runaway_benchmark_problem_is_dropped_and_counted_by_default(tmp_path):
    """A 5 MB benchmark problem once ended a whole evaluation (27 TB asked of the allocator); the five real
    benchmarks' problems all stay (the longest is 4,415 characters)."""
    source = write_lines(tmp_path / "bench.jsonl", [
        json.dumps({"id": "a", "problem": "What is 1+1?", "answer": "2"}).encode(),
        json.dumps({"id": "huge", "problem": "x" * 5_000_000, "answer": "1"}).encode(),
        json.dumps({"id": "long", "problem": "y" * 4415, "answer": "3"}).encode(),
    ])
    out = tmp_path / "out.jsonl"
    prepare.run({"key": "math500", "role": "benchmark", "source": "registry", "path": str(source)}, str(out))
    assert [row["id"] for row in files.read_jsonl(out)] == ["a", "long"]
    summary = json.loads(prepare.summary_path(str(out)).read_text())
    assert summary["skipped_by_reason"] == {"prompt too long": 1} and summary["max_prompt_chars"] == 32768
