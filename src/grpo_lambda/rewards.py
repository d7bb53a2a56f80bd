r"""Answer extraction and grading: the evaluation metric and the RL reward.

A completion is graded by the content of its last ``\boxed{...}`` (no box: wrong and
"unformatted"), as in the grader of the Dr. GRPO evaluation code (understand-r1-zero) that the paper
uses. An extracted answer ``a`` is correct for a gold form ``g`` when

    H(a) == H(g)    or    P(a) == P(g)    or    sympy: P(a) - P(g) == 0    or    math-verify(g, a)

where ``H`` is the Hendrycks MATH normalisation (``hendrycks_normalize``) and ``P`` the PRM800K one
(``plain_normalize``); a list gold is correct when any of its forms is. The string comparisons run
in the calling process and cost microseconds; two different integers are rejected there too. Only
what remains goes to sympy and math-verify, which run in a separate worker process with a hard time
limit: a worker that overruns is killed and replaced, so the limit holds in threads and in
subprocesses alike (math-verify's own timeouts use SIGALRM, which works only in a main thread).

Adversarial answers (over ``MAX_ANSWER_CHARS`` characters, or a number of more than ``MAX_DIGITS``
digits before the symbolic stage) are graded wrong without reaching sympy.

Where this grader differs from the reference: it also reads ``\fbox{...}``; it takes the last
``\boxed{`` even when a bare ``\boxed`` follows it; the PRM800K normalisation turns LaTeX into text
with a small converter of its own (the reference uses pylatexenc); one time limit covers sympy and
math-verify together for each gold form (the reference limits math-verify alone, wall clock, 1 s).

Importing this module is cheap (standard library only): sympy and math-verify load in the workers.
"""

from __future__ import annotations

import atexit
import functools
import logging
import numbers
import os
import re
import signal
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from multiprocessing.connection import Connection

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 1.0
"""Wall-clock seconds one symbolic comparison (sympy, then math-verify) may take before it counts as
wrong: the worker gives up at 90% of it and is killed at 100%."""
MAX_ANSWER_CHARS = 1000
"""Longer extracted answers are wrong outright (no normalisation)."""
MAX_SYMBOLIC_CHARS = 300
"""Longer extracted answers are compared as strings only, never by sympy or math-verify."""
MAX_DIGITS = 100
"""Answers holding a longer run of digits are compared as strings only."""
WORKER_START_TIMEOUT = 120.0
"""Seconds a new worker may take to import sympy and math-verify."""

# --------------------------------------------------------------------------------------------------
# Extraction
# --------------------------------------------------------------------------------------------------

_BOX_OPENERS = ("\\boxed{", "\\fbox{")
_BRACE = re.compile(r"[{}]")


def extract_boxed(text: str) -> str | None:
    r"""The content of the last ``\boxed{...}`` (or ``\fbox{...}``), braces matched; None if there is
    none or its braces never close.

    Braces are counted naively (``\{`` counts too), as the MATH grader does; ``\boxed 5`` without
    braces is not an answer, as in the reference grader.
    """
    if not isinstance(text, str):
        raise TypeError(f"completion must be a str, got {type(text).__name__}")
    starts = [(text.rfind(opener), opener) for opener in _BOX_OPENERS]
    start, opener = max(starts)
    if start < 0:
        return None
    content_start = start + len(opener)
    depth = 1
    for brace in _BRACE.finditer(text, content_start):
        depth += 1 if brace.group() == "{" else -1
        if depth == 0:
            return text[content_start:brace.start()]
    return None


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


# --------------------------------------------------------------------------------------------------
# Hendrycks MATH normalisation (as the reference grader's ``mathd`` comparison)
# --------------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------------
# PRM800K normalisation (the reference grader's sympy comparison works on this form)
# --------------------------------------------------------------------------------------------------

_LATEX_MACRO = re.compile(r"\\([A-Za-z]+|.?)", re.DOTALL)
_LATEX_MAX_DEPTH = 50
_LATEX_SYMBOLS = {
    "pi": "pi", "infty": "inf", "cdot": "*", "times": "*", "div": "/", "cup": "U", "pm": "+-",
    "le": "<=", "leq": "<=", "ge": ">=", "geq": ">=", "ne": "!=", "neq": "!=", "lt": "<", "gt": ">",
    "%": "%", "$": "$", "{": "{", "}": "}", "_": "_", "#": "#", "&": "&",
}
_LATEX_DROPPED = {"left", "right", "displaystyle", "quad", "qquad", ",", ";", ":", "!", " ", "",
                  "\\", "limits", "nolimits", "big", "Big", "bigg", "Bigg", "circ"}
_LATEX_CONTENT_ONLY = {"text", "textbf", "textit", "textrm", "mathrm", "mathbf", "mathit", "mathsf",
                       "mbox", "hbox", "operatorname", "boxed", "fbox", "overline", "mathbb", "bm",
                       "underline", "emph"}
_SIMPLE_TOKEN = re.compile(r"[A-Za-z0-9.]+")


class _LatexToPlain:
    r"""Turns LaTeX math into plain text sympy can read: ``\frac{a+1}{2}`` -> ``(a+1)/2``,
    ``\sqrt{2}`` -> ``sqrt(2)``, groups to their content, ``\pi`` -> ``pi``, other macros to their name.

    Nesting deeper than ``_LATEX_MAX_DEPTH`` raises ValueError (so recursion stays bounded).
    """

    def __init__(self, text: str):
        self.text, self.pos = text, 0

    def convert(self) -> str:
        return self._sequence(0, in_group=False)

    def _sequence(self, depth: int, in_group: bool) -> str:
        if depth > _LATEX_MAX_DEPTH:
            raise ValueError("LaTeX nested too deeply")
        out = []
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if char == "}":
                self.pos += 1
                if in_group:
                    break
            elif char == "{":
                self.pos += 1
                out.append(self._sequence(depth + 1, in_group=True))
            elif char == "\\":
                out.append(self._macro(depth + 1))
            else:
                out.append(char)
                self.pos += 1
        return "".join(out)

    def _argument(self, depth: int) -> str:
        while self.pos < len(self.text) and self.text[self.pos] == " ":
            self.pos += 1
        if self.pos >= len(self.text):
            return ""
        char = self.text[self.pos]
        if char == "{":
            self.pos += 1
            return self._sequence(depth + 1, in_group=True)
        if char == "\\":
            return self._macro(depth + 1)
        self.pos += 1
        return char

    def _optional_argument(self, depth: int) -> str | None:
        if self.text.startswith("[", self.pos):
            end = self.text.find("]", self.pos)
            if end > 0:
                inner = _LatexToPlain(self.text[self.pos + 1:end])._sequence(depth + 1, in_group=False)
                self.pos = end + 1
                return inner
        return None

    def _macro(self, depth: int) -> str:
        if depth > _LATEX_MAX_DEPTH:
            raise ValueError("LaTeX nested too deeply")
        match = _LATEX_MACRO.match(self.text, self.pos)
        self.pos = match.end()
        name = match.group(1)
        if name in ("frac", "dfrac", "tfrac"):
            numerator, denominator = self._argument(depth), self._argument(depth)
            return f"{_parenthesised(numerator)}/{_parenthesised(denominator)}"
        if name == "sqrt":
            index = self._optional_argument(depth)
            body = self._argument(depth)
            return f"sqrt({body})" if index is None else f"({body})^(1/({index}))"
        if name in _LATEX_CONTENT_ONLY:
            return self._argument(depth)
        if name in _LATEX_DROPPED:
            return ""
        return _LATEX_SYMBOLS.get(name, name)


def _parenthesised(text: str) -> str:
    return text if _SIMPLE_TOKEN.fullmatch(text) else f"({text})"


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


# --------------------------------------------------------------------------------------------------
# The fast path: string comparisons in the calling process
# --------------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------------
# The slow path: sympy and math-verify, in worker processes with a hard time limit
# --------------------------------------------------------------------------------------------------

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


class _SoftTimeout(BaseException):
    """Raised in a worker when a comparison runs out of time (BaseException: library code that
    catches Exception must not swallow it)."""


def _raise_soft_timeout(signum, frame):
    raise _SoftTimeout


def _serve(request_fd: int, reply_fd: int) -> None:
    """Worker main loop: answer (answer, gold, seconds) requests with a bool until the parent goes."""
    import resource

    for name in ("math_verify", "latex2sympy2_extended"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    # A runaway expansion raises MemoryError here instead of exhausting the machine.
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (min(4 << 30, hard) if hard > 0 else 4 << 30, hard))
    signal.signal(signal.SIGALRM, _raise_soft_timeout)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's business; EOF ends the loop
    requests, replies = Connection(request_fd, writable=False), Connection(reply_fd, readable=False)
    _math_verify_equal("1", "1")  # import and warm up before declaring readiness
    replies.send("ready")
    while True:
        try:
            answer, gold, seconds = requests.recv()
        except (EOFError, OSError):
            return
        verdict = False
        try:
            try:
                signal.setitimer(signal.ITIMER_REAL, seconds)
                verdict = _sympy_or_math_verify_equal(answer, gold)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except (_SoftTimeout, Exception):
            verdict = False
        replies.send(bool(verdict))


# Loads this file by path, so a worker imports neither the package nor its dependencies.
_WORKER_BOOT = (
    "import importlib.util, sys\n"
    "spec = importlib.util.spec_from_file_location('_grpo_lambda_grader_worker', sys.argv[1])\n"
    "module = importlib.util.module_from_spec(spec)\n"
    "sys.modules[spec.name] = module\n"
    "spec.loader.exec_module(module)\n"
    "module._serve(int(sys.argv[2]), int(sys.argv[3]))\n"
)


class _Worker:
    """One grader process. A plain subprocess rather than multiprocessing: it can be started from a
    daemonic process and never re-imports the caller's ``__main__``."""

    def __init__(self):
        request_read, request_write = os.pipe()
        reply_read, reply_write = os.pipe()
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", _WORKER_BOOT, os.path.abspath(__file__), str(request_read), str(reply_write)],
                pass_fds=(request_read, reply_write), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        except BaseException:
            for fd in (request_read, request_write, reply_read, reply_write):
                os.close(fd)
            raise
        os.close(request_read)
        os.close(reply_write)
        self.requests = Connection(request_write, readable=False)
        self.replies = Connection(reply_read, writable=False)
        self.ready = False
        self.alive = True

    def _wait_until_ready(self) -> None:
        try:
            if self.replies.poll(WORKER_START_TIMEOUT) and self.replies.recv() == "ready":
                self.ready = True
                return
        except (EOFError, OSError):
            pass
        self.kill()
        raise RuntimeError("the grader worker process failed to start (its error, if any, is on stderr)")

    def compare(self, answer: str, gold: str, timeout: float) -> bool:
        """The worker's verdict, or False when it takes over ``timeout`` seconds (it is then killed)."""
        if not self.ready:
            self._wait_until_ready()
        try:
            # The worker stops itself a little early, which saves restarting it; the kill is the guarantee.
            self.requests.send((answer, gold, 0.9 * timeout))
            if self.replies.poll(timeout):
                return bool(self.replies.recv())
        except (EOFError, OSError):
            pass
        log.debug("grader worker overran %.2f s or died; replacing it", timeout)
        self.kill()
        return False

    def kill(self) -> None:
        self.alive = False
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.requests.close()
        self.replies.close()


class _WorkerPool:
    """Idle workers shared by all threads; a killed worker is replaced at once so that its successor
    imports sympy while the caller goes on."""

    def __init__(self):
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []
        self._owned: list[_Worker] = []
        self._pid = os.getpid()

    def _forget_after_fork(self) -> None:
        # A forked child must not talk to its parent's workers; it starts its own.
        if os.getpid() != self._pid:
            self._idle, self._owned, self._pid = [], [], os.getpid()

    def _new_worker(self) -> _Worker:
        worker = _Worker()
        self._owned.append(worker)
        return worker

    def acquire(self) -> _Worker:
        with self._lock:
            self._forget_after_fork()
            return self._idle.pop() if self._idle else self._new_worker()

    def release(self, worker: _Worker) -> None:
        with self._lock:
            self._forget_after_fork()
            if worker not in self._owned:
                return
            if not worker.alive:
                self._owned.remove(worker)
                worker = self._new_worker()
            self._idle.append(worker)

    def close(self) -> None:
        """Stop every worker (they restart on demand)."""
        with self._lock:
            self._forget_after_fork()
            for worker in self._owned:
                worker.kill()
            self._idle, self._owned = [], []


_POOL = _WorkerPool()
atexit.register(_POOL.close)


def close_workers() -> None:
    """Stop the grader's worker processes now (they are also stopped at exit)."""
    _POOL.close()


@functools.lru_cache(maxsize=8192)
def _symbolic_equal(answer: str, gold: str, timeout: float) -> bool:
    # Cached: the completions of one RL group often repeat the same wrong answer.
    worker = _POOL.acquire()
    try:
        return worker.compare(answer, gold, timeout)
    finally:
        _POOL.release(worker)


def _symbolic_match(answer: str, golds: list[str], timeout: float) -> bool:
    return any(_symbolic_equal(answer, gold, timeout) for gold in golds)


# --------------------------------------------------------------------------------------------------
# Public grading API
# --------------------------------------------------------------------------------------------------


def allocated_cpus() -> int:
    """The CPUs this job was given: SLURM's per-task count, else the process's CPU affinity. On a
    cluster node ``os.cpu_count()`` counts the whole node, which other jobs share."""
    slurm = os.environ.get("SLURM_CPUS_PER_TASK", "")
    if slurm.isdigit() and int(slurm) > 0:
        return int(slurm)
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


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


# --------------------------------------------------------------------------------------------------
# TRL reward function
# --------------------------------------------------------------------------------------------------


def _completion_text(completion) -> str:
    """The text of a completion: a string, or (conversational datasets) a list of chat messages whose
    assistant contents are joined; a content may itself be a list of ``{"type": "text"}`` parts."""
    if isinstance(completion, str):
        return completion
    messages = [completion] if isinstance(completion, dict) else completion
    if not isinstance(messages, (list, tuple)):
        raise TypeError(f"completions must hold strings or lists of chat messages, got {type(completion).__name__}")
    texts = []
    for message in messages:
        if not isinstance(message, dict):
            raise TypeError(f"a chat message must be a dict, got {type(message).__name__}")
        if message.get("role", "assistant") != "assistant":
            continue
        content = message.get("content") or ""
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
        texts.append(str(content))
    return "\n".join(texts)


_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_MACRO_NAME = re.compile(r"\\[A-Za-z]+")
_WORD = re.compile(r"[A-Za-z]{2,}")


def is_single_answer(content: str) -> bool:
    r"""Whether boxed content reads as one answer: False when two numbers are separated by words or
    by blank space alone (``the answer 4 no 5``, ``4 or 5``, ``4 5``).

    Math between numbers is one answer: ``(1, 2)``, ``2\sqrt{3}``, ``\frac{1}{2}``, ``3 + 4i``,
    ``12 \text{ cm}``. LaTeX command names are not words; the words inside ``\text{...}`` are.
    """
    numbers_found = list(_NUMBER.finditer(content))
    for before, after in zip(numbers_found, numbers_found[1:]):
        gap = _MACRO_NAME.sub(" ", content[before.end():after.start()])
        if _WORD.search(gap) or not gap.strip():
            return False
    return True


def make_accuracy_reward(*, timeout: float = DEFAULT_TIMEOUT, processes: int | None = None,
                         strict: bool = False):
    """A TRL ``GRPOTrainer`` reward function: 1.0 for a correct boxed answer, else 0.0.

    The returned ``accuracy_reward(completions, answer, **kwargs)`` reads the gold from the
    dataset's ``answer`` column; completions may be strings or lists of chat messages. ``strict``
    gives 0.0 to a boxed answer that is not a single answer (``is_single_answer``): the evaluation
    grader accepts ``\\boxed{the answer 4 no 5}`` for gold 4, a route to reward hacking in RL.
    """
    timeout = _check_timeout(timeout)

    def accuracy_reward(completions, answer, **kwargs) -> list[float]:
        texts = [_completion_text(completion) for completion in completions]
        correct = grade_many(texts, answer, processes=processes, timeout=timeout)
        if strict:
            correct = [ok and is_single_answer(extract_boxed(text) or "") for ok, text in zip(correct, texts)]
        return [float(ok) for ok in correct]

    accuracy_reward.__name__ = "strict_accuracy_reward" if strict else "accuracy_reward"
    return accuracy_reward


accuracy_reward = make_accuracy_reward()
strict_accuracy_reward = make_accuracy_reward(strict=True)
# rl.reward -> the RL reward function: the evaluation grader (parity with the reported accuracy) or
# the strict one.
REWARDS = {"evaluation": accuracy_reward, "strict": strict_accuracy_reward}
