"""The prefetch stage: what a study fetches from the hub, and the hub's own download code run
against a local cache with the network off."""

import json
import os
import subprocess
from pathlib import Path

from grpo_lambda import config as study
from grpo_lambda import prefetch

ROOT = Path(__file__).resolve().parents[1]


def test_the_paper_grid_fetches_its_four_models_and_nine_datasets():
    sources = prefetch.hub_sources(study.load(str(ROOT / "config/paper.yaml")))
    assert sources["models"] == sorted(["Qwen/Qwen2.5-Math-1.5B-Instruct", "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B",
                                        "suayptalha/DeepSeek-R1-Distill-Llama-3B",
                                        "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B"])
    names = [entry["name"] for entry in sources["datasets"]]
    assert names == sorted(["gsm8k", "math12k", "mathrl16k", "orz57k", "aime24", "amc", "math500", "minerva",
                            "olympiadbench"])
    assert {"hub_id": "openai/gsm8k", "config": "main", "split": "train", "name": "gsm8k"} in sources["datasets"]


def test_local_studies_fetch_nothing():
    for name in ("config.yaml", "rehearsal.yaml"):
        assert prefetch.hub_sources(study.load(str(ROOT / "config" / name))) == {"models": [], "datasets": []}


def fake_cached_model(hf_home: Path, repo: str) -> Path:
    """A model as huggingface_hub caches it: refs/main names a snapshot folder holding the files."""
    folder = hf_home / "hub" / ("models--" + repo.replace("/", "--"))
    commit = "0" * 40
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text(commit)
    snapshot = folder / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    return snapshot


def run_prefetch(settings: dict, out: Path, hf_home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    return subprocess.run(["grpo-lambda", "prefetch", "--settings", json.dumps(settings), "--out", str(out)],
                          env=env, capture_output=True, text=True, timeout=120)


def test_prefetch_resolves_models_in_hf_home_through_the_hub_code(tmp_path):
    snapshot = fake_cached_model(tmp_path / "hf", "org/tiny-model")
    done = run_prefetch({"models": ["org/tiny-model"], "datasets": []}, tmp_path / "fetched.json", tmp_path / "hf")
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads((tmp_path / "fetched.json").read_text())
    assert Path(record["models"]["org/tiny-model"]) == snapshot
    assert record["hf_hub_cache"] == str(tmp_path / "hf" / "hub")


def test_a_model_that_cannot_be_fetched_is_named(tmp_path):
    done = run_prefetch({"models": ["org/absent"], "datasets": []}, tmp_path / "fetched.json", tmp_path / "hf")
    assert done.returncode != 0
    assert "prefetch: model 'org/absent' could not be fetched" in done.stderr
    assert not (tmp_path / "fetched.json").exists()


def test_datasets_are_loaded_with_their_registry_id_config_and_split(monkeypatch):
    import datasets

    calls = []
    monkeypatch.setattr(datasets, "load_dataset", lambda *args, **kwargs: calls.append((args, kwargs)) or [1, 2])
    record = prefetch.run({"models": [], "datasets": [
        {"name": "gsm8k", "hub_id": "openai/gsm8k", "config": "main", "split": "train"}]})
    assert calls == [(("openai/gsm8k", "main"), {"split": "train"})]
    assert record["datasets"]["gsm8k"] == {"hub_id": "openai/gsm8k", "rows": 2}


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
