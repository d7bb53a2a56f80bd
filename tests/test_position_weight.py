"""§3.2's ε-weight (update "position"): each token's clipped loss times w_t = Σ_{l=0}^{t} (γλ)^l, "the trace only
needs to be computed once" — a weight of the position alone, which neither the log-probs nor the run's trace
form, floor ε or n change (Algorithm 2's "weight" multiplies by the trace of 1 + σ(log π − 1) instead); style both
takes Eq. 2's decay max((γλ)^l, (γλ)^(t−l)). And the overlay that runs it on the paper grid."""

import pytest
import torch

from grpo_lambda.objectives import ObjectiveParams, policy_loss

# What the paper grid's ε-weight variants can stack with §3.2's weight: every form, floor and n of the trace.
STACKED = [("absolute", 1e-7, 256), ("absolute", 1e-7, None), ("absolute", 1e-7, "batch_max"),
           ("absolute", 1e-7, "per_sequence"), ("relative", 0.0, None), ("relative", 1e-7, None)]


def position_weights(lam, *, style="recent", form="absolute", eps=1e-7, trace_length=256, width=256, rows=2):
    """The logged trace weight of update "position" on an on-policy batch whose second row is shorter."""
    params = ObjectiveParams(objective="grpo_lambda", lam=lam, style=style, form=form, eps=eps, update="position",
                             loss_type="bnpo", trace_length=trace_length, advantage_clamp=None)
    logps = -torch.rand(rows, width, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    mask = torch.ones(rows, width, dtype=torch.float64)
    mask[1, width // 2:] = 0
    _, metrics = policy_loss(logps, logps, None, torch.tensor([1.0, -0.5], dtype=torch.float64), mask, params)
    return metrics["trace_weight"], mask


def test_the_weight_at_two_positions_is_the_papers_sum_worked_by_hand():
    """λ 0.99, the paper grid's absolute form with n 256 and ε 1e-7: w_10 = Σ_{l=0}^{10} 0.99^l = (1 − 0.99^11)/0.01
    = 10.4662 and w_50 = (1 − 0.99^51)/0.01 = 40.1044; the rows of that absolute W sum to 1.807 and 5.982 there."""
    weights, _ = position_weights(0.99)
    assert weights[0, 10].item() == pytest.approx(10.466175, abs=1e-6)
    assert weights[0, 50].item() == pytest.approx(40.104399, abs=1e-6)
    assert weights[1, 50].item() == pytest.approx(40.104399, abs=1e-6)  # the position's, whatever the row's length


@pytest.mark.parametrize("form, eps, trace_length", STACKED)
@pytest.mark.parametrize("lam", [0.98, 0.99, 1.0, 0.0])
def test_the_weight_is_the_closed_form_at_every_position_whatever_the_trace_it_is_stacked_with(lam, form, eps,
                                                                                                 trace_length):
    weights, mask = position_weights(lam, form=form, eps=eps, trace_length=trace_length)
    t = torch.arange(256, dtype=torch.float64)
    closed = t + 1 if lam == 1.0 else (1 - lam ** (t + 1)) / (1 - lam)  # Σ_{l=0}^{t} λ^l, γ = 1
    torch.testing.assert_close(weights[0], closed, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(weights[1] * mask[1], closed * mask[1], rtol=1e-12, atol=1e-12)


def test_gamma_enters_the_weight_as_gamma_times_lambda():
    params = ObjectiveParams(objective="grpo_lambda", lam=0.9, gamma=0.5, update="position", loss_type="bnpo")
    logps = torch.zeros(1, 6, dtype=torch.float64)
    _, metrics = policy_loss(logps, logps, None, torch.ones(1, dtype=torch.float64), torch.ones_like(logps), params)
    torch.testing.assert_close(metrics["trace_weight"][0], torch.tensor([sum(0.45 ** l for l in range(t + 1))
                                                                          for t in range(6)], dtype=torch.float64))


@pytest.mark.parametrize("form", ["absolute", "relative"])
def test_style_both_takes_eq_2s_decay(form):
    """w_t = Σ_{l=0}^{t} max(κ^l, κ^(t−l)); at t = 2, κ = 0.9: 1 + 0.9 + 1 = 2.9."""
    weights, _ = position_weights(0.9, style="both", form=form, width=40)
    assert weights[0, 2].item() == pytest.approx(2.9, abs=1e-12)
    expected = torch.tensor([sum(max(0.9 ** l, 0.9 ** (t - l)) for l in range(t + 1)) for t in range(40)],
                            dtype=torch.float64)
    torch.testing.assert_close(weights[0], expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("form", ["absolute", "relative"])
def test_style_early_weighs_the_first_token_fully_and_the_rest_by_their_distance_back(form):
    """w_t = 1 + Σ_{l=1}^{t} κ^(t−l); at κ 0.9: 1, 2, 2.9, 3.71 (recent's decay would give 1, 1.9, 2.71, 3.44)."""
    weights, _ = position_weights(0.9, style="early", form=form, width=40)
    assert weights[0, :4].tolist() == pytest.approx([1.0, 2.0, 2.9, 3.71], abs=1e-12)
    expected = torch.tensor([1 + sum(0.9 ** (t - l) for l in range(1, t + 1)) for t in range(40)], dtype=torch.float64)
    torch.testing.assert_close(weights[0], expected, rtol=1e-12, atol=1e-12)


def batch():
    generator = torch.Generator().manual_seed(3)
    logps = -torch.rand(2, 7, generator=generator, dtype=torch.float64)
    old = logps - 0.05 * torch.rand(2, 7, generator=generator, dtype=torch.float64)
    mask = torch.ones(2, 7, dtype=torch.float64)
    mask[1, 5:] = 0
    return logps, old, mask, torch.tensor([1.0, -0.5], dtype=torch.float64)


@pytest.mark.parametrize("style", ["recent", "both"])
def test_the_position_weight_multiplies_each_tokens_loss_and_its_gradient(style):
    logps, old, mask, advantages = batch()
    params = ObjectiveParams(objective="grpo_lambda", lam=0.9, style=style, form="absolute", eps=1e-7, update="position",
                             loss_type="bnpo", trace_length=7, advantage_clamp=None)
    leaf = logps.clone().requires_grad_()
    loss, metrics = policy_loss(leaf, old, None, advantages, mask, params)
    (gradient,) = torch.autograd.grad(loss, leaf)
    decay = (lambda t, l: 0.9 ** l) if style == "recent" else (lambda t, l: max(0.9 ** l, 0.9 ** (t - l)))
    weights = torch.tensor([sum(decay(t, l) for l in range(t + 1)) for t in range(7)], dtype=torch.float64) * mask
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
    params = {}
    for variant in study.model_variants(config, "qwen-math-1.5b"):
        if config["variants"][variant]["objective"] != "grpo_lambda":
            continue
        settings = study.stage_settings(config, "train", model="qwen-math-1.5b", dataset="math12k", variant=variant)
        params[variant] = objective_params(build_config(settings, output_dir=str(tmp_path), seed=0))
    assert {v: p.update for v, p in params.items() if "weight" in v} == dict.fromkeys(
        ["both-weight-0.98", "both-weight-0.99", "recent-weight-0.98", "recent-weight-0.99"], "position")
    assert {p.update for v, p in params.items() if "trace" in v} == {"trace"}
    # the trainer's loss on its own params: §3.2's sum at position 50, though the grid's W is absolute (n 256)
    recent = params["recent-weight-0.99"]
    assert (recent.form, recent.eps) == ("absolute", 1e-7)
    logps = torch.zeros(1, 256, dtype=torch.float64)
    _, metrics = policy_loss(logps, logps, logps, torch.ones(1, dtype=torch.float64), torch.ones_like(logps), recent)
    assert metrics["trace_weight"][0, 50].item() == pytest.approx(40.104399, abs=1e-6)
