"""The study's config: loading, validation against the JSON Schema, and the settings of one cell.

The schema (``workflow/schemas/config.schema.yaml``) says what each key may hold; ``validate`` adds
the checks a schema cannot express (names that refer to each other, checkpoint steps within the run).
Snakemake calls ``validate`` right after loading the config, so a bad config fails before any job
starts, with a message that names the key. Each stage then receives only its cell's settings
(``stage_settings``) as JSON on the command line: they are also the rule's params, so a change to a
cell's settings reruns that cell and nothing else.
"""

from __future__ import annotations

import ast
import copy
import functools
import importlib.util
import math
import re
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

import jsonschema
import yaml

from grpo_lambda import layout
from grpo_lambda.data.prompts import TEMPLATES, template_problem
from grpo_lambda.variants import (OAR_PARAMETER_KEYS, OBJECTIVE_KEYS, check_objective, check_trace_length,
                                  expand_sweep, sweep_name, sweep_points, variant_config_kwargs)


class ConfigError(ValueError):
    """A config that cannot describe a run; the message names the offending key."""


def load_schema() -> dict:
    text = resources.files("grpo_lambda").joinpath("schemas/config.schema.yaml").read_text()
    return yaml.safe_load(text)


class _StrictLoader(yaml.SafeLoader):
    """YAML that refuses a key given twice in one mapping (PyYAML would keep the last one silently:
    a second `grpo:` under variants would train another objective under GRPO's name), and reads
    YAML 1.2's numbers."""

    def construct_mapping(self, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise ConfigError(f"{self.name}: key {key!r} is given twice (lines {seen[key] + 1} and "
                                  f"{key_node.start_mark.line + 1}); YAML would keep only the last")
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


# PyYAML reads YAML 1.1, whose floats need a point and a signed exponent: `3e-5` and `1e5` would be
# strings, where YAML 1.2, JSON, and the TRL and open-r1 recipes that write them mean numbers. This
# resolver adds YAML 1.2's float form (a mantissa with or without a point, any exponent).
_StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."))


def read_yaml(path: str | Path):
    """A config file's content, refusing duplicate keys."""
    with open(path, encoding="utf-8") as handle:
        return yaml.load(handle, Loader=_StrictLoader)


def load(paths: str | Path | list, overrides=(), *, source: str | None = None) -> dict:
    """Read a study's config files (a study and overlays after it), merge them and the overrides over
    it (``merge``, Snakemake's rule), and validate the result.

    ``overrides`` are ``KEY.PATH=VALUE`` texts (``grpo-lambda --set``) or mappings (what ``snakemake
    --config`` parsed); their values are read as Snakemake reads ``--config`` and given the schema's
    types (``coerce_override``). One path alone may be given as it is.
    """
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    source = source or " + ".join(str(path) for path in paths)
    config: dict = {}
    for path in paths:
        content = read_yaml(path)
        if not isinstance(content, dict):
            raise ConfigError(f"{path}: the config must be a mapping, got {type(content).__name__}")
        merge(config, content)
    for override in overrides:
        merge(config, coerce_override(override if isinstance(override, Mapping) else parse_override(override, config)))
    return validate(config, source=source)


def load_naming_source(paths: str | Path | list, overrides=(), *, given_as: str) -> dict:
    """``load``; when the files are valid alone and only the overrides make the config invalid, the error names
    the overrides (``given_as``: ``--set`` or ``--config``) as the source of the bad value, not the files."""
    try:
        return load(paths, overrides)
    except ConfigError as error:
        if not overrides:
            raise
        files = " + ".join(str(path) for path in ([paths] if isinstance(paths, (str, Path)) else paths))
        try:
            load(paths)
        except Exception:
            raise error from None  # the files are invalid on their own: the error names them
        text = str(error)
        detail = text[len(files) + 2:] if text.startswith(files + ": ") else text
        raise ConfigError(f"{given_as}: {detail} ({files} alone is valid)") from None


def merge(base: dict, overlay: Mapping) -> dict:
    """``overlay`` merged into ``base`` (in place, and returned) by the rule Snakemake uses for several
    ``--configfile`` files and ``--config`` (``snakemake.utils.update_config``): a mapping merges key by
    key, recursively; any other value (a list, a number, null) replaces the one before it whole."""
    for key, value in overlay.items():
        if isinstance(value, Mapping):
            inner = base.get(key)
            base[key] = merge(inner if isinstance(inner, dict) else {}, value)
        else:
            base[key] = copy.deepcopy(value)
    return base


# ---- overrides: one key from the command line ----------------------------------------------------

def override_value(text: str):
    """A value as ``snakemake --config KEY=VALUE`` reads it (``snakemake.cli.parse_config``): an int, a
    float, True or False, else YAML with every scalar kept as text (``{max_steps: 5}`` holds the text
    '5'), else the text; empty: null. ``coerce_override`` then gives each value its schema type."""
    if text == "":
        return None
    for parse in (int, float, {"True": True, "False": False}.__getitem__):
        try:
            return parse(text)
        except (ValueError, KeyError):
            continue
    try:
        value = yaml.load(text, Loader=yaml.BaseLoader)
    except yaml.YAMLError:
        return text
    return text if value is None else value


def parse_override(text: str, config: dict | None = None) -> dict:
    """``KEY.PATH=VALUE`` as the nested mapping it sets, e.g. ``rl.max_steps=5`` -> {"rl": {"max_steps": 5}}
    (before coercion: "5"). A key with dots in it (a model called qwen-1.5b) is found in ``config``."""
    key, sep, value = text.partition("=")
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(f"override {text!r}: expected KEY=VALUE, the key dotted (rl.max_steps=5)")
    parts, node, rest = [], config or {}, key
    while rest:
        known = [name for name in (node if isinstance(node, dict) else {})
                 if isinstance(name, str) and (rest == name or rest.startswith(name + "."))]
        part = max(known, key=len) if known else rest.split(".", 1)[0]
        parts.append(part)
        rest = rest[len(part) + 1:]
        node = node.get(part) if isinstance(node, dict) else None
    nested = override_value(value)
    for part in reversed(parts):
        nested = {part: nested}
    return nested


def coerce_override(override: Mapping) -> dict:
    """An override with each value given the type the schema declares for its key: the text '5' where an
    integer goes becomes 5, '3e-5' a number, 'true' a boolean, 'null' null (read as YAML is read); a text
    the schema takes as text stays text. ``rl.trl`` keys take the type of TRL's field."""
    schema = load_schema()
    return _coerce(dict(override), schema, schema, ())


def _schema_node(node: dict | None, schema: dict) -> list[dict]:
    """A schema node and the alternatives it allows ($ref followed, oneOf/anyOf opened)."""
    if not isinstance(node, dict):
        return []
    if "$ref" in node:
        target = schema
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target[part]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    nodes = [node]
    for alternatives in (node.get("oneOf", []), node.get("anyOf", [])):
        for alternative in alternatives:
            nodes += _schema_node(alternative, schema)
    return nodes


def _child(nodes: list[dict], key) -> dict | None:
    for node in nodes:
        if key is None and isinstance(node.get("items"), dict):
            return node["items"]
        if key is not None and key in node.get("properties", {}):
            return node["properties"][key]
        if key is not None and isinstance(node.get("additionalProperties"), dict):
            return node["additionalProperties"]
    return None


_JSON_TYPES = {"integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
               "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
               "boolean": lambda v: isinstance(v, bool), "null": lambda v: v is None,
               "string": lambda v: isinstance(v, str), "array": lambda v: isinstance(v, list),
               "object": lambda v: isinstance(v, dict)}


def _fits(value, nodes: list[dict]) -> bool | None:
    """Whether the schema nodes take ``value`` by its type or enum; None when they say nothing of either."""
    said = False
    for node in nodes:
        if "enum" in node or "const" in node:
            said = True
            choices = node["enum"] if "enum" in node else [node["const"]]
            if any(value == choice and type(value) is type(choice) for choice in choices):
                return True
        if "type" in node:
            said = True
            types = node["type"] if isinstance(node["type"], list) else [node["type"]]
            if any(_JSON_TYPES[name](value) for name in types):
                return True
    return False if said else None


def _coerce(value, node, schema: dict, path: tuple):
    if len(path) == 4 and path[0] == "sweep" and path[3] is None:  # sweep.<variant>.<key>: [values]
        node = schema["$defs"]["variant"]["properties"].get(path[2])
    nodes = _schema_node(node, schema)
    if isinstance(value, Mapping):
        return {key: _coerce(item, _child(nodes, key), schema, path + (key,)) for key, item in value.items()}
    if isinstance(value, list):
        return [_coerce(item, _child(nodes, None), schema, path + (None,)) for item in value]
    if len(path) >= 2 and path[-2] == "trl" and not nodes:  # rl.trl: TRL's field says
        return _coerce_trl(path[-1], value)
    if isinstance(value, str) and _fits(value, nodes) is False:
        typed = _yaml_scalar(value)
        return typed if _fits(typed, nodes) else value
    if isinstance(value, str) and _fits(value, nodes):
        # text or a number (a reward's parameter): the text '16' is meant as YAML would read it, 16
        typed = _yaml_scalar(value)
        return typed if not isinstance(typed, str) and typed is not None and _fits(typed, nodes) else value
    if _JSON_TYPES["integer"](value) and _fits(value, nodes) is False and _fits(str(value), nodes):
        return str(value)  # results=2024: a folder name Snakemake read as a number
    return value


def _yaml_scalar(text: str):
    try:
        return yaml.load(text, Loader=_StrictLoader)
    except (yaml.YAMLError, ConfigError):
        return text


def _coerce_trl(key, value):
    if not isinstance(value, str) or key not in _trl_fields():
        return value
    types = _accepted_types(_trl_fields()[key][1])
    if types is None:
        return value
    # A field that also takes text (trace_length: int or "batch_max") takes '3072' as the number it reads as.
    typed = _yaml_scalar(value)
    if isinstance(typed, str) or typed is None:
        return value
    return typed if isinstance(typed, types) and not (isinstance(typed, bool) and bool not in types) else value


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
    _check_renamed(config, source)
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
    _check_values(config, source)
    _check_references(config, source)
    _check_data_names(config, source)
    _check_data_sources(config, source)
    _check_local_paths(config, source)
    _check_variants(config, source)
    for model in config["models"]:
        _check_rl(config, model, source)
        _check_rewards(config, model, source)
        _check_prompt(config, model, source)
    _check_report(config, source)
    check_environment(config, source, repo_template=repo_template)
    return config


def _schema_hint(error: jsonschema.ValidationError, schema: dict) -> str:
    """What a schema error's message leaves out: the key or value a typo most likely meant (difflib), the choices
    of a value the schema lists, where a TRL field goes, and that a hub push is the publish rule's."""
    import difflib

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


def _check_report(config: dict, source: str) -> None:
    """The report: options that name models, training sets and variants, checked before any job runs
    (the tables and figures read them only at the end of a study)."""
    from grpo_lambda.tables.options import report_options

    try:
        report_options(config)
    except ValueError as error:
        raise ConfigError(f"{source}: {error}") from None


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


def _non_finite_numbers(value, path: str):
    """The dotted paths of every NaN or infinite number in a nested config value."""
    if isinstance(value, float) and not math.isfinite(value):
        yield path
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _non_finite_numbers(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _non_finite_numbers(item, f"{path}[{index}]")


def _check_values(config: dict, source: str) -> None:
    """What the schema lets through but no run can mean."""
    bad = list(_non_finite_numbers(config, ""))
    if bad:
        raise ConfigError(f"{source}: {bad[0]} is not a finite number")
    for index, seed in enumerate(config["seeds"]):
        if not isinstance(seed, int) or isinstance(seed, bool):  # JSON Schema counts 1.0 as an integer
            raise ConfigError(f"{source}: seeds[{index}] must be a whole number written without a point, got {seed!r}")
    results = Path(config["results"])
    if results.resolve() == Path(results.resolve().anchor):
        raise ConfigError(f"{source}: results {config['results']!r} is the filesystem root; name a folder")
    from grpo_lambda.tables.options import REPORT_DEFAULTS

    unknown = sorted(set(config.get("report") or {}) - set(REPORT_DEFAULTS))
    if unknown:
        raise ConfigError(f"{source}: report: unknown option(s) {unknown}; known: {sorted(REPORT_DEFAULTS)}")
    metric = (config.get("report") or {}).get("metric", REPORT_DEFAULTS["metric"])
    evaluation = config.get("evaluation") or {}
    if metric == "avg" and not evaluation.get("samples"):
        raise ConfigError(f"{source}: report.metric avg needs sampled completions: set evaluation.samples")
    if metric == "greedy" and evaluation.get("greedy") is False:
        raise ConfigError(f"{source}: report.metric greedy needs the greedy pass that evaluation.greedy: false "
                          "leaves out; set report.metric: avg")


def _check_references(config: dict, source: str) -> None:
    for model, spec in config["models"].items():
        for key, known in (("variants", config["variants"]), ("datasets", config["datasets"])):
            missing = [name for name in spec.get(key, []) if name not in known]
            if missing:
                raise ConfigError(
                    f"{source}: models.{model}.{key} names {missing}, which are not defined under "
                    f"'{key}' (defined: {sorted(known)})")
        if spec.get("lora") and importlib.util.find_spec("peft") is None:
            raise ConfigError(f"{source}: models.{model}.lora needs the peft package, which is not installed "
                              "(pip install -c envs/constraints-cpu.txt peft, or envs/requirements-*.txt)")
        if spec["source"] == "tiny" and spec.get("prompt", "plain") in TEMPLATES and spec.get("prompt") != "plain":
            raise ConfigError(f"{source}: models.{model}.prompt must be 'plain' or a template string for the tiny "
                              "model")
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
                         "backend": "hf", "dtype": "auto", "seed": 0, "grader_timeout": 1.0}


def sft_settings(config: dict, model: str) -> dict:
    top, own = config.get("sft", {}), config["models"][model].get("sft", {})
    merged = {"data": "solutions", **top, **own}
    merged["self_distill"] = {**SELF_DISTILL_DEFAULTS, **top.get("self_distill", {}), **own.get("self_distill", {})}
    return merged


def sft_uses_self_distillation(config: dict, model: str) -> bool:
    settings = sft_settings(config, model)
    return settings["data"] == "self_distill" and settings.get("num_train_epochs", 1) != 0


# sft.data open_r1: one SFT model per base model on open-r1's SFT set, shared by all its training sets.
SFT_SET_DEFAULTS = {"name": "bespoke-stratos-17k"}


def sft_is_shared(config: dict, model: str) -> bool:
    """Whether the model has one SFT model for all its training sets (sft.data open_r1)."""
    return sft_settings(config, model)["data"] == "open_r1"


def sft_set(config: dict) -> dict:
    """The chat SFT set of sft.data open_r1: its registry name, and a local copy (path) or the first rows (limit)."""
    return {**SFT_SET_DEFAULTS, **config.get("sft", {}).get("open_r1", {})}


def sft_folder(config: dict, model: str, dataset: str) -> str:
    """The folder of the SFT model an RL cell starts from, under the results folder."""
    return layout.sft(model, None if sft_is_shared(config, model) else dataset)


TRL_MAX_COMPLETION_LENGTH = 512  # GRPOConfig's default, where rl: names none (a test checks it against TRL)


def rl_settings(config: dict, model: str) -> dict:
    merged = {**config.get("rl", {}), **config["models"][model].get("rl", {})}
    merged["trl"] = {**config.get("rl", {}).get("trl", {}), **config["models"][model].get("rl", {}).get("trl", {})}
    merged.setdefault("max_steps", 100)
    return merged


def stage_settings(config: dict, stage: str, *, model: str | None = None, dataset: str | None = None,
                   variant: str | None = None, benchmark: str | None = None) -> dict:
    """The part of the config one stage of one cell depends on (and nothing more)."""
    from grpo_lambda.data import registry

    if stage == "prepare_sft_set":
        name = sft_set(config)["name"]
        return _with_record(config, {"key": name, "role": "sft",
                                     **registry.resolve({"source": "registry", **sft_set(config)}, name, "sft_sets")})
    if stage == "prepare":
        # where the rows are and how they are read, written out (a registry entry with the config's keys over it)
        group, key, role = ("datasets", dataset, "train") if dataset is not None else ("benchmarks", benchmark,
                                                                                       "benchmark")
        return _with_record(config, {"key": key, "role": role, **registry.resolve(config[group][key], key, group)})
    spec = config["models"][model]
    model_part = {"name": model, "source": spec["source"], "prompt": spec.get("prompt", "qwen_math"),
                  "lora": spec.get("lora")}
    if spec.get("revision"):
        model_part["revision"] = spec["revision"]
    if "system_prompt" in spec:  # only when set, so that the cells of a config without one keep their params
        model_part["system_prompt"] = spec["system_prompt"]
    if stage == "build_tiny":
        return {"name": model, "tiny": spec.get("tiny", {})}
    if stage == "sft":
        # Only what training reads: the sampling settings reach SFT through its data file.
        options = {key: value for key, value in sft_settings(config, model).items()
                   if key not in ("self_distill", "open_r1")}
        for key, default in (("data", "solutions"), ("format", "boxed")):
            if options.get(key) == default:
                del options[key]  # the defaults, so existing SFT jobs keep their params
        if options.get("data") == "open_r1":
            dataset = None  # one SFT model for all the model's training sets
        return {"model": model_part, "dataset": dataset, "sft": options}
    if stage == "prepare_sft":
        sampling = {"self_distill": sft_settings(config, model)["self_distill"]}
        if sft_settings(config, model).get("format", "boxed") != "boxed":  # the length limit counts the tags
            sampling["format"] = sft_settings(config, model)["format"]
        return {"model": model_part, "dataset": dataset, "sft": sampling,
                "max_solution_tokens": rl_settings(config, model).get("max_completion_length",
                                                                      TRL_MAX_COMPLETION_LENGTH)}
    if stage == "train":
        return {"model": model_part, "dataset": dataset, "variant_name": variant,
                "variant": config["variants"][variant], "rl": rl_settings(config, model),
                "checkpoints": model_checkpoints(config, model)}
    if stage == "publish":
        return {"train": stage_settings(config, "train", model=model, dataset=dataset, variant=variant),
                "publish": config["publish"], "benchmarks": list(config["benchmarks"])}
    if stage == "evaluate":
        return {"model": model_part, "dataset": dataset, "variant": variant,
                "evaluation": {k: v for k, v in config["evaluation"].items() if k != "checkpoints"}}
    raise ValueError(f"stage {stage!r} is unknown")


def _with_record(config: dict, settings: dict) -> dict:
    """A hub source's prepare settings name the prefetch record, whose commit prepare reads it at."""
    from grpo_lambda.data import registry

    if settings["source"] != "hub":
        return settings
    return {**settings, "prefetch_record": f"{config['results']}/{registry.PREFETCH_RECORD}"}


# ---- cross-checks that would otherwise fail inside a job ------------------------------------------

def _check_data_names(config: dict, source: str) -> None:
    from grpo_lambda.data import registry

    for model, spec in config["models"].items():
        if "open_r1" in spec.get("sft", {}):
            raise ConfigError(f"{source}: models.{model}.sft.open_r1: the open-r1 SFT set is one file for every "
                              "model that uses it; set it under the top-level sft.open_r1")
    for model in config["models"]:
        sft = sft_settings(config, model)
        if sft["data"] == "open_r1" and sft.get("format", "boxed") != "boxed":
            raise ConfigError(f"{source}: sft.format {sft['format']!r} for models.{model}: a chat SFT set (sft.data "
                              "open_r1) is fine-tuned in its own format; format applies to solutions and self_distill")
    try:
        registry.registry_entry(sft_set(config)["name"], "sft_sets")
    except ValueError as error:
        raise ConfigError(f"{source}: sft.open_r1.name: {error}") from None


# The dataset keys only some sources read (the others apply to every source: limit, max_prompt_chars).
DATA_KEY_SOURCES = {**dict.fromkeys(("n", "seed", "level", "levels", "box_rate", "carry_error_rate"), ("synthetic",)),
                    "name": ("registry",), "path": ("file", "registry"),
                    **dict.fromkeys(("hub_id", "config", "revision"), ("hub", "registry")),
                    **dict.fromkeys(("split", "fields", "answer_kind"), ("file", "hub", "registry"))}


def _check_data_sources(config: dict, source: str) -> None:
    """Each dataset and benchmark: its keys fit its source, a registry name is known, a file exists and
    holds every mapped field (read from its header or first rows), and a hub dataset already fetched
    holds them too (its columns are in the prefetch record; else prefetch checks them)."""
    from grpo_lambda.data import registry

    for group in ("datasets", "benchmarks"):
        for key, spec in config[group].items():
            where, kind = f"{group}.{key}", spec["source"]
            for item in spec:
                if kind not in DATA_KEY_SOURCES.get(item, (kind,)):
                    raise ConfigError(f"{source}: {where}.{item} applies to source "
                                      f"{' / '.join(DATA_KEY_SOURCES[item])} only, not {kind!r}")
            required = {"file": "path", "hub": "hub_id"}.get(kind)
            if required and required not in spec:
                raise ConfigError(f"{source}: {where}.{required} is required for source {kind}")
            if kind == "synthetic":
                continue
            try:
                resolved = registry.resolve(spec, key, group)
            except ValueError as error:
                raise ConfigError(f"{source}: {where}{'.name' if 'name' in spec else ''}: {error}") from None
            if resolved["source"] == "file":
                if "revision" in spec:
                    raise ConfigError(f"{source}: {where}.revision: a local path has no hub revision")
                columns = _file_columns(resolved, f"{where}.path", source)
            else:
                columns = registry.recorded_columns(config["results"], resolved)
            missing = registry.missing_field(resolved, columns)
            if missing:
                role, column = missing
                raise ConfigError(f"{source}: {where}.fields.{role}: column {column!r} is not in "
                                  f"{registry.where_from(resolved)} (its columns: {', '.join(sorted(columns)) or 'none'})")


def _file_columns(spec: dict, where: str, source: str) -> set[str] | None:
    from grpo_lambda.data import registry

    path = Path(spec["path"]).expanduser()
    if not path.exists():
        raise ConfigError(f"{source}: {where}: {spec['path']!r} does not exist")
    if not path.is_dir() and path.suffix not in registry.FILE_SUFFIXES:
        raise ConfigError(f"{source}: {where}: {spec['path']!r} is not a {', '.join(registry.FILE_SUFFIXES)} "
                          "file or a save_to_disk folder")
    try:
        return registry.source_columns(spec)
    except (OSError, ValueError) as error:
        raise ConfigError(f"{source}: {where}: {str(error).splitlines()[0]}") from None


def looks_local(model_source: str) -> bool:
    """A model source meant as a folder on disk rather than a hub id (``org/name``)."""
    return (model_source.startswith(("/", ".", "~")) or model_source.count("/") > 1 or "\\" in model_source
            or Path(model_source).exists())


def _check_local_paths(config: dict, source: str) -> None:
    made_here = str(config.get("results", "results")).rstrip("/") + "/"
    for model, spec in config["models"].items():
        local = spec["source"] == "tiny" or spec["source"].startswith(made_here) or looks_local(spec["source"])
        if "revision" in spec and local:
            raise ConfigError(f"{source}: models.{model}.revision applies to a hub model only, not to "
                              f"{spec['source']!r}")
        if spec["source"].startswith(made_here):
            continue  # another job's output (e.g. a fine-tuned model to self-distil from): built first
        if spec["source"] != "tiny" and looks_local(spec["source"]):
            folder = Path(spec["source"]).expanduser()
            if not (folder / "config.json").is_file():
                what = "holds no config.json" if folder.is_dir() else "does not exist"
                raise ConfigError(f"{source}: models.{model}.source: the local model folder {spec['source']!r} {what}")
    chat = sft_set(config)
    shared = any(sft_is_shared(config, model) for model in config["models"])
    if chat.get("path") and "revision" in chat:
        raise ConfigError(f"{source}: sft.open_r1.revision: a local path has no hub revision")
    if shared and chat.get("path") and not Path(chat["path"]).expanduser().exists():
        raise ConfigError(f"{source}: sft.open_r1.path: {chat['path']!r} does not exist")


def _check_variants(config: dict, source: str) -> None:
    """What the schema cannot say of a variant: keys of another objective, OAR parameters without a method;
    then whatever else the trainer's config would refuse (`variant_config_kwargs`)."""
    for name, variant in config["variants"].items():
        objective = variant["objective"]
        try:
            check_objective(f"variants.{name}.objective", objective)
        except ValueError as error:
            raise ConfigError(f"{source}: {error}") from None
        for key in variant:
            objectives = OBJECTIVE_KEYS[key][1] if key in OBJECTIVE_KEYS else None
            if objectives is not None and objective not in objectives:
                raise ConfigError(f"{source}: variants.{name}.{key} applies to objective {' / '.join(objectives)} "
                                  f"only, not {objective!r}")
        stray = [key for key in OAR_PARAMETER_KEYS if key in variant]
        if stray and variant.get("oar_method") is None:
            raise ConfigError(f"{source}: variants.{name}.{stray[0]} needs variants.{name}.oar_method "
                              "('gradient' or 'perturbation')")
        try:
            variant_config_kwargs(variant)
        except ValueError as error:
            raise ConfigError(f"{source}: variants.{name}: {error}") from None


# Set by the pipeline itself (grpo_lambda.train.build_config): rl.trl may not override them.
PIPELINE_TRL_KEYS = {"output_dir": None, "max_steps": "rl.max_steps", "seed": "seeds",
                     "logging_steps": None, "logging_nan_inf_filter": None, "save_strategy": None,
                     "save_steps": "rl.save_steps", "save_total_limit": None, "report_to": None,
                     "reward_weights": "the weights of rl.rewards",
                     # the launcher reads these from rl (a server for rl.vllm_mode: server), not from rl.trl
                     "use_vllm": "rl.use_vllm", "vllm_mode": "rl.vllm_mode",
                     "vllm_server_base_url": None, "vllm_group_port": None}


# A base class imported from a package that re-exports it lazily -> the module that defines it.
_REEXPORTED = {("transformers", "TrainingArguments"): "transformers.training_args",
               ("trl", "GRPOConfig"): "trl.trainer.grpo_config"}


def _class_fields(module: str, class_name: str, seen=()) -> dict:
    """The dataclass fields of ``module.class_name`` and its bases, with their literal defaults, read
    from the source without importing it (importing TRL takes seconds)."""
    origin = _module_file(module)
    package = module if origin.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(origin.read_text(encoding="utf-8"))
    imported = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), package) \
                if node.level else node.module
            for alias in node.names:
                imported[alias.asname or alias.name] = base
    fields = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for parent in node.bases:
                name = ast.unparse(parent)
                if name in imported and name not in seen:
                    parent_module = _REEXPORTED.get((imported[name], name), imported[name])
                    fields.update(_class_fields(parent_module, name, seen + (name,)))
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    fields[item.target.id] = (_literal_default(item.value), item.annotation)
            return fields
    raise LookupError(f"class {class_name} not found in {origin}")


def _module_file(module: str) -> Path:
    """The source file of ``module``, found without importing its packages (find_spec would)."""
    top, *rest = module.split(".")
    folder = Path(importlib.util.find_spec(top).submodule_search_locations[0]).joinpath(*rest)
    return folder / "__init__.py" if folder.is_dir() else folder.with_suffix(".py")


def _literal_default(value):
    if isinstance(value, ast.Call) and ast.unparse(value.func).endswith("field"):
        value = next((kw.value for kw in value.keywords if kw.arg == "default"), None)
    try:
        return ast.literal_eval(value) if value is not None else None
    except ValueError:
        return None


@functools.lru_cache(maxsize=1)
def _trl_fields() -> dict:
    return _class_fields("grpo_lambda.trainer_config", "GRPOLambdaConfig")


def trl_config_fields() -> dict:
    """GRPOLambdaConfig's fields (TRL's GRPOConfig, transformers' TrainingArguments and ours) with
    their literal defaults (None where the default is not a literal)."""
    return {name: default for name, (default, _) in _trl_fields().items()}


# A name in a field's annotation -> the YAML values it takes (int for float: YAML writes 1 for 1.0).
_ANNOTATION_TYPES = {"int": (int,), "float": (int, float), "bool": (bool,), "str": (str,), "dict": (dict,),
                     "list": (list,), "Dict": (dict,), "List": (list,), "None": (type(None),)}


def _accepted_types(annotation: ast.expr) -> tuple | None:
    """The Python types a YAML value of a field annotated so may have; None where the annotation names
    something else (an enum, a config class), which is then left for TRL to check."""
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        left, right = _accepted_types(annotation.left), _accepted_types(annotation.right)
        return None if left is None or right is None else left + right
    if isinstance(annotation, ast.Constant) and annotation.value is None:
        return (type(None),)
    if isinstance(annotation, ast.Name):
        return _ANNOTATION_TYPES.get(annotation.id)
    if isinstance(annotation, ast.Subscript):
        outer = ast.unparse(annotation.value)
        members = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
        if outer in ("Optional", "Union"):
            found = [_accepted_types(member) for member in members]
            return None if None in found else sum(found, ()) + ((type(None),) if outer == "Optional" else ())
        if outer == "Literal":
            return tuple({type(member.value) for member in members if isinstance(member, ast.Constant)})
        return _ANNOTATION_TYPES.get(outer)
    return None


def trl_type_error(key: str, value) -> str | None:
    """Why ``value`` cannot be GRPOLambdaConfig's field ``key`` (by its annotation), or None."""
    annotation = _trl_fields()[key][1]
    types = _accepted_types(annotation)
    if types is None:
        return None
    is_bool = isinstance(value, bool)
    if any(isinstance(value, kind) and (kind is bool or not is_bool) for kind in types):
        return None
    return f"is {value!r} ({type(value).__name__}); TRL's field is {ast.unparse(annotation)}"


def _rl_key(config: dict, model: str, key: str, trl: bool) -> str:
    """Where a model's rl setting comes from: its own rl block or the study's."""
    own = config["models"][model].get("rl", {})
    own = own.get("trl", {}) if trl else own
    return ("models." + model + "." if key in own else "") + ("rl.trl." if trl else "rl.") + key


def _check_rl(config: dict, model: str, source: str) -> None:
    rl = rl_settings(config, model)
    trl = rl["trl"]
    fields = trl_config_fields()
    for key in trl:
        if key in PIPELINE_TRL_KEYS:
            instead = f"; set {PIPELINE_TRL_KEYS[key]} instead" if PIPELINE_TRL_KEYS[key] else ""
            raise ConfigError(f"{source}: {_rl_key(config, model, key, True)} is set by the pipeline itself{instead}")
        _refuse_rl_key_in_trl(config, model, key, source)
        if key not in fields:
            raise ConfigError(f"{source}: {_rl_key(config, model, key, True)} is not a field of TRL's GRPOConfig "
                              "(nor of GRPOLambdaConfig)")
        wrong = trl_type_error(key, trl[key])
        if wrong:
            raise ConfigError(f"{source}: {_rl_key(config, model, key, True)} {wrong}")
    try:
        check_trace_length(trl.get("trace_length"))
    except ValueError as error:
        raise ConfigError(f"{source}: {_rl_key(config, model, 'trace_length', True)}: {error}") from None

    if rl.get("use_vllm") and rl.get("vllm_mode") == "server" and int(config["models"][model].get("nodes", 1)) > 1:
        raise ConfigError(f"{source}: {_rl_key(config, model, 'vllm_mode', False)}: server mode starts the server "
                          f"inside a one-node job; models.{model}.nodes is {config['models'][model]['nodes']}: use "
                          "vllm_mode colocate across nodes, or one node")
    for variant in model_variants(config, model):
        _check_batch(config, model, variant, rl, fields, source)
        _check_trace_length(config, model, variant, rl, fields, source)


def _refuse_rl_key_in_trl(config: dict, model: str, key: str, source: str) -> None:
    """An rl.trl key that the rl block has a key of its own for (rl.learning_rate, rl.beta, ...) would silently
    win over it: refused, as the keys the pipeline sets are. TRL's log_completions is not rl.log_completions (the
    pipeline's own completions record), so it stays TRL's to set."""
    if key != "log_completions" and key in load_schema()["$defs"]["rl"]["properties"]:
        where = _rl_key(config, model, key, True)
        raise ConfigError(f"{source}: {where} would override {where.replace('rl.trl.', 'rl.')} silently; "
                          f"set {where.replace('rl.trl.', 'rl.')} instead")


def _check_trace_length(config: dict, model: str, variant: str, rl: dict, fields: dict, source: str) -> None:
    """A fixed n of the absolute form holds every completion the variant's cells can write (the trace
    operator refuses a batch wider than n, which would fail mid-run)."""
    trace_length, own = rl["trl"].get("trace_length"), config["variants"][variant]
    if not isinstance(trace_length, int) or isinstance(trace_length, bool):
        return  # None or "batch_max": the batch's own width; a wrong value was named above
    longest = _cell_value(own, rl, fields, "max_completion_length")
    multiple = _cell_value(own, rl, fields, "pad_to_multiple_of")
    if isinstance(multiple, int) and multiple > 0:
        longest = -(-longest // multiple) * multiple
    if trace_length < longest:
        raise ConfigError(f"{source}: {_rl_key(config, model, 'trace_length', True)} ({trace_length}) is shorter than "
                          f"the completions variant {variant!r} can write ({longest} tokens, max_completion_length "
                          "rounded up to pad_to_multiple_of): the trace operator would refuse the first wider batch")


def _cell_value(own: dict, rl: dict, fields: dict, key: str):
    """A TRL setting as a variant's cells train with it: the variant's own, else rl.trl's, else rl's, else
    TRL's default."""
    return own.get(key, rl["trl"].get(key, rl.get(key, fields.get(key))))


def _check_batch(config: dict, model: str, variant: str, rl: dict, fields: dict, source: str) -> None:
    """The group size divides the generation batch, with the settings the variant's cells train with."""
    trl, own = rl["trl"], config["variants"][variant]

    def value(key):
        return _cell_value(own, rl, fields, key)

    def name(key):
        return f"variants.{variant}.{key}" if key in own else _rl_key(config, model, key, key in trl)

    per_device, generations = value("per_device_train_batch_size"), value("num_generations")
    steps, batch = value("steps_per_generation"), value("generation_batch_size")
    accumulation = value("gradient_accumulation_steps") or 1
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0
               for v in (per_device, generations, accumulation, steps or 1, batch or 1)):
        return  # a value of the wrong type: TRL names it
    if steps is not None and batch is not None:
        raise ConfigError(f"{source}: {name('steps_per_generation')} and {name('generation_batch_size')}: "
                          "set steps_per_generation or generation_batch_size, not both")
    if batch is not None and batch % per_device:
        raise ConfigError(f"{source}: {name('generation_batch_size')} ({batch}) must be a multiple of "
                          f"per_device_train_batch_size ({per_device})")
    if batch is None:
        batch = per_device * (steps or accumulation)
        how = (f"per_device_train_batch_size {per_device} x "
               + (f"steps_per_generation {steps}" if steps else f"gradient_accumulation_steps {accumulation}"))
    else:
        how = "generation_batch_size"
    if batch % generations:
        raise ConfigError(f"{source}: {name('num_generations')} ({generations}) must divide the generation batch "
                          f"({how} = {batch} completions per process), so that every prompt's group is whole")


def _check_rewards(config: dict, model: str, source: str) -> None:
    """rl.rewards (or rl.reward) names functions that exist and TRL can call, under distinct names, one trained."""
    from grpo_lambda.grading import reward

    rl = rl_settings(config, model)
    if "reward" in rl and "rewards" in rl:
        raise ConfigError(f"{source}: {_rl_key(config, model, 'reward', False)} and "
                          f"{_rl_key(config, model, 'rewards', False)}: give rl.rewards or its shorthand rl.reward, "
                          "not both")
    where = _rl_key(config, model, "rewards", False)
    # The completion lengths the model's cells train with: a length reward's default limit (variants may differ).
    lengths = {config["variants"][variant].get("max_completion_length", rl["trl"].get(
        "max_completion_length", rl.get("max_completion_length", TRL_MAX_COMPLETION_LENGTH)))
        for variant in model_variants(config, model)}
    names = {}
    for index, spec in enumerate(reward.reward_specs(rl)):
        try:
            function = [reward.reward_function(spec, max_completion_length=length) for length in sorted(lengths)][0]
        except ValueError as error:
            raise ConfigError(f"{source}: {where}[{index}].name: {error}") from None
        if function.__name__ in names:
            raise ConfigError(f"{source}: {where}[{index}]: {spec['name']!r} is logged as {function.__name__!r}, "
                              f"like {where}[{names[function.__name__]}]; TRL would mix their logs")
        names[function.__name__] = index
    if not any(spec.get("weight", 1.0) != 0 for spec in reward.reward_specs(rl)):
        raise ConfigError(f"{source}: {where}: every weight is 0, so nothing trains; give one reward a weight")


def _check_prompt(config: dict, model: str, source: str) -> None:
    spec = config["models"][model]
    problem = template_problem(spec.get("prompt", "qwen_math"), spec.get("system_prompt"))
    if problem:
        raise ConfigError(f"{source}: models.{model}.prompt: {problem}")
