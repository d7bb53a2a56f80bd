"""The README's cluster commands, as written, plan without error (``snakemake -n``)."""

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = ("## Before your first cluster run", "## Paper scale")
CLUSTER_ENV = {"GRPO_LAMBDA_PARTITION": "gpu", "GRPO_LAMBDA_ACCOUNT": "myproject"}


def section(text: str, title: str) -> str:
    start = text.index(title)
    end = text.find("\n## ", start + len(title))
    return text[start:end if end >= 0 else None]


def snakemake_commands(text: str) -> list[str]:
    """Every `snakemake ...` line of the bash blocks, continuation lines joined, comments dropped."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #", 1)[0].strip()
            if line.startswith("snakemake "):
                commands.append(line)
    return commands


README = (ROOT / "README.md").read_text(encoding="utf-8")
COMMANDS = [command for title in SECTIONS for command in snakemake_commands(section(README, title))]


def test_the_cluster_sections_hold_slurm_commands():
    assert len([c for c in COMMANDS if "workflow/profiles/slurm" in c]) >= 3
    # a target after --configfile would be read as a config file
    for command in COMMANDS:
        words = shlex.split(command)
        if "--configfile" in words:
            after = words[words.index("--configfile") + 2:]
            assert not after or after[0].startswith("-"), command


@pytest.mark.parametrize("command", COMMANDS)
def test_readme_cluster_command_dry_runs(command, tmp_path):
    words = shlex.split(command)
    if "-n" not in words:
        words.insert(1, "-n")
    env = {**os.environ, **CLUSTER_ENV, "HF_HOME": str(tmp_path / "hf")}
    done = subprocess.run(words, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    assert "This was a dry-run" in done.stdout + done.stderr


def test_unset_partition_stops_with_a_message_naming_it():
    env = {key: value for key, value in os.environ.items() if key not in CLUSTER_ENV}
    done = subprocess.run(["snakemake", "-n", "--profile", "workflow/profiles/slurm", "--configfile",
                           "config/paper.yaml"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "GRPO_LAMBDA_PARTITION is not set" in done.stdout + done.stderr
