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




@functools.lru_cache(maxsize=8192)
def _comparison_keys(answer: str) -> tuple[str, str, str | None]:
    """(stripped, Hendrycks-normalised, PRM800K-normalised) forms; gold forms repeat, hence the cache."""
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
