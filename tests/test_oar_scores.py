"""grpo_lambda.oar_scores: OAR's token scores (OAR-G, OAR-P) and weights, on toy models whose influence is known
and by hand."""

import math

import pytest
import torch

from grpo_lambda.oar_scores import (answer_log_distribution, oar_gradient_importance, oar_perturbation_importance,
                                    oar_weights)


def test_oar_weights_keep_the_mass_and_the_order():
    generator = torch.Generator().manual_seed(5)
    importance = torch.rand(3, 10, generator=generator, dtype=torch.float64) ** 3
    reasoning = torch.zeros(3, 10, dtype=torch.bool)
    reasoning[0, :7] = True
    reasoning[1, 2:9] = True  # reasoning need not start at 0 for the function
    reasoning[2, :1] = True
    for quantile, boost in ((0.5, 1.0), (0.8, 2.0), (0.0, 0.5), (1.0, 1.0)):
        weights = oar_weights(importance, reasoning, quantile=quantile, boost=boost)
        torch.testing.assert_close(weights.where(reasoning, 0).sum(-1), reasoning.sum(-1).double(), rtol=1e-12,
                                   atol=1e-12)
        assert torch.equal(weights[~reasoning], torch.ones_like(weights[~reasoning]))
        for row in range(3):
            scores, row_weights = importance[row][reasoning[row]], weights[row][reasoning[row]]
            order = scores.argsort()
            assert (row_weights[order].diff() >= -1e-12).all(), (quantile, boost, row)
    # equal scores: uniform weights; a longer spread: a larger top weight with a larger boost
    flat = oar_weights(torch.full((1, 5), 0.3), torch.ones(1, 5, dtype=torch.bool))
    torch.testing.assert_close(flat, torch.ones(1, 5))
    mild = oar_weights(importance, reasoning, boost=0.5)
    strong = oar_weights(importance, reasoning, boost=3.0)
    assert strong[0].max() > mild[0].max()


def test_oar_weights_by_hand():
    """Scores whose log1p is 0, 1, 2, 3 (n = 0, 1/3, 2/3, 1), q = 0.5, β = 1: τ = 0.5,
    raw weights max(0, 0.1) = 0.1, (1/3)/0.5 = 2/3, 1 + (2/3 − 1/2)/(1/2) = 4/3, 1 + 1 = 2; sum 4.1."""
    importance = torch.tensor([[0.0, math.e - 1, math.e**2 - 1, math.e**3 - 1, 5.0]], dtype=torch.float64)
    reasoning = torch.tensor([[True, True, True, True, False]])
    weights = oar_weights(importance, reasoning, quantile=0.5, boost=1.0)
    raw = torch.tensor([0.1, 2 / 3, 4 / 3, 2.0], dtype=torch.float64)
    torch.testing.assert_close(weights[0, :4], raw * 4 / raw.sum(), rtol=1e-12, atol=1e-12)
    assert weights[0, 4] == 1.0



def test_oar_weights_by_hand_per_sequence():
    """Two sequences in one batch, each normalised over its own reasoning tokens. Row 0 as above;
    row 1 has log1p scores 1, 2, 4 (low 1, spread 3): n = 0, 1/3, 1, τ = 1/3, raw weights 0.1, 1, 2;
    row 2 scores 0.1, 0.3, 0.5 (a spread below 1): n = 0, 1/2, 1, τ = 1/2, the same raw weights."""
    e = math.e
    importance = torch.tensor([[0.0, e - 1, e**2 - 1, e**3 - 1, 5.0],
                               [e - 1, e**2 - 1, e**4 - 1, 0.0, 0.0],
                               [e**0.1 - 1, e**0.3 - 1, e**0.5 - 1, 0.0, 0.0]], dtype=torch.float64)
    reasoning = torch.tensor([[True, True, True, True, False], [True, True, True, False, False],
                              [True, True, True, False, False]])
    weights = oar_weights(importance, reasoning, quantile=0.5, boost=1.0)
    first = torch.tensor([0.1, 2 / 3, 4 / 3, 2.0], dtype=torch.float64)
    second = torch.tensor([0.1, 1.0, 2.0], dtype=torch.float64)
    torch.testing.assert_close(weights[0, :4], first * 4 / first.sum(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(weights[1, :3], second * 3 / second.sum(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(weights[2, :3], second * 3 / second.sum(), rtol=1e-12, atol=1e-12)  # spread 0.4
    assert weights[0, 4] == weights[1, 3] == weights[1, 4] == 1.0

def toy_answer_model(weights_in, weights_out):
    """h = Σ_n c_n e_n, answer logits = h W (one answer position): a token's influence is |c_n|."""
    def forward(embeds):
        hidden = torch.einsum("n,bnh->bh", weights_in, embeds)
        return (hidden @ weights_out).unsqueeze(1)
    return forward


def test_oar_gradient_importance_orders_tokens_by_their_influence():
    generator = torch.Generator().manual_seed(6)
    influence = torch.tensor([0.5, 0.0, 3.0, 0.0, 1.0, 2.0], dtype=torch.float64)
    weights_out = torch.randn(4, 7, generator=generator, dtype=torch.float64)
    shared = torch.randn(4, generator=generator, dtype=torch.float64)
    embeds = shared.expand(2, 6, 4).clone()  # every token the same embedding: I_t ∝ |c_t| exactly
    noise_mask = torch.tensor([[0, 1, 1, 1, 1, 0]] * 2, dtype=torch.float64)  # reasoning: positions 1–4
    importance = oar_gradient_importance(toy_answer_model(influence, weights_out), embeds, noise_mask,
                                         torch.ones(2, 1), sigma=1e-3, generator=generator)
    for row in importance:
        assert row[[0, 1, 3, 5]].abs().max() == 0  # no influence, or not a reasoning token
        assert row[2] > 0 and row[2] / row[4] == pytest.approx(3.0, rel=1e-9)
    weights = oar_weights(importance, noise_mask.bool())
    assert weights[0, 2] > weights[0, 4] > weights[0, 1] == weights[0, 3]
    assert weights[0, 1:5].sum().item() == pytest.approx(4.0, rel=1e-12)
    with pytest.raises(ValueError, match="sigma"):
        oar_gradient_importance(toy_answer_model(influence, weights_out), embeds, noise_mask, torch.ones(2, 1),
                                sigma=0.0)


def test_oar_perturbation_importance_orders_tokens_by_their_influence():
    generator = torch.Generator().manual_seed(7)
    influence = torch.tensor([0.5, 0.0, 3.0, 0.0, 1.0, 2.0], dtype=torch.float64)
    table = torch.randn(5, 4, generator=generator, dtype=torch.float64)
    table[0] = 0.0  # the pad token's embedding
    weights_out = torch.randn(4, 7, generator=generator, dtype=torch.float64)
    embed_forward = toy_answer_model(influence, weights_out)
    input_ids = torch.tensor([[3, 2, 2, 2, 2, 4]])
    reasoning = torch.tensor([[False, True, True, True, True, False]])
    importance = oar_perturbation_importance(lambda ids, mask: embed_forward(table[ids]), input_ids,
                                             torch.ones_like(input_ids), reasoning, torch.ones(1, 1), pad_id=0,
                                             batch_size=3)
    row = importance[0]
    assert row[[0, 1, 3, 5]].abs().max() == 0
    assert row[2] > row[4] > 0
    # by hand for token 2: KL(softmax(hW) ‖ softmax((h − 3 e_2)W))
    hidden = (influence.unsqueeze(1) * table[input_ids[0]]).sum(0)
    p, q = torch.log_softmax(hidden @ weights_out, -1), torch.log_softmax((hidden - 3 * table[2]) @ weights_out, -1)
    assert row[2].item() == pytest.approx((p.exp() * (p - q)).sum().item(), rel=1e-6)


def test_answer_log_distribution_by_hand():
    """log softmax of the answer positions' mean logits; a row without answer positions is uniform."""
    logits = torch.randn(2, 3, 5, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    answer_mask = torch.tensor([[1, 0, 1], [0, 0, 0]])
    result = answer_log_distribution(logits, answer_mask)
    torch.testing.assert_close(result[0], torch.log_softmax((logits[0, 0] + logits[0, 2]) / 2, -1))
    torch.testing.assert_close(result[1], torch.full((5,), -math.log(5), dtype=torch.float64))


def test_oar_gradient_importance_by_hand():
    """I_t = |Σ_h ∂J/∂e_{t,h} e_{t,h}| at the noisy point e + σ ξ ⊙ mask, J = KL(P(e) ‖ P(noisy)),
    recomputed here with the same noise draw (different embeddings per token, σ not small)."""
    generator = torch.Generator().manual_seed(9)
    weights_in = torch.randn(5, generator=generator, dtype=torch.float64)
    weights_out = torch.randn(3, 6, generator=generator, dtype=torch.float64)
    forward = toy_answer_model(weights_in, weights_out)
    embeds = torch.randn(2, 5, 3, generator=generator, dtype=torch.float64)
    noise_mask = torch.tensor([[0, 1, 1, 1, 0], [1, 1, 0, 1, 1]], dtype=torch.float64)
    answer_mask = torch.ones(2, 1)
    importance = oar_gradient_importance(forward, embeds, noise_mask, answer_mask, sigma=0.3,
                                         generator=torch.Generator().manual_seed(10))

    noise = torch.randn(embeds.shape, generator=torch.Generator().manual_seed(10), dtype=torch.float64)
    noisy = (embeds + 0.3 * noise * noise_mask.unsqueeze(-1)).requires_grad_()
    clean = torch.log_softmax(forward(embeds)[:, 0], -1)
    perturbed = torch.log_softmax(forward(noisy)[:, 0], -1)
    (gradient,) = torch.autograd.grad((clean.exp() * (clean - perturbed)).sum(), noisy)
    expected = (gradient * embeds).sum(-1).abs() * noise_mask
    torch.testing.assert_close(importance, expected, rtol=1e-10, atol=1e-14)
    assert (importance[noise_mask.bool()] > 0).all()


def test_oar_perturbation_importance_by_hand_with_an_attention_mask():
    """KL(P ‖ P with token t padded) for each reasoning token, through a forward that reads the
    attention mask (masked tokens contribute nothing), in chunks smaller than the batch."""
    generator = torch.Generator().manual_seed(11)
    table = torch.randn(6, 4, generator=generator, dtype=torch.float64)
    weights_out = torch.randn(4, 5, generator=generator, dtype=torch.float64)
    influence = torch.tensor([1.0, 2.0, 0.5, 3.0, 1.5], dtype=torch.float64)

    def forward(ids, attention):
        hidden = torch.einsum("n,bnh->bh", influence, table[ids] * attention.unsqueeze(-1).to(torch.float64))
        return (hidden @ weights_out).unsqueeze(1)

    input_ids = torch.tensor([[3, 1, 2, 4, 5], [2, 2, 5, 1, 3]])
    attention = torch.tensor([[0, 1, 1, 1, 1], [1, 1, 1, 1, 0]])
    reasoning = torch.tensor([[False, True, True, True, False], [True, False, True, True, False]])
    importance = oar_perturbation_importance(forward, input_ids, attention, reasoning, torch.ones(2, 1),
                                             pad_id=0, batch_size=2)
    clean = torch.log_softmax(forward(input_ids, attention)[:, 0], -1)
    expected = torch.zeros(2, 5, dtype=torch.float64)
    for b, t in reasoning.nonzero().tolist():
        ids = input_ids[b:b + 1].clone()
        ids[0, t] = 0
        q = torch.log_softmax(forward(ids, attention[b:b + 1])[0, 0], -1)
        expected[b, t] = (clean[b].exp() * (clean[b] - q)).sum()
    torch.testing.assert_close(importance, expected, rtol=1e-10, atol=1e-14)
