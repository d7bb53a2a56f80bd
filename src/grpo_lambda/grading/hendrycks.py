r"""The Hendrycks MATH answer normalisation (``hendrycks_normalize``), as the reference grader's string
comparison applies it."""

from __future__ import annotations

import re

# Unit words the reference grader deletes (mostly from MathQA). They are regular expressions, matched
# as whole words; some are odd ("o", "t", "a . m") but removing them is what the reported scores did.
_UNIT_WORDS = (
    "east", "degree", "mph", "kmph", "ft", "m sqaure", " m east", "sq m", "deg", "mile", "q .",
    "monkey", "prime", "ratio", "profit of rs", "rd", "o", "gm", "p . m", "lb", "tile", "per", "dm",
    "lt", "gain", "ab", "way", "west", "a .", "b .", "c .", "d .", "e .", "f .", "g .", "h .", "t",
    "a", "h", "no change", "men", "soldier", "pie", "bc", "excess", "st", "inches", "noon",
    "percent", "by", "gal", "kmh", "c", "acre", "rise", "a . m", "th", "π r 2", "sq", "mark", "l",
    "toy", "coin", "sq . m", "gallon", "° f", "profit", "minw", "yr", "women", "feet", "am", "pm",
    "hr", "cu cm", "square", "v â € ™", "are", "rupee", "rounds", "cubic", "cc", "mtr", "s", "ohm",
    "number", "kmph", "day", "hour", "minute", "min", "second", "man", "woman", "sec", "cube", "mt",
    "sq inch", "mp", "∏ cm ³", "hectare", "more", "sec", "unit", "cu . m", "cm 2", "rs .", "rs",
    "kg", "g", "month", "km", "m", "cm", "mm", "apple", "liter", "loss", "yard", "pure", "year",
    "increase", "decrease", "d", "less", "Surface", "litre", "pi sq m", "s .", "metre", "meter",
    "inch",
)
_UNIT_PATTERNS = _UNIT_WORDS + tuple(word + "s" for word in _UNIT_WORDS)
_UNIT_WORD = re.compile(r"(^|\W)(?:" + "|".join(_UNIT_PATTERNS) + r")($|\W)")
_ENCLOSING_TEXT = re.compile(r"\\text\{(.+)\}")
_TRAILING_TEXT = re.compile(r"\\text\{.*?\}$")
_ARRAY_BEGIN = re.compile(r"\\begin\{array\}\{.*?\}")


class _Unnormalisable(ValueError):
    """The normalisation gave up; the answer is compared as it was."""


def _remove_unit_words(s: str) -> str:
    # Two passes of every unit word, a pass that would leave nothing being skipped. One combined
    # pattern does this in microseconds; the word-by-word loop is kept for the rare emptied string.
    for _ in range(2):
        stripped = _UNIT_WORD.sub(r"\1\2", s)
        if not stripped:
            return _remove_unit_words_one_by_one(s)
        s = stripped
    return s


def _remove_unit_words_one_by_one(s: str) -> str:
    for _ in range(2):
        for word in _UNIT_PATTERNS:
            stripped = re.sub(r"(^|\W)" + word + r"($|\W)", r"\1\2", s)
            if stripped:
                s = stripped
    return s


def _fix_sqrt(s: str) -> str:
    r"""``\sqrt3`` -> ``\sqrt{3}``."""
    head, *tails = s.split("\\sqrt")
    for tail in tails:
        if not tail:
            raise _Unnormalisable("\\sqrt without argument")
        head += "\\sqrt" + (tail if tail[0] == "{" else "{" + tail[0] + "}" + tail[1:])
    return head


def _fix_fracs(s: str) -> str:
    r"""``\frac12`` -> ``\frac{1}{2}``, ``\frac1{72}`` -> ``\frac{1}{72}``."""
    head, *tails = s.split("\\frac")
    for tail in tails:
        if not tail:
            raise _Unnormalisable("\\frac without argument")
        if tail[0] == "{":
            head += "\\frac" + tail
        elif len(tail) < 2:
            return s
        elif tail[1] == "{":
            head += "\\frac{" + tail[0] + "}" + tail[1:]
        else:
            head += "\\frac{" + tail[0] + "}{" + tail[1] + "}" + tail[2:]
    return head


def _fix_a_slash_b(s: str) -> str:
    r"""``3/4`` -> ``\frac{3}{4}`` for integers written plainly."""
    parts = s.split("/")
    if len(parts) == 2 and all(re.fullmatch(r"-?[0-9]{1,100}", part) for part in parts):
        a, b = int(parts[0]), int(parts[1])
        if f"{a}/{b}" == s:
            return "\\frac{" + str(a) + "}{" + str(b) + "}"
    return s


def _strip_math_string(s: str) -> str:
    s = s.replace("\n", "").replace("\\!", "").replace("\\\\", "\\")
    s = _ARRAY_BEGIN.sub(r"\\begin{pmatrix}", s).replace("\\end{array}", "\\end{pmatrix}")
    s = s.replace("bmatrix", "pmatrix").replace("tfrac", "frac").replace("dfrac", "frac")
    s = s.replace("\\neq", "\\ne").replace("\\leq", "\\le").replace("\\geq", "\\ge")
    s = s.replace("\\left", "").replace("\\right", "")
    without_unit = _TRAILING_TEXT.sub("", s).strip()  # "5 \text{ miles}" -> "5"
    if without_unit:
        s = without_unit
    s = _remove_unit_words(s)
    s = s.replace("^{\\circ}", "").replace("^\\circ", "").replace("\\$", "")
    if "\\text{ " in s:
        parts = s.split("\\text{ ")
        if len(parts) != 2:
            raise _Unnormalisable("several \\text{ } units")
        s = parts[0]
    s = s.replace("\\%", "")
    s = s.replace(" .", " 0.").replace("{.", "{0.")
    if not s:
        return s
    if s[0] == ".":
        s = "0" + s
    lhs_rhs = s.split("=")
    if len(lhs_rhs) == 2 and len(lhs_rhs[0]) <= 2:  # "x = 3" -> "3"
        s = lhs_rhs[1]
    s = _fix_fracs(_fix_sqrt(s).replace(" ", ""))
    if s == "0.5":
        s = "\\frac{1}{2}"
    return _fix_a_slash_b(s)


def hendrycks_normalize(answer: str) -> str:
    r"""The MATH benchmark's answer normalisation (Hendrycks et al.), as the reference grader applies it.

    Drops an enclosing ``\text{}``, ``\left``/``\right``, ``\!``, trailing ``\text{...}`` units and
    unit words, ``^\circ``, ``\$``, ``\%`` and spaces; ``\dfrac``/``\tfrac`` -> ``\frac``; ``x = 3`` ->
    ``3``; ``\frac12`` -> ``\frac{1}{2}``; ``0.5`` and ``1/2`` -> ``\frac{1}{2}``. When it gives up
    (malformed input) the answer is returned stripped, as the reference does.
    """
    answer = answer.strip()
    enclosed = _ENCLOSING_TEXT.fullmatch(answer)
    if enclosed:
        answer = enclosed.group(1).strip()
    try:
        return _strip_math_string(answer)
    except _Unnormalisable:
        return answer
