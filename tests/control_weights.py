"""The trace's weight of each carry decision of a decoy-task completion, from the loss's own gradient: what
the control studies (config/positive-control.yaml, config/dose-control.yaml) derive their predictions from."""

from __future__ import annotations

import numpy as np
import torch

from grpo_lambda.data import arith
from grpo_lambda.objectives import ObjectiveParams, policy_loss

TRACE = ObjectiveParams(objective="grpo_lambda", lam=0.99, style="recent", update="trace", form="relative",
                        advantage_clamp=-0.1)
GRPO = ObjectiveParams(objective="grpo", advantage_clamp=-0.1)
PROBLEMS = 80  # training problems the weights are averaged over


def token_weights(params: ObjectiveParams, length: int) -> np.ndarray:
    """w_c: minus the gradient of the loss of one completion of ``length`` tokens (advantage 1, on policy,
    dapo's normaliser) with respect to each token's log-probability, times the token count."""
    logps = torch.full((1, length), -0.5, dtype=torch.float64, requires_grad=True)
    loss, _ = policy_loss(logps, None, None, torch.ones(1, dtype=torch.float64), torch.ones(1, length), params)
    loss.backward()
    return (-logps.grad[0] * length).numpy()


def carry_positions(problem: str, solution: str) -> tuple[int, list[int]]:
    """Where the graded chain's carry into its tens column sits in the completion (its token: the tiny
    tokenizer is one token a character), and where each decoy's sits (a tail's carry-free sums have none)."""
    graded = problem.split(" (also ")[0].removesuffix("=?")
    decoys = problem.split(" (also ")[1].rstrip(")").split("; then ")[0].split(", ")

    def carry_of(operands: str) -> int:
        start = solution.index(operands + ": ") + len(operands) + 2
        tens = start + solution[start:].index(", ") + 2
        return tens + solution[tens:].index("=") - 1  # the last addend of the tens column: the carry
    return carry_of(graded), [carry_of(d) for d in decoys]


def carry_weights(spec: dict, trace: ObjectiveParams = TRACE) -> tuple[float, list[float], float, list[float]]:
    """The trace's (``trace``: default λ 0.99) and GRPO's weights of the deciding carry and of the decoys'
    carries, averaged over the first training problems of the synthetic training set ``spec`` whose graded
    chain carries out of its units column (the teacher's errors do not move a carry's position)."""
    keys = ("columns", "carry_free_share", "decoys", "decoy_position", "tail_sums")
    rows = arith.generate(PROBLEMS, seed=spec["seed"], carry_error_rate=0.0, **{k: spec[k] for k in keys if k in spec})
    graded_w, decoy_w = {"trace": [], "grpo": []}, {"trace": [], "grpo": []}
    for row in rows:
        operands = [int(x) for x in row["problem"].split(" (also ")[0].removesuffix("=?").split("+")]
        if 0 not in arith.carry_columns(operands):
            continue
        graded, decoys = carry_positions(row["problem"], row["solution"])
        for name, params in (("trace", trace), ("grpo", GRPO)):
            w = token_weights(params, len(row["solution"]) + 1)  # its tokens and the end of sequence
            graded_w[name].append(w[graded])
            decoy_w[name].append([w[d] for d in decoys])
    return (float(np.mean(graded_w["trace"])), list(np.mean(decoy_w["trace"], axis=0)),
            float(np.mean(graded_w["grpo"])), list(np.mean(decoy_w["grpo"], axis=0)))


def relative_weight(spec: dict, trace: ObjectiveParams = TRACE) -> float:
    """The deciding carry's weight relative to the decoys' carries (their mean) under the trace (``trace``),
    divided by the same ratio under GRPO (1): the dose a layout, or a trace's λ, gives the trace."""
    trace_g, trace_d, grpo_g, grpo_d = carry_weights(spec, trace)
    return (trace_g / float(np.mean(trace_d))) / (grpo_g / float(np.mean(grpo_d)))
