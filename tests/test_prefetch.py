"""The prefetch stage: what a study fetches from the hub, and the hub's own download code run
against a local cache with the network off."""

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from grpo_lambda import config as study
from grpo_lambda import prefetch

ROOT = Path(__file__).resolve().parents[1]


def test_the_paper_grid_fetches_its_four_models_and_nine_datasets():
    sources = prefetch.hub_sources(study.load(str(ROOT / "config/paper.yaml")))
    assert sources["models"] == [{"id": model, "revision": None} for model in sorted([
        "Qwen/Qwen2.5-Math-1.5B-Instruct", "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B",
        "suayptalha/DeepSeek-R1-Distill-Llama-3B", "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B"])]
    names = [entry["name"] for entry in sources["datasets"]]
    assert names == sorted(["gsm8k", "math12k", "mathrl16k", "orz57k", "aime24", "amc", "math500", "minerva",
                            "olympiadbench"])
    assert {"name": "gsm8k", "hub_id": "openai/gsm8k", "config": "main", "split": "train", "revision": None,
            "fields": {"problem": "question", "answer": "answer"}} in sources["datasets"]


def test_revisions_of_the_config_reach_the_fetch_list():
    config = yaml.safe_load((ROOT / "config/paper.yaml").read_text())
    config["models"]["r1-qwen-7b"]["revision"] = "v1.0"
    config["datasets"]["gsm8k"]["revision"] = "abc1234"
    config["datasets"]["mine"] = {"source": "hub", "hub_id": "me/sums", "config": "easy", "split": "test",
                                  "fields": {"problem": "q", "answer": "a"}, "answer_kind": "number"}
    sources = prefetch.hub_sources(study.validate(config))
    assert {"id": "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "revision": "v1.0"} in sources["models"]
    assert next(e for e in sources["datasets"] if e["name"] == "gsm8k")["revision"] == "abc1234"
    assert {"name": "mine", "hub_id": "me/sums", "config": "easy", "split": "test", "revision": None,
            "fields": {"problem": "q", "answer": "a"}} in sources["datasets"]


def test_local_studies_fetch_nothing():
    for name in ("config.yaml", "rehearsal.yaml"):
        assert prefetch.hub_sources(study.load(str(ROOT / "config" / name))) == {"models": [], "datasets": []}


def fake_cached_model(hf_home: Path, repo: str, files: dict, *, commit: str = "0" * 40, ref: str = "main") -> Path:
    """A model as huggingface_hub caches it: refs/<ref> names a snapshot folder whose files link to blobs
    named by their hash (the hub's etag)."""
    folder = hf_home / "hub" / ("models--" + repo.replace("/", "--"))
    (folder / "refs").mkdir(parents=True, exist_ok=True)
    (folder / "refs" / ref).write_text(commit)
    snapshot = folder / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (folder / "blobs").mkdir(exist_ok=True)
    for name, content in files.items():
        blob = hashlib.sha256(content).hexdigest()
        (folder / "blobs" / blob).write_bytes(content)
        (snapshot / name).symlink_to(Path("..", "..", "blobs", blob))
    return snapshot


def run_prefetch(settings: dict, out: Path, hf_home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    return subprocess.run(["grpo-lambda", "prefetch", "--settings", json.dumps(settings), "--out", str(out)],
                          env=env, capture_output=True, text=True, timeout=120)


def test_prefetch_records_each_models_commit_and_file_hashes_through_the_hub_code(tmp_path):
    """The hub's own snapshot_download, offline, on a cache laid out as huggingface_hub lays it out: a model
    asked at the default branch and at a tag, each recorded with the commit its ref names and the blob
    hash of every file."""
    main = fake_cached_model(tmp_path / "hf", "org/tiny-model", {"config.json": b"{}", "model.bin": b"weights A"},
                             commit="a" * 40)
    tagged = fake_cached_model(tmp_path / "hf", "org/tiny-model", {"config.json": b"{}", "model.bin": b"weights B"},
                               commit="b" * 40, ref="v2")
    done = run_prefetch({"models": [{"id": "org/tiny-model", "revision": None},
                                    {"id": "org/tiny-model", "revision": "v2"}], "datasets": []},
                        tmp_path / "fetched.json", tmp_path / "hf")
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads((tmp_path / "fetched.json").read_text())
    assert record["hf_hub_cache"] == str(tmp_path / "hf" / "hub")
    at_main, at_v2 = record["models"]["org/tiny-model"], record["models"]["org/tiny-model@v2"]
    assert (Path(at_main["path"]), at_main["commit"], at_main["revision"]) == (main, "a" * 40, None)
    assert (Path(at_v2["path"]), at_v2["commit"], at_v2["revision"]) == (tagged, "b" * 40, "v2")
    assert at_main["files"] == {"config.json": hashlib.sha256(b"{}").hexdigest(),
                                "model.bin": hashlib.sha256(b"weights A").hexdigest()}
    assert at_v2["files"]["model.bin"] == hashlib.sha256(b"weights B").hexdigest()


def test_a_model_that_cannot_be_fetched_is_named(tmp_path):
    done = run_prefetch({"models": [{"id": "org/absent", "revision": "v3"}], "datasets": []},
                        tmp_path / "fetched.json", tmp_path / "hf")
    assert done.returncode != 0
    assert "prefetch: model 'org/absent@v3' could not be fetched" in done.stderr
    assert not (tmp_path / "fetched.json").exists()


def local_hub_dataset(folder: Path) -> Path:
    """A dataset repository's files as the hub serves them (a parquet file per split), here on disk: what
    datasets.load_dataset reads through the same call as a hub id."""
    import pandas

    folder.mkdir(parents=True)
    pandas.DataFrame({"question": ["1+1?", "2+2?", "3+3?"], "final": [2.0, 4.0, 6.0]}).to_parquet(
        folder / "test.parquet")
    return folder


def test_a_dataset_is_fetched_at_the_commit_its_revision_names_and_recorded(tmp_path, monkeypatch):
    hub_id = str(local_hub_dataset(tmp_path / "sums"))
    resolved = []

    def resolve_dataset(repo, revision):  # the hub's metadata, which this machine cannot reach
        resolved.append((repo, revision))
        return {"commit": "c" * 40, "files": {"test.parquet": "d" * 64}}

    monkeypatch.setattr(prefetch, "resolve_dataset", resolve_dataset)
    import datasets

    calls = []
    real_load = datasets.load_dataset
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: calls.append((a, k)) or real_load(*a, **k))
    entry = {"name": "sums", "hub_id": hub_id, "config": None, "split": "test", "revision": "v1",
             "fields": {"problem": "question", "answer": "final"}}
    record = prefetch.run({"models": [], "datasets": [entry]})
    assert resolved == [(hub_id, "v1")]
    assert calls == [((hub_id, None), {"split": "test", "revision": "c" * 40})]  # the commit, not the tag
    assert record["datasets"]["sums"] == {"name": "sums", "hub_id": hub_id, "config": None, "split": "test",
                                          "revision": "v1", "commit": "c" * 40, "files": {"test.parquet": "d" * 64},
                                          "rows": 3, "columns": ["final", "question"]}
    from grpo_lambda.data.registry import recorded_dataset

    assert recorded_dataset(record, {**entry, "source": "hub"})["commit"] == "c" * 40

    wrong = {**entry, "fields": {"problem": "question", "answer": "answer"}}
    with pytest.raises(RuntimeError, match=r"prefetch: dataset 'sums' .*: fields\.answer: column 'answer' is not "
                                           r"in .* \(its columns: final, question\)"):
        prefetch.run({"models": [], "datasets": [wrong]})


def test_prefetch_alone_goes_online():
    env = {**os.environ, "GRPO_LAMBDA_PARTITION": "gpu", "GRPO_LAMBDA_ACCOUNT": "project"}
    plan = subprocess.run(["snakemake", "-n", "-p", "results/r1-qwen-7b/gsm8k/sft/model", "--profile",
                           "workflow/profiles/slurm", "--configfile", "config/paper.yaml"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert plan.returncode == 0, plan.stderr[-2000:]
    text = plan.stdout + plan.stderr
    # a dry run names local rules "rule" too: the rehearsal's sbatch logs show which rules were jobs
    assert "rule prefetch:" in text and "rule prepare_dataset:" in text and "rule sft:" in text
    assert "env -u HF_HUB_OFFLINE -u HF_DATASETS_OFFLINE grpo-lambda prefetch" in text
    # every other job's shell starts offline
    assert 'shell.prefix("set -euo pipefail; export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 ' in (
        ROOT / "workflow/rules/common.smk").read_text()
