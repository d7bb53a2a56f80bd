r"""Answer extraction: the last ``\boxed{...}`` of a completion, and the accepted forms of a gold answer."""

from __future__ import annotations

import numbers
import re

# --------------------------------------------------------------------------------------------------
# Extraction
# --------------------------------------------------------------------------------------------------

_BOX_OPENERS = ("\\boxed{", "\\fbox{")
_BRACE = re.compile(r"[{}]")


def boxed_span(text: str) -> tuple[int, int] | None:
    r"""The character range [begin, end) of the last ``\boxed{...}`` (or ``\fbox{...}``), from its backslash
    through its matching brace; None if there is none or its braces never close.

    Braces are counted naively (``\{`` counts too), as the MATH grader does; ``\boxed 5`` without
    braces is not an answer, as in the reference grader.
    """
    if not isinstance(text, str):
        raise TypeError(f"completion must be a str, got {type(text).__name__}")
    starts = [(text.rfind(opener), opener) for opener in _BOX_OPENERS]
    start, opener = max(starts)
    if start < 0:
        return None
    depth = 1
    for brace in _BRACE.finditer(text, start + len(opener)):
        depth += 1 if brace.group() == "{" else -1
        if depth == 0:
            return start, brace.end()
    return None


def extract_boxed(text: str) -> str | None:
    r"""The content of the last ``\boxed{...}`` (or ``\fbox{...}``), braces matched; None if there is
    none or its braces never close (see `boxed_span`)."""
    span = boxed_span(text)
    if span is None:
        return None
    begin, end = span
    return text[text.index("{", begin) + 1:end - 1]


# --------------------------------------------------------------------------------------------------
# Gold answers
# --------------------------------------------------------------------------------------------------


def format_number(value: numbers.Real) -> str:
    """A number as an answer string: integral values without a decimal point (27.0 -> "27")."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"value must be a real number, got {type(value).__name__}")
    if isinstance(value, numbers.Integral):
        return str(int(value))
    value = float(value)
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"value must be finite, got {value}")
    return str(int(value)) if value.is_integer() else repr(value)


def gold_forms(gold) -> list[str]:
    r"""The accepted answer strings of a gold answer: a string, a number or a list of either.

    Each form is stripped of whitespace and of one enclosing ``$...$`` (OlympiadBench); a form holding
    ``\boxed{...}`` is replaced by the box's content, as the reference grader does.
    """
    if isinstance(gold, (list, tuple)):
        items = list(gold)
    elif isinstance(gold, (str, numbers.Real)) and not isinstance(gold, bool):
        items = [gold]
    else:
        raise TypeError(f"gold must be a str, a number or a list of them, got {type(gold).__name__}")
    forms = []
    for item in items:
        if isinstance(item, numbers.Real) and not isinstance(item, bool):
            form = format_number(item)
        elif isinstance(item, str):
            form = item.strip()
        else:
            raise TypeError(f"gold list items must be str or numbers, got {type(item).__name__}")
        if "\\boxed" in form:
            form = extract_boxed(form) or form
        if form.count("$") == 2 and form[0] == "$" and form[-1] == "$":
            form = form[1:-1].strip()
        if form:
            forms.append(form)
    if not forms:
        raise ValueError(f"gold has no non-empty answer: {gold!r}")
    return forms
