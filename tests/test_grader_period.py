"""A boxed number may end with a period, as model output often does (the reference grader agrees)."""

import pytest

from grpo_lambda.grading import grade


@pytest.mark.parametrize("completion, gold", [("\\boxed{204.}", "204"), ("$\\boxed{204.}$", 204.0),
                                              ("\\boxed{-3.}", "-3"), ("\\boxed{1,000.}", "1000"),
                                              ("\\boxed{27.}", ["27", "27.0"]),
                                              ("\\boxed{2.5.}", "2.5"), ("\\boxed{x=5.}", "x=5")])
def test_a_trailing_period_in_a_boxed_number_is_accepted(completion, gold):
    assert grade(completion, gold)


@pytest.mark.parametrize("completion, gold", [("\\boxed{205.}", "204"), ("\\boxed{.}", "0"),
                                              ("\\boxed{204..}", "204"), ("\\boxed{2.6.}", "2.5")])
def test_a_period_does_not_make_a_wrong_answer_right(completion, gold):
    assert not grade(completion, gold)
