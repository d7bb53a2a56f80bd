r"""The PRM800K answer normalisation (``plain_normalize``): the form the sympy comparison works on."""

from __future__ import annotations

import re
from decimal import Decimal

from .hendrycks import _ENCLOSING_TEXT
from .latex import _LatexToPlain

_PLAIN_UNITS = re.compile(
    r"(?:degree|cm|centimeter|meter|mile|second|minute|hour|day|week|month|year|foot|feet|inch|yard)"
    r"(es)?(s)? *(\^[0-9]+)?")
_THOUSANDS_COMMA = re.compile(r"(\d),(\d\d\d)($|\D)")
_DECIMAL = re.compile(r"-?[0-9]{1,100}(\.[0-9]{0,100})?")  # "204." reads as float("204.") does
_INTEGER = re.compile(r"-?[0-9]+")


def _strip_thousands_commas(s: str) -> str:
    while True:
        stripped = _THOUSANDS_COMMA.sub(r"\1\2\3", s)
        if stripped == s:
            return s
        s = stripped


def _as_integer(s: str) -> str | None:
    """``s`` as an integer string when it is a decimal number within 1e-7 of an integer."""
    s = _strip_thousands_commas(s)
    if not _DECIMAL.fullmatch(s):
        return None
    value = Decimal(s)
    nearest = value.to_integral_value()
    return str(int(nearest)) if abs(value - nearest) <= Decimal("1e-7") else None


def plain_normalize(answer: str) -> str | None:
    r"""The PRM800K answer normalisation, as the reference grader's sympy comparison applies it.

    Drops ``$``, ``%``, unit words, ``^\circ``; "or"/"and" -> ","; "million" -> "*10^6"; LaTeX to
    plain text (``\frac{1}{2}`` -> ``1/2``); "7 3/4" -> "7+3/4"; no spaces or braces; lower case;
    integral numbers as integers ("1,000.0" -> "1000"). None when the LaTeX cannot be read.
    """
    enclosed = _ENCLOSING_TEXT.fullmatch(answer)
    if enclosed:
        answer = enclosed.group(1)
    s = answer.replace("\\%", "%").replace("\\$", "$").replace("$", "").replace("%", "")
    s = s.replace(" or ", " , ").replace(" and ", " , ")
    s = s.replace("million", "*10^6").replace("billion", "*10^9").replace("trillion", "*10^12")
    s = _PLAIN_UNITS.sub("", s)
    s = re.sub(r"\^ *\\circ", "", s)
    if len(s) > 0 and s[0] == "{" and s[-1] == "}":
        s = s[1:-1]
    s = re.sub(r",\\! *", "", s)
    s = _as_integer(s.strip()) or s
    if "\\" in s:
        try:
            s = _LatexToPlain(s).convert()
        except ValueError:
            return None
    s = re.sub(r"- *", "-", s)
    s = re.sub(r"([0-9]) +([0-9])", r"\1+\2", s)
    s = s.replace(" ", "").replace("{", "").replace("}", "").lower()
    return _as_integer(s) or s
