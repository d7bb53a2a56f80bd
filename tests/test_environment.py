"""A config the environment cannot serve is refused before any job, naming the fix: trackers that are not
installed where the jobs run, hub pushes outside the publish rule, vLLM when jobs start."""

import importlib.util
import os
import subprocess
import sys

import pytest
import yaml

from grpo_lambda import config as study
from grpo_lambda import environment

from conftest import E2E_CONFIG, run_main


@pytest.fixture
def raw():
    return yaml.safe_load(E2E_CONFIG.read_text())


def write(tmp_path, config):
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.skipif(importlib.util.find_spec("wandb") is not None, reason="wandb is installed here (setup extra)")
def test_validate_refuses_wandb_where_it_is_not_installed_naming_the_extra(raw, tmp_path):
    raw["rl"]["report_to"] = ["tensorboard", "wandb"]
    done = run_main("validate", "--configfile", write(tmp_path, raw))
    assert done.returncode == 2
    assert "rl.report_to names wandb, which is not installed in this environment" in done.stderr
    assert "scripts/setup.sh cpu wandb" in done.stderr and "Traceback" not in done.stderr
    # Snakemake validates the same way, so a planned run stops before any job
    plan = subprocess.run(["snakemake", "-n", "--configfile", str(write(tmp_path, raw))], cwd=E2E_CONFIG.parents[2],
                          capture_output=True, text=True, timeout=300)
    assert plan.returncode != 0 and "rl.report_to names wandb" in plan.stdout + plan.stderr


def test_a_tracker_found_is_accepted_and_one_missing_is_refused_per_model(raw, monkeypatch):
    installed = {"wandb": True}
    monkeypatch.setattr(environment, "find_modules", lambda modules, python=None: {
        name: installed.get(name, name in ("tensorboard", "tensorboardX")) for name in modules})
    raw["rl"]["report_to"] = "wandb"
    study.validate(raw)
    installed["wandb"] = False
    with pytest.raises(study.ConfigError, match=r"rl.report_to names wandb, which is not installed"):
        study.validate(raw)
    raw["rl"]["report_to"] = "none"
    raw["models"]["tiny"]["sft"] = {"report_to": ["mlflow"]}
    with pytest.raises(study.ConfigError, match=r"models.tiny.sft.report_to names mlflow.*install mlflow"):
        study.validate(raw)


def test_every_tracker_the_schema_allows_has_its_modules():
    allowed = set(study.load_schema()["$defs"]["tracker"]["enum"])
    assert allowed == set(environment.TRACKER_MODULES) | {"none", "all"}


def test_the_jobs_environment_is_the_one_of_the_grpo_lambda_first_on_path(tmp_path, monkeypatch):
    """On a cluster Snakemake runs from .venv and the jobs from the GPU environment first on PATH: the modules
    are looked for there."""
    other = tmp_path / "other-env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(other)], check=True, timeout=120)
    script = other / "bin" / "grpo-lambda"
    script.write_text(f"#!{other / 'bin' / 'python'}\nprint('stand-in')\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{other / 'bin'}{os.pathsep}{os.environ['PATH']}")
    assert environment.job_python() == str(other / "bin" / "python")
    # yaml is in this environment, not in the bare one the jobs would run
    assert environment.find_modules(["json", "yaml"]) == {"json": True, "yaml": False}
    problems = environment.problems({"models": {"m": {"rl": {"report_to": "tensorboard"}}}})
    assert problems and f"the jobs' environment ({other / 'bin' / 'python'}" in problems[0]


def test_vllm_and_deepspeed_are_needed_only_when_jobs_start(raw, monkeypatch):
    monkeypatch.setattr(environment, "find_modules", lambda modules, python=None: {name: False for name in modules})
    raw["evaluation"]["backend"] = "vllm"
    raw["models"]["tiny"]["distributed"] = "zero3"
    raw["rl"]["use_vllm"] = True
    raw["models"]["tiny-shared"]["rl"] = {"use_vllm": False}  # a model's own block wins
    config = study.validate(raw)  # a dry run plans the paper grid on a machine without vLLM
    with pytest.raises(study.ConfigError, match=r"evaluation.backend: vllm needs vllm.*requirements-gpu.txt"):
        study.check_environment(config, jobs=True)
    needs = environment._backends(config)
    assert needs["vllm"] == ["evaluation.backend: vllm", "models.tiny's rl.use_vllm",
                             "models.tiny-distill's rl.use_vllm"]
    assert any("models.tiny.distributed: zero3 needs deepspeed" in problem
               for problem in environment.problems(config, jobs=True))


def test_wandb_needs_a_key_or_offline_mode_when_jobs_start(raw, monkeypatch, tmp_path):
    monkeypatch.setattr(environment, "find_modules", lambda modules, python=None: {name: True for name in modules})
    for name in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))
    raw["rl"]["report_to"] = "wandb"
    config = study.validate(raw)
    with pytest.raises(study.ConfigError, match="no W&B key is set: run `wandb login`"):
        study.check_environment(config, jobs=True)
    (tmp_path / "netrc").write_text("machine api.wandb.ai\n  login user\n  password abc\n")
    study.check_environment(config, jobs=True)
    (tmp_path / "netrc").unlink()
    monkeypatch.setenv("WANDB_MODE", "offline")
    study.check_environment(config, jobs=True)


@pytest.mark.parametrize("key", ["push_to_hub", "hub_model_id"])
def test_a_hub_push_inside_rl_trl_is_refused_naming_the_publish_rule(raw, key):
    raw["rl"]["trl"] = {key: True if key == "push_to_hub" else "me/x"}
    with pytest.raises(study.ConfigError, match=rf"rl.trl.{key}: jobs run offline .* publish rule .* publish_all"):
        study.validate(raw)
    raw["rl"]["trl"] = {"push_to_hub": False}
    study.validate(raw)


def test_the_wandb_names_are_the_study_the_variant_and_the_cell(tmp_path):
    settings = {"model": {"name": "tiny"}, "dataset": "arith", "variant_name": "grpo"}
    names = environment.wandb_names(settings, str(tmp_path / "results" / "compare" / "tiny" / "arith" / "grpo" / "seed3"))
    assert names == {"WANDB_PROJECT": "grpo-lambda-compare", "WANDB_RUN_GROUP": "tiny/arith/grpo",
                     "WANDB_JOB_TYPE": "train"}
