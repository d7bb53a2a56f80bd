"""P-trace / S-trace as this project reads them (an interpretation of arXiv 2605.05965's abstract): a token's
ratio is the credit-weighted geometric mean of the ratios in its scope, inside the clip. The two ends of the
family are checked against TRL's own losses: κ = 0 is GRPO's token ratio, uniform credit over the sequence
(scope "sequence", λ = 1) is GSPO's sequence ratio; and the ratio stays bounded where a product would not."""

import pytest
import torch
from trl import GRPOConfig, GRPOTrainer

from grpo_lambda.objectives import ObjectiveParams, history_log_ratio, policy_loss
from grpo_lambda.trainer import GRPOLambdaTrainer
from grpo_lambda.trainer_config import GRPOLambdaConfig
from trainer_batch import assert_same, loss_grads_metrics, make_inputs, make_trainer

GSPO = {"loss_type": "grpo", "epsilon": 3e-4, "epsilon_high": 4e-4}  # GSPO's clip range (TRL's recipe)
# TRL averages its clip fractions over sequences when the ratio is one per sequence; ours are token means.
PER_SEQUENCE_IN_TRL = ("clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean")


def assert_same_but_token_level_clip_means(ours, theirs):
    """Loss, gradients (to float32 rounding of the mean: 1e-5 of each tensor's largest entry) and TRL's metrics."""
    (loss, grads, metrics), (trl_loss, trl_grads, trl_metrics) = ours, theirs
    torch.testing.assert_close(loss, trl_loss, rtol=1e-6, atol=1e-9)
    assert grads.keys() == trl_grads.keys() and grads
    for name in grads:
        assert (grads[name] - trl_grads[name]).abs().max() <= 1e-5 * trl_grads[name].abs().max(), name
    for name, value in trl_metrics.items():
        if name not in PER_SEQUENCE_IN_TRL:
            assert metrics[name] == pytest.approx(value, rel=1e-6, abs=1e-9), name


@pytest.mark.parametrize("objective", ["ptrace", "strace"])
@pytest.mark.parametrize("extra", [GSPO, {"loss_type": "dapo", "beta": 0.04, "use_bias_correction_kl": False},
                                   {"loss_type": "bnpo", "epsilon": 0.2, "gradient_accumulation_steps": 2}])
def test_uniform_credit_over_the_sequence_is_trls_gspo(model_dir, tmp_path, objective, extra):
    """Scope "sequence", λ = 1 (S-trace at quantile 0): TRL's importance_sampling_level="sequence" loss,
    gradients and metrics, off-policy."""
    theirs = make_trainer(model_dir, GRPOTrainer, GRPOConfig, tmp_path / "trl", importance_sampling_level="sequence",
                          **extra)
    ours = make_trainer(model_dir, GRPOLambdaTrainer, GRPOLambdaConfig, tmp_path / "ours", objective=objective,
                        trace_lambda=1.0, history_scope="sequence", strace_quantile=0.0, **extra)
    inputs = make_inputs(theirs, off_policy=True, with_ref=extra.get("beta", 0.0) > 0)
    accumulation = extra.get("gradient_accumulation_steps", 1)
    mine, trl = loss_grads_metrics(ours, inputs, accumulation), loss_grads_metrics(theirs, inputs, accumulation)
    assert_same_but_token_level_clip_means(mine, trl)
    mask = inputs["completion_mask"].float()
    for side in ("low", "high"):  # the same sequences are clipped: TRL's fraction of sequences, weighted by length
        assert (mine[2][f"clip_ratio/{side}_mean"] == 0) == (trl[2][f"clip_ratio/{side}_mean"] == 0), side
    assert mine[2]["clip_ratio/high_max"] == trl[2]["clip_ratio/high_max"] and mask.sum() > 0


@pytest.mark.parametrize("scope", ["past", "sequence"])
def test_lambda_zero_is_trls_token_level_grpo(model_dir, tmp_path, scope):
    extra = {"loss_type": "dapo", "beta": 0.04, "epsilon_high": 0.28}
    theirs = make_trainer(model_dir, GRPOTrainer, GRPOConfig, tmp_path / "trl", **extra)
    ours = make_trainer(model_dir, GRPOLambdaTrainer, GRPOLambdaConfig, tmp_path / "ours", objective="ptrace",
                        trace_lambda=0.0, history_scope=scope, **extra)
    inputs = make_inputs(theirs, off_policy=True, with_ref=True)
    assert_same(loss_grads_metrics(ours, inputs, 1), loss_grads_metrics(theirs, inputs, 1))


def test_the_comparisons_gspo_as_trace_line_is_its_gspo_line(model_dir, tmp_path):
    """config/compare.yaml's check lines, built as the pipeline builds them: gspo-as-trace computes gspo's loss and
    gradients, and grpo-lambda-0 computes grpo's, on the same off-policy batch with a reference model.

    With TRL 1.16's KL bias correction (use_bias_correction_kl, on by default) they part where β > 0: TRL
    multiplies GSPO's KL by the sequence ratio, this project's objectives by the token ratio (0.2% of the loss
    on this batch). The comparison runs at β = 0, where the correction does not arise."""
    import yaml

    from conftest import ROOT
    from grpo_lambda.variants import variant_config_kwargs

    lines = yaml.safe_load((ROOT / "config" / "compare.yaml").read_text())["variants"]
    for check, reference in (("gspo-as-trace", "gspo"), ("grpo-lambda-0", "grpo")):
        trainers = [make_trainer(model_dir, GRPOLambdaTrainer, GRPOLambdaConfig, tmp_path / name, beta=0.04,
                                 use_bias_correction_kl=False,
                                 **variant_config_kwargs(lines[name])) for name in (check, reference)]
        inputs = make_inputs(trainers[1], off_policy=True, with_ref=True)
        mine, theirs = (loss_grads_metrics(trainer, inputs, 1) for trainer in trainers)
        compare = assert_same_but_token_level_clip_means if reference == "gspo" else assert_same
        compare(mine, theirs)


def test_the_past_scope_is_not_gspo(model_dir, tmp_path):
    """λ = 1 over the past only is the running mean exp(mean_{k≤t} log ρ_k): GSPO's ratio at the last token only."""
    theirs = make_trainer(model_dir, GRPOTrainer, GRPOConfig, tmp_path / "trl", importance_sampling_level="sequence",
                          **GSPO)
    ours = make_trainer(model_dir, GRPOLambdaTrainer, GRPOLambdaConfig, tmp_path / "ours", objective="ptrace",
                        trace_lambda=1.0, history_scope="past", **GSPO)
    inputs = make_inputs(theirs, off_policy=True, with_ref=False)
    assert abs(loss_grads_metrics(ours, inputs, 1)[0] - loss_grads_metrics(theirs, inputs, 1)[0]) > 1e-6


# --- the bound --------------------------------------------------------------------------------------


@pytest.mark.parametrize("scope", ["past", "sequence"])
@pytest.mark.parametrize("lam", [0.5, 0.99, 1.0])
def test_ratio_lies_between_the_smallest_and_largest_ratio_of_its_scope(scope, lam):
    generator = torch.Generator().manual_seed(5)
    log_ratio = 0.5 * torch.randn(6, 64, generator=generator, dtype=torch.float64)
    mask = (torch.rand(6, 64, generator=generator) < 0.7).double()
    log_coef, credit = history_log_ratio(log_ratio, mask, lam, scope=scope)
    t = torch.arange(64)
    in_scope = (t.unsqueeze(0) <= t.unsqueeze(1)) if scope == "past" else torch.ones(64, 64, dtype=torch.bool)
    # token t's scope: itself, and the masked tokens of its scope
    members = (in_scope.unsqueeze(0) & mask.bool().unsqueeze(1)) | torch.eye(64, dtype=torch.bool)
    values = log_ratio.unsqueeze(1).expand(-1, 64, -1)
    lowest = values.masked_fill(~members, float("inf")).amin(-1)
    highest = values.masked_fill(~members, float("-inf")).amax(-1)
    assert (log_coef >= lowest - 1e-12).all() and (log_coef <= highest + 1e-12).all()
    assert (credit >= 1).all() and not credit.requires_grad


def test_a_steady_drift_does_not_compound():
    """+0.01 per-token log-ratio over 256 tokens: the ratio stays exp(0.01) at every position (a product of
    the earlier ratios, decayed at 0.99, would reach about exp(0.92) ≈ 2.5 by the last token)."""
    log_ratio = torch.full((1, 256), 0.01, dtype=torch.float64)
    for scope in ("past", "sequence"):
        log_coef, _ = history_log_ratio(log_ratio, torch.ones_like(log_ratio), 0.99, scope=scope)
        torch.testing.assert_close(log_coef, log_ratio, rtol=1e-12, atol=1e-14)
    decayed_sum = sum(0.99 ** lag * 0.01 for lag in range(1, 256))
    assert decayed_sum > 0.9  # what the unnormalised reading would have put in the exponent


def test_the_clip_bounds_the_trust_region():
    """A ratio past 1 + ε_high with A > 0 (or below 1 − ε_low with A < 0) contributes no gradient; the per-token
    objective is then the clipped constant; with TRL's delta the unclipped side is capped too."""
    generator = torch.Generator().manual_seed(6)
    logps = (-torch.rand(4, 32, generator=generator, dtype=torch.float64)).requires_grad_()
    drift = torch.linspace(-0.6, 0.6, 4, dtype=torch.float64).unsqueeze(1)  # whole sequences pushed off-policy
    old_logps = logps.detach() - drift - 0.05 * torch.randn(4, 32, generator=generator, dtype=torch.float64)
    mask = torch.ones(4, 32, dtype=torch.float64)
    advantages = torch.tensor([-1.0, -1.0, 1.0, 1.0], dtype=torch.float64)
    params = ObjectiveParams(objective="ptrace", lam=0.9, loss_type="bnpo", history_scope="sequence")
    loss, metrics = policy_loss(logps, old_logps, None, advantages, mask, params)
    (grad,) = torch.autograd.grad(loss, logps)
    log_coef, _ = history_log_ratio((logps - old_logps).detach(), mask, 0.9, scope="sequence")
    coef = log_coef.exp()
    assert (coef[3] > 1.2).all() and (coef[0] < 0.8).all()  # both rows outside [1 − ε, 1 + ε] at every token
    # Row 3 (A > 0, ratio high) and row 0 (A < 0, ratio low): the clipped constant, no gradient; the others learn.
    assert (grad[3] == 0).all() and (grad[0] == 0).all() and (grad[1] != 0).any()
    assert metrics["clip_ratio/high"][3].all() and metrics["clip_ratio/low"][0].all()
    # A < 0 with a high ratio (row 3, advantage flipped) is the side PPO leaves open: loss_t = |A| s_t.
    # TRL's delta caps it: loss_t = |A| max(min(s_t, δ), clip(s_t)) = 1 + ε_high here.
    row = dict(logps=logps[3:].detach(), old_logps=old_logps[3:], mask=mask[3:], advantages=torch.tensor([-1.0]))
    open_loss, _ = policy_loss(row["logps"], row["old_logps"], None, row["advantages"].double(), row["mask"], params)
    capped = ObjectiveParams(objective="ptrace", lam=0.9, loss_type="bnpo", history_scope="sequence", delta=1.1)
    capped_loss, _ = policy_loss(row["logps"], row["old_logps"], None, row["advantages"].double(), row["mask"], capped)
    assert open_loss.item() == pytest.approx(coef[3].mean().item(), rel=1e-12) and open_loss.item() > 1.2
    assert capped_loss.item() == pytest.approx(1.2, rel=1e-12)


def test_bad_scope_is_refused():
    with pytest.raises(ValueError, match="history_scope"):
        ObjectiveParams(objective="ptrace", history_scope="future")
    with pytest.raises(ValueError, match="scope"):
        history_log_ratio(torch.zeros(1, 3), torch.ones(1, 3), 0.9, scope="future")


def test_variant_key_scope_sets_the_history_scope():
    from grpo_lambda.variants import variant_config_kwargs

    assert variant_config_kwargs({"objective": "strace", "scope": "sequence"})["history_scope"] == "sequence"
    with pytest.raises(ValueError, match="'scope' applies to objective 'ptrace' / 'strace' only"):
        variant_config_kwargs({"objective": "grpo_lambda", "lam": 0.9, "scope": "past"})
    with pytest.raises(ValueError, match="scope"):
        variant_config_kwargs({"objective": "ptrace", "scope": "all"})


def test_strace_readings_by_hand():
    """Three tokens, the middle one low-entropy (trace mask 0, 1 0 1), λ = 1, scope past. lend: the masked
    token lends nothing but receives its predecessor's ratio, (x2 + x1) / 2; the third gets (x3 + x1) / 2.
    exclude: the masked token keeps its own x2; the others are as in lend."""
    import torch

    from grpo_lambda.objectives import ObjectiveParams, _importance_weights

    x = torch.tensor([[0.3, -0.5, 0.8]])
    mask, trace_mask = torch.ones(1, 3), torch.tensor([[1.0, 0.0, 1.0]])
    logps = torch.zeros(1, 3)
    lend = ObjectiveParams(objective="strace", lam=1.0)
    exclude = ObjectiveParams(objective="strace", lam=1.0, strace_mode="exclude")
    lent, _, lent_credit = _importance_weights(logps, x, mask, lend, trace_mask)
    kept, _, kept_credit = _importance_weights(logps, x, mask, exclude, trace_mask)
    assert torch.allclose(lent, torch.tensor([[0.3, (-0.5 + 0.3) / 2, (0.8 + 0.3) / 2]]))
    assert torch.allclose(kept, torch.tensor([[0.3, -0.5, (0.8 + 0.3) / 2]]))
    assert lent_credit.tolist() == [[1.0, 2.0, 2.0]] and kept_credit.tolist() == [[1.0, 1.0, 2.0]]
