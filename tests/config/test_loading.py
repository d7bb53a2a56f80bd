"""A study's config as users type it: several files merged as Snakemake merges them, overrides from
`snakemake --config` and `grpo-lambda --set` given the schema's types, YAML 1.2 numbers; the CLI and
Snakemake read the same study from the same words."""

import json
import shlex
import subprocess
import sys

import pytest
import yaml

from conftest import ROOT, run_main
from grpo_lambda import config as study
from grpo_lambda.config.loading import _StrictLoader

CONFIG = ROOT / "config" / "config.yaml"


def test_a_yaml_number_without_a_point_is_a_number(tmp_path):
    text = CONFIG.read_text()
    assert "learning_rate: 3.0e-5" in text
    path = tmp_path / "study.yaml"
    path.write_text(text.replace("learning_rate: 3.0e-5", "learning_rate: 3e-5").replace(
        "learning_rate: 1.0e-3", "learning_rate: 1E-3"))
    assert yaml.safe_load(path.read_text())["rl"]["learning_rate"] == "3e-5"  # YAML 1.1, as PyYAML reads it
    config = study.load(path)
    assert config["rl"]["learning_rate"] == 3e-5 and config["sft"]["learning_rate"] == 1e-3
    for text, value in (("1e5", 1e5), ("-2.5E+3", -2500.0), ("1_000e-3", 1.0), (".5e1", 5.0), ("12", 12),
                        ("e5", "e5"), ("1e", "1e"), ("0x10", 16), ("3.0", 3.0)):
        assert yaml.load(f"x: {text}", Loader=_StrictLoader)["x"] == value, text


def test_merge_is_snakemakes_update_config():
    from snakemake.utils import update_config

    cases = [
        ({"rl": {"max_steps": 25, "trl": {"a": 1}}, "seeds": [0, 1]}, {"rl": {"max_steps": 5}, "seeds": [7]}),
        ({"rl": {"log_completions": {"every": 5}}}, {"rl": {"log_completions": None}}),
        ({"rl": None}, {"rl": {"beta": 0.1}}),
        ({"models": {"a": {"rl": {"beta": 0}}}}, {"models": {"b": {"source": "tiny"}, "a": {"rl": {"epsilon": 1}}}}),
        ({"x": [1, {"y": 2}]}, {"x": {"z": 3}}),
        ({"x": {"y": 1}}, {"x": [1]}),
    ]
    for base, overlay in cases:
        ours, theirs = json.loads(json.dumps(base)), json.loads(json.dumps(base))
        update_config(theirs, json.loads(json.dumps(overlay)))
        assert study.merge(ours, overlay) == theirs, (base, overlay)


@pytest.mark.parametrize("entry", ["rl={max_steps: 5}", "seeds=[0]", "seeds=[0, 2]", "results=2024",
                                   "results=out-1", "xy=True", "xy=1.5", "xy=", "xy={a: {b: [1, 'c']}}", "xy=null",
                                   "xy=3e-5", "xy=a=b"])
def test_a_set_value_is_read_as_snakemake_reads_config(entry):
    from snakemake.cli import parse_config

    key, _, value = entry.partition("=")
    assert study.override_value(value) == parse_config([entry])[key]


def test_overrides_take_the_schemas_types():
    coerced = study.coerce_override({"rl": {"max_steps": "5", "learning_rate": "3e-5", "bf16": "true",
                                            "log_completions": "null", "report_to": ["tensorboard"],
                                            "trl": {"top_k": "10", "mask_truncated_completions": "False",
                                                    "generation_kwargs": "x"}},
                                     "seeds": ["0", "1"], "results": 2024,
                                     "variants": {"v": {"objective": "grpo", "oar_method": "null", "epsilon_high": "0.28",
                                                        "label": "2"}},
                                     "models": {"m": {"lora": {"target_modules": "all-linear", "r": "8"}}}})
    assert coerced["rl"] == {"max_steps": 5, "learning_rate": 3e-5, "bf16": True, "log_completions": None,
                             "report_to": ["tensorboard"],
                             "trl": {"top_k": 10, "mask_truncated_completions": False, "generation_kwargs": "x"}}
    assert coerced["seeds"] == [0, 1] and coerced["results"] == "2024"
    assert coerced["variants"]["v"] == {"objective": "grpo", "oar_method": None, "epsilon_high": 0.28, "label": "2"}
    assert coerced["models"]["m"]["lora"] == {"target_modules": "all-linear", "r": 8}
    # a value no type fits stays as written, for the schema to name
    assert study.coerce_override({"rl": {"max_steps": "five"}}) == {"rl": {"max_steps": "five"}}



def test_sweep_values_reward_parameters_and_trl_unions_take_their_types():
    # Snakemake hands every scalar of --config 'sweep={...}' over as text
    coerced = study.coerce_override({"sweep": {"grpo": {"learning_rate": ["1e-5", "3e-5"], "beta": ["0", "0.04"],
                                                        "loss_type": ["dr_grpo"]}},
                                     "rl": {"rewards": [{"name": "overlong", "weight": "0", "cache_tokens": "16"}],
                                            "trl": {"trace_length": "3072", "advantage_clamp": "-0.2"}}})
    assert coerced["sweep"]["grpo"] == {"learning_rate": [1e-5, 3e-5], "beta": [0, 0.04], "loss_type": ["dr_grpo"]}
    assert coerced["rl"]["rewards"] == [{"name": "overlong", "weight": 0, "cache_tokens": 16}]
    assert coerced["rl"]["trl"] == {"trace_length": 3072, "advantage_clamp": -0.2}  # int | str, float | str
    assert study.coerce_override({"rl": {"trl": {"trace_length": "batch_max"}}})["rl"]["trl"] == {
        "trace_length": "batch_max"}
    config = study.load(CONFIG, ["sweep={grpo: {learning_rate: [1e-5, 3e-5]}}"])
    assert {name for name in config["variants"] if name.startswith("grpo.")} == {"grpo.lr_1e-5", "grpo.lr_3e-5"}

def test_set_takes_a_dotted_key_or_snakemakes_form():
    base = study.read_yaml(CONFIG)
    assert study.parse_override("rl.max_steps=5", base) == {"rl": {"max_steps": 5}}
    assert study.parse_override("rl={max_steps: 5}", base) == {"rl": {"max_steps": "5"}}
    with_dots = {"models": {"qwen-1.5b": {"source": "tiny"}}}
    assert study.parse_override("models.qwen-1.5b.rl.beta=0.1", with_dots) == {
        "models": {"qwen-1.5b": {"rl": {"beta": 0.1}}}}
    for bad in ("rl.max_steps", "=5", "rl..max_steps=5"):
        with pytest.raises(study.ConfigError, match="expected KEY=VALUE"):
            study.parse_override(bad, base)
    config = study.load(CONFIG, ["rl.max_steps=5", "seeds=[0]", "rl={learning_rate: 1e-4}", "rl.trl.top_k=3"])
    assert (config["rl"]["max_steps"], config["seeds"], config["rl"]["learning_rate"], config["rl"]["trl"]) == (
        5, [0], 1e-4, {"top_k": 3})
    assert config["rl"]["num_generations"] == 8  # the rest of rl: stays
    with pytest.raises(study.ConfigError, match=r"rl\.max_steps.*'five' is not of type 'integer'"):
        study.load(CONFIG, ["rl.max_steps=five"])


def test_snakemake_plans_with_overrides_as_users_type_them(tmp_path):
    plan = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-p", "--snakefile", str(ROOT / "Snakefile"),
                           "--directory", str(tmp_path), "--configfile", str(CONFIG),
                           "--config", "rl={max_steps: 5}", "seeds=[0]"],
                          capture_output=True, text=True, timeout=300)
    assert plan.returncode == 0, plan.stderr[-3000:]
    train = [line for line in plan.stdout.splitlines() if "grpo-lambda train --settings" in line]
    assert len(train) == 2 and all("/seed0 " in line for line in train)  # 2 variants x the one seed
    settings = json.loads(shlex.split(train[0].split("Shell command: ", 1)[-1])[3])
    assert settings["rl"]["max_steps"] == 5 and isinstance(settings["rl"]["max_steps"], int)


def _snakemake_config(workdir, words):
    """The validated config Snakemake holds, read back from the aggregate job's --settings (the whole study)."""
    plan = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-p", "--snakefile", str(ROOT / "Snakefile"),
                           "--directory", str(workdir), *words], capture_output=True, text=True, timeout=300)
    assert plan.returncode == 0, plan.stderr[-3000:]
    (line,) = [line for line in plan.stdout.splitlines() if "grpo-lambda aggregate --settings" in line]
    words = shlex.split(line.split("Shell command: ", 1)[-1])
    return json.loads(words[words.index("--settings") + 1])


def test_the_cli_and_snakemake_read_the_same_study_from_the_same_files_and_overrides(tmp_path):
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text("rl:\n  learning_rate: 5e-6\n  trl: {top_k: 4}\nseeds: [3]\nevaluation: {samples: 2}\n")
    files = [str(CONFIG), str(ROOT / "config" / "protocols" / "greedy.yaml"), str(overlay)]
    ours = run_main("validate", "--show", "--configfile", *files, "--set", "rl={max_steps: 4}",
                    "--set", "variants.grpo.epsilon_high=0.28", cwd=tmp_path)
    assert ours.returncode == 0, ours.stderr
    theirs = _snakemake_config(tmp_path, ["--configfile", *files, "--config", "rl={max_steps: 4}",
                                          "variants={grpo: {epsilon_high: 0.28}}"])
    assert json.loads(ours.stdout) == theirs
    assert (theirs["rl"]["max_steps"], theirs["rl"]["learning_rate"], theirs["rl"]["trl"], theirs["seeds"]) == (
        4, 5e-6, {"top_k": 4}, [3])
    assert theirs["variants"]["grpo"] == {"objective": "grpo", "epsilon_high": 0.28}
    assert theirs["rl"]["num_generations"] == 8 and theirs["evaluation"]["samples"] == 2


def test_snakemake_config_set_takes_the_clis_set_form(tmp_path, cli):
    """One vocabulary: `snakemake --config set='KEY.PATH=VALUE ...'` is `grpo-lambda --set KEY.PATH=VALUE ...`."""
    overrides = ["rl.max_steps=4", "models.tiny.system_prompt=Be brief", "seeds=[3]", "variants.grpo.epsilon_high=0.28"]
    ours = subprocess.run([cli, "validate", "--show", "--configfile", str(CONFIG),
                           *[word for text in overrides for word in ("--set", text)]],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert ours.returncode == 0, ours.stderr
    theirs = _snakemake_config(tmp_path, ["--configfile", str(CONFIG), "--config",
                                          "set=" + " ".join(shlex.quote(text) for text in overrides)])
    assert json.loads(ours.stdout) == theirs
    assert (theirs["rl"]["max_steps"], theirs["seeds"], theirs["models"]["tiny"]["system_prompt"]) == (4, [3], "Be brief")
    assert theirs["variants"]["grpo"]["epsilon_high"] == 0.28


def test_set_overrides_split_the_set_entry_and_keep_the_other_keys_first():
    assert study.set_overrides({"seeds": ["0"], "set": "rl.max_steps=5 'models.tiny.system_prompt=a b'"}) == [
        {"seeds": ["0"]}, "rl.max_steps=5", "models.tiny.system_prompt=a b"]
    assert study.set_overrides({"rl": {"max_steps": "5"}}) == [{"rl": {"max_steps": "5"}}]
    # Snakemake strips the quotes at both ends of a --config value: a last text quoted loses its closing one
    with pytest.raises(study.ConfigError, match=r"^set=.*: its quotes do not pair up \(Snakemake strips"):
        study.set_overrides({"set": "rl.max_steps=5 'models.tiny.system_prompt=a b"})
    with pytest.raises(study.ConfigError, match=r"^set: expected KEY.PATH=VALUE texts separated by spaces"):
        study.set_overrides({"set": {"rl": 5}})
    # a bad key given so is named as any --config value is
    with pytest.raises(study.ConfigError, match=r"^--config: invalid value at 'rl'.*'max_stepz' was unexpected"):
        study.load_naming_source(CONFIG, [{"set": "rl.max_stepz=5"}], given_as="--config")


def _plan(tmp_path, *words):
    return subprocess.run([sys.executable, "-m", "snakemake", "-n", "--snakefile", str(ROOT / "Snakefile"),
                           "--directory", str(tmp_path), *words], capture_output=True, text=True, timeout=300)


def test_a_bad_value_given_by_snakemake_config_is_one_line_naming_config_not_the_file(tmp_path):
    """As found: a 4-frame ConfigError traceback that blamed the study file for a value --config gave."""
    plan = _plan(tmp_path, "--configfile", str(CONFIG), "--config", "rl={max_steps: 0}")
    assert plan.returncode == 1
    output = plan.stdout + plan.stderr
    assert "Traceback" not in output and 'File "' not in output and "ConfigError" not in output, output
    (line,) = [line for line in plan.stderr.splitlines() if line.startswith("error: ")]
    assert line == (f"error: --config: invalid value at 'rl.max_steps': 0 is less than the minimum of 1 "
                    f"({CONFIG} alone is valid)")


def test_a_bad_value_in_the_study_file_is_one_line_naming_the_file(tmp_path):
    bad = tmp_path / "study.yaml"
    bad.write_text(CONFIG.read_text().replace("  max_steps: 25", "  max_steps: 0"))
    plan = _plan(tmp_path, "--configfile", str(bad), "--config", "seeds=[0]")
    assert plan.returncode == 1 and "Traceback" not in plan.stdout + plan.stderr
    (line,) = [line for line in plan.stderr.splitlines() if line.startswith("error: ")]
    assert line == f"error: {bad}: invalid value at 'rl.max_steps': 0 is less than the minimum of 1"


def test_a_bad_value_given_by_set_names_set():
    done = run_main("validate", "--configfile", CONFIG, "--set", "rl.max_steps=0")
    assert done.returncode == 2
    assert done.stderr.strip() == (f"grpo-lambda validate: error: --set: invalid value at 'rl.max_steps': 0 is less "
                                   f"than the minimum of 1 ({CONFIG} alone is valid)")


def test_a_key_given_twice_is_refused_naming_it_and_its_lines(tmp_path):
    text = (ROOT / "config" / "config.yaml").read_text().replace(
        "  grpo: {objective: grpo}\n", "  grpo: {objective: grpo}\n  grpo: {objective: grpo_lambda, lam: 0.5}\n")
    path = tmp_path / "twice.yaml"
    path.write_text(text)
    assert yaml.safe_load(text)["variants"]["grpo"]["objective"] == "grpo_lambda"  # what PyYAML alone keeps
    with pytest.raises(study.ConfigError, match=r"key 'grpo' is given twice \(lines \d+ and \d+\)"):
        study.load(path)
    result = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--configfile", str(path), "--directory",
                             str(tmp_path), "--snakefile", str(ROOT / "Snakefile")],
                            capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert result.returncode != 0 and "key 'grpo' is given twice" in result.stdout + result.stderr


@pytest.mark.parametrize("protocol", ["avg32", "greedy"])
def test_an_evaluation_protocol_merges_over_a_study(protocol, tmp_path):
    from snakemake.utils import update_config

    merged = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    update_config(merged, yaml.safe_load((ROOT / "config" / "protocols" / f"{protocol}.yaml").read_text()))
    config = study.validate(merged)
    assert config["report"]["metric"] == ("avg" if protocol == "avg32" else "greedy")
    assert config["evaluation"]["greedy"] is (protocol == "greedy")
    assert config["evaluation"]["max_new_tokens"] == 3000  # the study's own settings stay
    plan = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--quiet", "rules", "--directory", str(tmp_path),
                           "--snakefile", str(ROOT / "Snakefile"), "--configfile", str(ROOT / "config" / "config.yaml"),
                           str(ROOT / "config" / "protocols" / f"{protocol}.yaml")],
                          capture_output=True, text=True, timeout=600)
    assert plan.returncode == 0, plan.stderr[-3000:]


@pytest.mark.parametrize("overlay", ["open-r1", "self-distill"])
def test_an_sft_overlay_merges_over_the_paper_grid(overlay):
    from snakemake.utils import update_config

    merged = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    update_config(merged, yaml.safe_load((ROOT / "config" / "sft" / f"{overlay}.yaml").read_text()))
    config = study.validate(merged)
    shared = overlay == "open-r1"
    assert [study.sft_is_shared(config, model) for model in config["models"]] == [shared] * 4
    assert study.sft_folder(config, "r1-qwen-7b", "gsm8k") == ("r1-qwen-7b/sft" if shared else "r1-qwen-7b/gsm8k/sft")
    settings = study.stage_settings(config, "sft", model="r1-qwen-7b", dataset="gsm8k")
    assert settings["sft"]["packing"] is shared and settings["sft"]["learning_rate"] == 2.0e-5
    assert settings["dataset"] == (None if shared else "gsm8k")  # one job for all the model's training sets


def test_a_model_set_to_null_by_an_overlay_leaves_the_study():
    """Snakemake's merge cannot remove a key; a model set to null is left out (config/sft/no-sft.yaml narrows the
    paper grid to §4.2's model so), and a study left with no model is refused."""
    merged = {}
    for name in ("paper.yaml", "sft/think-answer.yaml", "sft/no-sft.yaml"):
        study.merge(merged, yaml.safe_load((ROOT / "config" / name).read_text()))
    assert merged["models"]["r1-qwen-7b"] is None
    config = study.validate(merged)
    assert list(config["models"]) == ["qwen-math-1.5b"]
    assert len(study.rl_cells(config)) == 36 and {cell["model"] for cell in study.rl_cells(config)} == {"qwen-math-1.5b"}
    assert config["sft"]["num_train_epochs"] == 0
    with pytest.raises(study.ConfigError, match="models"):
        study.validate({**merged, "models": {name: None for name in merged["models"]}})
