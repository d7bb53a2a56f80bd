"""grpo_lambda.progress.NoLearningSignal: a run whose steps all lacked signal is warned of at its end, however
short; with stop_after it stops at the N-th such step in a row. (Its warning after NO_SIGNAL_STEPS in a row:
tests/test_train_log.py; the example's run on rewards that are all 0: tests/test_example.py.)"""

import re
from types import SimpleNamespace

import pytest

from grpo_lambda.progress import NoLearningSignal, NoLearningSignalError


def feed(callback, steps, *, main=True):
    """Log each (frac_reward_zero_std, reward) as the Trainer would, then end the run."""
    state = SimpleNamespace(global_step=0, is_world_process_zero=main)
    for flat, reward in steps:
        state.global_step += 1
        callback.on_log(None, state, None, logs={"frac_reward_zero_std": flat, "reward": reward, "loss": 0.0})
    callback.on_train_end(None, state, None)


def warnings(caplog):
    return [record.getMessage() for record in caplog.records if record.levelname == "WARNING"]


def test_a_short_run_without_any_signal_is_warned_of_at_its_end(caplog):
    feed(NoLearningSignal(), [(1.0, 0.0), (1.0, 0.0)])
    assert warnings(caplog) == ["all 2 logged steps: every reward was 0 (frac_reward_zero_std 1, mean reward 0): the "
                                "advantages are 0 and nothing is learned. The task is beyond the model or the reward "
                                "never fires: check prompt.txt and the answers"]


def test_equal_rewards_that_are_not_zero_are_named_as_such_and_a_step_with_signal_silences_the_end(caplog):
    feed(NoLearningSignal(), [(1.0, 1.0), (1.0, 1.0)])
    assert warnings(caplog)[0].startswith("all 2 logged steps: every group's completions got the same reward "
                                          "(frac_reward_zero_std 1, mean reward 1.0)")
    caplog.clear()
    feed(NoLearningSignal(), [(1.0, 0.0), (0.5, 0.1), (1.0, 0.0)])
    assert warnings(caplog) == []
    feed(NoLearningSignal(), [(1.0, 0.0)], main=False)  # only the main process writes it
    assert warnings(caplog) == []


def test_stop_after_ends_training_at_the_nth_step_without_signal_in_a_row():
    callback = NoLearningSignal(stop_after=2)
    with pytest.raises(NoLearningSignalError, match=r"^steps 3-4: every reward was 0 .*; training stopped after 2 "
                                                    r"such steps in a row$"):
        feed(callback, [(1.0, 0.0), (0.0, 0.5), (1.0, 0.0), (1.0, 0.0), (1.0, 0.0)])
    assert callback.logged == 4
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="stop_after must be a positive whole number"):
            NoLearningSignal(stop_after=bad)


@pytest.mark.parametrize("logging_steps", [1, 2])
def test_each_progress_line_carries_its_own_steps_loss(tmp_path, caplog, monkeypatch, logging_steps):
    """A real Trainer logs a step after its on_step_end: step N's line shows step N's logged loss, not step N-1's;
    a step that logs nothing gets its line at once, with the last loss logged."""
    import logging

    import torch
    from transformers import Trainer, TrainingArguments

    from grpo_lambda import progress

    class Falling(torch.nn.Module):
        """A loss that differs at every step: the weight moves each step."""

        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.tensor(3.0))

        def forward(self, x):
            return {"loss": (self.weight * x).pow(2).mean()}

    monkeypatch.setattr(progress, "interactive", lambda: False)
    monkeypatch.setattr(progress, "LINE_EVERY", 0.2)  # a line every step of 5
    args = TrainingArguments(output_dir=str(tmp_path), max_steps=5, per_device_train_batch_size=1, learning_rate=0.1,
                             logging_steps=logging_steps, save_strategy="no", report_to=[], use_cpu=True,
                             logging_nan_inf_filter=False)
    trainer = Trainer(model=Falling(), args=args, train_dataset=[{"x": torch.tensor(1.0)}] * 5)
    progress.quiet_trainer_output(trainer, "train cell")
    with caplog.at_level(logging.INFO, logger=progress.log.name):
        trainer.train()
    lines = {int(found[1]): found[2] for found in (re.search(r"step (\d+)/5 \(\d+%\)(?:, loss (\S+))?,", record.getMessage())
                                                   for record in caplog.records) if found}
    logged = {entry["step"]: f"{entry['loss']:.4g}" for entry in trainer.state.log_history if "loss" in entry}
    assert sorted(lines) == [1, 2, 3, 4, 5]
    for step, loss in lines.items():
        newest = max((logged_step for logged_step in logged if logged_step <= step), default=None)
        assert loss == (logged[newest] if newest else None), step
    assert len(set(logged.values())) == len(logged) > 1


def test_the_end_of_run_warning_quotes_the_largest_flat_reward_not_the_last(caplog):
    """Flat steps at reward 1.0, then 0.0: the groups all answered alike, the first time all right, so the warning
    is not "every reward was 0"; it quotes the largest of the flat steps' rewards (a step's missing reward skipped)."""
    feed(NoLearningSignal(), [(1.0, 0.25), (1.0, 1.0), (1.0, None), (1.0, 0.0)])
    assert warnings(caplog) == ["all 4 logged steps: every group's completions got the same reward "
                                "(frac_reward_zero_std 1, mean reward 1.0): the advantages are 0 and nothing is learned. "
                                "Reward 1: too easy; otherwise check the reward"]


def test_a_run_warned_of_after_its_steps_in_a_row_is_not_warned_of_again_at_its_end_or_after_a_later_streak(caplog):
    """One warning a run: the one after NO_SIGNAL_STEPS flat steps in a row, not a second at the end of a run whose
    every step was flat, nor another after a step with signal and a new streak."""
    from grpo_lambda.progress import NO_SIGNAL_STEPS

    feed(NoLearningSignal(), [(1.0, 0.0)] * (NO_SIGNAL_STEPS + 1))
    assert len(warnings(caplog)) == 1 and warnings(caplog)[0].startswith(f"steps 1-{NO_SIGNAL_STEPS}: every reward")
    caplog.clear()
    feed(NoLearningSignal(), [(1.0, 0.0)] * NO_SIGNAL_STEPS + [(0.5, 0.2)] + [(1.0, 0.0)] * NO_SIGNAL_STEPS)
    assert len(warnings(caplog)) == 1


def test_stop_after_one_stops_at_the_first_flat_step_and_flat_steps_without_a_reward_are_still_warned_of(caplog):
    with pytest.raises(NoLearningSignalError, match=r"^steps 2-2: .*training stopped after 1 such steps in a row$"):
        feed(NoLearningSignal(stop_after=1), [(0.5, 0.2), (1.0, 0.0)])
    feed(NoLearningSignal(), [(1.0, None), (1.0, None)])  # no reward logged: the warning says so, it does not fail
    assert warnings(caplog) == ["all 2 logged steps: every group's completions got the same reward "
                                "(frac_reward_zero_std 1, mean reward None): the advantages are 0 and nothing is "
                                "learned. Reward 1: too easy; otherwise check the reward"]
