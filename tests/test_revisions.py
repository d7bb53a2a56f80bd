"""Hub revisions after prefetch: a dataset is prepared at the commit the prefetch record holds, a hub model
is read at its config's revision from the cache, and both commits enter the training fingerprint and the
provenance. The hub itself is never reached: the cache is laid out as huggingface_hub lays it out, and the
dataset files are local ones read through the same datasets.load_dataset call."""

import json
import os
import subprocess

import pytest

from grpo_lambda import files, fingerprint, prepare

from test_prefetch import fake_cached_model, local_hub_dataset


def prefetch_record(tmp_path, hub_id, commit):
    record = {"hf_hub_cache": "", "models": {}, "datasets": {"sums": {
        "name": "sums", "hub_id": hub_id, "config": None, "split": "test", "revision": "v1", "commit": commit,
        "files": {}, "rows": 3, "columns": ["final", "question"]}}}
    path = tmp_path / f"prefetched-{commit[0]}.json"
    files.write_json(path, record)
    return path


def test_a_hub_dataset_is_prepared_at_the_recorded_commit_and_the_commit_enters_the_fingerprint(tmp_path,
                                                                                                 monkeypatch):
    import datasets

    hub_id = str(local_hub_dataset(tmp_path / "sums"))
    calls = []
    real_load = datasets.load_dataset
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: calls.append(k.get("revision")) or real_load(*a, **k))
    settings = {"key": "sums", "role": "train", "source": "hub", "hub_id": hub_id, "split": "test", "revision": "v1",
                "fields": {"problem": "question", "answer": "final"}, "answer_kind": "number"}
    data = tmp_path / "data" / "sums.jsonl"
    assert prepare.run(settings, str(data), prefetched=str(prefetch_record(tmp_path, hub_id, "a" * 40))) == 3
    assert calls == ["a" * 40]
    assert [row["answer"] for row in files.read_jsonl(data)] == ["2", "4", "6"]
    summary = json.loads(prepare.summary_path(str(data)).read_text())
    assert summary["source"] == {"hub_id": hub_id, "config": None, "split": "test", "revision": "v1",
                                 "commit": "a" * 40}

    base = tmp_path / "base"
    base.mkdir()
    (base / "config.json").write_text("{}")
    at_a = fingerprint.compute({"rl": {}}, seed=0, base=str(base), data_path=str(data))
    assert at_a["revisions"] == {"data": summary["source"]}
    # The same rows from another commit of the dataset (the record named in the settings, as the rule's are):
    # another fingerprint, by its data part alone.
    prepare.run({**settings, "prefetch_record": str(prefetch_record(tmp_path, hub_id, "b" * 40))}, str(data))
    assert calls[-1] == "b" * 40
    at_b = fingerprint.compute({"rl": {}}, seed=0, base=str(base), data_path=str(data))
    assert at_b["data"] != at_a["data"] and at_b["hash"] != at_a["hash"]
    assert {part: at_b[part] for part in ("settings", "base", "code")} == {
        part: at_a[part] for part in ("settings", "base", "code")}
    # A local source has no revision: its data part is the file's digest, as it always was.
    prepare.summary_path(str(data)).unlink()
    local = fingerprint.compute({"rl": {}}, seed=0, base=str(base), data_path=str(data))
    assert local["data"] == fingerprint.path_digest(data) and "revisions" not in local


def test_a_dataset_missing_from_the_record_is_an_error_naming_it(tmp_path):
    hub_id = str(local_hub_dataset(tmp_path / "sums"))
    settings = {"key": "sums", "role": "train", "source": "hub", "hub_id": hub_id, "split": "test", "revision": "v2",
                "fields": {"problem": "question", "answer": "final"}}
    with pytest.raises(ValueError, match=r"revision v2\) is not in .*; run the prefetch rule again"):
        prepare.run(settings, str(tmp_path / "out.jsonl"), prefetched=str(prefetch_record(tmp_path, hub_id, "a" * 40)))
    assert not (tmp_path / "out.jsonl").exists()


def test_sft_reads_the_hub_model_at_its_revision_and_records_the_commit(tmp_path, cli):
    """grpo-lambda sft with a hub id as --base, offline: the snapshot of the model's revision (a tag here), not the
    default branch's, is what SFT starts from (sft.num_train_epochs 0 copies it); its provenance and the fingerprint of an
    RL cell on it carry that commit."""
    from grpo_lambda import tiny
    from conftest import largest_weight_change

    hf_home = tmp_path / "hf"
    snapshots = {}
    for seed, (commit, ref) in enumerate((("a" * 40, "main"), ("b" * 40, "v2"))):
        built = tmp_path / f"built-{ref}"
        tiny.build(str(built), seed=seed, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                   intermediate_size=32)
        snapshots[ref] = fake_cached_model(hf_home, "org/tiny", {p.name: p.read_bytes() for p in built.iterdir()},
                                           commit=commit, ref=ref)
    data = tmp_path / "data.jsonl"
    files.write_jsonl(data, [{"id": "a", "problem": "1+1", "answer": "2", "solution": "\\boxed{2}"}])
    settings = {"model": {"name": "t", "source": "org/tiny", "prompt": "plain", "lora": None, "revision": "v2"},
                "dataset": "d", "sft": {"num_train_epochs": 0}}
    out = tmp_path / "sft" / "model"
    env = {**os.environ, "HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    done = subprocess.run([cli, "sft", "--settings", json.dumps(settings), "--base", "org/tiny", "--data", str(data),
                           "--out", str(out)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert largest_weight_change(snapshots["v2"], out) == 0 and largest_weight_change(snapshots["main"], out) > 0
    made_by = json.loads((out.parent / "provenance.json").read_text())
    assert made_by["revisions"] == {"base": {"id": "org/tiny", "commit": "b" * 40}}
    cell = fingerprint.compute({"rl": {}}, seed=0, base=str(out), data_path=str(data))
    assert cell["revisions"] == {"base": {"id": "org/tiny", "commit": "b" * 40}}
    assert cell["base"] != fingerprint.path_digest(out)

    missing = subprocess.run([cli, "sft", "--settings", json.dumps({**settings, "model": {
        **settings["model"], "revision": "v9"}}), "--base", "org/tiny", "--data", str(data), "--out",
        str(tmp_path / "other")], env=env, capture_output=True, text=True, timeout=300)
    assert missing.returncode == 2 and "model 'org/tiny' at revision v9 is not in the hub cache" in missing.stderr


def test_a_cached_copy_of_another_commit_is_refused_not_read(tmp_path, monkeypatch):
    """Offline, datasets reads the newest cached copy whatever the revision: its cache folder, named by the commit
    it holds, must be the one the record pinned."""
    import datasets

    from grpo_lambda.data import registry

    cached = tmp_path / "cache" / "me___sums" / "default" / "0.0.0" / ("e" * 40)
    cached.mkdir(parents=True)
    datasets.Dataset.from_dict({"question": ["1+1?"], "final": [2]}).save_to_disk(str(cached))
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: datasets.load_from_disk(str(cached)))
    spec = {"source": "hub", "hub_id": "me/sums", "split": "train", "fields": {"problem": "question", "answer": "final"},
            "answer_kind": "number", "name": "sums"}
    assert registry.load_rows({**spec, "revision": "e" * 40})[0] == [{"id": "sums-0", "problem": "1+1?", "answer": "2"}]
    with pytest.raises(ValueError, match=r"me/sums: the datasets cache holds commit e{40}, not f{40}; fetch it again"):
        registry.load_rows({**spec, "revision": "f" * 40})
