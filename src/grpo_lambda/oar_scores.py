"""OAR's token scores and weights (arXiv 2601.07408, and its authors' released code), as pure torch.

OAR reshapes per-token advantages rather than the ratio: `oar_gradient_importance` (OAR-G) and
`oar_perturbation_importance` (OAR-P) score each reasoning token by how much it moves the final-answer
distribution (`answer_log_distribution`), and `oar_weights` turns the scores into weights w_t with Σ w_t = the
number of reasoning tokens, so that A_{i,t} = A_i · w_t keeps the sequence's advantage mass.
`grpo_lambda.oar` finds the answer and reasoning tokens and runs the model.
"""

from __future__ import annotations

import math

import torch


def _at_least_float32(x: torch.Tensor) -> torch.Tensor:
    """float32, or float64 when given: half-precision sums over a vocabulary lose too much."""
    return x.to(torch.float64 if x.dtype == torch.float64 else torch.float32)


def answer_log_distribution(logits: torch.Tensor, answer_mask: torch.Tensor) -> torch.Tensor:
    """log softmax of the mean of the logits over a sequence's answer positions: (B, K, V) -> (B, V).

    The authors' "answer_mean" reading of P_final (OAR-G's); a mask with only the first answer position gives
    their "last" (OAR-P's). A row without answer positions gets the uniform distribution (its scores are then 0).
    """
    logits = _at_least_float32(logits)
    weights = answer_mask.to(logits.dtype).unsqueeze(-1)
    mean_logits = (logits * weights).sum(1) / weights.sum(1).clamp(min=1.0)
    return torch.log_softmax(mean_logits, dim=-1)


def _kl(log_p: torch.Tensor, log_q: torch.Tensor) -> torch.Tensor:
    """KL(p ‖ q) over the last dim."""
    return (log_p.exp() * (log_p - log_q)).sum(-1)


def oar_gradient_importance(forward, embeds: torch.Tensor, noise_mask: torch.Tensor, answer_mask: torch.Tensor,
                            *, sigma: float = 1e-3, generator: torch.Generator | None = None) -> torch.Tensor:
    """OAR-G: I_t = |Σ_h ∂J/∂e_{t,h} · e_{t,h}| on the positions of noise_mask (0 elsewhere), with

        J = Σ_b KL(P_final(e) ‖ P_final(e + σ ξ ⊙ noise_mask)),   ξ ~ N(0, I),

    P_final = `answer_log_distribution` of forward's logits. One forward without gradient and one with,
    one backward to the embeddings (not to any parameter). J is 0 with its gradient at σ = 0: the noise
    moves the point off the minimum so that the gradient carries the tokens' influence.

    forward: embeddings (B, N, H) -> logits (B, K, V); embeds: (B, N, H); noise_mask: (B, N) the
    reasoning tokens; answer_mask: (B, K) the logit positions that predict answer tokens.
    """
    if embeds.dim() != 3 or noise_mask.shape != embeds.shape[:2]:
        raise ValueError(f"embeds must be (B, N, H) and noise_mask (B, N), got {tuple(embeds.shape)} and "
                         f"{tuple(noise_mask.shape)}")
    if not sigma > 0:
        raise ValueError(f"sigma must be > 0, got {sigma!r}")
    embeds = embeds.detach()
    with torch.no_grad():
        clean = answer_log_distribution(forward(embeds), answer_mask)
    noise = torch.randn(embeds.shape, generator=generator, dtype=embeds.dtype, device=embeds.device)
    noisy = (embeds + sigma * noise * noise_mask.unsqueeze(-1).to(embeds.dtype)).requires_grad_()
    with torch.enable_grad():
        divergence = _kl(clean, answer_log_distribution(forward(noisy), answer_mask)).sum()
        (gradient,) = torch.autograd.grad(divergence, noisy)
    saliency = (_at_least_float32(gradient) * _at_least_float32(embeds)).sum(-1).abs()
    return saliency * noise_mask.to(saliency.dtype)


def oar_perturbation_importance(forward, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                                reasoning_mask: torch.Tensor, answer_mask: torch.Tensor, *, pad_id: int,
                                batch_size: int = 16) -> torch.Tensor:
    """OAR-P: I_t = KL(P_final ‖ P_final with token t replaced by pad_id) for each reasoning token t.

    One forward per reasoning token (batched by batch_size), so meant for short completions.
    forward: (input_ids (n, N), attention_mask (n, N)) -> logits (n, K, V); reasoning_mask: (B, N);
    answer_mask: (B, K) as in `oar_gradient_importance`. Returns (B, N), 0 off the reasoning tokens.
    """
    if reasoning_mask.shape != input_ids.shape or attention_mask.shape != input_ids.shape:
        raise ValueError(f"attention_mask and reasoning_mask must have the shape of input_ids "
                         f"{tuple(input_ids.shape)}")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    with torch.no_grad():
        clean = answer_log_distribution(forward(input_ids, attention_mask), answer_mask)
        importance = torch.zeros(input_ids.shape, dtype=clean.dtype, device=input_ids.device)
        positions = reasoning_mask.bool().nonzero()
        for chunk in positions.split(batch_size) if len(positions) else ():
            rows, positions = chunk.unbind(1)
            perturbed = input_ids[rows].clone()
            perturbed[torch.arange(len(rows), device=perturbed.device), positions] = pad_id
            log_q = answer_log_distribution(forward(perturbed, attention_mask[rows]), answer_mask[rows])
            importance[rows, positions] = _kl(clean[rows], log_q)
    return importance


def oar_weights(importance: torch.Tensor, reasoning_mask: torch.Tensor, *, quantile: float = 0.25,
                boost: float = 1.0, floor: float = 0.1) -> torch.Tensor:
    """OAR's bi-level reshaping, per sequence over its R reasoning tokens (weight 1 elsewhere):

        n_t = minmax(log1p(I_t))            (0 for all when the scores are all equal)
        τ   = quantile(n, q)
        w_t = max(n_t / τ, floor)            if n_t < τ   (noise suppression)
            = 1 + β (n_t − τ) / (1 − τ)      otherwise     (signal boosting; 1 when τ = 1)
        w_t ← w_t · R / Σ_s w_s              (Σ_t w_t = R: the sequence's advantage mass is kept)

    The weights are a non-decreasing function of I_t within a sequence.
    importance, reasoning_mask: (B, T). Returns float (B, T) weights.
    """
    if importance.shape != reasoning_mask.shape:
        raise ValueError(f"reasoning_mask must have the shape of importance {tuple(importance.shape)}, "
                         f"got {tuple(reasoning_mask.shape)}")
    for name, value, low, high in (("quantile", quantile, 0.0, 1.0), ("boost", boost, 0.0, math.inf),
                                   ("floor", floor, 0.0, 1.0)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
            raise ValueError(f"{name} must lie in [{low}, {high}], got {value!r}")
    reasoning = reasoning_mask.bool()
    score = torch.log1p(_at_least_float32(importance).clamp(min=0.0))
    low = score.masked_fill(~reasoning, math.inf).amin(-1, keepdim=True)
    high = score.masked_fill(~reasoning, -math.inf).amax(-1, keepdim=True)
    spread = high - low
    normalised = torch.where(spread > 0, (score - low) / spread.clamp(min=1e-30), torch.zeros_like(score))
    tau = torch.nanquantile(normalised.masked_fill(~reasoning, math.nan), quantile, dim=-1, keepdim=True)
    suppressed = (normalised / tau.clamp(min=1e-30)).clamp(min=floor)
    boosted = 1.0 + boost * torch.where(tau < 1.0, (normalised - tau) / (1.0 - tau).clamp(min=1e-30),
                                        torch.zeros_like(normalised))
    weights = torch.where(normalised < tau, suppressed, boosted)
    weights = torch.where(reasoning, weights, torch.zeros_like(weights))
    count = reasoning.sum(-1, keepdim=True).to(score.dtype)
    weights = weights * count / weights.sum(-1, keepdim=True).clamp(min=1e-30)
    return torch.where(reasoning, weights, torch.ones_like(weights))
