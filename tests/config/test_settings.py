"""The cells and settings of the shipped studies (``grpo_lambda.config.settings``): the default plan has
one job per cell and stage, and the studies meant to be compared with another differ from it only in
what they compare."""

import subprocess
import sys

from conftest import ROOT
from grpo_lambda import config as study


def test_the_default_plan_has_every_stage(tmp_path):
    result = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--quiet", "rules", "--snakefile",
                             str(ROOT / "Snakefile"), "--directory", str(tmp_path), "--configfile",
                             str(ROOT / "config" / "config.yaml")], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    counts = {line.split()[0]: int(line.split()[1]) for line in result.stdout.splitlines()
              if len(line.split()) == 2 and line.split()[1].isdigit()}
    config = study.load(ROOT / "config" / "config.yaml")
    cells = len(study.rl_cells(config))
    suites = len(config["benchmarks"])
    assert counts["sft"] == 1
    assert counts["train"] == cells
    # One evaluation job per checkpoint covers every suite; with the hf backend the train job evaluates the
    # final model, so the evaluate rule runs for the intermediate checkpoints alone.
    assert config["evaluation"]["backend"] == "hf"
    assert counts.get("evaluate", 0) == cells * len(config["evaluation"]["checkpoints"])
    assert counts["evaluate_sft"] == 1
    assert suites == 5
    assert counts["aggregate"] == 1


def test_the_comparison_grid_changes_only_the_variants_and_the_steps_per_generation():
    """compare.yaml must differ from the default in the methods alone, or its table compares more than methods. It
    runs more seeds (8, so that its paired verdicts resolve smaller gaps), and its SFT model and seeds are draws
    its study never ran before (report.history): the SFT stage differs from the default's in its seed alone."""
    default = study.load(ROOT / "config" / "config.yaml")
    compare = study.load(ROOT / "config" / "compare.yaml")
    for block in ("models", "datasets", "benchmarks", "evaluation"):
        assert compare[block] == default[block], block
    assert {k: v for k, v in compare["sft"].items() if k != "seed"} == \
        {k: v for k, v in default["sft"].items() if k != "seed"}
    before = compare["report"]["history"]["seeds_run_before"]
    assert len(compare["seeds"]) >= 8 and not set(compare["seeds"]) & set(before["rl"])
    assert compare["sft"]["seed"] not in before["sft"]
    assert {k: v for k, v in compare["rl"].items() if k != "trl"} == {k: v for k, v in default["rl"].items() if k != "trl"}
    assert compare["results"] != default["results"]
    assert set(default["variants"]) & set(compare["variants"]) <= {"grpo", "recent-trace-0.99"}
    for name in set(default["variants"]) & set(compare["variants"]):
        assert compare["variants"][name] == default["variants"][name], name


def test_the_methods_at_paper_scale_start_and_train_as_the_paper_grid():
    """config/beyond.yaml's cells must be comparable with the grid's: the same SFT stage and RL settings."""
    paper = study.load(ROOT / "config" / "paper.yaml")
    beyond = study.load(ROOT / "config" / "beyond.yaml")
    assert beyond["sft"] == paper["sft"]
    assert {k: v for k, v in beyond["rl"].items() if k != "trl"} == {k: v for k, v in paper["rl"].items() if k != "trl"}
    assert beyond["evaluation"] == paper["evaluation"]
    assert beyond["rl"]["trl"]["trace_length"] == paper["rl"]["trl"]["trace_length"]
