"""The publish rule's stage: each cell's final model and model card, pushed to its own repo in one commit,
with huggingface_hub's API replaced by a recorder (no network)."""

import json
import subprocess
from types import SimpleNamespace

import huggingface_hub
import pytest
import yaml

from grpo_lambda import config as study
from grpo_lambda import publish
from grpo_lambda.train import LOG_COLUMNS, write_train_log

from conftest import E2E_CONFIG, ROOT


class RecordingApi:
    """huggingface_hub.HfApi as publish uses it: the calls are recorded, nothing leaves the machine."""

    calls: list = []

    def __init__(self, token=None):
        self.token = token

    def whoami(self):
        self.calls.append(("whoami",))
        return {"name": "alice"}

    def create_repo(self, repo_id, **kwargs):
        self.calls.append(("create_repo", repo_id, kwargs))

    def create_commit(self, repo_id, operations, **kwargs):
        contents = {op.path_in_repo: (op.path_or_fileobj if isinstance(op.path_or_fileobj, bytes)
                                      else open(op.path_or_fileobj, "rb").read()) for op in operations}
        self.calls.append(("create_commit", repo_id, contents, kwargs))
        return SimpleNamespace(oid="abc123", commit_url=f"https://huggingface.co/{repo_id}/commit/abc123")


@pytest.fixture
def e2e():
    return study.load(E2E_CONFIG)


@pytest.fixture
def cell(tmp_path, e2e):
    """A trained and evaluated cell, as the train and evaluate rules leave it."""
    folder = tmp_path / "results" / "tiny" / "arith" / "recent-trace" / "seed0"
    (folder / "model").mkdir(parents=True)
    (folder / "model" / "config.json").write_text('{"model_type": "llama"}')
    (folder / "model" / "model.safetensors").write_bytes(b"weights")
    for index, benchmark in enumerate(e2e["benchmarks"]):
        (folder / "eval" / "final").mkdir(parents=True, exist_ok=True)
        (folder / "eval" / "final" / f"{benchmark}.json").write_text(json.dumps(
            {"benchmark": benchmark, "n": 8, "accuracy": 0.625 - 0.25 * index, "formatted": 1.0, "mean_length": 30.0}))
    rows = [{column: None for column in LOG_COLUMNS} | {"step": step, "reward": 0.25 * step, "kl": 0.001}
            for step in (1, 2, 3, 4)]
    write_train_log(str(folder / "train_log.csv"), rows)
    (folder / "provenance.json").write_text(json.dumps({"torch": "2.13.0", "trl": "1.16.0", "commit": "f00d"}))
    (folder / "resume").mkdir()
    (folder / "resume" / "fingerprint.json").write_text(json.dumps({"hash": "0123456789abcdef"}))
    return folder


def test_a_cell_is_pushed_with_its_card_in_one_commit_to_its_own_repo(e2e, cell, monkeypatch, tmp_path):
    RecordingApi.calls = []
    monkeypatch.setattr(huggingface_hub, "HfApi", RecordingApi)
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    settings = study.stage_settings(e2e, "publish", model="tiny", dataset="arith", variant="recent-trace")
    record = publish.run(settings, cell_dir=str(cell), seed=0, out=str(tmp_path / "published.json"))

    repo = "alice/grpo-lambda-tiny-arith-recent-trace-seed0"
    kinds = [call[0] for call in RecordingApi.calls]
    assert kinds == ["whoami", "create_repo", "create_commit"]
    assert RecordingApi.calls[1] == ("create_repo", repo, {"repo_type": "model", "private": True, "exist_ok": True})
    _, pushed_to, contents, _ = RecordingApi.calls[2]
    assert pushed_to == repo and sorted(contents) == ["README.md", "config.json", "model.safetensors"]
    assert contents["model.safetensors"] == b"weights"
    assert json.loads((tmp_path / "published.json").read_text()) == record
    assert record["commit"] == "abc123" and record["repo_id"] == repo

    card = contents["README.md"].decode()
    front, body = card.split("---\n")[1], card.split("---\n", 2)[2]
    assert yaml.safe_load(front)["tags"] == publish.TAGS and yaml.safe_load(front)["library_name"] == "transformers"
    assert "`tiny/arith/recent-trace/seed0`" in body
    assert "| arith-1 | 8 | 0.625 | 1.000 |" in body and "| arith-2 | 8 | 0.375 | 1.000 |" in body
    assert "Last training step 4: reward 1.000" in body
    settings_yaml = body.split("```yaml\n")[1].split("```")[0]
    assert yaml.safe_load(settings_yaml) == settings["train"]  # the cell's settings, exactly
    provenance = yaml.safe_load(body.split("```yaml\n")[2].split("```")[0])
    assert provenance["commit"] == "f00d" and provenance["fingerprint"] == "0123456789abcdef"


def test_no_token_stops_before_any_call(e2e, cell, monkeypatch, tmp_path):
    RecordingApi.calls = []
    monkeypatch.setattr(huggingface_hub, "HfApi", RecordingApi)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "no-hf-home"))
    settings = study.stage_settings(e2e, "publish", model="tiny", dataset="arith", variant="recent-trace")
    with pytest.raises(PermissionError, match="hf auth login"):
        publish.run(settings, cell_dir=str(cell), seed=0, out=str(tmp_path / "published.json"))
    assert RecordingApi.calls == [] and not (tmp_path / "published.json").exists()


def test_a_repo_template_must_give_every_cell_its_own_valid_repo(e2e):
    cells = study.rl_cells({**e2e, "seeds": [0, 1]})
    assert publish.template_problem("{user}/grpo-lambda-{model}-{dataset}-{variant}-seed{seed}", cells) is None
    assert "tiny/arith/grpo/seed0 and tiny/arith/grpo/seed1 in one repo" in publish.template_problem(
        "{user}/{model}-{dataset}-{variant}", cells)
    assert "names {step}" in publish.template_problem("{user}/{model}-{step}", cells)
    assert "which the hub refuses" in publish.template_problem("{user}/{model}--{dataset}-{variant}-{seed}", cells)
    raw = yaml.safe_load(E2E_CONFIG.read_text())
    raw["publish"] = {"repo_id": "me/one-repo-for-all"}
    with pytest.raises(study.ConfigError, match="publish.repo_id: .* in one repo"):
        study.validate(raw)


def test_a_study_that_never_publishes_is_not_refused_for_the_default_repo_name(e2e, cell, monkeypatch, tmp_path):
    # A variant name that makes the default repo id longer than the hub's 96 characters
    raw = yaml.safe_load(E2E_CONFIG.read_text())
    long = "recent-trace-" + "x" * 80
    raw["variants"][long] = raw["variants"].pop("recent-trace")
    assert all("recent-trace" not in spec.get("variants", []) for spec in raw["models"].values())
    config = study.validate(raw)  # no publish.repo_id: nothing to publish yet
    RecordingApi.calls = []
    monkeypatch.setattr(huggingface_hub, "HfApi", RecordingApi)
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    settings = study.stage_settings(config, "publish", model="tiny", dataset="arith", variant=long)
    with pytest.raises(ValueError, match="publish.repo_id: .* which the hub refuses"):  # publishing it is
        publish.run(settings, cell_dir=str(cell), seed=0, out=str(tmp_path / "published.json"))
    assert RecordingApi.calls == [] and not (tmp_path / "published.json").exists()


def test_publish_targets_every_cell_and_runs_online():
    """publish_all asks for every cell's published.json; each runs the publish stage with the hub online."""
    plan = subprocess.run(["snakemake", "-n", "-p", "publish_all", "--configfile", str(E2E_CONFIG)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env={**__import__("os").environ,
                                                                             "HF_TOKEN": "hf_test"})
    assert plan.returncode == 0, plan.stdout[-3000:] + plan.stderr[-3000:]
    cells = study.rl_cells(study.load(E2E_CONFIG))
    assert plan.stdout.count("env -u HF_HUB_OFFLINE -u HF_DATASETS_OFFLINE grpo-lambda publish ") == len(cells)
    for cell in cells:
        assert f"{cell['model']}/{cell['dataset']}/{cell['variant']}/seed{cell['seed']}/published.json" in plan.stdout
