r"""Answer extraction and grading: the evaluation metric and the RL reward.

A completion is graded by the content of its last ``\boxed{...}`` (no box: wrong and
"unformatted"), as in the grader of the Dr. GRPO evaluation code (understand-r1-zero) that the paper
uses. An extracted answer ``a`` is correct for a gold form ``g`` when

    H(a) == H(g)    or    P(a) == P(g)    or    sympy: P(a) - P(g) == 0    or    math-verify(g, a)

where ``H`` is the Hendrycks MATH normalisation (``hendrycks_normalize``) and ``P`` the PRM800K one
(``plain_normalize``); a list gold is correct when any of its forms is. The string comparisons run
in the calling process and cost microseconds; two different integers are rejected there too. Only
what remains goes to sympy and math-verify, which run in a separate worker process with a hard time
limit: a worker that overruns is killed and replaced, so the limit holds in threads and in
subprocesses alike (math-verify's own timeouts use SIGALRM, which works only in a main thread).

Adversarial answers (over ``MAX_ANSWER_CHARS`` characters, or a number of more than ``MAX_DIGITS``
digits before the symbolic stage) are graded wrong without reaching sympy.

Where this grader differs from the reference: it also reads ``\fbox{...}``; it takes the last
``\boxed{`` even when a bare ``\boxed`` follows it; the PRM800K normalisation turns LaTeX into text
with a small converter of its own (the reference uses pylatexenc); one time limit covers sympy and
math-verify together for each gold form (the reference limits math-verify alone, wall clock, 1 s).

Importing this package is cheap (standard library only): sympy and math-verify load in the workers.

One module per step, in the order a completion meets them:

``extract``       the last ``\boxed{...}`` of a completion (``extract_boxed``); a gold answer's forms
                  (``gold_forms``, ``format_number``)
``hendrycks``     the Hendrycks MATH normalisation (``hendrycks_normalize``)
``prm800k``       the PRM800K normalisation (``plain_normalize``)
``latex``         the LaTeX-to-plain-text converter the PRM800K normalisation uses
``string_match``  the string comparisons in the calling process (a final period after a number is
                  dropped first), and the answer size limits
``symbolic``      the sympy and math-verify comparisons (run only inside a worker)
``workers``       the worker processes and their pool, with the hard time limit (``close_workers``,
                  ``allocated_cpus``)
``grade``         ``grade``, ``grade_details``, ``grade_many``, ``grade_many_details``
``reward``        the TRL reward functions (``accuracy_reward``, ``strict_accuracy_reward``, ``REWARDS``,
                  ``boxed_reward``)
"""

from grpo_lambda.grading.extract import extract_boxed, format_number, gold_forms
from grpo_lambda.grading.grade import grade, grade_details, grade_many, grade_many_details
from grpo_lambda.grading.hendrycks import hendrycks_normalize
from grpo_lambda.grading.prm800k import plain_normalize
from grpo_lambda.grading.reward import (REWARDS, accuracy_reward, boxed_reward, is_single_answer,
                                        make_accuracy_reward, strict_accuracy_reward)
from grpo_lambda.grading.string_match import MAX_ANSWER_CHARS, MAX_DIGITS, MAX_SYMBOLIC_CHARS
from grpo_lambda.grading.workers import DEFAULT_TIMEOUT, WORKER_START_TIMEOUT, allocated_cpus, close_workers

__all__ = ["DEFAULT_TIMEOUT", "MAX_ANSWER_CHARS", "MAX_DIGITS", "MAX_SYMBOLIC_CHARS", "REWARDS",
           "WORKER_START_TIMEOUT", "accuracy_reward", "allocated_cpus", "boxed_reward", "close_workers",
           "extract_boxed", "format_number", "gold_forms", "grade", "grade_details", "grade_many",
           "grade_many_details", "hendrycks_normalize", "is_single_answer", "make_accuracy_reward", "plain_normalize", "strict_accuracy_reward"]
