"""Trace weights of GRPO-λ and the O(T) operator that applies them.

For the completion tokens t = 0..n−1 of one sequence, the trace matrix W is lower-triangular with
W[t, t] = 1 and, for an earlier token c < t and κ = γλ:

    form        style    W[t, c]                         source
    relative    recent   max(ε, κ^(t−c))                 paper Eq. 1–2 (Theorem 1)
    relative    both     max(ε, κ^(t−c), κ^c)
    relative    early    max(ε, κ^c)
    absolute    recent   max(ε, κ^(n−1−c))               paper Appendix A.3 Eq. 17–18, authors' code
    absolute    both     max(ε, κ^(n−c), κ^c)
    absolute    early    max(ε, κ^c)

with 0^0 = 1 (so λ = 0, relative, recent, ε = 0 gives W = I: plain GRPO). In the absolute form n is
the trace length, a constant of the run (the authors' code uses its padded response length): by default
the width of x, and `length` sets it, so that a token's weights do not depend on how wide the batch it
came in was padded. The relative forms do not depend on n.

`trace_matrix` builds W densely and serves as the reference. `apply_trace` computes W·x without
ever forming W, in O(B·T) time and memory, using only non-negative powers of κ, so it stays finite
for any λ ∈ [0, 1] and any length:

- an off-diagonal weight that depends on the column only (absolute form, early style) is a
  prefix sum of weighted columns;
- relative/recent is the first-order recurrence r_t = x_t + κ r_{t−1}, computed blockwise (a
  small K×K decay matrix within a block, the block-end states carried by the same scan with
  decay κ^K); the ε floor cuts it to a window of fixed width D (κ^d > ε iff d ≤ D) plus
  ε × a prefix sum of what lies beyond the window;
- relative/both splits at c = t/2: for c ≥ t/2 the recent term dominates (a window of width
  min(⌊t/2⌋, D) of the recurrence, plus its ε part), for c < t/2 the early term does (a prefix
  sum of max(ε, κ^c)·x_c). The index and weight vectors depend on (T, κ, ε) only and are cached.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F

STYLES = ("recent", "both", "early")
FORMS = ("relative", "absolute")

# Block length of the blocked scan: a K×K matmul per block, then a scan over T/K block ends.
_BLOCK = 64


def trace_matrix(
    n: int,
    lam: float,
    *,
    gamma: float = 1.0,
    style: str = "recent",
    form: str = "relative",
    eps: float = 0.0,
    length: int | None = None,
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """The dense (n, n) trace matrix W of the module docstring (the reference for `apply_trace`).

    `length` is the absolute form's n in the weights (default: n, the size of W); it must be >= n.
    """
    kappa = _validated_kappa(lam, gamma, style, form, eps)
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"n must be a non-negative int, got {n!r}")
    length = _validated_length(length, n)
    k = torch.tensor(kappa, dtype=dtype)
    t = torch.arange(n).unsqueeze(1)
    c = torch.arange(n).unsqueeze(0)

    def power(exponent: torch.Tensor) -> torch.Tensor:  # κ^e for e ≥ 0; torch gives 0^0 = 1
        return torch.pow(k, exponent.clamp(min=0).to(dtype))

    if style == "early":
        weight = power(c).expand(n, n)
    elif form == "relative" and style == "recent":
        weight = power(t - c)
    elif form == "relative":  # both
        weight = torch.maximum(power(t - c), power(c))
    elif style == "recent":  # absolute
        weight = power(length - 1 - c).expand(n, n)
    else:  # absolute, both
        weight = torch.maximum(power(length - c), power(c)).expand(n, n)
    weight = weight.clamp(min=eps)
    matrix = torch.where(c < t, weight, torch.zeros((), dtype=dtype))
    matrix.diagonal().fill_(1.0)
    return matrix


def apply_trace(
    x: torch.Tensor,
    lam: float,
    *,
    gamma: float = 1.0,
    style: str = "recent",
    form: str = "relative",
    eps: float = 0.0,
    mask: torch.Tensor | None = None,
    length: int | None = None,
) -> torch.Tensor:
    """y[b, t] = Σ_{c ≤ t} W[t, c] · x[b, c] · mask[b, c], with W = trace_matrix(T, lam, ..., length=length).

    x has shape (B, T); mask (optional, 0/1) the same shape. length: the absolute form's n (default T,
    must be >= T; ignored by the relative forms, which do not depend on it). O(B·T) time and memory,
    differentiable in x, the result in x's dtype.
    """
    kappa = _validated_kappa(lam, gamma, style, form, eps)
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or not x.is_floating_point():
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"x must be a floating-point tensor of shape (B, T), got {shape}")
    length = _validated_length(length, x.shape[-1])
    given = x
    if mask is not None:
        if not isinstance(mask, torch.Tensor) or mask.shape != x.shape:
            shape = tuple(mask.shape) if isinstance(mask, torch.Tensor) else type(mask).__name__
            raise ValueError(f"mask must have the shape of x {tuple(x.shape)}, got {shape}")
        x = x * mask.to(x.dtype)
    if x.shape[-1] == 0:
        y = x
    elif style == "early" or form == "absolute":
        n = length if style != "early" else x.shape[-1]  # early's weights do not depend on n: one cache entry
        y = _column_trace(x, _column_weights(x.shape[-1], n, kappa, style, eps, x.dtype, x.device))
    elif style == "recent":
        y = _relative_recent(x, kappa, eps)
    else:
        y = _relative_both(x, kappa, eps)
    return y.clone() if y is given else y  # W = I: never hand back the caller's own tensor


def _validated_kappa(lam, gamma, style, form, eps) -> float:
    """Check the trace parameters; return κ = γλ."""
    if style not in STYLES:
        raise ValueError(f"style must be one of {STYLES}, got {style!r}")
    if form not in FORMS:
        raise ValueError(f"form must be one of {FORMS}, got {form!r}")
    for name, value in (("lam", lam), ("gamma", gamma), ("eps", eps)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number, got {value!r}")
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lam must lie in [0, 1], got {lam!r}")
    if not 0.0 < gamma <= 1.0:
        raise ValueError(f"gamma must lie in (0, 1], got {gamma!r}")
    if eps < 0.0:
        raise ValueError(f"eps must be >= 0, got {eps!r}")
    return float(gamma) * float(lam)


def _validated_length(length, width: int) -> int:
    """The absolute form's n: `width` when None, else an int >= width."""
    if length is None:
        return width
    if isinstance(length, bool) or not isinstance(length, int):
        raise ValueError(f"length must be an int, got {length!r}")
    if length < width:
        raise ValueError(f"length ({length}) must be >= the number of tokens ({width})")
    return length


def _shift(a: torch.Tensor, k: int) -> torch.Tensor:
    """a[..., t − k], zero where t < k (k ≥ 1)."""
    if k >= a.shape[-1]:
        return torch.zeros_like(a)
    return F.pad(a[..., :-k], (k, 0))


def _gather(a: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """a[..., index], zero where index = −1."""
    return torch.index_select(F.pad(a, (1, 0)), -1, index + 1)


@functools.lru_cache(maxsize=32)
def _block_decay(kappa: float, K: int, dtype: torch.dtype, device: torch.device):
    """(the transpose of the K×K matrix of κ^(i−j) for j ≤ i else 0, the vector κ^(i+1)), cached."""
    lags = torch.arange(K, device=device)
    lag_matrix = lags.unsqueeze(1) - lags.unsqueeze(0)  # i − j
    k = torch.tensor(kappa, dtype=dtype, device=device)
    decay = torch.where(lag_matrix >= 0, torch.pow(k, lag_matrix.clamp(min=0).to(dtype)), 0.0)
    return decay.T.contiguous(), torch.pow(k, (lags + 1).to(dtype))


@functools.lru_cache(maxsize=32)
def _column_weights(T: int, length: int, kappa: float, style: str, eps: float, dtype: torch.dtype,
                    device: torch.device):
    """Off-diagonal weight a_c, c < T, of the forms whose weight depends on the column only (n = length)."""
    c = torch.arange(T, dtype=dtype, device=device)
    k = torch.tensor(kappa, dtype=dtype, device=device)
    if style == "early":
        weight = torch.pow(k, c)
    elif style == "recent":  # absolute
        weight = torch.pow(k, length - 1 - c)
    else:  # absolute, both
        weight = torch.maximum(torch.pow(k, length - c), torch.pow(k, c))
    return weight.clamp(min=eps)


def _column_trace(x: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """y_t = x_t + Σ_{c<t} a_c x_c: a prefix sum of the weighted columns."""
    return x + _shift(torch.cumsum(x * weights, dim=-1), 1)


def _discounted_cumsum(x: torch.Tensor, kappa: float) -> torch.Tensor:
    """r_t = Σ_{d=0..t} κ^d x_{t−d} (r_t = x_t + κ r_{t−1}) along the last dim, blockwise in O(T).

    Within a block of K tokens a K×K matrix of κ^(i−j) gives the local sums; the state at each
    block end follows the same recurrence with decay κ^K, solved by a recursive call over the
    T/K block ends. Only non-negative powers of κ appear, so nothing overflows.
    """
    if kappa == 1.0:
        return torch.cumsum(x, dim=-1)
    if kappa == 0.0:
        return x
    T = x.shape[-1]
    K = min(T, _BLOCK)
    decay_transposed, carry_decay = _block_decay(kappa, K, x.dtype, x.device)
    n_blocks = -(-T // K)
    if n_blocks * K != T:
        x = F.pad(x, (0, n_blocks * K - T))
    local = x.reshape(*x.shape[:-1], n_blocks, K) @ decay_transposed
    if n_blocks > 1:
        block_end_state = _discounted_cumsum(local[..., -1], kappa**K)
        # the state entering block b decays by κ^(i+1) up to its position i
        local = local + _shift(block_end_state, 1).unsqueeze(-1) * carry_decay
    return local.reshape(*x.shape[:-1], n_blocks * K)[..., :T]


def _window_width(kappa: float, eps: float, T: int) -> int:
    """D = the number of lags d ≥ 1 at which κ^d > ε (capped at T): beyond D the floor ε rules."""
    if kappa == 0.0 or eps >= 1.0:
        return 0
    if eps == 0.0 or kappa == 1.0:
        return T
    width = min(T, math.floor(math.log(eps) / math.log(kappa)))
    # The logarithms may round across an integer: settle D exactly.
    while width < T and kappa ** (width + 1) > eps:
        width += 1
    while width > 0 and kappa**width <= eps:
        width -= 1
    return width


def _relative_recent(x: torch.Tensor, kappa: float, eps: float) -> torch.Tensor:
    """y_t = Σ_{d=0..min(t,D)} κ^d x_{t−d} + ε Σ_{c ≤ t−D−1} x_c."""
    T = x.shape[-1]
    width = _window_width(kappa, eps, T)
    if width == 0:
        y = x
    else:
        r = _discounted_cumsum(x, kappa)
        # The part of the recurrence older than the window is κ^(D+1) r_{t−D−1}.
        y = r if width >= T - 1 else r - kappa ** (width + 1) * _shift(r, width + 1)
    if eps > 0.0 and width < T - 1:
        y = y + eps * _shift(torch.cumsum(x, dim=-1), width + 1)
    return y


def _relative_both(x: torch.Tensor, kappa: float, eps: float) -> torch.Tensor:
    """W[t,c] = max(ε, κ^(t−c)) for t/2 ≤ c < t and max(ε, κ^c) for c < t/2 (κ^(t−c) ≥ κ^c iff c ≥ t/2).

    With w_t = min(⌊t/2⌋, D), b_t = t − w_t − 1 (last column left of the decayed window) and
    h_t = ⌈t/2⌉ − 1 (last column c < t/2), indices −1 meaning "none":
    y_t = [r_t − κ^(w_t+1) r_(b_t)] + ε P_(b_t) + Σ_{c ≤ h_t} (max(ε, κ^c) − ε) x_c,
    r the discounted cumsum, P the plain prefix sum (the ε terms of the window and of the early
    half combine into ε P_(b_t)).
    """
    width, before_window, before_half, window_decay, early_excess = _both_plan(
        x.shape[-1], kappa, eps, x.dtype, x.device
    )
    y = x
    if width > 0:
        r = _discounted_cumsum(x, kappa)
        y = r - window_decay * _gather(r, before_window)
    if eps > 0.0:
        y = y + eps * _gather(torch.cumsum(x, dim=-1), before_window)
    return y + _gather(torch.cumsum(x * early_excess, dim=-1), before_half)


@functools.lru_cache(maxsize=32)
def _both_plan(T: int, kappa: float, eps: float, dtype: torch.dtype, device: torch.device):
    """What relative/both needs besides x, for one length: D, b_t, h_t, κ^(w_t+1), max(ε, κ^c) − ε."""
    t = torch.arange(T, device=device)
    width = _window_width(kappa, eps, T)
    window = torch.clamp(t // 2, max=width)
    k = torch.tensor(kappa, dtype=dtype, device=device)
    window_decay = torch.pow(k, (window + 1).to(dtype))
    early_excess = torch.pow(k, t.to(dtype)).clamp(min=eps) - eps
    return width, t - window - 1, (t + 1) // 2 - 1, window_decay, early_excess
