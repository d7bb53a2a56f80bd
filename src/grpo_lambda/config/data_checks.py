"""The cross-checks of the datasets' and benchmarks' sources (registered in ``checks.CHECKS`` with the others):
each key fits its source, a registry name is known, a file exists and holds every field mapped to it, and
the open-r1 SFT set is named once."""

from __future__ import annotations

from pathlib import Path

from grpo_lambda.config.schema import ConfigError
from grpo_lambda.config.settings import sft_set, sft_settings


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
DATA_KEY_SOURCES = {**dict.fromkeys(("n", "seed", "level", "levels", "box_rate", "carry_error_rate", "columns",
                                     "carry_free_share", "decoys", "decoy_position", "tail_sums"), ("synthetic",)),
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
