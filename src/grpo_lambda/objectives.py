"""Per-token policy objectives (GRPO, GRPO-λ, P-trace, S-trace), as pure torch.

Every objective shares one skeleton (that of TRL 1.16's GRPOTrainer._compute_loss):

    coef_t   = exp(log importance weight_t)                       objective-specific
    loss_t   = −min(coef_t A_t, clip(coef_t, 1 − ε_low, 1 + ε_high) A_t) · extra_t · token_weight_t
               + β · KL_t                                         KL_t = exp(r_t − ℓ_t) − (r_t − ℓ_t) − 1
    loss     = the loss_type's normalisation of Σ mask_t loss_t

with ℓ = log π_θ(y_t), ℓ_old = log π_old(y_t), r = log π_ref(y_t), A the advantage (per sequence or
per token; clamped from below at `advantage_clamp` when set). The objectives differ only in their
importance weights (the log coefficient and the optional extra per-token factor), one function each in
``IMPORTANCE_WEIGHTS``:

- ``grpo``: log coef_t = ℓ_t − ℓ_old,t; no extra factor.
- ``grpo_lambda``, update ``trace`` (ε-trace, paper Eq. 1–2): log coef_t = Σ_{c≤t} W[t,c](ℓ_c − ℓ_old,c).
- ``grpo_lambda``, update ``weight`` (ε-weight, authors' released code): the GRPO coefficient, and
  extra_t = Σ_{c≤t} W[t,c](1 + σ(ℓ_c − 1)), not detached.
- ``grpo_lambda``, update ``position`` (ε-weight as §3.2 words it): the GRPO coefficient, and
  extra_t = Σ_{l=0}^{t} (γλ)^l (Eq. 2's max((γλ)^l, (γλ)^(t−l)) for style both), a constant of the position.
- ``ptrace`` (P-trace, arXiv 2605.05965; an INTERPRETATION of its abstract, the only public text, which
  calls its traces approximate historical importance weights with a partial trust region, and GSPO the
  special case of uniform credit assignment): the ratio of token t is a credit-weighted geometric mean of
  the ratios ρ_k = π_θ(y_k)/π_old(y_k) of the tokens in its scope,

      log coef_t = Σ_k C[t,k] log ρ_k / Σ_k C[t,k],   C[t,t] = 1,   C[t,k] = κ^|t−k| m_k (k ≠ t in scope),

  scope "past" (k < t: the history, the default) or "sequence" (every token of the sequence), m = the
  completion mask. coef_t enters the clip like any ratio, and the gradient flows through every log ρ_k
  of the mean (as in GSPO and the ε-trace). κ = 0 gives GRPO's token ratio ρ_t; scope "sequence" with
  κ = 1 gives uniform weights over the sequence, exp(mean_k log ρ_k): GSPO's sequence ratio (TRL's
  importance_sampling_level="sequence"). Being a weighted mean, log coef_t lies between the smallest and
  the largest log ρ_k of its scope, so it does not grow with t as a product of ratios would, and the
  clip bounds the trust region as for GRPO.
- ``strace`` (S-trace, same source and caveat): P-trace whose credit reaches only the tokens of
  ``trace_mask`` (m = completion mask × trace_mask; each token keeps its own ratio): the trainer keeps
  the tokens whose entropy is at or above a batch quantile q, so q = 0 is P-trace. Two readings of
  "masking low-entropy tokens" (``strace_mode``): ``lend`` (the default), masked tokens lend no credit
  but still receive their traced ratio; ``exclude``, masked tokens carry no trace at all and keep their
  own ratio ρ_t.

W is the trace matrix of `grpo_lambda.traces`, κ = γλ. GSPO, Dr. GRPO and DAPO need no branch here:
they are TRL options (importance_sampling_level, loss_type, scale_rewards, epsilon_high).

OAR (arXiv 2601.07408) reshapes per-token advantages rather than the ratio: its token scores and weights
are `grpo_lambda.oar_scores`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from grpo_lambda.traces import FORMS, STYLES, apply_trace
from grpo_lambda.variants import (  # torch-free, for the config's checks
    BATCH_MAX, HISTORY_OBJECTIVES, OBJECTIVES, PER_SEQUENCE, check_trace_length)

UPDATES = ("trace", "weight", "position")
# S-trace's readings of "masking low-entropy tokens": they lend nothing, or they carry no trace at all.
STRACE_MODES = ("lend", "exclude")
# Which tokens lend their ratio to a token's P-trace / S-trace ratio.
HISTORY_SCOPES = ("past", "sequence")
# The normalisations of TRL's GRPOTrainer that this module reproduces.
LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo")


@dataclass(frozen=True)
class ObjectiveParams:
    """What a policy objective needs besides the batch.

    objective             "grpo" | "grpo_lambda" | "ptrace" | "strace"
    lam, gamma            trace decay κ = γλ (grpo_lambda, ptrace, strace)
    style, form, eps      trace matrix shape and floor ε (see grpo_lambda.traces)
    update                "trace": the traced ratio inside the clip | "weight": per-token loss × trace
                          of 1 + σ(log π − 1) (Algorithm 2) | "position": per-token loss × §3.2's
                          Σ_{l=0}^{t} (γλ)^l (`position_weight`: a weight per position, no log-probs)
    advantage_clamp       advantages below it are raised to it (paper: −0.1); None: no clamp
    beta                  KL coefficient (k3 estimator to the reference policy)
    kl_ratio_correction   multiply the KL by the token ratio π_θ/π_old (TRL's use_bias_correction_kl)
    epsilon_low/high      PPO clip range (1 − ε_low, 1 + ε_high)
    delta                 upper cap on the unclipped ratio (TRL's two-sided clip); None: off
    loss_type             "grpo" | "bnpo" | "dr_grpo" | "dapo", as in TRL
    max_completion_length the constant of dr_grpo's normalisation
    history_scope         ptrace/strace: "past" (credit from earlier tokens) or "sequence" (from every token)
    strace_mode           strace: "lend" (masked tokens lend nothing, still receive) or "exclude" (they keep ρ_t)
    trace_length          the absolute form's n: a constant of the run (e.g. max_completion_length, so that a
                          token's weights do not depend on its batch); "batch_max": the longest completion of
                          the batch (the released code's use_batch_max_for_trace); "per_sequence": each
                          completion's own length (use_batch_max_for_trace: false); None: the batch width
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
    trace_length: int | str | None = None
    history_scope: str = "past"
    strace_mode: str = "lend"

    def __post_init__(self):
        choices = {"objective": tuple(OBJECTIVES), "update": UPDATES, "loss_type": LOSS_TYPES, "style": STYLES,
                   "form": FORMS, "history_scope": HISTORY_SCOPES, "strace_mode": STRACE_MODES}
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
        check_trace_length(self.trace_length)
        if self.loss_type == "dr_grpo" and not (self.max_completion_length or 0) > 0:
            raise ValueError("max_completion_length must be a positive int for loss_type 'dr_grpo', "
                             f"got {self.max_completion_length!r}")

    @property
    def traced(self) -> bool:
        """The GRPO-λ trace matrix W shapes the ratio or the per-token factor."""
        return self.objective == "grpo_lambda"

    @property
    def history_weighted(self) -> bool:
        """The ratio is the credit-weighted geometric mean of the scope's ratios (P-trace, S-trace)."""
        return self.objective in HISTORY_OBJECTIVES


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
    trace_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The policy loss of the module docstring and its per-token metrics.

    logps, old_logps, ref_logps, mask: (B, T). old_logps None means on-policy (logps.detach(), as TRL
    does); ref_logps is needed only when beta > 0. advantages: (B,), (B, 1) or (B, T).
    token_weights: optional detached factors of the policy term (not of the KL), broadcastable to
    (B, T): TRL's off-policy mask, high-entropy mask, vLLM importance-sampling ratio.
    num_items: the token count dapo divides by, used as given (TRL: num_items_in_batch clamped and
    scaled to one accumulation window); default mask.sum() (at least 1).
    trace_mask: (B, T) 0/1, required by ``strace`` and refused by the others: the tokens whose log-ratio
    lends credit to the other tokens' ratios (e.g. `high_entropy_mask`).

    Returns the loss (not scaled for gradient accumulation) and per-token metrics, detached, each
    broadcastable to (B, T) and meant to be averaged over the mask (e.g. with `masked_mean`):
    clip_ratio/low, clip_ratio/high, clip_ratio/region, trace_weight (grpo_lambda: the row sum
    Σ_c W[t,c] mask_c for the trace update, the factor e_t for the weight update; ptrace and strace:
    the credit mass Σ_k C[t,k]), kl (beta > 0).
    """
    per_token_loss, metrics = per_token_policy_loss(logps, old_logps, ref_logps, advantages, mask, params,
                                                    token_weights=token_weights, trace_mask=trace_mask)
    return _normalise(per_token_loss, mask.to(logps.dtype), params, num_items), metrics


def per_token_policy_loss(
    logps: torch.Tensor,
    old_logps: torch.Tensor | None,
    ref_logps: torch.Tensor | None,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    params: ObjectiveParams,
    *,
    token_weights: torch.Tensor | None = None,
    trace_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """`policy_loss` before the loss_type's normalisation: the (B, T) per-token loss (masked tokens
    included, as computed; a normalisation multiplies them by the mask) and the same metrics. For an
    engine that aggregates the tokens itself (verl's agg_loss: `grpo_lambda.integrations.verl`)."""
    _check_shapes(logps, old_logps, ref_logps, advantages, mask, params)
    _check_trace_mask(trace_mask, logps, params)
    mask = mask.to(logps.dtype)
    if old_logps is None:
        old_logps = logps.detach()
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1)
    if params.advantage_clamp is not None:
        advantages = advantages.clamp(min=params.advantage_clamp)

    log_ratio = logps - old_logps
    log_coef, extra_factor, trace_weight = _importance_weights(logps, log_ratio, mask, params, trace_mask)
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

    with torch.no_grad():
        is_low = (unclipped < 1 - params.epsilon_low) & (advantages < 0)
        is_high = (unclipped > 1 + params.epsilon_high) & (advantages > 0)
        metrics["clip_ratio/low"] = is_low.to(logps.dtype)
        metrics["clip_ratio/high"] = is_high.to(logps.dtype)
        metrics["clip_ratio/region"] = (is_low | is_high).to(logps.dtype)
        if trace_weight is not None:
            metrics["trace_weight"] = trace_weight.detach()
    return per_token_loss, metrics


def _importance_weights(logps, log_ratio, mask, params, trace_mask):
    """(log coefficient, extra per-token factor or None, trace weight for logging or None)."""
    return IMPORTANCE_WEIGHTS[params.objective](logps, log_ratio, mask, params, trace_mask)


def _token_ratio(logps, log_ratio, mask, params, trace_mask):
    """GRPO: each token's own ratio."""
    return log_ratio, None, None


def _history_ratio(logps, log_ratio, mask, params, trace_mask):
    """P-trace and S-trace: the credit-weighted geometric mean of the scope's ratios (`history_log_ratio`)."""
    in_trace = mask if trace_mask is None else mask * trace_mask.to(mask.dtype)
    log_coef, credit = history_log_ratio(log_ratio, in_trace, params.lam, gamma=params.gamma,
                                         scope=params.history_scope)
    if params.objective == "strace" and params.strace_mode == "exclude":
        keeps_trace = trace_mask.to(torch.bool)
        log_coef = torch.where(keeps_trace, log_coef, log_ratio)
        credit = torch.where(keeps_trace, credit, torch.ones_like(credit))
    return log_coef, None, credit


def _traced_ratio(logps, log_ratio, mask, params, trace_mask):
    """GRPO-λ: the traced ratio (ε-trace) or the ratio times the trace of 1 + σ(log π − 1) (ε-weight)."""
    if params.update == "trace":
        log_coef = trace(log_ratio, mask, params)
        with torch.no_grad():
            row_sums = trace(torch.ones_like(mask, dtype=torch.float32), mask, params)
        return log_coef, None, row_sums.to(logps.dtype)
    if params.update == "position":  # §3.2: a weight per position, no log-probs
        factor = position_weight(mask, params, dtype=_wide(logps.dtype))  # kept in ≥ float32
        return log_ratio, factor, factor
    # weight: gradient flows through the factor, as in the authors' code
    factor = trace(1 + torch.sigmoid(logps - 1), mask, params)
    return log_ratio, factor, factor


# Objective -> its importance weights f(logps, log_ratio, mask, params, trace_mask) -> (log coefficient, extra
# per-token factor or None, trace weight to log or None): where an objective's maths is registered (its name,
# its variant keys and their checks: grpo_lambda.variants.OBJECTIVES, OBJECTIVE_KEYS).
IMPORTANCE_WEIGHTS = {"grpo": _token_ratio, "grpo_lambda": _traced_ratio, "ptrace": _history_ratio,
                      "strace": _history_ratio}


def history_log_ratio(log_ratio: torch.Tensor, in_credit: torch.Tensor, lam: float, *, gamma: float = 1.0,
                      scope: str = "past") -> tuple[torch.Tensor, torch.Tensor]:
    """(log coef_t, credit mass Σ_k C[t,k]) of P-trace (module docstring), κ = γλ, m = in_credit.

    log coef_t = (log ρ_t + Σ_{k≠t} C[t,k] log ρ_k) / (1 + Σ_{k≠t} C[t,k]), C[t,k] = κ^|t−k| m_k for k < t
    (scope "past") or for every k ≠ t (scope "sequence"). Differentiable in log_ratio; the sums are the
    GRPO-λ relative/recent trace (read backwards for the later tokens), in at least float32. The credit
    mass is detached; both come back in log_ratio's dtype.
    """
    if scope not in HISTORY_SCOPES:
        raise ValueError(f"scope must be one of {HISTORY_SCOPES}, got {scope!r}")
    x = _at_least_float32(log_ratio)
    m = in_credit.to(x.dtype)

    def from_others(values):  # Σ_{k≠t in scope} κ^|t−k| values_k
        earlier = apply_trace(values, lam, gamma=gamma) - values
        if scope == "past":
            return earlier
        later = apply_trace(values.flip(-1), lam, gamma=gamma).flip(-1) - values
        return earlier + later

    with torch.no_grad():
        credit = 1.0 + from_others(m)
    log_coef = (x + from_others(x * m)) / credit
    return log_coef.to(log_ratio.dtype), credit.to(log_ratio.dtype)


def high_entropy_mask(entropies: torch.Tensor, mask: torch.Tensor, quantile: float) -> torch.Tensor:
    """1 where a token's entropy is at least the q-quantile of the batch's entropies (over the mask), else 0.

    S-trace's choice of trace tokens: q = 0.8 keeps the top 20 %, q = 0 keeps every token. The same rule
    as TRL's GRPOTrainer.get_high_entropy_mask on one process (the trainer uses TRL's, which pools all
    processes).
    """
    if isinstance(quantile, bool) or not isinstance(quantile, (int, float)) or not 0.0 <= quantile <= 1.0:
        raise ValueError(f"quantile must lie in [0, 1], got {quantile!r}")
    if entropies.shape != mask.shape:
        raise ValueError(f"mask must have the shape of entropies {tuple(entropies.shape)}, got {tuple(mask.shape)}")
    valid = mask.bool()
    entropies = _at_least_float32(entropies)  # the threshold in the dtype it is compared in
    values = entropies[valid]
    if values.numel() == 0:
        return torch.zeros_like(valid)
    return (entropies >= torch.quantile(values, quantile)) & valid


def _wide(dtype: torch.dtype) -> torch.dtype:
    """float32, or float64 when given: half-precision sums over hundreds of tokens lose too much."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _at_least_float32(x: torch.Tensor) -> torch.Tensor:
    return x.to(_wide(x.dtype))


def position_weight(mask: torch.Tensor, params: ObjectiveParams, *, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """§3.2's ε-weight of the completion token at position t: w_t = Σ_{l=0}^{t} tr(t, l), with tr(t, l) = (γλ)^l
    (style recent: the paper's Σ_{l=0}^{t} (γλ)^l = (1 − (γλ)^(t+1)) / (1 − γλ)) or Eq. 2's max((γλ)^l, (γλ)^(t−l))
    (both); "early" gives 1 + Σ_{l=1}^{t} (γλ)^(t−l). That is the row sum of the relative-form W without a floor:
    the run's form, ε and n shape the log-prob trace of the other updates, not this weight, which depends on the
    position alone (the mask's zeros are multiplied out by the loss). Detached, (B, T) in ``dtype``."""
    ones = torch.ones(mask.shape, dtype=dtype, device=mask.device)
    return apply_trace(ones, params.lam, gamma=params.gamma, style=params.style, form="relative", eps=0.0)


def trace(x: torch.Tensor, mask: torch.Tensor, params: ObjectiveParams) -> torch.Tensor:
    """W·x over the masked tokens, W the GRPO-λ trace matrix of `params` as the loss applies it: the
    absolute form's n is params.trace_length, or with "batch_max" the longest completion of the batch
    (max of mask's row sums; the columns after it hold no token, so the trace runs over those before it), or
    with "per_sequence" each row's own length (its mask's sum).
    Summed in at least float32 (a bfloat16 sum over hundreds of tokens loses too much), returned in x's dtype.
    """
    length = params.trace_length
    width = x.shape[-1]
    if length == PER_SEQUENCE and width:  # rows of one length share one n: one trace call per distinct length
        rows = mask.sum(-1).long().clamp(min=1, max=width)
        y = torch.zeros_like(x, dtype=_wide(x.dtype))
        for n in rows.unique().tolist():
            at = rows == n
            y[at, :n] = apply_trace(_at_least_float32(x[at, :n]), params.lam, gamma=params.gamma, style=params.style,
                                    form=params.form, eps=params.eps, mask=mask[at, :n], length=n)
        return y.to(x.dtype)
    if length == BATCH_MAX:
        length = max(1, int(mask.sum(-1).max().item())) if width else 0
        x, mask = x[..., :length], mask[..., :length]
    y = apply_trace(_at_least_float32(x), params.lam, gamma=params.gamma, style=params.style, form=params.form,
                    eps=params.eps, mask=mask, length=length or None)
    return torch.nn.functional.pad(y, (0, width - y.shape[-1])).to(x.dtype)


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


def _check_trace_mask(trace_mask, logps, params):
    if params.objective == "strace" and trace_mask is None:
        raise ValueError("trace_mask is required for objective 'strace' (e.g. high_entropy_mask(...))")
    if params.objective != "strace" and trace_mask is not None:
        raise ValueError(f"trace_mask applies to objective 'strace' only, not {params.objective!r}")
    if trace_mask is not None and trace_mask.shape != logps.shape:
        raise ValueError(f"trace_mask must have the shape of logps {tuple(logps.shape)}, "
                         f"got {tuple(trace_mask.shape)}")


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
