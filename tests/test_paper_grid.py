"""The paper's grid plans as the paper lays it out, locally and through the SLURM profile."""

import collections
import importlib.util
import re
import subprocess
import sys

import pytest

from conftest import ROOT, paper_plan, paper_slurm_plan, snakemake
from grpo_lambda import config as study


def dry_run(*extra, env=None):
    """The paper grid's plan; ``extra`` follows config/paper.yaml (an overlay config first, then flags)."""
    result = snakemake(*extra, "-n", configfiles=["config/paper.yaml"], timeout=600, env=env)
    return result.stdout + result.stderr


def planned_outputs(log: str) -> dict[str, list[str]]:
    """rule -> the output paths of its planned jobs, read from a verbose dry run."""
    outputs, rule = collections.defaultdict(list), None
    for line in log.splitlines():
        match = re.match(r"^(?:local)?rule (\w+):", line)
        if match:
            rule = match.group(1)
        elif rule and line.strip().startswith("output:"):
            outputs[rule] += [path.strip() for path in line.split(":", 1)[1].split(",")]
    return outputs


@pytest.fixture(scope="module")
def plan():
    return planned_outputs(paper_plan())


def test_the_paper_grid_has_92_rl_cells_and_460_final_evaluations(plan):
    config = study.load(ROOT / "config" / "paper.yaml")
    assert len(study.rl_cells(config)) == 92
    trained = {path.rsplit("/", 1)[0] for path in plan["train"] if path.endswith("train_log.csv")}
    assert len(trained) == 92
    per_model = collections.Counter(path.split("/")[1] for path in trained)
    assert per_model == {"qwen-math-1.5b": 36, "r1-qwen-1.5b": 36, "r1-llama-3b": 12, "r1-qwen-7b": 8}
    final = [p for p in plan["evaluate"] if "/eval/final/" in p and p.endswith(".json")]
    assert len(final) == 460
    benchmarks = collections.Counter(p.rsplit("/", 1)[1] for p in final)
    assert benchmarks == {f"{b}.json": 92 for b in ("aime24", "amc", "math500", "minerva", "olympiadbench")}
    checkpoint = [p for p in plan["evaluate"] if "/eval/final/" not in p and p.endswith(".json")]
    assert len(checkpoint) == 3 * 460  # three checkpoints per cell (the 7B's at its own steps)
    assert any("/r1-qwen-7b/" in p and "/eval/3000/" in p for p in checkpoint)


def test_the_7b_runs_use_lora_and_their_own_steps():
    config = study.load(ROOT / "config" / "paper.yaml")
    settings = study.stage_settings(config, "train", model="r1-qwen-7b", dataset="gsm8k", variant="recent-trace-0.99")
    assert settings["rl"]["max_steps"] == 3500
    assert settings["rl"]["max_completion_length"] == 768
    assert settings["model"]["lora"]["r"] > 0
    assert settings["checkpoints"] == [1000, 2000, 3000]
    small = study.stage_settings(config, "train", model="qwen-math-1.5b", dataset="gsm8k", variant="grpo")
    assert small["rl"]["max_steps"] == 10000 and small["rl"]["beta"] == 0.04


@pytest.mark.skipif(importlib.util.find_spec("snakemake_executor_plugin_slurm") is None,
                    reason="the SLURM executor plugin is not installed")
def test_the_slurm_profile_plans_the_grid_with_gpus_and_accelerate():
    log = paper_slurm_plan()  # the profile prints each job's shell command
    train_commands = [line for line in log.splitlines() if " train --settings" in line]
    assert len(train_commands) == 92
    assert all("accelerate launch" in line and "--num_processes 4" in line for line in train_commands)
    assert all("envs/accelerate/zero2.yaml" in line for line in train_commands)
    evaluate_commands = [line for line in log.splitlines() if " evaluate --settings" in line]
    assert evaluate_commands and not any("accelerate launch" in line for line in evaluate_commands)


def test_every_rule_runs_in_the_one_documented_environment():
    """No rule names a conda env: envs/requirements-gpu.txt is the cluster's one environment, and a
    `conda:` file that Snakemake's conda folder cannot build breaks `--use-conda` for the whole grid."""
    rule_files = [ROOT / "Snakefile", *sorted((ROOT / "workflow" / "rules").glob("*.smk"))]
    with_conda = [path.name for path in rule_files if re.search(r"^\s+conda:", path.read_text(), re.M)]
    assert with_conda == []


def test_the_paper_grid_trains_one_sft_model_per_model_and_training_set(plan):
    """config/paper.yaml: self-distillation, so each RL cell starts from its own training set's SFT model."""
    models = set(plan["sft"])
    assert len(models) == 16 and len(plan["prepare_sft"]) == 2 * 16  # the set and its counts
    assert not plan["sft_shared"] and all(re.fullmatch(r"results/[^/]+/[^/]+/sft/model", path) for path in models)


def test_the_open_r1_overlay_trains_one_sft_model_per_model_for_all_its_training_sets():
    log = dry_run("config/sft/open-r1.yaml", "--printshellcmds")
    plan = planned_outputs(log)
    assert not plan["sft"] and not plan["prepare_sft"]
    assert sorted(plan["sft_shared"]) == [f"results/{model}/sft/model" for model in
                                          ("qwen-math-1.5b", "r1-llama-3b", "r1-qwen-1.5b", "r1-qwen-7b")]
    assert plan["prepare_sft_set"] == ["results/data/sft/bespoke-stratos-17k.jsonl"]
    starts = re.findall(r"grpo-lambda train .*?--base '?(\S+?)'? --data '?results/data/(\w+)\.jsonl", log)
    assert len(starts) == 92
    assert {(base, data) for base, data in starts if "r1-qwen-7b" in base} == {
        ("results/r1-qwen-7b/sft/model", dataset) for dataset in ("gsm8k", "math12k", "mathrl16k", "orz57k")}
    assert all(re.fullmatch(r"results/[^/]+/sft/model", base) for base, _ in starts)
    assert re.search(r"grpo-lambda sft .*--data '?results/data/sft/bespoke-stratos-17k\.jsonl", log)


# Each overlay of the paper grid: what a planned train (or sft) job's settings must then hold.
OVERLAYS = {
    "trace/relative.yaml": ('"form": "relative"', "train"),
    "trace/released.yaml": ('"trace_length": 3072', "train"),
    "trace/released-batch-max.yaml": ('"trace_length": "batch_max"', "train"),
    "trace/completion-length.yaml": ('"trace_length": null', "train"),
    "trace/per-sequence.yaml": ('"trace_length": "per_sequence"', "train"),
    "optim/open-r1-recipe.yaml": ('"lr_scheduler_type": "cosine_with_min_lr"', "train"),
    "sft/open-r1-schedule.yaml": ('"warmup_steps": 0.1', "sft"),
    "optim/released-scripts.yaml": ('"learning_rate": 3e-06', "train"),
    "optim/trl-defaults.yaml": ('"lr_scheduler_type": "linear"', "train"),
    "sft/think-answer.yaml": ('"format": "think_answer"', "sft"),
}


@pytest.mark.slow  # a Snakemake dry run of the paper grid per overlay (42-59 s each on a shared, loaded 2-core machine)
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_grid_plans_under_each_overlay_with_its_settings(overlay):
    """92 RL cells and their SFT models under every overlay of config/trace/, config/optim/ and the tag SFT; each
    planned job of the stage the overlay changes carries the overlay's setting."""
    needle, stage = OVERLAYS[overlay]
    log = dry_run(f"config/{overlay}", "--printshellcmds")
    commands = [line for line in log.splitlines() if f"grpo-lambda {stage} --settings" in line]
    trained = [line for line in log.splitlines() if "grpo-lambda train --settings" in line]
    assert len(trained) == 92
    if stage == "train":  # the GRPO cells have no trace, so only GRPO-λ's must carry a trace setting
        commands = [line for line in commands if "grpo_lambda" in line or not needle.startswith('"form"')]
    assert commands and all(needle in line for line in commands), (overlay, commands[:1])


# The seeds' other papers in their own settings, and §4.2's run without SFT: config -> (RL cells, a setting every
# planned train job carries, a setting every planned evaluate job carries).
OWN_CONFIGS = {
    ("config/strace-paper.yaml",): (12, '"strace_quantile": 0.8', '"samples": 16'),
    ("config/oar-paper.yaml",): (3, '"loss_type": "grpo"', '"max_new_tokens": 3000'),  # and oar_pfinal below
    ("config/paper.yaml", "config/sft/think-answer.yaml", "config/sft/no-sft.yaml"): (
        36, '{"name": "think_format", "weight": 1.0}', '"max_new_tokens": 3000'),  # §4.2's model alone
}


@pytest.mark.parametrize("configs", OWN_CONFIGS, ids=[c[-1] for c in OWN_CONFIGS])
def test_the_seeds_papers_and_the_no_sft_run_plan_with_their_settings(configs):
    cells, train_needle, evaluate_needle = OWN_CONFIGS[configs]
    result = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--printshellcmds", "--configfile", *configs],
                            capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:] + result.stdout[-3000:]
    lines = (result.stdout + result.stderr).splitlines()
    trained = [line for line in lines if "grpo-lambda train --settings" in line]
    evaluated = [line for line in lines if "grpo-lambda evaluate --settings" in line]
    assert len(trained) == cells
    if configs[0] == "config/strace-paper.yaml":  # one length for Qwen3's thinking, the 8B row's included
        assert all('"max_completion_length": 8192' in line for line in trained), trained[:1]
        assert sum('"per_device_train_batch_size": 1, ' in line and '"steps_per_generation": 64' in line
                   for line in trained) == 4
        assert all('"max_new_tokens": 32768' in line for line in evaluated), evaluated[:1]
        # their masking on the S-trace cells only
        trained = [line for line in trained if '"objective": "strace"' in line]
        assert len(trained) == 3
    assert all(train_needle in line for line in trained), trained[:1]
    assert evaluated and all(evaluate_needle in line for line in evaluated), evaluated[:1]
    if configs[0] == "config/oar-paper.yaml":  # the authors' P_final on both OAR cells; their loss has no KL term
        assert sum('"oar_pfinal": "reference"' in line for line in trained) == 2
        assert all('"beta": 0.0' in line and '"steps_per_generation": 1' in line for line in trained)
    if configs[-1] == "config/sft/no-sft.yaml":
        sft = [line for line in lines if "grpo-lambda sft --settings" in line]
        assert sft and all('"num_train_epochs": 0' in line for line in sft)
        assert all('"source": "Qwen/Qwen2.5-Math-1.5B-Instruct"' in line for line in trained + sft)
