"""The user's own code a config names (``module:function``: an advantage estimator, a reward) is an input of the
cells that train with it: editing its module reruns exactly those cells, and the plan says which file changed.
Dry runs of the project's Snakefile over a study whose outputs are made up and marked current (snakemake --touch)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from conftest import ROOT, snakemake

ESTIMATOR = '''
import torch


def sign_advantage(batch):
    rewards = torch.nan_to_num(batch.rewards)
    groups = rewards.view(-1, batch.group_size)
    return torch.sign(groups - groups.mean(1, keepdim=True)).view(-1, 1) * batch.mask
'''
REWARD = '''
def short(completions, **kwargs):
    return [-0.001 * len(text) for text in completions]
'''
CELLS = [f"results/tiny/arith/{variant}/seed{seed}/done" for variant in ("grpo", "mine") for seed in (0, 1)]


def study(folder: Path) -> Path:
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config.update(results="results", seeds=[0, 1], benchmarks={"arith-1": config["benchmarks"]["arith-1"]},
                  variants={"grpo": {"objective": "grpo"},
                            "mine": {"objective": "grpo", "advantage_estimator": "my_advantages:sign_advantage"}})
    config["rl"]["rewards"] = [{"name": "evaluation", "weight": 1.0}, {"name": "my_rewards:short", "weight": 0.5}]
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def reruns(text: str) -> list[tuple[str, str, str]]:
    """(rule, variant, seed) of each job of a dry run."""
    jobs = re.findall(r"^(?:local)?rule (\w+):\n(?:    .*\n)*?    wildcards: .*?variant=([\w.-]+), seed=(\d+)", text, re.M)
    return sorted(jobs)


def test_editing_the_users_module_reruns_exactly_the_cells_that_train_with_it(tmp_path):
    (tmp_path / "my_advantages.py").write_text(ESTIMATOR)
    (tmp_path / "my_rewards.py").write_text(REWARD)
    config = study(tmp_path)
    planned = snakemake("-n", workdir=tmp_path, configfiles=[config], targets=CELLS).stdout
    for line in planned.splitlines():  # every output of the plan, made up: a folder for a model, else a file
        for path in line[len("    output: "):].split(", ") if line.startswith("    output: ") else []:
            path = tmp_path / path
            if path.name == "model" or path.parent.name == "models":
                path.mkdir(parents=True, exist_ok=True)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text("made up")
    snakemake("--touch", "--cores", "1", workdir=tmp_path, configfiles=[config], targets=CELLS)

    estimator = tmp_path / "my_advantages.py"
    written, touched = estimator.stat().st_mtime, (tmp_path / CELLS[0]).stat().st_mtime
    estimator.write_text(ESTIMATOR + "# edited\n")
    os.utime(estimator, (touched + 5, touched + 5))  # newer than the outputs, whatever the file system's resolution
    plan = subprocess.run([sys.executable, "-m", "grpo_lambda.cli", "plan", *CELLS, "--snakefile", str(ROOT / "Snakefile"),
                           "--directory", str(tmp_path), "--configfile", str(config)],
                          capture_output=True, text=True, timeout=300)
    assert plan.returncode == 0, plan.stderr[-3000:]
    lines = plan.stdout.splitlines()
    assert [line.split()[:2] for line in lines[2:lines.index("changed since the last run:")]] == [
        ["train", "2"], ["cell", "2"]]
    assert lines[-1] == ("  train: input newer than output (2 jobs: model tiny; dataset arith; variant mine; seed 0, 1): "
                         "my_advantages.py")

    # a reward every cell trains with (the estimator as old as the outputs again): every cell reruns
    os.utime(estimator, (written, written))
    reward = tmp_path / "my_rewards.py"
    reward.write_text(REWARD + "# edited\n")
    os.utime(reward, (touched + 5, touched + 5))
    dry = snakemake("-n", workdir=tmp_path, configfiles=[config], targets=CELLS).stdout
    assert reruns(dry) == sorted((rule, variant, seed) for rule in ("cell", "train") for variant in ("grpo", "mine")
                                 for seed in ("0", "1"))
    assert dry.count("reason: Updated input files: my_rewards.py") == 4
