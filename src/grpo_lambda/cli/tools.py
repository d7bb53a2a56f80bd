"""The study tools: validate a config, a grid's status, the design check, the plan (snakemake -n summarised),
the node's preflight, a cell's logged completions."""

from __future__ import annotations

import argparse
import json
import sys

from grpo_lambda.cli.options import DEFAULT_CONFIG, UsageError, config_options, load_config


def cmd_validate(args) -> None:
    """Exit 0 with the cell count (or the merged config, --show), or 2 with the one-line reason (no
    traceback) when it is invalid or this environment cannot run its jobs."""
    from grpo_lambda import config as config_module

    config = load_config(args)
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
    report = status.grid_status(load_config(args), results=args.results,
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

    config = load_config(args)
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
    config = load_config(args)
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


def add_parsers(stages) -> None:
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
