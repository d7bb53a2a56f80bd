"""What the policy writes during training: a few groups of completions every ``rl.log_completions.every``
steps, one JSONL file per logged step in the cell's ``completions/`` folder (written during training
by ``grpo_lambda.train.WriteCompletions``), for the report's ``completions`` table and
``grpo-lambda completions``.

TRL's own ``log_completions`` writes every logged step's whole generation batch as parquet into the
trainer's output folder (here ``resume/``, which a settings change moves aside), and prints tables to the
job log; this keeps a chosen number of prompts per logged step beside the model, written atomically,
each completion with its reward and advantages: ``advantage``, TRL's group-normalised A_i, and the advantages the
loss read, per token, from the variant's ``advantage_estimator`` (raised to ``advantage_clamp`` when set):
``token_advantage_mean``, their mean over the completion's tokens, and ``token_advantage_first``, its first
token's (None where no token of it was in the loss: a group ``dynamic_sampling`` dropped). Files written
before these two were logged read as NaN there.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from grpo_lambda import files

FOLDER = "completions"
COLUMNS = ["step", "prompt", "completion", "reward", "advantage", "token_advantage_mean", "token_advantage_first"]
# The columns that hold numbers (an empty cell of a CSV is a missing one, not text)
NUMBERS = ("reward", "advantage", "token_advantage_mean", "token_advantage_first")
# The columns of TRL's logs (trainer._logs) that hold one value per completion, by the column each fills.
PER_COMPLETION = {"advantage": "advantages", "token_advantage_mean": "token_advantage_mean",
                  "token_advantage_first": "token_advantage_first"}


def file_name(step: int) -> str:
    return f"step-{step:06d}.jsonl"


def group_rows(logs: dict, *, step: int, prompts: int, weights: dict[str, float] | None = None) -> list[dict]:
    """The rows of the first ``prompts`` distinct prompts of a generation batch as TRL keeps it
    (``trainer._logs``: prompt, completion, rewards by reward function, advantages, and GRPOLambdaTrainer's
    token advantages, in batch order); a row's reward is the training reward, the reward functions' sum by
    ``weights`` (default 1 each)."""
    weights = weights or {}
    names = list(logs["rewards"])
    rewards = [sum(weights.get(name, 1.0) * value for name, value in zip(names, values))
               for values in zip(*logs["rewards"].values())] if names else []
    per_completion = {column: list(logs.get(key, ())) for column, key in PER_COMPLETION.items()}
    chosen, rows = [], []
    for index, (prompt, completion) in enumerate(zip(logs["prompt"], logs["completion"])):
        key = str(prompt)
        if key not in chosen:
            if len(chosen) == prompts:
                continue
            chosen.append(key)
        rows.append({"step": step, "prompt": _text(prompt), "completion": _text(completion),
                     "reward": rewards[index] if index < len(rewards) else None,
                     **{column: _number(values[index]) if index < len(values) else None
                        for column, values in per_completion.items()}})
    return rows


def _number(value):
    """A logged value as JSON holds it: NaN (no token in the loss) as None."""
    return None if isinstance(value, float) and math.isnan(value) else value


def _text(value) -> str:
    """A text prompt or completion as it is; a conversation as its messages' contents."""
    if isinstance(value, str):
        return value
    return "\n".join(str(message.get("content", "")) for message in value)


def read_cell(cell_dir: str | os.PathLike) -> pd.DataFrame:
    """Every logged completion of a cell, in step order (an empty frame when none was logged)."""
    import pandas as pd  # here, not at the top: the train job writes completions and never reads them

    paths = sorted(Path(cell_dir, FOLDER).glob("step-*.jsonl"))
    rows = [row for path in paths for row in files.read_jsonl(path)]
    return pd.DataFrame(rows, columns=COLUMNS)


def report_table(results_dir: str | os.PathLike, cells: list[dict], *, per_phase: int = 2) -> pd.DataFrame:
    """For each cell, ``per_phase`` completions of its first, middle and last logged step, with the
    prompt they answer, their reward and advantages."""
    import pandas as pd

    parts = []
    for cell in cells:
        folder = Path(results_dir) / cell["model"] / cell["dataset"] / cell["variant"] / f"seed{cell['seed']}"
        logged = read_cell(folder)
        steps = sorted(logged["step"].unique())
        if not steps:
            continue
        phases = {}  # step -> its phase; fewer than three logged steps give fewer phases
        for phase, step in (("early", steps[0]), ("late", steps[-1]), ("middle", steps[len(steps) // 2])):
            phases.setdefault(step, phase)
        for step, phase in sorted(phases.items()):
            chosen = logged[logged["step"] == step].head(per_phase)
            parts.append(chosen.assign(model=cell["model"], dataset=cell["dataset"], variant=cell["variant"],
                                       seed=cell["seed"], phase=phase))
    columns = ["model", "dataset", "variant", "seed", "phase", *COLUMNS]
    if not parts:
        return pd.DataFrame(columns=columns)
    return pd.concat(parts, ignore_index=True)[columns]
