"""GRPO-λ as a verl policy loss: import this module in a verl process and ``loss_mode=grpo_lambda`` is the package's
objective (`grpo_lambda.objectives.per_token_policy_loss`), aggregated over the tokens by verl's own ``agg_loss``.

Settings live in verl's policy-loss config. verl builds that config from its ``_target_`` (hydra), and verl's
``PolicyLossConfig`` takes no unknown key, so the settings come with a config class of their own:

    actor_rollout_ref.actor.policy_loss._target_=grpo_lambda.integrations.verl.GRPOLambdaLossConfig
    actor_rollout_ref.actor.policy_loss.loss_mode=grpo_lambda
    +actor_rollout_ref.actor.policy_loss.lam=0.99 +actor_rollout_ref.actor.policy_loss.form=absolute ...

Keys (`SETTINGS`): objective (grpo_lambda, ptrace or grpo), lam, gamma, style, form, eps, update (trace, weight,
position), trace_length, advantage_clamp, delta, history_scope: `grpo_lambda.objectives.ObjectiveParams`'s, with its
defaults and checks; a bad value is refused when the config is built, naming its key. The clip range is verl's
(actor clip_ratio_low / clip_ratio_high); the normalisation is verl's loss_agg_mode; verl's KL loss (use_kl_loss)
and entropy bonus are added by verl outside the policy loss; its rollout importance weights multiply the
per-token loss. verl registers the loss when this module is imported: the package's ``verl.plugins`` entry point
does so in every verl process (driver and Ray workers) where the package is installed.

Advantage estimators: verl hands a registered estimator the token-level rewards, the response mask, the group
ids and its algorithm config only; each of the package's per-token estimators (otb, tempo, delta_v_bound, oar)
reads statistics of the policy or the completions that verl does not pass, so none is registered. verl's own
``optimal_token_baseline`` is the reading `grpo_lambda.advantages.otb_advantages` implements (docs/verl.md).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import torch
from verl.trainer.ppo.core_algos import agg_loss, register_policy_loss
from verl.workers.config import PolicyLossConfig

from grpo_lambda.objectives import ObjectiveParams, masked_mean, per_token_policy_loss

LOSS_MODE = "grpo_lambda"
# Where verl's config holds the settings: named in every refusal.
CONFIG_PATH = "actor_rollout_ref.actor.policy_loss"
# The objectives whose loss needs nothing but log-probs, advantages and the mask (S-trace also needs the tokens'
# entropies, which verl's policy loss is not given).
OBJECTIVES = ("grpo_lambda", "ptrace", "grpo")
DEFAULTS = ObjectiveParams(objective="grpo_lambda")
SETTINGS = ("objective", "lam", "gamma", "style", "form", "eps", "update", "trace_length", "advantage_clamp",
            "delta", "history_scope")


@dataclasses.dataclass
class GRPOLambdaLossConfig(PolicyLossConfig):
    """verl's policy-loss config with the objective's settings (module docstring); checked when built."""

    loss_mode: str = LOSS_MODE
    objective: str = DEFAULTS.objective
    lam: float = DEFAULTS.lam
    gamma: float = DEFAULTS.gamma
    style: str = DEFAULTS.style
    form: str = DEFAULTS.form
    eps: float = DEFAULTS.eps
    update: str = DEFAULTS.update
    # a positive int, "batch_max", "per_sequence" or None (the padded response width): Any, as omegaconf types no union
    trace_length: Any = DEFAULTS.trace_length
    advantage_clamp: Optional[float] = DEFAULTS.advantage_clamp
    delta: Optional[float] = DEFAULTS.delta
    history_scope: str = DEFAULTS.history_scope

    def __post_init__(self):
        parent = getattr(super(), "__post_init__", None)
        if parent is not None:
            parent()
        # the settings alone: the clip range is the actor's, which verl checks and the loss reads at each call
        objective_params(self, clip_ratio_low=0.2, clip_ratio_high=0.2)


def objective_params(policy_loss, *, clip_ratio_low: float, clip_ratio_high: float) -> ObjectiveParams:
    """The package's ObjectiveParams from verl's policy-loss config (a `GRPOLambdaLossConfig`, or any mapping with
    the `SETTINGS` keys); ValueError naming the key when one is missing or bad."""
    missing = [key for key in SETTINGS if policy_loss.get(key, None) is None and getattr(DEFAULTS, key) is not None]
    if missing:
        raise ValueError(f"{CONFIG_PATH}.{missing[0]} is not set: loss_mode {LOSS_MODE!r} reads its settings from "
                         f"{CONFIG_PATH}._target_=grpo_lambda.integrations.verl.GRPOLambdaLossConfig")
    settings = {key: policy_loss.get(key, None) for key in SETTINGS}
    if settings["objective"] not in OBJECTIVES:
        raise ValueError(f"{CONFIG_PATH}.objective must be one of {OBJECTIVES}, got {settings['objective']!r} "
                         "(strace needs token entropies, which verl's policy loss is not given)")
    try:
        return ObjectiveParams(**settings, epsilon_low=clip_ratio_low, epsilon_high=clip_ratio_high)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{CONFIG_PATH}.{error}") from None


@register_policy_loss(LOSS_MODE)
def compute_policy_loss_grpo_lambda(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    config=None,
    rollout_is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """verl's policy-loss signature: the package's per-token loss, aggregated by verl's agg_loss with the actor's
    global batch information (its data-parallel size and token and sequence counts)."""
    if config is None:
        raise ValueError(f"loss_mode {LOSS_MODE!r} needs the actor config (its {CONFIG_PATH} holds the settings)")
    clip_ratio = config.get("clip_ratio", 0.2)
    low, high = config.get("clip_ratio_low", None), config.get("clip_ratio_high", None)
    params = objective_params(config.policy_loss, clip_ratio_low=clip_ratio if low is None else low,
                              clip_ratio_high=clip_ratio if high is None else high)
    mask = response_mask.to(log_prob.dtype)
    per_token, metrics = per_token_policy_loss(log_prob, old_log_prob, None, advantages, mask, params,
                                               token_weights=rollout_is_weights)
    loss = agg_loss(loss_mat=per_token, loss_mask=mask, loss_agg_mode=loss_agg_mode,
                    **(config.get("global_batch_info", None) or {}))
    with torch.no_grad():
        reported = {"actor/pg_clipfrac": masked_mean(metrics["clip_ratio/region"], mask),
                    "actor/pg_clipfrac_lower": masked_mean(metrics["clip_ratio/low"], mask),
                    "actor/ppo_kl": masked_mean(old_log_prob - log_prob, mask)}
        if "trace_weight" in metrics:
            reported["actor/trace_weight"] = masked_mean(metrics["trace_weight"], mask)
    return loss, {name: value.item() for name, value in reported.items()}
