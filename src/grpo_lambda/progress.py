"""Progress of a long loop: a tqdm bar on a terminal, one log line per step of N % in a job log; and the warning
(or stop) when RL steps have no learning signal."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterable, Iterator

log = logging.getLogger(__name__)

# A job log gets one line each time a loop crosses another such share of its total.
LINE_EVERY = 0.1
# Logged steps in a row on which every group's rewards were equal before NoLearningSignal warns.
NO_SIGNAL_STEPS = 5


def interactive() -> bool:
    """Whether a person is watching: stderr is a terminal (a job log is a file)."""
    return sys.stderr.isatty()


def track(items: Iterable, *, total: int, description: str, unit: str = "it") -> Iterator:
    """Yield items, showing progress: tqdm on a terminal, else a log line per LINE_EVERY of total."""
    if interactive():
        from tqdm.auto import tqdm

        yield from tqdm(items, total=total, desc=description, unit=unit, leave=False)
        return
    start, next_share, done = time.monotonic(), LINE_EVERY, 0
    for item in items:
        yield item
        done += 1
        if total and done / total >= next_share - 1e-12:
            log.info("%s: %d/%d %s (%.0f%%), %.0f s", description, done, total, unit, 100 * done / total,
                     time.monotonic() - start)
            while next_share <= done / total + 1e-12:
                next_share += LINE_EVERY


class ProgressLines:
    """In a job log, instead of a progress bar: one line per LINE_EVERY of max_steps with the step,
    the last reward or loss, the speed and the time left. A trainer callback once ``quiet_trainer_output``
    mixes it into transformers' ``TrainerCallback`` (imported there: an evaluation job's ``track`` needs
    no trainer stack, whose import costs seconds)."""

    def __init__(self, description: str):
        self.description, self.next_share, self.start, self.first_step = description, LINE_EVERY, None, 0
        self.last = {}
        self.waiting_for_log = None  # the step whose line waits for that step's own log

    def on_train_begin(self, args, state, control, **kwargs):
        self.start, self.first_step = time.monotonic(), state.global_step
        while self.next_share <= state.global_step / max(state.max_steps, 1):
            self.next_share += LINE_EVERY

    def on_log(self, args, state, control, logs=None, **kwargs):
        self.last.update({k: v for k, v in (logs or {}).items() if k in ("reward", "loss")})
        if self.waiting_for_log == state.global_step:
            self.waiting_for_log = None
            self._line(state)

    def on_step_end(self, args, state, control, **kwargs):
        share = state.global_step / max(state.max_steps, 1)
        if not state.is_world_process_zero or share < self.next_share - 1e-12:
            return
        while self.next_share <= share + 1e-12:
            self.next_share += LINE_EVERY
        if control.should_log:
            # The Trainer logs a step after its on_step_end: the line waits for it, so that step N's line carries
            # step N's reward and loss, not step N-1's.
            self.waiting_for_log = state.global_step
            return
        self._line(state)

    def _line(self, state):
        share = state.global_step / max(state.max_steps, 1)
        elapsed = time.monotonic() - self.start
        steps = state.global_step - self.first_step
        per_step = elapsed / steps if steps else float("nan")
        metrics = ", ".join(f"{key} {value:.4g}" for key, value in self.last.items())
        log.info("%s: step %d/%d (%.0f%%)%s, %.1f s/step, %.0f s left", self.description, state.global_step,
                 state.max_steps, 100 * share, f", {metrics}" if metrics else "", per_step,
                 per_step * (state.max_steps - state.global_step))


class NoLearningSignalError(RuntimeError):
    """Training stopped by ``NoLearningSignal(stop_after=N)``: N logged steps in a row without learning signal."""


class _NoLearningSignal:
    """``NoLearningSignal`` (transformers' ``TrainerCallback`` is mixed in when the name is first read, see the
    module's ``__getattr__``: an evaluation job's ``track`` needs no trainer stack). Say so when RL steps learn
    nothing: every group's completions got the same reward (TRL's
    frac_reward_zero_std = 1), so every advantage is 0. A warning after NO_SIGNAL_STEPS logged steps in a row,
    and at the end of a run whose every logged step was so (a short run included); with ``stop_after`` N, a
    NoLearningSignalError at the N-th such step in a row instead of training on. Every process decides alike (the
    logs are the gathered ones); the main one writes the warnings."""

    def __init__(self, stop_after: int | None = None):
        if stop_after is not None and (isinstance(stop_after, bool) or not isinstance(stop_after, int)
                                       or stop_after < 1):
            raise ValueError(f"stop_after must be a positive whole number or None, got {stop_after!r}")
        self.stop_after, self.warned = stop_after, False
        self.flat_in_a_row, self.logged, self.flat_rewards = 0, 0, []  # the mean reward of each step without signal

    def on_log(self, args, state, control, logs=None, **kwargs):
        flat = (logs or {}).get("frac_reward_zero_std")
        if flat is None:
            return
        self.logged += 1
        self.flat_in_a_row = self.flat_in_a_row + 1 if flat >= 1.0 else 0
        if flat >= 1.0:
            self.flat_rewards.append(logs.get("reward"))
        if self.stop_after is not None and self.flat_in_a_row >= self.stop_after:
            raise NoLearningSignalError(f"{self._steps(state, self.flat_in_a_row)}: {self._why(logs.get('reward'))}; "
                                        f"training stopped after {self.stop_after} such steps in a row")
        if self.flat_in_a_row == NO_SIGNAL_STEPS and not self.warned and state.is_world_process_zero:
            self.warned = True
            log.warning("%s: %s", self._steps(state, NO_SIGNAL_STEPS), self._why(logs.get("reward")))

    def on_train_end(self, args, state, control, **kwargs):
        if self.logged and len(self.flat_rewards) == self.logged and not self.warned and state.is_world_process_zero:
            self.warned = True
            rewards = [reward for reward in self.flat_rewards if reward is not None]
            log.warning("all %d logged steps: %s", self.logged, self._why(max(rewards, default=None)))

    @staticmethod
    def _steps(state, count: int) -> str:
        return f"steps {state.global_step - count + 1}-{state.global_step}"

    @staticmethod
    def _why(reward) -> str:
        if reward == 0:
            return ("every reward was 0 (frac_reward_zero_std 1, mean reward 0): the advantages are 0 and nothing is "
                    "learned. The task is beyond the model or the reward never fires: check prompt.txt and the "
                    "answers")
        return (f"every group's completions got the same reward (frac_reward_zero_std 1, mean reward {reward}): the "
                "advantages are 0 and nothing is learned. Reward 1: too easy; otherwise check the reward")


def quiet_trainer_output(trainer, description: str) -> None:
    """Outside a terminal, replace the trainer's bar (or its dict per step) with ProgressLines."""
    if interactive():
        return
    from transformers.trainer_callback import PrinterCallback, ProgressCallback, TrainerCallback

    class ProgressLinesCallback(ProgressLines, TrainerCallback):
        pass

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    trainer.add_callback(ProgressLinesCallback(description))


def __getattr__(name: str):
    """``NoLearningSignal``: :class:`_NoLearningSignal` as a ``TrainerCallback``, made on first use (PEP 562), so that
    importing this module imports no trainer stack."""
    if name == "NoLearningSignal":
        from transformers import TrainerCallback

        callback = type("NoLearningSignal", (_NoLearningSignal, TrainerCallback), {"__doc__": _NoLearningSignal.__doc__})
        globals()[name] = callback
        return callback
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

