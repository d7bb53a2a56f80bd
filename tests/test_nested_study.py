"""A study with several SFT models per condition (``sft.seeds``): the plan, the cells' SFT models, and
tables whose intervals are over the SFT models. The plan is checked fast; one small nested study is run
through the DAG (slow)."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
import yaml

from conftest import ROOT, changed_weights, snakemake
from grpo_lambda import config as study
from grpo_lambda import fingerprint, layout
from grpo_lambda.config.report import report_options
from grpo_lambda.tables.cells import Cells
from grpo_lambda.tables.raw import read_results

DEFAULT = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def nested(**changes) -> dict:
    config = {**DEFAULT, "sft": {k: v for k, v in DEFAULT["sft"].items() if k != "seed"}}
    config["sft"]["seeds"] = [5, 9]
    config.update(changes)
    return study.validate(config)


def test_rl_seeds_are_nested_in_sft_models_in_equal_consecutive_blocks():
    config = nested(seeds=[10, 11, 12, 13])
    assert [study.sft_seed_of(config, s) for s in config["seeds"]] == [5, 5, 9, 9]
    assert study.sft_folder(config, "tiny", "arith", 12) == "tiny/arith/sft/seed9"
    assert study.sft_folder(config, "tiny", "arith") == "tiny/arith/sft"  # the condition's folder
    assert study.stage_settings(config, "sft", model="tiny", dataset="arith", sft_seed=9)["sft"]["seed"] == 9
    assert "seeds" not in study.stage_settings(config, "sft", model="tiny", dataset="arith", sft_seed=9)["sft"]
    one = study.validate(DEFAULT)
    assert study.sft_seed_of(one, 0) is None and study.sft_folder(one, "tiny", "arith", 2) == "tiny/arith/sft"


def test_the_plan_trains_one_sft_model_per_seed_and_starts_each_block_from_its_own(tmp_path):
    config = {**nested(seeds=[0, 1, 2, 3]), "results": str(tmp_path / "results")}
    path = tmp_path / "nested.yaml"
    path.write_text(yaml.safe_dump(config))
    run = snakemake("-n", "-p", configfiles=[path])
    plan = run.stdout + run.stderr
    sft_outputs = sorted(set(re.findall(r"--out \S*?/(tiny/arith/sft/seed\d+/model)", plan)))
    assert sft_outputs == ["tiny/arith/sft/seed5/model", "tiny/arith/sft/seed9/model"]
    sft_seeds = sorted(int(s) for s in re.findall(r'"seed": (\d+)', " ".join(
        line for line in plan.splitlines() if "grpo-lambda sft " in line)))
    assert sft_seeds == [5, 9]
    starts = set(re.findall(r"--base \S*?/tiny/arith/sft/seed(\d+)/model --data \S+ --cell \S+?/seed(\d+) ", plan))
    assert starts == {("5", "0"), ("5", "1"), ("9", "2"), ("9", "3")}
    evaluated = set(re.findall(r"tiny/arith/sft/seed(\d+)/eval/final", plan))
    assert evaluated == {"5", "9"}


@pytest.mark.slow
def test_a_nested_study_runs_and_its_intervals_are_over_the_sft_models(tmp_path):
    """Two SFT models × 2 RL seeds each, GRPO, 4 RL steps (the end-to-end config's SFT, whose samples disagree): each SFT model is its own (their weights differ), each
    cell trained from its block's SFT model (its fingerprint's base) and changed by it, the tables' terms name
    each RL run's SFT model as its cluster, and the results table has one SFT row per SFT model."""
    config = yaml.safe_load((ROOT / "tests" / "data" / "config-e2e.yaml").read_text())
    config["models"] = {"tiny": config["models"]["tiny"]}
    config["datasets"] = {"arith": config["datasets"]["arith"]}
    config["sft"]["seeds"] = [0, 1]
    config["rl"]["max_steps"] = 4
    config["seeds"] = [0, 1, 2, 3]
    # GRPO alone: which SFT model a cell starts from is its RL seed's block, whatever its variant
    # (config.sft_seed_of reads the seed only), and eight cells more would cost a minute of CI
    config["variants"] = {"grpo": config["variants"]["grpo"]}
    config["evaluation"]["checkpoints"] = []
    # two SFT models: no seed-level test, and no accuracy verdict read over them (that needs 6)
    config["report"] = {"descriptive": ["reward_auc", "steps_to_threshold", "primary", "per_suite_accuracy",
                                        "gain_over_sft"]}
    config["results"] = str(tmp_path / "results")
    path = tmp_path / "nested.yaml"
    path.write_text(yaml.safe_dump(config))
    snakemake("--cores", "2", configfiles=[path], timeout=3600)
    results = tmp_path / "results"
    sft = {k: results / layout.sft("tiny", "arith", k) / "model" for k in (0, 1)}
    assert changed_weights(sft[0], sft[1]), "the two SFT seeds gave the same model"
    for seed, k in ((0, 0), (1, 0), (2, 1), (3, 1)):
        cell = results / layout.cell("tiny", "arith", "grpo", seed)
        recorded = json.loads((cell / "resume" / fingerprint.FILE_NAME).read_text())
        assert recorded["base"] == fingerprint.path_digest(sft[k]), seed
        assert changed_weights(sft[k], cell / "model"), f"seed {seed} did not train"
    # The tables read the run as nested: each RL row clustered with its SFT model's row.
    validated = study.validate(config)
    data = read_results(validated, results)
    cells = Cells(data.samples, validated, report_options(validated))
    stratum = ("sft", "tiny/arith/sft")
    grpo, sft_term = (cells.terms("tiny", "arith", variant, "final", ["arith-1"])[0] for variant in ("grpo", "sft"))
    assert grpo.rows == (0, 1, 2, 3) and grpo.clusters == tuple((stratum, k) for k in (0, 0, 1, 1))
    assert sft_term.rows == (0, 1) and sft_term.clusters == ((stratum, 0), (stratum, 1))
    table = pd.read_csv(results / "tables" / "results.csv")
    assert sorted(table[table["variant"] == "sft"]["seed"].dropna().astype(int).unique()) == [0, 1]
