"""The config schema and the error every refusal of a config raises.

The schema is ``workflow/schemas/config.schema.yaml`` (where the snakemake-workflows convention keeps it);
the package ships it as ``grpo_lambda/schemas/config.schema.yaml``, a link to that file, so an installed
package validates with the same schema. It says what each key may hold; ``checks`` adds what a schema
cannot express."""

from __future__ import annotations

import copy
import functools
import math
from importlib import resources

import jsonschema
import yaml


class ConfigError(ValueError):
    """A config that cannot describe a run; the message names the offending key."""


def load_schema() -> dict:
    """The schema, a copy the caller may change."""
    return copy.deepcopy(_parsed_schema())


@functools.cache
def _parsed_schema() -> dict:
    # Parsed once per process: a config's validation reads it a dozen times, and re-parsing its 33 kB in pure-Python
    # YAML each time took 0.5-0.9 s of a 3.5-4.2 s plan of the paper grid. libyaml's parser where PyYAML has it.
    text = resources.files("grpo_lambda").joinpath("schemas/config.schema.yaml").read_text()
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


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
