"""The synthetic verifiable task ``arith``: column addition with a short chain of thought.

A problem is a sum of two positive integers (the generator takes any number of operands). The worked solution adds one column at a
time, right to left, and keeps the partial result so far in parentheses, which a tiny character-level
model can learn in a minute::

    457+385=?
    7+5=12 (2), 5+8+1=14 (42), 4+3+1=8 (842). Answer: \\boxed{842}

Difficulty levels (the five held-out suites stand in for the five benchmarks) grow with the number
of columns to add:

    level 1: 2-digit + 1-digit          level 4: 3-digit + 3-digit
    level 2: 2-digit + 2-digit          level 5: 4-digit + 4-digit
    level 3: 3-digit + 2-digit

Why RL has something to learn: only a share ``box_rate`` of the SFT targets end in the graded
``\\boxed{}`` format, the others in a bare ``Answer: 842``, chosen at random per example. The SFT model
then boxes some of its samples and not others for the same problem, so the rewards within a group
disagree and GRPO's advantages are non-zero; greedy decoding after SFT mostly picks the bare form,
which the grader counts as wrong (unformatted). RL can close that gap. If the choice were a function
of the problem, all samples of a group would agree and nothing would be learned.

Training and held-out problems never overlap: a problem belongs to the held-out side iff a stable
hash of its text is divisible by ``HELD_OUT_MODULUS``, whatever seed or level generated it.
"""

from __future__ import annotations

import random
import zlib

LEVELS = {1: (2, 1), 2: (2, 2), 3: (3, 2), 4: (3, 3), 5: (4, 4)}
HELD_OUT_MODULUS = 5


def _random_operand(rng: random.Random, digits: int) -> int:
    return rng.randint(10 ** (digits - 1), 10**digits - 1)


def solution_steps(operands: list[int]) -> str:
    """The column-by-column chain of thought ending in the partial result that is the answer."""
    columns = max(len(str(x)) for x in operands)
    carry, partial, steps = 0, "", []
    for column in range(columns):
        digits = [x // 10**column % 10 for x in operands if column < len(str(x))]
        addends = digits + ([carry] if carry else [])
        total = sum(addends)
        partial = str(total % 10) + partial
        carry = total // 10
        steps.append(f"{'+'.join(map(str, addends))}={total} ({partial})")
    if carry:
        steps.append(f"carry {carry} ({carry}{partial})")
    return ", ".join(steps) + "."


def make_problem(operands: list[int], *, boxed: bool = True) -> dict:
    answer = str(sum(operands))
    final = f"\\boxed{{{answer}}}" if boxed else answer
    return {
        "problem": "+".join(map(str, operands)) + "=?",
        "answer": answer,
        "solution": f"{solution_steps(operands)} Answer: {final}",
    }


def is_held_out(problem: str) -> bool:
    return zlib.crc32(problem.encode()) % HELD_OUT_MODULUS == 0


def generate(n: int, *, seed: int, levels: list[int] | None = None, held_out: bool = False,
             box_rate: float = 1.0, prefix: str = "arith") -> list[dict]:
    """``n`` distinct problems drawn uniformly over ``levels``; deterministic in ``seed``.

    Rows carry ``id``, ``problem``, ``answer`` (the graded final answer), ``solution`` (the SFT target,
    boxed with probability ``box_rate``) and ``level``.
    """
    levels = list(levels or LEVELS)
    unknown = [level for level in levels if level not in LEVELS]
    if unknown:
        raise ValueError(f"levels: unknown level(s) {unknown}; choose from {sorted(LEVELS)}")
    if not 0.0 <= box_rate <= 1.0:
        raise ValueError(f"box_rate must lie in [0, 1], got {box_rate}")
    rng = random.Random(seed)
    rows, seen = [], set()
    attempts = 0
    while len(rows) < n:
        attempts += 1
        if attempts > 100 * n + 1000:
            raise ValueError(f"cannot draw {n} distinct problems at levels {levels}")
        level = rng.choice(levels)
        operands = [_random_operand(rng, digits) for digits in LEVELS[level]]
        boxed = rng.random() < box_rate
        row = make_problem(operands, boxed=boxed)
        if row["problem"] in seen or is_held_out(row["problem"]) != held_out:
            continue
        seen.add(row["problem"])
        rows.append({"id": f"{prefix}-{len(rows)}", **row, "level": level})
    return rows
