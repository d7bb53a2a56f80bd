"""Time the grader on the real benchmark golds (goal: all 1,560 in at most 5 s on 2 cores).

    python benchmarks/bench_grader.py [--data ../shared/data/benchmarks] [--processes 2] [--wrong]
    python benchmarks/bench_grader.py --limits     # no data needed

Each gold is written as ``... so the answer is \\boxed{GOLD}`` (the first accepted form of a list)
and graded against itself, serially with ``grade`` and in parallel with ``grade_many``. ``--wrong``
also grades each one against the next problem's gold, the costly case: most of those comparisons
reach sympy and math-verify.

``--limits`` times what the tests only guard against hanging: 1,000 integer gradings (goal ≤ 2 s),
answers that would run for ever, cut by the per-answer time limit (goal ≤ limit + 0.5 s each), and a
5,000,000-character completion (goal ≤ 1 s); each line prints its time over its goal.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from grpo_lambda import grading
from grpo_lambda.grading import string_match, workers

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
    string_match._comparison_keys.cache_clear()
    workers._symbolic_equal.cache_clear()
    start = time.perf_counter()
    result = function(*args, **kwargs)
    print(f"{label:<44} {time.perf_counter() - start:8.3f} s")
    return result


# Answers whose symbolic comparison would not finish unless cut by the time limit.
RUNAWAY = {
    "power tower": "9^{9^{9^{9}}}",
    "huge power": "10^{10^{10}}",
    "tower of sevens": "7^{7^{7^{7}}}",
    "factorial": "100000!",
    "deep fractions": "\\frac{" * 80 + "1" + "}{2}" * 80,
    "10,000 digits": "9" * 10_000,
}


def report(label: str, seconds: float, goal: float) -> None:
    print(f"{label:<44} {seconds:8.3f} s   goal {goal:5.2f} s   ratio {seconds / goal:5.2f}")


def time_limits(limit: float = 0.5) -> None:
    import random

    rng = random.Random(0)
    golds = [str(rng.randint(-10**6, 10**6)) for _ in range(500)]
    texts = [f"\\boxed{{{g}}}" for g in golds] + [f"\\boxed{{{int(g) + 1}}}" for g in golds]
    start = time.perf_counter()
    [grading.grade(text, gold) for text, gold in zip(texts, golds + golds)]
    report("1,000 integer gradings", time.perf_counter() - start, 2.0)
    grading.grade("\\boxed{y+warm}", "z", timeout=30)  # a worker ready, as in a long run
    for name, answer in RUNAWAY.items():
        start = time.perf_counter()
        grading.grade(f"\\boxed{{{answer}}}", "5", timeout=limit)
        report(f"{name} (limit {limit} s)", time.perf_counter() - start, limit + 0.5)
    start = time.perf_counter()
    grading.grade("x" * 5_000_000 + "\\boxed{5}", "5")
    report("5,000,000-character completion", time.perf_counter() - start, 1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder of the five benchmark JSONL files")
    parser.add_argument("--processes", type=int, default=None, help="grade_many worker processes (default: CPUs)")
    parser.add_argument("--wrong", action="store_true", help="also grade each answer against the next gold")
    parser.add_argument("--limits", action="store_true", help="time the per-answer time limit instead (no data)")
    args = parser.parse_args()
    if args.limits:
        time_limits()
        return

    golds = load_golds(args.data)
    completions = [f"... so the answer is \\boxed{{{grading.gold_forms(gold)[0]}}}" for _, gold in golds]
    answers = [gold for _, gold in golds]
    print(f"{len(golds)} benchmark golds from {args.data}")

    serial = timed("grade, serially", lambda: [grading.grade(c, g) for c, g in zip(completions, answers)])
    parallel = timed(f"grade_many (processes={args.processes or 'CPUs'})", grading.grade_many,
                     completions, answers, processes=args.processes)
    print(f"correct: {sum(serial)} of {len(serial)} (grade_many agrees: {serial == parallel})")

    if args.wrong:
        shifted = [(completions[i], answers[i + 1]) for i in range(len(golds) - 1) if golds[i][0] == golds[i + 1][0]]
        texts, others = [text for text, _ in shifted], [gold for _, gold in shifted]
        grading.grade_many(["\\boxed{y}"] * 8, ["z"] * 8, processes=args.processes)  # start the workers
        wrong = timed(f"grade_many, {len(shifted)} answers vs the next gold", grading.grade_many,
                      texts, others, processes=args.processes)
        print(f"accepted: {sum(wrong)} of {len(wrong)} (pairs include genuinely equal golds)")


if __name__ == "__main__":
    main()
