"""Objective variants: the objectives by name (``OBJECTIVES``), the keys of a pipeline variant
(``{objective: grpo_lambda, lam: 0.99, ...}``), which GRPOLambdaConfig field each sets and for which
objectives, their translation into config arguments, and sweeps (a ``sweep:`` block expanded into variants).

What value each key may hold (choices, ranges, types) is written once, in the config schema's
``$defs/variant`` (workflow/schemas/config.schema.yaml); `check_value` applies it to one value, so the
config's validation before any job runs and the trainer's config refuse the same values. The objective's
name is checked against ``OBJECTIVES`` here, not listed in the schema: an objective is registered by its
line in ``OBJECTIVES`` (with the keys it takes in ``OBJECTIVE_KEYS``) and its importance weights in
``grpo_lambda.objectives.IMPORTANCE_WEIGHTS``. This module imports neither torch nor TRL (yaml and
jsonschema only when a value is first checked).

Dr. GRPO, DAPO and GSPO are objective "grpo" plus TRL keys (and dynamic_sampling), one line each:
  dr_grpo: {objective: grpo, loss_type: dr_grpo, scale_rewards: none}
  dapo:    {objective: grpo, loss_type: dapo, epsilon: 0.2, epsilon_high: 0.28, dynamic_sampling: true}
  gspo:    {objective: grpo, importance_sampling_level: sequence, loss_type: grpo, epsilon: 3.0e-4,
            epsilon_high: 4.0e-4}
"""

from __future__ import annotations

import functools
import itertools
import math
import re

# Objective -> what it is (docs/objectives.md has its formula): the registry that the config's checks, the
# trainer's config and the docs test read.
OBJECTIVES = {
    "grpo": "TRL's GRPO loss (also Dr. GRPO, DAPO, GSPO through TRL keys)",
    "grpo_lambda": "GRPO-λ: an eligibility trace over the earlier tokens' log-ratios (ε-trace or ε-weight)",
    "ptrace": "P-trace: each token's ratio a decayed geometric mean of its scope's ratios",
    "strace": "S-trace: P-trace whose credit reaches only the high-entropy tokens",
}
# Advantage estimator -> what it is (docs/objectives.md has its formula): the names a variant's
# ``advantage_estimator`` may take, checked here without torch; each one's function is its line in
# grpo_lambda.advantages.ADVANTAGE_ESTIMATORS (a test keeps the two tables equal, but for OAR's reshaping, which
# oar_method selects). A user's own is written module:function (docs/rewards.md), checked by importing it.
ESTIMATORS = {
    "grpo": "TRL's group-normalised advantage A_i (OAR's A_i · w_t with oar_method) on every token",
    "otb": "the optimal token baseline: G_t − Σ_j G_t W_t / Σ_j W_t, W the realised energy of the prefix",
    "tempo": "TEMPO: A_i plus the prefix tree's TD difference V(y_≤t) − V(y_<t) at the group's branch points",
    "delta_v_bound": "A_i plus GRPO-λ's Lemma 1 bound on V(s_0) − V(s_t): 1 − Π_{k<t} (1 − π(EOS))",
}
# The objectives whose ratio is the credit-weighted geometric mean of the ratios in its scope (P-trace, S-trace).
HISTORY_OBJECTIVES = ("ptrace", "strace")
OAR_METHODS = ("gradient", "perturbation")
# Whose answer OAR's P_final scores: the completion's own (the paper's wording) or the reference (its authors' code).
OAR_PFINAL = ("own_answer", "reference")
# The absolute trace form's n when it is not a number: the longest completion of the batch the loss sees
# (the released code's use_batch_max_for_trace, under TRL's padding). Set as rl.trl.trace_length.
BATCH_MAX = "batch_max"
# ... or each completion's own length (the released code's use_batch_max_for_trace: false).
PER_SEQUENCE = "per_sequence"

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
    "advantage_estimator": ("advantage_estimator", None),
    "dynamic_sampling": ("dynamic_sampling", None),
    "oar_method": ("oar_method", None),
    "oar_quantile": ("oar_quantile", None),
    "oar_boost": ("oar_boost", None),
    "oar_sigma": ("oar_sigma", None),
    "oar_answer_tokens": ("oar_answer_tokens", None),
    "oar_pfinal": ("oar_pfinal", None),
    "oar_conclude": ("oar_conclude", None),
}
# The OAR keys that mean something only with an oar_method.
OAR_PARAMETER_KEYS = ("oar_quantile", "oar_boost", "oar_sigma", "oar_answer_tokens", "oar_pfinal", "oar_conclude")
# Keys that name or label a variant and configure nothing of their own.
DISPLAY_KEYS = ("objective", "label")
# TRL GRPOConfig fields a variant may set (they define the algorithm, not the run); passed as they are.
TRL_KEYS = ("loss_type", "scale_rewards", "importance_sampling_level", "epsilon", "epsilon_high", "delta", "beta",
            "top_entropy_quantile", "off_policy_mask_threshold", "num_iterations", "mask_truncated_completions",
            "use_bias_correction_kl")
# rl settings a variant may set for itself, overriding rl: (and rl.trl) for its cells: the optimiser's and the
# sampler's, which a method is tuned by and a sweep varies. Left to rl: the run's length (max_steps: the
# evaluation checkpoints are checked against it), how the batch fills the hardware (per_device_train_batch_size,
# gradient_accumulation_steps, bf16, vLLM), the prompt filter and the rewards (one training signal per study,
# so that its variants compare on it).
RL_KEYS = ("learning_rate", "lr_scheduler_type", "warmup_steps", "weight_decay", "max_grad_norm", "num_generations",
           "temperature", "top_p", "max_completion_length")
VARIANT_KEYS = (*DISPLAY_KEYS, *OBJECTIVE_KEYS, *TRL_KEYS, *RL_KEYS)
# A swept key's short name in a variant's name (grpo.lr_1e-5); other keys keep their own.
SWEEP_SHORT_NAMES = {"learning_rate": "lr"}
# The characters of a variant's name: a cell folder's, a Snakemake wildcard's and a hub repo name's (publish).
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def variant_config_kwargs(variant: dict) -> dict:
    """GRPOLambdaConfig keyword arguments for one pipeline variant.

    ``{"objective": "grpo"}`` -> ``{"objective": "grpo", "advantage_clamp": None}``;
    ``{"objective": "grpo_lambda", "lam": 0.99, "style": "both", ...}`` -> ``{"objective": "grpo_lambda",
    "trace_lambda": 0.99, "trace_style": "both", ...}``. Keys left out keep the config's defaults (for
    grpo_lambda the paper's: λ 0.99, γ 1, recent, relative, trace, ε 0, clamp −0.1); the other
    objectives have no clamp unless asked. ``lam``/``gamma`` also set P-trace's and S-trace's decay,
    ``scope`` their history scope, ``strace_quantile`` S-trace's entropy quantile; ``dynamic_sampling`` and
    ``oar_*`` apply to every objective (``oar_quantile``, ... only with ``oar_method``). TRL keys
    (loss_type, scale_rewards, epsilon_high, importance_sampling_level, ...) and rl settings (learning_rate,
    num_generations, temperature, ...: ``RL_KEYS``) pass through; `label` (a display name) configures nothing.
    An unknown objective or key, a key of another objective, or a value the schema refuses raises ValueError
    naming the key.
    """
    if not isinstance(variant, dict):
        raise ValueError(f"variant must be a dict, got {type(variant).__name__}")
    objective = variant.get("objective")
    if objective is None:
        raise ValueError(f"variant {variant!r}: key 'objective' is required, one of {tuple(OBJECTIVES)}")
    check_objective("objective", objective)

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
        elif key in TRL_KEYS or key in RL_KEYS:
            kwargs[key] = value
        elif key not in DISPLAY_KEYS:
            raise ValueError(f"unknown variant key {key!r}; known keys: {list(VARIANT_KEYS)}")
        if key != "objective":
            check_value(key, key, value)

    if kwargs.get("oar_method") is None:
        stray = [key for key in OAR_PARAMETER_KEYS if key in variant]
        if stray:
            raise ValueError(f"variant keys {stray} need oar_method ('gradient' or 'perturbation')")
    check_estimator_combination(kwargs.get("advantage_estimator", "grpo"), kwargs.get("oar_method"))
    return kwargs


def check_config_fields(config) -> None:
    """Raise ValueError naming the field where a GRPOLambdaConfig field that a variant key sets (objective,
    trace_lambda, ...) holds a value the schema refuses for that key."""
    check_objective("objective", config.objective)
    for key, (field_name, _) in OBJECTIVE_KEYS.items():
        check_value(field_name, key, getattr(config, field_name))
    check_estimator_combination(config.advantage_estimator, config.oar_method)


def check_estimator_combination(estimator, oar_method) -> None:
    """Raise ValueError unless `estimator` is registered (``ESTIMATORS``) or a user's ``module:function`` that
    imports and can take the batch (`grpo_lambda.advantages.user_estimator`, which imports torch), and combines
    with `oar_method`: OAR reshapes GRPO's sequence advantage A_i, which only the estimators built on A_i read."""
    from grpo_lambda.user_code import is_user_path

    if is_user_path(estimator):
        from grpo_lambda.advantages import user_estimator

        try:
            chosen = user_estimator(estimator)
        except ValueError as error:
            raise ValueError(f"advantage_estimator: {error}") from None
        if "oar_weights" in chosen.needs and oar_method is None:
            raise ValueError(f"advantage_estimator: {estimator!r} needs oar_weights, which OAR computes: set oar_method")
        return
    if not isinstance(estimator, str) or estimator not in ESTIMATORS:
        raise ValueError(f"advantage_estimator: {estimator!r} is not an advantage estimator; known: "
                         f"{', '.join(ESTIMATORS)} (grpo_lambda.variants.ESTIMATORS), or your own module:function")
    if oar_method is not None and estimator == "otb":
        raise ValueError("oar_method reshapes GRPO's advantage A_i, which advantage_estimator 'otb' does not use")


def check_objective(name: str, value) -> None:
    """Raise ValueError naming `name` unless `value` is a registered objective."""
    if not isinstance(value, str) or value not in OBJECTIVES:
        raise ValueError(f"{name}: {value!r} is not an objective; known: {', '.join(OBJECTIVES)} "
                         "(grpo_lambda.variants.OBJECTIVES)")


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
def _schema_defs() -> dict:
    """The schema's ``$defs``, read here rather than through grpo_lambda.config, which imports this module."""
    from importlib import resources

    import yaml

    text = resources.files("grpo_lambda").joinpath("schemas/config.schema.yaml").read_text()
    return yaml.safe_load(text)["$defs"]


@functools.lru_cache(maxsize=None)
def _value_validator(key: str):
    import jsonschema

    # JSON Schema counts 8.0 as an integer; TRL and our fields take a whole number written without a point.
    base = jsonschema.Draft202012Validator
    strict = jsonschema.validators.extend(base, type_checker=base.TYPE_CHECKER.redefine(
        "integer", lambda _, value: isinstance(value, int) and not isinstance(value, bool)))
    # The key's schema within the whole $defs, so that a $ref to the rl settings' (#/$defs/rl/...) resolves.
    return strict({"$defs": _schema_defs(), "$ref": f"#/$defs/variant/properties/{key}"})


# ---- sweeps: a `sweep:` block expanded into variants ---------------------------------------------------

def sweep_value_text(value) -> str:
    """A swept value as a variant's name shows it: numbers at their shortest exact form with a plain exponent
    (1e-5, 3e-6, 0.04, 8), true/false, none, text as written."""
    if isinstance(value, bool):
        return str(value).lower()
    if value is None:
        return "none"
    if isinstance(value, float):
        text = repr(value)
        mantissa, _, exponent = text.partition("e")
        return mantissa.removesuffix(".0") + (f"e{int(exponent)}" if exponent else "")
    return str(value)


def sweep_pairs(values: dict) -> list[tuple[str, str]]:
    """(short key, value text) of a sweep point's values (keys shortened by SWEEP_SHORT_NAMES)."""
    return [(SWEEP_SHORT_NAMES.get(key, key), sweep_value_text(value)) for key, value in values.items()]


def sweep_name(base: str, values: dict) -> str:
    """The variant of ``base`` with ``values``: ``base.key_value.key_value`` (``grpo.lr_1e-5.beta_0.04``), in the
    characters a variant name, a cell folder and a hub repo name share."""
    return ".".join([base, *(f"{key}_{text}" for key, text in sweep_pairs(values))])


def sweep_points(grid: dict) -> list[dict]:
    """Every combination of a sweep entry's values (``{key: [values]}``), the first key varying slowest."""
    keys = list(grid)
    return [dict(zip(keys, combination)) for combination in itertools.product(*(grid[key] for key in keys))]


def expand_sweep(variants: dict, sweep: dict) -> dict:
    """``variants`` with each variant named in ``sweep`` replaced, in place of it, by one variant per point of its
    grid (`sweep_points`), named by `sweep_name`. A variant already expanded (its base gone, its points present:
    a validated config validated again) is left as it is. ValueError names what is wrong."""
    expanded = {}
    for base, grid in sweep.items():
        names = [sweep_name(base, point) for point in sweep_points(grid)]
        if base not in variants:
            if names and all(name in variants for name in names):
                continue
            raise ValueError(f"sweep.{base}: there is no variant {base!r} to sweep (variants: {', '.join(variants)})")
        for key, values in grid.items():
            if key in DISPLAY_KEYS:
                raise ValueError(f"sweep.{base}.{key}: {key!r} names the variant; sweep a setting instead")
            if key not in VARIANT_KEYS:
                raise ValueError(f"sweep.{base}.{key}: unknown variant key; known keys: {list(VARIANT_KEYS)}")
            for index, value in enumerate(values):
                check_value(f"sweep.{base}.{key}[{index}]", key, value)
        odd = [name for name in names if not NAME.match(name) or ".." in name]
        if odd:
            raise ValueError(f"sweep.{base}: the point {odd[0]!r} is not a name a cell folder and a hub repo can take")
        if len(set(names)) != len(names):
            repeated = sorted({name for name in names if names.count(name) > 1})
            raise ValueError(f"sweep.{base}: two points share the name {repeated[0]!r}; a value is given twice")
        clash = [name for name in names if name in variants]
        if clash:
            raise ValueError(f"sweep.{base}: the swept variant {clash[0]!r} is also defined under variants")
        label = variants[base].get("label")
        expanded[base] = {}
        for name, point in zip(names, sweep_points(grid)):
            expanded[base][name] = {**variants[base], **point}
            if label:  # the base's display name, with the point's values
                expanded[base][name]["label"] = label + " " + ", ".join(f"{k}={v}" for k, v in sweep_pairs(point))
    result = {}
    for name, variant in variants.items():
        result.update(expanded.get(name, {name: variant}))
    return result


def swept_variants(config: dict) -> dict[str, tuple[str, dict]]:
    """Each variant a sweep made -> (the variant it was made from, its swept values): how tables group them."""
    found = {}
    for base, grid in (config.get("sweep") or {}).items():
        for point in sweep_points(grid):
            name = sweep_name(base, point)
            if name in config["variants"]:
                found[name] = (base, point)
    return found


def check_trace_length(length) -> None:
    """A trace length is a positive int, "batch_max", "per_sequence" or None; ValueError otherwise."""
    if length is None or length in (BATCH_MAX, PER_SEQUENCE):
        return
    if isinstance(length, bool) or not isinstance(length, int) or length < 1:
        raise ValueError(f"trace_length must be a positive int, {BATCH_MAX!r}, {PER_SEQUENCE!r} or None, "
                         f"got {length!r}")
