"""Time per SFT step of the embedded default, by how its batches are made and by CPU threads.

    python benchmarks/bench_sft.py [--config config/config.yaml] [--steps 40] [--rounds 3]
                                   [--ways random grouped padding_free] [--threads 1 2]

Each trial is a fresh process (its own torch threads, no state carried between trials) that builds the
study's SFT trainer (``grpo_lambda.sft.build_config`` with one setting changed) on the study's tiny
model and training set, trains ``--steps`` steps and reports the median step time after the first
three (warm-up) and the share of the batches' tokens that are padding. The ways:

- ``random``: TRL's default batches, a random draw of examples padded to the longest (the run before
  ``sft.train_sampling_strategy`` was set);
- ``grouped``: ``train_sampling_strategy: group_by_length``, transformers' LengthGroupedSampler (random
  groups of 50 batches, sorted by length inside each group, so a batch holds examples of about one length);
- ``padding_free``: TRL's ``padding_free``: a batch is one flattened sequence. On the CPU (sdpa or eager
  attention) transformers masks each example off from the others by reading the position ids, which
  ``tests/test_sft.py`` checks against the padded batch; the attention is then one square over all
  the batch's tokens.

Trials run in interleaved rounds (every way and thread count once per round), so a change in the
machine's load reaches all of them alike; the table gives each one's median over the rounds and its
ratio to ``random`` at the thread count the sft rule uses (2). On a machine shared with other work, read
the ratios, not the times.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WAYS = {"random": {"train_sampling_strategy": "random"},
        "grouped": {"train_sampling_strategy": "group_by_length"},
        "padding_free": {"padding_free": True}}
RULE_THREADS = 2  # workflow/rules/sft.smk: threads


def build_inputs(config_path: str, folder: Path) -> dict:
    """The study's tiny model and training set, written once into ``folder``; the SFT stage's settings."""
    from grpo_lambda import config as study
    from grpo_lambda import files, prepare, tiny

    config = study.load(config_path)
    model = next(name for name, spec in config["models"].items() if spec["source"] == "tiny")
    dataset = study.model_datasets(config, model)[0]
    tiny.build(str(folder / "model"), **study.stage_settings(config, "build_tiny", model=model)["tiny"])
    rows, _ = prepare.rows_for(study.stage_settings(config, "prepare", dataset=dataset))
    files.write_jsonl(folder / "data.jsonl", rows)
    return study.stage_settings(config, "sft", model=model, dataset=dataset)


def trial(folder: Path, way: str, threads: int, steps: int) -> dict:
    """Train ``steps`` steps one way on ``threads`` threads; the step times and the padding share."""
    import torch
    from transformers import PrinterCallback, TrainerCallback
    from trl import SFTTrainer

    from grpo_lambda import files, sft
    from grpo_lambda.models import load_tokenizer

    torch.set_num_threads(threads)
    settings = json.loads((folder / "settings.json").read_text())
    settings["sft"] = {**settings["sft"], **WAYS[way], "report_to": "none"}
    tokenizer = load_tokenizer(str(folder / "model"), padding_side="right")
    dataset = sft.sft_dataset(files.read_jsonl(folder / "data.jsonl"), tokenizer, settings["model"]["prompt"])
    with tempfile.TemporaryDirectory() as scratch:
        args = sft.build_config(settings, output_dir=scratch)
        args.max_steps, args.disable_tqdm = steps, True
        trainer = SFTTrainer(model=str(folder / "model"), args=args, train_dataset=dataset,
                             processing_class=tokenizer)
        trainer.remove_callback(PrinterCallback)
        tokens = {"real": 0, "padded": 0}

        class Clock(TrainerCallback):
            times: list[float] = []

            def on_step_begin(self, args, state, control, **kwargs):
                self.start = time.perf_counter()

            def on_step_end(self, args, state, control, **kwargs):
                self.times.append(time.perf_counter() - self.start)

        collate = trainer.data_collator

        def counting(examples):
            batch = collate(examples)
            tokens["real"] += sum(len(example["input_ids"]) for example in examples)
            tokens["padded"] += batch["input_ids"].numel()
            return batch

        trainer.data_collator = counting
        clock = Clock()
        trainer.add_callback(clock)
        trainer.train()
    return {"median_step_s": statistics.median(clock.times[3:]), "padding": 1 - tokens["real"] / tokens["padded"],
            "loss": trainer.state.log_history[-1].get("train_loss")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=str(ROOT / "config" / "config.yaml"))
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ways", nargs="+", default=list(WAYS), choices=list(WAYS))
    parser.add_argument("--threads", nargs="+", type=int, default=[1, RULE_THREADS])
    parser.add_argument("--json", help="write the table here too")
    parser.add_argument("--trial", nargs=3, metavar=("FOLDER", "WAY", "THREADS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.trial:
        folder, way, threads = args.trial
        print(json.dumps(trial(Path(folder), way, int(threads), args.steps)))
        return
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        (folder / "settings.json").write_text(json.dumps(build_inputs(args.config, folder)))
        results: dict[tuple[str, int], list[dict]] = {}
        for round_ in range(args.rounds):
            for threads in args.threads:
                for way in args.ways:
                    done = subprocess.run([sys.executable, __file__, "--steps", str(args.steps), "--trial",
                                           str(folder), way, str(threads)], capture_output=True, text=True)
                    if done.returncode:
                        sys.exit(f"trial {way}, {threads} threads failed:\n{done.stderr[-3000:]}")
                    result = json.loads(done.stdout.strip().splitlines()[-1])
                    results.setdefault((way, threads), []).append(result)
                    print(f"round {round_ + 1}: {way}, {threads} thread(s): {1000 * result['median_step_s']:.1f} ms"
                          f" per step, padding {result['padding']:.1%}", flush=True)
    baseline_key = ("random", RULE_THREADS) if ("random", RULE_THREADS) in results else next(iter(results))
    baseline = statistics.median(r["median_step_s"] for r in results[baseline_key])
    table = []
    print(f"\nmedian step time over {args.rounds} rounds of {args.steps} steps; ratio to {baseline_key[0]} "
          f"on {baseline_key[1]} thread(s)")
    print("| batches | threads | ms per step | ratio | padding |\n|---|---|---|---|---|")
    for (way, threads), runs in results.items():
        median = statistics.median(r["median_step_s"] for r in runs)
        padding = statistics.fmean(r["padding"] for r in runs)
        table.append({"way": way, "threads": threads, "ms_per_step": 1000 * median, "ratio": median / baseline,
                      "padding": padding})
        print(f"| {way} | {threads} | {1000 * median:.1f} | {median / baseline:.3f} | {padding:.1%} |")
    if args.json:
        Path(args.json).write_text(json.dumps(table, indent=2))


if __name__ == "__main__":
    main()
