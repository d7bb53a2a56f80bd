import re

import pytest

from grpo_lambda.data import arith
from grpo_lambda.rewards import grade


def operands(problem: str) -> list[int]:
    assert problem.endswith("=?")
    return [int(x) for x in problem[:-2].split("+")]


def test_generation_is_deterministic_in_the_seed():
    assert arith.generate(50, seed=11, box_rate=0.5) == arith.generate(50, seed=11, box_rate=0.5)
    assert arith.generate(50, seed=11) != arith.generate(50, seed=12)


@pytest.mark.parametrize("level", sorted(arith.LEVELS))
def test_answers_are_the_sums_and_the_chain_of_thought_ends_in_them(level):
    for row in arith.generate(200, seed=level, levels=[level]):
        numbers = operands(row["problem"])
        assert [len(str(x)) for x in numbers] == list(arith.LEVELS[level])
        assert row["answer"] == str(sum(numbers))
        last_partial = re.findall(r"\((\d+)\)", row["solution"])[-1]
        assert int(last_partial) == sum(numbers)


def test_box_rate_is_a_per_example_coin_and_the_grader_reads_only_boxed_answers():
    rows = arith.generate(2000, seed=1, box_rate=0.3)
    boxed = [row for row in rows if "\\boxed{" in row["solution"]]
    assert 0.25 < len(boxed) / len(rows) < 0.35
    for row in rows[:300]:
        assert grade(row["solution"], row["answer"]) == (row in boxed)
        wrong = str(int(row["answer"]) + 1)
        assert not grade(f"Answer: \\boxed{{{wrong}}}", row["answer"])


def test_training_and_held_out_problems_never_overlap():
    train = {row["problem"] for row in arith.generate(3000, seed=1)}
    for level in arith.LEVELS:
        held_out = {row["problem"] for row in arith.generate(100, seed=100 + level, levels=[level], held_out=True)}
        assert len(held_out) == 100
        assert not train & held_out


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="levels"):
        arith.generate(3, seed=0, levels=[9])
    with pytest.raises(ValueError, match="box_rate"):
        arith.generate(3, seed=0, box_rate=1.5)
