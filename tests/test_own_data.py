"""A researcher's own data, end to end, with no code change: a JSONL training set and a CSV benchmark whose
columns have their own names, mapped in the study's YAML alone, planned and run by Snakemake on the tiny
model (two RL steps, a few problems)."""

import csv
import json

import pandas as pd
import pytest

from conftest import largest_weight_change, snakemake
from grpo_lambda import files
from grpo_lambda.data import arith

pytestmark = pytest.mark.slow

STUDY = """
models:
  tiny:
    source: tiny
    prompt: plain
    tiny: {hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 2, intermediate_size: 64}
datasets:
  sums:                       # my JSONL: question / final / worked / uid
    source: file
    path: data/sums.jsonl
    fields: {problem: question, answer: final, solution: worked, id: uid}
benchmarks:
  held-out:                   # my CSV: ref, q, a (answers written 12.0)
    source: file
    path: data/held-out.csv
    fields: {problem: q, answer: a, id: ref}
    answer_kind: number
sft: {num_train_epochs: 2, learning_rate: 3e-3, per_device_train_batch_size: 8, max_length: 96}
rl: {max_steps: 2, learning_rate: 1e-5, num_generations: 4, per_device_train_batch_size: 8,
     max_completion_length: 48, save_steps: 2}
variants:
  grpo: {objective: grpo}
seeds: [0]
evaluation: {max_new_tokens: 48, batch_size: 16}
"""


def study_snakemake(workdir, *args):
    return snakemake(*args, workdir=workdir, configfiles=[workdir / "study.yaml"])


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("own-data")
    (workdir / "data").mkdir()
    train = arith.generate(32, seed=3, levels=[1], prefix="s")
    lines = [json.dumps({"uid": row["id"], "question": row["problem"], "final": row["answer"],
                         "worked": row["solution"]}) for row in train]
    lines.insert(5, json.dumps({"uid": "no-answer", "question": "1+1=?", "final": ""}))  # a bad row
    (workdir / "data" / "sums.jsonl").write_text("\n".join(lines) + "\n")
    held_out = arith.generate(6, seed=4, levels=[1], held_out=True, prefix="h")
    with open(workdir / "data" / "held-out.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["ref", "q", "a"])
        writer.writerows([row["id"], row["problem"], f"{float(row['answer'])}"] for row in held_out)
    (workdir / "study.yaml").write_text(STUDY)
    return workdir, train, held_out


def test_the_study_plans_and_runs_from_the_yaml_mapping_alone(study):
    workdir, train, held_out = study
    plan = study_snakemake(workdir, "-n", "--quiet", "rules")
    counts = {line.split()[0]: int(line.split()[1]) for line in plan.stdout.splitlines()
              if len(line.split()) == 2 and line.split()[1].isdigit()}
    assert (counts["prepare_dataset"], counts["prepare_benchmark"], counts["sft"], counts["train"]) == (1, 1, 1, 1)

    study_snakemake(workdir, "--cores", "2")
    results = workdir / "results"

    # The training set: every row by the mapping, the bad one skipped and counted.
    prepared = files.read_jsonl(results / "data" / "sums.jsonl")
    assert prepared == [{"id": row["id"], "problem": row["problem"], "answer": row["answer"],
                         "solution": row["solution"]} for row in train]
    summary = json.loads((results / "data" / "sums.summary.json").read_text())
    assert summary["rows"] == 32 and summary["skipped_by_reason"] == {"no problem or no usable answer": 1}
    # The benchmark: the CSV's ids, answers normalised ('12.0' -> '12').
    bench = files.read_jsonl(results / "bench" / "held-out.jsonl")
    assert bench == [{"id": row["id"], "problem": row["problem"], "answer": row["answer"]} for row in held_out]

    # SFT trained on the mapped solutions (the model moved from the built one), RL ran its two steps from it,
    # and the evaluation graded every benchmark problem under its own id.
    assert largest_weight_change(results / "models" / "tiny", results / "tiny" / "sums" / "sft" / "model") > 0
    cell = results / "tiny" / "sums" / "grpo" / "seed0"
    assert list(pd.read_csv(cell / "train_log.csv")["step"]) == [1, 2]
    graded = files.read_jsonl(cell / "eval" / "final" / "held-out.jsonl")
    assert sorted(sample["id"] for sample in graded) == sorted(row["id"] for row in held_out)
    assert json.loads((cell / "eval" / "final" / "held-out.json").read_text())["n"] == len(held_out)
    table = pd.read_csv(results / "tables" / "results.csv")
    assert set(table["benchmark"]) >= {"held-out"} and set(table["dataset"]) == {"sums"}
