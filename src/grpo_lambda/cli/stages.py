"""The pipeline's stages, one Snakemake rule each: the tiny model, hub downloads, data, the SFT set, SFT, RL
training (with the final model's evaluation in the same job), and evaluation."""

from __future__ import annotations

import os

from grpo_lambda.cli.options import (THREADS_HELP, UsageError, add_stage, json_settings, non_negative_int,
                                     positive_int, require_files, set_threads, stage_settings_of, step_number,
                                     study_of)


def cmd_build_tiny(args) -> None:
    from grpo_lambda import tiny

    settings = stage_settings_of(args, "build_tiny", model=args.model)
    tiny.build(args.out, **settings["tiny"])


def cmd_prefetch(args) -> None:
    from grpo_lambda import files, prefetch

    settings = study_of(args)
    if not args.settings:
        settings = prefetch.hub_sources(settings)
    files.write_json(args.out, prefetch.run(settings))


def cmd_prepare(args) -> None:
    from grpo_lambda import prepare

    settings = stage_settings_of(args, "prepare", dataset=args.dataset, benchmark=args.benchmark)
    if args.prefetched:
        require_files(prefetched=args.prefetched)
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

    settings = stage_settings_of(args, "sft", model=args.model, dataset=args.dataset)
    require_files(data=args.data)
    set_threads(args)
    sft.run(settings, base=_model_folder(args.base, settings), data_path=args.data, out_dir=args.out)


def cmd_prepare_sft(args) -> None:
    from grpo_lambda import sft_data

    set_threads(args)
    settings = stage_settings_of(args, "prepare_sft", model=args.model, dataset=args.dataset)
    sft_data.run(settings, base=_model_folder(args.base, settings), data_path=args.data, out=args.out,
                 counts_path=args.counts)


def cmd_train(args) -> None:
    from grpo_lambda import train

    settings = stage_settings_of(args, "train", model=args.model, dataset=args.dataset, variant=args.variant)
    require_files(data=args.data)
    evaluation = _final_evaluation(args)
    set_threads(args)
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
    require_files(bench=args.bench)
    if args.settings:
        if not args.evaluation:
            raise UsageError("with --settings, --bench needs --evaluation JSON (the evaluate stage's settings)")
        evaluation = json_settings(args.evaluation)
    else:
        if args.evaluation:
            raise UsageError("--evaluation JSON goes with --settings; with --configfile the config's is read")
        evaluation = stage_settings_of(args, "evaluate", model=args.model, dataset=args.dataset, variant=args.variant)
    return {"settings": evaluation, "benchmarks": args.bench, "out_dir": args.eval_dir}


def cmd_evaluate(args) -> None:
    from grpo_lambda import evaluate

    settings = stage_settings_of(args, "evaluate", model=args.model, dataset=args.dataset, variant=args.variant)
    require_files(bench=args.bench)
    set_threads(args)
    evaluate.run(settings, model_path=_model_folder(args.checkpoint, settings), benchmark_paths=args.bench,
                 out_dir=args.out_dir, seed=args.seed, step=args.step)


def add_parsers(stages) -> None:
    sub = add_stage(stages, "build-tiny", cmd_build_tiny, "build and save the offline tiny model", ["model"])
    sub.add_argument("--out", required=True, metavar="DIR", help="folder to write the model and tokenizer to")

    sub = add_stage(stages, "prefetch", cmd_prefetch, "download the study's hub models and datasets into $HF_HOME", reads="hub")
    sub.add_argument("--out", required=True, help="a JSON record of what was fetched")

    sub = add_stage(stages, "prepare", cmd_prepare, "write a training set or benchmark as normalised JSONL",
                ["dataset", "benchmark"])
    sub.add_argument("--out", required=True, metavar="FILE", help="the JSONL file to write")
    sub.add_argument("--prefetched", metavar="FILE",
                     help="the prefetch record: a hub dataset is read at the commit it holds, which the summary records")

    sub = add_stage(stages, "prepare-sft", cmd_prepare_sft, "the SFT set by self-distillation: the base model's correct samples",
                ["model", "dataset"])
    sub.add_argument("--base", required=True, metavar="MODEL", help="hub id or folder of the model that samples")
    sub.add_argument("--data", required=True, metavar="FILE", help="the training set's JSONL (from prepare)")
    sub.add_argument("--out", required=True, metavar="FILE", help="the SFT set to write (JSONL)")
    sub.add_argument("--counts", metavar="FILE", help="the counts to write (JSON); default: --out with .json")
    sub.add_argument("--threads", type=positive_int, metavar="N", help=THREADS_HELP)

    sub = add_stage(stages, "sft", cmd_sft, "supervised fine-tuning", ["model", "dataset"])
    sub.add_argument("--base", required=True, metavar="MODEL", help="hub id or folder of the base model")
    sub.add_argument("--data", required=True, metavar="FILE", help="the training set's JSONL (from prepare)")
    sub.add_argument("--out", required=True, metavar="DIR", help="folder to write the fine-tuned model to")
    sub.add_argument("--threads", type=positive_int, metavar="N", help=THREADS_HELP)

    sub = add_stage(stages, "train", cmd_train, "RL training of one cell (resumes if interrupted)", ["model", "dataset", "variant"])
    sub.add_argument("--base", required=True, metavar="DIR", help="folder of the SFT model")
    sub.add_argument("--data", required=True, metavar="FILE", help="the training set's JSONL (from prepare)")
    sub.add_argument("--cell", required=True, metavar="DIR",
                     help="the cell's folder: results/<model>/<dataset>/<variant>/seed<seed>")
    sub.add_argument("--seed", type=non_negative_int, required=True, metavar="N", help="the cell's training seed")
    sub.add_argument("--threads", type=positive_int, metavar="N", help=THREADS_HELP)
    sub.add_argument("--bench", nargs="+", metavar="FILE",
                     help="then evaluate the final model on these benchmark JSONL files, in this job (as the evaluate "
                          "stage does, from the saved model)")
    sub.add_argument("--eval-dir", metavar="DIR", help="with --bench: gets <benchmark>.jsonl and <benchmark>.json")
    sub.add_argument("--evaluation", metavar="JSON",
                     help="with --bench and --settings: the evaluate stage's settings as JSON (what the rule passes)")

    sub = add_stage(stages, "evaluate", cmd_evaluate, "evaluate one checkpoint on benchmarks", ["model", "dataset", "variant"])
    sub.add_argument("--checkpoint", required=True, metavar="DIR", help="folder of the model to evaluate")
    sub.add_argument("--bench", required=True, nargs="+", metavar="FILE",
                     help="benchmark JSONL files, named by their stem")
    sub.add_argument("--out-dir", required=True, metavar="DIR",
                     help="gets <benchmark>.jsonl and <benchmark>.json per benchmark")
    sub.add_argument("--seed", type=non_negative_int, metavar="N",
                     help="the cell's seed, recorded in the summaries and seeding sampling (default: 0)")
    sub.add_argument("--step", default="final", type=step_number, metavar="STEP",
                     help="the checkpoint's training step, or 'final' (default)")
    sub.add_argument("--threads", type=positive_int, metavar="N", help=THREADS_HELP)
