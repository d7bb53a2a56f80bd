"""One source row as a normalised row ``{"id", "problem", "answer"[, "solution"]}``: its answer by the answer
kind, its problem (a chat's first user message, an Open-Reasoner-Zero pair's human turn) and its id; and an SFT
set's row as a conversation ``[{"role", "content"}]``. No file is read here: grpo_lambda.data.registry reads the
sources and hands each row over."""

from __future__ import annotations

import numbers
import re

# The answer normalisers: 'text' (a string kept as it is), 'gsm8k' (the number after '####', thousands
# commas dropped), 'number' (a number such as 27.0, or its text, written '27') and 'list' (accepted forms,
# each stripped of an enclosing '$...$').
ANSWER_KINDS = ("text", "gsm8k", "number", "list")
# What a row is made of; problem and answer are required, solution and id read where the source has them.
FIELDS = ("problem", "answer", "solution", "id")
_THOUSANDS = re.compile(r"-?[0-9]{1,3}(,[0-9]{3})+(\.[0-9]+)?")


# --------------------------------------------------------------------------------------------------
# Answers
# --------------------------------------------------------------------------------------------------


def _number_text(value: numbers.Real) -> str | None:
    value = float(value) if not isinstance(value, numbers.Integral) else int(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return None
        return str(int(value)) if value.is_integer() else repr(value)
    return str(value)


def _numeric_text(text: str) -> str:
    """A number written as text (a CSV cell, '27.0') as 'number' writes it; other text unchanged."""
    for parse in (int, float):
        try:
            return _number_text(parse(text)) or text
        except ValueError:
            continue
    return text


def _answer_text(value, kind: str) -> str | None:
    """One answer as a non-empty string, or None when it is unusable."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, numbers.Real):
        return _number_text(value)
    if not isinstance(value, str):
        return None
    text = value.strip()
    if kind == "gsm8k":
        if "####" in text:
            text = text.rsplit("####", 1)[1].strip()
        if _THOUSANDS.fullmatch(text):
            text = text.replace(",", "")
    if kind == "number" and text:
        text = _numeric_text(text)
    if kind == "list" and text.count("$") == 2 and text[0] == "$" and text[-1] == "$":
        text = text[1:-1].strip()
    return text or None


def normalize_answer(value, kind: str) -> str | list[str] | None:
    """The normalised answer of one source row, or None when it has no usable answer.

    ``list`` answers stay lists (a string becomes a list of one); a list given to another kind is
    kept as a list of accepted forms too.
    """
    if kind not in ANSWER_KINDS:
        raise ValueError(f"kind must be one of {ANSWER_KINDS}, got {kind!r}")
    if isinstance(value, (list, tuple)):
        forms = [form for form in (_answer_text(item, kind) for item in value) if form is not None]
        return forms or None
    text = _answer_text(value, kind)
    if text is None:
        return None
    return [text] if kind == "list" else text


# --------------------------------------------------------------------------------------------------
# Rows
# --------------------------------------------------------------------------------------------------


def _first_user_message(messages) -> str | None:
    if not isinstance(messages, list):
        return None
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "user":
            return message.get("content")
    return None


def _orz_pair_to_row(pair: list) -> dict:
    """An Open-Reasoner-Zero record ``[{"from": "human", "value": problem},
    {"from": "assistant", "ground_truth": {"value": answer}}]`` as a row with problem and answer."""
    row = {}
    for turn in pair:
        if not isinstance(turn, dict):
            continue
        if turn.get("from") == "human":
            row["problem"] = turn.get("value")
        elif turn.get("from") == "assistant":
            truth = turn.get("ground_truth")
            row["answer"] = truth.get("value") if isinstance(truth, dict) else truth
    return row


# How a normalised row (prepare's output) is read: a local copy of a registry dataset may be one.
_NORMALISED = {"problem": "problem", "answer": "answer", "id": "id"}


def normalize_row(raw, spec: dict, index: int) -> dict | None:
    """A source row as ``{"id", "problem", "answer"[, "solution"]}``; None when it has no problem or no
    usable answer. The columns are the spec's ``fields``; a problem that is a chat (a list of messages)
    is its first user message. ``id`` and, outside the registry, ``solution`` are read by their own
    name unless mapped; a row without an id is numbered. A local copy of a registry dataset may hold
    normalised rows (``problem`` and ``answer``): those are read as such.
    """
    if isinstance(raw, list):
        raw = _orz_pair_to_row(raw)
    if not isinstance(raw, dict):
        return None
    registry = spec.get("registry")
    fields = _NORMALISED if registry and "problem" in raw and "answer" in raw else spec["fields"]
    problem = raw.get(fields["problem"])
    if isinstance(problem, list):
        problem = _first_user_message(problem)
    answer = normalize_answer(raw.get(fields["answer"]), spec["answer_kind"])
    if not isinstance(problem, str) or not problem.strip() or answer is None:
        return None
    row_id = raw.get(fields.get("id", "id"))
    if row_id is None and fields is _NORMALISED:  # a raw row that has problem and answer columns (MATH-500)
        row_id = raw.get(spec["fields"].get("id", "id"))
    row = {"id": str(row_id) if row_id is not None else f"{spec['name']}-{index}",
           "problem": problem.strip(), "answer": answer}
    solution_field = fields.get("solution", None if registry else "solution")
    solution = raw.get(solution_field) if solution_field else None
    if isinstance(solution, str) and solution.strip():
        row["solution"] = solution
    return row


# --------------------------------------------------------------------------------------------------
# SFT conversations
# --------------------------------------------------------------------------------------------------

SHAREGPT_ROLES = {"system": "system", "human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant"}


def conversation_messages(raw) -> list[dict] | None:
    """A source row's conversation as ``[{"role", "content"}]``; None unless it holds a user turn and an
    assistant turn with text. ``messages`` is read as it is (what TRL's SFTTrainer reads); a row without
    it is read from ShareGPT's ``system`` and ``conversations`` [{from, value}]."""
    if not isinstance(raw, dict):
        return None
    if isinstance(raw.get("messages"), list):
        turns = [(turn.get("role"), turn.get("content")) for turn in raw["messages"] if isinstance(turn, dict)]
    elif isinstance(raw.get("conversations"), list):
        turns = [("system", raw["system"])] if isinstance(raw.get("system"), str) and raw["system"].strip() else []
        turns += [(SHAREGPT_ROLES.get(turn.get("from")), turn.get("value"))
                  for turn in raw["conversations"] if isinstance(turn, dict)]
    else:
        return None
    if any(role not in ("system", "user", "assistant") or not isinstance(text, str) for role, text in turns):
        return None
    roles = [role for role, text in turns if text.strip()]
    if "user" not in roles or "assistant" not in roles:
        return None
    return [{"role": role, "content": text} for role, text in turns]
