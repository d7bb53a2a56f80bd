"""A synthetic results tree in the paper's layout whose accuracies are known exactly: the tables', the
figures' and the spread's tests read it (the `tree` fixture of conftest.py builds it once per module)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

BENCHMARKS = {"aime24": 30, "amc": 40, "math500": 60, "minerva": 30, "olympiadbench": 40}
DATASETS = ["math12k", "gsm8k"]
SEEDS = [0, 1]
CHECKPOINT = 10
MAX_STEPS = 30
# Effect of each variant on accuracy; "same" equals GRPO but gets other problems right.
EFFECT = {"sft": -0.10, "grpo": 0.0, "rt98": 0.04, "rt99": 0.08, "bw99": 0.20, "same": 0.0}
MODEL_BASE = {"qwen15": 0.30, "small": 0.20}
RELATIVE = {"form": "relative"}


def make_config() -> dict:
    return {
        "models": {
            "qwen15": {"source": "x", "paper_name": "Qwen2.5-Math-1.5B-Instruct"},
            "small": {"source": "y", "variants": ["grpo", "rt99", "same"], "datasets": ["math12k"]},
        },
        "datasets": {d: {"source": "registry"} for d in DATASETS},
        "benchmarks": {b: {"source": "registry"} for b in BENCHMARKS},
        "variants": {
            "grpo": {"objective": "grpo"},
            "rt98": {"objective": "grpo_lambda", "lam": 0.98, "style": "recent", "update": "trace", **RELATIVE},
            "rt99": {"objective": "grpo_lambda", "lam": 0.99, "style": "recent", "update": "trace", **RELATIVE},
            "bw99": {"objective": "grpo_lambda", "lam": 0.99, "style": "both", "update": "weight", **RELATIVE},
            "same": {"objective": "grpo", "label": "GRPO again"},
        },
        "seeds": SEEDS,
        "rl": {"max_steps": MAX_STEPS},
        "evaluation": {"checkpoints": [CHECKPOINT]},
        "report": {},
    }


def n_correct(model, dataset, variant, seed, step, benchmark) -> int:
    """The known number of correct answers of one cell."""
    p = (MODEL_BASE[model] + EFFECT[variant] + 0.03 * DATASETS.index(dataset) + 0.02 * (seed or 0)
         + 0.05 * list(BENCHMARKS).index(benchmark) - (0.05 if step != "final" else 0.0))
    n = BENCHMARKS[benchmark]
    return int(round(min(max(p, 0.0), 1.0) * n))


def accuracy(*cell) -> float:
    return n_correct(*cell) / BENCHMARKS[cell[-1]]


def _order(benchmark: str, variant: str) -> np.ndarray:
    """Which problems a cell gets right: the first k of a fixed order (nested sets), except for
    the "same" variant whose order differs (as many right as GRPO, but other problems)."""
    rng = np.random.default_rng(list(BENCHMARKS).index(benchmark) + (100 if variant == "same" else 0))
    return rng.permutation(BENCHMARKS[benchmark])


def write_cell(root: Path, model, dataset, variant, seed, step, benchmark) -> None:
    k = n_correct(model, dataset, variant, seed, step, benchmark)
    right = set(_order(benchmark, variant)[:k].tolist())
    folder = root / model / dataset / variant
    folder = (folder if variant == "sft" else folder / f"seed{seed}") / "eval" / str(step)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{benchmark}.jsonl", "w") as handle:
        for pid in range(BENCHMARKS[benchmark]):
            handle.write(json.dumps({"id": pid, "mode": "greedy", "sample": 0, "gold": "1", "completion": "…",
                                     "extracted": "1", "formatted": pid % 4 != 0, "correct": pid in right,
                                     "length": 10 + pid}) + "\n")


def write_train_log(root: Path, model, dataset, variant, seed) -> None:
    steps = np.arange(1, MAX_STEPS + 1)
    reward = 0.2 + EFFECT[variant] + 0.01 * seed + 0.3 * (1 - np.exp(-steps / 10))
    log = pd.DataFrame({"step": steps, "reward": reward, "reward_std": 0.1, "kl": 0.001 * steps,
                        "completion_length": 50.0, "loss": 0.0})
    folder = root / model / dataset / variant / f"seed{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    log.to_csv(folder / "train_log.csv", index=False)


def build_tree(root: Path, config: dict) -> None:
    for model, spec in config["models"].items():
        for dataset in spec.get("datasets", DATASETS):
            for benchmark in BENCHMARKS:
                write_cell(root, model, dataset, "sft", None, "final", benchmark)
            for variant in spec.get("variants", list(config["variants"])):
                for seed in SEEDS:
                    write_train_log(root, model, dataset, variant, seed)
                    for step in (CHECKPOINT, "final"):
                        for benchmark in BENCHMARKS:
                            write_cell(root, model, dataset, variant, seed, step, benchmark)


def mean_over_seeds(model, dataset, variant, benchmark):
    return np.mean([accuracy(model, dataset, variant, s, "final", benchmark) for s in SEEDS])


# --------------------------------------------------------------------------------------------------
# A whole study, as a finished run leaves it: random seed, problem and interaction effects, a check
# line that writes GRPO's completions, a 2 × 2 clamp × trace design, sampled completions, train logs
# with every diagnostic, provenance records, logged completions and job timings. What the publishing
# tests (tests/test_publish_run.py) and the factorial and verdict tests read.
# --------------------------------------------------------------------------------------------------

STUDY_BENCHMARKS = {"arith-1": 60, "arith-2": 40}
STUDY_SEEDS = [0, 1, 2, 3]
STUDY_STEPS = 12
STUDY_SAMPLES = 4
# Each variant's effect on a problem's chance of a right answer; "trace-0" writes GRPO's completions.
STUDY_EFFECT = {"grpo": 0.0, "grpo-clamp": 0.02, "trace-noclamp": 0.10, "trace": 0.12, "trace-0": 0.0,
                "ptrace": -0.02, "gspo-as-trace": -0.15, "dapo": 0.0}
SAME_AS = {"trace-0": "grpo"}
STUDY_RELATIVE = {"style": "recent", "update": "trace", "form": "relative"}


def make_study_config(results: str = "results") -> dict:
    """The study's config (it passes grpo_lambda.config.validate)."""
    return {
        "results": results,
        "models": {"tiny": {"source": "tiny", "prompt": "plain"}},
        "datasets": {"arith": {"source": "synthetic", "n": 50, "seed": 1}},
        "benchmarks": {b: {"source": "synthetic", "level": i + 1, "n": n, "seed": 100 + i}
                       for i, (b, n) in enumerate(STUDY_BENCHMARKS.items())},
        "rl": {"max_steps": STUDY_STEPS},
        "variants": {
            "grpo": {"objective": "grpo"},
            "grpo-clamp": {"objective": "grpo", "advantage_clamp": -0.1},
            "trace-noclamp": {"objective": "grpo_lambda", "lam": 0.99, **STUDY_RELATIVE, "advantage_clamp": None},
            "trace": {"objective": "grpo_lambda", "lam": 0.99, **STUDY_RELATIVE},
            "trace-0": {"objective": "grpo_lambda", "lam": 0.0, **STUDY_RELATIVE, "advantage_clamp": None},
            "ptrace": {"objective": "ptrace", "lam": 0.99},
            "gspo-as-trace": {"objective": "ptrace", "lam": 1.0, "scope": "sequence"},
            "dapo": {"objective": "grpo", "loss_type": "dapo", "epsilon_high": 0.28, "dynamic_sampling": True},
        },
        "seeds": STUDY_SEEDS,
        "evaluation": {"checkpoints": [], "samples": STUDY_SAMPLES},
        "report": {"baseline": "grpo", "grpo_lambda_variant": "trace",
                   "equivalence_margin": {"accuracy": 0.2, "reward_auc": 0.05},
                   "factorial": {"factors": ["trace", "clamp"],
                                 "cells": {"grpo": {"trace": False, "clamp": False},
                                           "grpo-clamp": {"trace": False, "clamp": True},
                                           "trace-noclamp": {"trace": True, "clamp": False},
                                           "trace": {"trace": True, "clamp": True}}}},
    }


def _rng(*key) -> np.random.Generator:
    return np.random.default_rng(list(repr(key).encode()))


def study_chances(variant: str, seed, benchmark: str) -> np.ndarray:
    """Per problem, the chance of a right answer: the problem's difficulty, the seed's effect (the same for
    every variant of that seed: one SFT model), the variant's effect and a seed × problem interaction."""
    n = STUDY_BENCHMARKS[benchmark]
    difficulty = _rng("difficulty", benchmark).uniform(0.15, 0.75, n)
    if variant == "sft":
        return np.clip(difficulty - 0.1, 0.02, 0.98)
    variant = SAME_AS.get(variant, variant)
    seed_effect = _rng("seed", seed).normal(0, 0.04)
    interaction = _rng("interaction", variant, seed, benchmark).uniform(-0.05, 0.05, n)
    return np.clip(difficulty + seed_effect + STUDY_EFFECT[variant] + interaction, 0.02, 0.98)


def _study_rows(variant: str, seed, benchmark: str) -> list[dict]:
    chances = study_chances(variant, seed, benchmark)
    rng = _rng("draws", SAME_AS.get(variant, variant), seed, benchmark)
    rows = []
    for pid, chance in enumerate(chances):
        right = rng.random() < chance
        rows.append({"id": pid, "mode": "greedy", "sample": 0, "gold": str(pid), "completion": "…",
                     "extracted": str(pid) if right else str(pid + 1), "formatted": bool(rng.random() < 0.95),
                     "correct": bool(right), "length": int(20 + rng.integers(0, 30))})
        for j in range(STUDY_SAMPLES):
            right = rng.random() < chance
            wrong = str(pid + 1 + int(rng.integers(0, 2)))
            rows.append({"id": pid, "mode": "sampled", "sample": j, "gold": str(pid), "completion": "…",
                         "extracted": str(pid) if right else (wrong if rng.random() < 0.9 else None),
                         "formatted": True, "correct": bool(right), "length": int(20 + rng.integers(0, 30))})
    return rows


PROVENANCE = {"python": "3.11.7", "torch": "2.13.0", "transformers": "5.23.0", "trl": "1.16.0",
              "accelerate": "1.15.0", "peft": "0.21.2", "deepspeed": None, "vllm": None, "cuda": None,
              "grpo_lambda": "0.1.0", "commit": "0123456789abcdef0123456789abcdef01234567"}


def _write_eval(folder: Path, benchmark: str, rows: list[dict], keys: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{benchmark}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    greedy = [row for row in rows if row["mode"] == "greedy"]
    summary = {**keys, "benchmark": benchmark, "n": len(greedy),
               "accuracy": float(np.mean([row["correct"] for row in greedy])), "provenance": PROVENANCE}
    (folder / f"{benchmark}.json").write_text(json.dumps(summary))


def study_train_log(variant: str, seed: int) -> pd.DataFrame:
    """A run's train log: a rising reward (its rise shared by the variants of a seed), and every diagnostic."""
    variant_name = SAME_AS.get(variant, variant)
    rng = _rng("log", variant_name, seed)
    steps = np.arange(1, STUDY_STEPS + 1)
    rise = 0.3 + _rng("seed", seed).normal(0, 0.04) + STUDY_EFFECT[variant_name]
    reward = 0.2 + rise * (1 - np.exp(-steps / 4)) + rng.normal(0, 0.01, len(steps))
    return pd.DataFrame({
        "step": steps, "reward": reward, "reward_std": 0.3, "frac_reward_zero_std": rng.uniform(0.2, 0.5, len(steps)),
        "kl": 0.001 * steps, "loss": rng.normal(0, 0.01, len(steps)), "entropy": 0.8 - 0.02 * steps,
        "completion_length": 40.0, "clip_ratio_low": rng.uniform(0, 0.01, len(steps)),
        "clip_ratio_high": rng.uniform(0, 0.02, len(steps)), "clip_ratio_region": rng.uniform(0.01, 0.03, len(steps)),
        "dropped_groups": rng.integers(0, 3, len(steps)).astype(float) if variant_name == "dapo" else np.nan,
        "step_time": 2.0})


def build_study_tree(root: Path, config: dict) -> None:
    """The finished run of ``config`` (make_study_config) under ``root``."""
    root = Path(root)
    for benchmark in STUDY_BENCHMARKS:
        _write_eval(root / "tiny" / "arith" / "sft" / "eval" / "final", benchmark, _study_rows("sft", None, benchmark),
                    {"model": "tiny", "dataset": "arith", "variant": "sft", "seed": None, "step": "final"})
    (root / "tiny" / "arith" / "sft" / "provenance.json").write_text(json.dumps(PROVENANCE))
    for variant in config["variants"]:
        for seed in config["seeds"]:
            cell = root / "tiny" / "arith" / variant / f"seed{seed}"
            for benchmark in STUDY_BENCHMARKS:
                _write_eval(cell / "eval" / "final", benchmark, _study_rows(variant, seed, benchmark),
                            {"model": "tiny", "dataset": "arith", "variant": variant, "seed": seed, "step": "final"})
            study_train_log(variant, seed).to_csv(cell / "train_log.csv", index=False)
            (cell / "provenance.json").write_text(json.dumps(PROVENANCE))
            (cell / "completions").mkdir()
            for step in (1, STUDY_STEPS):
                rows = [{"step": step, "prompt": "12+34=?", "completion": f"4+2=6 (6). \\boxed{{{46 + j}}}",
                         "reward": float(j == 0), "advantage": 0.5 - j * 0.25} for j in range(3)]
                (cell / "completions" / f"step-{step:06d}.jsonl").write_text(
                    "".join(json.dumps(row) + "\n" for row in rows))
            timing = root / "logs" / "train" / "tiny" / "arith" / variant / f"seed{seed}.benchmark.tsv"
            timing.parent.mkdir(parents=True, exist_ok=True)
            timing.write_text("s\th:m:s\tmax_rss\tcpu_time\n50.5\t0:00:50\t900\t48.25\n")
    timing = root / "logs" / "sft" / "tiny" / "arith.benchmark.tsv"
    timing.parent.mkdir(parents=True, exist_ok=True)
    timing.write_text("s\th:m:s\tmax_rss\tcpu_time\n200.0\t0:03:20\t900\t390.5\n")
    (root / "wall_seconds.txt").write_text("1234\n")
