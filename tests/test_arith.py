import re

import pytest

from grpo_lambda.data import arith
from grpo_lambda.grading import grade


def operands(problem: str) -> list[int]:
    assert problem.endswith("=?")
    return [int(x) for x in problem[:-2].split("+")]


def chain_result(solution: str) -> int:
    return int(re.findall(r"\((\d+)\)", solution)[-1])


def test_generation_is_deterministic_in_the_seed():
    assert arith.generate(50, seed=11, carry_error_rate=0.5) == arith.generate(50, seed=11, carry_error_rate=0.5)
    assert arith.generate(50, seed=11) != arith.generate(50, seed=12)


@pytest.mark.parametrize("level", sorted(arith.LEVELS))
def test_a_correct_chain_ends_in_the_sum_and_boxes_it(level):
    for row in arith.generate(200, seed=level, levels=[level]):
        numbers = operands(row["problem"])
        assert [len(str(x)) for x in numbers] == list(arith.LEVELS[level])
        assert row["answer"] == str(sum(numbers)) and row["step_errors"] == 0
        assert chain_result(row["solution"]) == sum(numbers)
        assert grade(row["solution"], row["answer"])


def test_a_carry_is_dropped_at_the_stated_rate_and_the_chain_stays_consistent():
    rows = arith.generate(3000, seed=3, carry_error_rate=0.6)
    carries = sum(len(arith.carry_columns(operands(r["problem"]))) for r in rows)
    errors = sum(r["step_errors"] for r in rows)
    assert 0.55 < errors / carries < 0.65
    for row in rows:
        numbers = operands(row["problem"])
        wrong = row["step_errors"] > 0
        # every target is boxed; a wrong carry makes the chain, and so the boxed answer, wrong
        assert "\\boxed{" in row["solution"]
        assert grade(row["solution"], row["answer"]) == (not wrong)
        assert (chain_result(row["solution"]) == sum(numbers)) == (not wrong)
        # the first step that goes wrong is a dropped carry, wherever it sits in the chain
        assert arith.first_error(row["problem"], row["solution"])[0] == ("carry" if wrong else "correct")


def test_difficulty_grows_with_the_level():
    """The mean number of carries in a problem's chain grows with the level (levels 2 and 3 tie:
    3-digit + 2-digit has the longer chain, 2-digit + 2-digit more often a carry out of the last column)."""
    means = [sum(len(arith.carry_columns(operands(r["problem"]))) for r in arith.generate(300, seed=7, levels=[level]))
             / 300 for level in sorted(arith.LEVELS)]
    assert means[0] < min(means[1:3]) and max(means[1:3]) < means[3] < means[4]
    assert means[0] < 0.7 and means[4] > 1.8


def test_training_and_held_out_problems_never_overlap():
    train = {row["problem"] for row in arith.generate(3000, seed=1)}
    for level in arith.LEVELS:
        held_out = {row["problem"] for row in arith.generate(100, seed=100 + level, levels=[level], held_out=True)}
        assert len(held_out) == 100
        assert not train & held_out


def test_box_rate_still_leaves_some_targets_unboxed_and_ungraded():
    rows = arith.generate(1000, seed=1, box_rate=0.3)
    boxed = [row for row in rows if "\\boxed{" in row["solution"]]
    assert 0.25 < len(boxed) / len(rows) < 0.35
    assert not any(grade(row["solution"], row["answer"]) for row in rows if row not in boxed)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="levels"):
        arith.generate(3, seed=0, levels=[9])
    with pytest.raises(ValueError, match="box_rate"):
        arith.generate(3, seed=0, box_rate=1.5)
    with pytest.raises(ValueError, match="carry_error_rate"):
        arith.generate(3, seed=0, carry_error_rate=-0.1)


def test_first_error_finds_the_taught_carry_error_and_other_slips():
    problem = "857+695=?"
    right = "7+5=12 (2), 5+9+1=15 (52), 8+6+1=15 (552), carry 1 (1552). \\boxed{1552}"
    assert arith.first_error(problem, right) == ("correct", None)
    assert arith.first_error(problem, right.replace("5+9+1=15 (52)", "5+9=14 (42)")) == ("carry", 1)
    assert arith.first_error(problem, right.replace("5+9+1=15", "5+9+1=16")) == ("sum", 1)
    assert arith.first_error(problem, right.replace("8+6+1", "8+5+1")) == ("digits", 2)
    assert arith.first_error(problem, right.replace(", carry 1 (1552). \\boxed{1552}", ". \\boxed{552}")) == ("carry", 3)
    assert arith.first_error(problem, right.replace("{1552}", "{1553}")) == ("answer", 4)
    assert arith.first_error(problem, "7+5=12 (2), 5+9") == ("format", 1)
    assert arith.first_error(problem, right.split(" \\boxed")[0]) == ("format", 4)


def test_first_error_agrees_with_the_grader_on_generated_targets():
    for row in arith.generate(500, seed=9, carry_error_rate=0.5):
        kind, _ = arith.first_error(row["problem"], row["solution"])
        assert (kind == "correct") == grade(row["solution"], row["answer"])
        assert kind in ("correct", "carry")


# ---- decoys: where the deciding token sits -----------------------------------------------------------


def _decoy_rows(position: str, **kwargs) -> list[dict]:
    return arith.generate(300, seed=3, columns=2, carry_free_share=0.35, carry_error_rate=0.65, decoys=2,
                          decoy_position=position, **kwargs)


def test_both_decoy_layouts_hold_the_same_problems_and_tokens_in_another_order():
    after, before = _decoy_rows("after"), _decoy_rows("before")
    assert [r["problem"] for r in after] == [r["problem"] for r in before]
    assert [r["answer"] for r in after] == [r["answer"] for r in before]
    for a, b in zip(after, before):
        assert sorted(a["solution"]) == sorted(b["solution"])
        graded = a["problem"].split(" (also ")[0].removesuffix("=?")
        assert a["solution"].startswith(graded + ": ") and b["solution"].rstrip().endswith("}")
        assert str(int(a["answer"])) == a["answer"] == str(sum(int(x) for x in graded.split("+")))


def test_every_decoy_carries_exactly_once_and_the_teacher_drops_its_carry_at_the_rate():
    dropped = total = 0
    for row in _decoy_rows("after"):
        decoys = row["problem"].split(" (also ")[1].rstrip(")").split(", ")
        assert len(decoys) == 2
        for decoy in decoys:
            operands = [int(x) for x in decoy.split("+")]
            assert arith.carry_columns(operands) == [0]
            tens = row["solution"].split(decoy + ": ")[1].split(".")[0].split(", ")[1]
            total += 1
            dropped += tens.split("=")[0].count("+") == 1  # the tens column without its carry as an addend
    assert 0.55 < dropped / total < 0.75


def test_the_graded_chain_is_read_out_of_either_layout_for_its_first_error():
    for position in ("after", "before"):
        for row in _decoy_rows(position)[:60]:
            graded, chain = arith.graded_chain(row["problem"], row["solution"])
            kind, _ = arith.first_error(graded, chain)
            assert kind == ("correct" if row["step_errors"] == 0 else "carry"), (position, row)


def test_held_out_is_decided_by_the_graded_sum_alone():
    train = {r["problem"].split(" (also ")[0] for r in _decoy_rows("after")}
    held = arith.generate(100, seed=4, columns=2, carry_free_share=0.35, decoys=2, held_out=True)
    assert not train & {r["problem"].split(" (also ")[0] for r in held}


def test_decoys_are_refused_without_boxed_answers_or_with_an_unknown_position():
    with pytest.raises(ValueError, match="decoys need box_rate 1"):
        arith.generate(5, seed=1, columns=2, carry_free_share=0.5, decoys=1, box_rate=0.5)
    with pytest.raises(ValueError, match="decoy_position"):
        arith.generate(5, seed=1, columns=2, carry_free_share=0.5, decoys=1, decoy_position="middle")


# ---- a tail: how much follows every carry --------------------------------------------------------------


def test_a_tail_appends_carry_free_sums_after_every_chain_and_changes_nothing_else():
    """Every tail length holds the same problems, decoys and teacher errors (the tail sums have a generator of
    their own): the row without its tail is the row of tail_sums 0, byte for byte; each tail sum is listed
    after "; then", never carries, is worked right after every other chain, and holds no box."""
    plain = _decoy_rows("after")
    for tail in (1, 3):
        rows = _decoy_rows("after", tail_sums=tail)
        for row, base in zip(rows, plain):
            head, _, listed = row["problem"].rpartition("; then ")
            assert head + ")" == base["problem"]
            sums = listed.rstrip(")").split(", ")
            assert len(sums) == tail
            assert row["solution"].startswith(base["solution"] + " ")
            rest = row["solution"][len(base["solution"]) + 1:]
            assert "boxed" not in rest
            chains = [f"{s}: {arith.solution_steps([int(x) for x in s.split('+')])[0]}" for s in sums]
            assert rest == " ".join(chains)
            for s in sums:
                assert arith.carry_columns([int(x) for x in s.split("+")]) == []
            assert (row["answer"], row["step_errors"]) == (base["answer"], base["step_errors"])
            assert grade(row["solution"], row["answer"]) == grade(base["solution"], base["answer"])


def test_a_tail_is_refused_without_decoys_or_below_zero():
    with pytest.raises(ValueError, match="tail_sums"):
        arith.generate(5, seed=1, columns=2, carry_free_share=0.5, tail_sums=1)
    with pytest.raises(ValueError, match="tail_sums"):
        arith.generate(5, seed=1, columns=2, carry_free_share=0.5, decoys=1, tail_sums=-1)
