"""What every grpo-lambda command shares: one-line usage errors, reading a study's config (--configfile,
--set) or a stage's --settings JSON, the cell's names, and the options' parsers and help texts."""

from __future__ import annotations

import argparse
import json

class UsageError(Exception):
    """A missing or wrong argument: reported as one line, without a traceback."""


# The cell names a stage may take with --configfile, and what each names.


# The cell names a stage may take with --configfile, and what each names.
CELL_OPTIONS = {
    "model": "a model under models: in the config",
    "dataset": "a training set under datasets: in the config",
    "variant": "an objective variant under variants: in the config",
    "benchmark": "a benchmark under benchmarks: in the config",
}
CONFIGFILE_HELP = ("the study's config file, then any overlays merged over it in order, as snakemake --configfile "
                   "merges them")
SET_HELP = ("override one key, as snakemake --config does: rl.max_steps=5, 'rl={max_steps: 5}', 'seeds=[0]' "
            "(the value takes the schema's type); repeatable")
# The study a command reads when no --configfile is given (Snakemake's default too).
DEFAULT_CONFIG = "config/config.yaml"
# The config section each cell name is looked up in.
SECTIONS = {"model": "models", "dataset": "datasets", "variant": "variants", "benchmark": "benchmarks"}


def load_config(args) -> dict:
    """The study of --configfile (and its overlays) with the --set overrides, validated."""
    from grpo_lambda import config as config_module

    try:
        return config_module.load_naming_source(args.configfile, args.set or (), given_as="--set")
    except FileNotFoundError as error:
        raise UsageError(f"config file {error.filename} does not exist") from None
    except config_module.ConfigError as error:
        raise UsageError(str(error)) from None
    except Exception as error:  # a YAML syntax error, a folder given as a file, ...
        raise UsageError(f"cannot read config file {' '.join(args.configfile)}: {str(error).splitlines()[0]}") from None


def stage_settings_of(args, stage: str, **cell) -> dict:
    """The stage's settings: --settings JSON as given, or cut from --configfile for the named cell.

    Every name in ``cell`` is required with --configfile, except for prepare, which takes exactly one
    of --dataset and --benchmark.
    """
    config = study_of(args)
    if args.settings:
        return config
    given = {name: value for name, value in cell.items() if value is not None}
    if stage == "prepare":
        if len(given) != 1:
            raise UsageError("with --configfile, name exactly one of --dataset NAME and --benchmark NAME")
    else:
        missing = [name for name in cell if name not in given]
        if missing:
            raise UsageError(f"with --configfile, also give {' '.join(f'--{name} NAME' for name in missing)} "
                             f"({choices(config, missing[0])})")
    for name, value in given.items():
        if value not in config[SECTIONS[name]]:
            raise UsageError(f"--{name} {value!r} is not in {' '.join(args.configfile)}; {choices(config, name)}")
    from grpo_lambda import config as config_module

    return config_module.stage_settings(config, stage, **cell)


def choices(config: dict, name: str) -> str:
    return f"{SECTIONS[name]} there: {', '.join(config[SECTIONS[name]])}"


def json_settings(text: str) -> dict:
    try:
        settings = json.loads(text)
    except json.JSONDecodeError as error:
        raise UsageError(f"--settings is not valid JSON: {error}") from None
    if not isinstance(settings, dict):
        raise UsageError(f"--settings must be a JSON object, got {type(settings).__name__}")
    return settings


def set_threads(args) -> None:
    if getattr(args, "threads", None):
        import torch

        torch.set_num_threads(args.threads)


def require_files(**options) -> None:
    """Each option's file (or list of files) must exist: a missing input is named before any work."""
    from pathlib import Path

    for option, paths in options.items():
        for path in paths if isinstance(paths, list) else [paths]:
            if not Path(path).is_file():
                raise UsageError(f"--{option.replace('_', '-')} {path}: no such file")


def study_of(args) -> dict:
    """--settings JSON as given, or the whole config of --configfile and --set."""
    if args.settings:
        if args.configfile or args.set:
            raise UsageError("give --settings JSON or --configfile FILE (and --set), not both")
        return json_settings(args.settings)
    if not args.configfile:
        raise UsageError("give --settings JSON or --configfile FILE")
    return load_config(args)


def whole_number(minimum: int, meaning: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be {meaning}, got {value}")
        return value

    return parse


positive_int = whole_number(1, "at least 1")
non_negative_int = whole_number(0, "0 or more")



def step_number(text: str) -> str:
    if text != "final" and not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected 'final' or a step number, got {text!r}")
    return text


THREADS_HELP = "torch CPU threads for this job (default: torch's choice)"
# What --settings and --configfile hold, by what a stage reads: one cell, the whole study, the hub sources.
SOURCE_HELP = {
    "cell": ("the cell's settings as JSON (what the rules pass)",
             "the study's config; the cell is named by the options below"),
    "study": ("the whole config as JSON (what the rules pass)", "the study's config"),
    "hub": ("the hub models and datasets to fetch, as JSON (what the rule passes)",
            "every hub model and dataset the study's config reads"),
}


def config_options(sub, default=None) -> None:
    """--configfile STUDY [OVERLAY ...] and --set KEY=VALUE: the one way every command reads a config."""
    sub.add_argument("--configfile", nargs="+", metavar="FILE", default=default,
                     help=CONFIGFILE_HELP + (f" (default: {' '.join(default)}, Snakemake's default)" if default else ""))
    sub.add_argument("--set", action="append", metavar="KEY=VALUE", help=SET_HELP)


def add_stage(stages, name, handler, help_text, cell=(), reads="cell"):
    """A stage that reads its settings from --settings JSON or from --configfile (and the cell's names)."""
    sub = stages.add_parser(name, help=help_text, description=help_text)
    settings_help, config_help = SOURCE_HELP[reads]
    sub.add_argument("--settings", metavar="JSON", help=f"{settings_help}; or --configfile: {config_help}")
    config_options(sub)
    for option in cell:
        sub.add_argument(f"--{option}", metavar="NAME", help=CELL_OPTIONS[option])
    sub.set_defaults(handler=handler)
    return sub
