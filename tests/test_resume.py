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


@pytest.mark.slow
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


# ---- settings fingerprint: other settings never resume a cell's state ----------------------------

def with_lambda(settings, lam):
    changed = json.loads(json.dumps(settings))
    changed["variant"]["lam"] = lam
    return changed


def train_in_process(setup, cell, settings):
    from grpo_lambda import train

    folder, data, sft_dir, _ = setup
    train.run(settings, base=str(sft_dir), data_path=str(data), cell_dir=str(cell), seed=0)
    with open(cell / "train_log.csv") as handle:
        log = [{k: v for k, v in row.items() if k != "step_time"} for row in csv.DictReader(handle)]
    assert [int(row["step"]) for row in log] == list(range(1, STEPS + 1))
    return log, (cell / "model" / "model.safetensors").read_bytes()


def final_step(cell):
    return json.loads((cell / "resume" / f"checkpoint-{STEPS}" / "trainer_state.json").read_text())["global_step"]


def length_reward(completions, **kwargs):
    # A reward that varies within every group, so that each step moves the weights and λ matters
    # (the tiny SFT model of this module boxes no answer yet: accuracy would be 0 throughout).
    return [len(completion) / 100 for completion in completions]


@pytest.mark.slow
def test_a_changed_lambda_never_resumes_the_old_state(setup, caplog, monkeypatch):
    import shutil

    from grpo_lambda.grading import reward

    monkeypatch.setitem(reward.REWARDS, "evaluation", length_reward)

    folder, _, _, settings = setup
    old, new = settings, with_lambda(settings, 0.5)
    cell, partial, fresh = folder / "fp-cell", folder / "fp-partial", folder / "fp-fresh"
    old_log, old_model = train_in_process(setup, cell, old)
    shutil.copytree(cell, partial)

    # Same settings on a finished cell: published as it is, not trained a step further.
    (cell / "model").rename(folder / "fp-dropped-model")
    (cell / "train_log.csv").unlink()
    with caplog.at_level("INFO"):
        assert train_in_process(setup, cell, old) == (old_log, old_model)
    assert "already trained to step" in caplog.text and final_step(cell) == STEPS
    assert not list(cell.glob("superseded-*"))

    new_log, new_model = train_in_process(setup, fresh, new)
    assert new_model != old_model

    # λ changed after a full run: the old state is kept aside and the cell is trained afresh.
    assert train_in_process(setup, cell, new) == (new_log, new_model)
    [aside] = cell.glob("superseded-*")
    assert (aside / "model" / "model.safetensors").read_bytes() == old_model
    assert (aside / "train_log.csv").exists() and (aside / "checkpoints" / "step-3").exists()
    assert (aside / "resume" / "fingerprint.json").exists()

    # λ changed after a partial run (killed after step 6): fresh too, not steps 1-6 of the old λ.
    shutil.rmtree(partial / "resume" / f"checkpoint-{STEPS}")
    shutil.rmtree(partial / "model")
    (partial / "train_log.csv").unlink()
    assert train_in_process(setup, partial, new) == (new_log, new_model)
    assert len(list(partial.glob("superseded-*"))) == 1

    # The same settings resume: a partial state of the new λ ends where a fresh run does.
    shutil.rmtree(partial / "resume" / f"checkpoint-{STEPS}")
    shutil.rmtree(partial / "model")
    with caplog.at_level("INFO"):
        caplog.clear()
        resumed_log, _ = train_in_process(setup, partial, new)
    assert "resuming from" in caplog.text and len(list(partial.glob("superseded-*"))) == 1
    assert [row["reward"] for row in resumed_log[:6]] == [row["reward"] for row in new_log[:6]]
