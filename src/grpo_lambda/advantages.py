"""Per-token advantage estimators, as pure torch: one function each in ``ADVANTAGE_ESTIMATORS``.

An estimator maps a scored group batch (`GroupBatch`: the training rewards, the completion masks, TRL's
group-normalised advantage and, where it asks for them, per-token statistics of the policy) to a (B, T)
advantage tensor. The trainer builds the batch once per generation batch and hands the estimator's result to
the loss, which accepts (B, T) advantages for every objective. An estimator declares what it needs beyond the
rewards and masks (``needs``: "completion_ids", or statistics that take a forward pass of the policy,
"logps", "sum_pi_squared", "eos_probs"), so that the trainer computes nothing it does not use.

- ``grpo``: A_{i,t} = A_i, TRL's group-normalised advantage (or OAR's reshaped A_i · w_t, when
  ``oar_method`` is set), broadcast over the completion.
- ``otb`` (the optimal token baseline, arXiv 2602.07078; verl's ``optimal_token_baseline``):
  A_{i,t} = G_{i,t} − B_t,  B_t = Σ_j G_{j,t} W_{j,t} m_{j,t} / (Σ_j W_{j,t} m_{j,t} + ε),
  W_{j,t} = Σ_{k≤t} m_{j,k} (1 − 2 π_{j,k} + Σ_v π_{j,k}(v)²), over the completions j of the group.
- ``tempo`` (TEMPO, arXiv 2509.18314 and its authors' code): A_{i,t} = A_i + (V(y_{≤t}) − V(y_{<t})) / s,
  V(prefix) the mean reward of the group's completions that start with it, s the group's reward scale.
- ``delta_v_bound`` (GRPO-λ paper, Lemma 1 and Appendix A.2): A_{i,t} = A_i + u_{i,t},
  u_{i,t} = 1 − Π_{k<t} (1 − π(EOS | y_{<k})), the lemma's upper bound on ΔV(s_t) = V(s_0) − V(s_t).

docs/objectives.md gives each reading with its source. A new estimator is one function here and one line in
``ADVANTAGE_ESTIMATORS``; the variant key ``advantage_estimator`` selects it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

# What an estimator may ask for beyond rewards and masks. The last three take a forward pass of the policy
# (`token_statistics`), once per generation batch.
STATISTICS = ("completion_ids", "logps", "sum_pi_squared", "eos_probs")
FORWARD_STATISTICS = ("logps", "sum_pi_squared", "eos_probs")
# verl's ε in the OTB denominator.
OTB_EPSILON = 1e-8
# TRL's ε in the group normalisation (rewards − mean) / (std + 1e-4): TEMPO's TD term is scaled alike.
TRL_STD_EPSILON = 1e-4


@dataclass(frozen=True)
class GroupBatch:
    """One process's scored batch, in whole groups of ``group_size`` consecutive rows.

    rewards        (B,) training reward of each completion (TRL's weighted sum); NaN: unscored
    mask           (B, T) the completion tokens (0 after EOS, and for groups masked out)
    advantages     (B,) TRL's group-normalised advantage, or (B, T) once OAR has reshaped it
    group_size     the number of generations per prompt
    scale_rewards  TRL's scale_rewards ("group", "batch" or "none"): how A_i was scaled
    completion_ids (B, T), logps (B, T) log π(y_t), sum_pi_squared (B, T) Σ_v π_t(v)², eos_probs (B, T)
                   π(EOS | y_{<t}): present when the estimator asks for them (``needs``)
    """

    rewards: torch.Tensor
    mask: torch.Tensor
    advantages: torch.Tensor
    group_size: int
    scale_rewards: str = "group"
    completion_ids: torch.Tensor | None = None
    logps: torch.Tensor | None = None
    sum_pi_squared: torch.Tensor | None = None
    eos_probs: torch.Tensor | None = None


@dataclass(frozen=True)
class Estimator:
    """An advantage estimator: ``function(batch) -> (B, T)``, the `STATISTICS` it reads, and whether it reads
    across the rows of a group (then each process must hold whole groups)."""

    function: Callable[[GroupBatch], torch.Tensor]
    needs: tuple[str, ...] = ()
    grouped: bool = True


def estimate_advantages(name: str, batch: GroupBatch) -> torch.Tensor:
    """The (B, T) advantages of the registered estimator `name`, after checking the batch it is given."""
    if name not in ADVANTAGE_ESTIMATORS:
        raise ValueError(f"advantage_estimator: {name!r} is not registered; known: {', '.join(ADVANTAGE_ESTIMATORS)}")
    estimator = ADVANTAGE_ESTIMATORS[name]
    _check_batch(batch, estimator, name)
    advantages = estimator.function(batch)
    if advantages.shape != batch.mask.shape:
        raise ValueError(f"advantage estimator {name!r} returned shape {tuple(advantages.shape)}, "
                         f"expected {tuple(batch.mask.shape)}")
    return advantages


def needs_forward(name: str) -> bool:
    """Whether estimator `name` reads statistics that take a forward pass of the policy."""
    return any(need in FORWARD_STATISTICS for need in ADVANTAGE_ESTIMATORS[name].needs)


# ---- the estimators ---------------------------------------------------------------------------------------

def grpo_advantages(batch: GroupBatch) -> torch.Tensor:
    """GRPO: every token of completion i carries A_i (TRL's, or OAR's A_i · w_t already per token)."""
    advantages = batch.advantages
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1)
    return advantages.expand_as(batch.mask)


def otb_advantages(batch: GroupBatch) -> torch.Tensor:
    """The optimal token baseline (module docstring): G_{i,t} − B_t on the completion tokens, 0 elsewhere.

    The reward is the outcome reward at the last token, so the reward-to-go G_{i,t} is r_i at every token of
    completion i. A group of one completion keeps A = G (no baseline), as verl's. Unscored rows (NaN reward)
    get 0 and count in no baseline. Not scaled by the group's standard deviation (verl's is not either).
    """
    rewards, mask = _scored(batch)
    wide = _wide(batch.logps.dtype)
    pi = batch.logps.to(wide).exp()
    energy = (1.0 - 2.0 * pi + batch.sum_pi_squared.to(wide)) * mask
    cumulative = energy.cumsum(-1)  # W_{i,t}: the realised energy of the prefix through token t
    returns = rewards.unsqueeze(1).expand_as(mask) * mask
    groups, size = rewards.numel() // batch.group_size, batch.group_size
    weighted = (returns * cumulative * mask).view(groups, size, -1).sum(1, keepdim=True)
    total = (cumulative * mask).view(groups, size, -1).sum(1, keepdim=True)
    baseline = (weighted / (total + OTB_EPSILON)).expand(groups, size, mask.size(1)).reshape(mask.shape)
    if size == 1:
        baseline = torch.zeros_like(baseline)
    return ((returns - baseline) * mask).to(batch.logps.dtype)


def tempo_advantages(batch: GroupBatch) -> torch.Tensor:
    """TEMPO (module docstring): A_i plus the TD difference of the prefix-tree values at token t, scaled as A_i.

    V(y_{≤t}) is the mean reward of the group's completions whose first t + 1 tokens equal completion i's
    (completion i among them); V(y_{<0}) is the group's mean. The difference is 0 wherever the prefix does not
    branch (the same completions continue it), and along a completion the differences sum to r_i − mean.
    """
    if batch.scale_rewards == "batch":
        raise ValueError("advantage_estimator 'tempo' scales its TD term by the group's std: scale_rewards must be "
                         "'group' or 'none', got 'batch'")
    rewards, mask = _scored(batch)
    scored = ~torch.isnan(batch.rewards)
    groups, size, length = rewards.numel() // batch.group_size, batch.group_size, mask.size(1)
    ids = batch.completion_ids.view(groups, size, length)
    weight = scored.to(rewards.dtype).view(groups, 1, size, 1)
    reward = rewards.view(groups, 1, size, 1)
    # shares[g, i, j, t]: completions i and j of group g agree on their first t + 1 tokens
    shares = (ids.unsqueeze(2) == ids.unsqueeze(1)).to(torch.int8).cumprod(-1).to(rewards.dtype) * weight
    after = (shares * reward).sum(2) / shares.sum(2).clamp(min=1.0)  # V(y_{≤t}), (groups, size, T)
    root = (rewards * scored).view(groups, size).sum(1) / scored.view(groups, size).sum(1).clamp(min=1)
    before = torch.cat([root.view(groups, 1, 1).expand(groups, size, 1), after[..., :-1]], -1)  # V(y_{<t})
    step = (after - before).reshape(mask.shape)
    if batch.scale_rewards == "group":
        spread = rewards.view(groups, size).masked_fill(~scored.view(groups, size), math.nan)
        std = _nanstd(spread).clamp(min=0.0) if size > 1 else torch.zeros(groups, dtype=rewards.dtype)
        step = step / (std + TRL_STD_EPSILON).repeat_interleave(size).unsqueeze(1)
    step = step * mask * scored.unsqueeze(1)
    return grpo_advantages(batch) + step.to(batch.advantages.dtype)


def delta_v_bound_advantages(batch: GroupBatch) -> torch.Tensor:
    """GRPO-λ's Lemma 1 correction (Appendix A.2): A_i plus the bound u_{i,t} = 1 − Π_{k<t}(1 − π(EOS | y_{<k}))
    on ΔV(s_t), the paper's "simply added the upper bound for ΔV(s_t) to A_NAE(s_t)". u_{i,0} = 0; the product
    runs in log space (Σ log1p(−p)) so that hundreds of factors near 1 keep their precision."""
    wide = _wide(batch.eos_probs.dtype)
    mask = batch.mask.to(wide)
    eos = batch.eos_probs.to(wide).clamp(0.0, 1.0) * mask
    # Σ_{k<t} log(1 − p_k), shifted rather than the total less its own term: at p_k = 1 that is −inf − (−inf)
    survive = torch.nn.functional.pad(torch.log1p(-eos).cumsum(-1)[..., :-1], (1, 0))
    bound = -torch.expm1(survive) * mask
    return grpo_advantages(batch) + bound.to(batch.advantages.dtype)


# Estimator name -> its function and what it reads: the one table a variant's ``advantage_estimator`` selects from
# (grpo_lambda.variants.ADVANTAGE_ESTIMATOR_NAMES holds the names, torch-free, for the config's checks).
ADVANTAGE_ESTIMATORS = {
    "grpo": Estimator(grpo_advantages, grouped=False),
    "otb": Estimator(otb_advantages, needs=("logps", "sum_pi_squared")),
    "tempo": Estimator(tempo_advantages, needs=("completion_ids",)),
    "delta_v_bound": Estimator(delta_v_bound_advantages, needs=("eos_probs",)),
}


# ---- the statistics a forward pass gives ------------------------------------------------------------------

def token_statistics(logits: torch.Tensor, completion_ids: torch.Tensor, eos_token_ids: list[int],
                     needs: tuple[str, ...]) -> dict[str, torch.Tensor]:
    """The statistics of `needs` from the logits (B, T, V) that predict completion_ids (B, T), already divided by
    the sampling temperature: logps = log π(y_t), sum_pi_squared = Σ_v π_t(v)² (= exp(logsumexp(2z) −
    2 logsumexp(z)), verl's formula), eos_probs = Σ_{e ∈ eos_token_ids} π_t(e) (TRL ends a completion at any of
    its eos_token_ids). In at least float32."""
    logits = logits.to(_wide(logits.dtype))
    normaliser = torch.logsumexp(logits, -1)
    found = {}
    if "logps" in needs:
        found["logps"] = logits.gather(-1, completion_ids.unsqueeze(-1)).squeeze(-1) - normaliser
    if "sum_pi_squared" in needs:
        found["sum_pi_squared"] = torch.exp(torch.logsumexp(2.0 * logits, -1) - 2.0 * normaliser)
    if "eos_probs" in needs:
        if not eos_token_ids:
            raise ValueError("eos_probs needs at least one end-of-sequence token id, got none")
        found["eos_probs"] = torch.exp(logits[..., list(eos_token_ids)] - normaliser.unsqueeze(-1)).sum(-1)
    return found


# ---- helpers ----------------------------------------------------------------------------------------------

def _scored(batch: GroupBatch):
    """(rewards with NaN as 0, mask without the unscored rows), in at least float32."""
    wide = _wide(batch.advantages.dtype)
    scored = ~torch.isnan(batch.rewards)
    rewards = torch.nan_to_num(batch.rewards.to(wide), nan=0.0)
    return rewards, batch.mask.to(wide) * scored.unsqueeze(1).to(wide)


def _nanstd(values: torch.Tensor) -> torch.Tensor:
    """Unbiased std over the last dim ignoring NaN, as TRL's nanstd (NaN with fewer than two values)."""
    count = (~torch.isnan(values)).sum(-1)
    mean = torch.nanmean(values, -1, keepdim=True)
    variance = torch.nansum((values - mean) ** 2, -1) / (count - 1).clamp(min=1)
    return torch.where(count > 1, variance.sqrt(), torch.full_like(variance, math.nan)).nan_to_num(0.0)


def _wide(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def _check_batch(batch: GroupBatch, estimator: Estimator, name: str) -> None:
    if batch.mask.dim() != 2:
        raise ValueError(f"mask must have shape (B, T), got {tuple(batch.mask.shape)}")
    rows = batch.mask.size(0)
    if batch.rewards.shape != (rows,):
        raise ValueError(f"rewards must have shape ({rows},), got {tuple(batch.rewards.shape)}")
    if batch.advantages.shape not in ((rows,), tuple(batch.mask.shape)):
        raise ValueError(f"advantages must have shape ({rows},) or {tuple(batch.mask.shape)}, "
                         f"got {tuple(batch.advantages.shape)}")
    if not isinstance(batch.group_size, int) or batch.group_size < 1:
        raise ValueError(f"group_size must be a positive int, got {batch.group_size!r}")
    if estimator.grouped and rows % batch.group_size:
        raise ValueError(f"advantage estimator {name!r}: the batch's {rows} rows are not whole groups of "
                         f"group_size {batch.group_size}")
    for need in estimator.needs:
        value = getattr(batch, need)
        if value is None:
            raise ValueError(f"advantage estimator {name!r} needs {need}, which the batch does not hold")
        if value.shape != batch.mask.shape:
            raise ValueError(f"{need} must have the mask's shape {tuple(batch.mask.shape)}, got {tuple(value.shape)}")
