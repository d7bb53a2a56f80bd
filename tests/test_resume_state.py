"""train._run resumes, and does not restart: the newest loadable checkpoint is what reaches
``trainer.train(resume_from_checkpoint=...)``, and a finished cell is published without training.

Training is deterministic, so a "resume" that silently restarts from step 1 gives the same rows as a
real one (tests/test_resume.py cannot tell them apart). Here the trainer is a stand-in that records
how it is called; nothing is trained, so each test takes well under a second once trl is imported.
"""

import csv
import json
from types import SimpleNamespace

import pytest

from grpo_lambda import train

MAX_STEPS = 20


def _history(steps):
    return [{"step": step, "loss": 0.5 / step, "reward": 0.05 * step, "step_time": 2.0} for step in steps]


def _checkpoint(resume, step, *, weights=True, history=None):
    folder = resume / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    if weights:
        (folder / "model.safetensors").write_bytes(b"weights")
    state = {"global_step": step, "max_steps": MAX_STEPS, "log_history": history or _history(range(1, step + 1))}
    (folder / "trainer_state.json").write_text(json.dumps(state))
    return folder


class RecordingTrainer:
    """Stands in for GRPOLambdaTrainer: records train() and _load_from_checkpoint() calls."""

    made = []

    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self.calls = []
        self.state = SimpleNamespace(global_step=0, log_history=[])
        self.accelerator = SimpleNamespace(is_main_process=True)
        self.model = SimpleNamespace(config=SimpleNamespace(tie_word_embeddings=True))  # as the tiny model
        RecordingTrainer.made.append(self)

    def is_world_process_zero(self):
        return True

    def train(self, resume_from_checkpoint=None):
        self.calls.append(("train", resume_from_checkpoint))
        self.state = SimpleNamespace(global_step=MAX_STEPS, log_history=[])

    def _load_from_checkpoint(self, checkpoint):
        self.calls.append(("load", checkpoint))


@pytest.fixture
def cell(tmp_path, monkeypatch):
    """A cell folder and a _run whose every heavy part (tokenizer, dataset, trainer, saving) is stubbed."""
    import grpo_lambda.trainer
    from grpo_lambda import progress

    RecordingTrainer.made = []
    saved = []
    monkeypatch.setattr(grpo_lambda.trainer, "GRPOLambdaTrainer", RecordingTrainer)
    monkeypatch.setattr(train.fingerprint, "claim", lambda *args, **kwargs: None)
    monkeypatch.setattr(train.provenance, "record", lambda **kwargs: {})
    monkeypatch.setattr(train, "load_tokenizer", lambda *args, **kwargs: None)
    # rl_dataset's rows carry the rendered prompt (train writes the first to prompt.txt)
    monkeypatch.setattr(train, "rl_dataset", lambda rows, tokenizer, template, **prompt_options: [
        {**row, "prompt": row["problem"]} for row in rows])
    monkeypatch.setattr(train, "drop_long_prompts", lambda dataset, tokenizer, limit: (
        dataset, {"max_prompt_length": limit, "prompts": len(dataset), "dropped": 0}))
    monkeypatch.setattr(train, "build_config", lambda settings, *, output_dir, seed: SimpleNamespace(
        max_steps=MAX_STEPS, run_name="tiny/arith/grpo/seed0", output_dir=output_dir, max_completion_length=8,
        report_to=[]))
    monkeypatch.setattr(train, "log_world_size", lambda *args: None)
    monkeypatch.setattr(train, "use_cell_tensorboard_folder", lambda *args: None)
    monkeypatch.setattr(progress, "quiet_trainer_output", lambda *args: None)
    monkeypatch.setattr(train, "save_trained_model", lambda trainer, folder, **kwargs: saved.append(str(folder)))
    data = tmp_path / "train.jsonl"
    data.write_text(json.dumps({"id": "1", "problem": "1+1", "answer": "2"}) + "\n")
    folder = tmp_path / "cell"

    def run(**settings):
        train._run({"model": {"prompt": "plain"}, "rl": {}, "checkpoints": [], **settings}, base="unused-base",
                   data_path=str(data), cell_dir=str(folder), seed=0)
        [trainer] = RecordingTrainer.made
        return trainer.calls, saved

    return folder, run


def test_a_cell_with_checkpoints_resumes_from_the_newest_loadable_one(cell):
    """checkpoint-12 lost its weights (killed mid-save); checkpoint-10 is newer than checkpoint-2 by number
    though not by name: training continues from checkpoint-10, not from step 1 or from checkpoint-2."""
    folder, run = cell
    resume = folder / "resume"
    _checkpoint(resume, 2)
    _checkpoint(resume, 10)
    _checkpoint(resume, 12, weights=False)
    calls, saved = run()
    assert calls == [("train", str(resume / "checkpoint-10"))]
    assert saved == [str(folder / "model")]


def test_a_new_cell_trains_from_the_start(cell):
    folder, run = cell
    calls, saved = run()
    assert calls == [("train", None)]
    assert saved == [str(folder / "model")]


def test_a_finished_cell_is_published_from_its_last_checkpoint_without_training(cell):
    """checkpoint-20 reached max_steps: no train() call (which would take a step more), the checkpoint is
    loaded, and train_log.csv (removed, as Snakemake may) is written again from its log history."""
    folder, run = cell
    resume = folder / "resume"
    _checkpoint(resume, 18)
    _checkpoint(resume, MAX_STEPS)
    calls, saved = run()
    assert calls == [("load", str(resume / f"checkpoint-{MAX_STEPS}"))]
    assert saved == [str(folder / "model")]
    with open(folder / "train_log.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [int(row["step"]) for row in rows] == list(range(1, MAX_STEPS + 1))
    assert float(rows[-1]["reward"]) == pytest.approx(0.05 * MAX_STEPS)


def test_newest_loadable_checkpoint_orders_by_step_number_not_by_name(tmp_path):
    """checkpoint-10 sorts before checkpoint-8 and checkpoint-2 as text; the newest good one is 10."""
    resume = tmp_path / "resume"
    for step in (2, 8, 10):
        _checkpoint(resume, step)
    assert train.newest_loadable_checkpoint(resume) == str(resume / "checkpoint-10")
    _checkpoint(resume, 100, weights=False)  # damaged: passed over
    assert train.newest_loadable_checkpoint(resume) == str(resume / "checkpoint-10")


def test_the_cells_provenance_and_log_name_its_advantage_estimators_and_rewards(cell, caplog):
    """Which estimator trained a cell is written beside it (provenance.json) and in its job log, OAR's reshaping first."""
    import logging

    folder, run = cell
    with caplog.at_level(logging.INFO, logger=train.log.name):
        run(variant={"objective": "grpo", "advantage_estimator": "tempo", "oar_method": "gradient"},
            rl={"rewards": [{"name": "evaluation", "weight": 1.0}, {"name": "boxed", "weight": 0.0}]})
    assert json.loads((folder / "provenance.json").read_text()) == {
        "advantage_estimators": ["oar", "tempo"], "rewards": {"evaluation": 1.0, "boxed": 0.0}}
    assert "advantages: oar then tempo; rewards: evaluation (weight 1), boxed (weight 0)" in caplog.messages
