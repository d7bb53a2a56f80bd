"""The TRL reward functions: the evaluation grader as an RL reward, its strict variant, and the format
reward the pipeline logs at weight 0."""

from __future__ import annotations

import re

from .extract import extract_boxed
from .grade import _check_timeout, grade_many
from .workers import DEFAULT_TIMEOUT

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


def format_reward(completions, **kwargs) -> list[float]:
    """1.0 when a completion holds a final ``\\boxed{}`` answer the grader can read (its ``formatted``),
    else 0.0. Trained at weight 0: TRL logs it as ``rewards/format_reward/mean``, the format reward the
    paper monitors (§4.2, weight 0 in Table 2), without changing the training signal."""
    return [float(extract_boxed(_completion_text(completion)) is not None) for completion in completions]


accuracy_reward = make_accuracy_reward()
strict_accuracy_reward = make_accuracy_reward(strict=True)
# rl.reward -> the RL reward function: the evaluation grader (parity with the reported accuracy) or
# the strict one.
REWARDS = {"evaluation": accuracy_reward, "strict": strict_accuracy_reward}
