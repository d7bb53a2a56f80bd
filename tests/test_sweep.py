"""Sweeps: a variant's own rl settings and a `sweep:` block expanded into variants with readable names, each
value its own cell folder and its own resume fingerprint."""

import copy
import re
import subprocess
import sys

import pytest
import yaml

from conftest import ROOT
from grpo_lambda import config as study
from grpo_lambda import fingerprint, layout, train, variants

DEFAULT = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def swept(grid, base="grpo", **changes):
    config = copy.deepcopy(DEFAULT)
    config["sweep"] = {base: grid}
    config.update(changes)
    return config


@pytest.mark.parametrize("value, text", [(1e-5, "1e-5"), (3.0e-6, "3e-6"), (1.5e-05, "1.5e-5"), (0.04, "0.04"),
                                         (1.0, "1"), (8, "8"), (1e20, "1e20"), (True, "true"), (None, "none"),
                                         ("both", "both")])
def test_a_swept_value_reads_as_written(value, text):
    assert variants.sweep_value_text(value) == text


def test_a_sweep_replaces_its_variant_by_one_variant_per_point():
    config = study.validate(swept({"learning_rate": [1e-5, 3e-5], "beta": [0.0, 0.04]}))
    names = list(config["variants"])
    assert names == ["grpo.lr_1e-5.beta_0", "grpo.lr_1e-5.beta_0.04", "grpo.lr_3e-5.beta_0",
                     "grpo.lr_3e-5.beta_0.04", "recent-trace-0.99"]  # in the place of the base, first key slowest
    assert config["variants"]["grpo.lr_3e-5.beta_0.04"] == {"objective": "grpo", "learning_rate": 3e-5, "beta": 0.04}
    assert variants.swept_variants(config)["grpo.lr_1e-5.beta_0.04"] == ("grpo", {"learning_rate": 1e-5, "beta": 0.04})
    assert study.validate(config) == config  # a validated config validates to itself


def test_a_model_that_lists_the_swept_variant_gets_its_points_and_a_label_carries_over():
    config = swept({"lam": [0.9, 0.99]}, base="recent-trace-0.99")
    config["variants"]["recent-trace-0.99"]["label"] = "GRPO-λ"
    config["models"]["tiny"]["variants"] = ["recent-trace-0.99", "grpo"]
    config = study.validate(config)
    assert config["models"]["tiny"]["variants"] == ["recent-trace-0.99.lam_0.9", "recent-trace-0.99.lam_0.99", "grpo"]
    assert config["variants"]["recent-trace-0.99.lam_0.9"]["label"] == "GRPO-λ lam=0.9"


@pytest.mark.parametrize("sweep, culprit", [
    ({"ppo": {"learning_rate": [1e-5]}}, r"sweep\.ppo: there is no variant 'ppo' to sweep"),
    ({"grpo": {"lr": [1e-5]}}, r"sweep\.grpo\.lr: unknown variant key"),
    ({"grpo": {"label": ["a", "b"]}}, r"sweep\.grpo\.label: 'label' names the variant"),
    ({"grpo": {"learning_rate": [1e-5, -1.0]}}, r"sweep\.grpo\.learning_rate\[1\]: -1\.0 is less than or equal to"),
    ({"grpo": {"learning_rate": [1e-5, 1.0e-5]}}, r"sweep\.grpo: two points share the name 'grpo\.lr_1e-5'"),
    ({"grpo": {"lam": [0.5]}}, r"variants\.grpo\.lam_0\.5\.lam applies to objective"),
    ({"grpo": {"num_generations": [5]}}, r"variants\.grpo\.num_generations_5\.num_generations \(5\) must divide"),
    ({"grpo": {"lr_scheduler_type": ["a/b"]}}, r"sweep\.grpo: the point 'grpo\.lr_scheduler_type_a/b' is not a name"),
    ({"grpo": {"learning_rate": []}}, r"invalid value at 'sweep\.grpo\.learning_rate': \[\] should be non-empty"),
])
def test_a_bad_sweep_is_refused_naming_it(sweep, culprit):
    config = copy.deepcopy(DEFAULT)
    config["sweep"] = sweep
    with pytest.raises(study.ConfigError, match=culprit):
        study.validate(config)


def test_a_point_named_like_a_written_variant_is_refused():
    config = swept({"learning_rate": [1e-5]})
    config["variants"]["grpo.lr_1e-5"] = {"objective": "grpo"}
    with pytest.raises(study.ConfigError, match=r"the swept variant 'grpo\.lr_1e-5' is also defined under variants"):
        study.validate(config)


def test_a_variants_rl_settings_reach_trl_over_the_studys(tmp_path):
    config = study.validate(swept({"learning_rate": [1e-5, 3e-4], "num_generations": [4]}))
    for name, lr in (("grpo.lr_1e-5.num_generations_4", 1e-5), ("grpo.lr_0.0003.num_generations_4", 3e-4)):
        settings = study.stage_settings(config, "train", model="tiny", dataset="arith", variant=name)
        args = train.build_config(settings, output_dir=str(tmp_path), seed=0)
        assert (args.learning_rate, args.num_generations) == (lr, 4) != (DEFAULT["rl"]["learning_rate"],
                                                                         DEFAULT["rl"]["num_generations"])


def cells(config, fingerprint_inputs):
    """cell folder -> resume fingerprint, for every RL cell of a config."""
    base, data = fingerprint_inputs
    return {layout.cell(c["model"], c["dataset"], c["variant"], c["seed"]):
            fingerprint.compute(study.stage_settings(config, "train", model=c["model"], dataset=c["dataset"],
                                                     variant=c["variant"]), seed=c["seed"], base=base, data_path=data)
            for c in study.rl_cells(config)}


def test_changing_one_swept_value_never_resumes_or_supersedes_anothers_cell(tmp_path, fingerprint_inputs):
    first = cells(study.validate(swept({"learning_rate": [1e-5, 3e-5]}, seeds=[0, 1])), fingerprint_inputs)
    second = cells(study.validate(swept({"learning_rate": [1e-5, 1e-4]}, seeds=[0, 1])), fingerprint_inputs)
    kept, dropped, added = "tiny/arith/grpo.lr_1e-5/seed0", "tiny/arith/grpo.lr_3e-5/seed0", \
        "tiny/arith/grpo.lr_0.0001/seed0"
    assert {kept, dropped} <= set(first) and {kept, added} <= set(second) and dropped not in second
    assert len({folder for folder in first if folder.startswith("tiny/arith/grpo.")}) == 4  # 2 values x 2 seeds
    assert first[kept] == second[kept]  # the untouched value's cell: same settings, same fingerprint
    assert first[dropped]["settings"] != second[added]["settings"]  # the learning rate is in the hashed settings

    # Train-state stand-ins: the kept cell claimed under the first sweep, then under the second.
    for folder, fingerprints in ((kept, first), (dropped, first), (kept, second), (added, second)):
        cell = tmp_path / folder
        fingerprint.claim(cell, fingerprints[folder], fresh=False)
        (cell / "train_log.csv").touch()
    assert not list(tmp_path.rglob("superseded-*"))  # nothing was moved aside: each value resumes its own state
    assert (tmp_path / dropped / "train_log.csv").exists()
    # The same cell name with another value (a variant edited in place) does supersede: the value is hashed.
    fingerprint.claim(tmp_path / kept, second[added], fresh=False)
    assert len(list((tmp_path / kept).glob("superseded-*"))) == 1


def planned_train_folders(config_path, directory):
    result = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--configfile", str(config_path), "--directory",
                             str(directory), "--snakefile", str(ROOT / "Snakefile")],
                            capture_output=True, text=True, cwd=directory, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:] + result.stdout[-3000:]
    return sorted({match.group(1) for match in re.finditer(r"results/(\S+)/train_log\.csv", result.stdout)})


def test_a_sweep_over_two_learning_rates_plans_two_cell_folders_per_seed(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(swept({"learning_rate": [1e-5, 3e-5]}, seeds=[0, 1])))
    assert planned_train_folders(path, tmp_path) == [
        "tiny/arith/grpo.lr_1e-5/seed0", "tiny/arith/grpo.lr_1e-5/seed1",
        "tiny/arith/grpo.lr_3e-5/seed0", "tiny/arith/grpo.lr_3e-5/seed1",
        "tiny/arith/recent-trace-0.99/seed0", "tiny/arith/recent-trace-0.99/seed1"]


def test_each_sweep_point_trains_its_own_value_over_the_base_variants():
    """The base variant sets lam 0.99 itself; a sweep over lam [0.9, 0.5] must give its two cells λ 0.9 and 0.5
    in their trainer config (not the base's 0.99 twice), and keep the base's other keys (style, form)."""
    assert variants.expand_sweep({"base": {"objective": "grpo_lambda", "lam": 0.99, "style": "recent"}},
                                 {"base": {"lam": [0.9, 0.5]}}) == {
        "base.lam_0.9": {"objective": "grpo_lambda", "lam": 0.9, "style": "recent"},
        "base.lam_0.5": {"objective": "grpo_lambda", "lam": 0.5, "style": "recent"}}
    config = study.validate(swept({"lam": [0.9, 0.5]}, base="recent-trace-0.99"))
    trained = {}
    for name in ("recent-trace-0.99.lam_0.9", "recent-trace-0.99.lam_0.5"):
        settings = study.stage_settings(config, "train", model="tiny", dataset="arith", variant=name)
        args = variants.variant_config_kwargs(settings["variant"])
        trained[name] = (args["trace_lambda"], args["trace_style"], args["trace_form"])
    assert trained == {"recent-trace-0.99.lam_0.9": (0.9, "recent", "relative"),
                       "recent-trace-0.99.lam_0.5": (0.5, "recent", "relative")}
