"""The dataset registry: the real local copies, raw hub-format fixtures, dropped rows, atomic writes."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest

from grpo_lambda import files
from grpo_lambda.data.registry import entries, load_rows, registry_entry, resolve
from grpo_lambda.data.rows import normalize_answer

DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def real_file(relative: str) -> Path:
    path = DATA_DIR / relative
    if not path.is_file():
        pytest.skip(f"real data file not found: {path}")
    return path


def write_lines(path: Path, records: list) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------------------
# The registry itself
# --------------------------------------------------------------------------------------------------


def test_registry_lists_the_paper_datasets():
    assert set(entries()["datasets"]) == {"gsm8k", "math12k", "mathrl16k", "orz57k"}
    assert set(entries()["benchmarks"]) == {"aime24", "amc", "math500", "minerva", "olympiadbench"}
    gsm8k = resolve({"source": "registry"}, "gsm8k")
    assert (gsm8k["hub_id"], gsm8k["config"], gsm8k["split"], gsm8k["answer_kind"]) == (
        "openai/gsm8k", "main", "train", "gsm8k")
    assert gsm8k["fields"] == {"problem": "question", "answer": "answer"}
    assert resolve({"source": "registry"}, "math500", "benchmarks")["hub_id"] == "HuggingFaceH4/MATH-500"


def test_an_unknown_registry_name_is_refused_naming_the_known_ones():
    with pytest.raises(ValueError, match=r"'nope' is not in the dataset registry .*known: aime24, amc, gsm8k"):
        registry_entry("nope", "datasets")
    with pytest.raises(ValueError, match=r"'gsm8k' is not an SFT set"):
        registry_entry("gsm8k", "sft_sets")


def test_a_registry_name_is_shorthand_for_its_entry_written_out_and_keys_beside_it_win():
    """The registry is data in the config's own shape: its entry, written by hand as a hub source, reads the
    same; a key given beside `source: registry` replaces the entry's (a field mapping key by key)."""
    entry = registry_entry("olympiadbench", "benchmarks")
    by_name = resolve({"source": "registry"}, "olympiadbench", "benchmarks")
    by_hand = resolve(entry, "olympiadbench", "benchmarks")
    assert {k: v for k, v in by_name.items() if k != "registry"} == by_hand
    own = resolve({"source": "registry", "name": "gsm8k", "revision": "v1", "split": "test",
                   "fields": {"id": "uid"}}, "g", "datasets")
    assert (own["revision"], own["split"], own["name"]) == ("v1", "test", "gsm8k")
    assert own["fields"] == {"problem": "question", "answer": "answer", "id": "uid"}
    assert resolve({"source": "registry", "path": "copy.jsonl"}, "gsm8k")["source"] == "file"


def test_every_registry_entry_is_a_valid_data_source_of_a_study():
    """Each entry, written under datasets:/benchmarks: of a study as it is, passes the schema and the cross-checks."""
    import copy

    import yaml

    from conftest import ROOT
    from grpo_lambda import config as study

    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    for group in ("datasets", "benchmarks"):
        for name, entry in entries()[group].items():
            trial = copy.deepcopy(config)
            trial[group][name] = entry
            assert study.validate(trial)[group][name]["source"] == "hub"
    trial = copy.deepcopy(config)
    trial["sft"]["data"] = "open_r1"
    for name in entries()["sft_sets"]:
        trial["sft"]["open_r1"] = {"name": name}
        study.validate(trial)


@pytest.mark.parametrize("value, kind, expected", [
    ("She pays 5 + 3 = 8.\n#### 1,234", "gsm8k", "1234"),
    ("18", "gsm8k", "18"),
    ("30,000", "gsm8k", "30000"),
    ("1,5", "gsm8k", "1,5"),  # not a thousands separator: left alone
    ("30,000", "text", "30,000"),
    (27.0, "number", "27"),
    (2.5, "number", "2.5"),
    (7, "text", "7"),
    ([" 9.6\n", "9.60"], "list", ["9.6", "9.60"]),
    (["$\\frac{1}{2}$"], "list", ["\\frac{1}{2}"]),
    (["$8$,$4$"], "list", ["$8$,$4$"]),  # two $...$ pairs, not one enclosing pair
    ("$x$", "list", ["x"]),
    ("  \\frac{1}{2} ", "text", "\\frac{1}{2}"),
    (None, "text", None),
    ("   ", "text", None),
    ([], "list", None),
    (["", None], "list", None),
    (float("nan"), "number", None),
    (True, "number", None),
    ({"value": 1}, "text", None),
])
def test_normalize_answer(value, kind, expected):
    assert normalize_answer(value, kind) == expected


def test_normalize_answer_rejects_unknown_kind():
    with pytest.raises(ValueError, match="kind"):
        normalize_answer("1", "float")


# --------------------------------------------------------------------------------------------------
# The real local copies
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name, count, answer_type", [
    ("aime24", 30, str), ("amc", 83, str), ("math500", 500, str), ("minerva", 272, list),
    ("olympiadbench", 675, list),
])
def test_real_benchmarks(name, count, answer_type):
    rows, dropped = load_rows(name, real_file(f"benchmarks/{name}.jsonl"))
    assert (len(rows), dropped) == (count, 0)
    assert len({row["id"] for row in rows}) == count
    for row in rows:
        assert set(row) == {"id", "problem", "answer"}
        assert isinstance(row["problem"], str) and row["problem"]
        assert isinstance(row["answer"], answer_type) and row["answer"]
        if answer_type is list:
            assert all(isinstance(form, str) and form == form.strip() for form in row["answer"])


def test_real_benchmark_answers_are_normalised():
    amc, _ = load_rows("amc", real_file("benchmarks/amc.jsonl"))
    assert amc[0]["answer"] == "142"  # 142.0 in the source
    minerva, _ = load_rows("minerva", real_file("benchmarks/minerva.jsonl"))
    assert minerva[0]["answer"] == ["9.6"]  # "9.6\n" in the source
    olympiad, _ = load_rows("olympiadbench", real_file("benchmarks/olympiadbench.jsonl"))
    assert olympiad[1]["answer"] == ["\\frac{1}{2 n+2}"]  # "$\frac{1}{2 n+2}$" in the source
    assert sum(form.startswith("$") and form.endswith("$") and form.count("$") == 2
               for row in olympiad for form in row["answer"]) == 0


def test_real_gsm8k_and_limit():
    path = real_file("train/gsm8k.jsonl")
    rows, dropped = load_rows("gsm8k", path)
    assert (len(rows), dropped) == (8792, 0)
    assert all(isinstance(row["answer"], str) for row in rows)
    # Final answers only, some written "30,000" in the source: all become plain numbers.
    assert all(row["answer"].lstrip("-").replace(".", "", 1).isdigit() for row in rows)
    first, _ = load_rows("gsm8k", path, limit=5)
    assert first == rows[:5]


def test_bad_limit_and_paths(tmp_path):
    with pytest.raises(ValueError, match="limit"):
        load_rows("gsm8k", tmp_path / "x.jsonl", limit=0)
    with pytest.raises(FileNotFoundError, match="missing.jsonl"):
        load_rows("gsm8k", tmp_path / "missing.jsonl")
    (tmp_path / "rows.txt").write_text("question,answer\n")
    with pytest.raises(ValueError, match="rows.txt"):
        load_rows("gsm8k", tmp_path / "rows.txt")


# --------------------------------------------------------------------------------------------------
# Raw hub-format fixtures
# --------------------------------------------------------------------------------------------------


def test_raw_gsm8k_jsonl_with_bad_rows(tmp_path, caplog):
    path = write_lines(tmp_path / "gsm8k.jsonl", [
        {"question": "Tom has 3 apples and buys 4. How many?", "answer": "3 + 4 = <<3+4=7>>7\n#### 7"},
        {"question": "A big sum?", "answer": "Add them.\n#### 1,234"},
        {"question": "", "answer": "#### 5"},  # no problem
        {"question": "No answer here", "answer": "#### "},  # no usable answer
        {"question": "Missing answer field"},
        {"question": "Negative?", "answer": "#### -3"},
    ])
    with caplog.at_level(logging.WARNING, logger="grpo_lambda.data.registry"):
        rows, dropped = load_rows("gsm8k", path)
    assert dropped == 3
    assert rows == [
        {"id": "gsm8k-0", "problem": "Tom has 3 apples and buys 4. How many?", "answer": "7"},
        {"id": "gsm8k-1", "problem": "A big sum?", "answer": "1234"},
        {"id": "gsm8k-5", "problem": "Negative?", "answer": "-3"},
    ]
    assert "dropped 3 of 6 rows" in caplog.text


def test_raw_parquet_benchmark(tmp_path):
    pandas = pytest.importorskip("pandas")
    path = tmp_path / "olympiadbench.parquet"
    pandas.DataFrame({
        "id": [1606, 1607, 1608],
        "question": ["Find N.", "Find the pairs.", "Unanswered."],
        "final_answer": [["$2$"], ["$(1,8,19), (2,7,13)$", "$(2,7,13), (1,8,19)$"], []],
    }).to_parquet(path)
    rows, dropped = load_rows("olympiadbench", path)
    assert dropped == 1
    assert rows == [
        {"id": "1606", "problem": "Find N.", "answer": ["2"]},
        {"id": "1607", "problem": "Find the pairs.", "answer": ["(1,8,19), (2,7,13)", "(2,7,13), (1,8,19)"]},
    ]


def test_raw_amc_floats_and_math500_ids(tmp_path):
    amc = write_lines(tmp_path / "amc.jsonl", [
        {"id": 0, "problem": "What is m+n?", "answer": 142.0, "url": "u"},
        {"id": 1, "problem": "Half of one?", "answer": 0.5, "url": "u"},
    ])
    assert load_rows("amc", amc) == ([{"id": "0", "problem": "What is m+n?", "answer": "142"},
                                      {"id": "1", "problem": "Half of one?", "answer": "0.5"}], 0)
    math500 = write_lines(tmp_path / "math500.jsonl", [
        {"problem": "Convert (0,3).", "solution": "...", "answer": "\\left( 3, \\frac{\\pi}{2} \\right)",
         "subject": "Precalculus", "level": 2, "unique_id": "test/precalculus/807.json"},
    ])
    rows, _ = load_rows("math500", math500)
    assert rows[0]["id"] == "test/precalculus/807.json"
    assert rows[0]["answer"] == "\\left( 3, \\frac{\\pi}{2} \\right)"


def test_orz_save_to_disk_folder(tmp_path):
    datasets = pytest.importorskip("datasets")
    folder = tmp_path / "orz57k"
    datasets.Dataset.from_dict({
        "messages": [
            [{"role": "user", "content": "What is 2+3?"}],
            [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Solve x+1=3."}],
            [{"role": "assistant", "content": "no user turn"}],
        ],
        "ground_truth": ["5", "x=2", "1"],
        "dataset": ["orz", "orz", "orz"],
    }).save_to_disk(str(folder))
    rows, dropped = load_rows("orz57k", folder)
    assert dropped == 1
    assert rows == [{"id": "orz57k-0", "problem": "What is 2+3?", "answer": "5"},
                    {"id": "orz57k-1", "problem": "Solve x+1=3.", "answer": "x=2"}]


def test_save_to_disk_dataset_dict_picks_the_split(tmp_path):
    datasets = pytest.importorskip("datasets")
    folder = tmp_path / "math12k"
    datasets.DatasetDict({
        "train": datasets.Dataset.from_dict({"problem": ["p1", "p2"], "answer": ["1", "2"]}),
        "test": datasets.Dataset.from_dict({"problem": ["t1"], "answer": ["9"]}),
    }).save_to_disk(str(folder))
    rows, dropped = load_rows("math12k", folder)
    assert [row["problem"] for row in rows] == ["p1", "p2"] and dropped == 0


def test_orz_original_json_pairs(tmp_path):
    path = tmp_path / "orz_math_57k_collected.json"
    path.write_text(json.dumps([
        [{"from": "human", "value": "Compute 6*7."},
         {"from": "assistant", "ground_truth": {"value": "42"}}],
        [{"from": "human", "value": "An unanswered one."},
         {"from": "assistant", "ground_truth": {"value": ""}}],
    ]), encoding="utf-8")
    assert load_rows("orz57k", path) == ([{"id": "orz57k-0", "problem": "Compute 6*7.", "answer": "42"}], 1)


def test_already_normalised_rows_load_unchanged(tmp_path):
    rows = [{"id": "a", "problem": "p", "answer": "1"}, {"id": "b", "problem": "q", "answer": ["2", "3"]}]
    path = tmp_path / "rows.jsonl"
    files.write_jsonl(path, rows)
    assert load_rows("math12k", path) == (rows, 0)


def test_an_sft_set_reads_messages_or_sharegpt_conversations_and_skips_rows_without_both_turns(tmp_path):
    """Bespoke-Stratos-17k's rows as HuggingFaceH4 publishes them (messages, with system + conversations beside)
    and as the ShareGPT original (system + conversations only)."""
    from grpo_lambda.data.registry import load_conversations

    assert registry_entry("bespoke-stratos-17k", "sft_sets")["hub_id"] == "HuggingFaceH4/Bespoke-Stratos-17k"
    rows = [
        {"system": "Think first.",
         "conversations": [{"from": "user", "value": "1+1?"}, {"from": "assistant", "value": "2"}],
         "messages": [{"role": "user", "content": "1+1?"}, {"role": "assistant", "content": "\\boxed{2}"}]},
        {"system": "Think first.",
         "conversations": [{"from": "user", "value": "2+2?"}, {"from": "assistant", "value": "4"}]},
        {"messages": [{"role": "user", "content": "no answer"}]},
        {"conversations": [{"from": "tool", "value": "?"}, {"from": "assistant", "value": "x"}]},
    ]
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    loaded, dropped = load_conversations("bespoke-stratos-17k", path)
    assert [row["messages"] for row in loaded] == [
        [{"role": "user", "content": "1+1?"}, {"role": "assistant", "content": "\\boxed{2}"}],
        [{"role": "system", "content": "Think first."}, {"role": "user", "content": "2+2?"},
         {"role": "assistant", "content": "4"}]]
    assert dropped == 2 and len({row["id"] for row in loaded}) == 2
    assert len(load_conversations("bespoke-stratos-17k", path, limit=1)[0]) == 1


def test_a_field_mapped_beside_source_registry_replaces_the_registrys_mapping_of_that_field(tmp_path):
    """mathrl16k's entry reads the answer from `solution`; a study that writes `fields: {answer: final}` beside
    `source: registry` reads it from `final` (and keeps the entry's `problem`), on a local copy whose
    `solution` column holds worked text: right answers 5 and 12, not the text."""
    path = write_lines(tmp_path / "copy.jsonl", [
        {"problem": "2+3?", "solution": "Add them: five.", "final": "5"},
        {"problem": "3*4?", "solution": "Multiply: twelve.", "final": "12"}])
    spec = resolve({"source": "registry", "name": "mathrl16k", "path": str(path), "fields": {"answer": "final"}},
                   "m", "datasets")
    assert spec["fields"] == {"problem": "problem", "answer": "final"}
    assert load_rows(spec) == ([{"id": "mathrl16k-0", "problem": "2+3?", "answer": "5"},
                                {"id": "mathrl16k-1", "problem": "3*4?", "answer": "12"}], 0)


def test_a_users_file_with_problem_and_answer_columns_is_read_by_its_own_mapping(tmp_path):
    """Only a registry dataset's local copy may hold normalised rows; a study's own file (source: file) is read
    by its `fields`, even where it also has columns named `problem` and `answer`: here the mapping points to
    `question` and `gold`, so the rows are the questions with answers 7 and 9, not the `problem` drafts."""
    path = tmp_path / "mine.csv"
    path.write_text("problem,answer,question,gold\n"
                    "draft one,wrong,What is 3+4?,7\n"
                    "draft two,wrong,What is 4+5?,9\n", encoding="utf-8")
    spec = resolve({"source": "file", "path": str(path), "fields": {"problem": "question", "answer": "gold"}},
                   "mine", "datasets")
    assert load_rows(spec) == ([{"id": "mine-0", "problem": "What is 3+4?", "answer": "7"},
                                {"id": "mine-1", "problem": "What is 4+5?", "answer": "9"}], 0)


def test_a_math500_copy_keeps_its_unique_ids_and_a_normalised_copy_its_own_ids(tmp_path):
    """MATH-500's rows have `problem` and `answer` columns (read as such) and their id in `unique_id`, which the
    registry maps; a normalised copy (prepare's output) has `id`, which wins over the mapping."""
    raw_rows = write_lines(tmp_path / "math500.jsonl", [
        {"problem": "1+1?", "answer": "2", "unique_id": "test/algebra/1.json"},
        {"problem": "2+2?", "answer": "4", "unique_id": "test/algebra/2.json"}])
    spec = resolve({"source": "registry", "name": "math500", "path": str(raw_rows)}, "math500", "benchmarks")
    assert [row["id"] for row in load_rows(spec)[0]] == ["test/algebra/1.json", "test/algebra/2.json"]
    normalised = write_lines(tmp_path / "normalised.jsonl", [{"id": "a", "problem": "1+1?", "answer": "2"}])
    spec = resolve({"source": "registry", "name": "math500", "path": str(normalised)}, "math500", "benchmarks")
    assert load_rows(spec) == ([{"id": "a", "problem": "1+1?", "answer": "2"}], 0)


def test_the_dropped_count_adds_unusable_rows_and_repeats_and_a_limit_keeps_the_first_usable_rows(tmp_path):
    path = write_lines(tmp_path / "rows.jsonl", [
        {"id": "a", "problem": "1+1?", "answer": "2"},
        {"id": "x", "problem": "no answer", "answer": None},   # unusable: dropped
        {"id": "a", "problem": "1+1?", "answer": "2"},         # a repeat with the same answer: dropped
        {"id": "b", "problem": "2+2?", "answer": "4"},
        {"id": "c", "problem": "3+3?", "answer": "6"}])
    spec = resolve({"source": "file", "path": str(path)}, "mine")
    rows, dropped = load_rows(spec)
    assert ([row["id"] for row in rows], dropped) == (["a", "b", "c"], 2)
    assert [row["id"] for row in load_rows(spec, limit=2)[0]] == ["a", "b"]
    assert [row["id"] for row in load_rows(spec, limit=1)[0]] == ["a"]
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match=r"limit must be a positive integer or None"):
            load_rows(spec, limit=bad)


def test_reading_a_file_whose_mapping_names_a_missing_column_is_refused_naming_it(tmp_path):
    """At read time too (prepare on a file changed since validation): one error naming the field, the column and
    the file's columns, not every row skipped as unusable."""
    path = tmp_path / "rows.csv"
    path.write_text("question,answer\nWhat is 1+1?,2\n", encoding="utf-8")
    spec = resolve({"source": "file", "path": str(path), "fields": {"problem": "prompt"}}, "mine")
    with pytest.raises(ValueError, match=rf"^fields\.problem: column 'prompt' is not in {re.escape(str(path))} "
                                         r"\(its columns: answer, question\)$"):
        load_rows(spec)


def test_a_file_source_resolves_to_its_defaults_written_out_and_a_synthetic_one_as_it_is():
    assert resolve({"source": "file", "path": "x.jsonl"}, "mine") == {
        "source": "file", "path": "x.jsonl", "split": "train", "config": None, "name": "mine", "answer_kind": "text",
        "fields": {"problem": "problem", "answer": "answer"}}
    synthetic = {"source": "synthetic", "kind": "arith", "count": 10}
    assert resolve(synthetic, "arith") == synthetic


def test_only_a_registry_copy_with_problem_and_answer_columns_skips_the_mapping_check():
    """A registry dataset's local copy with exactly `problem` and `answer` holds normalised rows (no check of the
    entry's `unique_id`); a study's own file with those columns is checked against its own mapping."""
    from grpo_lambda.data.registry import missing_field

    copy = resolve({"source": "registry", "name": "math500", "path": "copy.jsonl"}, "math500", "benchmarks")
    assert missing_field(copy, {"problem", "answer"}) is None
    assert missing_field(copy, {"problem", "solution"}) == ("answer", "answer")
    own = resolve({"source": "file", "path": "mine.csv", "fields": {"problem": "question"}}, "mine")
    assert missing_field(own, {"problem", "answer"}) == ("problem", "question")
    assert missing_field(own, None) is None  # columns unknown (a hub dataset before its prefetch)
