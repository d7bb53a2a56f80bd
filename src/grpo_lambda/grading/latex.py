r"""A small LaTeX-to-plain-text converter (``\frac{a}{b}`` -> ``(a)/b``) for the PRM800K normalisation."""

from __future__ import annotations

import re

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
