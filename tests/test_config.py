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
    # Accepted by the schema alone, refused by what no run can mean:
    "empty results folder": (lambda c: c.update(results=""), r"'results'"),
    "results at the filesystem root": (lambda c: c.update(results="/"), r"results '/' is the filesystem root"),
    "results at the root by another name": (lambda c: c.update(results="/tmp/.."), r"filesystem root"),
    "a model with no variants": (lambda c: c["models"]["tiny"].update(variants=[]), r"models\.tiny\.variants"),
    "a model with no datasets": (lambda c: c["models"]["tiny"].update(datasets=[]), r"models\.tiny\.datasets"),
    "lambda NaN": (lambda c: c["variants"].update(x={"objective": "grpo_lambda", "lam": float("nan")}),
                   r"variants\.x\.lam is not a finite number"),
    "learning rate infinite": (lambda c: c["rl"].update(learning_rate=float("inf")),
                               r"rl\.learning_rate is not a finite number"),
    "a seed with a point": (lambda c: c.update(seeds=[0, 1.0]), r"seeds\[1\] must be a whole number"),
    "a seed that is a boolean": (lambda c: c.update(seeds=[True]), r"seeds\.0"),
    "an absurd completion length": (lambda c: c["rl"].update(max_completion_length=10**9),
                                    r"rl\.max_completion_length"),
    "an absurd evaluation length": (lambda c: c["evaluation"].update(max_new_tokens=10**9),
                                    r"evaluation\.max_new_tokens"),
    "an unknown report option": (lambda c: c.update(report={"bootstraps": 10}), r"report: unknown option.*bootstraps"),
}


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


# ---- cross-checks that would otherwise fail inside a job -----------------------------------------

def _rl_trl(**trl):
    return lambda c: c["rl"].update(trl=trl)


CROSS_CHECKS = {
    "unknown rl.trl key": (_rl_trl(steps_per_generaton=2), r"config: rl\.trl\.steps_per_generaton is not a field"),
    "rl.trl key the pipeline sets": (_rl_trl(max_steps=3), r"rl\.trl\.max_steps is set by the pipeline itself; set rl\.max_steps"),
    "vLLM under rl.trl, which the launcher never reads": (_rl_trl(vllm_mode="server"),
                                                        r"rl\.trl\.vllm_mode is set by the pipeline itself; set rl\.vllm_mode"),
    "vLLM server mode across nodes": (lambda c: (c["rl"].update(use_vllm=True, vllm_mode="server"),
                                                 c["models"]["tiny"].update(nodes=2)),
                                      r"rl\.vllm_mode: server mode starts the server inside a one-node job"),
    "a fixed trace n shorter than a completion": (_rl_trl(trace_length=16),
                                                  r"rl\.trl\.trace_length \(16\) is shorter than the completions "
                                                  r"variant 'grpo' can write \(96 tokens"),
    "rl.trl value of the wrong type": (_rl_trl(steps_per_generation="two"),
                                       r"rl\.trl\.steps_per_generation is 'two' \(str\); TRL's field is int \| None"),
    "rl.trl flag given as text": (_rl_trl(mask_truncated_completions="yes"),
                                  r"rl\.trl\.mask_truncated_completions is 'yes' \(str\); TRL's field is bool"),
    "rl.trl count given as a flag": (_rl_trl(num_iterations=True), r"rl\.trl\.num_iterations is True \(bool\)"),
    "rl.trl number given as text": (_rl_trl(top_k="50"), r"rl\.trl\.top_k is '50'"),
    "group size does not divide the batch": (lambda c: c["rl"].update(num_generations=5),
                                             r"rl\.num_generations \(5\) must divide .* = 32"),
    "group size vs steps_per_generation": (lambda c: c["rl"].update(per_device_train_batch_size=4, trl={
        "steps_per_generation": 1}), r"num_generations \(8\) must divide .*steps_per_generation 1 = 4"),
    "both generation batch keys": (_rl_trl(steps_per_generation=2, generation_batch_size=64),
                                   r"steps_per_generation or generation_batch_size"),
    "a per-model batch": (lambda c: c["models"]["tiny"].update(rl={"per_device_train_batch_size": 12}),
                          r"config: rl\.num_generations \(8\) must divide .*per_device_train_batch_size 12 x"),
    "a per-model rl.trl key": (lambda c: c["models"]["tiny"].update(rl={"trl": {"num_generation": 4}}),
                               r"models\.tiny\.rl\.trl\.num_generation is not a field"),
    "variant key of another objective": (lambda c: c["variants"].update(x={"objective": "grpo", "lam": 0.9}),
                                         r"variants\.x\.lam applies to objective grpo_lambda / ptrace / strace only"),
    "trace style for ptrace": (lambda c: c["variants"].update(x={"objective": "ptrace", "lam": 0.9, "style": "both"}),
                               r"variants\.x\.style applies to objective grpo_lambda only, not 'ptrace'"),
    "OAR parameter without a method": (lambda c: c["variants"].update(x={"objective": "grpo", "oar_boost": 2.0}),
                                       r"variants\.x\.oar_boost needs variants\.x\.oar_method"),
    "dataset not in the registry": (lambda c: c["datasets"].update(gsm9k={"source": "registry"}),
                                    r"datasets\.gsm9k: 'gsm9k' is not in the dataset registry"),
    "benchmark name not in the registry": (lambda c: c["benchmarks"].update(x={"source": "registry", "name": "aime25"}),
                                           r"benchmarks\.x\.name: 'aime25' is not in the dataset registry"),
    "local model folder that does not exist": (lambda c: c["models"]["tiny"].update(source="./models/nope"),
                                               r"models\.tiny\.source: the local model folder './models/nope' does not exist"),
    "dataset path that does not exist": (lambda c: c["datasets"].update(m={"source": "registry", "name": "math12k",
                                                                          "path": "/no/such/file.jsonl"}),
                                         r"datasets\.m\.path: '/no/such/file.jsonl' does not exist"),
    "checkpoint of one model past its run": (lambda c: c["models"]["tiny"].update(checkpoints=[25]),
                                             r"models\.tiny\.checkpoints \[25\] must be below the run's 25 steps"),
    "per-model max_steps below a checkpoint": (lambda c: (c["evaluation"].update(checkpoints=[10]),
                                                          c["models"]["tiny"].update(rl={"max_steps": 10})),
                                               r"evaluation\.checkpoints \[10\] must be below the run's 10 steps"),
    "unknown reward": (lambda c: c["rl"].update(reward="lenient"), r"rl\.reward"),
}


@pytest.mark.parametrize("case", sorted(CROSS_CHECKS))
def test_cross_checks_fail_before_any_job_with_one_line_naming_the_key(case):
    mutate, message = CROSS_CHECKS[case]
    with pytest.raises(study.ConfigError, match=message) as error:
        study.validate(broken(mutate))
    assert "\n" not in str(error.value)


def test_what_the_cross_checks_accept():
    ok = [lambda c: c["rl"].update(per_device_train_batch_size=4, gradient_accumulation_steps=2),
          lambda c: c["rl"].update(per_device_train_batch_size=4, trl={"steps_per_generation": 2}),
          lambda c: c["rl"].update(trl={"generation_batch_size": 64, "num_iterations": 2, "trace_lambda": 0.5}),
          lambda c: c["rl"].update(reward="strict"),
          lambda c: c["variants"].update(x={"objective": "strace", "lam": 0.9, "strace_quantile": 0.8}),
          lambda c: c["datasets"].update(gsm8k={"source": "registry", "path": str(ROOT / "tests/data/rehearsal/amc.jsonl")}),
          lambda c: c["models"].update(q={"source": "Qwen/Qwen2.5-Math-1.5B-Instruct"})]
    for mutate in ok:
        study.validate(broken(mutate))


def test_a_local_model_folder_needs_a_config(tmp_path):
    with pytest.raises(study.ConfigError, match=r"models\.tiny\.source: .* holds no config.json"):
        study.validate(broken(lambda c: c["models"]["tiny"].update(source=str(tmp_path))))
    (tmp_path / "config.json").write_text("{}")
    study.validate(broken(lambda c: c["models"]["tiny"].update(source=str(tmp_path))))


def test_validate_prints_one_line_and_exits_2(tmp_path, cli):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(broken(_rl_trl(num_generatons=4))))
    result = subprocess.run([cli, "validate", "--configfile", str(bad)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "rl.trl.num_generatons is not a field" in result.stderr
    missing = subprocess.run([cli, "validate", "--configfile", str(tmp_path / "none.yaml")], capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr and "none.yaml" in missing.stderr


def test_the_trl_fields_read_from_source_are_the_config_classes_fields():
    import dataclasses

    from grpo_lambda.trainer_config import GRPOLambdaConfig

    fields = study.trl_config_fields()
    assert set(fields) == {field.name for field in dataclasses.fields(GRPOLambdaConfig)}
    defaults = {field.name: field.default for field in dataclasses.fields(GRPOLambdaConfig)}
    for key in ("per_device_train_batch_size", "num_generations", "gradient_accumulation_steps",
                "steps_per_generation", "generation_batch_size"):
        assert fields[key] == defaults[key], key


def test_trl_field_types_accept_trls_own_defaults_and_yaml_numbers():
    """Every literal default of GRPOLambdaConfig passes the type check its annotation gives (TRL's own
    values are the independent truth here); an integer passes for a float, a bool never for a number."""
    checked = 0
    for key, default in study.trl_config_fields().items():
        if default is not None:
            assert study.trl_type_error(key, default) is None, (key, default)
            checked += 1
    assert checked > 50
    assert study.trl_type_error("beta", 0) is None and study.trl_type_error("beta", None) is not None
    assert study.trl_type_error("temperature", False) is not None
    assert study.trl_type_error("steps_per_generation", None) is None
    assert study.trl_type_error("report_to", ["tensorboard"]) is None


@pytest.mark.parametrize("per_device,accumulation,steps,batch,generations", [
    (32, 1, None, None, 8), (32, 1, None, None, 5), (4, 2, None, None, 8), (4, 1, 2, None, 8), (4, 1, 3, None, 8),
    (8, 1, None, 24, 8), (8, 1, None, 20, 4), (6, 2, None, None, 4), (6, 1, None, None, 4)])
def test_batch_divisibility_agrees_with_trl(per_device, accumulation, steps, batch, generations, tmp_path):
    from grpo_lambda.trainer_config import GRPOLambdaConfig

    trl = {key: value for key, value in (("steps_per_generation", steps), ("generation_batch_size", batch))
           if value is not None}
    try:
        GRPOLambdaConfig(output_dir=str(tmp_path), per_device_train_batch_size=per_device, num_generations=generations,
                         gradient_accumulation_steps=accumulation, report_to="none", use_cpu=True, bf16=False,
                         **trl)
        trl_accepts = True
    except ValueError:
        trl_accepts = False
    mutate = lambda c: c["rl"].update(per_device_train_batch_size=per_device, num_generations=generations,  # noqa: E731
                                      gradient_accumulation_steps=accumulation, trl=trl)
    try:
        study.validate(broken(mutate))
        we_accept = True
    except study.ConfigError:
        we_accept = False
    assert we_accept == trl_accepts


def test_a_lora_model_without_peft_is_refused_before_any_job(monkeypatch):
    import importlib.util

    config = study.load(str(ROOT / "config/rehearsal.yaml"))  # one of its models trains with LoRA
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "peft" else real_find_spec(name, *a))
    with pytest.raises(study.ConfigError, match=r"models\.tiny-distill\.lora needs the peft package"):
        study.validate(config)
    assert importlib.util.find_spec("peft") is None
    monkeypatch.undo()
    assert importlib.util.find_spec("peft") is not None, "peft is in envs/requirements-cpu.txt: the rehearsal needs it"


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


def test_a_metric_without_its_completions_is_refused_by_name():
    config = copy.deepcopy(DEFAULT)
    config["report"] = {"metric": "avg"}
    with pytest.raises(study.ConfigError, match="report.metric avg needs sampled completions"):
        study.validate(config)
    config["report"] = {}
    config["evaluation"] = {**config.get("evaluation", {}), "greedy": False, "samples": 4}
    with pytest.raises(study.ConfigError, match="report.metric greedy needs the greedy pass"):
        study.validate(config)


def test_the_methods_at_paper_scale_start_and_train_as_the_paper_grid():
    """config/beyond.yaml's cells must be comparable with the grid's: the same SFT stage and RL settings."""
    paper = study.load(ROOT / "config" / "paper.yaml")
    beyond = study.load(ROOT / "config" / "beyond.yaml")
    assert beyond["sft"] == paper["sft"]
    assert {k: v for k, v in beyond["rl"].items() if k != "trl"} == {k: v for k, v in paper["rl"].items() if k != "trl"}
    assert beyond["evaluation"] == paper["evaluation"]
    assert beyond["rl"]["trl"]["trace_length"] == paper["rl"]["trl"]["trace_length"]


# --- a checkpoint at max_steps is refused ----------------------------------------------------------


def test_checkpoint_at_max_steps_is_refused_and_one_before_is_kept():
    steps = DEFAULT["rl"]["max_steps"]
    config = copy.deepcopy(DEFAULT)
    config["evaluation"]["checkpoints"] = [steps]
    with pytest.raises(study.ConfigError, match=rf"evaluation\.checkpoints \[{steps}\]"):
        study.validate(config)
    config["evaluation"]["checkpoints"] = [steps - 1]
    assert study.validate(config)["evaluation"]["checkpoints"] == [steps - 1]


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


def test_the_open_r1_sft_set_is_named_once_for_the_study_and_from_the_registry():
    config = copy.deepcopy(DEFAULT)
    config["sft"] = {**config.get("sft", {}), "data": "open_r1", "open_r1": {"name": "bespoke-stratos-18k"}}
    with pytest.raises(study.ConfigError, match=r"sft\.open_r1\.name: 'bespoke-stratos-18k' is not an SFT set"):
        study.validate(config)
    config["sft"]["open_r1"] = {"path": "no/such/file.jsonl"}
    with pytest.raises(study.ConfigError, match=r"sft\.open_r1\.path: 'no/such/file.jsonl' does not exist"):
        study.validate(config)
    config["sft"]["open_r1"] = {}
    model = next(iter(config["models"]))
    config["models"][model]["sft"] = {"open_r1": {"limit": 5}}
    with pytest.raises(study.ConfigError, match=rf"models\.{model}\.sft\.open_r1: .*top-level sft\.open_r1"):
        study.validate(config)


@pytest.mark.parametrize("where", ["top", "model"])
def test_the_old_sft_key_names_are_refused_naming_trls(where):
    """sft.epochs and sft.batch_size are TRL's num_train_epochs and per_device_train_batch_size: one vocabulary."""
    raw = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    block = raw["sft"] if where == "top" else raw["models"]["tiny"].setdefault("sft", {})
    block["epochs"] = 3
    with pytest.raises(study.ConfigError, match=r"sft\.epochs is now .*sft\.num_train_epochs \(TRL's SFTConfig name\)"):
        study.validate(raw)


def test_a_generation_batch_size_is_checked_against_the_per_device_batch_and_the_group_size_naming_each():
    """rl: per_device_train_batch_size 32, num_generations 8. generation_batch_size 48 is not a multiple of 32
    (refused naming both); 64 is, and 8 divides it; a variant's own num_generations 24 does not divide 64
    (refused naming the variant's key and where the batch comes from)."""
    with pytest.raises(study.ConfigError, match=r"^config: rl\.trl\.generation_batch_size \(48\) must be a multiple "
                                                r"of per_device_train_batch_size \(32\)$"):
        study.validate(broken(lambda c: c["rl"].update(trl={"generation_batch_size": 48})))
    study.validate(broken(lambda c: c["rl"].update(trl={"generation_batch_size": 64})))
    with pytest.raises(study.ConfigError, match=r"^config: variants\.grpo\.num_generations \(24\) must divide the "
                                                r"generation batch \(generation_batch_size = 64 completions per "
                                                r"process\)"):
        study.validate(broken(lambda c: (c["rl"].update(trl={"generation_batch_size": 64}),
                                         c["variants"]["grpo"].update(num_generations=24))))
