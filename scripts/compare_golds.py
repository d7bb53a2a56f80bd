"""Compare benchmark copies with the evaluation code's own: the paper's evaluation suite
(sail-sg/understand-r1-zero, datasets/evaluation_suite, a save_to_disk DatasetDict) against JSONL
copies of the five benchmarks (the hub's, or any local ones), problem by problem.

    python scripts/compare_golds.py SUITE_FOLDER COPIES_FOLDER

SUITE_FOLDER is a checkout's datasets/evaluation_suite; COPIES_FOLDER holds aime24.jsonl, amc.jsonl,
math500.jsonl, minerva.jsonl and olympiadbench.jsonl (the registry's names, hub fields or normalised rows).
Both sides are read through the dataset registry's normalisation (grpo_lambda.data.registry), so a gold
written 27.0 on one side and 27 on the other is the same gold; problems are matched by their text with
whitespace collapsed; a problem text that appears twice on one side is reported (its golds cannot be
matched one to one). Prints one line per benchmark: rows on each side, problems matched, golds equal,
repeated texts, and the first few differing golds. Exit status 1 when any count or gold differs.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

# The registry's benchmark name -> the evaluation suite's split
SUITE_SPLITS = {"aime24": "aime", "amc": "amc", "math500": "math", "minerva": "minerva",
                "olympiadbench": "olympiad_bench"}


def _key(problem: str) -> str:
    return re.sub(r"\s+", " ", problem).strip()


def _as_set(answer) -> frozenset:
    return frozenset(answer) if isinstance(answer, list) else frozenset([answer])


def compare(suite_rows: list[dict], copy_rows: list[dict]) -> dict:
    """Counts and differences of two lists of normalised rows ({problem, answer}) of one benchmark."""
    suite = {_key(row["problem"]): row["answer"] for row in suite_rows}
    copies = {_key(row["problem"]): row["answer"] for row in copy_rows}
    shared = sorted(set(suite) & set(copies))
    differing = [(problem, suite[problem], copies[problem]) for problem in shared
                 if _as_set(suite[problem]) != _as_set(copies[problem])]
    repeated = (len(suite_rows) - len(suite)) + (len(copy_rows) - len(copies))
    return {"suite": len(suite_rows), "copy": len(copy_rows), "matched": len(shared),
            "golds_equal": len(shared) - len(differing), "repeated": repeated, "differing": differing}


def main(argv=None) -> int:
    from datasets import load_from_disk

    from grpo_lambda.data.registry import load_rows

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("suite", type=Path)
    parser.add_argument("copies", type=Path)
    args = parser.parse_args(argv)
    suite = load_from_disk(str(args.suite))
    status = 0
    with tempfile.TemporaryDirectory() as scratch:
        for name, split in SUITE_SPLITS.items():
            suite[split].save_to_disk(f"{scratch}/{split}")  # one split, read as the registry reads a local copy
            suite_rows, _ = load_rows(name, f"{scratch}/{split}")
            copy_rows, _ = load_rows(name, args.copies / f"{name}.jsonl")
            status |= report(name, compare(suite_rows, copy_rows))
    return status


def report(name: str, result: dict) -> int:
    """Print one benchmark's line; 1 when a count or a gold differs."""
    print(f"{name}: suite {result['suite']}, copy {result['copy']}, matched {result['matched']}, "
          f"golds equal {result['golds_equal']}, texts repeated {result['repeated']}")
    for problem, gold, other in result["differing"][:3]:
        print(f"  differs: {problem[:60]!r}: suite {gold!r}, copy {other!r}")
    return int(not result["suite"] == result["copy"] == result["matched"] == result["golds_equal"])

if __name__ == "__main__":
    sys.exit(main())
