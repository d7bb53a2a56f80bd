"""S-trace in the trainer at a realistic quantile: the credit reaches exactly the tokens whose entropy is at or
above the q-quantile of the entropies of the loss's tokens (completion mask × tool mask), padding and tool
tokens left out of the quantile.

At q = 0 (the other trainer tests) every token is in the trace, so neither the direction of the rule nor the set
the quantile is taken over shows; here the trace mask is pinned through the gradient of `_compute_loss`, against
a dense credit-matrix computation written out in this file."""

import pytest
import torch

from grpo_lambda.trainer import GRPOLambdaTrainer
from grpo_lambda.trainer_config import GRPOLambdaConfig
from trainer_batch import make_trainer

LAM = 0.9
# 4 completions of width 7: lengths 7, 5, 7, 5 (24 tokens), 4 of them tool output (tool_mask 0): 20 loss tokens.
LENGTHS = (7, 5, 7, 5)
TOOL = ((0, 3), (0, 4), (2, 1), (2, 2))
ADVANTAGES = (1.0, -0.5, 0.3, -1.2)
# The 20 loss tokens get the entropies 1..20 in this scattered order (the highest are not simply the last ones);
# the 4 tool tokens and the 4 padding positions get 50..120, far above all of them.
LOSS_ENTROPIES = [9, 17, 3, 12, 20, 6, 14, 1, 18, 10, 4, 15, 7, 19, 2, 11, 16, 5, 13, 8]
OUTSIDE_ENTROPIES = [50, 60, 70, 80, 90, 100, 110, 120]
# Thresholds by hand (torch.quantile interpolates linearly over the sorted values, index q·(n − 1)):
#   over the 20 loss tokens 1..20:  q = 0.8 -> 1 + 0.8·19 = 16.2, kept {17..20};  q = 0.5 -> 10.5, kept {11..20}.
KEPT_FROM = {0.8: 17, 0.5: 11}


def batch():
    """(completion_mask, tool_mask, entropies), all (4, 7); entropies float64."""
    completion_mask = torch.zeros(4, 7, dtype=torch.long)
    for row, length in enumerate(LENGTHS):
        completion_mask[row, :length] = 1
    tool_mask = torch.ones(4, 7, dtype=torch.long)
    for row, col in TOOL:
        tool_mask[row, col] = 0
    loss_mask = (completion_mask * tool_mask).bool()
    assert loss_mask.sum() == 20
    entropies = torch.zeros(4, 7, dtype=torch.float64)
    entropies[loss_mask] = torch.tensor(LOSS_ENTROPIES, dtype=torch.float64)
    entropies[~loss_mask] = torch.tensor(OUTSIDE_ENTROPIES, dtype=torch.float64)
    return completion_mask, tool_mask, entropies


def expected_gradient(trace, loss_mask, advantages, lam):
    """∂loss/∂log π(y_k) on-policy (every ratio 1, nothing clipped), loss_type bnpo, scope past, written out:

        log c_t = (log ρ_t + Σ_{k<t} C[t,k] log ρ_k) / (1 + Σ_{k<t} C[t,k]),  C[t,k] = λ^(t−k) m_k e_k,
        loss = −Σ_t m_t A c_t / Σ m,   so   ∂loss/∂log π_k = −A/Σm · Σ_{t ≥ k, m_t} (C[t,k] or 1 at t = k) / credit_t.
    """
    rows, width = loss_mask.shape
    total = float(loss_mask.sum())
    gradient = torch.zeros(rows, width, dtype=torch.float64)
    for i in range(rows):
        lends = [bool(loss_mask[i, k]) and bool(trace[i, k]) for k in range(width)]
        credit = [1.0 + sum(lam ** (t - k) for k in range(t) if lends[k]) for t in range(width)]
        for k in range(width):
            for t in range(k, width):
                if not loss_mask[i, t]:
                    continue
                c = 1.0 if t == k else (lam ** (t - k) if lends[k] else 0.0)
                gradient[i, k] -= advantages[i] * c / credit[t] / total
    return gradient


@pytest.mark.parametrize("quantile", [0.8, 0.5])
def test_strace_trace_is_the_high_entropy_tokens_of_the_loss_at_a_realistic_quantile(model_dir, tmp_path, quantile):
    completion_mask, tool_mask, entropies = batch()
    loss_mask = (completion_mask * tool_mask).bool()
    expected_trace = (entropies >= KEPT_FROM[quantile]) & loss_mask
    assert expected_trace.sum() == {0.8: 4, 0.5: 10}[quantile]
    # What the plausible bugs would keep instead, so the test is known to tell them apart:
    lowest = (entropies <= 21 - KEPT_FROM[quantile]) & loss_mask                     # the lowest-entropy tokens
    # quantile over the completion tokens, tool tokens included (24 values): q·23 -> 18.4 -> 19.4 / 11.5 -> 12.5
    over_completion = (entropies >= {0.8: 19.4, 0.5: 12.5}[quantile]) & loss_mask
    # quantile over every position, padding too (28 values): q·27 -> 21.6 / 13.5 -> above 20 / 14.5
    over_everything = (entropies >= {0.8: 21, 0.5: 14.5}[quantile]) & loss_mask

    trainer = make_trainer(model_dir, GRPOLambdaTrainer, GRPOLambdaConfig, tmp_path, objective="strace",
                           loss_type="bnpo", trace_lambda=LAM, strace_quantile=quantile)
    logps = (-torch.rand(4, 7, generator=torch.Generator().manual_seed(3), dtype=torch.float64)).requires_grad_()
    trainer._get_per_token_logps_and_entropies = lambda *args, **kwargs: (logps, entropies, None)
    generator = torch.Generator().manual_seed(4)
    inputs = {
        "prompt_ids": torch.randint(4, 100, (4, 3), generator=generator),
        "prompt_mask": torch.ones(4, 3, dtype=torch.long),
        "completion_ids": torch.randint(4, 100, (4, 7), generator=generator),
        "completion_mask": completion_mask,
        "tool_mask": tool_mask,
        "advantages": torch.tensor(ADVANTAGES, dtype=torch.float64),
        "num_items_in_batch": loss_mask.sum(),
    }  # no old_per_token_logps: on-policy
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    trainer._metrics["train"].clear()
    (gradient,) = torch.autograd.grad(trainer._compute_loss(trainer.model, inputs), logps)

    expected = expected_gradient(expected_trace, loss_mask, ADVANTAGES, LAM)
    torch.testing.assert_close(gradient, expected, rtol=1e-9, atol=1e-12)
    for wrong in (lowest, over_completion, over_everything):
        assert not torch.equal(wrong, expected_trace)
        assert (expected_gradient(wrong, loss_mask, ADVANTAGES, LAM) - expected).abs().max() > 1e-3
    assert trainer._metrics["train"]["trace_token_fraction"][-1] == pytest.approx(
        {0.8: 4 / 20, 0.5: 10 / 20}[quantile], rel=1e-6)
