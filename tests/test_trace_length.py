"""The absolute form's n is the trace length, a constant of the run: a completion's trace weights and its
loss do not depend on how wide the batch it came in was padded."""

import pytest
import torch

from grpo_lambda.objectives import ObjectiveParams, policy_loss
from grpo_lambda.traces import apply_trace, trace_matrix

ABSOLUTE = [("recent", "absolute"), ("both", "absolute")]
EVERY_FORM = [*ABSOLUTE, ("recent", "relative"), ("both", "relative"), ("early", "relative")]


@pytest.mark.parametrize("style, form", EVERY_FORM)
@pytest.mark.parametrize("width, length", [(5, 5), (5, 9), (7, 64), (1, 3)])
def test_dense_oracle_with_a_trace_length(style, form, width, length):
    """trace_matrix(n, length=L) is the top-left n×n block of trace_matrix(L), for every form."""
    kwargs = dict(style=style, form=form, eps=1e-3)
    block = trace_matrix(length, 0.8, **kwargs)[:width, :width]
    assert torch.equal(trace_matrix(width, 0.8, length=length, **kwargs), block)
    x = torch.randn(3, width, dtype=torch.float64, generator=torch.Generator().manual_seed(width))
    torch.testing.assert_close(apply_trace(x, 0.8, length=length, **kwargs), x @ block.T, rtol=1e-12, atol=1e-12)


def test_absolute_weights_by_hand_at_a_trace_length():
    """recent: κ^(n−1−c); both: max(κ^(n−c), κ^c), with n the trace length, not the width."""
    recent = trace_matrix(3, 0.5, form="absolute", length=5)
    assert recent[2, :2].tolist() == [0.5**4, 0.5**3]
    both = trace_matrix(3, 0.5, form="absolute", style="both", length=5)
    assert both[2, :2].tolist() == [1.0, 0.5**1]  # max(κ^5, κ^0), max(κ^4, κ^1)
    assert trace_matrix(3, 0.5, form="absolute")[2, :2].tolist() == [0.5**2, 0.5]  # default n = 3


@pytest.mark.parametrize("length, culprit", [(3, r"length \(3\) must be >= the number of tokens \(4\)"),
                                             (4.0, "length must be an int"), (True, "length must be an int")])
def test_a_trace_length_shorter_than_the_batch_is_refused(length, culprit):
    with pytest.raises(ValueError, match=culprit):
        apply_trace(torch.zeros(2, 4), 0.9, form="absolute", length=length)
    with pytest.raises(ValueError, match=culprit.replace("tokens", "tokens")):
        trace_matrix(4, 0.9, form="absolute", length=length)


def padded(rows, width):
    """(B, width) tensors from lists of per-token values, zero-padded on the right, and the mask."""
    values = torch.zeros(len(rows), width, dtype=torch.float64)
    mask = torch.zeros(len(rows), width, dtype=torch.float64)
    for i, row in enumerate(rows):
        values[i, :len(row)] = torch.tensor(row, dtype=torch.float64)
        mask[i, :len(row)] = 1
    return values, mask


@pytest.mark.parametrize("style", ["recent", "both"])
@pytest.mark.parametrize("update", ["trace", "weight"])
def test_same_completion_same_weights_and_loss_at_any_padded_width(style, update):
    """One completion of 6 tokens, in a batch of width 6 or beside a completion of 40 tokens (width 40):
    with the trace length fixed at 64 its per-token trace weights, its loss and its gradient agree."""
    generator = torch.Generator().manual_seed(3)
    completion = {k: (-torch.rand(6, generator=generator, dtype=torch.float64)).tolist() for k in ("new", "old")}
    other = {w: {k: (-torch.rand(w, generator=generator, dtype=torch.float64)).tolist() for k in ("new", "old")}
             for w in (6, 40)}

    def run(width, trace_length):
        logps, mask = padded([completion["new"], other[width]["new"]], width)
        old_logps, _ = padded([completion["old"], other[width]["old"]], width)
        leaf = logps.clone().requires_grad_()
        # one completion per batch for the loss (the other row only sets the padded width)
        params = ObjectiveParams(objective="grpo_lambda", lam=0.9, style=style, form="absolute", eps=1e-7,
                                 update=update, loss_type="bnpo", trace_length=trace_length)
        row_mask = mask.clone()
        row_mask[1] = 0
        loss, metrics = policy_loss(leaf, old_logps, None, torch.tensor([1.0, -0.5], dtype=torch.float64),
                                    row_mask, params)
        (gradient,) = torch.autograd.grad(loss, leaf)
        _, full_metrics = policy_loss(logps, old_logps, None, torch.tensor([1.0, -0.5], dtype=torch.float64), mask,
                                      params)
        weights = full_metrics["trace_weight"][0, :6]
        return loss.detach(), gradient[0, :6], weights

    narrow, wide = run(6, 64), run(40, 64)
    for a, b in zip(narrow, wide):
        torch.testing.assert_close(a, b, rtol=1e-13, atol=1e-15)
    # without a fixed length n is the width, and the same completion is weighted differently
    assert (run(6, None)[2] - run(40, None)[2]).abs().max() > 1e-3
