"""Reading a study's config: YAML files (a key given twice refused, YAML 1.2's numbers) merged as Snakemake
merges several ``--configfile`` files, then the overrides of ``grpo-lambda --set`` or ``snakemake --config``,
each value given the type the schema (for ``rl.trl``, TRL's field) declares for its key; then ``validate``."""

from __future__ import annotations

import copy
import re
import shlex
from collections.abc import Mapping
from pathlib import Path

import yaml

from grpo_lambda.config.schema import ConfigError, load_schema
from grpo_lambda.config.trl_fields import _accepted_types, _trl_fields
from grpo_lambda.config.validation import validate


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
    --config`` parsed, its ``set`` entry holding texts of the first kind: ``set_overrides``); their values are read
    as Snakemake reads ``--config`` and given the schema's types (``coerce_override``). One path alone may be
    given as it is.
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
        for one in (set_overrides(override) if isinstance(override, Mapping) else [override]):
            merge(config, coerce_override(one if isinstance(one, Mapping) else parse_override(one, config)))
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


# The key of ``snakemake --config`` that carries overrides in grpo-lambda --set's form (no config key has the name).
SET_KEY = "set"


def set_overrides(override: Mapping) -> list:
    """``snakemake --config`` as Snakemake parsed it, with its ``set`` entry split into ``KEY.PATH=VALUE`` texts:
    ``--config set='rl.max_steps=5 seeds=[0]'`` is ``grpo-lambda --set rl.max_steps=5 --set 'seeds=[0]'`` (the
    texts separated by spaces, quoted as in a shell where a value holds one). The other keys come first, as a
    mapping."""
    rest = {key: value for key, value in override.items() if key != SET_KEY}
    texts = override.get(SET_KEY)
    if texts is None:
        return [override]
    if isinstance(texts, str):
        texts = _split_set(texts)
    if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
        raise ConfigError(f"{SET_KEY}: expected KEY.PATH=VALUE texts separated by spaces "
                          f"(set='rl.max_steps=5 seeds=[0]'), got {override[SET_KEY]!r}")
    return ([rest] if rest else []) + texts


def _split_set(text: str) -> list[str]:
    """``set``'s texts, split as a shell splits words. Snakemake strips every quote from both ends of a --config
    value (snakemake.common.parse_key_value_arg): a text quoted for its spaces must not come first or last, or
    its quotes no longer pair up (refused here), or it splits into pieces the schema refuses."""
    try:
        return shlex.split(text)
    except ValueError:
        raise ConfigError(f"{SET_KEY}={text!r}: its quotes do not pair up (Snakemake strips the quotes at both ends "
                          "of a --config value: put a text quoted for its spaces between two others, or in a "
                          "config overlay)") from None


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
