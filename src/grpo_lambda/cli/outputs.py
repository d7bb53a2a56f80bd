"""What a study's results become: its tables, figures and the report's first screen, the spread across whole
runs, a horizon study's band check, and a cell's final model published to the hub."""

from __future__ import annotations

import os
import sys

from grpo_lambda.cli.options import UsageError, add_stage, non_negative_int, require_files, stage_settings_of, study_of


def cmd_aggregate(args) -> None:
    from grpo_lambda.tables import write

    print("\n".join(write.main(study_of(args), args.results, args.out)))


def cmd_figures(args) -> None:
    from grpo_lambda import figures

    config = study_of(args)
    try:
        print("\n".join(figures.main(config, args.tables, args.out)))
    except FileNotFoundError as error:
        raise UsageError(str(error)) from None


def cmd_headline(args) -> None:
    from grpo_lambda import headline

    try:
        print(headline.main(study_of(args), args.tables, args.figures, args.out))
    except FileNotFoundError as error:
        raise UsageError(str(error)) from None


def cmd_publish(args) -> None:
    from grpo_lambda import publish

    settings = stage_settings_of(args, "publish", model=args.model, dataset=args.dataset, variant=args.variant)
    try:
        record = publish.run(settings, cell_dir=args.cell, seed=args.seed, out=args.out)
    except (FileNotFoundError, PermissionError, ValueError) as error:
        raise UsageError(str(error)) from None
    print(f"published {args.cell} to {record['repo_id']}: {record['commit_url']}")


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

    require_files(eval=args.eval)
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


def add_parsers(stages) -> None:
    sub = add_stage(stages, "aggregate", cmd_aggregate, "the study's tables from its results folder", reads="study")
    sub.add_argument("--results", default="results", metavar="DIR", help="the results folder (default: %(default)s)")
    sub.add_argument("--out", required=True, metavar="DIR", help="folder to write to")
    sub = add_stage(stages, "figures", cmd_figures, "the study's figures from the tables that aggregate wrote", reads="study")
    sub.add_argument("--tables", default="results/tables", metavar="DIR",
                     help="the folder aggregate wrote its tables to (default: %(default)s)")
    sub.add_argument("--out", required=True, metavar="DIR", help="folder to write to")

    sub = add_stage(stages, "headline", cmd_headline, "the report's first screen (Table 1, the primary verdicts, Figure 1) "
                "from the tables and figures", reads="study")
    sub.add_argument("--tables", default="results/tables", metavar="DIR", help="the tables (default: %(default)s)")
    sub.add_argument("--figures", default="results/figures", metavar="DIR", help="the figures (default: %(default)s)")
    sub.add_argument("--out", required=True, metavar="FILE", help="the HTML fragment to write")

    sub = add_stage(stages, "publish", cmd_publish, "push a trained cell's final model, with a model card, to its own hub "
                "repo (publish.repo_id; needs the network and a token)", ["model", "dataset", "variant"])
    sub.add_argument("--cell", required=True, metavar="DIR",
                     help="the cell's folder: results/<model>/<dataset>/<variant>/seed<seed>")
    sub.add_argument("--seed", type=non_negative_int, required=True, metavar="N", help="the cell's training seed")
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
