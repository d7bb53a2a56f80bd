"""The synthetic verifiable task ``arith``: column addition with a worked chain of thought.

A problem is a sum of two positive integers (the generator takes any number of operands). The worked
solution adds one column at a time, right to left, entering the carry as the last addend of the next
column, and keeps the digits found so far in parentheses, which a tiny character-level model learns::

    457+385=?
    7+5=12 (2), 5+8+1=14 (42), 4+3+1=8 (842). \\boxed{842}

Difficulty levels (the five held-out suites stand in for the five benchmarks) grow with the number
of columns, hence of carries, in the chain:

    level 1: 2-digit + 1-digit          level 4: 3-digit + 3-digit
    level 2: 2-digit + 2-digit          level 5: 4-digit + 4-digit
    level 3: 3-digit + 2-digit

Why RL has something to learn, in the reasoning rather than the format. The SFT targets come from a
sloppy teacher: each carry is written one less than it is (with two operands: dropped) with
probability ``carry_error_rate`` (default 0.0; the embedded default uses a rate above one half), and
the chain goes on consistently from the wrong carry to a wrong boxed answer. The error sits
mid-chain, one token, and every later token depends on it. Every target is boxed (``box_rate``
1.0), so the SFT model answers in the graded form. Trained on these targets, the SFT model's greedy
chain drops carries, so it solves about the problems whose chain never carries (from about half at
level 1 to about a tenth at level 5, less its own slips), while its samples at temperature 1 write
the carry part of the time. A group of samples for a problem with a carry then disagrees on
correctness, GRPO's advantages are non-zero on it, and the token that decides is the carry.

Horizons: a chain of any length (``columns``), at fixed difficulty. ``generate(columns=H,
carry_free_share=q)`` draws two H-digit operands column by column so that each column carries with
probability ``1 - q ** (1 / H)``: a share q of the problems never carry, whatever H, and the number of
carries a problem holds has about the same distribution at every H (mean ``-ln q`` carries). The SFT
model's greedy chain drops every carry (the teacher's ``carry_error_rate`` is above one half), so its
greedy accuracy stays near q at every horizon, and a group of samples disagrees on about the same
share of problems; what grows with H is only the length of the chain the deciding token sits in. The
teacher's ``carry_error_rate`` alone cannot hold the difficulty: the greedy chain follows the teacher's
majority, so the SFT model's greedy accuracy jumps from the carry-free share to nearly 1 as the rate
crosses one half, and the carry-free share of uniform digits falls as about 0.55 ** H.

Decoys: where a chain's deciding token sits (``decoys``, ``decoy_position``). A problem may come with
``decoys`` ungraded 2-column sums, each carrying once out of its units column, whose chains the worked
solution writes too, after the graded chain and its boxed answer (``decoy_position: after``) or before
it (``before``)::

    38+47=? (also 25+17, 66+28)
    38+47: 8+7=15 (5), 3+4+1=8 (85). \boxed{85} 25+17: 5+7=12 (2), 2+1+1=4 (42). 66+28: ...      after
    25+17: 5+7=12 (2), 2+1+1=4 (42). 66+28: ... 38+47: 8+7=15 (5), 3+4+1=8 (85). \boxed{85}      before

The teacher drops the decoys' carries as it drops the graded one's, so the SFT model's samples decide
every carry alike, and only the graded chain's decides the reward: a sequence-level method credits the
decoys' carries as much as the deciding one, and a method that weights token positions unequally
(GRPO-λ's trace, which at ratio 1 weights token c by Σ_{t ≥ c} W[t, c], most at the start) separates them
more or less than it, by where the deciding token sits. The same tokens in both layouts, in another order.

A tail: how much follows every carry (``tail_sums``). After the chains above, the solution may write
``tail_sums`` more 2-column sums that never carry (listed in the problem after ``; then``), chains with no
decision in them::

    38+47=? (also 25+17, 66+28; then 12+34)
    38+47: ... \boxed{85} 25+17: ... 66+28: ... 12+34: 2+4=6 (6), 1+3=4 (46).

A trace's weight of a token falls off only near the completion's end (at ratio 1, 1 − κ^(T−c) over 1 − κ),
so a longer tail brings the weights of every carry closer together: the deciding carry's weight relative to
the decoys' shrinks toward GRPO's 1, the dose of a dose-response control. The tail sums come from a
generator of their own, so every tail length holds the same problems, decoys and teacher errors.

Training and held-out problems never overlap: a problem belongs to the held-out side iff a stable
hash of its text is divisible by ``HELD_OUT_MODULUS``, whatever seed or level generated it.
"""

from __future__ import annotations

import random
import re
import zlib

LEVELS = {1: (2, 1), 2: (2, 2), 3: (3, 2), 4: (3, 3), 5: (4, 4)}
HELD_OUT_MODULUS = 5


def _random_operand(rng: random.Random, digits: int) -> int:
    return rng.randint(10 ** (digits - 1), 10**digits - 1)


def carry_rate(columns: int, carry_free_share: float) -> float:
    """The per-column carry probability at which a share ``carry_free_share`` of ``columns``-column
    problems never carries."""
    return 1.0 - carry_free_share ** (1.0 / columns)


def _horizon_operands(rng: random.Random, columns: int, rate: float) -> list[int]:
    """Two ``columns``-digit operands whose columns, right to left, each carry with probability ``rate``.

    Per column: draw whether it carries, then its top digit uniformly among those that leave a
    matching bottom digit, then the bottom digit uniformly among those. The leading digits are 1-9.
    """
    top, bottom, carry_in = [], [], 0
    for column in range(columns):
        low = 1 if column == columns - 1 else 0
        carries = rng.random() < rate
        if carries:  # a + b + carry_in >= 10 with b <= 9
            a = rng.choice([d for d in range(low, 10) if d + 9 + carry_in >= 10])
            b = rng.randint(max(low, 10 - a - carry_in), 9)
        else:  # a + b + carry_in <= 9 with b >= low
            a = rng.choice([d for d in range(low, 10) if d + low + carry_in <= 9])
            b = rng.randint(low, 9 - a - carry_in)
        top.append(a)
        bottom.append(b)
        carry_in = int(carries)
    as_number = lambda digits: int("".join(map(str, reversed(digits))))  # noqa: E731
    return [as_number(top), as_number(bottom)]


def solution_steps(operands: list[int], *, wrong_carries: frozenset[int] = frozenset()) -> tuple[str, int]:
    """The column-by-column chain of thought and the number it ends in.

    The carry leaving a column whose index is in ``wrong_carries`` is written (and used) one less.
    """
    columns = max(len(str(x)) for x in operands)
    carry, partial, steps = 0, "", []
    for column in range(columns):
        digits = [x // 10**column % 10 for x in operands if column < len(str(x))]
        addends = digits + ([carry] if carry else [])
        total = sum(addends)
        partial = str(total % 10) + partial
        carry = total // 10
        if carry and column in wrong_carries:
            carry -= 1
        steps.append(f"{'+'.join(map(str, addends))}={total} ({partial})")
    if carry:
        partial = f"{carry}{partial}"
        steps.append(f"carry {carry} ({partial})")
    return ", ".join(steps) + ".", int(partial)


def carry_columns(operands: list[int]) -> list[int]:
    """Indices of the columns (0 = units) of the correct chain that carry into the next."""
    columns = max(len(str(x)) for x in operands)
    carry, found = 0, []
    for column in range(columns):
        carry = (sum(x // 10**column % 10 for x in operands if column < len(str(x))) + carry) // 10
        if carry:
            found.append(column)
    return found


def make_problem(operands: list[int], *, boxed: bool = True,
                 wrong_carries: frozenset[int] = frozenset()) -> dict:
    steps, result = solution_steps(operands, wrong_carries=wrong_carries)
    final = f"\\boxed{{{result}}}" if boxed else f"Answer: {result}"
    return {
        "problem": "+".join(map(str, operands)) + "=?",
        "answer": str(sum(operands)),
        "solution": f"{steps} {final}",
    }


def is_held_out(problem: str) -> bool:
    """Whether ``problem`` belongs to the held-out side: by the graded sum alone (a problem's decoys, which
    the hash ignores, never move it across)."""
    return zlib.crc32(problem.split(" (also ")[0].encode()) % HELD_OUT_MODULUS == 0


DECOY_POSITIONS = ("after", "before")


def _decoy_operands(rng: random.Random) -> list[int]:
    """Two 2-digit operands whose units column carries and whose tens column, with the carry, does not:
    a decoy's chain holds exactly one carry decision."""
    a0 = rng.randint(1, 9)
    b0 = rng.randint(10 - a0, 9)
    a1 = rng.randint(1, 7)
    b1 = rng.randint(1, 8 - a1)
    return [10 * a1 + a0, 10 * b1 + b0]


def with_decoys(row: dict, decoys: list[list[int]], position: str, wrong: list[frozenset[int]]) -> dict:
    """``row`` (a problem of two operands, boxed) with ``decoys`` written into its problem and worked
    solution, ``position`` after or before the graded chain; ``wrong`` the decoys' dropped carries."""
    if position not in DECOY_POSITIONS:
        raise ValueError(f"decoy_position must be one of {DECOY_POSITIONS}, got {position!r}")
    graded = row["problem"].removesuffix("=?")
    chains = [f"{'+'.join(map(str, ops))}: {solution_steps(ops, wrong_carries=w)[0]}" for ops, w in zip(decoys, wrong)]
    own = f"{graded}: {row['solution']}"
    solution = " ".join([own, *chains] if position == "after" else [*chains, own])
    problem = f"{row['problem']} (also {', '.join('+'.join(map(str, ops)) for ops in decoys)})"
    return {**row, "problem": problem, "solution": solution}


def _tail_operands(rng: random.Random) -> list[int]:
    """Two 2-digit operands whose columns never carry: a chain with no carry decision."""
    a0, a1 = rng.randint(0, 9), rng.randint(1, 8)
    return [10 * a1 + a0, 10 * rng.randint(1, 9 - a1) + rng.randint(0, 9 - a0)]


def with_tail(row: dict, sums: list[list[int]]) -> dict:
    """``row`` (a problem with decoys) with the carry-free ``sums`` listed after ``; then`` in its problem and
    worked after every chain of its solution."""
    chains = [f"{'+'.join(map(str, ops))}: {solution_steps(ops)[0]}" for ops in sums]
    listed = ", ".join("+".join(map(str, ops)) for ops in sums)
    return {**row, "problem": f"{row['problem'].removesuffix(')')}; then {listed})",
            "solution": " ".join([row["solution"], *chains])}


def graded_chain(problem: str, completion: str) -> tuple[str, str]:
    """The graded sum and its own chain out of a problem with decoys and a completion of it (the text after
    ``<sum>:`` up to its boxed answer), for :func:`first_error`; the problem and completion as they are
    without decoys."""
    graded = problem.split(" (also ")[0]
    if graded == problem:
        return problem, completion
    head = graded.removesuffix("=?") + ":"
    start = completion.find(head)
    if start < 0:
        return graded, ""
    rest = completion[start + len(head):]
    boxed = re.search(r"\\boxed\{\d*\}", rest)
    return graded, rest[:boxed.end()] if boxed else rest


def generate(n: int, *, seed: int, levels: list[int] | None = None, held_out: bool = False,
             box_rate: float = 1.0, carry_error_rate: float = 0.0, prefix: str = "arith",
             columns: int | None = None, carry_free_share: float | None = None, decoys: int = 0,
             decoy_position: str = "after", tail_sums: int = 0) -> list[dict]:
    """``n`` distinct problems drawn uniformly over ``levels``, or at one horizon of ``columns``
    columns whose carry-free share is ``carry_free_share`` (see the module docstring); deterministic
    in ``seed``.

    Rows carry ``id``, ``problem``, ``answer`` (the correct sum, which the grader checks),
    ``solution`` (the SFT target: boxed with probability ``box_rate``, each carry written one less
    with probability ``carry_error_rate``), ``level`` (the level, or the number of columns),
    ``carries`` (how many columns of the correct chain carry) and ``step_errors`` (wrong carries in
    the target); with ``decoys``, each problem carries that many ungraded sums, worked ``decoy_position``
    its own chain (module docstring), their carries dropped at the same rate, and ``tail_sums`` carry-free
    sums after every chain (module docstring, "A tail").
    """
    if decoys and (box_rate != 1.0 or decoy_position not in DECOY_POSITIONS):
        raise ValueError(f"decoys need box_rate 1 and decoy_position in {DECOY_POSITIONS}")
    if not (isinstance(tail_sums, int) and tail_sums >= 0) or (tail_sums and not decoys):
        raise ValueError(f"tail_sums must be an integer >= 0, with decoys, got {tail_sums!r}")
    tail_rng = random.Random(f"{seed}-tail")
    if columns is not None:
        if levels is not None:
            raise ValueError("give levels or columns, not both")
        if not (isinstance(columns, int) and columns >= 1):
            raise ValueError(f"columns must be a positive integer, got {columns!r}")
        if carry_free_share is None or not 0.0 < carry_free_share <= 1.0:
            raise ValueError(f"carry_free_share must lie in (0, 1] with columns, got {carry_free_share!r}")
    elif carry_free_share is not None:
        raise ValueError("carry_free_share applies only with columns")
    levels = list(levels or LEVELS)
    unknown = [level for level in levels if level not in LEVELS]
    if unknown:
        raise ValueError(f"levels: unknown level(s) {unknown}; choose from {sorted(LEVELS)}")
    for name, rate in (("box_rate", box_rate), ("carry_error_rate", carry_error_rate)):
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"{name} must lie in [0, 1], got {rate}")
    rng = random.Random(seed)
    rate = carry_rate(columns, carry_free_share) if columns is not None else None
    rows, seen = [], set()
    attempts = 0
    while len(rows) < n:
        attempts += 1
        if attempts > 100 * n + 1000:
            where = f"{columns} columns" if columns is not None else f"levels {levels}"
            raise ValueError(f"cannot draw {n} distinct problems at {where}")
        if columns is not None:
            level, operands = columns, _horizon_operands(rng, columns, rate)
        else:
            level = rng.choice(levels)
            operands = [_random_operand(rng, digits) for digits in LEVELS[level]]
        boxed = rng.random() < box_rate
        carries = carry_columns(operands)
        wrong = frozenset(c for c in carries if rng.random() < carry_error_rate)
        row = make_problem(operands, boxed=boxed, wrong_carries=wrong)
        if decoys:
            extra = [_decoy_operands(rng) for _ in range(decoys)]
            extra_wrong = [frozenset(c for c in carry_columns(ops) if rng.random() < carry_error_rate) for ops in extra]
            row = with_decoys(row, extra, decoy_position, extra_wrong)
        if tail_sums:
            row = with_tail(row, [_tail_operands(tail_rng) for _ in range(tail_sums)])
        if row["problem"] in seen or is_held_out(row["problem"]) != held_out:
            continue
        seen.add(row["problem"])
        rows.append({"id": f"{prefix}-{len(rows)}", **row, "level": level, "carries": len(carries),
                     "step_errors": len(wrong)})
    return rows


STEP = re.compile(r"^(\d+(?:\+\d+)*)=(\d+) \((\d+)\)$")
CARRY_STEP = re.compile(r"^carry (\d+) \((\d+)\)$")
ERROR_KINDS = ("correct", "carry", "digits", "sum", "answer", "format")


def first_error(problem: str, completion: str) -> tuple[str, int | None]:
    """Where a worked solution of ``problem`` first goes wrong: (kind, step index) or ("correct", None).

    Kinds, checked step by step against the model's own chain so far: ``carry`` a carry entered one
    less than it is (the taught error), ``digits`` another wrong addend (a misread digit, a dropped or
    invented carry), ``sum`` a step total that is not the sum of its addends, or a wrong digit kept
    in parentheses; ``answer`` a sound chain whose boxed answer is not its result; ``format`` a
    chain that cannot be read.
    """
    operands = [int(x) for x in problem.removesuffix("=?").split("+")]
    text = completion.strip()
    boxed = re.search(r"\\boxed\{(\d+)\}", text)
    chain = text[:boxed.start()] if boxed else text
    steps = [s.strip() for s in chain.strip().rstrip(".").split(", ") if s.strip()]
    columns = max(len(str(x)) for x in operands)
    carry, partial = 0, ""
    for index, step in enumerate(steps):
        if index < columns:
            match = STEP.match(step)
            if not match:
                return "format", index
            addends = [int(a) for a in match.group(1).split("+")]
            digits = [x // 10**index % 10 for x in operands if index < len(str(x))]
            expected = digits + ([carry] if carry else [])
            if addends != expected:
                taught = carry >= 1 and addends == digits + ([carry - 1] if carry > 1 else [])
                return ("carry" if taught else "digits"), index
            total = int(match.group(2))
            if total != sum(addends) or match.group(3) != str(total % 10) + partial:
                return "sum", index
            partial, carry = match.group(3), total // 10
        else:
            match = CARRY_STEP.match(step)
            if not match or index > columns:
                return "format", index
            if int(match.group(1)) != carry:
                return ("carry" if int(match.group(1)) == carry - 1 else "digits"), index
            if match.group(2) != f"{carry}{partial}":
                return "sum", index
            partial, carry = match.group(2), 0
    if len(steps) < columns:
        return "format", len(steps)
    if carry:  # the last column's carry never written
        return ("carry" if carry == 1 and boxed else "format"), len(steps)
    if not boxed:
        return "format", len(steps)
    return ("correct", None) if boxed.group(1) == partial and int(partial) == sum(operands) else ("answer", len(steps))
