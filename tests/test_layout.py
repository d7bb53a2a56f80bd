"""The results folder's layout of an RL cell and of the SFT stage is spelled out in grpo_lambda.layout alone."""

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


def test_the_sft_paths():
    assert layout.sft("tiny", "arith") == "tiny/arith/sft"
    assert layout.sft("tiny", None) == "tiny/sft"  # one SFT model for all the model's training sets
    assert layout.sft_evaluation("tiny", "arith", "arith-1", "json") == "tiny/arith/sft/eval/final/arith-1.json"
    assert layout.sft("{model}", "{dataset}") == "{model}/{dataset}/sft"


# the files that name an SFT folder: the rules, the config's sft_folder, the tables' reader
SFT_READERS = ("workflow/rules/common.smk", "workflow/rules/sft.smk", "workflow/rules/eval.smk",
               "src/grpo_lambda/config/settings.py", "src/grpo_lambda/tables/collect.py")


def test_the_rules_config_and_tables_take_the_sft_folder_from_layout():
    for name in SFT_READERS:
        text = (ROOT / name).read_text(encoding="utf-8")
        assert "layout.sft" in text, name
        spelled = re.findall(r".*(?:\}/sft[/\"]|\"/sft[/\"]).*", text)  # job logs (logs/.../sft.log) aside
        assert not spelled, (name, spelled)
