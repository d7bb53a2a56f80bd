"""rl.reward: strict gives no reward to boxed free text; the evaluation grader is unchanged."""

import pytest

from grpo_lambda.grading import REWARDS, accuracy_reward, grade, is_single_answer, strict_accuracy_reward


@pytest.mark.parametrize("content", ["4", "-4.5", "(1, 2)", r"2\sqrt{3}", r"\frac{1}{2}", "3 + 4i", r"12 \text{ cm}",
                                     "x^2+1", r"\{1, 2, 3\}", "[0, 1)", r"\text{(A)}", "10^{5}", "1,000"])
def test_a_single_answer(content):
    assert is_single_answer(content)


@pytest.mark.parametrize("content", ["the answer 4 no 5", "4 or 5", "4 5", r"4\text{ or }5", "x = 4 and x = 5",
                                     r"\text{the answer is 4, not 5}"])
def test_free_text_with_several_numbers(content):
    assert not is_single_answer(content)


def test_strict_rewards_only_a_single_correct_answer_and_evaluation_keeps_the_paper_grader():
    completions = [r"so \boxed{the answer 4 no 5}", r"\boxed{4}", r"\boxed{4 5}", r"\boxed{5}", "4"]
    golds = ["4"] * len(completions)
    assert grade(completions[0], "4")  # the paper's grader accepts it; evaluation keeps that for parity
    assert accuracy_reward(completions, answer=golds) == [1.0, 1.0, 0.0, 0.0, 0.0]
    assert strict_accuracy_reward(completions, answer=golds) == [0.0, 1.0, 0.0, 0.0, 0.0]
    assert REWARDS["evaluation"] is accuracy_reward and REWARDS["strict"] is strict_accuracy_reward
