"""Progress of a long loop: a tqdm bar on a terminal, one log line per step of N % in a job log."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterable, Iterator

log = logging.getLogger(__name__)

# A job log gets one line each time a loop crosses another such share of its total.
LINE_EVERY = 0.1


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

    def on_train_begin(self, args, state, control, **kwargs):
        self.start, self.first_step = time.monotonic(), state.global_step
        while self.next_share <= state.global_step / max(state.max_steps, 1):
            self.next_share += LINE_EVERY

    def on_log(self, args, state, control, logs=None, **kwargs):
        self.last.update({k: v for k, v in (logs or {}).items() if k in ("reward", "loss")})

    def on_step_end(self, args, state, control, **kwargs):
        share = state.global_step / max(state.max_steps, 1)
        if not state.is_world_process_zero or share < self.next_share - 1e-12:
            return
        while self.next_share <= share + 1e-12:
            self.next_share += LINE_EVERY
        elapsed = time.monotonic() - self.start
        steps = state.global_step - self.first_step
        per_step = elapsed / steps if steps else float("nan")
        metrics = ", ".join(f"{key} {value:.4g}" for key, value in self.last.items())
        log.info("%s: step %d/%d (%.0f%%)%s, %.1f s/step, %.0f s left", self.description, state.global_step,
                 state.max_steps, 100 * share, f", {metrics}" if metrics else "", per_step,
                 per_step * (state.max_steps - state.global_step))


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
