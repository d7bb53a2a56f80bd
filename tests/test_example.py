"""examples/train_one_cell.py: the library route (GRPOLambdaTrainer outside Snakemake) trains on a CPU, on a
raw file read by a field mapping, and refuses data it cannot read a row of before any model loads."""

import importlib.util
import json
import re
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
    rows = arith.generate(spec["n"], seed=spec["seed"], levels=spec["levels"], carry_error_rate=spec["carry_error_rate"])
    files.write_jsonl(data, rows)
    # The RL file as a researcher's own: its columns named otherwise, no id column.
    own = tmp_path / "own.jsonl"
    files.write_jsonl(own, [{"question": row["problem"], "final": row["answer"]} for row in rows])
    sft.run(study.stage_settings(e2e, "sft", model="tiny", dataset="arith"), base=str(tmp_path / "base"),
            data_path=str(data), out_dir=str(tmp_path / "sft"))

    done = subprocess.run([sys.executable, "examples/train_one_cell.py", "--model", str(tmp_path / "sft"),
                           "--data", str(own), "--fields", "problem=question,answer=final", "--out", str(tmp_path / "run"), "--steps", "3", "--batch", "16",
                           "--max-completion-length", "48", "--learning-rate", "1e-5"],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"trained 3 steps on {len(rows)} rows" in done.stdout
    assert rows[0]["problem"] in (tmp_path / "run" / "prompt.txt").read_text()  # the prompt as rendered
    steps = [entry for entry in json.loads((tmp_path / "run" / "log.json").read_text()) if "loss" in entry]
    assert [entry["step"] for entry in steps] == [1, 2, 3]
    # GRPO-λ's loss ran (the traced ratio's weight Σ_c 0.99^(t-c) exceeds 1), on groups that disagreed ...
    assert all(entry["trace_weight"] > 1.5 for entry in steps)
    assert any(entry["reward_std"] > 0 for entry in steps)
    # ... and moved the weights away from the SFT model's
    assert largest_weight_change(tmp_path / "sft", tmp_path / "run" / "model") > 1e-7


def run_example(*args, cwd=ROOT):
    return subprocess.run([sys.executable, str(ROOT / "examples" / "train_one_cell.py"), "--model", "no-such-model",
                           *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def example_module():
    spec = importlib.util.spec_from_file_location("train_one_cell", ROOT / "examples" / "train_one_cell.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def own_file(tmp_path, rows=60):
    path = tmp_path / "train.jsonl"
    files.write_jsonl(path, [{"question": f"What is {i} + 1?", "final": str(i + 1)} for i in range(rows)])
    return path


def test_fields_named_otherwise_end_the_run_naming_the_mapping_not_a_model_trained_on_nothing(tmp_path):
    """As found: 'kept 0 rows, dropped 60 of 60 (missing field)', then 'trained 1 steps', exit 0 and an
    untrained model. Now: exit 2, one line naming the field the data lacks and the mapping, nothing written."""
    data = own_file(tmp_path)
    done = run_example("--data", str(data), "--steps", "1", "--out", str(tmp_path / "run"))
    assert done.returncode == 2, done.stdout + done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: --data {data}: fields.problem: column 'problem' is not in")
    assert "(its columns: final, question)" in last and "(--fields problem=problem,answer=answer)" in last
    assert "trained" not in done.stdout and not (tmp_path / "run").exists()


def test_a_mapping_that_leaves_no_usable_row_ends_the_run_naming_it(tmp_path):
    data = tmp_path / "train.jsonl"
    files.write_jsonl(data, [{"question": f"What is {i}?", "final": ""} for i in range(5)])  # no usable answer
    done = run_example("--data", str(data), "--fields", "problem=question,answer=final", "--out", str(tmp_path / "run"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: --data {data}: no usable row (dropped 5) with --fields problem=question,answer=final and "
        "--answer-kind text: map the problem and answer columns to your data's names")
    assert not (tmp_path / "run").exists()


def test_a_mapped_file_without_ids_is_read_as_the_pipeline_reads_it(tmp_path):
    """`id` is optional, as in a study's datasets: rows are numbered; a bad row is skipped, not fatal."""
    data = own_file(tmp_path, rows=3)
    data.write_text(data.read_text() + '{"question": "x", "final": ' + "7" * 5000 + "}\n")
    example = example_module()
    args = example.main.__globals__["argparse"].Namespace(
        data=str(data), fields=example.parse_fields("problem=question,answer=final"), answer_kind="number",
        split="train", hub_config=None, revision=None)
    rows = example.training_rows(args)
    assert rows == [{"id": f"data-{i}", "problem": f"What is {i} + 1?", "answer": str(i + 1)} for i in range(3)]
    with pytest.raises(Exception, match="write ROLE=COLUMN"):
        example.parse_fields("question")


def test_a_hub_id_is_read_as_a_hub_source_and_a_missing_local_file_is_named():
    example = example_module()
    hub = example.data_spec("openai/gsm8k", fields={"problem": "question"}, answer_kind="gsm8k", split="test",
                            hub_config="main", revision=None)
    assert (hub["source"], hub["hub_id"], hub["config"], hub["split"]) == ("hub", "openai/gsm8k", "main", "test")
    assert hub["fields"] == {"problem": "question", "answer": "answer"}
    local = example.data_spec("mine/train.jsonl", fields={}, answer_kind="text", split="train", hub_config=None,
                              revision=None)
    assert local["source"] == "file" and local["path"] == "mine/train.jsonl"


@pytest.mark.slow
def test_a_run_whose_rewards_are_all_zero_is_warned_of_and_can_be_stopped(tiny_model_dir, tmp_path):
    """As found: an untrained model on a task it never answers trained with every reward 0, loss 0 and grad_norm 0,
    and nothing said so. Now a run whose every step had no learning signal ends with a warning naming it (here 2
    steps of an untrained tiny model, which boxes no answer); --stop-without-signal 1 ends it with exit status 1 at
    the first such step, writing no model."""
    common = ["--model", str(tiny_model_dir), "--steps", "2", "--batch", "4", "--generations", "4",
              "--max-completion-length", "8"]
    done = subprocess.run([sys.executable, "examples/train_one_cell.py", *common, "--out", str(tmp_path / "warned")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    steps = [entry for entry in json.loads((tmp_path / "warned" / "log.json").read_text()) if "loss" in entry]
    assert [(entry["reward"], entry["frac_reward_zero_std"]) for entry in steps] == [(0.0, 1.0), (0.0, 1.0)]
    assert ("WARNING grpo_lambda.progress: all 2 logged steps: every reward was 0 (frac_reward_zero_std 1, mean "
            "reward 0): the advantages are 0 and nothing is learned") in done.stderr

    stopped = subprocess.run([sys.executable, "examples/train_one_cell.py", *common, "--stop-without-signal", "1",
                              "--out", str(tmp_path / "stopped")], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert stopped.returncode == 1, stopped.stdout[-3000:] + stopped.stderr[-3000:]
    assert (  # a line of its own, after the progress bar's
        "error: steps 1-1: every reward was 0 (frac_reward_zero_std 1, mean reward 0): the advantages are 0 and "
        "nothing is learned. The task is beyond the model or the reward never fires: check prompt.txt and the "
        "answers; training stopped after 1 such steps in a row (--stop-without-signal 1); no model written"
    ) in re.split(r"[\r\n]", stopped.stderr)
    assert not (tmp_path / "stopped" / "model").exists()
