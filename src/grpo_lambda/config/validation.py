"""``validate``: a config checked in one place, right after it is read (the snakemake-workflows convention;
Snakemake calls it at its start, the CLI through ``load``), so a bad config fails before any job starts
with one line that names the key. In order: old key names told their new ones, the JSON Schema with its
defaults filled in, sweeps expanded into variants, every cross-check of ``checks.CHECKS``, then what the
installed software and the hub can serve (``check_environment``)."""

from __future__ import annotations

import copy
import difflib
import functools

import jsonschema

from grpo_lambda.config.checks import CHECKS
from grpo_lambda.config.schema import ConfigError, _key_path, _set_defaults, load_schema
from grpo_lambda.config.settings import _rl_key, rl_cells, rl_settings
from grpo_lambda.config.trl_fields import trl_config_fields
from grpo_lambda.variants import expand_sweep, sweep_name, sweep_points


def validate(config: dict, *, source: str = "config") -> dict:
    """Return a validated copy of ``config`` with defaults filled in; raise ConfigError naming the key."""
    if not isinstance(config, dict):
        raise ConfigError(f"{source}: the config must be a mapping, got {type(config).__name__}")
    config = copy.deepcopy(config)
    _check_renamed(config, source)
    _drop_null_models(config)
    # A study that names its repos means to publish: its template is checked now; the default one only
    # when a cell is published (a long swept variant name must not refuse a study that never publishes).
    repo_template = isinstance(config.get("publish"), dict) and "repo_id" in config["publish"]
    schema = load_schema()
    validator = _set_defaults(jsonschema.Draft202012Validator)(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: (len(e.absolute_path), _key_path(e)))
    if errors:
        error = jsonschema.exceptions.best_match(errors)
        raise ConfigError(f"{source}: invalid value at '{_key_path(error)}': {error.message}{_schema_hint(error, schema)}")
    _expand_sweep(config, source)
    for check in CHECKS:
        check(config, source)
    check_environment(config, source, repo_template=repo_template)
    return config


def _schema_hint(error: jsonschema.ValidationError, schema: dict) -> str:
    """What a schema error's message leaves out: the key or value a typo most likely meant (difflib), the choices
    of a value the schema lists, where a TRL field goes, and that a hub push is the publish rule's."""

    def choices(node, depth=0) -> list:
        if not isinstance(node, dict) or depth > 4:
            return []
        if "$ref" in node:  # "#/$defs/tracker"
            node = functools.reduce(lambda part, name: part[name], node["$ref"].lstrip("#/").split("/"), schema)
        found = list(node.get("enum", []))
        for alternatives in (node.get("oneOf", []), node.get("anyOf", []), [node.get("items")]):
            for alternative in alternatives:
                found += [value for value in choices(alternative, depth + 1) if value not in found]
        return found

    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = list(error.schema.get("properties", {}))
        hints = []
        for key in (key for key in error.instance if key not in allowed):
            if key in ("push_to_hub", "hub_model_id", "hub_strategy", "hub_token", "hub_private_repo"):
                hints.append(f"{key}: a cell's model is pushed by the publish rule (the config's publish: block, "
                             "snakemake publish_all; docs/running.md, Publishing), not by TRL")
            elif error.path and error.path[-1] == "rl" and key in trl_config_fields():
                hints.append(f"{key} is a field of TRL's GRPOConfig: set it under rl.trl")
            elif close := difflib.get_close_matches(str(key), allowed, n=1):
                hints.append(f"did you mean {close[0]!r}?")
        return "".join(f"; {hint}" for hint in hints)
    values = [value for value in choices(error.schema) if isinstance(value, str)]
    if values and isinstance(error.instance, str):
        close = difflib.get_close_matches(error.instance, values, n=1)
        return ((f"; did you mean {close[0]!r}?" if close else "")
                + ("" if error.validator == "enum" else f" (one of: {', '.join(values)})"))
    return ""


def _expand_sweep(config: dict, source: str) -> None:
    """Replace each swept variant by its points, in ``variants`` and in every model's ``variants`` list."""
    sweep = config.get("sweep") or {}
    if not sweep:
        return
    try:
        expanded = expand_sweep(config["variants"], sweep)
    except ValueError as error:
        raise ConfigError(f"{source}: {error}") from None
    made = {base: [sweep_name(base, point) for point in sweep_points(grid)] for base, grid in sweep.items()
            if base in config["variants"]}  # (a base already expanded is gone from variants)
    config["variants"] = expanded
    for spec in config["models"].values():
        if "variants" in spec:
            spec["variants"] = [name for listed in spec["variants"] for name in (made.get(listed) or [listed])]


def check_environment(config: dict, source: str = "config", *, jobs: bool = False,
                      repo_template: bool = False) -> None:
    """Refuse what the installed software or the hub cannot serve (grpo_lambda.environment): a tracker that is
    not installed where the jobs run; with ``repo_template``, a publish.repo_id that does not give each cell
    its own valid repo; with ``jobs`` (jobs are about to run: `grpo-lambda validate`, Snakemake's start),
    vLLM and DeepSpeed too."""
    from grpo_lambda import environment, publish

    for model in config["models"]:
        trl = rl_settings(config, model)["trl"]
        for key in ("push_to_hub", "hub_model_id"):
            if trl.get(key):
                raise ConfigError(
                    f"{source}: {_rl_key(config, model, key, True)}: jobs run offline (HF_HUB_OFFLINE=1) and every "
                    "cell would push to one repo; the publish rule pushes each cell's final model, with a model "
                    "card, to its own repo: set publish.repo_id and run `snakemake publish_all` (docs/running.md)")
    problem = publish.template_problem(config["publish"]["repo_id"], rl_cells(config)) if repo_template else None
    if problem:
        raise ConfigError(f"{source}: publish.repo_id: {problem}")
    found = environment.problems(config, jobs=jobs)
    if found:
        raise ConfigError(f"{source}: {found[0]}")


def _drop_null_models(config: dict) -> None:
    """A model set to null is left out of the study: how an overlay narrows a study's models
    (`models: {r1-qwen-7b: null}`), since a merge can replace a value but never remove a key."""
    if isinstance(config.get("models"), dict):
        config["models"] = {name: spec for name, spec in config["models"].items() if spec is not None}


# sft keys renamed to TRL's SFTConfig names: a config that still spells the old ones is told the new.
RENAMED_SFT_KEYS = {"epochs": "num_train_epochs", "batch_size": "per_device_train_batch_size"}


def _check_renamed(config: dict, source: str) -> None:
    blocks = [("sft", config.get("sft"))] + [(f"models.{name}.sft", spec.get("sft"))
                                              for name, spec in (config.get("models") or {}).items()
                                              if isinstance(spec, dict)]
    for where, block in blocks:
        for old, new in RENAMED_SFT_KEYS.items():
            if isinstance(block, dict) and old in block:
                raise ConfigError(f"{source}: {where}.{old} is now {where}.{new} (TRL's SFTConfig name)")
