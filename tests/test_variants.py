"""grpo_lambda.variants against the config schema's ``$defs/variant`` and the code that runs a variant: the schema
offers exactly the keys the trainer's config takes, with the choices the objectives and TRL implement, and the
config's validation and `variant_config_kwargs` refuse the same variants."""

import copy
import dataclasses
import re

import pytest
import yaml

from conftest import ROOT
from grpo_lambda import config as study
from grpo_lambda import variants
from grpo_lambda.objectives import HISTORY_SCOPES, LOSS_TYPES, STRACE_MODES, UPDATES
from grpo_lambda.traces import FORMS, STYLES

SCHEMA = study.load_schema()["$defs"]["variant"]

# Variant key -> the values the code that runs it implements (read from that code, not from the schema).
OUR_CHOICES = {
    "style": STYLES,
    "form": FORMS,
    "update": UPDATES,
    "scope": HISTORY_SCOPES,
    "strace_mode": STRACE_MODES,
    "oar_method": (*variants.OAR_METHODS, None),  # None: no OAR (the config field's default)
    "oar_pfinal": variants.OAR_PFINAL,
}
# Variant keys whose choices are TRL's: the values its GRPOConfig help names.
TRL_CHOICE_KEYS = ("loss_type", "scale_rewards", "importance_sampling_level")


def trl_help(key):
    from trl import GRPOConfig

    return next(field.metadata["help"] for field in dataclasses.fields(GRPOConfig) if field.name == key)


def test_the_schema_offers_exactly_the_variant_keys_of_the_table():
    assert set(SCHEMA["properties"]) == set(variants.VARIANT_KEYS)
    assert len(variants.VARIANT_KEYS) == len(set(variants.VARIANT_KEYS))  # no key in two groups
    assert SCHEMA["required"] == ["objective"] and SCHEMA["additionalProperties"] is False


def test_the_objectives_are_registered_once_and_the_schema_lists_none():
    """An objective is its line in variants.OBJECTIVES and its importance weights in objectives.IMPORTANCE_WEIGHTS;
    the schema leaves the names to the registry (no enum to keep in step), and the docs describe each one."""
    from grpo_lambda.objectives import IMPORTANCE_WEIGHTS

    assert set(IMPORTANCE_WEIGHTS) == set(variants.OBJECTIVES)
    assert "enum" not in SCHEMA["properties"]["objective"]
    documented = (ROOT / "docs" / "objectives.md").read_text()
    for objective in variants.OBJECTIVES:
        assert f"{{objective: {objective}" in documented, objective
    with pytest.raises(ValueError, match=r"^objective: 'grpo-lambda' is not an objective; known: grpo, grpo_lambda"):
        variants.variant_config_kwargs({"objective": "grpo-lambda"})


def test_the_rl_settings_a_variant_may_set_are_the_rl_blocks_own():
    """A variant's rl settings (RL_KEYS) take exactly the values rl: takes for them (the schema refers to rl's)."""
    rl = study.load_schema()["$defs"]["rl"]["properties"]
    for key in variants.RL_KEYS:
        assert SCHEMA["properties"][key] == {"$ref": f"#/$defs/rl/properties/{key}"}, key
        assert key in rl, key
    with pytest.raises(ValueError, match=r"^learning_rate: 0 is less than or equal to the minimum of 0$"):
        variants.variant_config_kwargs({"objective": "grpo", "learning_rate": 0})
    assert variants.variant_config_kwargs({"objective": "grpo", "num_generations": 4})["num_generations"] == 4


def test_every_variant_key_sets_a_field_of_the_trainers_config():
    fields = study.trl_config_fields()  # GRPOLambdaConfig's and its TRL bases', read from their source
    for key, (field_name, objectives) in variants.OBJECTIVE_KEYS.items():
        assert field_name in fields, key
        assert objectives is None or set(objectives) < set(variants.OBJECTIVES), key
    assert set(variants.TRL_KEYS) <= set(fields) and set(variants.RL_KEYS) <= set(fields)
    assert set(variants.OAR_PARAMETER_KEYS) < set(variants.OBJECTIVE_KEYS)
    assert variants.OBJECTIVE_KEYS["scope"][1] == variants.HISTORY_OBJECTIVES


def test_the_schemas_choices_are_the_ones_the_code_implements():
    enums = {key: prop["enum"] for key, prop in SCHEMA["properties"].items() if "enum" in prop}
    assert set(enums) == set(OUR_CHOICES) | set(TRL_CHOICE_KEYS)  # a new choice key needs its truth here
    for key, choices in OUR_CHOICES.items():
        assert sorted(enums[key], key=str) == sorted(choices, key=str), key
    # TRL's loss types, from the sentence of its help that lists them all.
    listed = re.search(r"Supported values are (.*?)\. ", trl_help("loss_type")).group(1)
    assert sorted(enums["loss_type"]) == sorted(re.findall(r"'(\w+)'", listed))
    assert set(LOSS_TYPES) < set(enums["loss_type"])  # those the other objectives normalise like TRL
    for key in ("scale_rewards", "importance_sampling_level"):
        for choice in enums[key]:
            assert f"{choice}'" in trl_help(key), (key, choice)


def test_the_config_defaults_are_values_the_schema_accepts(tmp_path):
    """Every field a variant key sets, as GRPOLambdaConfig leaves it by default (None for OAR, epsilon_high,
    delta, ...), is a value of that key; a schema that refused one would refuse the config's own default."""
    from grpo_lambda.trainer_config import GRPOLambdaConfig

    for objective in variants.OBJECTIVES:
        config = GRPOLambdaConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, report_to="none",
                                  objective=objective)
        for key in (*variants.OBJECTIVE_KEYS, *variants.TRL_KEYS, *variants.RL_KEYS):
            field_name = variants.OBJECTIVE_KEYS[key][0] if key in variants.OBJECTIVE_KEYS else key
            variants.check_value(field_name, key, getattr(config, field_name))


# Variants where the schema and the trainer once disagreed, each with whether a run can take it.
AGREEMENT = [
    ({"objective": "grpo", "loss_type": "cispo"}, True),
    ({"objective": "grpo", "num_iterations": 2, "off_policy_mask_threshold": 0.5}, True),
    ({"objective": "grpo", "use_bias_correction_kl": False, "epsilon_high": None, "delta": None}, True),
    ({"objective": "grpo", "oar_method": None}, True),
    ({"objective": "grpo", "delta": 1.0}, False),
    ({"objective": "grpo", "epsilon": -0.2}, False),
    ({"objective": "grpo", "num_iterations": 0}, False),
    ({"objective": "grpo", "oar_method": "gradient", "oar_answer_tokens": 8.0}, False),
    ({"objective": "grpo", "label": 3}, False),
]


@pytest.mark.parametrize("variant, runs", AGREEMENT)
def test_the_config_validation_and_the_trainer_refuse_the_same_variants(variant, runs):
    config = copy.deepcopy(yaml.safe_load((ROOT / "config" / "config.yaml").read_text()))
    config["variants"] = {"x": variant}
    config["models"] = {name: {k: v for k, v in spec.items() if k != "variants"}
                        for name, spec in config["models"].items()}
    try:
        study.validate(config)
        validated = True
    except study.ConfigError as error:
        assert "variants.x" in str(error)
        validated = False
    try:
        variants.variant_config_kwargs(variant)
        trained = True
    except ValueError:
        trained = False
    assert validated == trained == runs


def test_a_value_error_names_the_key_and_says_why():
    with pytest.raises(ValueError, match=r"^oar_answer_tokens: 8\.0 is not of type 'integer'$"):
        variants.variant_config_kwargs({"objective": "grpo", "oar_method": "gradient", "oar_answer_tokens": 8.0})
    with pytest.raises(ValueError, match=r"^lam must be a finite number, got nan$"):
        variants.variant_config_kwargs({"objective": "grpo_lambda", "lam": float("nan")})
    with pytest.raises(ValueError, match=r"^trace_gamma: 0 is less than or equal to the minimum of 0$"):
        variants.check_value("trace_gamma", "gamma", 0)


def test_variant_config_kwargs_by_hand():
    """What a variant becomes, worked by hand: only GRPO-λ keeps the config's clamp (the paper's −0.1); every
    other objective gets none unless it asks; a display label configures nothing; an OAR parameter without
    oar_method, a key of another objective, an unknown key or a missing objective is refused, naming it."""
    kwargs = variants.variant_config_kwargs
    assert kwargs({"objective": "grpo", "label": "GRPO"}) == {"objective": "grpo", "advantage_clamp": None}
    assert kwargs({"objective": "ptrace", "lam": 0.9}) == {"objective": "ptrace", "advantage_clamp": None,
                                                            "trace_lambda": 0.9}
    assert kwargs({"objective": "grpo_lambda", "lam": 0.5, "style": "both", "learning_rate": 1e-5}) == {
        "objective": "grpo_lambda", "trace_lambda": 0.5, "trace_style": "both", "learning_rate": 1e-5}
    assert kwargs({"objective": "grpo", "oar_method": "gradient", "oar_boost": 2.0})["oar_boost"] == 2.0
    with pytest.raises(ValueError, match=r"^variant keys \['oar_boost'\] need oar_method"):
        kwargs({"objective": "grpo", "oar_boost": 2.0})
    with pytest.raises(ValueError, match=r"^variant key 'lam' applies to objective 'grpo_lambda' / 'ptrace' / "
                                         r"'strace' only, not 'grpo'$"):
        kwargs({"objective": "grpo", "lam": 0.9})
    with pytest.raises(ValueError, match=r"^unknown variant key 'lr'; known keys: \['objective', "):
        kwargs({"objective": "grpo", "lr": 1e-5})
    with pytest.raises(ValueError, match=r"^variant \{'lam': 0\.9\}: key 'objective' is required, one of "
                                         r"\('grpo', 'grpo_lambda', "):
        kwargs({"lam": 0.9})
    with pytest.raises(ValueError, match=r"^variant must be a dict, got list$"):
        kwargs(["grpo"])


@pytest.mark.parametrize("length", [None, "batch_max", "per_sequence", 1, 3072])
def test_a_trace_length_may_be_a_positive_int_batch_max_or_none(length):
    variants.check_trace_length(length)


@pytest.mark.parametrize("length", [0, -4, True, 2.5, "longest", "3072"])
def test_any_other_trace_length_is_refused_naming_the_value(length):
    with pytest.raises(ValueError, match=rf"^trace_length must be a positive int, 'batch_max', 'per_sequence' or None, got "
                                         rf"{re.escape(repr(length))}$"):
        variants.check_trace_length(length)


# ---- adding an objective: its line in OBJECTIVES and its importance weights, nothing else ------------------

def toy_importance_weights(logps, log_ratio, mask, params, trace_mask):
    """A toy objective: twice GRPO's log-ratio. On-policy every ratio is 1 either way, so its gradient, and a
    plain SGD step, is exactly twice GRPO's."""
    return 2 * log_ratio, None, None


def test_an_objective_registered_in_the_two_tables_is_configured_and_trains(model_dir, tmp_path, monkeypatch):
    import torch

    from grpo_lambda import objectives
    from grpo_lambda.trainer import GRPOLambdaTrainer
    from grpo_lambda.trainer_config import GRPOLambdaConfig
    from trainer_batch import make_trainer

    monkeypatch.setitem(variants.OBJECTIVES, "toy", "twice GRPO's log-ratio")
    monkeypatch.setitem(objectives.IMPORTANCE_WEIGHTS, "toy", toy_importance_weights)
    config = copy.deepcopy(yaml.safe_load((ROOT / "config" / "config.yaml").read_text()))
    config["variants"]["toy"] = {"objective": "toy", "advantage_clamp": None}
    assert study.validate(config)["variants"]["toy"]["objective"] == "toy"  # the schema and the checks take it

    def one_sgd_step(variant, folder):
        trainer = make_trainer(model_dir, GRPOLambdaTrainer, GRPOLambdaConfig, tmp_path / folder, max_steps=1,
                               optim="sgd", learning_rate=0.5, max_grad_norm=0.0, save_strategy="no",
                               **variants.variant_config_kwargs(variant))
        before = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
        trainer.train()
        return {name: p.detach() - before[name] for name, p in trainer.model.named_parameters()}

    toy = one_sgd_step(config["variants"]["toy"], "toy")
    # GRPO's token ratio through the same loss code: GRPO-λ at λ = 0, relative form, no clamp.
    grpo = one_sgd_step({"objective": "grpo_lambda", "lam": 0.0, "advantage_clamp": None}, "grpo")
    assert max(delta.abs().max().item() for delta in grpo.values()) > 1e-6
    for name, delta in grpo.items():  # float32 weights near 1 round their steps to about 1e-7
        torch.testing.assert_close(toy[name], 2 * delta, rtol=1e-4, atol=1e-6, msg=name)
