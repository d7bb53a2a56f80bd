"""The grader: extraction, equivalences, the real benchmark golds, adversarial input, the TRL reward."""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path

import pytest

from grpo_lambda.grading import workers
from grpo_lambda.grading import (
    accuracy_reward,
    extract_boxed,
    gold_forms,
    grade,
    grade_details,
    grade_many,
    grade_many_details,
    hendrycks_normalize,
    make_accuracy_reward,
)

BENCHMARKS_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "benchmarks"
BENCHMARKS = ("aime24", "amc", "math500", "minerva", "olympiadbench")
# Wall-time bound of the tests that run the time limit: it catches a hang, not slowness (a busy
# 2-core machine can stretch any step); benchmarks/bench_grader.py measures the speed.
HANG_GUARD = 10.0


@pytest.fixture(scope="module")
def benchmark_rows() -> list[tuple[str, dict]]:
    """(benchmark, row) for every problem of the five benchmarks, answers as in the source files."""
    if not BENCHMARKS_DIR.is_dir():
        pytest.skip(f"real benchmark files not found at {BENCHMARKS_DIR}")
    rows = []
    for name in BENCHMARKS:
        with open(BENCHMARKS_DIR / f"{name}.jsonl", encoding="utf-8") as handle:
            rows += [(name, json.loads(line)) for line in handle if line.strip()]
    return rows


def boxed(answer: str) -> str:
    return f"Step by step ... so the answer is \\boxed{{{answer}}}"


def fresh_worker_ready(tag: str) -> None:
    """Make sure an idle worker is started and ready, so a timing measures the comparison alone
    (a distinct answer each time: symbolic verdicts are cached)."""
    assert grade(boxed(f"y+{tag}"), "z", timeout=30) is False


# --------------------------------------------------------------------------------------------------
# Extraction
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    (r"so \boxed{\frac{1}{2}} done", r"\frac{1}{2}"),
    (r"\boxed{1} then \boxed{2}", "2"),
    (r"\boxed{\{1, 2\}}", r"\{1, 2\}"),
    (r"\fbox{7}", "7"),
    (r"\boxed{1} and finally \fbox{3}", "3"),
    (r"\boxed{\boxed{4}}", "4"),
    (r"\boxed{}", ""),
    ("no box at all", None),
    (r"\boxed{\frac{1}{2}", None),  # braces never close
    (r"\boxed 5", None),  # no braces: not an answer, as in the reference grader
])
def test_extract_boxed(text, expected):
    assert extract_boxed(text) == expected


def test_extract_boxed_rejects_non_text():
    with pytest.raises(TypeError, match="completion"):
        extract_boxed(b"\\boxed{1}")


# --------------------------------------------------------------------------------------------------
# Gold answers
# --------------------------------------------------------------------------------------------------


def test_gold_forms():
    assert gold_forms(27.0) == ["27"]
    assert gold_forms(0.5) == ["0.5"]
    assert gold_forms(-3) == ["-3"]
    assert gold_forms(" 9.6\n") == ["9.6"]
    assert gold_forms(["$\\frac{1}{2 n+2}$", "9.6\n"]) == ["\\frac{1}{2 n+2}", "9.6"]
    assert gold_forms("$8$,$4$") == ["$8$,$4$"]  # several $ pairs: not one enclosing pair
    assert gold_forms("The answer is \\boxed{12}") == ["12"]


@pytest.mark.parametrize("gold, error", [
    (None, TypeError), (True, TypeError), ({"a": 1}, TypeError), ([None], TypeError),
    ("", ValueError), (["  ", "$$"], ValueError), (float("nan"), ValueError),
])
def test_gold_forms_rejects_bad_gold(gold, error):
    with pytest.raises(error, match="gold|value"):
        gold_forms(gold)


# --------------------------------------------------------------------------------------------------
# Equivalences (as the reference grader judges them)
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("answer, gold, expected", [
    (r"\frac{1}{2}", "0.5", True),
    ("0.5", r"\frac{1}{2}", True),
    ("1/2", "0.5", True),
    (r"\dfrac{1}{2}", r"\frac12", True),
    (r"\tfrac{3}{4}", r"\frac{3}{4}", True),
    ("x=3", "3", True),
    ("x = 3", "3", True),
    (r"10^\circ", "10", True),
    (r"10^{\circ}", "10", True),
    ("27", 27.0, True),
    ("27.0", 27.0, True),
    ("27.00", "27", True),
    (r"\$27", "27", True),
    (r"50\%", "50", True),
    ("1,000", "1000", True),
    (r"5 \text{ cm}", "5", True),
    (r"\text{Evelyn}", "Evelyn", True),
    (r"\left( 3, \frac{\pi}{2} \right)", r"(3,\frac{\pi}{2})", True),
    ("9.60", ["9.6\n"], True),  # sympy: 9.6 - 9.60 = 0
    (r"2\sqrt{2}", r"\sqrt{8}", True),  # math-verify
    (r"\frac{\sqrt{3}}{2}", r"\frac{1}{2}\sqrt{3}", True),
    (r"\frac{2}{4}", r"\frac{1}{2}", True),  # math-verify accepts unreduced fractions
    (r"\{1,2\}", r"\{2,1\}", True),  # sets
    ("7", ["$7$", "seven"], True),  # any accepted form
    (r"\frac{1}{3}", "0.5", False),
    ("4", "3", False),
    ("x=4", "3", False),
    ("3.5", "3", False),
    ("-3", "3", False),
    ("0.3333", r"\frac13", False),  # math-verify rounds to 6 decimals only
    ("(3, 1)", "(1, 3)", False),
    ("[1,3)", "(1,3)", False),
    (r"\pi", "3.14", False),
    ("", "3", False),
    # Kept from the reference grader: single-letter "unit words" (t, a, ...) are deleted before the
    # comparison, so these two count as equal. Reported scores were computed this way.
    ("x+t", "x+a", True),
])
def test_equivalences(answer, gold, expected):
    assert grade(boxed(answer), gold) is expected


NEAR_THREE = ["3.004", "3.0001", "2.999", "-3.0001"]


@pytest.mark.parametrize("gold", ["3", 3, 3.0, "3.0"], ids=repr)
def test_an_integer_gold_wants_that_integer_not_a_number_near_it(gold):
    """3, 3.0 and 3.00 are the answer 3; 3.004, 3.0001 and 2.999 are not, whatever form the gold takes
    (no rounding tolerance in the string, sympy or math-verify comparisons), nor is -3.0001."""
    for answer in ("3", "3.0", "3.00", r"x = 3.0"):
        assert grade(boxed(answer), gold) is True, answer
    for answer in NEAR_THREE:
        assert grade(boxed(answer), gold) is False, answer
    assert grade_many([boxed(a) for a in ["3.0", *NEAR_THREE]], [gold] * 5) == [True] + [False] * 4


def test_hendrycks_normalisation():
    assert hendrycks_normalize(r"\left( 3, \dfrac{\pi}{2} \right)") == r"(3,\frac{\pi}{2})"
    assert hendrycks_normalize(r"\text{ 5 miles}") == "5"
    assert hendrycks_normalize(r"x = \frac12") == r"\frac{1}{2}"
    assert hendrycks_normalize(r"\sqrt3") == r"\sqrt{3}"
    assert hendrycks_normalize("3/4") == r"\frac{3}{4}"
    assert hendrycks_normalize(r"90^\circ") == "90"


def test_no_box_is_wrong_and_unformatted():
    assert grade_details("The answer is 5.", "5") == {"extracted": None, "formatted": False, "correct": False}
    detail = grade_details(boxed("6"), "5")
    assert detail == {"extracted": "6", "formatted": True, "correct": False}


def test_synthetic_integers_stay_in_the_calling_process(monkeypatch):
    """Integer answers, right or wrong, are decided by the string comparison alone."""

    def no_worker():
        raise AssertionError("an integer comparison reached a worker process")

    monkeypatch.setattr(workers._POOL, "acquire", no_worker)
    rng = random.Random(0)
    golds = [str(rng.randint(-10**6, 10**6)) for _ in range(500)]
    right = [boxed(gold) for gold in golds]
    wrong = [boxed(str(int(gold) + rng.choice([-7, -1, 1, 10]))) for gold in golds]
    start = time.perf_counter()
    assert all(grade(text, gold) for text, gold in zip(right, golds))
    assert not any(grade(text, gold) for text, gold in zip(wrong, golds))
    assert time.perf_counter() - start < HANG_GUARD  # 1,000 gradings: bench_grader.py times them
    assert grade(boxed("-42"), "-42") and not grade(boxed("42"), "-42")
    assert grade_many([boxed("-42"), boxed("41"), boxed("41")], ["-42", 40.0, 41.0]) == [True, False, True]


# --------------------------------------------------------------------------------------------------
# The real benchmark golds
# --------------------------------------------------------------------------------------------------

# Gold answers that are not graded correct when written back as their own first form, with the
# reason. None today; the test allows at most 1% of problems here.
KNOWN_SELF_MISMATCHES: dict[str, str] = {}

# Shifted pairs the grader accepts although the golds differ, with the reason (the reference grader
# accepts them as well). At most 1% of the pairs checked.
KNOWN_FALSE_POSITIVES = {
    "olympiadbench-186": "gold '$8$,$4$': math-verify reads the first $...$ only, so '8' matches",
}


def test_every_benchmark_gold_grades_correct(benchmark_rows):
    assert len(benchmark_rows) == 1560
    completions = [boxed(gold_forms(row["answer"])[0]) for _, row in benchmark_rows]
    golds = [row["answer"] for _, row in benchmark_rows]
    serial = [grade(text, gold) for text, gold in zip(completions, golds)]
    assert grade_many(completions, golds) == serial
    failures = {row["id"] for (_, row), correct in zip(benchmark_rows, serial) if not correct}
    assert failures <= set(KNOWN_SELF_MISMATCHES), sorted(failures - set(KNOWN_SELF_MISMATCHES))
    assert len(KNOWN_SELF_MISMATCHES) <= 0.01 * len(benchmark_rows)


def _genuinely_equal(gold_a, gold_b) -> bool:
    """Whether two golds share an answer (same Hendrycks-normalised form, e.g. '5' and 'x=5')."""
    return bool({hendrycks_normalize(form) for form in gold_forms(gold_a)}
                & {hendrycks_normalize(form) for form in gold_forms(gold_b)})


def test_other_problems_golds_grade_wrong(benchmark_rows):
    """Each gold answer against the next problem's gold in the same benchmark. Every pair of AIME and
    AMC and one pair in three of the others: most of these go to sympy and math-verify, whose LaTeX
    parser takes ~50 ms a comparison, and the full 1,560 would take a minute on two cores."""
    pairs = []
    for index, (name, row) in enumerate(benchmark_rows[:-1]):
        next_name, next_row = benchmark_rows[index + 1]
        if next_name != name or (name not in ("aime24", "amc") and index % 3):
            continue
        if not _genuinely_equal(row["answer"], next_row["answer"]):
            pairs.append((row, next_row))
    assert len(pairs) > 500
    completions = [boxed(gold_forms(row["answer"])[0]) for row, _ in pairs]
    verdicts = grade_many(completions, [other["answer"] for _, other in pairs])
    accepted = {row["id"] for (row, _), correct in zip(pairs, verdicts) if correct}
    assert accepted <= set(KNOWN_FALSE_POSITIVES), sorted(accepted - set(KNOWN_FALSE_POSITIVES))
    assert len(accepted) <= 0.01 * len(pairs)


# --------------------------------------------------------------------------------------------------
# Adversarial input and time limits
# --------------------------------------------------------------------------------------------------

_rng = random.Random(1)
_JUNK = "".join(chr(_rng.randrange(0x110000)) for _ in range(3000))

ADVERSARIAL = {
    "deep braces": "{" * 5000 + "1" + "}" * 5000,
    "deep fractions": "\\frac{" * 80 + "1" + "}{2}" * 80,
    "deep parentheses": "(" * 140 + "1" + ")" * 140,
    "sqrt chain": "\\sqrt" * 300 + "2",
    "10,000 digits": "9" * 10_000,
    "500 digits": "9" * 500,
    "power tower": "9^{9^{9^{9}}}",
    "huge power": "10^{10^{10}}",
    "factorial": "100000!",
    "binary junk": _JUNK,
    "short junk": _JUNK[:150],
    "control characters": "\x00\x01\x02\x7f",
    "lone surrogate": "\ud800",
    "long sum": "+".join(["x^{2}"] * 60),
    "wide matrix": "\\begin{pmatrix}" + "&".join(["1"] * 50) + "\\end{pmatrix}",
}


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_adversarial_answers_are_wrong_within_the_limit_in_a_thread(name):
    timeout = 0.5
    fresh_worker_ready(name)
    outcome = {}

    def run():
        start = time.perf_counter()
        outcome["correct"] = grade(boxed(ADVERSARIAL[name]), "5", timeout=timeout)
        outcome["seconds"] = time.perf_counter() - start

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    assert not thread.is_alive(), "grading hung"
    assert outcome["correct"] is False
    assert outcome["seconds"] < HANG_GUARD  # the limit cut it (bench_grader.py --limits times it)


def test_slow_comparison_is_cut_in_the_main_thread_and_the_grader_recovers():
    fresh_worker_ready("main")
    start = time.perf_counter()
    assert grade(boxed("7^{7^{7^{7}}}"), "5", timeout=0.3) is False
    assert time.perf_counter() - start < HANG_GUARD  # uncut, sympy would not finish
    # A replacement worker takes over: math-verify still works afterwards.
    # (a generous limit: the new worker's first comparison imports sympy, slow on a busy machine)
    assert grade(boxed(r"3\sqrt{2}"), r"\sqrt{18}", timeout=30) is True


def test_unclosed_and_huge_completions():
    assert grade("{" * 1_000_000 + r"\boxed{5", "5") is False
    start = time.perf_counter()
    assert grade("x" * 5_000_000 + boxed("5"), "5") is True
    assert time.perf_counter() - start < HANG_GUARD


def test_grade_many_on_adversarial_input():
    texts = [boxed(answer) for answer in ADVERSARIAL.values()] + [boxed("5")]
    details = grade_many_details(texts, ["5"] * len(texts), processes=2, timeout=0.5)
    assert [detail["correct"] for detail in details] == [False] * len(ADVERSARIAL) + [True]
    assert all(detail["formatted"] for detail in details)


def test_math_verify_works_from_threads():
    """math-verify's own timeouts use SIGALRM and fail outside the main thread; here they run in
    worker processes, so threads get the same verdicts as the main thread."""
    cases = [(r"2\sqrt{2}", r"\sqrt{8}", True), (r"\frac{\pi}{4}", "45^\\circ", False),
             (r"\sqrt{2}+1", r"1+\sqrt{2}", True), (r"\frac{7}{3}", r"2\frac{1}{3}", True),
             (r"e^{2}", r"e^{3}", False), ("(1, 2)", "(1,2)", True)]
    results = {}

    def run(index, answer, gold):
        results[index] = grade(boxed(answer), gold)

    threads = [threading.Thread(target=run, args=(index, answer, gold))
               for index, (answer, gold, _) in enumerate(cases)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert [results[index] for index in range(len(cases))] == [expected for _, _, expected in cases]


def test_close_workers_then_grade_again():
    workers.close_workers()
    assert grade(boxed(r"4\sqrt{2}"), r"\sqrt{32}") is True


# --------------------------------------------------------------------------------------------------
# Arguments
# --------------------------------------------------------------------------------------------------


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="timeout"):
        grade(boxed("1"), "1", timeout=0)
    with pytest.raises(ValueError, match="processes"):
        grade_many([boxed("1")], ["1"], processes=0)
    with pytest.raises(ValueError, match="length"):
        grade_many([boxed("1")], ["1", "2"])
    with pytest.raises(TypeError, match="completion"):
        grade(None, "1")


# --------------------------------------------------------------------------------------------------
# The TRL reward function
# --------------------------------------------------------------------------------------------------


def test_accuracy_reward_with_plain_completions_and_trainer_kwargs():
    completions = [boxed("5"), boxed("6"), "no box", boxed(r"\frac{1}{2}")]
    answers = ["5", "5", "5", ["0.5"]]
    rewards_out = accuracy_reward(prompts=["p"] * 4, completions=completions, completion_ids=[[1]] * 4,
                                  answer=answers, id=["a", "b", "c", "d"], trainer_state=None,
                                  log_extra=lambda *args: None, log_metric=lambda *args: None)
    assert rewards_out == [1.0, 0.0, 0.0, 1.0]
    assert all(isinstance(value, float) for value in rewards_out)


def test_accuracy_reward_with_conversational_completions():
    completions = [
        [{"role": "assistant", "content": boxed("12")}],
        [{"role": "assistant", "content": [{"type": "text", "text": boxed("13")}]}],
        [{"role": "assistant", "content": "thinking"}, {"role": "tool", "content": boxed("12")},
         {"role": "assistant", "content": "no box here"}],
    ]
    assert accuracy_reward(completions, answer=[12.0, "13", "12"]) == [1.0, 1.0, 0.0]


def test_make_accuracy_reward_settings():
    reward = make_accuracy_reward(timeout=0.5, processes=1)
    assert reward.__name__ == "evaluation_reward"  # the name TRL logs the reward under: its rl.rewards name
    assert reward([boxed("x^2")], answer=["x^{2}"]) == [1.0]
    with pytest.raises(ValueError, match="timeout"):
        make_accuracy_reward(timeout=-1)
    with pytest.raises(TypeError, match="completions"):
        reward([42], answer=["42"])


def test_the_boxed_reward_is_the_graders_formatted_verdict():
    from grpo_lambda.grading import boxed_reward, grade_details

    completions = ["so \\boxed{3}", "no box at all", "\\fbox{2} then", [{"role": "assistant", "content": "\\boxed{x}"}],
                   "\\boxed{unclosed"]
    expected = [float(grade_details(text if isinstance(text, str) else text[0]["content"], "1")["formatted"])
                for text in completions]
    assert boxed_reward(completions) == expected == [1.0, 0.0, 1.0, 1.0, 0.0]


# A boxed number may end with a period, as model output often does (the reference grader agrees).


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


# --- grade_many keeps each verdict in its row ------------------------------------------------------

# (answer, gold, correct): symbolic (sympy / math-verify) right and wrong answers, interleaved with
# answers the string comparison decides.
GRADED = [
    (r"3\sqrt{2}", r"\sqrt{18}", True),
    (r"\frac{\pi}{4}", "45^\\circ", False),
    ("12", "12", True),
    (r"\frac{7}{3}", r"2\frac{1}{3}", True),
    (r"e^{2}", r"e^{3}", False),
    ("13", "12", False),
    (r"\sqrt{2}+1", r"1+\sqrt{2}", True),
    (r"2\sqrt{3}", r"\sqrt{11}", False),
    (r"\frac{1}{4}", "0.25", True),
    (r"x^{2}+2x+1", r"(x+1)^{3}", False),
]


def test_grade_many_in_parallel_keeps_each_verdict_in_its_row():
    completions = [f"so the answer is \\boxed{{{answer}}}" for answer, _, _ in GRADED]
    golds = [gold for _, gold, _ in GRADED]
    truth = [correct for _, _, correct in GRADED]
    parallel = grade_many(completions, golds, processes=2, timeout=30)  # first: no cached verdicts
    assert parallel == truth
    assert parallel == [grade(text, gold, timeout=30) for text, gold in zip(completions, golds)]
    reordered = grade_many(completions[::-1], golds[::-1], processes=2, timeout=30)
    assert reordered == truth[::-1]
