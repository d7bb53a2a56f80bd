"""examples/train_one_cell.py: the library route (GRPOLambdaTrainer outside Snakemake) trains on a CPU."""

import json
import subprocess
import sys

import pytest

from grpo_lambda import config as study
from grpo_lambda import files, sft, tiny
from grpo_lambda.data import arith

from conftest import E2E_CONFIG, ROOT, largest_weight_change


@pytest.mark.slow
def test_the_example_trains_one_grpo_lambda_cell_on_a_cpu(tmp_path):
    # An SFT model whose samples disagree on correctness (the end-to-end test's: level-1 sums, half the
    # carries dropped in the targets), so GRPO-λ has advantages to learn from.
    e2e = study.load(E2E_CONFIG)
    tiny.build(str(tmp_path / "base"), **e2e["models"]["tiny"]["tiny"])
    spec = e2e["datasets"]["arith"]
    data = tmp_path / "arith.jsonl"
    files.write_jsonl(data, arith.generate(spec["n"], seed=spec["seed"], levels=spec["levels"],
                                           carry_error_rate=spec["carry_error_rate"]))
    sft.run(study.stage_settings(e2e, "sft", model="tiny", dataset="arith"), base=str(tmp_path / "base"),
            data_path=str(data), out_dir=str(tmp_path / "sft"))

    done = subprocess.run([sys.executable, "examples/train_one_cell.py", "--model", str(tmp_path / "sft"),
                           "--data", str(data), "--out", str(tmp_path / "run"), "--steps", "3", "--batch", "16",
                           "--max-completion-length", "48", "--learning-rate", "1e-5"],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    steps = [entry for entry in json.loads((tmp_path / "run" / "log.json").read_text()) if "loss" in entry]
    assert [entry["step"] for entry in steps] == [1, 2, 3]
    # GRPO-λ's loss ran (the traced ratio's weight Σ_c 0.99^(t-c) exceeds 1), on groups that disagreed ...
    assert all(entry["trace_weight"] > 1.5 for entry in steps)
    assert any(entry["reward_std"] > 0 for entry in steps)
    # ... and moved the weights away from the SFT model's
    assert largest_weight_change(tmp_path / "sft", tmp_path / "run" / "model") > 1e-7
