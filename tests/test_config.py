import copy
import subprocess
import sys

import pytest
import yaml

from conftest import ROOT
from grpo_lambda import config as study

DEFAULT = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def test_the_shipped_configs_are_valid():
    for path in sorted((ROOT / "config").glob("*.yaml")):
        config = study.load(path)
        assert study.rl_cells(config), path


def test_defaults_are_filled_in():
    config = study.validate({k: v for k, v in DEFAULT.items() if k != "evaluation"})
    assert config["evaluation"]["backend"] == "hf"
    assert config["evaluation"]["checkpoints"] == []


def broken(mutate):
    config = copy.deepcopy(DEFAULT)
    mutate(config)
    return config


BAD_CONFIGS = {
    "misspelled top-level key": (lambda c: c.update(seed=[0]), r"seed"),
    "misspelled rl key": (lambda c: c["rl"].update(max_step=10), r"'rl'.*max_step"),
    "unknown objective": (lambda c: c["variants"].update(x={"objective": "ppo"}), r"variants\.x\.objective"),
    "lambda out of range": (lambda c: c["variants"].update(x={"objective": "grpo_lambda", "lam": 1.5}),
                            r"variants\.x\.lam"),
    "grpo_lambda without lambda": (lambda c: c["variants"].update(x={"objective": "grpo_lambda"}),
                                   r"variants\.x\.lam is required"),
    "unknown trace style": (lambda c: c["variants"].update(x={"objective": "grpo_lambda", "lam": 0.9,
                                                              "style": "late"}), r"variants\.x\.style"),
    "seed of the wrong type": (lambda c: c.update(seeds=["0"]), r"seeds\.0"),
    "no seeds": (lambda c: c.update(seeds=[]), r"'seeds'"),
    "checkpoint past the end": (lambda c: c["evaluation"].update(checkpoints=[10_000]),
                                r"evaluation\.checkpoints \[10000\]"),
    "model names an unknown variant": (lambda c: c["models"]["tiny"].update(variants=["nope"]),
                                       r"models\.tiny\.variants names \['nope'\]"),
    "a variant called sft": (lambda c: c["variants"].update(sft={"objective": "grpo"}), r"'variants'"),
    "unknown prompt template": (lambda c: c["models"]["tiny"].update(prompt="chatml"), r"models\.tiny\.prompt"),
    "unknown benchmark source": (lambda c: c["benchmarks"]["arith-1"].update(source="web"),
                                 r"benchmarks\.arith-1\.source"),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_bad_configs_fail_with_a_message_that_names_the_key(case):
    mutate, message = BAD_CONFIGS[case]
    with pytest.raises(study.ConfigError, match=message):
        study.validate(broken(mutate))


def test_snakemake_refuses_a_bad_config_before_any_job(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(broken(lambda c: c["rl"].update(learning_rate=-1))))
    result = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--configfile", str(bad), "--directory",
                             str(tmp_path), "--snakefile", str(ROOT / "Snakefile")],
                            capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert result.returncode != 0
    assert "rl.learning_rate" in result.stdout + result.stderr
    assert not (tmp_path / "results").exists()


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
    # One evaluation job per checkpoint covers every suite.
    assert counts["evaluate"] == cells * (1 + len(config["evaluation"]["checkpoints"]))
    assert counts["evaluate_sft"] == 1
    assert suites == 5
    assert counts["aggregate"] == 1


def test_the_comparison_grid_changes_only_the_variants_and_the_steps_per_generation():
    """compare.yaml must differ from the default in the methods alone, or its table compares more than methods."""
    default = study.load(ROOT / "config" / "config.yaml")
    compare = study.load(ROOT / "config" / "compare.yaml")
    for block in ("models", "datasets", "benchmarks", "sft", "seeds", "evaluation"):
        assert compare[block] == default[block], block
    assert {k: v for k, v in compare["rl"].items() if k != "trl"} == {k: v for k, v in default["rl"].items() if k != "trl"}
    assert compare["results"] != default["results"]
    assert set(default["variants"]) & set(compare["variants"]) <= {"grpo", "recent-trace-0.99"}
    for name in set(default["variants"]) & set(compare["variants"]):
        assert compare["variants"][name] == default["variants"][name], name
