"""``grpo-lambda <stage>``: one subcommand per pipeline stage; each Snakemake rule calls one.

A stage takes its cell's settings either as JSON (``--settings``, what the rules pass: the settings
are the rule's params, so a change reruns exactly the cells it touches) or from a config file and the
cell's names (``--config config/config.yaml --model tiny ...``), for running a stage by hand.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys


def _settings(args, stage: str, **cell) -> dict:
    if args.settings:
        return json.loads(args.settings)
    if not args.config:
        raise SystemExit(f"grpo-lambda {stage}: give --settings JSON or --config FILE with the cell's names")
    from grpo_lambda import config as config_module

    return config_module.stage_settings(config_module.load(args.config), stage, **cell)


def _threads(args) -> None:
    if getattr(args, "threads", None):
        import torch

        torch.set_num_threads(args.threads)


def cmd_validate(args) -> None:
    from grpo_lambda import config as config_module

    config = config_module.load(args.config)
    print(f"{args.config}: valid; {len(config_module.rl_cells(config))} RL cells")


def cmd_build_tiny(args) -> None:
    from grpo_lambda import tiny

    settings = _settings(args, "build_tiny", model=args.model)
    tiny.build(args.out, **settings["tiny"])


def cmd_prepare(args) -> None:
    from grpo_lambda import prepare

    settings = _settings(args, "prepare", dataset=args.dataset, benchmark=args.benchmark)
    prepare.run(settings, args.out)


def cmd_sft(args) -> None:
    from grpo_lambda import sft

    _threads(args)
    settings = _settings(args, "sft", model=args.model, dataset=args.dataset)
    sft.run(settings, base=args.base, data_path=args.data, out_dir=args.out)


def cmd_prepare_sft(args) -> None:
    from grpo_lambda import sft_data

    _threads(args)
    settings = _settings(args, "prepare_sft", model=args.model, dataset=args.dataset)
    sft_data.run(settings, base=args.base, data_path=args.data, out=args.out, counts_path=args.counts)


def cmd_train(args) -> None:
    from grpo_lambda import train

    _threads(args)
    settings = _settings(args, "train", model=args.model, dataset=args.dataset, variant=args.variant)
    train.run(settings, base=args.base, data_path=args.data, cell_dir=args.cell, seed=args.seed)


def cmd_evaluate(args) -> None:
    from grpo_lambda import evaluate

    _threads(args)
    settings = _settings(args, "evaluate", model=args.model, dataset=args.dataset, variant=args.variant)
    evaluate.run(settings, model_path=args.checkpoint, benchmark_paths=args.bench, out_dir=args.out_dir,
                 seed=args.seed, step=args.step)


def _study(args, stage: str) -> dict:
    """The whole config, for the stages that read every cell (aggregate, figures)."""
    if args.settings:
        return json.loads(args.settings)
    if not args.config:
        raise SystemExit(f"grpo-lambda {stage}: give --settings JSON or --config FILE")
    from grpo_lambda import config as config_module

    return config_module.load(args.config)


def cmd_aggregate(args) -> None:
    from grpo_lambda import aggregate

    print("\n".join(aggregate.main(_study(args, "aggregate"), args.results, args.out)))


def cmd_figures(args) -> None:
    from grpo_lambda import figures

    print("\n".join(figures.main(_study(args, "figures"), args.results, args.out)))


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="grpo-lambda", description=__doc__.split("\n")[0])
    stages = root.add_subparsers(dest="stage", required=True)

    def stage(name, handler, help_text, cell=()):
        sub = stages.add_parser(name, help=help_text)
        source = sub.add_mutually_exclusive_group()
        source.add_argument("--settings", help="the cell's settings as JSON (what the rules pass)")
        source.add_argument("--config", help="a config file; the cell is named by the options below")
        for option in cell:
            sub.add_argument(f"--{option}")
        sub.set_defaults(handler=handler)
        return sub

    sub = stages.add_parser("validate", help="check a config file and count its RL cells")
    sub.add_argument("config")
    sub.set_defaults(handler=cmd_validate)

    sub = stage("build-tiny", cmd_build_tiny, "build and save the offline tiny model", ["model"])
    sub.add_argument("--out", required=True)

    sub = stage("prepare", cmd_prepare, "write a training set or benchmark as normalised JSONL",
                ["dataset", "benchmark"])
    sub.add_argument("--out", required=True)

    sub = stage("prepare-sft", cmd_prepare_sft, "the SFT set by self-distillation: the base model's correct samples",
                ["model", "dataset"])
    sub.add_argument("--base", required=True, help="hub id or folder of the base model")
    sub.add_argument("--data", required=True, help="the training set (JSONL)")
    sub.add_argument("--out", required=True, help="the SFT set (JSONL)")
    sub.add_argument("--counts", help="the counts (JSON); default: --out with .json")
    sub.add_argument("--threads", type=int)

    sub = stage("sft", cmd_sft, "supervised fine-tuning", ["model", "dataset"])
    sub.add_argument("--base", required=True, help="hub id or folder of the base model")
    sub.add_argument("--data", required=True)
    sub.add_argument("--out", required=True)
    sub.add_argument("--threads", type=int)

    sub = stage("train", cmd_train, "RL training of one cell (resumes if interrupted)", ["model", "dataset", "variant"])
    sub.add_argument("--base", required=True, help="folder of the SFT model")
    sub.add_argument("--data", required=True)
    sub.add_argument("--cell", required=True, help="the cell's folder: results/<model>/<dataset>/<variant>/seed<seed>")
    sub.add_argument("--seed", type=int, required=True)
    sub.add_argument("--threads", type=int)

    sub = stage("evaluate", cmd_evaluate, "evaluate one checkpoint on benchmarks", ["model", "dataset", "variant"])
    sub.add_argument("--checkpoint", required=True)
    sub.add_argument("--bench", required=True, nargs="+", help="benchmark JSONL files, named by their stem")
    sub.add_argument("--out-dir", required=True, help="gets <benchmark>.jsonl and <benchmark>.json per benchmark")
    sub.add_argument("--seed", type=int)
    sub.add_argument("--step", default="final")
    sub.add_argument("--threads", type=int)

    for name, handler, help_text in (("aggregate", cmd_aggregate, "tables from results/"),
                                     ("figures", cmd_figures, "figures from results/")):
        sub = stage(name, handler, help_text)
        sub.add_argument("--results", default="results")
        sub.add_argument("--out", required=True)
    return root


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    args = parser().parse_args(argv)
    args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
