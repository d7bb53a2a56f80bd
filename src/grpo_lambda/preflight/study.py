"""The study check: a study run for one seed, stage by stage through the CLI as the workflow's rules run them,
its accuracies read back and judged (RL beats SFT; on the small built-in study of --cpu, every RL step logged
with a finite loss), and the rule that a study which learned nothing is a no-go (``nothing_learned``)."""

from __future__ import annotations

import copy
import json
import sys
import time
from pathlib import Path

from grpo_lambda.preflight.context import Fail, Skip, run_logged

# The study --cpu runs unless --study-config names one: config/config.yaml made small enough to run every stage
# in a few minutes on 2 cores (the default's 940-step SFT alone takes 15 on them).
SMALL_STUDY = {"models": {"tiny": {"tiny": {"num_hidden_layers": 2, "intermediate_size": 256}}},
               "datasets": {"arith": {"n": 128, "levels": [1], "carry_error_rate": 0.5}},
               "sft": {"num_train_epochs": 30, "learning_rate": 3.0e-3, "max_length": 96},
               "rl": {"max_steps": 2, "per_device_train_batch_size": 16, "max_completion_length": 48, "save_steps": 5,
                      "log_completions": None},
               "evaluation": {"max_new_tokens": 48}}
SMALL_BENCHMARKS = 2
SMALL_BENCHMARK_ROWS = 20


def check_study(context):
    from grpo_lambda import config as study

    config = study.load(context.study_config)
    if context.small_study:
        config = small_study(config)
    config.update(seeds=[0], results=str(context.work / "study"))
    # one torch thread a stage on a CPU: the stages run one after another, and two threads on two busy cores spin
    # (measured here: the small study's SFT took 97 s of processor time for half its steps with 2, 22 s with 1)
    commands = study_commands(config, threads=1 if context.small_study else None)
    times = {}
    for index, (label, command) in enumerate(commands, 1):
        log = context.work / "study" / "logs" / f"{label.replace('/', '_')}.log"
        context.progress(f"stage {index}/{len(commands)} {label} (log: {log})")
        start = time.perf_counter()
        run_logged(command, log, timeout=1800, progress=context.progress)
        times[label] = round(time.perf_counter() - start, 1)
    context.study_results = Path(config["results"])
    accuracy = study_accuracies(config)
    logs = study_train_logs(config)
    words = (("the small built-in study (--cpu): " if context.small_study else "")
             + f"{len(commands)} stages in {sum(times.values()):.0f} s; accuracy "
             + ", ".join(f"{arm} {value:.3f}" for arm, value in accuracy.items()))
    details = {"seconds": times, "accuracy": accuracy, "results": config["results"], "small": context.small_study,
               "train_logs": logs}
    steps = config["rl"]["max_steps"]
    short = [f"{cell} ({logged} of {steps} steps{'' if finite else ', a loss not finite'})"
             for cell, (logged, finite, _) in logs.items() if logged != steps or not finite]
    if short and context.small_study:  # its settings log every step
        raise Fail(words + f"; RL cells without their steps: {', '.join(short)}")
    nothing = nothing_learned(accuracy, logs)
    if nothing:
        raise Fail(words + f"; {nothing}")
    if context.small_study:  # 2 RL steps judge no accuracy: every step must have run, and something been learned
        flat = [share for _, _, share in logs.values() if share is not None]
        return (words + f"; every RL cell logged its {steps} steps with finite losses"
                + (f" (groups with equal rewards: {sum(flat) / len(flat):.0%})" if flat else "")
                + "; whether RL beats SFT is a full study's question (--study-config)"), details
    behind = [arm for arm, value in accuracy.items() if arm != "sft" and not value > accuracy["sft"]]
    if behind:
        raise Fail(words + f"; RL did not beat SFT: {', '.join(behind)}")
    return words, details


def nothing_learned(accuracy: dict, train_logs: dict) -> str | None:
    """Why a study learned nothing, or None: every arm's accuracy (SFT's and each variant's, ``study_accuracies``)
    is 0 and every RL step of every cell had all of its groups' rewards equal (``study_train_logs``: TRL's
    frac_reward_zero_std 1 throughout), so no advantage was ever nonzero. Stages that run and learn nothing check
    nothing a grid needs."""
    flat = [share for _, _, share in train_logs.values()]
    if not accuracy or any(value > 0 for value in accuracy.values()):
        return None
    if not flat or any(share is None or share < 1.0 for share in flat):
        return None
    return (f"nothing was learned: accuracy 0 for every arm ({', '.join(accuracy)}) and every group of every RL step "
            f"got equal rewards ({len(flat)} cell(s), frac_reward_zero_std 1 throughout), so every advantage was 0: "
            "the SFT model never reaches a rewarded answer (check the model's prompt.txt, the answers and the reward)")


def small_study(config: dict) -> dict:
    """A study made small (SMALL_STUDY over it, its first SMALL_BENCHMARKS benchmarks of SMALL_BENCHMARK_ROWS
    problems each) for the study check of --cpu."""
    from grpo_lambda import config as study

    small = study.merge(copy.deepcopy(config), {key: value for key, value in SMALL_STUDY.items() if key != "datasets"})
    for name, spec in SMALL_STUDY["datasets"].items():
        if name in small["datasets"]:
            small["datasets"][name] = {**small["datasets"][name], **spec}
    small["benchmarks"] = {name: {**spec, "n": min(spec.get("n", SMALL_BENCHMARK_ROWS), SMALL_BENCHMARK_ROWS)}
                           if spec.get("source") == "synthetic" else spec
                           for name, spec in list(config["benchmarks"].items())[:SMALL_BENCHMARKS]}
    return study.validate(small, source="the small built-in study")


def study_train_logs(config: dict) -> dict:
    """Each RL cell's logged steps, as (steps logged, whether every loss is finite, the mean share of groups whose
    rewards were all equal: frac_reward_zero_std)."""
    import math

    from grpo_lambda import config as study
    from grpo_lambda import layout
    from grpo_lambda.status import read_train_log

    found = {}
    for cell in study.rl_cells(config):
        name = layout.cell(cell["model"], cell["dataset"], cell["variant"], cell["seed"])
        rows = read_train_log(Path(config["results"]) / layout.train_log(cell["model"], cell["dataset"],
                                                                          cell["variant"], cell["seed"]))
        flat = [row["frac_reward_zero_std"] for row in rows if row.get("frac_reward_zero_std") is not None]
        found[name] = (len(rows), all(isinstance(row.get("loss"), float) and math.isfinite(row["loss"]) for row in rows),
                       sum(flat) / len(flat) if flat else None)
    return found


def study_commands(config: dict, threads: int | None = None) -> list[tuple[str, list[str]]]:
    """The default study's stages for its seeds as the workflow's rules run them (their --settings JSON),
    in an order that respects the DAG; ``threads``: the torch threads of the stages that train or evaluate (the
    rules' --threads; None: torch's default). For configs of its kind: tiny or local models, SFT on the training
    sets' solutions, final evaluations only."""
    from grpo_lambda import config as study
    from grpo_lambda import layout

    results = config["results"]
    cli = [sys.executable, "-m", "grpo_lambda.cli"]

    def settings(stage, **cell):
        return json.dumps(study.stage_settings(config, stage, **cell), sort_keys=True)

    benches = [f"{results}/bench/{benchmark}.jsonl" for benchmark in config["benchmarks"]]
    threaded = ["--threads", str(threads)] if threads else []
    commands = []
    for model, spec in config["models"].items():
        if study.sft_uses_self_distillation(config, model) or study.sft_is_shared(config, model):
            raise Skip(f"models.{model}: the study check runs configs whose SFT trains on the training set's solutions")
        if spec["source"] == "tiny":
            commands.append((f"build_tiny/{model}", [*cli, "build-tiny", "--settings", settings("build_tiny", model=model),
                                                     "--out", f"{results}/models/{model}"]))
    for group, key in (("datasets", "dataset"), ("benchmarks", "benchmark")):
        for name in config[group]:
            out = f"{results}/data/{name}.jsonl" if key == "dataset" else f"{results}/bench/{name}.jsonl"
            commands.append((f"prepare/{name}", [*cli, "prepare", "--settings", settings("prepare", **{key: name}),
                                                 "--out", out]))
    for model, spec in config["models"].items():
        base = f"{results}/models/{model}" if spec["source"] == "tiny" else spec["source"]
        for dataset in study.model_datasets(config, model):
            sft_model = f"{results}/{study.sft_folder(config, model, dataset)}/model"
            commands.append((f"sft/{model}/{dataset}", [
                *cli, "sft", "--settings", settings("sft", model=model, dataset=dataset), "--base", base,
                "--data", f"{results}/data/{dataset}.jsonl", "--out", sft_model, *threaded]))
            commands.append((f"evaluate/{model}/{dataset}/sft", [
                *cli, "evaluate", "--settings", settings("evaluate", model=model, dataset=dataset, variant="sft"),
                "--checkpoint", sft_model, "--bench", *benches,
                "--out-dir", f"{results}/{layout.sft(model, dataset)}/eval/final", *threaded]))
    for cell in study.rl_cells(config):
        model, dataset, variant, seed = cell["model"], cell["dataset"], cell["variant"], str(cell["seed"])
        folder = f"{results}/{layout.cell(model, dataset, variant, seed)}"
        commands.append((f"train/{layout.cell(model, dataset, variant, seed)}", [*train_command(
            config, model, dataset, variant, seed, f"{results}/{study.sft_folder(config, model, dataset)}/model"),
            *threaded]))
        commands.append((f"evaluate/{layout.cell(model, dataset, variant, seed)}", [
            *cli, "evaluate", "--settings", settings("evaluate", model=model, dataset=dataset, variant=variant),
            "--checkpoint", f"{folder}/model", "--bench", *benches, "--out-dir", f"{folder}/eval/final",
            "--seed", seed, "--step", "final", *threaded]))
    whole = json.dumps(config, sort_keys=True)
    commands.append(("aggregate", [*cli, "aggregate", "--settings", whole, "--results", results,
                                   "--out", f"{results}/tables"]))
    commands.append(("figures", [*cli, "figures", "--settings", whole, "--tables", f"{results}/tables",
                                 "--out", f"{results}/figures"]))
    return commands


def train_command(config: dict, model: str, dataset: str, variant: str, seed, base: str) -> list[str]:
    from grpo_lambda import config as study
    from grpo_lambda import layout

    settings = study.stage_settings(config, "train", model=model, dataset=dataset, variant=variant)
    return [sys.executable, "-m", "grpo_lambda.cli", "train", "--settings", json.dumps(settings, sort_keys=True),
            "--base", base, "--data", f"{config['results']}/data/{dataset}.jsonl",
            "--cell", f"{config['results']}/{layout.cell(model, dataset, variant, seed)}", "--seed", str(seed)]


def study_accuracies(config: dict) -> dict:
    """Mean accuracy over the benchmarks (and cells) of the SFT models and of each variant's final models."""
    from grpo_lambda import config as study
    from grpo_lambda import layout

    results = Path(config["results"])

    def mean(paths):
        values = [json.loads((results / path).read_text())["accuracy"] for path in paths]
        return sum(values) / len(values)

    arms = {"sft": mean([layout.sft_evaluation(model, dataset, benchmark, "json")
                         for model in config["models"] for dataset in study.model_datasets(config, model)
                         for benchmark in config["benchmarks"]])}
    for variant in config["variants"]:
        arms[variant] = mean([layout.evaluation(cell["model"], cell["dataset"], variant, cell["seed"], "final",
                                                benchmark, "json")
                              for cell in study.rl_cells(config) if cell["variant"] == variant
                              for benchmark in config["benchmarks"]])
    return arms
