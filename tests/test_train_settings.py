"""Every setting a config can give a cell reaches TRL's config (grpo_lambda.train.build_config) and the
resume fingerprint, except the ones listed as changing nothing a cell computes.

The keys come from the schema, so a key added there without a way into training fails here; the
expected TRL field of each is written out by hand, not read from the code under test."""

import copy

import pytest
import torch

from conftest import ROOT
from grpo_lambda import config as study
from grpo_lambda import fingerprint, models, train

CONFIG = study.load(str(ROOT / "config" / "config.yaml"))
SCHEMA = study.load_schema()["$defs"]

# rl key -> (a valid other value, the GRPOLambdaConfig field it must set); None: not a TRL field.
RL = {
    "max_steps": (7, "max_steps"), "learning_rate": (1.234e-5, "learning_rate"),
    "lr_scheduler_type": ("cosine", "lr_scheduler_type"), "warmup_steps": (3, "warmup_steps"),
    "num_generations": (4, "num_generations"), "per_device_train_batch_size": (16, "per_device_train_batch_size"),
    "gradient_accumulation_steps": (2, "gradient_accumulation_steps"),
    "max_completion_length": (77, "max_completion_length"), "temperature": (0.7, "temperature"),
    "top_p": (0.9, "top_p"), "beta": (0.02, "beta"), "epsilon": (0.3, "epsilon"),
    "epsilon_high": (0.28, "epsilon_high"), "max_grad_norm": (0.5, "max_grad_norm"),
    "weight_decay": (0.01, "weight_decay"), "loss_type": ("dr_grpo", "loss_type"),
    "scale_rewards": ("batch", "scale_rewards"), "vllm_mode": ("server", "vllm_mode"),
    "vllm_gpu_memory_utilization": (0.5, "vllm_gpu_memory_utilization"), "save_steps": (3, "save_steps"),
    "use_vllm": (True, "use_vllm"),
    # Set where the job runs (models.trainer_hardware_kwargs): checked on a pretended GPU below.
    "bf16": (False, None), "gradient_checkpointing": (True, None),
    # The pipeline's own: a prompt filter and the reward function, not TRL fields.
    "max_prompt_length": (64, None), "reward": ("strict", None),
    # The reward functions' weights reach TRL (the functions themselves: tests/test_rewards.py).
    "rewards": ([{"name": "evaluation", "weight": 1.0}, {"name": "boxed", "weight": 0.5}], "reward_weights"),
    "report_to": ("mlflow", "report_to"), "trl": ({"top_k": 5}, "top_k"),
    # A callback of the pipeline's (grpo_lambda.completions), not TRL's log_completions.
    "log_completions": ({"every": 3, "prompts": 1}, None),
}
# Change nothing a cell computes: a change resumes the cell (fingerprint.DISPLAY_KEYS).
RL_KEEPS_FINGERPRINT = {"save_steps", "report_to", "log_completions"}

# variant key -> (the variant to set it on, the value, the GRPOLambdaConfig field it must set)
LAMBDA = {"objective": "grpo_lambda", "lam": 0.99}
VARIANT = {
    "objective": ({"objective": "grpo"}, "ptrace", "objective"),
    "lam": (LAMBDA, 0.5, "trace_lambda"), "gamma": (LAMBDA, 0.9, "trace_gamma"),
    "style": (LAMBDA, "both", "trace_style"), "form": (LAMBDA, "absolute", "trace_form"),
    "update": (LAMBDA, "weight", "trace_update"), "eps": (LAMBDA, 0.1, "trace_eps"),
    "advantage_clamp": (LAMBDA, -0.5, "advantage_clamp"),
    "strace_quantile": ({"objective": "strace", "lam": 0.9}, 0.5, "strace_quantile"),
    "strace_mode": ({"objective": "strace", "lam": 0.9}, "exclude", "strace_mode"),
    "scope": ({"objective": "ptrace", "lam": 0.9}, "sequence", "history_scope"),
    "dynamic_sampling": ({"objective": "grpo"}, True, "dynamic_sampling"),
    "oar_method": ({"objective": "grpo"}, "perturbation", "oar_method"),
    "oar_quantile": ({"objective": "grpo", "oar_method": "gradient"}, 0.3, "oar_quantile"),
    "oar_boost": ({"objective": "grpo", "oar_method": "gradient"}, 3.0, "oar_boost"),
    "oar_sigma": ({"objective": "grpo", "oar_method": "gradient"}, 0.7, "oar_sigma"),
    "oar_answer_tokens": ({"objective": "grpo", "oar_method": "gradient"}, 9, "oar_answer_tokens"),
    "oar_pfinal": ({"objective": "grpo", "oar_method": "gradient"}, "reference", "oar_pfinal"),
    "oar_conclude": ({"objective": "grpo", "oar_method": "gradient", "oar_pfinal": "reference"}, "\nSo: \\boxed{",
                     "oar_conclude"),
    "advantage_estimator": ({"objective": "grpo"}, "tempo", "advantage_estimator"),
    "label": ({"objective": "grpo"}, "Another name", None),
    "loss_type": ({"objective": "grpo"}, "dr_grpo", "loss_type"),
    "scale_rewards": ({"objective": "grpo"}, "none", "scale_rewards"),
    "epsilon": ({"objective": "grpo"}, 0.3, "epsilon"), "epsilon_high": ({"objective": "grpo"}, 0.4, "epsilon_high"),
    "delta": ({"objective": "grpo"}, 2.0, "delta"), "beta": ({"objective": "grpo"}, 0.1, "beta"),
    "importance_sampling_level": ({"objective": "grpo"}, "sequence", "importance_sampling_level"),
    "top_entropy_quantile": ({"objective": "grpo"}, 0.5, "top_entropy_quantile"),
    "mask_truncated_completions": ({"objective": "grpo"}, True, "mask_truncated_completions"),
    "off_policy_mask_threshold": ({"objective": "grpo"}, 0.5, "off_policy_mask_threshold"),
    "num_iterations": ({"objective": "grpo"}, 2, "num_iterations"),
    "use_bias_correction_kl": ({"objective": "grpo"}, False, "use_bias_correction_kl"),
    # rl settings a variant sets for itself (variants.RL_KEYS), over the config's rl: values.
    "learning_rate": ({"objective": "grpo"}, 1.5e-5, "learning_rate"),
    "lr_scheduler_type": ({"objective": "grpo"}, "cosine", "lr_scheduler_type"),
    "warmup_steps": ({"objective": "grpo"}, 2, "warmup_steps"),
    "weight_decay": ({"objective": "grpo"}, 0.05, "weight_decay"),
    "max_grad_norm": ({"objective": "grpo"}, 0.5, "max_grad_norm"),
    "num_generations": ({"objective": "grpo"}, 4, "num_generations"),
    "temperature": ({"objective": "grpo"}, 0.7, "temperature"),
    "top_p": ({"objective": "grpo"}, 0.9, "top_p"),
    "max_completion_length": ({"objective": "grpo"}, 77, "max_completion_length"),
}


def test_every_schema_key_is_covered_here():
    assert set(RL) == set(SCHEMA["rl"]["properties"])
    assert set(VARIANT) == set(SCHEMA["variant"]["properties"])


def _settings(variant="grpo"):
    return study.stage_settings(CONFIG, "train", model="tiny", dataset="arith", variant=variant)


def _field(args, name):
    value = getattr(args, name)
    return getattr(value, "value", value)  # TRL's enums hold the text


def _hash(settings, fingerprint_inputs):
    base, data = fingerprint_inputs
    return fingerprint.compute(settings, seed=0, base=base, data_path=data)["hash"]


@pytest.mark.parametrize("key", sorted(RL))
def test_an_rl_setting_reaches_trl_and_the_fingerprint(key, tmp_path, fingerprint_inputs):
    value, field = RL[key]
    settings = _settings()
    assert settings["rl"].get(key) != value
    changed = copy.deepcopy(settings)
    changed["rl"][key] = value
    if field is not None:
        args = train.build_config(changed, output_dir=str(tmp_path), seed=0)
        expected = {"trl": lambda: value["top_k"], "rewards": lambda: [spec["weight"] for spec in value]}.get(
            key, lambda: value)()
        got = _field(args, field)
        assert (expected in got) if key == "report_to" else (got == expected), (key, got)
        before = _field(train.build_config(settings, output_dir=str(tmp_path), seed=0), field)
        assert before != got
    same = _hash(changed, fingerprint_inputs) == _hash(settings, fingerprint_inputs)
    assert same == (key in RL_KEEPS_FINGERPRINT), key


def test_bf16_and_gradient_checkpointing_follow_the_config_on_a_gpu_and_are_off_on_a_cpu(monkeypatch):
    rl = {"bf16": False, "gradient_checkpointing": True}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert models.trainer_hardware_kwargs(rl) == {"bf16": False, "gradient_checkpointing": True}
    assert models.trainer_hardware_kwargs({}) == {"bf16": True, "gradient_checkpointing": False}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert models.trainer_hardware_kwargs(rl) == {"use_cpu": True, "bf16": False, "gradient_checkpointing": False}


@pytest.mark.parametrize("key", sorted(VARIANT))
def test_a_variant_setting_reaches_trl_and_the_fingerprint(key, tmp_path, fingerprint_inputs):
    variant, value, field = VARIANT[key]
    settings = {**_settings(), "variant": dict(variant)}
    changed = {**settings, "variant": {**variant, key: value}}
    if key == "objective":
        changed["variant"]["lam"] = 0.9
    args = train.build_config(changed, output_dir=str(tmp_path), seed=0)
    if field is not None:
        before = _field(train.build_config(settings, output_dir=str(tmp_path), seed=0), field)
        assert _field(args, field) == value and before != value, (key, before)
    same = _hash(changed, fingerprint_inputs) == _hash(settings, fingerprint_inputs)
    assert same == (key == "label"), key


def test_the_share_of_boxed_answers_trains_at_weight_zero(tmp_path):
    args = train.build_config(_settings(), output_dir=str(tmp_path), seed=0)
    assert args.reward_weights == [1.0, 0.0]
    bad = copy.deepcopy(CONFIG)
    bad["rl"]["trl"] = {"reward_weights": [1.0, 1.0]}
    with pytest.raises(study.ConfigError, match="rl.trl.reward_weights is set by the pipeline itself"):
        study.validate(bad)
