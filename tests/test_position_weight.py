"""§3.2's ε-weight (update "position"): each token's clipped loss times w_t = Σ_c W[t, c], the trace of 1, a
weight per position that the log-probs do not change (Algorithm 2's "weight" multiplies by the trace of
1 + σ(log π − 1) instead), and the overlay that runs it on the paper grid."""

import pytest
import torch

from grpo_lambda.objectives import ObjectiveParams, policy_loss
from grpo_lambda.traces import trace_matrix


def batch():
    generator = torch.Generator().manual_seed(3)
    logps = -torch.rand(2, 7, generator=generator, dtype=torch.float64)
    old = logps - 0.05 * torch.rand(2, 7, generator=generator, dtype=torch.float64)
    mask = torch.ones(2, 7, dtype=torch.float64)
    mask[1, 5:] = 0
    return logps, old, mask, torch.tensor([1.0, -0.5], dtype=torch.float64)


@pytest.mark.parametrize("style", ["recent", "both"])
def test_position_weight_is_the_trace_of_one_times_each_tokens_loss(style):
    logps, old, mask, advantages = batch()
    params = ObjectiveParams(objective="grpo_lambda", lam=0.9, style=style, form="absolute", eps=1e-7, update="position",
                             loss_type="bnpo", trace_length=7, advantage_clamp=None)
    leaf = logps.clone().requires_grad_()
    loss, metrics = policy_loss(leaf, old, None, advantages, mask, params)
    (gradient,) = torch.autograd.grad(loss, leaf)
    W = trace_matrix(7, 0.9, style=style, form="absolute", eps=1e-7, length=7).to(torch.float64)
    weights = torch.stack([(W * mask[row]).sum(-1) for row in range(2)]) * mask
    torch.testing.assert_close(metrics["trace_weight"] * mask, weights, rtol=1e-12, atol=1e-15)
    ratio = torch.exp(logps - old)
    clipped = torch.clamp(ratio, 0.8, 1.2)
    per_token = -torch.minimum(ratio * advantages[:, None], clipped * advantages[:, None])
    expected = (weights * per_token * mask).sum() / mask.sum()
    torch.testing.assert_close(loss.detach(), expected, rtol=1e-12, atol=1e-15)
    # the weight is a constant of the position: the gradient is GRPO's per token times it
    grpo = ObjectiveParams(objective="grpo", loss_type="bnpo")
    plain = logps.clone().requires_grad_()
    (grpo_gradient,) = torch.autograd.grad(policy_loss(plain, old, None, advantages, mask, grpo)[0], plain)
    torch.testing.assert_close(gradient, grpo_gradient * weights, rtol=1e-12, atol=1e-15)
    # Algorithm 2's weight is not: it moves with the log-probs
    algorithm2 = ObjectiveParams(objective="grpo_lambda", lam=0.9, style=style, form="absolute", eps=1e-7,
                                 update="weight", loss_type="bnpo", trace_length=7, advantage_clamp=None)
    assert (policy_loss(logps, old, None, advantages, mask, algorithm2)[1]["trace_weight"] * mask
            - weights).abs().max() > 1e-3


def test_the_position_weight_overlay_reaches_the_trainer(tmp_path):
    import yaml
    from snakemake.utils import update_config

    from conftest import ROOT
    from grpo_lambda import config as study
    from grpo_lambda.train import build_config
    from grpo_lambda.trainer_config import objective_params

    merged = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    update_config(merged, yaml.safe_load((ROOT / "config" / "trace" / "position-weight.yaml").read_text()))
    config = study.validate(merged)
    updates = {}
    for variant in study.model_variants(config, "qwen-math-1.5b"):
        if config["variants"][variant]["objective"] != "grpo_lambda":
            continue
        settings = study.stage_settings(config, "train", model="qwen-math-1.5b", dataset="math12k", variant=variant)
        updates[variant] = objective_params(build_config(settings, output_dir=str(tmp_path), seed=0)).update
    assert {v: u for v, u in updates.items() if "weight" in v} == dict.fromkeys(
        ["both-weight-0.98", "both-weight-0.99", "recent-weight-0.98", "recent-weight-0.99"], "position")
    assert {u for v, u in updates.items() if "trace" in v} == {"trace"}
