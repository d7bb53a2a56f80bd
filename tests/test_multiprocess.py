"""The multi-process training path: one optimizer step on 2 processes (DDP over gloo, under
``accelerate launch`` with the grid's accelerate config) moves the weights exactly as 1 process does on
the same global batch — for GRPO and GRPO-λ in the absolute form, with TRL's bnpo and dapo losses, and
for a LoRA adapter. tests/one_update.py is the step; it catches gradients that are never all-reduced,
a loss normalised per process where it should be global, and an adapter that never trains."""

import os
import subprocess
import sys

import pytest
import torch

from conftest import ROOT
from grpo_lambda import tiny

sys.path.insert(0, str(ROOT / "tests"))
from one_update import CASES  # noqa: E402

pytestmark = pytest.mark.slow
SCRIPT = str(ROOT / "tests/one_update.py")


@pytest.fixture(scope="module")
def updates(tmp_path_factory):
    """{case: (1-process result, 2-process result)}, each {"before", "after", "processes"}."""
    root = tmp_path_factory.mktemp("one-update")
    model = root / "model"
    tiny.build(str(model), seed=0, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
               max_position_embeddings=64)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    one = subprocess.run([sys.executable, SCRIPT, "--model", str(model), "--out", str(root / "one")],
                         capture_output=True, text=True, env=env, timeout=600)
    assert one.returncode == 0, one.stderr[-3000:]
    two = subprocess.run(["accelerate", "launch", "--config_file", str(ROOT / "envs/accelerate/ddp.yaml"),
                          "--num_processes", "2", "--main_process_port", "0", "--mixed_precision", "no",
                          SCRIPT, "--model", str(model), "--out", str(root / "two")],
                         capture_output=True, text=True, env=env, timeout=600)
    assert two.returncode == 0, two.stderr[-3000:]
    return {case: (torch.load(root / "one" / f"{case}.pt"), torch.load(root / "two" / f"{case}.pt"))
            for case in CASES}


def deltas(result):
    return {name: result["after"][name] - result["before"][name] for name in result["after"]}


@pytest.mark.parametrize("case", list(CASES))
def test_two_processes_make_the_one_process_update(updates, case):
    one, two = updates[case]
    assert (one["processes"], two["processes"]) == (1, 2)
    assert one["before"].keys() == two["before"].keys()
    for name in one["before"]:
        assert torch.equal(one["before"][name], two["before"][name]), name
    one_delta, two_delta = deltas(one), deltas(two)
    moved = [name for name, delta in one_delta.items() if delta.abs().max() > 1e-6]
    assert moved, "the step changed no weight"
    for name in one_delta:
        torch.testing.assert_close(two_delta[name], one_delta[name], rtol=1e-4, atol=1e-7, msg=name)


def test_the_lora_step_trains_the_adapter_and_only_it(updates):
    one, _ = updates["absolute-trace-dapo-lora"]
    names = list(one["before"])
    assert names and all("lora_" in name for name in names)  # the base weights are frozen
    moved = {name for name, delta in deltas(one).items() if delta.abs().max() > 0}
    assert any("lora_B" in name for name in moved)  # B starts at 0: the adapter's output changed


def test_grpo_lambda_moves_the_weights_differently_from_grpo(updates):
    grpo, grpo_lambda = deltas(updates["grpo-bnpo"][0]), deltas(updates["absolute-trace-bnpo"][0])
    difference = max((grpo[name] - grpo_lambda[name]).abs().max().item() for name in grpo)
    assert difference > 1e-4
