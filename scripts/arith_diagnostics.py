"""Why the arith task measures reasoning: where greedy chains go wrong, and how often groups disagree.

    python scripts/arith_diagnostics.py --config config/config.yaml [--results results] > docs/default-run/diagnostics.md

Reads the held-out suites (results/bench/), every final evaluation file and every train_log.csv of
the run; prints Markdown: per suite and variant (SFT and the final RL models, all seeds pooled) the
greedy accuracy and the share of answers by first error (grpo_lambda.data.arith.first_error), the
SFT training targets' own error rate, and per variant the share of GRPO groups whose rewards all
agree (frac_reward_zero_std) at the start and the end of training.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import pandas as pd
import yaml

from grpo_lambda.tables.collect import collect_train_logs
from grpo_lambda.data import arith


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--results")
    args = parser.parse_args()
    config = yaml.safe_load(Path(args.config).read_text())
    results = Path(args.results or config.get("results", "results"))
    model = next(iter(config["models"]))
    dataset = next(iter(config["datasets"]))
    rows = []
    for bench in config["benchmarks"]:
        problems = {row["id"]: row["problem"] for row in read_jsonl(results / "bench" / f"{bench}.jsonl")}
        cells = {"sft": [results / model / dataset / "sft" / "eval" / "final" / f"{bench}.jsonl"]}
        for variant in config["variants"]:
            cells[variant] = [results / model / dataset / variant / f"seed{seed}" / "eval" / "final" / f"{bench}.jsonl"
                              for seed in config["seeds"]]
        for variant, paths in cells.items():
            kinds, positions = Counter(), []
            for path in paths:
                if not path.is_file():
                    continue
                for sample in read_jsonl(path):
                    if sample.get("mode", "greedy") != "greedy":
                        continue
                    kind, step = arith.first_error(problems[sample["id"]], sample["completion"])
                    kinds[kind] += 1
                    if step is not None and kind != "correct":
                        positions.append(step)
            total = sum(kinds.values())
            if not total:
                continue
            rows.append({"suite": bench, "variant": variant, "answers": total,
                         **{kind: kinds[kind] / total for kind in arith.ERROR_KINDS},
                         "mean first-error step": sum(positions) / len(positions) if positions else float("nan")})
    table = pd.DataFrame(rows)
    print("## Greedy answers by first error (share of answers; all seeds pooled)\n")
    print(table.to_markdown(index=False, floatfmt=".3f"))
    train = read_jsonl(results / "data" / f"{dataset}.jsonl")
    wrong = sum(row.get("step_errors", 0) > 0 for row in train)
    print(f"\nSFT targets with a wrong carry: {wrong} of {len(train)} ({wrong / len(train):.3f}).\n")
    logs = collect_train_logs(results, config)
    if not logs.empty:
        steps = logs["step"].max()
        early, late = logs[logs["step"] <= 5], logs[logs["step"] > steps - 5]
        summary = pd.DataFrame({
            "reward, steps 1-5": early.groupby("variant")["reward"].mean(),
            f"reward, steps {steps - 4}-{steps}": late.groupby("variant")["reward"].mean(),
            "frac_reward_zero_std, steps 1-5": early.groupby("variant")["frac_reward_zero_std"].mean(),
            f"frac_reward_zero_std, steps {steps - 4}-{steps}": late.groupby("variant")["frac_reward_zero_std"].mean(),
        })
        print("## Training groups (mean over seeds)\n")
        print(summary.to_markdown(floatfmt=".3f"))


if __name__ == "__main__":
    main()
