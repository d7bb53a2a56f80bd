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
import logging
import os
import sys

from grpo_lambda import __version__
from grpo_lambda.cli import outputs, stages as pipeline_stages, tools
from grpo_lambda.cli.options import UsageError


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="grpo-lambda", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    root.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    stages = root.add_subparsers(dest="stage", required=True, metavar="STAGE",
                                 title="stages", description="run `grpo-lambda STAGE --help` for a stage's options")
    # in the order `grpo-lambda --help` lists them: the study tools, the pipeline's stages, their outputs
    tools.add_parsers(stages)
    pipeline_stages.add_parsers(stages)
    outputs.add_parsers(stages)
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
        tools.cmd_plan(argparse.Namespace(snakemake_args=argv[1:]))
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


