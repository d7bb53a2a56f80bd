"""Agreement of ``grpo_lambda.grading`` with a reference math grader on answer variants of real golds.

    python benchmarks/bench_grader_parity.py PATH/TO/math_grader.py [--data ../shared/data/benchmarks]
        [--limit N] [--show 3]

The reference is the grader of the evaluation code the paper used (``understand_r1_zero/math_grader.py``
of sail-sg/understand-r1-zero, its ``boxed_reward_fn`` with ``fast=False``); it is loaded from the
file given, never shipped with this project, and needs sympy, latex2sympy2_extended, math-verify
and pylatexenc. Each benchmark gold is written as a handful of completions a model might produce
(the gold itself, with a trailing period inside the box, as a decimal, with thousands commas, with
``\\dfrac``, a unit or a percent sign, an equation ``x = ...``, without a box, an off-by-one number,
another problem's gold, an earlier wrong box ...); both graders grade every completion against the
gold. Prints the agreement and each class of disagreement (variant, which grader accepted) with
examples. Classes and their reasons: docs/grader-parity.md.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import multiprocessing
import re
import sys
import time
from pathlib import Path

from bench_grader import DEFAULT_DATA, load_golds  # the 1,560 golds the speed benchmark grades

from grpo_lambda import grading

_INTEGER = re.compile(r"-?\d+")


def load_reference(path: str):
    """The reference grader module, imported from its file."""
    if not Path(path).is_file():
        raise SystemExit(f"reference grader {path!r}: no such file")
    spec = importlib.util.spec_from_file_location("reference_math_grader", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, "boxed_reward_fn"):
        raise SystemExit(f"reference grader {path!r} has no boxed_reward_fn")
    return module


def _with_commas(digits: str) -> str:
    sign, digits = ("-", digits[1:]) if digits.startswith("-") else ("", digits)
    return sign + f"{int(digits):,}"


def variants(gold, other_gold) -> dict[str, str]:
    """Completions a model might write for ``gold``, by variant name (only those that apply)."""
    form = grading.gold_forms(gold)[0]
    other = grading.gold_forms(other_gold)[0]
    box = lambda content: f"Reasoning first. So the final answer is $\\boxed{{{content}}}$"  # noqa: E731
    out = {
        "exact": box(form),
        "trailing_period": box(form + "."),
        "period_after_box": box(form) + ".",
        "spaces": box(form.replace(" ", "")),
        "padded": box(f" {form} "),
        "equation": box(f"x = {form}"),
        "unboxed": f"So the final answer is {form}.",
        "earlier_wrong_box": f"First I got $\\boxed{{{other}}}$ but that is wrong. " + box(form),
        "other_gold": box(other),
    }
    if "\\frac" in form:
        out["dfrac"] = box(form.replace("\\frac", "\\dfrac"))
    if _INTEGER.fullmatch(form):
        out["decimal"] = box(form + ".0")
        out["off_by_one"] = box(str(int(form) + 1))
        out["percent"] = box(form + "\\%")
        out["degrees"] = box(form + "^\\circ")
        out["text_unit"] = box(form + "\\text{ cm}")
        if abs(int(form)) >= 1000:
            out["thousands_commas"] = box(_with_commas(form))
    return out


_REFERENCE = None


def _load_in_worker(path: str) -> None:
    global _REFERENCE
    _REFERENCE = load_reference(path)


def reference_verdict(case: tuple[str, object]) -> bool:
    completion, gold = case
    try:
        _, reward = _REFERENCE.boxed_reward_fn(completion, gold, fast=False)
    except Exception:  # the reference raises on some inputs; a crash is no reward there
        return False
    return reward == 1.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("reference", help="path of the reference grader's file (math_grader.py)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder of the benchmark JSONL files")
    parser.add_argument("--limit", type=int, help="only the first N golds (a quick look)")
    parser.add_argument("--show", type=int, default=3, help="examples printed per class of disagreement")
    parser.add_argument("--variants", nargs="+", help="only these variants (names as printed)")
    parser.add_argument("--processes", type=int, default=2, help="processes running the reference grader")
    args = parser.parse_args(argv)

    load_reference(args.reference)  # fails here, once, on a bad path
    golds = load_golds(args.data)[:args.limit]
    cases = []
    for index, (benchmark, gold) in enumerate(golds):
        other_gold = golds[(index + 1) % len(golds)][1]
        cases += [(benchmark, gold, name, text) for name, text in variants(gold, other_gold).items()
                  if not args.variants or name in args.variants]

    start = time.perf_counter()
    ours = grading.grade_many([text for *_, text in cases], [gold for _, gold, *_ in cases])
    ours_seconds = time.perf_counter() - start
    start = time.perf_counter()
    # The reference's own signal-based timeouts need each comparison on a process's main thread.
    with multiprocessing.Pool(args.processes, initializer=_load_in_worker, initargs=(args.reference,)) as pool:
        theirs = pool.map(reference_verdict, [(text, gold) for _, gold, _, text in cases], chunksize=64)
    reference_seconds = time.perf_counter() - start

    per_variant = collections.Counter(name for _, _, name, _ in cases)
    classes = collections.defaultdict(list)
    for case, mine, their in zip(cases, ours, theirs):
        if mine != their:
            classes[(case[2], "ours" if mine else "reference")].append(case)
    disagreements = sum(len(found) for found in classes.values())
    agreement = 1 - disagreements / len(cases)
    print(f"{len(golds)} golds, {len(cases)} answer variants; grading took {ours_seconds:.1f} s (ours), "
          f"{reference_seconds:.1f} s (reference)")
    print(f"accepted: ours {sum(ours)}, reference {sum(theirs)}")
    print(f"agreement: {agreement:.2%} ({len(cases) - disagreements} of {len(cases)}; "
          f"{disagreements} disagreements)")
    for (variant, accepted_by), found in sorted(classes.items(), key=lambda item: -len(item[1])):
        print(f"\n{len(found):5d} of {per_variant[variant]:4d} '{variant}' accepted only by {accepted_by}; "
              f"by benchmark {dict(collections.Counter(case[0] for case in found))}")
        for benchmark, gold, _, text in found[:args.show]:
            print(f"      {benchmark}: gold {gold!r}  completion {text[-90:]!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
