"""Datasets and benchmarks described in the config alone: a local file in four formats or a save_to_disk
folder (source: file), any hub dataset (source: hub) read by datasets.load_dataset, with a field mapping
and an answer normaliser; a mapping to a field the source lacks refused before any job, naming it."""

import copy
import json
import os
import subprocess

import pytest
import yaml

from conftest import ROOT
from grpo_lambda import config as study
from grpo_lambda import files, prepare
from grpo_lambda.data import registry

DEFAULT = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
FIELDS = {"problem": "question", "answer": "final", "solution": "worked", "id": "uid"}
RECORDS = [
    {"uid": "p1", "question": "What is 2+3?", "final": 5.0, "worked": "2+3=5. \\boxed{5}", "extra": 1},
    {"uid": "p2", "question": "What is 10*10?", "final": "100.0", "worked": "\\boxed{100}", "extra": 2},
    {"uid": "p3", "question": "", "final": 1, "worked": "", "extra": 3},  # no problem: skipped, counted
    {"uid": "p4", "question": "Half of 3?", "final": 1.5, "worked": None, "extra": 4},
]
EXPECTED = [{"id": "p1", "problem": "What is 2+3?", "answer": "5", "solution": "2+3=5. \\boxed{5}"},
            {"id": "p2", "problem": "What is 10*10?", "answer": "100", "solution": "\\boxed{100}"},
            {"id": "p4", "problem": "Half of 3?", "answer": "1.5"}]


def write_source(folder, fmt, records=RECORDS):
    """The records as a .jsonl, .json, .csv or .parquet file, or a save_to_disk folder."""
    import pandas

    path = folder / ("rows" if fmt == "disk" else f"rows.{fmt}")
    if fmt == "jsonl":
        path.write_text("".join(json.dumps(record) + "\n" for record in records))
    elif fmt == "json":
        path.write_text(json.dumps({"train": records}))
    else:
        frame = pandas.DataFrame([{**record, "final": str(record["final"])} for record in records])
        if fmt == "csv":
            frame.to_csv(path, index=False)
        elif fmt == "parquet":
            frame.to_parquet(path)
        else:
            import datasets

            datasets.Dataset.from_pandas(frame).save_to_disk(str(path))
    return path


def with_dataset(spec, group="datasets", key="mine"):
    config = copy.deepcopy(DEFAULT)
    config[group][key] = spec
    return config


@pytest.mark.parametrize("fmt", ["jsonl", "json", "csv", "parquet", "disk"])
def test_a_file_in_each_format_is_read_by_its_mapping_and_its_bad_rows_counted(tmp_path, fmt):
    path = write_source(tmp_path, fmt)
    config = study.validate(with_dataset({"source": "file", "path": str(path), "fields": FIELDS,
                                          "answer_kind": "number"}))
    settings = study.stage_settings(config, "prepare", dataset="mine")
    out = tmp_path / "out" / "mine.jsonl"
    assert prepare.run(settings, str(out)) == 3
    assert files.read_jsonl(out) == EXPECTED
    summary = json.loads(prepare.summary_path(str(out)).read_text())
    assert summary["skipped_by_reason"] == {"no problem or no usable answer": 1}


def test_prepare_logs_its_summary_line_once(tmp_path, caplog):
    """As found: prepare's 'kept N rows, dropped M' line was written twice (by the reader and by prepare)."""
    path = write_source(tmp_path, "jsonl")
    config = study.validate(with_dataset({"source": "file", "path": str(path), "fields": FIELDS, "answer_kind": "number"}))
    caplog.set_level("INFO")
    prepare.run(study.stage_settings(config, "prepare", dataset="mine"), str(tmp_path / "out" / "mine.jsonl"))
    lines = [record.getMessage() for record in caplog.records if "kept 3 rows, dropped 1 of 4 rows" in record.getMessage()]
    assert lines == [f"{path}: kept 3 rows, dropped 1 of 4 rows (1 no problem or no usable answer)"]


@pytest.mark.parametrize(("name", "content", "what"), [
    ("rows.jsonl", "", "no rows"), ("rows.jsonl", "\n  \n", "no rows"), ("rows.json", "[]", "no rows"),
    ("rows.csv", "", "no header and no rows"),
])
def test_an_empty_file_is_called_empty(tmp_path, name, content, what):
    """As found: an empty data file was refused as one whose columns lack the problem's ('its columns: none')."""
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(study.ConfigError, match=rf"datasets\.mine\.path: {path} is empty: it holds {what}$"):
        study.validate(with_dataset({"source": "file", "path": str(path)}))
    with pytest.raises(ValueError, match=rf"^{path} is empty: it holds {what}$"):
        registry.load_rows(registry.resolve({"source": "file", "path": str(path)}, "mine"))


@pytest.mark.parametrize("fmt", ["jsonl", "json", "csv", "parquet", "disk"])
def test_a_mapping_to_a_missing_column_is_refused_before_any_job_naming_it(tmp_path, fmt):
    path = write_source(tmp_path, fmt)
    for role, column in (("problem", "prompt"), ("solution", "steps"), ("id", "key")):
        with pytest.raises(study.ConfigError, match=rf"datasets\.mine\.fields\.{role}: column '{column}' is not in "
                                                    rf".*rows.* \(its columns: extra, final, question, uid, worked\)"):
            study.validate(with_dataset({"source": "file", "path": str(path), "fields": {**FIELDS, role: column}}))
    # the default mapping (problem, answer) names the columns it looked for
    with pytest.raises(study.ConfigError, match=r"datasets\.mine\.fields\.problem: column 'problem'"):
        study.validate(with_dataset({"source": "file", "path": str(path)}))


def test_a_normalised_file_needs_no_mapping_and_keeps_its_ids_and_solutions(tmp_path):
    rows = [{"id": "a", "problem": "1+1?", "answer": "2", "solution": "\\boxed{2}"}, {"id": "b", "problem": "2+2?",
                                                                                     "answer": ["4", "4.0"]}]
    path = tmp_path / "normalised.jsonl"
    files.write_jsonl(path, rows)
    config = study.validate(with_dataset({"source": "file", "path": str(path)}, "benchmarks", "bench"))
    assert registry.load_rows(registry.resolve(config["benchmarks"]["bench"], "bench", "benchmarks")) == (rows, 0)


def test_csv_rows_with_bad_bytes_or_too_many_cells_are_skipped_and_named(tmp_path, caplog):
    path = tmp_path / "rows.csv"
    path.write_bytes(b'q,a\n"1+1?",2\n"caf\xe9?",3\n"2+2?",4,extra\n"3+3?",6\n')
    spec = registry.resolve({"source": "file", "path": str(path), "fields": {"problem": "q", "answer": "a"}}, "c")
    rows, dropped = registry.load_rows(spec)
    assert [row["answer"] for row in rows] == ["2", "6"] and dropped == 2
    assert f"{path}:3: not UTF-8" in caplog.text and f"{path}:4: wrong field count: 3 fields, the header has 2" in caplog.text


BAD_SOURCES = {
    "file without a path": ({"source": "file"}, r"datasets\.mine\.path is required for source file"),
    "hub without an id": ({"source": "hub", "split": "test"}, r"datasets\.mine\.hub_id is required for source hub"),
    "a synthetic key on a file": ({"source": "file", "path": "x.jsonl", "n": 5},
                                  r"datasets\.mine\.n applies to source synthetic only, not 'file'"),
    "a path on a hub source": ({"source": "hub", "hub_id": "a/b", "path": "x.jsonl"},
                               r"datasets\.mine\.path applies to source file / registry only, not 'hub'"),
    "a revision on a file": ({"source": "file", "path": str(ROOT / "tests/data/rehearsal/amc.jsonl"), "revision": "v1"},
                             r"datasets\.mine\.revision applies to source hub / registry only"),
    "a revision on a registry copy": ({"source": "registry", "name": "amc", "revision": "v1",
                                       "path": str(ROOT / "tests/data/rehearsal/amc.jsonl")},
                                      r"datasets\.mine\.revision: a local path has no hub revision"),
    "a fields key on a synthetic source": ({"source": "synthetic", "n": 3, "seed": 1, "fields": {"problem": "q"}},
                                           r"datasets\.mine\.fields applies to source file / hub / registry only"),
    "an unknown normaliser": ({"source": "hub", "hub_id": "a/b", "answer_kind": "float"},
                              r"datasets\.mine\.answer_kind"),
    "an unknown part of a row": ({"source": "hub", "hub_id": "a/b", "fields": {"question": "q"}},
                                 r"datasets\.mine\.fields"),
    "a file of another format": ({"source": "file", "path": str(ROOT / "README.md")},
                                 r"datasets\.mine\.path: '.*README\.md' is not a \.jsonl, \.json, \.csv, \.parquet file"),
    "a file that does not exist": ({"source": "file", "path": "/no/such/rows.jsonl"},
                                   r"datasets\.mine\.path: '/no/such/rows\.jsonl' does not exist"),
    "a registry name on a file": ({"source": "file", "path": "x.jsonl", "name": "gsm8k"},
                                  r"datasets\.mine\.name applies to source registry only"),
}


@pytest.mark.parametrize("case", sorted(BAD_SOURCES))
def test_a_source_that_cannot_be_read_is_refused_naming_the_key(case):
    spec, message = BAD_SOURCES[case]
    with pytest.raises(study.ConfigError, match=message):
        study.validate(with_dataset(spec))


def test_a_broken_json_file_is_refused_at_validation(tmp_path):
    path = tmp_path / "rows.json"
    path.write_text('[{"question": "1+1?", "final": 2},')
    with pytest.raises(study.ConfigError, match=r"datasets\.mine\.path: .*rows\.json:1: not JSON"):
        study.validate(with_dataset({"source": "file", "path": str(path), "fields": FIELDS}))


def test_a_hub_mapping_is_checked_against_the_prefetch_record_once_there_is_one(tmp_path, monkeypatch):
    spec = {"source": "hub", "hub_id": "me/sums", "split": "test", "fields": {"problem": "question", "answer": "a"}}
    monkeypatch.chdir(tmp_path)
    study.validate(with_dataset(spec))  # not fetched yet: prefetch checks it
    files.write_json(tmp_path / "results" / "hub" / "prefetched.json", {"models": {}, "datasets": {"sums": {
        "name": "mine", "hub_id": "me/sums", "config": None, "split": "test", "revision": None, "commit": "c" * 40,
        "files": {}, "rows": 3, "columns": ["final", "question"]}}})
    with pytest.raises(study.ConfigError, match=r"datasets\.mine\.fields\.answer: column 'a' is not in me/sums "
                                                r"\(test\) \(its columns: final, question\)"):
        study.validate(with_dataset(spec))
    study.validate(with_dataset({**spec, "fields": {"problem": "question", "answer": "final"}}))
    study.validate(with_dataset({**spec, "revision": "v2"}))  # another revision: not in the record yet


def test_a_hub_source_is_read_by_datasets_load_dataset(tmp_path, cli):
    """source: hub with a dataset repository's files (here a local folder holding them, which load_dataset takes
    as it takes a hub id): prepared by the CLI, offline, from the config alone."""
    from test_prefetch import local_hub_dataset

    hub_id = str(local_hub_dataset(tmp_path / "sums"))
    study_file = tmp_path / "study.yaml"
    study_file.write_text(yaml.safe_dump(with_dataset({
        "source": "hub", "hub_id": hub_id, "split": "test", "fields": {"problem": "question", "answer": "final"},
        "answer_kind": "number"}, "benchmarks", "sums")))
    out = tmp_path / "bench" / "sums.jsonl"
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    done = subprocess.run([cli, "prepare", "--configfile", str(study_file), "--benchmark", "sums", "--out", str(out)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert files.read_jsonl(out) == [{"id": "sums-0", "problem": "1+1?", "answer": "2"},
                                     {"id": "sums-1", "problem": "2+2?", "answer": "4"},
                                     {"id": "sums-2", "problem": "3+3?", "answer": "6"}]
    wrong = dict(yaml.safe_load(study_file.read_text()))
    wrong["benchmarks"]["sums"]["fields"]["answer"] = "answer"
    study_file.write_text(yaml.safe_dump(wrong))
    done = subprocess.run([cli, "prepare", "--configfile", str(study_file), "--benchmark", "sums", "--out",
                           str(tmp_path / "other.jsonl")], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "fields.answer: column 'answer' is not in" in done.stderr
    assert not (tmp_path / "other.jsonl").exists()


def test_rows_python_cannot_hold_are_skipped_and_named_by_the_column_check_and_prepare_keeps_the_good(tmp_path, caplog):
    """A 100,000-deep nested array, a 5,000-digit integer and a lone surrogate once ended validation with a
    RecursionError: the column check reads with prepare's guarded reader, so each is skipped and named, the
    good rows decide the columns, and prepare writes the good rows."""
    good = [json.dumps({"uid": f"g{i}", "question": f"What is {i}+{i}?", "final": 2 * i}).encode() for i in range(3)]
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b"\n".join([
        b'{"uid": "deep", "question": "x", "final": ' + b"[" * 100_000 + b"]" * 100_000 + b'}',
        b'{"uid": "big", "question": "x", "final": ' + b"7" * 5000 + b'}',
        b'{"uid": "lone", "question": "caf\\ud800", "final": 1, "only_here": 1}',
        *good]) + b"\n")
    fields = {"problem": "question", "answer": "final", "id": "uid"}
    config = study.validate(with_dataset({"source": "file", "path": str(path), "fields": fields,
                                          "answer_kind": "number"}))
    assert f"{path}: 3 bad rows skipped in reading its columns" in caplog.text
    for line, reason in ((1, "not JSON: nested too deeply"), (2, "not JSON: Exceeds the limit"),
                         (3, "not UTF-8: a lone surrogate")):
        assert f"{path}:{line}: {reason}" in caplog.text
    # The skipped row's own column decides nothing: a mapping to it is refused, naming the good rows' columns.
    with pytest.raises(study.ConfigError, match=r"fields\.solution: column 'only_here' is not in .*"
                                                r"\(its columns: final, question, uid\)"):
        study.validate(with_dataset({"source": "file", "path": str(path), "fields": {**fields, "solution": "only_here"}}))
    out = tmp_path / "out" / "mine.jsonl"
    assert prepare.run(study.stage_settings(config, "prepare", dataset="mine"), str(out)) == 3
    assert [row["id"] for row in files.read_jsonl(out)] == ["g0", "g1", "g2"]
    summary = json.loads(prepare.summary_path(str(out)).read_text())
    assert summary["skipped_by_reason"] == {"not JSON": 2, "not UTF-8": 1}
