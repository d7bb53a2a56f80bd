"""The vllm-colocate check: two steps of a train cell that generates with TRL's colocated vLLM."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

from grpo_lambda.preflight.context import Fail, Skip, run_logged
from grpo_lambda.preflight.study import study_commands, train_command


def check_vllm_colocate(context):
    """Two steps of a train cell that generates with TRL's colocated vLLM, whose weights TRL syncs from the
    trained model before each generation."""
    try:
        importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        raise Skip("vLLM is not installed (envs/requirements-gpu.txt installs it)") from None
    if not context.gpus:
        raise Skip("no GPU: vLLM's CPU build cannot take TRL's weight sync (tests/test_vllm.py)")
    from grpo_lambda import config as study
    from grpo_lambda import layout

    config = study.load(context.study_config)
    model, dataset = next(iter(config["models"])), next(iter(config["datasets"]))
    variant = next((name for name, spec in config["variants"].items() if spec.get("objective") == "grpo_lambda"),
                   next(iter(config["variants"])))
    config.update(seeds=[0], results=str(context.work / "vllm"))
    config["rl"].update(use_vllm=True, vllm_mode="colocate", vllm_gpu_memory_utilization=0.3, max_steps=2)
    results = config["results"]
    sft = context.study_results / study.sft_folder(config, model, dataset) / "model" if context.study_results else None
    commands = []
    if sft is not None and sft.is_dir():  # from the study's SFT model: rewards differ, so the weights move
        base = str(sft)
    else:  # from the untrained tiny model: the steps run, though its rewards may all be 0
        base = f"{results}/models/{model}"
        commands = [command for label, command in study_commands(config) if label == f"build_tiny/{model}"]
    commands += [command for label, command in study_commands(config) if label == f"prepare/{dataset}"]
    commands.append(train_command(config, model, dataset, variant, 0, base))
    for index, command in enumerate(commands):
        run_logged(command, context.work / "vllm" / f"stage{index}.log", timeout=900)
    import pandas

    log = pandas.read_csv(Path(config["results"]) / layout.train_log(model, dataset, variant, 0))
    if len(log) < 2:
        raise Fail(f"the cell logged {len(log)} steps, not 2 ({context.work / 'vllm'})")
    return (f"2 steps of {variant} with colocated vLLM from {base}; "
            f"reward {log['reward'].iloc[-1]:.3f}"), {"rows": log.to_dict("records")}
