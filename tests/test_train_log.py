"""The live train_log.csv, the trackers and the TRL defaults of the RL stage."""

import csv
import json
import subprocess
import time
from types import SimpleNamespace

import pytest
import yaml

from conftest import E2E_CONFIG
from grpo_lambda import config as study
from grpo_lambda import prepare, sft
from grpo_lambda.train import WriteTrainLog, build_config


def _entry(step):
    return {"step": step, "loss": 0.1 * step, "reward": 0.01 * step, "step_time": 1.5}


def _rows(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_every_logged_step_is_on_disk_at_once(tmp_path):
    path = tmp_path / "train_log.csv"
    state = SimpleNamespace(log_history=[], is_world_process_zero=True)
    callback = WriteTrainLog(path)
    callback.on_train_begin(None, state, None)
    assert _rows(path) == []
    for step in range(1, 4):
        state.log_history.append(_entry(step))
        callback.on_log(None, state, None, logs=_entry(step))
        assert [int(row["step"]) for row in _rows(path)] == list(range(1, step + 1))
    assert float(_rows(path)[-1]["reward"]) == pytest.approx(0.03)
    assert not list(tmp_path.glob("*.tmp*")) and len(list(tmp_path.iterdir())) == 1  # written by rename


def test_a_resume_drops_the_rows_after_its_checkpoint_and_continues_the_file(tmp_path):
    path = tmp_path / "train_log.csv"
    before_kill = SimpleNamespace(log_history=[_entry(step) for step in range(1, 8)], is_world_process_zero=True)
    WriteTrainLog(path).on_log(None, before_kill, None)
    # the checkpoint holds steps 1..4; steps 5..7 were logged, then the job was killed
    resumed = SimpleNamespace(log_history=[_entry(step) for step in range(1, 5)], is_world_process_zero=True)
    callback = WriteTrainLog(path)
    callback.on_train_begin(None, resumed, None)
    assert [int(row["step"]) for row in _rows(path)] == [1, 2, 3, 4]
    for step in (5, 6):
        resumed.log_history.append(_entry(step))
        callback.on_log(None, resumed, None)
    assert [int(row["step"]) for row in _rows(path)] == [1, 2, 3, 4, 5, 6]


def test_only_the_main_process_writes(tmp_path):
    state = SimpleNamespace(log_history=[_entry(1)], is_world_process_zero=False)
    WriteTrainLog(tmp_path / "train_log.csv").on_log(None, state, None)
    assert not (tmp_path / "train_log.csv").exists()


@pytest.fixture(scope="module")
def config():
    return study.validate(yaml.safe_load(E2E_CONFIG.read_text()))


def test_build_config_defaults_yield_to_rl_trl(config, tmp_path):
    settings = study.stage_settings(config, "train", model="tiny", dataset="arith", variant="grpo")
    default = build_config(settings, output_dir=str(tmp_path), seed=3)
    assert default.run_name == "tiny/arith/grpo/seed3"
    assert default.logging_steps == 1 and default.save_total_limit == 2
    assert default.report_to == ["tensorboard"]  # tensorboardX is in requirements-cpu.txt
    settings["rl"]["trl"] = {"logging_steps": 5, "save_total_limit": 4, "report_to": "none", "run_name": "mine"}
    overridden = build_config(settings, output_dir=str(tmp_path), seed=3)
    assert (overridden.logging_steps, overridden.save_total_limit, overridden.report_to, overridden.run_name) == (
        5, 4, [], "mine")
    settings["rl"]["trl"] = {}
    settings["rl"]["report_to"] = ["tensorboard", "trackio"]
    assert build_config(settings, output_dir=str(tmp_path), seed=3).report_to == ["tensorboard", "trackio"]


def test_report_to_is_checked_by_the_schema(config):
    raw = yaml.safe_load(E2E_CONFIG.read_text())
    raw["rl"]["report_to"] = "tensorbord"
    with pytest.raises(study.ConfigError, match="rl.report_to"):
        study.validate(raw)
    raw["rl"]["report_to"] = ["tensorboard", "none"]
    raw["sft"]["report_to"] = "none"
    study.validate(raw)


@pytest.mark.slow
def test_a_running_cell_has_rows_and_tensorboard_events(tmp_path, tiny_model_dir, cli, config):
    steps = 6
    config["rl"].update(max_steps=steps, save_steps=3)
    data = tmp_path / "arith.jsonl"
    prepare.run(study.stage_settings(config, "prepare", dataset="arith"), str(data))
    sft_dir = tmp_path / "sft"
    sft.run(study.stage_settings(config, "sft", model="tiny", dataset="arith"), base=str(tiny_model_dir),
            data_path=str(data), out_dir=str(sft_dir))
    settings = study.stage_settings(config, "train", model="tiny", dataset="arith", variant="grpo")
    cell = tmp_path / "cell"
    process = subprocess.Popen(
        [cli, "train", "--settings", json.dumps(settings), "--base", str(sft_dir), "--data", str(data),
         "--cell", str(cell), "--seed", "0", "--threads", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen_while_running = set()
    deadline = time.monotonic() + 600
    while process.poll() is None and time.monotonic() < deadline:
        if (cell / "train_log.csv").exists() and not (cell / "model").exists():
            seen_while_running.add(len(_rows(cell / "train_log.csv")))
        time.sleep(0.05)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr[-2000:]
    assert any(0 < rows < steps for rows in seen_while_running), seen_while_running
    assert [int(row["step"]) for row in _rows(cell / "train_log.csv")] == list(range(1, steps + 1))
    assert list((cell / "tensorboard").glob("events.out.tfevents.*"))
    assert "step 3/6 (50%)" in stderr  # a job log gets progress lines, not a bar


def test_resume_passes_over_a_damaged_newest_checkpoint_naming_it(tmp_path, caplog):
    """checkpoint-4 lost its weights and checkpoint-6 its trainer state: resume from checkpoint-2."""
    import json as json_module

    from grpo_lambda.train import newest_loadable_checkpoint

    resume = tmp_path / "resume"
    for step in (2, 4, 6):
        folder = resume / f"checkpoint-{step}"
        folder.mkdir(parents=True)
        (folder / "trainer_state.json").write_text(json_module.dumps({"global_step": step, "log_history": []}))
        (folder / "model.safetensors").write_bytes(b"weights")
    (resume / "checkpoint-4" / "model.safetensors").unlink()
    (resume / "checkpoint-6" / "trainer_state.json").write_text("{not json")
    (resume / "checkpoint-10-tmp").mkdir()  # not a checkpoint name
    assert newest_loadable_checkpoint(resume) == str(resume / "checkpoint-2")
    assert "checkpoint-6 is damaged (no readable trainer_state.json" in caplog.text
    assert "checkpoint-4 is damaged (no model weights)" in caplog.text
    (resume / "checkpoint-2" / "model.safetensors").unlink()
    (resume / "checkpoint-2" / "global_step2").mkdir()  # a DeepSpeed ZeRO checkpoint keeps its shards here
    assert newest_loadable_checkpoint(resume) == str(resume / "checkpoint-2")
    assert newest_loadable_checkpoint(tmp_path / "absent") is None


def test_steps_on_which_every_group_got_one_reward_are_warned_of_once(caplog):
    """As found: frac_reward_zero_std was 1 at every step (nothing to learn) and nothing said so."""
    from types import SimpleNamespace

    from grpo_lambda.progress import NO_SIGNAL_STEPS, NoLearningSignal

    callback = NoLearningSignal()
    flats = [1.0, 1.0, 0.5] + [1.0] * (NO_SIGNAL_STEPS + 3)
    for step, flat in enumerate(flats, 1):
        callback.on_log(None, SimpleNamespace(global_step=step, is_world_process_zero=True), None,
                        logs={"frac_reward_zero_std": flat, "reward": 0.0})
    warnings = [record.getMessage() for record in caplog.records if "nothing is learned" in record.getMessage()]
    assert len(warnings) == 1  # once, after NO_SIGNAL_STEPS in a row (the first two were broken by step 3)
    assert warnings[0].startswith(f"steps 4-{3 + NO_SIGNAL_STEPS}: every reward was 0 (frac_reward_zero_std 1")


def test_a_non_finite_loss_names_only_a_checkpoint_that_exists(tmp_path):
    """As found: the NaN error named a checkpoint that did not exist."""
    from types import SimpleNamespace

    from grpo_lambda.train import StopOnNonFiniteLoss

    args = SimpleNamespace(output_dir=str(tmp_path / "resume"), save_steps=10)
    state = SimpleNamespace(global_step=7)
    with pytest.raises(FloatingPointError, match=r"step 7: loss is nan; training stopped; no checkpoint was saved "
                                                 r"before it \(every 10 steps\): a rerun starts at step 1"):
        StopOnNonFiniteLoss().on_log(args, state, None, logs={"loss": float("nan")})
    checkpoint = tmp_path / "resume" / "checkpoint-10"
    checkpoint.mkdir(parents=True)
    (checkpoint / "model.safetensors").write_bytes(b"")
    (checkpoint / "trainer_state.json").write_text(json.dumps({"global_step": 10}))
    state.global_step = 13
    with pytest.raises(FloatingPointError, match=rf"a rerun resumes from {checkpoint}, the newest checkpoint"):
        StopOnNonFiniteLoss().on_log(args, state, None, logs={"grad_norm": float("inf")})
