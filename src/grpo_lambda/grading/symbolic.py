"""The slow path's comparisons: sympy (the reference grader's, element-wise for tuples and intervals) and
math-verify. They run in the worker processes of ``grpo_lambda.grading.workers``, never in the caller.

Standard library only at import: sympy and math-verify are imported inside the functions.
"""

from __future__ import annotations

import re

from .prm800k import _as_integer, _strip_thousands_commas, plain_normalize

_TUPLE_CHARS = "()[]"
_SYMPY_BAD_SUBSTRINGS = ("^{", "^(", "**")
_SYMPY_BAD_PATTERNS = (re.compile(r"\^[0-9]+\^"), re.compile(r"\^[0-9][0-9]+"))
_SYMPY_ALLOWED = re.compile(r"[0-9a-z+\-*/^().,=<>!_ ]*")
_FRACTION = re.compile(r"-?[0-9]+.?/0*[1-9][0-9]*.?")


def _split_tuple(expr: str) -> list[str]:
    expr = _strip_thousands_commas(expr)
    if (len(expr) > 2 and expr[0] in _TUPLE_CHARS and expr[-1] in _TUPLE_CHARS
            and not any(char in expr[1:-1] for char in _TUPLE_CHARS)):
        return [element.strip() for element in expr[1:-1].split(",")]
    return [expr] if expr else []


def _sympy_difference_is_zero(gold: str, answer: str) -> bool:
    """Whether sympy simplifies ``(gold) - (answer)`` to 0; refuses inputs that could hang or that
    name more than two unknowns (it evaluates text with ``parse_expr``)."""
    from sympy import simplify
    from sympy.parsing import sympy_parser

    expr = f"({gold})-({answer})"
    letters = set(char for char in expr.replace("sqrt", "").replace("frac", "") if char.isalpha())
    if (len(letters) > 2 or not _SYMPY_ALLOWED.fullmatch(expr)
            or any(bad in expr for bad in _SYMPY_BAD_SUBSTRINGS)
            or any(pattern.search(expr) for pattern in _SYMPY_BAD_PATTERNS)):
        return False
    transformations = (sympy_parser.standard_transformations
                       + (sympy_parser.implicit_multiplication_application,))
    difference = sympy_parser.parse_expr(expr.replace("^", "**"), transformations=transformations)
    return simplify(difference) == 0


def _sympy_equal(answer: str, gold: str) -> bool:
    """The reference grader's sympy comparison, element-wise for tuples and intervals."""
    gold_plain, answer_plain = plain_normalize(gold), plain_normalize(answer)
    if not gold_plain or not answer_plain:
        return False
    if gold_plain == answer_plain:
        return True
    gold_elements, answer_elements = _split_tuple(gold_plain), _split_tuple(answer_plain)
    if len(gold_elements) > 1 and (gold_plain[0] != answer_plain[0] or gold_plain[-1] != answer_plain[-1]):
        return False  # (a, b) is not [a, b]
    if len(gold_elements) != len(answer_elements):
        return False
    for gold_element, answer_element in zip(gold_elements, answer_elements):
        if _FRACTION.fullmatch(gold_element) and _FRACTION.fullmatch(answer_element):
            equal = gold_element == answer_element  # unreduced fractions are not accepted here
        elif (_as_integer(gold_element) is None) != (_as_integer(answer_element) is None):
            equal = False  # an integer gold needs an integer answer here
        else:
            try:
                equal = _sympy_difference_is_zero(gold_element, answer_element)
            except Exception:
                equal = False
        if not equal:
            return False
    return True


def _math_verify_equal(answer: str, gold: str) -> bool:
    """math-verify's verdict, parsed as the reference grader parses (LaTeX first, then expressions)."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    def parsed(text: str):
        return parse(text if "$" in text else f"${text}$",
                     extraction_config=(LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()),
                     fallback_mode="no_fallback", extraction_mode="first_match", parsing_timeout=None)

    return bool(verify(parsed(gold), parsed(answer), timeout_seconds=None))


def _sympy_or_math_verify_equal(answer: str, gold: str) -> bool:
    return _sympy_equal(answer, gold) or _math_verify_equal(answer, gold)
