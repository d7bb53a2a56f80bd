"""grpo_lambda.completions: the groups kept from a generation batch, the files, the report table, the CLI."""

from collections import defaultdict, deque

import pytest

from conftest import run_main
from grpo_lambda import completions, files


def _logs():
    """A generation batch as TRL keeps it: 2 prompts x 3 completions, two reward functions."""
    logs = {"prompt": deque(["p1"] * 3 + ["p2"] * 3), "completion": deque([f"c{i}" for i in range(6)]),
            "rewards": defaultdict(deque), "advantages": deque([0.5, -0.25, -0.25, 1.0, 0.0, -1.0])}
    logs["rewards"]["accuracy"].extend([1, 0, 0, 1, 0, 0])
    logs["rewards"]["format"].extend([0.5, 0.5, 0, 0, 0, 0.5])
    # GRPOLambdaTrainer's: the advantages the loss read, per completion (NaN: no token of it in the loss)
    logs["token_advantage_mean"] = deque([0.25, -0.5, 0.0, 1.0, float("nan"), -1.0])
    logs["token_advantage_first"] = deque([1.0, -0.5, 0.0, 1.0, float("nan"), -2.0])
    return logs


def test_the_first_groups_are_kept_with_their_own_summed_reward_and_advantage():
    rows = completions.group_rows(_logs(), step=7, prompts=1)
    assert rows == [{"step": 7, "prompt": "p1", "completion": "c0", "reward": 1.5, "advantage": 0.5,
                     "token_advantage_mean": 0.25, "token_advantage_first": 1.0},
                    {"step": 7, "prompt": "p1", "completion": "c1", "reward": 0.5, "advantage": -0.25,
                     "token_advantage_mean": -0.5, "token_advantage_first": -0.5},
                    {"step": 7, "prompt": "p1", "completion": "c2", "reward": 0, "advantage": -0.25,
                     "token_advantage_mean": 0.0, "token_advantage_first": 0.0}]
    # The training reward: the format reward at weight 0, as the pipeline trains.
    weighted = completions.group_rows(_logs(), step=7, prompts=1, weights={"accuracy": 1.0, "format": 0.0})
    assert [row["reward"] for row in weighted] == [1, 0, 0]
    both = completions.group_rows(_logs(), step=7, prompts=5)
    assert [row["completion"] for row in both] == [f"c{i}" for i in range(6)]
    assert both[5] == {"step": 7, "prompt": "p2", "completion": "c5", "reward": 0.5, "advantage": -1.0,
                       "token_advantage_mean": -1.0, "token_advantage_first": -2.0}
    assert both[4]["token_advantage_mean"] is None and both[4]["token_advantage_first"] is None  # JSON has no NaN
    trl_alone = completions.group_rows({key: value for key, value in _logs().items() if "token" not in key},
                                       step=7, prompts=1)  # TRL's own trainer: its advantage, the others unknown
    assert [(row["advantage"], row["token_advantage_mean"]) for row in trl_alone] == [(0.5, None), (-0.25, None),
                                                                                      (-0.25, None)]
    conversation = completions.group_rows({**_logs(), "prompt": deque([[{"role": "user", "content": "q"}]] * 6)},
                                          step=1, prompts=1)
    assert conversation[0]["prompt"] == "q" and len(conversation) == 6


def _cell(tmp_path, steps):
    cell = tmp_path / "results" / "tiny" / "arith" / "grpo" / "seed0"
    for step in steps:
        files.write_jsonl(cell / "completions" / completions.file_name(step),
                          [{"step": step, "prompt": "p", "completion": f"s{step}-{i}", "reward": i % 2,
                            "advantage": 0.1 * i, "token_advantage_mean": 0.5 * i, "token_advantage_first": -i}
                           for i in range(3)])
    return cell


def test_the_report_table_shows_early_middle_and_late_steps(tmp_path):
    _cell(tmp_path, [5, 10, 15, 20, 25])
    cells = [{"model": "tiny", "dataset": "arith", "variant": "grpo", "seed": 0},
             {"model": "tiny", "dataset": "arith", "variant": "grpo", "seed": 1}]  # nothing logged: no rows
    table = completions.report_table(tmp_path / "results", cells)
    assert list(zip(table["phase"], table["step"], table["completion"])) == [
        ("early", 5, "s5-0"), ("early", 5, "s5-1"), ("middle", 15, "s15-0"), ("middle", 15, "s15-1"),
        ("late", 25, "s25-0"), ("late", 25, "s25-1")]
    one, two = tmp_path / "one", tmp_path / "two"
    _cell(one, [4])
    assert list(completions.report_table(one / "results", cells[:1])["phase"]) == ["early", "early"]
    _cell(two, [2, 4])
    assert list(completions.report_table(two / "results", cells[:1])["phase"]) == ["early"] * 2 + ["late"] * 2


def test_the_cli_prints_the_latest_or_a_chosen_step_and_names_a_missing_one(tmp_path):
    cell = _cell(tmp_path, [5, 10])
    latest = run_main("completions", cell, "--limit", "2")
    assert latest.returncode == 0, latest.stderr
    assert "s10-0" in latest.stdout and "s10-1" in latest.stdout and "s10-2" not in latest.stdout
    assert "s5-" not in latest.stdout
    assert ("--- step 10, reward 1, TRL's group advantage 0.100, the loss's per-token advantage: mean 0.500, "
            "first token -1.000\np\n>>> s10-1") in latest.stdout
    chosen = run_main("completions", cell, "--step", "5")
    assert "s5-2" in chosen.stdout
    missing = run_main("completions", cell, "--step", "7")
    assert missing.returncode == 2 and "no completions logged at step 7; logged: 5, 10" in missing.stderr


def test_the_token_advantages_logged_are_the_ones_the_loss_reads():
    """Mean over the completion's tokens in the loss and the first token's, raised to advantage_clamp as the loss
    raises them; NaN for a row with no token in the loss (dynamic sampling's), which a row writes as null."""
    from types import SimpleNamespace

    import torch

    from grpo_lambda import scored_batch

    trainer = SimpleNamespace(args=SimpleNamespace(advantage_clamp=-0.1),
                              accelerator=SimpleNamespace(gather=lambda tensor: tensor),
                              _logs=defaultdict(list))
    output = {"advantages": torch.tensor([[1.0, -1.0, 3.0], [-0.5, 0.5, 9.0], [2.0, 2.0, 2.0]]),
              "completion_mask": torch.tensor([[1, 1, 1], [1, 1, 0], [0, 0, 0]])}
    scored_batch.log_token_advantages(trainer, output)
    assert trainer._logs["token_advantage_mean"][:2] == pytest.approx([(1.0 - 0.1 + 3.0) / 3, (-0.1 + 0.5) / 2])
    assert trainer._logs["token_advantage_first"][:2] == pytest.approx([1.0, -0.1])
    assert all(torch.tensor(trainer._logs[name][2]).isnan() for name in scored_batch.TOKEN_ADVANTAGE_LOGS)
