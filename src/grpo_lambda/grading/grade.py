"""The public grading API: ``grade`` / ``grade_details`` for one completion, ``grade_many`` /
``grade_many_details`` for many, the symbolic checks spread over the worker processes."""

from __future__ import annotations

import numbers
from concurrent.futures import ThreadPoolExecutor

from .extract import extract_boxed, gold_forms
from .string_match import _fast_verdict, _without_final_period
from .workers import DEFAULT_TIMEOUT, _symbolic_match, allocated_cpus

def _check_timeout(timeout: float) -> float:
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real) or not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    return float(timeout)


def grade_details(completion: str, gold, *, timeout: float = DEFAULT_TIMEOUT) -> dict:
    """Grade one completion: ``{"extracted": str | None, "formatted": bool, "correct": bool}``.

    ``gold`` is a string, a number or a list of accepted answers (see ``gold_forms``). ``timeout``
    bounds each symbolic comparison (one per gold form still undecided after the string checks).
    """
    timeout = _check_timeout(timeout)
    golds = gold_forms(gold)
    extracted = extract_boxed(completion)
    if extracted is None:
        return {"extracted": None, "formatted": False, "correct": False}
    correct, undecided = _fast_verdict(extracted, golds)
    if undecided:
        correct = _symbolic_match(_without_final_period(extracted), undecided, timeout)
    return {"extracted": extracted, "formatted": True, "correct": correct}


def grade(completion: str, gold, *, timeout: float = DEFAULT_TIMEOUT) -> bool:
    """Whether the last boxed answer of ``completion`` matches ``gold`` (see ``grade_details``)."""
    return grade_details(completion, gold, timeout=timeout)["correct"]


def grade_many_details(completions: list[str], golds: list, *, processes: int | None = None,
                       timeout: float = DEFAULT_TIMEOUT) -> list[dict]:
    """``grade_details`` for each (completion, gold) pair, symbolic checks spread over ``processes``
    worker processes (default: one per CPU this job may use, ``allocated_cpus``). String matches never
    leave the calling process."""
    timeout = _check_timeout(timeout)
    if len(completions) != len(golds):
        raise ValueError(f"completions and golds differ in length: {len(completions)} != {len(golds)}")
    if processes is None:
        processes = allocated_cpus()
    if isinstance(processes, bool) or not isinstance(processes, int) or processes < 1:
        raise ValueError(f"processes must be a positive integer, got {processes!r}")
    details, pending = [], []
    for index, (completion, gold) in enumerate(zip(completions, golds)):
        forms = gold_forms(gold)
        extracted = extract_boxed(completion)
        correct, undecided = (False, []) if extracted is None else _fast_verdict(extracted, forms)
        details.append({"extracted": extracted, "formatted": extracted is not None, "correct": correct})
        if undecided:
            pending.append((index, _without_final_period(extracted), undecided))
    if pending:
        # Threads only wait on the workers; the work itself runs in the worker processes.
        with ThreadPoolExecutor(max_workers=min(processes, len(pending))) as executor:
            verdicts = executor.map(lambda item: _symbolic_match(item[1], item[2], timeout), pending)
            for (index, _, _), correct in zip(pending, verdicts):
                details[index]["correct"] = correct
    return details


def grade_many(completions: list[str], golds: list, *, processes: int | None = None,
               timeout: float = DEFAULT_TIMEOUT) -> list[bool]:
    """``grade`` for each (completion, gold) pair, in parallel (see ``grade_many_details``)."""
    return [detail["correct"] for detail in
            grade_many_details(completions, golds, processes=processes, timeout=timeout)]
