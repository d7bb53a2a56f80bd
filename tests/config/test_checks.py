"""``validate`` (grpo_lambda.config.validation) and the cross-checks of grpo_lambda.config.checks: a config
the schema or a check refuses fails before any job with one line naming the key (``BAD_CONFIGS``: the
schema's refusals and a few checks'; ``CROSS_CHECKS``: one case per check), and what they accept."""

import copy
import subprocess
import sys

import pytest
import yaml

from conftest import ROOT, run_main
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


# ---- cross-checks that would otherwise fail inside a job -----------------------------------------

def _rl_trl(**trl):
    return lambda c: c["rl"].update(trl=trl)


CROSS_CHECKS = {
    "several SFT models set per model": (
        lambda c: c["models"]["tiny"].update(sft={"seeds": [0, 1]}),
        r"models\.tiny\.sft\.seeds: several SFT models are the study's choice; set sft\.seeds at the top level"),
    "one SFT seed and several": (lambda c: c["sft"].update(seeds=[0, 1]),
                                 r"sft\.seed and sft\.seeds: give one SFT seed \(sft\.seed\) or several"),
    "RL seeds that do not split among the SFT models": (
        lambda c: (c["sft"].pop("seed"), c["sft"].update(seeds=[0, 1, 2])),
        r"seeds: 4 RL seeds cannot be split equally among the 3 SFT models of sft\.seeds \[0, 1, 2\]; "
        r"give a multiple of 3"),
    "unknown rl.trl key": (_rl_trl(steps_per_generaton=2), r"config: rl\.trl\.steps_per_generaton is not a field"),
    "rl.trl key the pipeline sets": (_rl_trl(max_steps=3), r"rl\.trl\.max_steps is set by the pipeline itself; set rl\.max_steps"),
    # As found: rl.trl.learning_rate 1e-5 trained the cells while rl.learning_rate said 3e-5.
    "an rl key under rl.trl, which would win silently": (
        _rl_trl(learning_rate=1e-5), r"config: rl\.trl\.learning_rate would override rl\.learning_rate silently; "
                                     r"set rl\.learning_rate instead"),
    "a per-model rl key under its rl.trl": (
        lambda c: c["models"]["tiny"].update(rl={"trl": {"beta": 0.1}}),
        r"models\.tiny\.rl\.trl\.beta would override models\.tiny\.rl\.beta silently; set models\.tiny\.rl\.beta"),
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


def test_validate_prints_one_line_and_exits_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(broken(_rl_trl(num_generatons=4))))
    result = run_main("validate", "--configfile", bad)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "rl.trl.num_generatons is not a field" in result.stderr
    missing = run_main("validate", "--configfile", tmp_path / "none.yaml")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr and "none.yaml" in missing.stderr


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


def test_a_metric_without_its_completions_is_refused_by_name():
    config = copy.deepcopy(DEFAULT)
    config["report"] = {"metric": "avg"}
    with pytest.raises(study.ConfigError, match="report.metric avg needs sampled completions"):
        study.validate(config)
    config["report"] = {}
    config["evaluation"] = {**config.get("evaluation", {}), "greedy": False, "samples": 4}
    with pytest.raises(study.ConfigError, match="report.metric greedy needs the greedy pass"):
        study.validate(config)


# --- a checkpoint at max_steps is refused ----------------------------------------------------------


def test_checkpoint_at_max_steps_is_refused_and_one_before_is_kept():
    steps = DEFAULT["rl"]["max_steps"]
    config = copy.deepcopy(DEFAULT)
    config["evaluation"]["checkpoints"] = [steps]
    with pytest.raises(study.ConfigError, match=rf"evaluation\.checkpoints \[{steps}\]"):
        study.validate(config)
    config["evaluation"]["checkpoints"] = [steps - 1]
    assert study.validate(config)["evaluation"]["checkpoints"] == [steps - 1]


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


def test_every_rl_key_passed_to_trl_is_refused_under_rl_trl_and_trl_s_own_keys_are_not():
    """train.TRL_KEYS (and the hardware keys) are the rl keys that reach GRPOConfig: under rl.trl each would win
    over its rl twin, so each is refused; a key with no rl twin (top_k) and TRL's log_completions stay allowed."""
    from grpo_lambda.train import TRL_KEYS

    base = study.load(ROOT / "config" / "config.yaml")
    for key in (*TRL_KEYS, "bf16", "gradient_checkpointing"):
        config = copy.deepcopy(base)
        config["rl"]["trl"] = {key: base["rl"].get(key, 1)}
        with pytest.raises(study.ConfigError, match=rf"rl\.trl\.{key} (would override rl\.{key} silently|is set by "
                                                   rf"the pipeline itself); set rl\.{key} instead"):
            study.validate(config)
    for allowed in ({"top_k": 3}, {"log_completions": True}):
        config = copy.deepcopy(base)
        config["rl"]["trl"] = allowed
        study.validate(config)


@pytest.mark.parametrize("override, hint", [
    # as found: `wandbb` listed no choices
    ("rl.report_to=wandbb", "; did you mean 'wandb'? (one of: none, all, tensorboard, wandb,"),
    ("rl.learnig_rate=1e-5", "('learnig_rate' was unexpected); did you mean 'learning_rate'?"),
    ("evaluation.backend=vlm", "is not one of ['hf', 'vllm']; did you mean 'vllm'?"),
    ("rl.steps_per_generation=2", "steps_per_generation is a field of TRL's GRPOConfig: set it under rl.trl"),
    # as found: a generic schema error with no pointer to publishing
    ("rl.push_to_hub=true", "push_to_hub: a cell's model is pushed by the publish rule (the config's publish: block, "
                            "snakemake publish_all"),
])
def test_a_typo_or_a_misplaced_key_gets_the_likely_meaning_or_the_choices(override, hint):
    with pytest.raises(study.ConfigError) as refused:
        study.load(ROOT / "config" / "config.yaml", [override])
    assert hint in str(refused.value)
    assert "\n" not in str(refused.value)


def test_every_check_is_registered_in_checks_and_a_models_checks_run_model_by_model():
    """A `_check_*` written in checks.py but left out of CHECKS (or of a registered check's calls) would
    never run; the checks of one model's settings run all for one model before the next."""
    import ast
    import inspect

    from grpo_lambda.config import checks, data_checks

    tree = ast.parse(inspect.getsource(checks))
    modules = [tree, ast.parse(inspect.getsource(data_checks))]  # the data sources' checks live beside
    defined = {node.name: node for module in modules for node in module.body if isinstance(node, ast.FunctionDef)}
    registry = next(node.value for node in tree.body if isinstance(node, ast.Assign)
                    and getattr(node.targets[0], "id", None) == "CHECKS")
    reached = {node.id for node in ast.walk(registry) if isinstance(node, ast.Name) and node.id in defined}
    for name in list(reached):  # a registered check's own sub-checks (a variant's batch, under _check_rl)
        reached |= {node.func.id for node in ast.walk(defined[name]) if isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name) and node.func.id in defined}
    unregistered = sorted(name for name in defined if name.startswith("_check_") and name not in reached)
    assert not unregistered, f"checks never run: {unregistered}; add them to checks.CHECKS"

    two_models = broken(lambda c: c["models"].update(other=copy.deepcopy(c["models"]["tiny"])))
    seen = []
    check_models = checks._each_model(lambda config, model, source: seen.append(("a", model)),
                                      lambda config, model, source: seen.append(("b", model)))
    check_models(study.validate(two_models), "config")
    assert seen == [("a", "tiny"), ("b", "tiny"), ("a", "other"), ("b", "other")]


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
