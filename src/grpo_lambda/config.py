"""The study's config: loading, validation against the JSON Schema, and the settings of one cell.

The schema (``workflow/schemas/config.schema.yaml``) says what each key may hold; ``validate`` adds
the checks a schema cannot express (names that refer to each other, checkpoint steps within the run).
Snakemake calls ``validate`` right after loading the config, so a bad config fails before any job
starts, with a message that names the key. Each stage then receives only its cell's settings
(``stage_settings``) as JSON on the command line: they are also the rule's params, so a change to a
cell's settings reruns that cell and nothing else.
"""

from __future__ import annotations

import copy
from importlib import resources
from pathlib import Path

import jsonschema
import yaml


class ConfigError(ValueError):
    """A config that cannot describe a run; the message names the offending key."""


def load_schema() -> dict:
    text = resources.files("grpo_lambda").joinpath("schemas/config.schema.yaml").read_text()
    return yaml.safe_load(text)


def load(path: str | Path) -> dict:
    """Read and validate a config file."""
    with open(path, encoding="utf-8") as handle:
        config = yaml.safe_load(handle)
    return validate(config, source=str(path))


def _key_path(error: jsonschema.ValidationError) -> str:
    return ".".join(str(part) for part in error.absolute_path) or "(top level)"


def _set_defaults(validator_class):
    """A validator that fills in the schema's defaults (the recipe of the jsonschema FAQ)."""
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, subschema in properties.items():
                if "default" in subschema:
                    instance.setdefault(name, copy.deepcopy(subschema["default"]))
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


def validate(config: dict, *, source: str = "config") -> dict:
    """Return a validated copy of ``config`` with defaults filled in; raise ConfigError naming the key."""
    if not isinstance(config, dict):
        raise ConfigError(f"{source}: the config must be a mapping, got {type(config).__name__}")
    config = copy.deepcopy(config)
    schema = load_schema()
    validator = _set_defaults(jsonschema.Draft202012Validator)(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: (len(e.absolute_path), _key_path(e)))
    if errors:
        error = jsonschema.exceptions.best_match(errors)
        raise ConfigError(f"{source}: invalid value at '{_key_path(error)}': {error.message}")
    _check_references(config, source)
    return config


def _check_references(config: dict, source: str) -> None:
    for model, spec in config["models"].items():
        for key, known in (("variants", config["variants"]), ("datasets", config["datasets"])):
            missing = [name for name in spec.get(key, []) if name not in known]
            if missing:
                raise ConfigError(
                    f"{source}: models.{model}.{key} names {missing}, which are not defined under "
                    f"'{key}' (defined: {sorted(known)})")
        if spec["source"] == "tiny" and spec.get("prompt", "plain") != "plain":
            raise ConfigError(f"{source}: models.{model}.prompt must be 'plain' for the tiny model")
        steps = rl_settings(config, model)["max_steps"]
        late = [step for step in model_checkpoints(config, model) if step >= steps]
        if late:
            where = f"models.{model}.checkpoints" if "checkpoints" in spec else "evaluation.checkpoints"
            raise ConfigError(
                f"{source}: {where} {late} must be below the run's {steps} steps "
                f"(rl.max_steps for models.{model}); the final model is always evaluated")
    for kind in ("datasets", "benchmarks"):
        for name, spec in config[kind].items():
            if spec["source"] == "synthetic":
                level_key = "levels" if kind == "datasets" else "level"
                for required in ("n", "seed", level_key) if kind == "benchmarks" else ("n", "seed"):
                    if required not in spec:
                        raise ConfigError(f"{source}: {kind}.{name}.{required} is required for a synthetic source")
    for name, variant in config["variants"].items():
        if variant["objective"] == "grpo_lambda" and "lam" not in variant:
            raise ConfigError(f"{source}: variants.{name}.lam is required for objective grpo_lambda")


# ---- the cells of the grid -------------------------------------------------------------------

def model_datasets(config: dict, model: str) -> list[str]:
    return config["models"][model].get("datasets") or list(config["datasets"])


def model_variants(config: dict, model: str) -> list[str]:
    return config["models"][model].get("variants") or list(config["variants"])


def model_checkpoints(config: dict, model: str) -> list[int]:
    spec = config["models"][model]
    return sorted(spec["checkpoints"] if "checkpoints" in spec else config["evaluation"]["checkpoints"])


def rl_cells(config: dict) -> list[dict]:
    """Every RL run of the grid: model × dataset × variant × seed."""
    return [
        {"model": model, "dataset": dataset, "variant": variant, "seed": seed}
        for model in config["models"]
        for dataset in model_datasets(config, model)
        for variant in model_variants(config, model)
        for seed in config["seeds"]
    ]


# Rejection sampling of the SFT set when sft.data is self_distill: k = 8 samples per problem at the
# RL temperature, a quarter of them kept at most; the sample length is the RL completion length's
# order, not the evaluation's, so the kept solutions fit the SFT max_length.
SELF_DISTILL_DEFAULTS = {"samples": 8, "keep_per_problem": 2, "max_problems": None, "temperature": 1.0,
                         "top_p": 1.0, "max_new_tokens": 1024, "max_model_len": 4096, "batch_size": 64,
                         "backend": "hf", "seed": 0, "grader_timeout": 1.0}


def sft_settings(config: dict, model: str) -> dict:
    top, own = config.get("sft", {}), config["models"][model].get("sft", {})
    merged = {"data": "solutions", **top, **own}
    merged["self_distill"] = {**SELF_DISTILL_DEFAULTS, **top.get("self_distill", {}), **own.get("self_distill", {})}
    return merged


def sft_uses_self_distillation(config: dict, model: str) -> bool:
    settings = sft_settings(config, model)
    return settings["data"] == "self_distill" and settings.get("epochs", 1) != 0


def rl_settings(config: dict, model: str) -> dict:
    merged = {**config.get("rl", {}), **config["models"][model].get("rl", {})}
    merged["trl"] = {**config.get("rl", {}).get("trl", {}), **config["models"][model].get("rl", {}).get("trl", {})}
    merged.setdefault("max_steps", 100)
    return merged


def stage_settings(config: dict, stage: str, *, model: str | None = None, dataset: str | None = None,
                   variant: str | None = None, benchmark: str | None = None) -> dict:
    """The part of the config one stage of one cell depends on (and nothing more)."""
    if stage == "prepare":
        if dataset is not None:
            return {"key": dataset, "role": "train", **config["datasets"][dataset]}
        return {"key": benchmark, "role": "benchmark", **config["benchmarks"][benchmark]}
    spec = config["models"][model]
    model_part = {"name": model, "source": spec["source"], "prompt": spec.get("prompt", "qwen_math"),
                  "lora": spec.get("lora")}
    if stage == "build_tiny":
        return {"name": model, "tiny": spec.get("tiny", {})}
    if stage == "sft":
        # Only what training reads: the sampling settings reach SFT through its data file.
        options = {key: value for key, value in sft_settings(config, model).items() if key != "self_distill"}
        if options["data"] == "solutions":
            del options["data"]  # the default, so existing SFT jobs keep their params
        return {"model": model_part, "dataset": dataset, "sft": options}
    if stage == "prepare_sft":
        return {"model": model_part, "dataset": dataset,
                "sft": {"self_distill": sft_settings(config, model)["self_distill"]}}
    if stage == "train":
        return {"model": model_part, "dataset": dataset, "variant_name": variant,
                "variant": config["variants"][variant], "rl": rl_settings(config, model),
                "checkpoints": model_checkpoints(config, model)}
    if stage == "evaluate":
        return {"model": model_part, "dataset": dataset, "variant": variant,
                "evaluation": {k: v for k, v in config["evaluation"].items() if k != "checkpoints"}}
    raise ValueError(f"stage {stage!r} is unknown")
