"""Objective variants: the keys of a pipeline variant (``{objective: grpo_lambda, lam: 0.99, ...}``), which
GRPOLambdaConfig field each sets and for which objectives, and their translation into config arguments.

What value each key may hold (choices, ranges, types) is written once, in the config schema's
``$defs/variant`` (workflow/schemas/config.schema.yaml); `check_value` applies it to one value, so the
config's validation before any job runs and the trainer's config refuse the same values. This module
imports neither torch nor TRL (yaml and jsonschema only when a value is first checked).

Dr. GRPO, DAPO and GSPO are objective "grpo" plus TRL keys (and dynamic_sampling), one line each:
  dr_grpo: {objective: grpo, loss_type: dr_grpo, scale_rewards: none}
  dapo:    {objective: grpo, loss_type: dapo, epsilon: 0.2, epsilon_high: 0.28, dynamic_sampling: true}
  gspo:    {objective: grpo, importance_sampling_level: sequence, loss_type: grpo, epsilon: 3.0e-4,
            epsilon_high: 4.0e-4}
"""

from __future__ import annotations

import functools
import math

OBJECTIVES = ("grpo", "grpo_lambda", "ptrace", "strace")
# The objectives whose ratio is the credit-weighted geometric mean of the ratios in its scope (P-trace, S-trace).
HISTORY_OBJECTIVES = ("ptrace", "strace")
OAR_METHODS = ("gradient", "perturbation")
# The absolute trace form's n when it is not a number: the longest completion of the batch the loss sees
# (the released code's use_batch_max_for_trace, under TRL's padding). Set as rl.trl.trace_length.
BATCH_MAX = "batch_max"

_DECAYED = ("grpo_lambda", *HISTORY_OBJECTIVES)  # the objectives with a decay λ (and γ)

# Variant key -> (GRPOLambdaConfig field, the objectives that take it; None: every objective).
OBJECTIVE_KEYS = {
    "lam": ("trace_lambda", _DECAYED),
    "gamma": ("trace_gamma", _DECAYED),
    "style": ("trace_style", ("grpo_lambda",)),
    "form": ("trace_form", ("grpo_lambda",)),
    "update": ("trace_update", ("grpo_lambda",)),
    "eps": ("trace_eps", ("grpo_lambda",)),
    "strace_quantile": ("strace_quantile", ("strace",)),
    "strace_mode": ("strace_mode", ("strace",)),
    "scope": ("history_scope", HISTORY_OBJECTIVES),
    "advantage_clamp": ("advantage_clamp", None),
    "dynamic_sampling": ("dynamic_sampling", None),
    "oar_method": ("oar_method", None),
    "oar_quantile": ("oar_quantile", None),
    "oar_boost": ("oar_boost", None),
    "oar_sigma": ("oar_sigma", None),
    "oar_answer_tokens": ("oar_answer_tokens", None),
}
# The OAR keys that mean something only with an oar_method.
OAR_PARAMETER_KEYS = ("oar_quantile", "oar_boost", "oar_sigma", "oar_answer_tokens")
# Keys that name or label a variant and configure nothing of their own.
DISPLAY_KEYS = ("objective", "label")
# TRL GRPOConfig fields a variant may set (they define the algorithm, not the run); passed as they are.
TRL_KEYS = ("loss_type", "scale_rewards", "importance_sampling_level", "epsilon", "epsilon_high", "delta", "beta",
            "top_entropy_quantile", "off_policy_mask_threshold", "num_iterations", "mask_truncated_completions",
            "use_bias_correction_kl")
VARIANT_KEYS = (*DISPLAY_KEYS, *OBJECTIVE_KEYS, *TRL_KEYS)


def variant_config_kwargs(variant: dict) -> dict:
    """GRPOLambdaConfig keyword arguments for one pipeline variant.

    ``{"objective": "grpo"}`` -> ``{"objective": "grpo", "advantage_clamp": None}``;
    ``{"objective": "grpo_lambda", "lam": 0.99, "style": "both", ...}`` -> ``{"objective": "grpo_lambda",
    "trace_lambda": 0.99, "trace_style": "both", ...}``. Keys left out keep the config's defaults (for
    grpo_lambda the paper's: λ 0.99, γ 1, recent, relative, trace, ε 0, clamp −0.1); the other
    objectives have no clamp unless asked. ``lam``/``gamma`` also set P-trace's and S-trace's decay,
    ``scope`` their history scope, ``strace_quantile`` S-trace's entropy quantile; ``dynamic_sampling`` and
    ``oar_*`` apply to every objective (``oar_quantile``, ... only with ``oar_method``). TRL keys
    (loss_type, scale_rewards, epsilon_high, importance_sampling_level, ...) pass through; `label` (a display
    name) configures nothing. An unknown key, a key of another objective, or a value the schema refuses
    raises ValueError naming the key.
    """
    if not isinstance(variant, dict):
        raise ValueError(f"variant must be a dict, got {type(variant).__name__}")
    objective = variant.get("objective")
    if objective is None:
        raise ValueError(f"variant {variant!r}: key 'objective' is required, one of {OBJECTIVES}")
    check_value("objective", "objective", objective)

    kwargs = {"objective": objective}
    if objective != "grpo_lambda":
        kwargs["advantage_clamp"] = None
    for key, value in variant.items():
        if key in OBJECTIVE_KEYS:
            field_name, objectives = OBJECTIVE_KEYS[key]
            if objectives is not None and objective not in objectives:
                only = "objective " + " / ".join(repr(o) for o in objectives)
                raise ValueError(f"variant key {key!r} applies to {only} only, not {objective!r}")
            kwargs[field_name] = value
        elif key in TRL_KEYS:
            kwargs[key] = value
        elif key not in DISPLAY_KEYS:
            raise ValueError(f"unknown variant key {key!r}; known keys: {list(VARIANT_KEYS)}")
        check_value(key, key, value)

    if kwargs.get("oar_method") is None:
        stray = [key for key in OAR_PARAMETER_KEYS if key in variant]
        if stray:
            raise ValueError(f"variant keys {stray} need oar_method ('gradient' or 'perturbation')")
    return kwargs


def check_config_fields(config) -> None:
    """Raise ValueError naming the field where a GRPOLambdaConfig field that a variant key sets (objective,
    trace_lambda, ...) holds a value the schema refuses for that key."""
    check_value("objective", "objective", config.objective)
    for key, (field_name, _) in OBJECTIVE_KEYS.items():
        check_value(field_name, key, getattr(config, field_name))


def check_value(name: str, key: str, value) -> None:
    """Raise ValueError naming `name` unless `value` is one the schema allows for variant key `key` (and, if a
    number, finite: the schema's bounds let NaN through)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    import jsonschema  # here, not at the top: objectives.py imports this module and only torch besides

    error = jsonschema.exceptions.best_match(_value_validator(key).iter_errors(value))
    if error is not None:
        raise ValueError(f"{name}: {error.message}")


@functools.lru_cache(maxsize=1)
def variant_schema() -> dict:
    """The schema's ``$defs/variant``, read here rather than through grpo_lambda.config, which imports this
    module."""
    from importlib import resources

    import yaml

    text = resources.files("grpo_lambda").joinpath("schemas/config.schema.yaml").read_text()
    return yaml.safe_load(text)["$defs"]["variant"]


@functools.lru_cache(maxsize=None)
def _value_validator(key: str):
    import jsonschema

    # JSON Schema counts 8.0 as an integer; TRL and our fields take a whole number written without a point.
    base = jsonschema.Draft202012Validator
    strict = jsonschema.validators.extend(base, type_checker=base.TYPE_CHECKER.redefine(
        "integer", lambda _, value: isinstance(value, int) and not isinstance(value, bool)))
    return strict(variant_schema()["properties"][key])


def check_trace_length(length) -> None:
    """A trace length is a positive int, "batch_max" or None; ValueError otherwise."""
    if length is None or length == BATCH_MAX:
        return
    if isinstance(length, bool) or not isinstance(length, int) or length < 1:
        raise ValueError(f"trace_length must be a positive int, {BATCH_MAX!r} or None, got {length!r}")
