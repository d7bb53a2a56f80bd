"""The fast path: string comparisons in the calling process (microseconds), and which gold forms are still
worth a symbolic check."""

from __future__ import annotations

import functools
import re

from .hendrycks import hendrycks_normalize
from .prm800k import _INTEGER, plain_normalize

MAX_ANSWER_CHARS = 1000
"""Longer extracted answers are wrong outright (no normalisation)."""
MAX_SYMBOLIC_CHARS = 300
"""Longer extracted answers are compared as strings only, never by sympy or math-verify."""
MAX_DIGITS = 100
"""Answers holding a longer run of digits are compared as strings only."""




# A number as a model boxes it: "x = 5", "-1,234", ".35", "2.5e-3", "3 \\times 10^{8}", "90^{\\circ}", "62.5\\%".
_NUMBER_BEFORE_PERIOD = re.compile(
    r"(?:[a-z]\s*=\s*)?-?(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)?\.?[0-9]+"
    r"(?:\s*\\times\s*10\^\{?-?[0-9]+\}?|e[+-]?[0-9]+)?(?:\^\{?\\circ\}?|\\?%)?")


def _without_final_period(answer: str) -> str:
    r"""``answer`` less a sentence-ending period after a number: models often write ``\boxed{204.}``,
    and the reference grader accepts it (``float("204.")`` in its normalisation). Only after a number,
    as there: it rejects ``\frac{14}{3}.`` and tuples like ``1,3.`` (docs/grader-parity.md)."""
    stripped = answer.strip()
    if stripped.endswith(".") and _NUMBER_BEFORE_PERIOD.fullmatch(stripped[:-1].rstrip()):
        return stripped[:-1].rstrip()
    return answer


@functools.lru_cache(maxsize=8192)
def _comparison_keys(answer: str) -> tuple[str, str, str | None]:
    """(stripped, Hendrycks-normalised, PRM800K-normalised) forms; gold forms repeat, hence the cache."""
    answer = _without_final_period(answer)
    return answer.strip(), hendrycks_normalize(answer), plain_normalize(answer)


def _fast_verdict(answer: str, golds: list[str]) -> tuple[bool, list[str]]:
    """(True, []) on a string match; otherwise (False, the gold forms still worth a symbolic check)."""
    if len(answer) > MAX_ANSWER_CHARS:
        return False, []
    answer_keys = _comparison_keys(answer)
    symbolic_allowed = (len(answer) <= MAX_SYMBOLIC_CHARS and bool(answer_keys[2])
                        and not re.search(r"[0-9]{%d}" % (MAX_DIGITS + 1), answer))
    undecided = []
    for gold in golds:
        gold_keys = _comparison_keys(gold)
        if any(a and a == g for a, g in zip(answer_keys, gold_keys)):
            return True, []
        answer_plain, gold_plain = answer_keys[2], gold_keys[2]
        both_integers = (gold_plain is not None and _INTEGER.fullmatch(gold_plain)
                         and _INTEGER.fullmatch(answer_plain or ""))
        if symbolic_allowed and not both_integers:  # two different integers are never equal
            undecided.append(gold)
    return False, undecided
