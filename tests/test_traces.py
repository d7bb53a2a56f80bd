"""grpo_lambda.traces: the dense trace matrix (by hand) and the O(T) operator (against the matrix)."""

import itertools
import math

import pytest
import torch

from grpo_lambda.traces import FORMS, STYLES, _chunk_length, apply_trace, trace_matrix

LAMBDAS = (0.0, 0.5, 0.9, 0.98, 0.99, 1.0)
EPSILONS = (0.0, 1e-7, 0.05)
LENGTHS = (1, 2, 3, 17, 256, 1000)


# --- the reference matrix, checked by hand --------------------------------------------------------


def test_trace_matrix_relative_entries_by_hand():
    recent = trace_matrix(4, 0.5, style="recent")
    assert recent.tolist() == [
        [1, 0, 0, 0],
        [0.5, 1, 0, 0],
        [0.25, 0.5, 1, 0],
        [0.125, 0.25, 0.5, 1],
    ]
    both = trace_matrix(4, 0.5, style="both")  # max(κ^(t−c), κ^c): the first token keeps weight 1
    assert both[3].tolist() == [1, 0.5, 0.5, 1]
    assert both[2].tolist() == [1, 0.5, 1, 0]
    early = trace_matrix(4, 0.5, style="early")
    assert early[3].tolist() == [1, 0.5, 0.25, 1]


def test_trace_matrix_absolute_entries_by_hand():
    recent = trace_matrix(4, 0.5, style="recent", form="absolute")  # κ^(n−1−c): depends on the column only
    assert recent[:, 0].tolist() == [1, 0.125, 0.125, 0.125]
    assert recent[3].tolist() == [0.125, 0.25, 0.5, 1]
    both = trace_matrix(4, 0.5, style="both", form="absolute")  # max(κ^(n−c), κ^c)
    assert both[3].tolist() == [1, 0.5, 0.25, 1]


def test_trace_matrix_floor_gamma_and_zero_power():
    floored = trace_matrix(5, 0.5, eps=0.1)
    assert floored[4, 0].item() == 0.1 and floored[4, 1].item() == 0.125
    assert trace_matrix(3, 1.0, gamma=0.5)[2, 0].item() == 0.25  # κ = γλ
    assert torch.equal(trace_matrix(5, 0.0), torch.eye(5, dtype=torch.float64))  # λ = 0: GRPO
    # 0^0 = 1: with λ = 0 the first token still gets weight 1 in the styles that reach back to it
    assert trace_matrix(5, 0.0, style="both")[:, 0].tolist() == [1, 1, 1, 1, 1]
    assert torch.equal(trace_matrix(5, 0.3).triu(1), torch.zeros(5, 5, dtype=torch.float64))


# --- apply_trace against the matrix ----------------------------------------------------------------


@pytest.mark.parametrize("masked", [False, True], ids=["no-mask", "mask"])
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("style", STYLES)
def test_apply_trace_matches_dense_matrix_and_its_gradient(style, form, masked):
    generator = torch.Generator().manual_seed(hash((style, form, masked)) % 2**31)
    for lam, eps, length in itertools.product(LAMBDAS, EPSILONS, LENGTHS):
        x = torch.randn(3, length, dtype=torch.float64, generator=generator, requires_grad=True)
        mask = (torch.rand(3, length, generator=generator) > 0.3).double() if masked else None
        upstream = torch.randn(3, length, dtype=torch.float64, generator=generator)
        matrix = trace_matrix(length, lam, style=style, form=form, eps=eps)

        y = apply_trace(x, lam, style=style, form=form, eps=eps, mask=mask)
        (grad,) = torch.autograd.grad((y * upstream).sum(), x)
        masked_x = x if mask is None else x * mask
        expected = masked_x @ matrix.T
        (expected_grad,) = torch.autograd.grad((expected * upstream).sum(), x)

        case = f"lam={lam} eps={eps} T={length}"
        scale = expected.abs().max().item()
        torch.testing.assert_close(y, expected, rtol=1e-10, atol=1e-10 * scale, msg=case)
        grad_scale = expected_grad.abs().max().item()
        torch.testing.assert_close(grad, expected_grad, rtol=1e-10, atol=1e-10 * grad_scale, msg=case)


def test_apply_trace_with_gamma_below_one():
    x = torch.randn(2, 300, dtype=torch.float64)
    for style, form in itertools.product(STYLES, FORMS):
        expected = x @ trace_matrix(300, 0.99, gamma=0.9, style=style, form=form, eps=1e-7).T
        y = apply_trace(x, 0.99, gamma=0.9, style=style, form=form, eps=1e-7)
        torch.testing.assert_close(y, expected, rtol=1e-10, atol=1e-10 * expected.abs().max().item())


def test_apply_trace_keeps_dtype_and_float32_accuracy():
    x = torch.randn(4, 2048, dtype=torch.float64)
    for style in STYLES:
        y32 = apply_trace(x.float(), 0.99, style=style, eps=1e-7)
        assert y32.dtype == torch.float32
        y64 = apply_trace(x, 0.99, style=style, eps=1e-7)
        assert (y32.double() - y64).abs().max() / y64.abs().max() < 1e-5


def _reference_row(x_row: torch.Tensor, t: int, lam: float, style: str, form: str, eps: float) -> float:
    """Σ_{c≤t} W[t, c] x_c for one row t, straight from the weight table (float64, n = len(x_row))."""
    n = x_row.numel()
    c = torch.arange(t + 1, dtype=torch.float64)
    kappa = torch.tensor(lam, dtype=torch.float64)
    if form == "relative":
        recent, early = kappa ** (t - c), kappa**c
    else:
        recent, early = kappa ** (n - 1 - c) if style == "recent" else kappa ** (n - c), kappa**c
    weight = {"recent": recent, "both": torch.maximum(recent, early), "early": early}[style].clamp(min=eps)
    weight[t] = 1.0
    return (weight * x_row[: t + 1]).sum().item()


@pytest.mark.parametrize("lam", [0.99, 1.0])
def test_apply_trace_is_stable_on_long_sequences(lam):
    length = 65536
    x = torch.randn(2, length, dtype=torch.float64, generator=torch.Generator().manual_seed(7))
    for style, form, eps in [("recent", "relative", 0.0), ("both", "relative", 1e-7),
                             ("recent", "absolute", 1e-7), ("both", "absolute", 0.0), ("recent", "relative", 1e-7)]:
        y = apply_trace(x, lam, style=style, form=form, eps=eps)
        assert torch.isfinite(y).all()
        for t in (0, 1, 64, 4097, 40000, length - 1):
            expected = _reference_row(x[1], t, lam, style, form, eps)
            assert y[1, t].item() == pytest.approx(expected, rel=1e-9, abs=1e-9 * math.sqrt(t + 1)), (style, form, t)
        assert torch.isfinite(apply_trace(x.float(), lam, style=style, form=form, eps=eps)).all()


def test_apply_trace_does_not_build_the_matrix():
    # A T×T float64 matrix at T = 2^18 would need 512 GiB; the operator needs a few MiB.
    x = torch.ones(1, 2**18, dtype=torch.float64)
    y = apply_trace(x, 1.0, style="both", eps=1e-7)
    assert y[0, -1].item() == pytest.approx(2**18, rel=1e-12)  # all weights are 1 when λ = 1


# --- argument checks -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, culprit",
    [
        ({"lam": 1.5}, "lam"),
        ({"lam": -0.1}, "lam"),
        ({"lam": float("nan")}, "lam"),
        ({"gamma": 0.0}, "gamma"),
        ({"gamma": 1.2}, "gamma"),
        ({"eps": -1e-3}, "eps"),
        ({"style": "late"}, "style"),
        ({"form": "absolut"}, "form"),
    ],
)
def test_invalid_arguments_name_the_culprit(kwargs, culprit):
    arguments = {"lam": 0.9, **kwargs}
    lam = arguments.pop("lam")
    with pytest.raises(ValueError, match=culprit):
        apply_trace(torch.zeros(2, 3), lam, **arguments)
    with pytest.raises(ValueError, match=culprit):
        trace_matrix(3, lam, **arguments)


def test_shape_errors_name_the_culprit():
    with pytest.raises(ValueError, match="mask"):
        apply_trace(torch.zeros(2, 3), 0.9, mask=torch.ones(2, 4))
    with pytest.raises(ValueError, match="x"):
        apply_trace(torch.zeros(3), 0.9)
    with pytest.raises(ValueError, match="x"):
        apply_trace(torch.zeros(2, 3, dtype=torch.long), 0.9)
    with pytest.raises(ValueError, match="n"):
        trace_matrix(-1, 0.9)


# --- the relative kernels: exact at the benchmark's size, across chunk boundaries, at any κ ---------


@pytest.mark.parametrize("style", ["recent", "both"])
@pytest.mark.parametrize("lam", [0.99, 0.3, 1e-30])
def test_relative_trace_is_exact_at_benchmark_size(style, lam):
    # T = 4096 holds one chunk at λ = 0.99, many at λ = 0.3 (and a partial last one at T = 3001);
    # at λ = 1e-30 chunks would be too short to use, so the decay-matrix scan takes over.
    generator = torch.Generator().manual_seed(11)
    for length, eps in [(4096, 1e-7), (3001, 0.0), (3001, 0.05)]:
        x = torch.randn(8, length, dtype=torch.float64, generator=generator, requires_grad=True)
        matrix = trace_matrix(length, lam, style=style, eps=eps)
        y = apply_trace(x, lam, style=style, eps=eps)
        expected = x @ matrix.T
        upstream = torch.randn(8, length, dtype=torch.float64, generator=generator)
        (grad,) = torch.autograd.grad((y * upstream).sum(), x)
        (expected_grad,) = torch.autograd.grad((expected * upstream).sum(), x)
        case = f"T={length} eps={eps}"
        assert (y - expected).abs().max().item() <= 1e-10 * expected.abs().max().item(), case
        assert (grad - expected_grad).abs().max().item() <= 1e-10 * expected_grad.abs().max().item(), case


@pytest.mark.parametrize("length", [149, 200, 296, 297])
def test_relative_trace_across_two_and_three_scan_chunks(length):
    """At λ = 0.3 in float64 the scaled-sum scan works in chunks of 148 tokens: 149 … 296 tokens are
    two chunks, 297 three, and the state at each chunk end must reach the next. ε left at its default
    (0: the plain trace)."""
    assert _chunk_length(0.3, torch.float64) == 148
    generator = torch.Generator().manual_seed(length)
    x = torch.randn(4, length, dtype=torch.float64, generator=generator)
    for style in ("recent", "both"):
        expected = x @ trace_matrix(length, 0.3, style=style, eps=0.0).T
        torch.testing.assert_close(apply_trace(x, 0.3, style=style), expected, rtol=1e-10, atol=1e-12, msg=style)


@pytest.mark.parametrize("eps", [1.0, 1.5, 3.0])
def test_a_floor_at_or_above_one_weighs_every_earlier_token_by_it(eps):
    """ε ≥ 1 exceeds every decayed weight κ^d: the floor sets them all (no window at all)."""
    x = torch.randn(2, 20, generator=torch.Generator().manual_seed(13), dtype=torch.float64)
    for style, form in itertools.product(STYLES, FORMS):
        expected = x @ trace_matrix(20, 0.9, style=style, form=form, eps=eps).T
        torch.testing.assert_close(apply_trace(x, 0.9, style=style, form=form, eps=eps), expected,
                                   rtol=1e-10, atol=1e-10, msg=f"{style} {form}")


@pytest.mark.parametrize("length", [40, 100, 150])
def test_relative_trace_by_decay_matrices_in_float32(length):
    """At λ = 0.2 a float32 chunk would be 14 tokens (< 16), so the decay-matrix scan does the whole
    sum, in one block of 64 (40 tokens), two (100) or three (150)."""
    assert _chunk_length(0.2, torch.float32) < 16
    x = torch.randn(3, length, generator=torch.Generator().manual_seed(length), dtype=torch.float64)
    for style in ("recent", "both"):
        expected = x @ trace_matrix(length, 0.2, style=style).T
        result = apply_trace(x.float(), 0.2, style=style)
        assert result.dtype == torch.float32
        torch.testing.assert_close(result.double(), expected, rtol=1e-5, atol=1e-5, msg=style)


@pytest.mark.parametrize("style", ["recent", "both"])
def test_relative_trace_float32_is_as_accurate_as_its_precision_on_long_sequences(style):
    # float32 chunks are short (κ^(−L) ≤ 2^32), so T = 65536 crosses hundreds of chunk boundaries.
    x = torch.randn(2, 65536, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    for lam, eps in [(0.99, 1e-7), (0.9, 0.0), (0.999, 0.0)]:
        y64 = apply_trace(x, lam, style=style, eps=eps)
        y32 = apply_trace(x.float(), lam, style=style, eps=eps)
        assert torch.isfinite(y32).all()
        # a float32 prefix sum of t terms errs by a few ulp of Σ|x|: bound the error by that scale
        scale = torch.cumsum(x.abs(), dim=-1)
        assert ((y32.double() - y64).abs() <= 1e-6 * scale).all(), (lam, eps)


@pytest.mark.parametrize("style", ["recent", "both"])
def test_relative_trace_is_exact_on_long_sequences_with_large_inputs(style):
    # Scaled chunk sums must not overflow even where x is huge and κ small; rows against the table.
    length = 65536
    x = 1e100 * torch.randn(1, length, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    for lam, eps in [(0.999, 0.0), (0.5, 1e-7), (1e-5, 0.0)]:
        y = apply_trace(x, lam, style=style, eps=eps)
        assert torch.isfinite(y).all()
        for t in (0, 1, 255, 256, 257, 17656, 40000, length - 1):
            expected = _reference_row(x[0], t, lam, style, "relative", eps)
            assert y[0, t].item() == pytest.approx(expected, rel=1e-9, abs=1e-9 * 1e100 * math.sqrt(t + 1)), (lam, t)


# --- pinned where a planted bug once went unseen --------------------------------------------------


def test_window_width_is_exact_where_logarithms_round():
    """D = #{d ≥ 1 : κ^d > ε} (capped at T), also where ε is a power of κ and log ε / log κ rounds."""
    from grpo_lambda.traces import _window_width

    checked = 0
    for kappa in (0.1, 0.3, 0.5, 0.7, 0.9, 0.99, 0.999):
        for n in range(1, 60):
            for eps in (kappa**n, kappa**n * (1 + 1e-12), kappa**n * (1 - 1e-12)):
                if not 0.0 < eps < 1.0:
                    continue
                T = 200
                assert _window_width(kappa, eps, T) == sum(kappa**d > eps for d in range(1, T + 1)), (kappa, n, eps)
                checked += 1
    assert checked > 1000


@pytest.mark.parametrize("length", [65, 100, 128, 129])
def test_apply_trace_across_two_scan_blocks(length):
    """Lengths of two 64-token blocks (and just past them): the first block's state carries into the second."""
    from grpo_lambda.traces import apply_trace, trace_matrix

    x = torch.randn(2, length, generator=torch.Generator().manual_seed(length), dtype=torch.float64)
    for style, eps in (("recent", 0.0), ("recent", 1e-3), ("both", 0.0)):
        dense = x @ trace_matrix(length, 0.97, style=style, eps=eps).T
        torch.testing.assert_close(apply_trace(x, 0.97, style=style, eps=eps), dense, rtol=1e-10, atol=1e-10)


# --- the dense product with a cached W: what method "auto" takes on a GPU below the crossover -----


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("style", STYLES)
def test_dense_method_matches_the_matrix_and_its_gradient(style, form):
    generator = torch.Generator().manual_seed(hash((style, form, "dense")) % 2**31)
    for lam, eps, (length, trace_length) in itertools.product(
            (0.0, 0.5, 0.99), (0.0, 0.05, 1.5), [(1, None), (17, None), (300, None), (300, 437)]):
        x = torch.randn(3, length, dtype=torch.float64, generator=generator, requires_grad=True)
        mask = (torch.rand(3, length, generator=generator) > 0.3).double()
        upstream = torch.randn(3, length, dtype=torch.float64, generator=generator)
        matrix = trace_matrix(length, lam, style=style, form=form, eps=eps, length=trace_length)
        y = apply_trace(x, lam, style=style, form=form, eps=eps, mask=mask, length=trace_length, method="dense")
        (grad,) = torch.autograd.grad((y * upstream).sum(), x)
        expected = (x * mask) @ matrix.T
        (expected_grad,) = torch.autograd.grad((expected * upstream).sum(), x)
        case = f"lam={lam} eps={eps} T={length} length={trace_length}"
        torch.testing.assert_close(y, expected, rtol=1e-12, atol=1e-12 * expected.abs().max().item(), msg=case)
        torch.testing.assert_close(grad, expected_grad, rtol=1e-12, atol=1e-12 * expected_grad.abs().max().item(),
                                   msg=case)


def test_the_gpu_dispatch_forced_on_cpu_gives_the_scan_values(monkeypatch):
    """The dispatch CUDA takes (a cached W below the crossover, the O(T) operator above), run on the CPU
    by adding "cpu" to the device types that may take the dense product."""
    from grpo_lambda import traces

    x64 = torch.randn(4, 700, dtype=torch.float64, generator=torch.Generator().manual_seed(21))
    assert not traces.uses_dense(x64)  # the CPU's own dispatch: always the O(T) operator
    scanned = {(style, form, dtype): apply_trace(x64.to(dtype), 0.99, style=style, form=form, eps=1e-7,
                                                 method="scan")
               for style, form, dtype in itertools.product(STYLES, FORMS, (torch.float64, torch.float32))}
    monkeypatch.setattr(traces, "DENSE_DEVICES", ("cpu", "cuda"))
    traces._dense_weights.cache_clear()
    for (style, form, dtype), expected in scanned.items():
        x = x64.to(dtype)
        assert traces.uses_dense(x, style, form)
        y = apply_trace(x, 0.99, style=style, form=form, eps=1e-7)
        assert y.dtype == dtype
        tolerance = 1e-12 if dtype == torch.float64 else 1e-5
        torch.testing.assert_close(y, expected, rtol=tolerance, atol=tolerance * expected.abs().max().item(),
                                   msg=f"{style} {form} {dtype}")
    assert traces._dense_weights.cache_info().currsize > 0  # the dense product did run
    # above the crossover, and where W would outgrow its memory bound, the O(T) operator runs
    widest = {dtype: int((traces.DENSE_MAX_BYTES / size) ** 0.5) for dtype, size in
              ((torch.float64, 8), (torch.float32, 4), (torch.bfloat16, 2))}
    for (form, style), crossover in traces.DENSE_BELOW.items():
        for dtype, width in widest.items():
            assert traces.uses_dense(torch.zeros(1, min(crossover - 1, width), dtype=dtype), style, form)
            assert not traces.uses_dense(torch.zeros(1, max(crossover, width + 1), dtype=dtype), style, form)


def test_dense_weights_are_built_once_for_every_batch_width():
    """Batches of different widths share one cached W (its entries do not depend on T)."""
    from grpo_lambda import traces

    traces._dense_weights.cache_clear()
    for length in (5, 96, 333, 1000):
        x = torch.randn(2, length, dtype=torch.float64)
        expected = x @ trace_matrix(length, 0.9, style="both", eps=1e-3).T
        torch.testing.assert_close(apply_trace(x, 0.9, style="both", eps=1e-3, method="dense"), expected)
        # the absolute form with a fixed trace length: one W as well
        expected = x @ trace_matrix(length, 0.9, form="absolute", length=1000).T
        torch.testing.assert_close(apply_trace(x, 0.9, form="absolute", length=1000, method="dense"), expected)
    assert traces._dense_weights.cache_info().misses == 2


def test_an_unknown_method_names_the_culprit():
    with pytest.raises(ValueError, match="method"):
        apply_trace(torch.zeros(2, 3), 0.9, method="fused")
