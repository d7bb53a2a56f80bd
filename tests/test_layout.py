"""The results folder's layout of an RL cell is spelled out in grpo_lambda.layout alone."""

import re
from pathlib import Path

from grpo_lambda import layout
from grpo_lambda.tables.collect import eval_file

ROOT = Path(__file__).resolve().parents[1]
READERS = ("workflow/rules/common.smk", "src/grpo_lambda/tables/collect.py", "src/grpo_lambda/status.py",
           "src/grpo_lambda/train.py")


def test_a_cells_paths():
    assert layout.cell("tiny", "arith", "grpo", 3) == "tiny/arith/grpo/seed3"
    assert layout.train_log("tiny", "arith", "grpo", 3) == "tiny/arith/grpo/seed3/train_log.csv"
    assert layout.evaluation("tiny", "arith", "grpo", 3, 20, "arith-1") == "tiny/arith/grpo/seed3/eval/20/arith-1.jsonl"
    # Snakemake's wildcards give the rule's pattern
    assert layout.cell("{model}", "{dataset}", "{variant}", "{seed}") == "{model}/{dataset}/{variant}/seed{seed}"
    assert eval_file("r", "tiny", "arith", "grpo", 3, "final", "arith-1") == Path(
        "r/tiny/arith/grpo/seed3/eval/final/arith-1.jsonl")
    assert eval_file("r", "tiny", "arith", "sft", None, "final", "arith-1") == Path(
        "r/tiny/arith/sft/eval/final/arith-1.jsonl")


def test_the_rules_tables_status_and_training_take_the_cell_folder_from_layout():
    for name in READERS:
        text = (ROOT / name).read_text(encoding="utf-8")
        assert "layout." in text, name
        spelled = re.findall(r".*(?:seed\{|[\"/]train_log\.csv\").*", text)
        assert not spelled, (name, spelled)
