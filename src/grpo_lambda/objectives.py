"""Per-token policy objectives: GRPO and GRPO-λ (ε-trace and ε-weight), as pure torch functions.

Every objective shares one skeleton (that of TRL 1.16's GRPOTrainer._compute_loss):

    coef_t   = exp(log importance weight_t)                       objective-specific
    loss_t   = −min(coef_t A_t, clip(coef_t, 1 − ε_low, 1 + ε_high) A_t) · extra_t · token_weight_t
               + β · KL_t                                         KL_t = exp(r_t − ℓ_t) − (r_t − ℓ_t) − 1
    loss     = the loss_type's normalisation of Σ mask_t loss_t

with ℓ = log π_θ(y_t), ℓ_old = log π_old(y_t), r = log π_ref(y_t), A the advantage (per sequence or
per token; clamped from below at `advantage_clamp` when set). The objectives differ only in
`_importance_weights` (the log coefficient and the optional extra per-token factor):

- ``grpo``: log coef_t = ℓ_t − ℓ_old,t; no extra factor.
- ``grpo_lambda``, update ``trace`` (ε-trace, paper Eq. 1–2): log coef_t = Σ_{c≤t} W[t,c](ℓ_c − ℓ_old,c).
- ``grpo_lambda``, update ``weight`` (ε-weight, authors' released code): the GRPO coefficient, and
  extra_t = Σ_{c≤t} W[t,c](1 + σ(ℓ_c − 1)), not detached.

W is the trace matrix of `grpo_lambda.traces`. A later objective (a sequence-level ratio, P-trace,
per-token advantage weights, ...) is one more branch there plus its fields in `ObjectiveParams`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from grpo_lambda.traces import FORMS, STYLES, apply_trace

OBJECTIVES = ("grpo", "grpo_lambda")
UPDATES = ("trace", "weight")
# The normalisations of TRL's GRPOTrainer that this module reproduces.
LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo")


@dataclass(frozen=True)
class ObjectiveParams:
    """What a policy objective needs besides the batch.

    objective             "grpo" | "grpo_lambda"
    lam, gamma            trace decay κ = γλ (grpo_lambda)
    style, form, eps      trace matrix shape and floor ε (see grpo_lambda.traces)
    update                "trace": the traced ratio inside the clip | "weight": per-token loss × trace
    advantage_clamp       advantages below it are raised to it (paper: −0.1); None: no clamp
    beta                  KL coefficient (k3 estimator to the reference policy)
    kl_ratio_correction   multiply the KL by the token ratio π_θ/π_old (TRL's use_bias_correction_kl)
    epsilon_low/high      PPO clip range (1 − ε_low, 1 + ε_high)
    delta                 upper cap on the unclipped ratio (TRL's two-sided clip); None: off
    loss_type             "grpo" | "bnpo" | "dr_grpo" | "dapo", as in TRL
    max_completion_length the constant of dr_grpo's normalisation
    """

    objective: str = "grpo"
    lam: float = 0.0
    gamma: float = 1.0
    style: str = "recent"
    form: str = "relative"
    eps: float = 0.0
    update: str = "trace"
    advantage_clamp: float | None = None
    beta: float = 0.0
    kl_ratio_correction: bool = True
    epsilon_low: float = 0.2
    epsilon_high: float = 0.2
    delta: float | None = None
    loss_type: str = "dapo"
    max_completion_length: int | None = None

    def __post_init__(self):
        choices = {"objective": OBJECTIVES, "update": UPDATES, "loss_type": LOSS_TYPES, "style": STYLES,
                   "form": FORMS}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        if not 0.0 <= self.lam <= 1.0:
            raise ValueError(f"lam must lie in [0, 1], got {self.lam!r}")
        if not 0.0 < self.gamma <= 1.0:
            raise ValueError(f"gamma must lie in (0, 1], got {self.gamma!r}")
        if self.eps < 0.0:
            raise ValueError(f"eps must be >= 0, got {self.eps!r}")
        if self.advantage_clamp is not None and self.advantage_clamp > 0.0:
            raise ValueError(f"advantage_clamp must be <= 0 or None, got {self.advantage_clamp!r}")
        if self.beta < 0.0:
            raise ValueError(f"beta must be >= 0, got {self.beta!r}")
        if self.epsilon_low < 0.0 or self.epsilon_high < 0.0:
            raise ValueError(f"epsilon_low and epsilon_high must be >= 0, got {self.epsilon_low!r}, "
                             f"{self.epsilon_high!r}")
        if self.loss_type == "dr_grpo" and not (self.max_completion_length or 0) > 0:
            raise ValueError("max_completion_length must be a positive int for loss_type 'dr_grpo', "
                             f"got {self.max_completion_length!r}")

    @property
    def traced(self) -> bool:
        return self.objective == "grpo_lambda"


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Σ values·mask / Σ mask (0 when the mask is empty)."""
    values = values.expand_as(mask)
    return (values * mask).sum() / mask.sum().clamp(min=1.0)


def policy_loss(
    logps: torch.Tensor,
    old_logps: torch.Tensor | None,
    ref_logps: torch.Tensor | None,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    params: ObjectiveParams,
    *,
    token_weights: torch.Tensor | None = None,
    num_items: torch.Tensor | float | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The policy loss of the module docstring and its per-token metrics.

    logps, old_logps, ref_logps, mask: (B, T). old_logps None means on-policy (logps.detach(), as TRL
    does); ref_logps is needed only when beta > 0. advantages: (B,), (B, 1) or (B, T).
    token_weights: optional detached factors of the policy term (not of the KL), broadcastable to
    (B, T): TRL's off-policy mask, high-entropy mask, vLLM importance-sampling ratio.
    num_items: the token count dapo divides by, used as given (TRL: num_items_in_batch clamped and
    scaled to one accumulation window); default mask.sum() (at least 1).

    Returns the loss (not scaled for gradient accumulation) and per-token metrics, detached, each
    broadcastable to (B, T) and meant to be averaged over the mask (e.g. with `masked_mean`):
    clip_ratio/low, clip_ratio/high, clip_ratio/region, trace_weight (grpo_lambda: the row sum
    Σ_c W[t,c] mask_c for the trace update, the factor e_t for the weight update), kl (beta > 0).
    """
    _check_shapes(logps, old_logps, ref_logps, advantages, mask, params)
    mask = mask.to(logps.dtype)
    if old_logps is None:
        old_logps = logps.detach()
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1)
    if params.advantage_clamp is not None:
        advantages = advantages.clamp(min=params.advantage_clamp)

    log_ratio = logps - old_logps
    log_coef, extra_factor, trace_weight = _importance_weights(logps, log_ratio, mask, params)
    coef_1 = torch.exp(log_coef)
    coef_2 = torch.clamp(coef_1, 1 - params.epsilon_low, 1 + params.epsilon_high)
    unclipped = coef_1 if params.delta is None else torch.clamp(coef_1, max=params.delta)
    per_token_loss = -torch.min(unclipped * advantages, coef_2 * advantages)
    if extra_factor is not None:
        per_token_loss = per_token_loss * extra_factor
    if token_weights is not None:
        per_token_loss = per_token_loss * token_weights

    metrics = {}
    if params.beta != 0.0:
        delta_ref = ref_logps - logps
        per_token_kl = torch.exp(delta_ref) - delta_ref - 1
        if params.kl_ratio_correction:
            per_token_kl = per_token_kl * torch.exp(log_ratio)
        per_token_loss = per_token_loss + params.beta * per_token_kl
        metrics["kl"] = per_token_kl.detach()

    loss = _normalise(per_token_loss, mask, params, num_items)

    with torch.no_grad():
        is_low = (unclipped < 1 - params.epsilon_low) & (advantages < 0)
        is_high = (unclipped > 1 + params.epsilon_high) & (advantages > 0)
        metrics["clip_ratio/low"] = is_low.to(logps.dtype)
        metrics["clip_ratio/high"] = is_high.to(logps.dtype)
        metrics["clip_ratio/region"] = (is_low | is_high).to(logps.dtype)
        if trace_weight is not None:
            metrics["trace_weight"] = trace_weight.detach()
    return loss, metrics


def _importance_weights(logps, log_ratio, mask, params):
    """(log coefficient, extra per-token factor or None, trace weight for logging or None)."""
    if not params.traced:
        return log_ratio, None, None
    trace = dict(gamma=params.gamma, style=params.style, form=params.form, eps=params.eps, mask=mask)
    if params.update == "trace":
        log_coef = _traced(log_ratio, params.lam, trace)
        with torch.no_grad():
            row_sums = apply_trace(torch.ones_like(mask, dtype=torch.float32), params.lam, **trace)
        return log_coef, None, row_sums.to(logps.dtype)
    # weight: gradient flows through the factor, as in the authors' code
    factor = _traced(1 + torch.sigmoid(logps - 1), params.lam, trace)
    return log_ratio, factor, factor


def _traced(x: torch.Tensor, lam: float, trace: dict) -> torch.Tensor:
    """apply_trace in at least float32: a bfloat16 sum over hundreds of tokens loses too much."""
    if x.dtype in (torch.float16, torch.bfloat16):
        return apply_trace(x.float(), lam, **trace).to(x.dtype)
    return apply_trace(x, lam, **trace)


def _normalise(per_token_loss, mask, params, num_items):
    """TRL 1.16's normalisations, before its division by the gradient-accumulation steps."""
    masked_sum = per_token_loss * mask
    if params.loss_type == "grpo":
        return (masked_sum.sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    if params.loss_type == "bnpo":
        return masked_sum.sum() / mask.sum().clamp(min=1.0)
    if params.loss_type == "dr_grpo":
        return masked_sum.sum() / (per_token_loss.size(0) * params.max_completion_length)
    # dapo: a given count is used as is (TRL has already clamped and rescaled it)
    if num_items is None:
        num_items = mask.sum().clamp(min=1.0)
    return masked_sum.sum() / num_items


def _check_shapes(logps, old_logps, ref_logps, advantages, mask, params):
    if not isinstance(params, ObjectiveParams):
        raise ValueError(f"params must be an ObjectiveParams, got {type(params).__name__}")
    if logps.dim() != 2:
        raise ValueError(f"logps must have shape (B, T), got {tuple(logps.shape)}")
    for name, tensor in (("old_logps", old_logps), ("ref_logps", ref_logps), ("mask", mask)):
        if tensor is not None and tensor.shape != logps.shape:
            raise ValueError(f"{name} must have the shape of logps {tuple(logps.shape)}, got {tuple(tensor.shape)}")
    if params.beta != 0.0 and ref_logps is None:
        raise ValueError("ref_logps is required when beta != 0")
    batch, length = logps.shape
    if advantages.shape not in ((batch,), (batch, 1), (batch, length)):
        raise ValueError(f"advantages must have shape ({batch},), ({batch}, 1) or ({batch}, {length}), "
                         f"got {tuple(advantages.shape)}")
