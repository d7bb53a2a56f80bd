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
