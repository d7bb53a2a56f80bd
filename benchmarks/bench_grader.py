"""Time the grader on the real benchmark golds (goal: all 1,560 in at most 5 s on 2 cores).

    python benchmarks/bench_grader.py [--data ../shared/data/benchmarks] [--processes 2] [--wrong]

Each gold is written as ``... so the answer is \\boxed{GOLD}`` (the first accepted form of a list)
and graded against itself, serially with ``grade`` and in parallel with ``grade_many``. ``--wrong``
also grades each one against the next problem's gold, the costly case: most of those comparisons
reach sympy and math-verify.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from grpo_lambda import rewards

BENCHMARKS = ("aime24", "amc", "math500", "minerva", "olympiadbench")
DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "benchmarks"


def load_golds(folder: Path) -> list[tuple[str, object]]:
    golds = []
    for name in BENCHMARKS:
        with open(folder / f"{name}.jsonl", encoding="utf-8") as handle:
            golds += [(name, json.loads(line)["answer"]) for line in handle if line.strip()]
    return golds


def timed(label: str, function, *args, **kwargs):
    # Start cold: no cached normalisations or verdicts from an earlier run.
    rewards._comparison_keys.cache_clear()
    rewards._symbolic_equal.cache_clear()
    start = time.perf_counter()
    result = function(*args, **kwargs)
    print(f"{label:<44} {time.perf_counter() - start:8.3f} s")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder of the five benchmark JSONL files")
    parser.add_argument("--processes", type=int, default=None, help="grade_many worker processes (default: CPUs)")
    parser.add_argument("--wrong", action="store_true", help="also grade each answer against the next gold")
    args = parser.parse_args()

    golds = load_golds(args.data)
    completions = [f"... so the answer is \\boxed{{{rewards.gold_forms(gold)[0]}}}" for _, gold in golds]
    answers = [gold for _, gold in golds]
    print(f"{len(golds)} benchmark golds from {args.data}")

    serial = timed("grade, serially", lambda: [rewards.grade(c, g) for c, g in zip(completions, answers)])
    parallel = timed(f"grade_many (processes={args.processes or 'CPUs'})", rewards.grade_many,
                     completions, answers, processes=args.processes)
    print(f"correct: {sum(serial)} of {len(serial)} (grade_many agrees: {serial == parallel})")

    if args.wrong:
        shifted = [(completions[i], answers[i + 1]) for i in range(len(golds) - 1) if golds[i][0] == golds[i + 1][0]]
        texts, others = [text for text, _ in shifted], [gold for _, gold in shifted]
        rewards.grade_many(["\\boxed{y}"] * 8, ["z"] * 8, processes=args.processes)  # start the workers
        wrong = timed(f"grade_many, {len(shifted)} answers vs the next gold", rewards.grade_many,
                      texts, others, processes=args.processes)
        print(f"accepted: {sum(wrong)} of {len(wrong)} (pairs include genuinely equal golds)")


if __name__ == "__main__":
    main()
