"""pass@k and maj@k of one problem's sampled completions."""

from __future__ import annotations

import math


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of pass@k from ``n`` samples of which ``c`` are correct: the chance that
    ``k`` of them drawn without replacement hold a correct one, 1 - C(n-c, k) / C(n, k) (Chen et al.
    2021, "Evaluating Large Language Models Trained on Code", Eq. 1)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def majority_correct(answers: list, correct: list) -> float:
    """maj@k of one problem: the verdict of the most frequent extracted answer among its samples (ties
    go to the answer seen first; samples without an answer do not vote; 0 when none has one)."""
    counts: dict = {}
    for answer, verdict in zip(answers, correct):
        if answer is None or answer == "" or (isinstance(answer, float) and math.isnan(answer)):
            continue
        count, first_verdict = counts.get(answer, (0, verdict))
        counts[answer] = (count + 1, first_verdict)
    if not counts:
        return 0.0
    best = max(counts.values(), key=lambda entry: entry[0])  # max keeps the first of equal counts
    return float(best[1])
