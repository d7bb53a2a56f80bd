"""Where a run's time goes: each stage's wall and CPU, its start-up, and a floor, in one table.

    python benchmarks/bench_pipeline.py --results results              # a finished run's job records
    python benchmarks/bench_pipeline.py --run [--keep DIR]             # run the embedded default, then read it
    python benchmarks/bench_pipeline.py --results results --no-floors  # the records and start-ups only
    python benchmarks/bench_pipeline.py --cell OLD_CHECKOUT --sft-model results/tiny/arith/sft/model
                                        [--steps 25] [--rounds 3]    # one RL cell, OLD_CHECKOUT against this one

The stage table reads Snakemake's benchmark files (``results/logs/<rule>/**/*.benchmark.tsv``: each job's
wall ``s`` and ``cpu_time``) and sums them per rule. Snakemake samples a job's CPU every 0.5 s for its
first 30 samples and every 30 s after, so ``cpu_time`` undercounts jobs longer than 15 s: read the CPU
column as a lower bound. Start-up is a fresh interpreter importing what the stage's job imports before
it works (``STAGE_IMPORTS``), timed here (median of three) and multiplied by the stage's job count.

A floor is the stage's own work timed in this process without the framework around it, on the
study's tiny model (``--model``: a trained one, such as the run's SFT model, gives RL and evaluation
their real completion lengths; an untrained one writes every completion to the length limit):

- ``sft``: one optimizer step (forward, backward, AdamW) on a batch of the SFT set's examples of one
  length, so no padding, times the stage's steps;
- ``train``: one RL step as GRPO does it at its core: ``generate`` for the step's prompts (sampled, the
  rl settings' length and temperature), then forward, backward and AdamW over the completions, times
  ``rl.max_steps``, times the cells;
- ``evaluate``: greedy ``generate`` of the benchmarks' prompts in the evaluation's batches and the
  grader over the answers, times the checkpoints evaluated.

Each floor is the median of a few repetitions scaled up; the distance of a stage from its floor is
its wall over floor plus start-up. ``--cell`` times one RL cell of the default (its train and final
evaluation jobs, from their benchmark files) as each checkout's Snakefile runs it, alternating the two
checkouts round by round, at ``--steps`` RL steps: their ratio is this checkout's cell time over the
other's. The SFT model is given (``--sft-model``), as the config's base model with
``sft.num_train_epochs: 0``, so no SFT runs. On a machine shared with other work, read the ratios
and say what else ran.
"""

from __future__ import annotations

import argparse
import collections
import csv
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What a stage's job imports before it works: its CLI stage module and the libraries its run() pulls in.
STAGE_IMPORTS = {
    "build_tiny": "import grpo_lambda.tiny",
    "prepare": "import grpo_lambda.prepare",
    "prepare_benchmark": "import grpo_lambda.prepare",
    "sft": "import grpo_lambda.sft; from trl import SFTTrainer",
    "train": "import grpo_lambda.train; from grpo_lambda.trainer import GRPOLambdaTrainer",
    "evaluate": "import grpo_lambda.evaluate; from transformers import LlamaForCausalLM",
    "evaluate_sft": "import grpo_lambda.evaluate; from transformers import LlamaForCausalLM",
    "aggregate": "import grpo_lambda.tables.write",
    "figures": "import grpo_lambda.figures",
}
STAGE_ORDER = ["build_tiny", "prepare", "prepare_benchmark", "sft", "evaluate_sft", "train", "evaluate",
               "aggregate", "figures"]


def job_records(results: Path) -> dict[str, list[dict]]:
    """stage -> one record per job: wall ``s`` and ``cpu_time`` from its Snakemake benchmark file. A stage is
    the folder under ``logs/`` (the rule's, but ``prepare`` for prepare_dataset); an SFT model's evaluation
    (``sft.benchmark.tsv`` under ``evaluate/``) is ``evaluate_sft``."""
    records = collections.defaultdict(list)
    for path in sorted((results / "logs").rglob("*.benchmark.tsv")):
        parts = path.relative_to(results / "logs").parts
        rule = parts[0] if len(parts) > 1 else path.name.removesuffix(".benchmark.tsv")  # logs/aggregate.benchmark.tsv
        if rule == "evaluate" and path.name.startswith("sft"):
            rule = "evaluate_sft"
        with path.open() as handle:
            for row in csv.DictReader(handle, delimiter="\t"):
                records[rule].append({"wall": float(row["s"]), "cpu": float(row["cpu_time"] or 0)})
    return dict(records)


def startup(statement: str, repeats: int = 3) -> dict:
    """Median wall and CPU seconds of a fresh interpreter running ``statement`` (its imports)."""
    code = ("import resource, time\nstart = time.perf_counter()\n" + statement.replace("; ", "\n") +
            "\nusage = resource.getrusage(resource.RUSAGE_SELF)\n"
            "print(time.perf_counter() - start, usage.ru_utime + usage.ru_stime)")
    walls, cpus = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
        if done.returncode:
            raise SystemExit(f"{statement}: {done.stderr[-1000:]}")
        walls.append(time.perf_counter() - start)
        cpus.append(float(done.stdout.split()[-1]))
    return {"wall": statistics.median(walls), "cpu": statistics.median(cpus)}


# --------------------------------------------------------------------------------------------------
# Floors: the stages' own work, timed without the framework around it
# --------------------------------------------------------------------------------------------------

def _median_time(work, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def floors(config: dict, model_dir: str, *, repeats: int = 5) -> dict[str, dict]:
    """stage -> {"per_job": one job's floor in seconds, "how": what was timed}: see the module's docstring."""
    import torch

    from grpo_lambda import config as study
    from grpo_lambda import prepare
    from grpo_lambda.data.prompts import prompt_text
    from grpo_lambda.grading import grade_many
    from grpo_lambda.models import load_model, load_tokenizer

    torch.set_num_threads(2)  # the sft rule's threads; the train and evaluate rules' 1 is set below
    model_name = next(iter(config["models"]))
    dataset = study.model_datasets(config, model_name)[0]
    rows, _ = prepare.rows_for(study.stage_settings(config, "prepare", dataset=dataset))
    template = config["models"][model_name].get("prompt", "qwen_math")
    tokenizer = load_tokenizer(model_dir, padding_side="left")
    model = load_model(model_dir)
    result = {}

    sft = study.stage_settings(config, "sft", model=model_name, dataset=dataset)["sft"]
    batch = sft.get("per_device_train_batch_size", 8)
    steps = math.ceil(len(rows) / batch) * sft.get("num_train_epochs", 1)
    texts = [prompt_text(tokenizer, template, row["problem"]) + row["solution"] + tokenizer.eos_token
             for row in rows]
    ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
    by_length = collections.defaultdict(list)
    for sequence in ids:
        by_length[len(sequence)].append(sequence)
    length = max(by_length, key=lambda n: len(by_length[n]) if len(by_length[n]) >= batch else 0)
    inputs = torch.tensor(by_length[length][:batch])
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=sft.get("learning_rate", 1e-5))

    def sft_step():
        model(input_ids=inputs, labels=inputs).loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    sft_step()
    mean_length = statistics.fmean(len(sequence) for sequence in ids)
    per_step = _median_time(sft_step, repeats) * mean_length / length
    result["sft"] = {"per_job": per_step * steps,
                     "how": f"{steps} steps × {per_step * 1000:.0f} ms (a batch of {batch} at the mean length "
                            f"{mean_length:.0f} tokens, no padding)"}

    torch.set_num_threads(1)
    rl = study.rl_settings(config, model_name)
    generations = rl.get("num_generations", 8)
    per_step_prompts = rl.get("per_device_train_batch_size", 8) // generations
    prompts = [prompt_text(tokenizer, template, row["problem"]) for row in rows[:per_step_prompts]]
    encoded = tokenizer(prompts, return_tensors="pt", padding=True)

    def rl_step():
        model.eval()
        with torch.no_grad():
            out = model.generate(**encoded, do_sample=True, temperature=rl.get("temperature", 1.0), top_p=1.0,
                                 max_new_tokens=rl.get("max_completion_length", 256),
                                 num_return_sequences=generations, pad_token_id=tokenizer.pad_token_id)
        model.train()
        mask = (out != tokenizer.pad_token_id).long()
        logits = model(input_ids=out, attention_mask=mask).logits[:, :-1]
        picked = torch.log_softmax(logits.float(), -1).gather(-1, out[:, 1:, None])[..., 0]
        (-(picked * mask[:, 1:]).sum() / mask[:, 1:].sum()).backward()
        optimizer.step()
        optimizer.zero_grad()

    per_step = _median_time(rl_step, repeats)
    result["train"] = {"per_job": per_step * rl["max_steps"],
                       "how": f"{rl['max_steps']} steps × {per_step * 1000:.0f} ms (generate {per_step_prompts} "
                              f"prompts × {generations}, then forward, backward, AdamW over the completions)"}

    evaluation = config["evaluation"]
    bench_rows = [row for name in config["benchmarks"] for row in
                  prepare.rows_for(study.stage_settings(config, "prepare", benchmark=name))[0]]
    size = min(evaluation.get("batch_size", 64), len(bench_rows))
    chunk = bench_rows[:size]
    encoded_eval = tokenizer([prompt_text(tokenizer, template, row["problem"]) for row in chunk],
                             return_tensors="pt", padding=True)
    model.eval()

    def evaluate_batch():
        with torch.no_grad():
            out = model.generate(**encoded_eval, do_sample=False, max_new_tokens=evaluation["max_new_tokens"],
                                 pad_token_id=tokenizer.pad_token_id)
        texts = tokenizer.batch_decode(out[:, encoded_eval["input_ids"].shape[1]:], skip_special_tokens=True)
        grade_many(texts, [row["answer"] for row in chunk])

    per_batch = _median_time(evaluate_batch, max(2, repeats // 2))
    batches = math.ceil(len(bench_rows) / size)
    result["evaluate"] = result["evaluate_sft"] = {
        "per_job": per_batch * batches,
        "how": f"{batches} batches × {per_batch:.2f} s (greedy generate of {size} prompts, then grading)"}
    return result


# --------------------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------------------

def stage_table(results: Path, floor_by_stage: dict | None, total_wall: float | None = None) -> list[dict]:
    records = job_records(results)
    if not records:
        raise SystemExit(f"no Snakemake benchmark files under {results}/logs: was the run made with this "
                         "project's rules (their benchmark: lines)?")
    rows = []
    for stage in sorted(records, key=lambda name: (STAGE_ORDER.index(name) if name in STAGE_ORDER else 99, name)):
        jobs = records[stage]
        wall, cpu = sum(job["wall"] for job in jobs), sum(job["cpu"] for job in jobs)
        row = {"stage": stage, "jobs": len(jobs), "wall_s": wall, "cpu_s": cpu}
        if stage in STAGE_IMPORTS:
            start = startup(STAGE_IMPORTS[stage])
            row.update(startup_s=start["wall"] * len(jobs), startup_cpu_s=start["cpu"] * len(jobs))
        if floor_by_stage and stage in floor_by_stage:
            row.update(floor_s=floor_by_stage[stage]["per_job"] * len(jobs),
                       floor_how=f"{len(jobs)} job(s) × ({floor_by_stage[stage]['how']})")
        rows.append(row)
    print("| stage | jobs | wall s | CPU s (sampled: a lower bound) | start-up s (share of wall) | floor s | "
          "wall / (floor + start-up) |\n|---|---|---|---|---|---|---|")
    for row in rows:
        start = f"{row['startup_s']:.1f} ({row['startup_s'] / row['wall_s']:.0%})" if "startup_s" in row else "–"
        floor = f"{row['floor_s']:.1f}" if "floor_s" in row else "–"
        distance = (f"{row['wall_s'] / (row['floor_s'] + row.get('startup_s', 0)):.2f}"
                    if "floor_s" in row else "–")
        print(f"| {row['stage']} | {row['jobs']} | {row['wall_s']:.1f} | {row['cpu_s']:.1f} | {start} | {floor} | "
              f"{distance} |")
    walls = sum(row["wall_s"] for row in rows)
    starts = sum(row.get("startup_s", 0) for row in rows)
    print(f"\njobs' wall, summed: {walls:.0f} s, of which start-up {starts:.0f} s ({starts / walls:.0%})"
          + (f"; the run's own wall: {total_wall:.0f} s" if total_wall else ""))
    for row in rows:
        if "floor_how" in row:
            print(f"floor of {row['stage']}: {row['floor_how']}")
    return rows


def run_default(workdir: Path, cores: int) -> float:
    """The embedded default through Snakemake in ``workdir``; its wall time."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--directory",
                           str(workdir), "--cores", str(cores), "--configfile", str(ROOT / "config" / "config.yaml")],
                          capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(done.stdout[-3000:] + done.stderr[-3000:])
    return time.perf_counter() - start


# --------------------------------------------------------------------------------------------------
# One RL cell, another checkout against this one
# --------------------------------------------------------------------------------------------------

CELL_RULES = ("train", "evaluate")


def cell_config(old: Path, sft_model: Path, steps: int) -> dict:
    """The other checkout's default study (so both checkouts read keys they know), on the given SFT model."""
    import yaml

    config = yaml.safe_load((old / "config" / "config.yaml").read_text())
    config["models"] = {"tiny": {"source": str(sft_model.resolve()), "prompt": config["models"]["tiny"]["prompt"]}}
    config["sft"] = {"num_train_epochs": 0}  # the SFT model is the given one, copied
    config["rl"] = {**config["rl"], "max_steps": steps}
    config["seeds"] = [0]
    return config


def run_cell(checkout: Path, config_path: Path, workdir: Path, cores: int) -> dict:
    """The cell results/tiny/arith/grpo/seed0 as ``checkout``'s Snakefile makes it in a fresh ``workdir``;
    the wall of its own jobs (CELL_RULES) from their benchmark files, and of the whole run."""
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(checkout / "src")}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "snakemake", "results/tiny/arith/grpo/seed0/done", "--snakefile",
                           str(checkout / "Snakefile"), "--directory", str(workdir), "--cores", str(cores),
                           "--configfile", str(config_path)], capture_output=True, text=True, env=env)
    if done.returncode:
        raise SystemExit(f"{checkout}: {done.stdout[-3000:]}{done.stderr[-3000:]}")
    total = time.perf_counter() - start
    records = job_records(workdir / "results")
    jobs = {rule: sum(job["wall"] for job in records.get(rule, [])) for rule in CELL_RULES}
    return {"cell_s": sum(jobs.values()), "jobs": jobs, "run_s": total}


def compare_cells(old: Path, sft_model: Path, steps: int, rounds: int, cores: int) -> None:
    import yaml

    with tempfile.TemporaryDirectory() as scratch:
        config_path = Path(scratch) / "cell.yaml"
        config_path.write_text(yaml.safe_dump(cell_config(old, sft_model, steps)))
        times = {"old": [], "new": []}
        for round_ in range(rounds):
            for name, checkout in (("old", old), ("new", ROOT)):
                timing = run_cell(checkout, config_path, Path(scratch) / name, cores)
                times[name].append(timing)
                print(f"round {round_ + 1}, {name} ({checkout}): cell {timing['cell_s']:.1f} s "
                      f"({', '.join(f'{rule} {wall:.1f} s' for rule, wall in timing['jobs'].items())}); "
                      f"whole run {timing['run_s']:.1f} s", flush=True)
    old_cell = statistics.median(t["cell_s"] for t in times["old"])
    new_cell = statistics.median(t["cell_s"] for t in times["new"])
    ratios = [n["cell_s"] / o["cell_s"] for o, n in zip(times["old"], times["new"])]
    print(f"\none RL cell at {steps} steps (its train and evaluation jobs), median of {rounds} rounds: "
          f"old {old_cell:.1f} s, new {new_cell:.1f} s, ratio new/old {new_cell / old_cell:.3f} "
          f"(per round: {', '.join(f'{r:.3f}' for r in ratios)}; goal ≤ 0.667)")


def main() -> None:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the stages run (grpo_lambda.cli), before torch loads
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, help="a finished run's results folder")
    parser.add_argument("--run", action="store_true",
                        help="run the embedded default first (in --keep or a temp folder)")
    parser.add_argument("--keep", type=Path, help="with --run: the folder to run in, kept")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--no-floors", action="store_true", help="leave out the floors (they take a minute or two)")
    parser.add_argument("--model", help="the model the floors run (default: the run's SFT model when there is one)")
    parser.add_argument("--cell", type=Path, metavar="OLD_CHECKOUT",
                        help="time one RL cell, OLD_CHECKOUT against this one")
    parser.add_argument("--sft-model", type=Path, help="with --cell: the SFT model the cell starts from")
    parser.add_argument("--steps", type=int, default=25, help="with --cell: RL steps (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=3, help="with --cell: rounds (default: %(default)s)")
    parser.add_argument("--json", type=Path, help="write the table here too")
    args = parser.parse_args()
    if args.cell:
        if not args.sft_model:
            parser.error("--cell needs --sft-model (e.g. a finished run's results/tiny/arith/sft/model)")
        compare_cells(args.cell.resolve(), args.sft_model, args.steps, args.rounds, args.cores)
        return
    total_wall = None
    with tempfile.TemporaryDirectory() as scratch:
        results = args.results
        if args.run:
            workdir = args.keep or Path(scratch)
            total_wall = run_default(workdir, args.cores)
            results = workdir / "results"
        if results is None:
            parser.error("give --results DIR, --run or --cell")
        floor_by_stage = None
        if not args.no_floors:
            from grpo_lambda import config as study

            config = study.load(str(ROOT / "config" / "config.yaml"))
            model = args.model or next((str(path) for path in sorted(results.glob("*/*/sft/model"))), None)
            if model is None:
                model = str(Path(scratch) / "tiny")
                from grpo_lambda import tiny

                tiny.build(model, **config["models"]["tiny"].get("tiny", {}))
                print(f"floors on an untrained tiny model (no SFT model under {results}): every completion is "
                      "as long as the limit, so the RL and evaluation floors are upper ones")
            floor_by_stage = floors(config, model)
        rows = stage_table(results, floor_by_stage, total_wall)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
