"""Training survives SIGKILL: a rerun resumes from the newest checkpoint and ends at the same step."""

import csv
import json
import os
import signal
import subprocess
import time

import pytest
import yaml

from conftest import E2E_CONFIG
from grpo_lambda import config as study
from grpo_lambda import prepare, sft

STEPS = 8


@pytest.fixture(scope="module")
def setup(tmp_path_factory, tiny_model_dir):
    folder = tmp_path_factory.mktemp("resume")
    raw = yaml.safe_load(E2E_CONFIG.read_text())
    raw["rl"].update(max_steps=STEPS, save_steps=2)
    raw["evaluation"]["checkpoints"] = [3]
    config = study.validate(raw)
    data = folder / "arith.jsonl"
    prepare.run(study.stage_settings(config, "prepare", dataset="arith"), str(data))
    sft_dir = folder / "sft"
    sft.run(study.stage_settings(config, "sft", model="tiny", dataset="arith"), base=str(tiny_model_dir),
            data_path=str(data), out_dir=str(sft_dir))
    settings = study.stage_settings(config, "train", model="tiny", dataset="arith", variant="recent-trace")
    return folder, data, sft_dir, settings


def train_command(cli, setup, cell):
    folder, data, sft_dir, settings = setup
    return [cli, "train", "--settings", json.dumps(settings), "--base", str(sft_dir), "--data", str(data),
            "--cell", str(cell), "--seed", "0", "--threads", "1"]


def rewards(cell):
    with open(cell / "train_log.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert [int(row["step"]) for row in rows] == list(range(1, STEPS + 1))
    return [row["reward"] for row in rows]


def test_same_seed_gives_identical_rewards_and_a_killed_run_resumes(cli, setup):
    folder = setup[0]
    first, second, killed = folder / "first", folder / "second", folder / "killed"
    for cell in (first, second):
        subprocess.run(train_command(cli, setup, cell), check=True, capture_output=True, timeout=600)
    assert rewards(first) == rewards(second)
    assert (first / "checkpoints" / "step-3" / "config.json").exists()

    process = subprocess.Popen(train_command(cli, setup, killed), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 600
    halfway = killed / "resume" / f"checkpoint-{STEPS // 2}" / "trainer_state.json"
    while not halfway.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL, "the run ended before it could be killed halfway"
    assert not (killed / "model").exists()
    with open(killed / "train_log.csv") as handle:  # written live: the steps up to the kill are there
        logged = [int(row["step"]) for row in csv.DictReader(handle)]
    assert logged == list(range(1, len(logged) + 1)) and len(logged) >= STEPS // 2

    rerun = subprocess.run(train_command(cli, setup, killed), capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "resuming from" in rerun.stderr
    resumed_from = int(rerun.stderr.split("resuming from")[1].split("checkpoint-")[1].split()[0])
    assert STEPS // 2 <= resumed_from < STEPS
    assert len(rewards(killed)) == STEPS  # the log holds the steps before and after the kill
    assert (killed / "model" / "model.safetensors").exists()
    # The steps before the kill replay the uninterrupted run exactly.
    assert rewards(killed)[:resumed_from] == rewards(first)[:resumed_from]
