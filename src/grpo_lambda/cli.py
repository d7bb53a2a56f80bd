"""grpo-lambda <stage>: one subcommand per pipeline stage; each Snakemake rule calls one.

A stage takes its settings (one cell's; the whole study's for aggregate and figures; the hub sources for
prefetch) either as JSON (--settings, what the rules pass: the settings are the rule's params, so a change
reruns exactly the cells it touches) or from a study's config files and, for a cell's stage, the cell's
names (--configfile config/config.yaml --model tiny ...), for running a stage by hand. Every command that
reads a config takes --configfile STUDY [OVERLAY ...], merged as Snakemake merges them, and --set
KEY.PATH=VALUE overrides (as snakemake --config set='KEY.PATH=VALUE ...'). grpo-lambda status shows where a
running grid stands; grpo-lambda validate checks a config; grpo-lambda design-check says what its seeds can
resolve; grpo-lambda plan summarises snakemake -n.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from grpo_lambda import __version__


class UsageError(Exception):
    """A missing or wrong argument: reported as one line, without a traceback."""


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
_SECTIONS = {"model": "models", "dataset": "datasets", "variant": "variants", "benchmark": "benchmarks"}


def _load_config(args) -> dict:
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


def _settings(args, stage: str, **cell) -> dict:
    """The stage's settings: --settings JSON as given, or cut from --configfile for the named cell.

    Every name in ``cell`` is required with --configfile, except for prepare, which takes exactly one
    of --dataset and --benchmark.
    """
    config = _study(args)
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
                             f"({_choices(config, missing[0])})")
    for name, value in given.items():
        if value not in config[_SECTIONS[name]]:
            raise UsageError(f"--{name} {value!r} is not in {' '.join(args.configfile)}; {_choices(config, name)}")
    from grpo_lambda import config as config_module

    return config_module.stage_settings(config, stage, **cell)


def _choices(config: dict, name: str) -> str:
    return f"{_SECTIONS[name]} there: {', '.join(config[_SECTIONS[name]])}"


def _json_settings(text: str) -> dict:
    try:
        settings = json.loads(text)
    except json.JSONDecodeError as error:
        raise UsageError(f"--settings is not valid JSON: {error}") from None
    if not isinstance(settings, dict):
        raise UsageError(f"--settings must be a JSON object, got {type(settings).__name__}")
    return settings


def _threads(args) -> None:
    if getattr(args, "threads", None):
        import torch

        torch.set_num_threads(args.threads)


def cmd_validate(args) -> None:
    """Exit 0 with the cell count (or the merged config, --show), or 2 with the one-line reason (no
    traceback) when it is invalid or this environment cannot run its jobs."""
    from grpo_lambda import config as config_module

    config = _load_config(args)
    name = " + ".join(args.configfile)
    try:
        config_module.check_design(config, name)
        if not args.config_only:
            config_module.check_environment(config, name, jobs=True)
    except config_module.ConfigError as error:
        raise UsageError(str(error)) from None
    if args.show:
        print(json.dumps(config, indent=2))
    else:
        print(f"{name}: valid; {len(config_module.rl_cells(config))} RL cells")


def cmd_status(args) -> None:
    from grpo_lambda import status

    if args.configfile is None:  # the default study's cells are rarely the grid a researcher runs: say so
        args.configfile = [DEFAULT_CONFIG]
        print(f"grpo-lambda status: no --configfile given: showing {DEFAULT_CONFIG}'s cells; give the study's "
              "config and its overlays as the grid was run with them", file=sys.stderr)
    report = status.grid_status(_load_config(args), results=args.results,
                                stale_minutes=args.stale_minutes)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print("\n".join(status.format_status(report)))
    attention = status.needing_attention(report)
    if attention:  # a script or a cron job sees it without parsing the lines
        print("grpo-lambda status: " + "; ".join(f"{len(names)} {state}: {', '.join(names)}"
                                                 for state, names in attention.items()), file=sys.stderr)
        raise SystemExit(1)


def cmd_design_check(args) -> None:
    """Print every comparison family of the study with what its seeds can resolve; exit 1 when one cannot
    reject (what `grpo-lambda validate` and Snakemake's start refuse)."""
    from grpo_lambda import design

    config = _load_config(args)
    try:
        effects = design.parse_effects(args.effect)
    except ValueError as error:
        raise UsageError(str(error)) from None
    if effects and not args.pilot:
        raise UsageError("--effect needs --pilot: the units an effect needs come from a pilot run's variances")
    pilot = design.pilot_tables(args.pilot, config) if args.pilot else None
    table = design.design_table(config, pilot, effects)
    print(design.render(table, config, args.pilot, effects), end="")
    if not table["reachable"].all():
        raise SystemExit(1)


def cmd_plan(args) -> None:
    from grpo_lambda import plan

    raise SystemExit(plan.run(args.snakemake_args))


def cmd_preflight(args) -> None:
    """Exit 0 on go, 1 on no-go, 130 on Ctrl-C; the JSON record is written after every check (a partial one
    when interrupted)."""
    from pathlib import Path

    from grpo_lambda import preflight

    unknown = [name for name in args.skip if name not in preflight.CHECKS]
    if unknown:
        raise UsageError(f"--skip {unknown[0]}: no such check; the checks: {', '.join(preflight.CHECKS)}")
    config = _load_config(args)
    path = Path(args.json or Path(args.work) / "preflight.json")
    record = preflight.run(config, cpu=args.cpu, quick=args.quick, skip=args.skip, work=args.work,
                           study_config=args.study_config, out=lambda line: print(line, flush=True),
                           save=lambda partial: preflight.write(partial, path))
    print(f"record: {path}")
    if record["interrupted"]:
        raise SystemExit(130)  # the shell's status for a command ended by Ctrl-C
    if record["verdict"] != "go":
        raise SystemExit(1)


def cmd_completions(args) -> None:
    from grpo_lambda import completions

    logged = completions.read_cell(args.cell)
    if logged.empty:
        raise UsageError(f"{args.cell} holds no logged completions (rl.log_completions, folder completions/)")
    step = args.step if args.step is not None else int(logged["step"].max())
    rows = logged[logged["step"] == step]
    if rows.empty:
        raise UsageError(f"{args.cell}: no completions logged at step {step}; logged: "
                         f"{', '.join(str(s) for s in sorted(logged['step'].unique()))}")
    for row in rows.head(args.limit).itertuples():
        print(f"--- step {row.step}, reward {row.reward}, TRL's group advantage {row.advantage:.3f}, "
              f"the loss's per-token advantage: mean {row.token_advantage_mean:.3f}, first token "
              f"{row.token_advantage_first:.3f}\n{row.prompt}\n>>> {row.completion}")


def cmd_build_tiny(args) -> None:
    from grpo_lambda import tiny

    settings = _settings(args, "build_tiny", model=args.model)
    tiny.build(args.out, **settings["tiny"])


def cmd_prefetch(args) -> None:
    from grpo_lambda import files, prefetch

    settings = _study(args)
    if not args.settings:
        settings = prefetch.hub_sources(settings)
    files.write_json(args.out, prefetch.run(settings))


def cmd_prepare(args) -> None:
    from grpo_lambda import prepare

    settings = _settings(args, "prepare", dataset=args.dataset, benchmark=args.benchmark)
    if args.prefetched:
        _require_files(prefetched=args.prefetched)
    prepare.run(settings, args.out, prefetched=args.prefetched)


def _model_folder(source: str, settings: dict) -> str:
    """A hub model named by id, as the folder of its snapshot at the model's revision (from the cache the
    prefetch rule filled, offline): every loader then reads those exact files. A folder stays as it is."""
    from grpo_lambda import prefetch
    from grpo_lambda.config import looks_local

    if not prefetch.is_hub_model(source) or looks_local(source):
        return source
    revision = settings.get("model", {}).get("revision")
    try:
        return prefetch.fetch_model(source, revision)
    except Exception as error:
        raise UsageError(f"model {source!r} at revision {revision or 'of the default branch'} is not in the hub "
                         f"cache; run the prefetch rule first ({str(error).splitlines()[0]})") from None


def cmd_sft(args) -> None:
    from grpo_lambda import sft

    settings = _settings(args, "sft", model=args.model, dataset=args.dataset)
    _require_files(data=args.data)
    _threads(args)
    sft.run(settings, base=_model_folder(args.base, settings), data_path=args.data, out_dir=args.out)


def cmd_prepare_sft(args) -> None:
    from grpo_lambda import sft_data

    _threads(args)
    settings = _settings(args, "prepare_sft", model=args.model, dataset=args.dataset)
    sft_data.run(settings, base=_model_folder(args.base, settings), data_path=args.data, out=args.out,
                 counts_path=args.counts)


def cmd_train(args) -> None:
    from grpo_lambda import train

    settings = _settings(args, "train", model=args.model, dataset=args.dataset, variant=args.variant)
    _require_files(data=args.data)
    evaluation = _final_evaluation(args)
    _threads(args)
    main_process = train.run(settings, base=_model_folder(args.base, settings), data_path=args.data,
                             cell_dir=args.cell, seed=args.seed)
    if evaluation and main_process:
        # The final model as the evaluate stage reads it (from the saved folder), in the process that trained
        # it: the job pays its start and imports once. Called here, not in train.py, so that evaluation code
        # stays out of the training fingerprint (a change to it never retrains a cell).
        import gc

        from grpo_lambda import evaluate

        gc.collect()  # the trainer, its optimizer state and reference model go before the model loads again
        evaluate.run(evaluation["settings"], model_path=os.path.join(args.cell, "model"),
                     benchmark_paths=evaluation["benchmarks"], out_dir=evaluation["out_dir"], seed=args.seed,
                     step="final")


def _final_evaluation(args) -> dict | None:
    """train --bench: the final model's evaluation, done by the job that trained it (the evaluate stage's
    settings: --evaluation JSON beside --settings, else the config's), or None."""
    given = [name for name in ("evaluation", "bench", "eval_dir") if getattr(args, name)]
    if not given:
        return None
    if not args.bench or not args.eval_dir:
        raise UsageError("evaluating the final model needs both --bench FILE ... and --eval-dir DIR")
    _require_files(bench=args.bench)
    if args.settings:
        if not args.evaluation:
            raise UsageError("with --settings, --bench needs --evaluation JSON (the evaluate stage's settings)")
        evaluation = _json_settings(args.evaluation)
    else:
        if args.evaluation:
            raise UsageError("--evaluation JSON goes with --settings; with --configfile the config's is read")
        evaluation = _settings(args, "evaluate", model=args.model, dataset=args.dataset, variant=args.variant)
    return {"settings": evaluation, "benchmarks": args.bench, "out_dir": args.eval_dir}


def cmd_evaluate(args) -> None:
    from grpo_lambda import evaluate

    settings = _settings(args, "evaluate", model=args.model, dataset=args.dataset, variant=args.variant)
    _require_files(bench=args.bench)
    _threads(args)
    evaluate.run(settings, model_path=_model_folder(args.checkpoint, settings), benchmark_paths=args.bench,
                 out_dir=args.out_dir, seed=args.seed, step=args.step)


def cmd_publish(args) -> None:
    from grpo_lambda import publish

    settings = _settings(args, "publish", model=args.model, dataset=args.dataset, variant=args.variant)
    try:
        record = publish.run(settings, cell_dir=args.cell, seed=args.seed, out=args.out)
    except (FileNotFoundError, PermissionError, ValueError) as error:
        raise UsageError(str(error)) from None
    print(f"published {args.cell} to {record['repo_id']}: {record['commit_url']}")


def _require_files(**options) -> None:
    """Each option's file (or list of files) must exist: a missing input is named before any work."""
    from pathlib import Path

    for option, paths in options.items():
        for path in paths if isinstance(paths, list) else [paths]:
            if not Path(path).is_file():
                raise UsageError(f"--{option.replace('_', '-')} {path}: no such file")


def _study(args) -> dict:
    """--settings JSON as given, or the whole config of --configfile and --set."""
    if args.settings:
        if args.configfile or args.set:
            raise UsageError("give --settings JSON or --configfile FILE (and --set), not both")
        return _json_settings(args.settings)
    if not args.configfile:
        raise UsageError("give --settings JSON or --configfile FILE")
    return _load_config(args)


def cmd_aggregate(args) -> None:
    from grpo_lambda.tables import write

    print("\n".join(write.main(_study(args), args.results, args.out)))


def cmd_figures(args) -> None:
    from grpo_lambda import figures

    config = _study(args)
    try:
        print("\n".join(figures.main(config, args.tables, args.out)))
    except FileNotFoundError as error:
        raise UsageError(str(error)) from None


def cmd_headline(args) -> None:
    from grpo_lambda import headline

    try:
        print(headline.main(_study(args), args.tables, args.figures, args.out))
    except FileNotFoundError as error:
        raise UsageError(str(error)) from None


def cmd_spread(args) -> None:
    from grpo_lambda import spread
    from grpo_lambda.tables.write import write_table

    missing = [folder for folder in args.runs + ([args.check] if args.check else []) if not os.path.isdir(folder)]
    if missing:
        raise UsageError(f"no results folder {missing[0]}")
    if len(set(args.runs)) != len(args.runs):
        raise UsageError("a results folder is named twice")
    try:
        table = spread.spread_table({folder: folder for folder in args.runs}, args.level,
                                    check=(args.check, args.check) if args.check else None)
    except (FileNotFoundError, ValueError) as error:
        raise UsageError(str(error)) from None
    print("\n".join(write_table(table, args.out, "spread")))


def cmd_check_band(args) -> None:
    import json

    from grpo_lambda import files
    from grpo_lambda.tables.horizon import band_check

    _require_files(eval=args.eval)
    with open(args.eval) as handle:
        summary = json.load(handle)
    try:
        record = band_check(summary, args.band)
    except ValueError as error:
        # Not a usage error: the study's data are fine, the horizon's difficulty is not (exit 1).
        print(f"grpo-lambda check-band: {error}", file=sys.stderr)
        raise SystemExit(1) from None
    files.write_json(args.out, record)
    print(f"{record['model']}/{record['dataset']}: SFT accuracy {record['accuracy']:.3f} on "
          f"{record['benchmark']}, in the band {record['band']}")


def _whole_number(minimum: int, meaning: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be {meaning}, got {value}")
        return value

    return parse


_positive_int = _whole_number(1, "at least 1")
_non_negative_int = _whole_number(0, "0 or more")


def _step(text: str) -> str:
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


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="grpo-lambda", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    root.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    stages = root.add_subparsers(dest="stage", required=True, metavar="STAGE",
                                 title="stages", description="run `grpo-lambda STAGE --help` for a stage's options")

    def config_options(sub, default=None):
        """--configfile STUDY [OVERLAY ...] and --set KEY=VALUE: the one way every command reads a config."""
        sub.add_argument("--configfile", nargs="+", metavar="FILE", default=default,
                         help=CONFIGFILE_HELP + (f" (default: {' '.join(default)}, Snakemake's default)" if default else ""))
        sub.add_argument("--set", action="append", metavar="KEY=VALUE", help=SET_HELP)

    def stage(name, handler, help_text, cell=(), reads="cell"):
        """A stage that reads its settings from --settings JSON or from --configfile (and the cell's names)."""
        sub = stages.add_parser(name, help=help_text, description=help_text)
        settings_help, config_help = SOURCE_HELP[reads]
        sub.add_argument("--settings", metavar="JSON", help=f"{settings_help}; or --configfile: {config_help}")
        config_options(sub)
        for option in cell:
            sub.add_argument(f"--{option}", metavar="NAME", help=CELL_OPTIONS[option])
        sub.set_defaults(handler=handler)
        return sub

    sub = stages.add_parser("validate", help="check a study's config and count its RL cells",
                            description="Check a study's config (its files merged, the overrides applied) against "
                                        "the schema and the cross-checks, that every comparison family can reject "
                                        "at its seeds (grpo-lambda design-check), and count its RL cells.")
    config_options(sub, default=["config/config.yaml"])
    sub.add_argument("--show", action="store_true", help="print the merged, validated config (JSON) instead")
    sub.add_argument("--config-only", action="store_true",
                     help="leave out what only running jobs need (vLLM, DeepSpeed, a W&B key): a plan's check")
    sub.set_defaults(handler=cmd_validate)

    sub = stages.add_parser(
        "status", help="where a grid stands: done, running, failed, stalled and missing cells",
        description="One line per RL cell of the config: done; running (last step, last reward, steps per "
                    "minute, time left); failed (the line of its job log that says why); stalled (started, "
                    "nothing written for --stale-minutes: a rerun resumes it); missing. Then the totals. "
                    "Reads the results tree only, so it works while a grid is writing it. Cells of the tree "
                    "that the config does not name (an overlay left out) follow, marked. Without --configfile: "
                    "config/config.yaml, with a warning. Exit status 1 when "
                    "a cell failed or stalled (named on standard error), else 0.")
    config_options(sub)
    sub.add_argument("--results", metavar="DIR", help="the results folder (default: the config's results:)")
    sub.add_argument("--stale-minutes", type=float, default=30.0, metavar="MIN",
                     help="a started cell with no write for longer is stalled, not running (default: %(default)s)")
    sub.add_argument("--json", action="store_true", help="print the cells and totals as JSON, for scripts")
    sub.set_defaults(handler=cmd_status)

    sub = stages.add_parser(
        "design-check", help="each comparison family of a study: its size, units, floor and whether it can reject",
        description="One line per comparison family the study's tables will declare (grpo_lambda.config.families): "
                    "its size m, its units (seeds, or SFT models under sft.seeds), the smallest p one test can give, "
                    "its procedure (report.multiplicity, report.descriptive), whether it can reject and the units it "
                    "would need. With --pilot, a published run whose standard errors give each family's minimum "
                    "detectable effect at the study's units; with --effect, the units its median comparison needs "
                    "to detect it (grpo_lambda.design). Exit status 1 when a family cannot reject.")
    config_options(sub, default=["config/config.yaml"])
    sub.add_argument("--pilot", metavar="DIR", help="an earlier run's folder or its raw/ (e.g. docs/compare-run)")
    sub.add_argument("--effect", action="append", metavar="[METRIC=]X",
                     help="an effect to detect (with --pilot): X an accuracy difference, or reward_auc=X, steps=X, "
                          "slope=X; repeatable. Adds the units each family's median comparison needs")
    sub.set_defaults(handler=cmd_design_check)

    sub = stages.add_parser(
        "plan", help="what snakemake would run, summarised: jobs per rule, why, and what changed since the last run",
        description="Runs snakemake -n with the arguments given (targets, then --configfile, --config, --profile, "
                    "...; --set KEY.PATH=VALUE as for every command, passed on as --config set=...) and prints the "
                    "jobs per rule with Snakemake's reasons (output missing, after a job it needs, params or code "
                    "changed, ...), then, rule by rule, what changed since the last run (the settings, with their old "
                    "and new values; the newer input files) and the wildcards of the jobs that rerun. Exit status: "
                    "Snakemake's (its own output when it fails); 2 when a target follows --configfile.")
    sub.add_argument("snakemake_args", nargs=argparse.REMAINDER, metavar="SNAKEMAKE_ARGS",
                     help="passed to snakemake -n as they are")
    sub.set_defaults(handler=cmd_plan)

    sub = stages.add_parser(
        "preflight", help="check a (GPU) node before a grid runs on it: one line per check, go/no-go, a JSON record",
        description="Checks, in order: package versions, CUDA, bf16, an all-reduce across the visible GPUs, the "
                    "hub (the config's models and datasets cached or reachable), free disk against the grid's "
                    "estimate, the step-time ratio on a Qwen2.5-1.5B-shaped model, the embedded default study "
                    "for one seed, and a 2-step train cell with colocated vLLM (when installed). Once a check "
                    "fails, the slow ones are skipped (no-go already). Exit status 0 on go, 1 on no-go, 130 on "
                    "Ctrl-C, with the record of the checks so far (docs/cluster.md).")
    config_options(sub, default=["config/config.yaml"])  # the grid's study: its hub sources and disk estimate
    sub.add_argument("--cpu", action="store_true",
                     help="a node without a GPU: skip the GPU checks (without it, no GPU is a failure) and run the "
                          "study check on a small built-in study (a verdict in ≤ 5 minutes on 2 cores)")
    sub.add_argument("--quick", action="store_true", help="skip the slow checks: step-ratio, study, vllm-colocate")
    sub.add_argument("--skip", nargs="+", default=[], metavar="CHECK", help="skip these checks")
    sub.add_argument("--study-config", metavar="FILE",
                     help="the study the study check runs for one seed (default: config/config.yaml; with --cpu, "
                          "a small built-in study of it that runs in minutes on 2 cores)")
    sub.add_argument("--work", metavar="DIR", default="results/preflight",
                     help="folder for the checks' runs and logs (default: %(default)s)")
    sub.add_argument("--json", metavar="FILE", help="the JSON record (default: WORK/preflight.json)")
    sub.set_defaults(handler=cmd_preflight)

    sub = stages.add_parser("completions", help="print a cell's latest logged training completions",
                            description="The completions a cell logged at its latest (or a given) step "
                                        "(rl.log_completions), with reward, TRL's group advantage and the "
                                        "advantages the loss read (the advantage estimator's, per token: their "
                                        "mean over the completion and its first token's).")
    sub.add_argument("cell", metavar="CELL", help="the cell folder, e.g. results/tiny/arith/grpo/seed0")
    sub.add_argument("--step", type=int, help="the logged step (default: the latest)")
    sub.add_argument("--limit", type=int, default=8, help="completions to print (default: %(default)s)")
    sub.set_defaults(handler=cmd_completions)

    sub = stage("build-tiny", cmd_build_tiny, "build and save the offline tiny model", ["model"])
    sub.add_argument("--out", required=True, metavar="DIR", help="folder to write the model and tokenizer to")

    sub = stage("prefetch", cmd_prefetch, "download the study's hub models and datasets into $HF_HOME", reads="hub")
    sub.add_argument("--out", required=True, help="a JSON record of what was fetched")

    sub = stage("prepare", cmd_prepare, "write a training set or benchmark as normalised JSONL",
                ["dataset", "benchmark"])
    sub.add_argument("--out", required=True, metavar="FILE", help="the JSONL file to write")
    sub.add_argument("--prefetched", metavar="FILE",
                     help="the prefetch record: a hub dataset is read at the commit it holds, which the summary records")

    sub = stage("prepare-sft", cmd_prepare_sft, "the SFT set by self-distillation: the base model's correct samples",
                ["model", "dataset"])
    sub.add_argument("--base", required=True, metavar="MODEL", help="hub id or folder of the model that samples")
    sub.add_argument("--data", required=True, metavar="FILE", help="the training set's JSONL (from prepare)")
    sub.add_argument("--out", required=True, metavar="FILE", help="the SFT set to write (JSONL)")
    sub.add_argument("--counts", metavar="FILE", help="the counts to write (JSON); default: --out with .json")
    sub.add_argument("--threads", type=_positive_int, metavar="N", help=THREADS_HELP)

    sub = stage("sft", cmd_sft, "supervised fine-tuning", ["model", "dataset"])
    sub.add_argument("--base", required=True, metavar="MODEL", help="hub id or folder of the base model")
    sub.add_argument("--data", required=True, metavar="FILE", help="the training set's JSONL (from prepare)")
    sub.add_argument("--out", required=True, metavar="DIR", help="folder to write the fine-tuned model to")
    sub.add_argument("--threads", type=_positive_int, metavar="N", help=THREADS_HELP)

    sub = stage("train", cmd_train, "RL training of one cell (resumes if interrupted)", ["model", "dataset", "variant"])
    sub.add_argument("--base", required=True, metavar="DIR", help="folder of the SFT model")
    sub.add_argument("--data", required=True, metavar="FILE", help="the training set's JSONL (from prepare)")
    sub.add_argument("--cell", required=True, metavar="DIR",
                     help="the cell's folder: results/<model>/<dataset>/<variant>/seed<seed>")
    sub.add_argument("--seed", type=_non_negative_int, required=True, metavar="N", help="the cell's training seed")
    sub.add_argument("--threads", type=_positive_int, metavar="N", help=THREADS_HELP)
    sub.add_argument("--bench", nargs="+", metavar="FILE",
                     help="then evaluate the final model on these benchmark JSONL files, in this job (as the evaluate "
                          "stage does, from the saved model)")
    sub.add_argument("--eval-dir", metavar="DIR", help="with --bench: gets <benchmark>.jsonl and <benchmark>.json")
    sub.add_argument("--evaluation", metavar="JSON",
                     help="with --bench and --settings: the evaluate stage's settings as JSON (what the rule passes)")

    sub = stage("evaluate", cmd_evaluate, "evaluate one checkpoint on benchmarks", ["model", "dataset", "variant"])
    sub.add_argument("--checkpoint", required=True, metavar="DIR", help="folder of the model to evaluate")
    sub.add_argument("--bench", required=True, nargs="+", metavar="FILE",
                     help="benchmark JSONL files, named by their stem")
    sub.add_argument("--out-dir", required=True, metavar="DIR",
                     help="gets <benchmark>.jsonl and <benchmark>.json per benchmark")
    sub.add_argument("--seed", type=_non_negative_int, metavar="N",
                     help="the cell's seed, recorded in the summaries and seeding sampling (default: 0)")
    sub.add_argument("--step", default="final", type=_step, metavar="STEP",
                     help="the checkpoint's training step, or 'final' (default)")
    sub.add_argument("--threads", type=_positive_int, metavar="N", help=THREADS_HELP)

    sub = stage("aggregate", cmd_aggregate, "the study's tables from its results folder", reads="study")
    sub.add_argument("--results", default="results", metavar="DIR", help="the results folder (default: %(default)s)")
    sub.add_argument("--out", required=True, metavar="DIR", help="folder to write to")
    sub = stage("figures", cmd_figures, "the study's figures from the tables that aggregate wrote", reads="study")
    sub.add_argument("--tables", default="results/tables", metavar="DIR",
                     help="the folder aggregate wrote its tables to (default: %(default)s)")
    sub.add_argument("--out", required=True, metavar="DIR", help="folder to write to")

    sub = stage("headline", cmd_headline, "the report's first screen (Table 1, the primary verdicts, Figure 1) "
                "from the tables and figures", reads="study")
    sub.add_argument("--tables", default="results/tables", metavar="DIR", help="the tables (default: %(default)s)")
    sub.add_argument("--figures", default="results/figures", metavar="DIR", help="the figures (default: %(default)s)")
    sub.add_argument("--out", required=True, metavar="FILE", help="the HTML fragment to write")

    sub = stage("publish", cmd_publish, "push a trained cell's final model, with a model card, to its own hub "
                "repo (publish.repo_id; needs the network and a token)", ["model", "dataset", "variant"])
    sub.add_argument("--cell", required=True, metavar="DIR",
                     help="the cell's folder: results/<model>/<dataset>/<variant>/seed<seed>")
    sub.add_argument("--seed", type=_non_negative_int, required=True, metavar="N", help="the cell's training seed")
    sub.add_argument("--out", required=True, metavar="FILE", help="the record to write (repo, commit), JSON")

    sub = stages.add_parser(
        "check-band", help="stop a horizon study whose SFT model lies outside its difficulty band",
        description="Reads an SFT model's evaluation summary on its horizon's own suite and exits 1, naming the "
                    "horizon, when its greedy accuracy lies outside the band (report.horizon.band); otherwise "
                    "writes a record of the check. The horizon study's RL waits for it.")
    sub.add_argument("--eval", required=True, metavar="FILE", help="the SFT model's summary on the suite (JSON)")
    sub.add_argument("--band", required=True, nargs=2, type=float, metavar=("LOW", "HIGH"),
                     help="the declared band of greedy accuracy")
    sub.add_argument("--out", required=True, metavar="FILE", help="the record to write (JSON)")
    sub.set_defaults(handler=cmd_check_band)

    sub = stages.add_parser(
        "spread", help="how the headline numbers vary across whole runs of one study (SFT seeds, machines)",
        description="Reads the tables of several finished runs of one study (their results folders: other SFT "
                    "seeds, other machines) and writes spread.{csv,md,tex}: per headline number (Table 1 "
                    "accuracies, paired differences, reward AUC) each run's value, their mean with its confidence "
                    "interval (mean ± t·s/√K), the prediction interval for one more run (mean ± t·s·√(1 + 1/K); "
                    "normal runs assumed) and, with 3 runs or more, how many fall inside the interval the others "
                    "give.")
    sub.add_argument("runs", nargs="+", metavar="RESULTS", help="the results folders of the runs (at least 2)")
    sub.add_argument("--check", metavar="RESULTS",
                     help="a further run set against the interval the others give (it does not enter it)")
    sub.add_argument("--level", type=float, default=0.95, help="the interval's level (default: %(default)s)")
    sub.add_argument("--out", required=True, metavar="DIR", help="folder to write spread.{csv,md,tex} to")
    sub.set_defaults(handler=cmd_spread)
    return root


def main(argv: list[str] | None = None) -> None:
    # Idle OpenMP threads sleep instead of spinning: read when torch loads (every stage imports it later, in
    # its handler). Where other work shares the cores, an SFT step on 2 spinning threads took 7x as long as on
    # 1; sleeping, about as long as on 1 (benchmarks/README.md). The numbers a job computes do not change.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["plan"] and argv[1:2] not in (["-h"], ["--help"]):
        # Snakemake's arguments, options first, pass through as they are (argparse's REMAINDER would take options
        # only after a positional argument)
        cmd_plan(argparse.Namespace(snakemake_args=argv[1:]))
    args = parser().parse_args(argv)
    from grpo_lambda.lifetime import end_with_job_shell

    end_with_job_shell()
    try:
        args.handler(args)
    except UsageError as error:
        # Exit status 2, as argparse gives for its own usage errors.
        print(f"grpo-lambda {args.stage}: error: {error}".replace("\n", " "), file=sys.stderr)
        raise SystemExit(2) from None
    except BrokenPipeError:
        # The reader went away (`grpo-lambda status | head`): nothing left to say, and no traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(0) from None


if __name__ == "__main__":
    sys.exit(main())
