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
ever forming W, in O(B·T) time and memory, using only powers of κ that stay far inside the dtype's
range, so it stays finite for any λ ∈ [0, 1] and any length:

- an off-diagonal weight that depends on the column only (absolute form, early style) is a
  prefix sum of weighted columns;
- relative/recent is the first-order recurrence r_t = x_t + κ r_{t−1}, computed chunkwise: in a
  chunk of L tokens r_i = κ^i Σ_{j≤i} κ^(−j) x_j is one scaled cumulative sum (L as long as
  κ^(−L) stays far inside the dtype's range; its rounding stays relative to r), the chunk-end
  states carried by the same recurrence with decay κ^L; the ε floor cuts it to a window of fixed
  width D (κ^d > ε iff d ≤ D) plus ε × a prefix sum of what lies beyond the window;
- relative/both splits at c = t/2: for c ≥ t/2 the recent term dominates, for c < t/2 the early
  term does. For t ≤ 2D the split point h_t = ⌈t/2⌉ − 1 is shared by the tokens 2k+1 and 2k+2, so
  the early half is one prefix sum read at every other token; for t > 2D the columns between
  the two windows all weigh ε. Slices, one cumulative sum per term, no gather. The weight vectors
  depend on (T, κ, ε) only and are cached.

On a GPU these few dozen small kernels are bound by their launches (0.2–1.8 ms per forward +
backward on an H200, whatever T), while the dense product x·Wᵀ is one matrix product each way that
stays faster up to T of several thousand. So `apply_trace` chooses (`method="auto"`): on a device type
in `DENSE_DEVICES` (CUDA), below the crossover length of its form and style (`DENSE_BELOW`, from the
measured times; `benchmarks/bench_traces.py --device cuda` measures it again) and while W fits in
`DENSE_MAX_BYTES`, it multiplies by a cached W; elsewhere it runs the O(T) operator. The cached W is
built once per (κ, style, form, ε, n, dtype, device) at a power-of-two size and sliced to T: its
entries do not depend on T (the absolute form's n is `length`, or T when none is given).
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F

STYLES = ("recent", "both", "early")
FORMS = ("relative", "absolute")

# Block length of the decay-matrix scan: a K×K matmul per block, then a scan over T/K block ends.
_BLOCK = 64

METHODS = ("auto", "dense", "scan")
# Device types on which method "auto" may take the dense product (module docstring); a test adds "cpu"
# to run the GPU's dispatch on a CPU.
DENSE_DEVICES = ("cuda",)
# Below these lengths a dense product with a cached W beat the O(T) operator on an H200 (forward +
# backward, B = 8–16, float32 and bfloat16, `benchmarks/bench_traces.py --device cuda`; the table is in
# benchmarks/README.md): the O(T) operator was first faster at T = 32768 for the relative forms (relative
# both in float32: 2.01 against 3.34 ms), 16384 for absolute recent (0.26 against 1.13 ms) and 8192 for
# absolute both and early in float32 (0.25 against 0.34 ms); each entry is the smaller of the two dtypes'
# crossovers. DENSE_MAX_BYTES caps W below that for the relative forms (float32 W at T = 32768: 4 GiB).
DENSE_BELOW = {
    ("relative", "recent"): 32768,
    ("relative", "both"): 32768,
    ("relative", "early"): 8192,
    ("absolute", "recent"): 16384,
    ("absolute", "both"): 8192,
    ("absolute", "early"): 8192,
}
# The largest cached W (bytes, in x's dtype): float32 up to T = 16384, bfloat16 up to 23170; beyond, the
# O(T) operator, whose memory is O(B·T).
DENSE_MAX_BYTES = 2**30


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
    method: str = "auto",
) -> torch.Tensor:
    """y[b, t] = Σ_{c ≤ t} W[t, c] · x[b, c] · mask[b, c], with W = trace_matrix(T, lam, ..., length=length).

    x has shape (B, T); mask (optional, 0/1) the same shape. length: the absolute form's n (default T,
    must be >= T; ignored by the relative forms, which do not depend on it). Differentiable in x, the
    result in x's dtype. method: "scan" is the O(B·T) operator, "dense" the product with a cached W
    (O(T²) memory), "auto" the faster of the two where x lives (`uses_dense`).
    """
    kappa = _validated_kappa(lam, gamma, style, form, eps)
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
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
    elif method == "dense" or (method == "auto" and uses_dense(x, style, form)):
        n = length if form == "absolute" and style != "early" else 0  # the relative forms do not depend on n
        T = x.shape[-1]
        size = max(T, min(_DENSE_SMALLEST, DENSE_BELOW[form, style]))
        size = 1 << (size - 1).bit_length()  # a few cached sizes serve every batch width
        if size * size * x.element_size() > DENSE_MAX_BYTES:
            size = T  # rounded up, W would outgrow its bound
        matrix = _dense_weights(size, n, kappa, style, form, eps, x.dtype, x.device)[:T, :T]
        with torch.autocast(x.device.type, enabled=False):  # in x's dtype, also inside a bf16 autocast region
            y = x @ matrix.T
    elif style == "early" or form == "absolute":
        n = length if style != "early" else x.shape[-1]  # early's weights do not depend on n: one cache entry
        y = _column_trace(x, _column_weights(x.shape[-1], n, kappa, style, eps, x.dtype, x.device))
    elif style == "recent":
        y = _relative_recent(x, kappa, eps)
    else:
        y = _relative_both(x, kappa, eps)
    return y.clone() if y is given else y  # W = I: never hand back the caller's own tensor


def uses_dense(x: torch.Tensor, style: str = "recent", form: str = "relative") -> bool:
    """Whether `apply_trace(x, ..., method="auto")` multiplies by a cached W: on a device type in
    `DENSE_DEVICES`, below the crossover length `DENSE_BELOW` and with W within `DENSE_MAX_BYTES`."""
    T = x.shape[-1]
    return (x.device.type in DENSE_DEVICES and T < DENSE_BELOW[form, style]
            and T * T * x.element_size() <= DENSE_MAX_BYTES)


# The smallest cached W: short batches share one matrix instead of one per power of two.
_DENSE_SMALLEST = 1024


# At most 4 cached W, so at most 4 x DENSE_MAX_BYTES on the device. A run of one style and form uses one W
# per padded width; with trace_length "batch_max" the absolute form's n changes with each batch's longest
# completion, so most batches build their own W (O(T^2), as one product) and the cache holds only the latest.
@functools.lru_cache(maxsize=4)
def _dense_weights(size: int, n: int, kappa: float, style: str, form: str, eps: float, dtype: torch.dtype,
                   device: torch.device) -> torch.Tensor:
    """W of the module docstring, (size, size), in `dtype` on `device`; n is the absolute form's length
    (0 for the forms that do not use it, which fills it with size). Built from the tables of κ^d, block
    of rows by block of rows, so that no temporary is larger than a block; independent of `trace_matrix`,
    the test oracle."""
    n = n or size
    wide = torch.float64 if dtype == torch.float64 else torch.float32
    k = torch.tensor(kappa, dtype=torch.float64, device=device)
    columns = torch.arange(size, device=device)
    powers = torch.pow(k, torch.arange(size + 1, device=device, dtype=torch.float64))  # κ^0 … κ^size
    if style == "early":
        column_weight = powers[:size]
    elif form == "absolute":
        # columns c ≥ n lie beyond every slice taken (T ≤ n): clamped, so that κ^(n−1−c) stays finite
        recent = torch.pow(k, (n - (1 if style == "recent" else 0) - columns).clamp(min=0).to(torch.float64))
        column_weight = recent if style == "recent" else torch.maximum(recent, powers[:size])
    else:
        column_weight = powers[:size] if style == "both" else None  # the early term of relative both
    powers, column_weight = powers.to(wide), None if column_weight is None else column_weight.to(wide)
    matrix = torch.empty(size, size, dtype=dtype, device=device)
    for start in range(0, size, _DENSE_BLOCK_ROWS):
        rows = torch.arange(start, min(size, start + _DENSE_BLOCK_ROWS), device=device).unsqueeze(1)
        lag = rows - columns  # t − c
        if form == "relative" and style != "early":
            weight = powers[lag.clamp(min=0)]
            if column_weight is not None:
                weight = torch.maximum(weight, column_weight)
        else:
            weight = column_weight.expand(lag.shape)
        weight = torch.where(lag > 0, weight.clamp(min=eps), (lag == 0).to(wide))
        matrix[start:start + len(rows)] = weight.to(dtype)
    return matrix


_DENSE_BLOCK_ROWS = 1024


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
    """r_t = Σ_{d=0..t} κ^d x_{t−d} (r_t = x_t + κ r_{t−1}) along the last dim, in O(T); a new tensor.

    Within a chunk of L tokens, r_i = κ^i Σ_{j ≤ i} κ^(−j) x_j: one scaled cumulative sum. The
    rounding error of each partial sum, scaled back by κ^i, is relative to |r_i| itself, so this is
    as exact as the recurrence, provided κ^(−(L−1)) stays far inside the dtype's range; L is the
    longest chunk for which it does (`_chunk_length`). The state at each chunk end is carried
    into the next chunk by the same recurrence with decay κ^L over the T/L chunk ends.
    """
    if kappa == 1.0:
        return torch.cumsum(x, dim=-1)
    if kappa == 0.0:
        return x.clone()
    T = x.shape[-1]
    longest = _chunk_length(kappa, x.dtype)
    if longest < _SHORTEST_CHUNK:  # κ so small that κ^(−L) leaves the range: decay matrices instead
        return _blocked_matmul_scan(x, kappa)
    L = min(T, longest)
    up, down, carry_decay = _chunk_scales(kappa, longest, x.dtype, x.device)
    if L == T:  # one chunk (T = 4096 at λ = 0.99 in float64): three in-place passes, nothing reshaped
        r = torch.mul(x, up[:T])
        return r.cumsum_(dim=-1).mul_(down[:T])
    n_chunks = -(-T // L)
    if n_chunks * L != T:
        x = F.pad(x, (0, n_chunks * L - T))
    chunks = x.reshape(*x.shape[:-1], n_chunks, L)
    r = torch.cumsum(chunks * up[:L], dim=-1).mul_(down[:L])
    if n_chunks > 1:
        chunk_end_state = _blocked_matmul_scan(r[..., -1], kappa**L)
        # the state entering chunk b decays by κ^(i+1) up to its position i
        r = torch.addcmul(r, _shift(chunk_end_state, 1).unsqueeze(-1), carry_decay[:L])
    return r.reshape(*x.shape[:-1], n_chunks * L)[..., :T]


# A chunk shorter than this makes the chunk-end recurrence as long as the input: use decay matrices.
_SHORTEST_CHUNK = 16


def _chunk_length(kappa: float, dtype: torch.dtype) -> int:
    """The longest L with κ^(−(L−1)) ≤ (the dtype's largest value)^(1/4), so x·κ^(−i) cannot overflow
    and κ^i is a normal number (2^256 for float64, 2^32 for float32, 16 for float16)."""
    log_bound = math.log(torch.finfo(dtype).max) / 4
    return 1 + int(log_bound / -math.log(kappa))


@functools.lru_cache(maxsize=32)
def _chunk_scales(kappa: float, L: int, dtype: torch.dtype, device: torch.device):
    """κ^(−i), κ^i and κ^(i+1) for i < L (L from `_chunk_length`, so all are finite and normal)."""
    i = torch.arange(L, dtype=torch.float64)
    log_k = math.log(kappa)
    return tuple(torch.exp(sign * log_k * (i + shift)).to(dtype=dtype, device=device)
                 for sign, shift in ((-1, 0), (1, 0), (1, 1)))


def _blocked_matmul_scan(x: torch.Tensor, kappa: float) -> torch.Tensor:
    """`_discounted_cumsum` by decay matrices: within a block of K tokens a K×K matrix of κ^(i−j)
    gives the local sums; the state at each block end follows the recurrence with decay κ^K, solved
    by a recursive call over the T/K block ends. Only non-negative powers of κ, for any κ; used on
    short inputs (the chunk ends) and where κ is too small for scaled sums."""
    if kappa == 0.0:
        return x.clone()
    T = x.shape[-1]
    K = min(T, _BLOCK)
    decay_transposed, carry_decay = _block_decay(kappa, K, x.dtype, x.device)
    n_blocks = -(-T // K)
    if n_blocks * K != T:
        x = F.pad(x, (0, n_blocks * K - T))
    local = x.reshape(*x.shape[:-1], n_blocks, K) @ decay_transposed
    if n_blocks > 1:
        block_end_state = _blocked_matmul_scan(local[..., -1], kappa**K)
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
    """y_t = Σ_{d=0..min(t,D)} κ^d x_{t−d} + ε Σ_{c ≤ t−D−1} x_c.

    The first sum is r_t − κ^(D+1) r_(t−D−1), r the discounted cumsum; both corrections touch only
    the tokens t > D, so they are added in place to that part of r.
    """
    T = x.shape[-1]
    width = _window_width(kappa, eps, T)
    y = _discounted_cumsum(x, kappa) if width > 0 else x.clone()
    past = T - width - 1  # tokens t > D, each with columns c ≤ t − D − 1 beyond the window
    if past <= 0:
        return y
    beyond = torch.zeros_like(x[..., :past]) if eps == 0.0 else torch.cumsum(x[..., :past], dim=-1).mul_(eps)
    if width > 0:
        beyond = beyond.sub_(y[..., :past], alpha=kappa ** (width + 1))
    y[..., width + 1:].add_(beyond)  # (`y[...] += b` would also copy the slice onto itself)
    return y


def _relative_both(x: torch.Tensor, kappa: float, eps: float) -> torch.Tensor:
    """W[t,c] = max(ε, κ^(t−c)) for c ≥ t/2 and max(ε, κ^c) for c < t/2 (κ^(t−c) ≥ κ^c iff c ≥ t/2).

    With h_t = ⌈t/2⌉ − 1 (the last column c < t/2), r the discounted cumsum and
    F_s = Σ_{c ≤ s} max(ε, κ^c) x_c:

    - t ≤ 2D: every lag t − c ≤ t/2 ≤ D of the recent half is inside the window, so
      y_t = r_t − κ^(⌊t/2⌋+1) r_(h_t) + F_(h_t). Odd t = 2k+1 and even t = 2k+2 share h_t = k, so
      the corrections of the tokens 1..2D, interleaved, are F_k − [κ^(k+1), κ^(k+2)] r_k;
    - t > 2D: a column D < c < t − D has both κ^(t−c) ≤ ε and κ^c ≤ ε, i.e. weight ε = max(ε, κ^c),
      so y_t = r_t − κ^(D+1) r_(t−D−1) + F_(t−D−1).
    """
    T = x.shape[-1]
    width = _window_width(kappa, eps, T)
    y = _discounted_cumsum(x, kappa) if width > 0 else x.clone()
    head = min(T - 1, 2 * width)  # tokens 1..head take the first case, head+1..T−1 the second
    n_pairs = (head + 1) // 2
    n_early = max(n_pairs, T - width - 1)
    early_weight, odd_decay, even_extra = _both_weights(n_early, n_pairs, kappa, eps, x.dtype, x.device)
    early = torch.mul(x[..., :n_early], early_weight)
    early = early.cumsum_(dim=-1)  # F_0 .. F_(n_early − 1)
    # Every correction reads r at columns before the tokens it corrects: form them all, then add.
    tail_add = None
    if head < T - 1:
        past = slice(width, T - width - 1)
        tail_add = early[..., past] if width == 0 else torch.sub(early[..., past], y[..., past],
                                                                 alpha=kappa ** (width + 1))
    if head > 0:
        # Odd tokens take F_k − κ^(k+1) r_k, even ones that plus (κ^(k+1) − κ^(k+2)) r_k: two strided
        # adds of contiguous vectors, cheaper than one add of an interleaved (B, n, 2) tensor.
        r_head = y[..., :n_pairs]
        odd = torch.addcmul(early[..., :n_pairs], r_head, odd_decay)
        even = torch.addcmul(odd[..., :head // 2], r_head[..., :head // 2], even_extra[:head // 2])
        y[..., 1:head + 1:2].add_(odd[..., :(head + 1) // 2])
        y[..., 2:head + 1:2].add_(even)
    if tail_add is not None:
        y[..., head + 1:].add_(tail_add)
    return y


@functools.lru_cache(maxsize=32)
def _both_weights(n_early: int, n_pairs: int, kappa: float, eps: float, dtype: torch.dtype, device: torch.device):
    """max(ε, κ^c) for c < n_early; −κ^(k+1) and κ^(k+1) − κ^(k+2) for k < n_pairs."""
    k = torch.tensor(kappa, dtype=dtype, device=device)
    early = torch.pow(k, torch.arange(n_early, device=device, dtype=dtype)).clamp(min=eps)
    decay = torch.pow(k, torch.arange(1, n_pairs + 1, device=device, dtype=dtype))
    return early, -decay, decay * (1 - k)  # 1 − κ is exact for κ ≥ 1/2 (Sterbenz): no cancellation
