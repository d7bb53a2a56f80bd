"""grpo_lambda.objectives: GRPO and GRPO-λ losses, their gradients (Theorem 1) and metrics."""

import dataclasses
import itertools

import pytest
import torch

from grpo_lambda.objectives import (
    LOSS_TYPES,
    ObjectiveParams,
    high_entropy_mask,
    history_log_ratio,
    masked_mean,
    policy_loss,
)
from grpo_lambda.traces import FORMS, STYLES, trace_matrix

B, T = 4, 12


@pytest.fixture
def batch():
    generator = torch.Generator().manual_seed(0)
    logps = (-torch.rand(B, T, dtype=torch.float64, generator=generator) * 3).requires_grad_()
    old_logps = logps.detach() + 0.3 * torch.randn(B, T, dtype=torch.float64, generator=generator)
    ref_logps = logps.detach() + 0.2 * torch.randn(B, T, dtype=torch.float64, generator=generator)
    mask = torch.ones(B, T, dtype=torch.float64)
    mask[1, 9:] = 0
    mask[2, 4:] = 0
    advantages = torch.tensor([1.0, -0.5, 0.3, -1.2], dtype=torch.float64)
    return logps, old_logps, ref_logps, mask, advantages


def lam_params(**overrides):
    return ObjectiveParams(objective="grpo_lambda", **overrides)


def test_theorem_1_gradient_is_the_trace_weighted_advantage(batch):
    """On-policy, β = 0, no clamp (bnpo, N = Σ mask):
    ∂loss/∂log π(y_c) = −Σ_{t≥c} W[t,c] A_t mask_t mask_c / N."""
    logps, _, _, mask, _ = batch
    token_advantages = torch.randn(B, T, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    for style, form, lam, eps in itertools.product(STYLES, FORMS, (0.5, 0.99), (0.0, 0.05)):
        for advantages in (batch[4].unsqueeze(1), token_advantages):
            params = lam_params(lam=lam, style=style, form=form, eps=eps, loss_type="bnpo")
            loss, _ = policy_loss(logps, None, None, advantages, mask, params)
            (grad,) = torch.autograd.grad(loss, logps)

            matrix = trace_matrix(T, lam, style=style, form=form, eps=eps)
            weighted = advantages.expand(B, T) * mask  # A_t mask_t
            expected = -(weighted @ matrix) * mask / mask.sum()  # Σ_t A_t W[t, c], then mask_c
            torch.testing.assert_close(grad, expected, rtol=1e-12, atol=1e-14, msg=f"{style} {form} {lam} {eps}")


def test_trace_update_is_the_clipped_traced_ratio(batch):
    logps, old_logps, _, mask, advantages = batch
    params = lam_params(lam=0.9, style="both", eps=0.01, loss_type="bnpo")
    loss, metrics = policy_loss(logps, old_logps, None, advantages, mask, params)

    traced_log_ratio = ((logps - old_logps) * mask) @ trace_matrix(T, 0.9, style="both", eps=0.01).T
    ratio = traced_log_ratio.exp()
    a = advantages.unsqueeze(1)
    expected_per_token = -torch.minimum(ratio * a, ratio.clamp(0.8, 1.2) * a)
    assert loss.item() == pytest.approx(((expected_per_token * mask).sum() / mask.sum()).item(), rel=1e-12)
    # the batch is off-policy enough that both clip sides occur
    assert 0 < masked_mean(metrics["clip_ratio/low"], mask) < 1
    assert 0 < masked_mean(metrics["clip_ratio/high"], mask) < 1
    expected_low = ((ratio < 0.8) & (a < 0)).double()
    torch.testing.assert_close(metrics["clip_ratio/low"], expected_low)
    torch.testing.assert_close(metrics["clip_ratio/region"], torch.maximum(expected_low, metrics["clip_ratio/high"]))
    # trace_weight: how much weight each token's traced ratio gathers, Σ_c W[t, c] mask_c
    row_sums = mask @ trace_matrix(T, 0.9, style="both", eps=0.01).T
    torch.testing.assert_close(metrics["trace_weight"], row_sums, rtol=1e-6, atol=1e-6)


def test_weight_update_gradient_flows_through_the_trace(batch):
    """ε-weight: loss_t = ppo_t · e_t, e_t = Σ_c W[t,c](1 + σ(ℓ_c − 1)); e is not detached."""
    logps, old_logps, _, mask, advantages = batch
    params = lam_params(lam=0.9, update="weight", loss_type="bnpo")
    loss, metrics = policy_loss(logps, old_logps, None, advantages, mask, params)
    (grad,) = torch.autograd.grad(loss, logps)

    matrix = trace_matrix(T, 0.9)
    n = mask.sum()
    ratio = (logps - old_logps).exp()
    a = advantages.unsqueeze(1)
    ppo = -torch.minimum(ratio * a, ratio.clamp(0.8, 1.2) * a)
    trace = ((1 + torch.sigmoid(logps - 1)) * mask) @ matrix.T
    assert loss.item() == pytest.approx(((ppo * trace * mask).sum() / n).item(), rel=1e-12)
    torch.testing.assert_close(metrics["trace_weight"], trace.detach())

    (through_ratio,) = torch.autograd.grad((ppo * trace.detach() * mask).sum() / n, logps)
    sigmoid = torch.sigmoid(logps.detach() - 1)
    through_trace = ((ppo.detach() * mask / n) @ matrix) * mask * sigmoid * (1 - sigmoid)
    assert through_trace.abs().max() > 1e-3  # the trace's own gradient is not negligible here
    torch.testing.assert_close(grad, through_ratio + through_trace, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_lambda_zero_relative_recent_is_grpo(batch, loss_type):
    logps, old_logps, ref_logps, mask, advantages = batch
    common = dict(beta=0.04, loss_type=loss_type, max_completion_length=16, epsilon_high=0.28)
    grpo_loss, grpo_metrics = policy_loss(logps, old_logps, ref_logps, advantages, mask, ObjectiveParams(**common))
    lam_loss, lam_metrics = policy_loss(logps, old_logps, ref_logps, advantages, mask, lam_params(lam=0.0, **common))
    (grpo_grad,) = torch.autograd.grad(grpo_loss, logps)
    (lam_grad,) = torch.autograd.grad(lam_loss, logps)
    assert lam_loss.item() == grpo_loss.item()
    assert torch.equal(lam_grad, grpo_grad)
    for name in ("clip_ratio/low", "clip_ratio/high", "kl"):  # equal on the tokens that count
        assert torch.equal(lam_metrics[name] * mask, grpo_metrics[name] * mask)
    # ... and a positive λ does change it
    traced_loss, _ = policy_loss(logps, old_logps, ref_logps, advantages, mask, lam_params(lam=0.9, **common))
    assert abs(traced_loss.item() - grpo_loss.item()) > 1e-3


def test_normalisations(batch):
    logps, _, _, mask, _ = batch
    advantages = torch.full((B,), -1.0, dtype=torch.float64)  # on-policy: per-token loss = 1
    expected = {
        "grpo": 1.0,  # mean over sequences of the per-sequence token mean
        "bnpo": 1.0,
        "dr_grpo": (mask.sum() / (B * 16)).item(),  # Σ / (B · max_completion_length)
        "dapo": 1.0,  # Σ / number of tokens by default
    }
    for loss_type, value in expected.items():
        params = ObjectiveParams(loss_type=loss_type, max_completion_length=16)
        loss, _ = policy_loss(logps, None, None, advantages, mask, params)
        assert loss.item() == pytest.approx(value, rel=1e-12), loss_type
    loss, _ = policy_loss(logps, None, None, advantages, mask, ObjectiveParams(loss_type="dapo"),
                          num_items=torch.tensor(100.0, dtype=torch.float64))
    assert loss.item() == pytest.approx(mask.sum().item() / 100, rel=1e-12)
    # grpo weighs sequences equally, bnpo tokens: a per-token loss that differs by sequence tells them apart
    per_sequence = torch.tensor([-1.0, -2.0, -3.0, -4.0], dtype=torch.float64)
    grpo, _ = policy_loss(logps, None, None, per_sequence, mask, ObjectiveParams(loss_type="grpo"))
    bnpo, _ = policy_loss(logps, None, None, per_sequence, mask, ObjectiveParams(loss_type="bnpo"))
    lengths = mask.sum(-1)
    assert grpo.item() == pytest.approx(2.5, rel=1e-12)
    assert bnpo.item() == pytest.approx(((-per_sequence) * lengths).sum().item() / lengths.sum().item(), rel=1e-12)


def test_advantage_clamp(batch):
    logps, old_logps, _, mask, advantages = batch
    clamped, _ = policy_loss(logps, old_logps, None, advantages, mask, lam_params(lam=0.9, advantage_clamp=-0.1))
    by_hand, _ = policy_loss(logps, old_logps, None, advantages.clamp(min=-0.1), mask, lam_params(lam=0.9))
    unclamped, _ = policy_loss(logps, old_logps, None, advantages, mask, lam_params(lam=0.9))
    assert clamped.item() == by_hand.item()
    assert clamped.item() != unclamped.item()


def test_kl_term_and_token_weights(batch):
    logps, old_logps, ref_logps, mask, advantages = batch
    params = ObjectiveParams(loss_type="bnpo", kl_ratio_correction=False)
    base, _ = policy_loss(logps, old_logps, ref_logps, advantages, mask, params)
    with_kl, metrics = policy_loss(logps, old_logps, ref_logps, advantages, mask,
                                   dataclasses.replace(params, beta=0.5))
    k3 = (ref_logps - logps).exp() - (ref_logps - logps) - 1
    assert (with_kl - base).item() == pytest.approx(0.5 * masked_mean(k3, mask).item(), rel=1e-10)
    torch.testing.assert_close(metrics["kl"], k3.detach())
    corrected, metrics = policy_loss(logps, old_logps, ref_logps, advantages, mask,
                                     dataclasses.replace(params, beta=0.5, kl_ratio_correction=True))
    torch.testing.assert_close(metrics["kl"], (k3 * (logps - old_logps).exp()).detach())
    # token weights scale the policy term only
    zero = torch.zeros(B, 1, dtype=torch.float64)
    only_kl, _ = policy_loss(logps, old_logps, ref_logps, advantages, mask,
                             dataclasses.replace(params, beta=0.5), token_weights=zero)
    assert only_kl.item() == pytest.approx((with_kl - base).item(), rel=1e-10)


def test_low_precision_inputs_and_integer_mask(batch):
    logps, old_logps, _, mask, advantages = batch
    params = lam_params(lam=0.99)
    reference, _ = policy_loss(logps, old_logps, None, advantages, mask, params)
    loss, metrics = policy_loss(logps.detach().bfloat16().requires_grad_(), old_logps.bfloat16(), None,
                                advantages.bfloat16(), mask.long(), params)
    assert loss.dtype == torch.bfloat16 and metrics["trace_weight"].dtype == torch.bfloat16
    assert loss.item() == pytest.approx(reference.item(), rel=0.05)


@pytest.mark.parametrize(
    "overrides, culprit",
    [
        ({"objective": "ppo"}, "objective"),
        ({"update": "both"}, "update"),
        ({"loss_type": "cispo"}, "loss_type"),
        ({"style": "late"}, "style"),
        ({"form": "rel"}, "form"),
        ({"lam": 1.1}, "lam"),
        ({"gamma": 0.0}, "gamma"),
        ({"eps": -1.0}, "eps"),
        ({"advantage_clamp": 0.5}, "advantage_clamp"),
        ({"beta": -0.1}, "beta"),
        ({"loss_type": "dr_grpo"}, "max_completion_length"),
    ],
)
def test_invalid_params_name_the_culprit(overrides, culprit):
    with pytest.raises(ValueError, match=culprit):
        ObjectiveParams(**overrides)


def test_shape_errors_name_the_culprit(batch):
    logps, old_logps, _, mask, advantages = batch
    params = ObjectiveParams()
    with pytest.raises(ValueError, match="old_logps"):
        policy_loss(logps, old_logps[:, :3], None, advantages, mask, params)
    with pytest.raises(ValueError, match="advantages"):
        policy_loss(logps, old_logps, None, advantages[:2], mask, params)
    with pytest.raises(ValueError, match="ref_logps"):
        policy_loss(logps, old_logps, None, advantages, mask, ObjectiveParams(beta=0.1))


# --- P-trace and S-trace (an interpretation of arXiv 2605.05965's abstract) -----------------------


def credit_matrix(lam, in_credit, scope="past"):
    """(B, T, T) C[b, t, k] = 1 at k = t, κ^|t−k| m_k at the other k of the scope, 0 elsewhere."""
    k = torch.arange(T)
    lag = (k.unsqueeze(1) - k.unsqueeze(0)).abs().to(torch.float64)  # |t − k|
    in_scope = (k.unsqueeze(0) < k.unsqueeze(1)) if scope == "past" else (k.unsqueeze(0) != k.unsqueeze(1))
    off_diagonal = torch.where(in_scope, torch.tensor(lam, dtype=torch.float64) ** lag, 0.0)
    return off_diagonal * in_credit.unsqueeze(1).to(torch.float64) + torch.eye(T, dtype=torch.float64)


@pytest.mark.parametrize("scope", ["past", "sequence"])
def test_ptrace_clips_the_credit_weighted_geometric_mean_of_ratios(batch, scope):
    """coef_t = exp(Σ_k C[t,k] log ρ_k / Σ_k C[t,k]) inside the clip; gradient through every log ρ_k."""
    logps, old_logps, _, mask, advantages = batch
    params = ObjectiveParams(objective="ptrace", lam=0.9, loss_type="bnpo", history_scope=scope)
    loss, metrics = policy_loss(logps, old_logps, None, advantages, mask, params)
    (grad,) = torch.autograd.grad(loss, logps)

    credit = credit_matrix(0.9, mask, scope)
    log_coef = (credit @ (logps - old_logps).unsqueeze(-1)).squeeze(-1) / credit.sum(-1)
    ratio = log_coef.exp()
    a = advantages.unsqueeze(1)
    expected = ((-torch.minimum(ratio * a, ratio.clamp(0.8, 1.2) * a)) * mask).sum() / mask.sum()
    assert loss.item() == pytest.approx(expected.item(), rel=1e-12)
    torch.testing.assert_close(metrics["trace_weight"], credit.sum(-1))
    (expected_grad,) = torch.autograd.grad(expected, logps)
    torch.testing.assert_close(grad, expected_grad, rtol=1e-12, atol=1e-14)


def test_ptrace_is_grpo_at_lambda_zero_and_on_policy(batch):
    logps, old_logps, ref_logps, mask, advantages = batch
    common = dict(beta=0.04, loss_type="dapo", epsilon_high=0.28)
    grpo, _ = policy_loss(logps, old_logps, ref_logps, advantages, mask, ObjectiveParams(**common))
    for scope in ("past", "sequence"):
        at_zero, metrics = policy_loss(logps, old_logps, ref_logps, advantages, mask,
                                       ObjectiveParams(objective="ptrace", lam=0.0, history_scope=scope, **common))
        assert at_zero.item() == grpo.item()
        assert torch.equal(metrics["trace_weight"], torch.ones_like(logps))
    # on-policy (old = current, as TRL passes it with one step per generation) every ratio is 1
    grpo, _ = policy_loss(logps, None, ref_logps, advantages, mask, ObjectiveParams(**common))
    ptrace, _ = policy_loss(logps, None, ref_logps, advantages, mask,
                            ObjectiveParams(objective="ptrace", lam=0.99, **common))
    assert ptrace.item() == pytest.approx(grpo.item(), rel=1e-12)
    off_policy, _ = policy_loss(logps, old_logps, ref_logps, advantages, mask,
                                ObjectiveParams(objective="ptrace", lam=0.99, **common))
    assert abs(off_policy.item() - policy_loss(logps, old_logps, ref_logps, advantages, mask,
                                               ObjectiveParams(**common))[0].item()) > 1e-3


def test_high_entropy_mask_keeps_the_top_quantile():
    generator = torch.Generator().manual_seed(3)
    entropies = torch.rand(B, T, generator=generator, dtype=torch.float64)
    mask = torch.ones(B, T)
    mask[0, 6:] = 0
    kept = high_entropy_mask(entropies, mask, 0.8)
    valid = entropies[mask.bool()]
    assert kept.sum() == (valid >= torch.quantile(valid, 0.8)).sum()
    assert kept.sum() == pytest.approx(0.2 * mask.sum(), abs=1)
    assert entropies[kept].min() >= entropies[mask.bool() & ~kept].max()  # keeps the highest
    assert not kept[~mask.bool()].any()
    assert torch.equal(high_entropy_mask(entropies, mask, 0.0), mask.bool())  # q = 0 keeps every token
    with pytest.raises(ValueError, match="quantile"):
        high_entropy_mask(entropies, mask, 1.5)


def test_strace_traces_only_the_masked_tokens_and_is_ptrace_with_every_token(batch):
    logps, old_logps, _, mask, advantages = batch
    entropies = torch.rand(B, T, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    strace = ObjectiveParams(objective="strace", lam=0.9, loss_type="bnpo")
    ptrace = ObjectiveParams(objective="ptrace", lam=0.9, loss_type="bnpo")

    everything = high_entropy_mask(entropies, mask, 0.0)
    loss_all, metrics_all = policy_loss(logps, old_logps, None, advantages, mask, strace, trace_mask=everything)
    loss_p, metrics_p = policy_loss(logps, old_logps, None, advantages, mask, ptrace)
    assert loss_all.item() == loss_p.item()
    assert torch.equal(metrics_all["trace_weight"], metrics_p["trace_weight"])

    top = high_entropy_mask(entropies, mask, 0.8)
    loss_top, metrics_top = policy_loss(logps, old_logps, None, advantages, mask, strace, trace_mask=top)
    torch.testing.assert_close(metrics_top["trace_weight"], credit_matrix(0.9, mask * top).sum(-1))
    assert abs(loss_top.item() - loss_p.item()) > 1e-4


@pytest.mark.parametrize("objective, trace_mask, culprit", [("strace", None, "trace_mask is required"),
                                                             ("ptrace", torch.ones(B, T), "'strace' only")])
def test_trace_mask_belongs_to_strace(batch, objective, trace_mask, culprit):
    logps, old_logps, _, mask, advantages = batch
    with pytest.raises(ValueError, match=culprit):
        policy_loss(logps, old_logps, None, advantages, mask, ObjectiveParams(objective=objective),
                    trace_mask=trace_mask)


@pytest.mark.parametrize("scope", ["past", "sequence"])
def test_history_log_ratio_by_hand(scope):
    """log coef_t = (log ρ_t + Σ_{k≠t} C[t,k] log ρ_k) / (1 + Σ_{k≠t} C[t,k]), C[t,k] = (γλ)^|t−k| m_k
    over k < t ("past") or every k ≠ t ("sequence"); γ < 1 and a credit mask with a gap."""
    log_ratio = torch.randn(2, 7, generator=torch.Generator().manual_seed(12), dtype=torch.float64)
    in_credit = torch.tensor([[1, 1, 0, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1, 1]], dtype=torch.float64)
    log_coef, credit = history_log_ratio(log_ratio, in_credit, 0.9, gamma=0.7, scope=scope)
    kappa = 0.63
    for b in range(2):
        for t in range(7):
            others = [k for k in range(7) if k != t and (k < t or scope == "sequence")]
            weights = {k: kappa ** abs(t - k) * in_credit[b, k].item() for k in others}
            mass = 1.0 + sum(weights.values())
            expected = (log_ratio[b, t].item() + sum(w * log_ratio[b, k].item() for k, w in weights.items())) / mass
            assert credit[b, t].item() == pytest.approx(mass, rel=1e-12)
            assert log_coef[b, t].item() == pytest.approx(expected, rel=1e-10, abs=1e-12)


# --- pinned where a planted bug once went unseen --------------------------------------------------


def test_ptrace_decays_with_gamma_times_lambda():
    """P-trace's history uses κ = γλ: γ = 0.5, λ = 0.9 is λ = 0.45 alone, and γ < 1 changes the loss."""
    generator = torch.Generator().manual_seed(3)
    logps = -1.0 + 0.3 * torch.randn(3, 12, generator=generator)
    old = logps.detach() + 0.3 * torch.randn(3, 12, generator=generator)
    mask = torch.ones(3, 12)
    mask[1, 7:] = 0
    advantages = torch.tensor([1.0, -0.5, 0.7])

    def loss(**fields):
        return policy_loss(logps, old, None, advantages, mask, ObjectiveParams(objective="ptrace", **fields))[0]

    torch.testing.assert_close(loss(lam=0.9, gamma=0.5), loss(lam=0.45))
    assert abs(loss(lam=0.9, gamma=0.5).item() - loss(lam=0.9).item()) > 1e-6


@pytest.mark.parametrize("fields", [{"style": "both"}, {"form": "absolute"}, {"eps": 0.3, "lam": 0.7},
                                    {"gamma": 0.8}, {"update": "weight", "style": "early"}])
def test_half_precision_loss_keeps_every_trace_setting(fields):
    """bfloat16 log-probs are traced in float32: the loss is the float32 one, setting included."""
    generator = torch.Generator().manual_seed(5)
    # values bfloat16 holds exactly, so the two precisions start from the same numbers
    logps = (-1.0 - torch.rand(3, 16, generator=generator)).bfloat16().float()
    old = (logps + 0.2 * torch.randn(3, 16, generator=generator)).bfloat16().float()
    mask = torch.ones(3, 16)
    mask[2, 9:] = 0
    advantages = torch.tensor([1.0, -0.5, 0.7])

    def loss(dtype, **overrides):
        params = ObjectiveParams(**{"objective": "grpo_lambda", "lam": 0.9, "loss_type": "bnpo", **overrides})
        return policy_loss(logps.to(dtype), old.to(dtype), None, advantages, mask, params)[0].float()

    half, full = loss(torch.bfloat16, **fields), loss(torch.float32, **fields)
    default = loss(torch.float32, lam=fields.get("lam", 0.9))
    assert abs(half.item() - full.item()) < 0.25 * abs(full.item() - default.item())
