"""grpo_lambda.advantages: each estimator against a hand-computed group, TEMPO against a plain loop over the prefix
tree, the Lemma 1 correction against the lemma on a chain whose values are known; and the trainer's wiring: the
statistics it hands an estimator are the policy's, an estimator registered from a test file trains, and the 80/20
entropy control leaves gradient on the top-20 % entropy tokens only."""

import copy
import dataclasses
import math

import pytest
import torch
import yaml

from conftest import ROOT
from grpo_lambda import advantages as adv
from grpo_lambda import variants
from grpo_lambda.advantages import GroupBatch, estimate_advantages


def batch_of(rewards, mask, advantages=None, group_size=None, **extra):
    rewards = torch.tensor(rewards, dtype=torch.float64)
    mask = torch.tensor(mask, dtype=torch.float64)
    advantages = torch.zeros_like(rewards) if advantages is None else torch.as_tensor(advantages, dtype=torch.float64)
    return GroupBatch(rewards=rewards, mask=mask, advantages=advantages,
                      group_size=group_size or len(rewards), **extra)


# ---- the registry -----------------------------------------------------------------------------------------

def test_the_estimators_are_registered_once_with_their_names_checked_without_torch():
    # OAR's reshaping is in the table the trainer runs, selected by oar_method rather than advantage_estimator
    assert set(adv.ADVANTAGE_ESTIMATORS) == set(variants.ESTIMATORS) | set(adv.RESHAPINGS.values())
    assert adv.estimator_chain("tempo", oar_method="gradient") == ["oar", "tempo"]
    assert adv.estimator_chain("tempo", oar_method=None) == ["tempo"]
    with pytest.raises(ValueError, match=r"^advantage_estimator: 'oar' is not an advantage estimator"):
        variants.variant_config_kwargs({"objective": "grpo", "advantage_estimator": "oar", "oar_method": "gradient"})
    documented = (ROOT / "docs" / "objectives.md").read_text()
    for name in variants.ESTIMATORS:
        assert f"advantage_estimator: {name}" in documented, name
    with pytest.raises(ValueError, match=r"^advantage_estimator: 'OTB' is not an advantage estimator; known: grpo"):
        variants.variant_config_kwargs({"objective": "grpo", "advantage_estimator": "OTB"})
    with pytest.raises(ValueError, match=r"oar_method reshapes GRPO's advantage A_i, which advantage_estimator 'otb'"):
        variants.variant_config_kwargs({"objective": "grpo", "advantage_estimator": "otb", "oar_method": "gradient"})
    assert variants.variant_config_kwargs({"objective": "ptrace", "advantage_estimator": "tempo"})[
        "advantage_estimator"] == "tempo"


def test_an_estimator_is_refused_a_batch_without_what_it_needs():
    batch = batch_of([1.0, 0.0], [[1, 1], [1, 0]])
    with pytest.raises(ValueError, match=r"^advantage estimator 'otb' needs logps"):
        estimate_advantages("otb", batch)
    with pytest.raises(ValueError, match=r"^advantage estimator 'tempo': the batch's 2 rows are not whole groups"):
        estimate_advantages("tempo", batch_of([1.0, 0.0], [[1, 1], [1, 0]], group_size=3,
                                              completion_ids=torch.zeros(2, 2, dtype=torch.long)))
    with pytest.raises(ValueError, match=r"^advantage_estimator: 'nope' is not registered"):
        estimate_advantages("nope", batch)


MALFORMED = {
    "mask not (B, T)": (dict(mask=torch.ones(2)), r"^mask must have shape \(B, T\), got \(2,\)"),
    "rewards not (B,)": (dict(rewards=torch.ones(3)), r"^rewards must have shape \(2,\), got \(3,\)"),
    "advantages neither (B,) nor (B, T)": (dict(advantages=torch.ones(2, 3)),
                                           r"^advantages must have shape \(2,\) or \(2, 2\), got \(2, 3\)"),
    "group_size 0": (dict(group_size=0), r"^group_size must be a positive int, got 0"),
    "group_size not an int": (dict(group_size=2.0), r"^group_size must be a positive int, got 2.0"),
    "a statistic not (B, T)": (dict(completion_ids=torch.ones(2, 3, dtype=torch.long)),
                               r"^completion_ids must have the mask's shape \(2, 2\), got \(2, 3\)"),
}


@pytest.mark.parametrize("change", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_batch_is_refused_naming_what_is_wrong(change):
    fields, message = change
    batch = batch_of([1.0, 0.0], [[1, 1], [1, 0]], completion_ids=torch.ones(2, 2, dtype=torch.long))
    with pytest.raises(ValueError, match=message):
        estimate_advantages("tempo", dataclasses.replace(batch, **fields))


def test_an_estimators_result_of_another_shape_and_an_unknown_name_are_refused(monkeypatch):
    monkeypatch.setitem(adv.ADVANTAGE_ESTIMATORS, "per_row", adv.Estimator(lambda batch: batch.advantages))
    batch = batch_of([1.0, 0.0], [[1, 1], [1, 0]])
    with pytest.raises(ValueError, match=r"^advantage estimator 'per_row' returned \(2,\), expected a tensor of shape \(2, 2\)"):
        estimate_advantages("per_row", batch)
    with pytest.raises(ValueError, match=r"^advantage_estimator: 'nope' is not registered; known: grpo, otb, tempo, "):
        estimate_advantages("nope", batch)
    with pytest.raises(ValueError, match="^eos_probs needs at least one end-of-sequence token id, got none"):
        adv.token_statistics(torch.zeros(1, 2, 5), torch.zeros(1, 2, dtype=torch.long), [], ("eos_probs",))


@pytest.mark.parametrize("infinity", [math.inf, -math.inf])
def test_an_estimator_that_returns_an_infinite_advantage_is_refused_before_the_loss(monkeypatch, infinity):
    """+inf or −inf on one token is refused as NaN is: the loss would carry it into every gradient."""
    def one_infinite(batch):
        advantages = torch.zeros_like(batch.mask)
        advantages[1, 0] = infinity
        return advantages

    monkeypatch.setitem(adv.ADVANTAGE_ESTIMATORS, "one_infinite", adv.Estimator(one_infinite))
    with pytest.raises(ValueError, match=r"^advantage estimator 'one_infinite' returned 1 NaN or infinite advantages "
                                         r"\(of 4\)"):
        estimate_advantages("one_infinite", batch_of([1.0, 0.0], [[1, 1], [1, 0]]))


def test_grpo_puts_the_sequence_advantage_on_every_token():
    batch = batch_of([1.0, 0.0], [[1, 1, 1], [1, 0, 0]], advantages=[0.7, -0.7])
    torch.testing.assert_close(estimate_advantages("grpo", batch),
                               torch.tensor([[0.7] * 3, [-0.7] * 3], dtype=torch.float64))
    reshaped = torch.tensor([[0.5, 1.0, 1.5], [-1.4, 0.0, 0.0]], dtype=torch.float64)  # OAR's A_i · w_t
    torch.testing.assert_close(estimate_advantages("grpo", batch_of([1.0, 0.0], [[1, 1, 1], [1, 0, 0]],
                                                                    advantages=reshaped)), reshaped)


# ---- OTB --------------------------------------------------------------------------------------------------

def test_otb_on_a_hand_computed_group():
    """Two completions: r = (1, 0), lengths 3 and 2. Per token w = 1 − 2π + Σπ², W its running sum:
    row 0: π = (.5, .25, 1), Σπ² = (.5, .25, 1) -> w = (.5, .75, 0), W = (.5, 1.25, 1.25)
    row 1: π = (.5, .5),     Σπ² = (.3, .5)     -> w = (.3, .5),     W = (.3, .8)
    B_0 = (1·.5 + 0·.3)/.8 = .625, B_1 = 1.25/2.05, B_2 = 1.25/1.25 = 1 (row 1 has ended): A = (G − B)·m."""
    pi = torch.tensor([[0.5, 0.25, 1.0], [0.5, 0.5, 0.9]], dtype=torch.float64)
    batch = batch_of([1.0, 0.0], [[1, 1, 1], [1, 1, 0]], logps=pi.log(),
                     sum_pi_squared=torch.tensor([[0.5, 0.25, 1.0], [0.3, 0.5, 0.9]], dtype=torch.float64))
    expected = torch.tensor([[0.375, 0.8 / 2.05, 0.0], [-0.625, -1.25 / 2.05, 0.0]], dtype=torch.float64)
    torch.testing.assert_close(estimate_advantages("otb", batch), expected, atol=1e-7, rtol=0)


def test_otb_with_equal_energy_is_the_mean_of_the_live_returns_and_a_lone_completion_keeps_its_return():
    """With the same energy on every token, B_t is the mean return of the completions still running at t; the
    groups of a batch do not mix; a group of one has no baseline (verl's)."""
    mask = [[1, 1, 1], [1, 1, 0], [1, 0, 0], [1, 1, 1]]
    logps = torch.full((4, 3), math.log(0.5), dtype=torch.float64)
    squares = torch.full((4, 3), 0.5, dtype=torch.float64)  # w = 1 − 1 + .5 = .5 on every token
    batch = batch_of([1.0, 0.0, 1.0, 0.0], mask, group_size=2, logps=logps, sum_pi_squared=squares)
    got = estimate_advantages("otb", batch)
    # group 0: rows 0, 1: W = .5t+.5 alike while both run; row 0 alone at t = 2
    torch.testing.assert_close(got[:2], torch.tensor([[0.5, 0.5, 0.0], [-0.5, -0.5, 0.0]], dtype=torch.float64),
                               atol=1e-7, rtol=0)
    # group 1: row 2 (r = 1) ends at t = 0, row 3 (r = 0) runs on alone
    torch.testing.assert_close(got[2:], torch.tensor([[0.5, 0, 0], [-0.5, 0.0, 0.0]], dtype=torch.float64),
                               atol=1e-7, rtol=0)
    lone = batch_of([1.0, 0.0], [[1, 1], [1, 0]], group_size=1, logps=logps[:2, :2],
                    sum_pi_squared=squares[:2, :2])
    torch.testing.assert_close(estimate_advantages("otb", lone),
                               torch.tensor([[1.0, 1.0], [0.0, 0.0]], dtype=torch.float64))


def test_token_statistics_of_bfloat16_logits_are_computed_in_float32():
    """Under bf16 training the logits come in bfloat16: the softmax quantities are those of the same logits in
    float32 (a logsumexp in bfloat16 would be off by about 1%)."""
    logits = (4 * torch.randn(2, 5, 50, generator=torch.Generator().manual_seed(1))).to(torch.bfloat16)
    ids = torch.randint(0, 50, (2, 5), generator=torch.Generator().manual_seed(2))
    got = adv.token_statistics(logits, ids, [0, 7], adv.FORWARD_STATISTICS)
    exact = adv.token_statistics(logits.double(), ids, [0, 7], adv.FORWARD_STATISTICS)
    for name in adv.FORWARD_STATISTICS:
        assert got[name].dtype == torch.float32, name
        torch.testing.assert_close(got[name].double(), exact[name], rtol=1e-5, atol=1e-6, msg=name)


def test_token_statistics_are_the_softmax_quantities():
    logits = torch.randn(2, 3, 7, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    ids = torch.tensor([[1, 2, 3], [4, 5, 6]])
    stats = adv.token_statistics(logits, ids, [0, 6], ("logps", "sum_pi_squared", "eos_probs"))
    probs = logits.softmax(-1)
    torch.testing.assert_close(stats["logps"], probs.gather(-1, ids.unsqueeze(-1)).squeeze(-1).log())
    torch.testing.assert_close(stats["sum_pi_squared"], (probs ** 2).sum(-1))
    torch.testing.assert_close(stats["eos_probs"], probs[..., 0] + probs[..., 6])


# ---- TEMPO ------------------------------------------------------------------------------------------------

# Four completions of one prompt, tokens a..i as 1..9: abc, abd, aef, ghi with rewards 1, 0, 1, 0. The prefix tree:
# root (V = 1/2) -> a (V = 2/3: abc, abd, aef) -> ab (1/2) -> abc (1), abd (0); a -> ae (1) -> aef (1);
# root -> g (0) -> gh (0) -> ghi (0).
TREE_IDS = torch.tensor([[1, 2, 3], [1, 2, 4], [1, 5, 6], [7, 8, 9]])
TREE_REWARDS = [1.0, 0.0, 1.0, 0.0]
# V(y_≤t) − V(y_<t) along each completion; they sum to r_i − 1/2.
TREE_TD = torch.tensor([[1 / 6, -1 / 6, 1 / 2], [1 / 6, -1 / 6, -1 / 2], [1 / 6, 1 / 3, 0.0], [-1 / 2, 0.0, 0.0]],
                       dtype=torch.float64)


def test_tempo_on_a_hand_built_prefix_tree():
    sequence = torch.tensor(TREE_REWARDS, dtype=torch.float64) - 0.5  # scale_rewards none: A_i = r_i − mean
    batch = batch_of(TREE_REWARDS, [[1] * 3] * 4, advantages=sequence, scale_rewards="none", completion_ids=TREE_IDS)
    got = estimate_advantages("tempo", batch)
    torch.testing.assert_close(got, sequence.unsqueeze(1) + TREE_TD)
    torch.testing.assert_close(got[0], torch.tensor([2 / 3, 1 / 3, 1.0], dtype=torch.float64))
    torch.testing.assert_close(TREE_TD.sum(1), sequence)  # the TD terms telescope to r_i − V(root)
    # scale_rewards group: the TD term is divided like A_i, by the group's (unbiased) std + 1e-4
    std = torch.tensor(TREE_REWARDS, dtype=torch.float64).std()
    scaled = batch_of(TREE_REWARDS, [[1] * 3] * 4, advantages=sequence / (std + 1e-4), completion_ids=TREE_IDS)
    torch.testing.assert_close(estimate_advantages("tempo", scaled), (sequence.unsqueeze(1) + TREE_TD) / (std + 1e-4))


def tempo_by_walking_the_tree(ids, mask, rewards, group_size):
    """TEMPO's TD terms by a walk down each completion: the completions that agree with it so far, narrowed token
    by token (the authors' loop, written anew); unscaled."""
    td = torch.zeros(mask.shape, dtype=torch.float64)
    for i in range(len(rewards)):
        first = i - i % group_size
        along = list(range(first, first + group_size))
        for t in range(int(mask[i].sum())):
            narrowed = [j for j in along if ids[j, t] == ids[i, t]]
            td[i, t] = sum(rewards[j] for j in narrowed) / len(narrowed) - sum(rewards[j] for j in along) / len(along)
            along = narrowed
    return td


def test_tempo_equals_the_walk_down_the_tree_on_random_groups_of_unequal_lengths():
    generator = torch.Generator().manual_seed(3)
    groups, size, length = 3, 6, 7
    ids = torch.randint(1, 3, (groups * size, length), generator=generator)  # two tokens: a bushy tree
    lengths = torch.randint(2, length + 1, (groups * size,), generator=generator)
    mask = (torch.arange(length) < lengths.unsqueeze(1)).double()
    ids = ids.masked_fill(mask == 0, 0)  # padding after the completion, as TRL's
    rewards = torch.randint(0, 2, (groups * size,), generator=generator).double()
    batch = GroupBatch(rewards=rewards, mask=mask, advantages=torch.zeros(groups * size, dtype=torch.float64),
                       group_size=size, scale_rewards="none", completion_ids=ids)
    expected = tempo_by_walking_the_tree(ids, mask, rewards.tolist(), size)
    torch.testing.assert_close(estimate_advantages("tempo", batch), expected * mask)


def test_tempo_without_branching_is_grpo_and_refuses_batch_scaling():
    ids = torch.tensor([[1, 2, 3], [1, 2, 3]])
    batch = batch_of([1.0, 1.0], [[1, 1, 1]] * 2, advantages=[0.0, 0.0], completion_ids=ids)
    assert estimate_advantages("tempo", batch).abs().max() == 0  # identical completions: no branch, no TD term
    with pytest.raises(ValueError, match="scale_rewards must be 'group' or 'none', got 'batch'"):
        estimate_advantages("tempo", batch_of([1.0, 0.0], [[1, 1, 1]] * 2, scale_rewards="batch", completion_ids=ids))


@pytest.mark.parametrize("size", [2, 3])
def test_tempos_td_term_is_scaled_by_each_groups_own_std_over_its_scored_completions(size):
    """scale_rewards "group": each group's TD terms divided by the unbiased std of that group's scored rewards
    (+ 1e-4, as TRL's A_i): two scored of three, or two of two, one group beside another; a group with one
    scored completion has no TD term (its value is its reward from the root on)."""
    ids = torch.tensor([[1, 2], [1, 3], [4, 5]][:size] * 3)
    rewards = {2: [1.0, 0.0, 0.5, 1.0, math.nan, 0.7], 3: [1.0, math.nan, 0.0, 0.5, 1.0, 0.0, math.nan, 0.7, math.nan]}
    advantages = torch.linspace(-1, 1, 3 * size)

    def tempo(scale):
        return estimate_advantages("tempo", batch_of(rewards[size], [[1, 1]] * (3 * size), advantages=advantages,
                                                     group_size=size, scale_rewards=scale, completion_ids=ids))

    scaled, plain = tempo("group") - advantages.unsqueeze(1), tempo("none") - advantages.unsqueeze(1)
    for group in range(3):
        rows = slice(group * size, (group + 1) * size)
        scored = [r for r in rewards[size][rows] if not math.isnan(r)]
        if len(scored) < 2:
            assert scaled[rows].abs().max() == 0 and plain[rows].abs().max() == 0
            continue
        std = torch.tensor(scored, dtype=torch.float64).std()
        assert plain[rows].abs().max() > 0.1
        torch.testing.assert_close(scaled[rows] * (std + 1e-4), plain[rows])


# ---- GRPO-λ's Lemma 1 bound -------------------------------------------------------------------------------

def test_delta_v_bound_is_one_minus_the_probability_of_no_eos_so_far():
    eos = torch.tensor([[0.1, 0.2, 0.5, 0.3]], dtype=torch.float64)
    batch = batch_of([1.0], [[1, 1, 1, 0]], advantages=[-0.25], eos_probs=eos)
    # u_t = 1 − Π_{k<t}(1 − p_k): 0, .1, 1 − .9·.8 = .28; 0 after the completion
    torch.testing.assert_close(estimate_advantages("delta_v_bound", batch),
                               torch.tensor([[-0.25, -0.15, 0.03, -0.25]], dtype=torch.float64))


@pytest.mark.parametrize("certain", [1.0, 1.0 + 1e-6])
def test_delta_v_bound_is_finite_where_the_eos_probability_is_one(certain):
    """A confident policy's π(EOS) is 1.0 in float32 (and a sum of softmax terms can round past it): the bound is
    1 from the next token on, and finite at that token, not NaN."""
    eos = torch.tensor([[0.5, certain, 0.2, 0.1]], dtype=torch.float64)
    batch = batch_of([1.0], [[1, 1, 1, 1]], advantages=[0.0], eos_probs=eos)
    torch.testing.assert_close(estimate_advantages("delta_v_bound", batch),
                               torch.tensor([[0.0, 0.5, 1.0, 1.0]], dtype=torch.float64))


def test_delta_v_bound_bounds_the_value_gap_of_lemma_1_and_is_tight_when_no_eos_can_follow():
    """A chain whose values are known: EOS at step k with probability p_k whatever came before, reward 1 on EOS
    (the lemma's case: every episode that ends succeeds), 0 at the horizon H. From a running state at t,
    V(s_t) = 1 − Π_{k=t}^{H−1}(1 − p_k), so ΔV(s_t) = V(s_0) − V(s_t) = Π_{k≥t}(1 − p_k) · (1 − Π_{k<t}(1 − p_k)),
    which the lemma bounds by 1 − Π_{k<t}(1 − p_k); with p_k = 0 from t on the bound is attained."""
    for eos in ([0.05, 0.3, 0.1, 0.6, 0.2, 0.4], [0.2, 0.1, 0.3, 0.0, 0.0, 0.0]):
        p = torch.tensor(eos, dtype=torch.float64)
        horizon = len(eos)
        batch = batch_of([1.0], [[1] * horizon], advantages=[0.0], eos_probs=p.unsqueeze(0))
        bound = estimate_advantages("delta_v_bound", batch)[0]
        for t in range(horizon):
            gap = torch.prod(1 - p[t:]) * (1 - torch.prod(1 - p[:t]))
            assert gap <= bound[t] + 1e-12, (eos, t)
            if not p[t:].any():
                torch.testing.assert_close(gap, bound[t])


# ---- unscored completions, through every registered estimator ------------------------------------------------

ESTIMATORS = sorted(adv.ADVANTAGE_ESTIMATORS)


def batch_with_every_statistic(rewards, advantages, group_size, scale_rewards, ids):
    """A batch holding every statistic an estimator may ask for (from fixed random logits), so that any registered
    estimator runs on it; completions of unequal lengths, padding 0 after each."""
    ids = torch.as_tensor(ids)
    mask = (ids != 0).double()
    logits = torch.randn(*ids.shape, 6, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    statistics = adv.token_statistics(logits, ids, [0], adv.FORWARD_STATISTICS)
    statistics["oar_weights"] = torch.linspace(0.5, 1.5, ids.numel(), dtype=torch.float64).view(ids.shape) * mask
    return GroupBatch(rewards=torch.tensor(rewards, dtype=torch.float64), mask=mask,
                      advantages=torch.tensor(advantages, dtype=torch.float64), group_size=group_size,
                      scale_rewards=scale_rewards, completion_ids=ids, **statistics)


# Five completions of one prompt; the third (NaN) was not scored, and shares its first token with the first two.
UNSCORED_IDS = [[1, 2, 3, 4], [1, 2, 5, 0], [1, 3, 2, 2], [4, 1, 2, 0], [4, 4, 0, 0]]
UNSCORED_REWARDS = [1.0, 0.0, math.nan, 0.5, 1.0]
UNSCORED_ADVANTAGES = [0.9, -1.2, 0.0, -0.3, 0.6]  # A_i as the trainer hands it (any values: only passed on)
SCORED = [0, 1, 3, 4]


def rows_of(batch, rows, group_size):
    """The batch's ``rows`` alone, as a batch of groups of ``group_size``."""
    fields = {name: getattr(batch, name)[rows] for name in ("rewards", "mask", "advantages", *adv.STATISTICS)}
    return dataclasses.replace(batch, group_size=group_size, **fields)


@pytest.mark.parametrize("scale_rewards", ["group", "none"])
@pytest.mark.parametrize("name", ESTIMATORS)
def test_an_unscored_completion_changes_no_scored_completions_advantage(name, scale_rewards):
    """A completion no reward function scored (NaN reward) counts in no baseline, value or scale: every scored
    completion's advantage is what it is in the same group without it, and no NaN reaches the loss."""
    batch = batch_with_every_statistic(UNSCORED_REWARDS, UNSCORED_ADVANTAGES, 5, scale_rewards, UNSCORED_IDS)
    got = estimate_advantages(name, batch)
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got[SCORED], estimate_advantages(name, rows_of(batch, SCORED, 4)), rtol=0, atol=1e-12)


def test_an_unscored_completion_gets_no_return_of_its_own():
    """OTB: the unscored row's advantage is 0 (not 0 − B_t, a return of 0 against the group's baseline); TEMPO: its
    A_i alone, without a TD term from a reward it does not have."""
    batch = batch_with_every_statistic(UNSCORED_REWARDS, UNSCORED_ADVANTAGES, 5, "group", UNSCORED_IDS)
    otb = estimate_advantages("otb", batch)
    assert otb[2].abs().max() == 0 and otb[SCORED].abs().max() > 0.1
    tempo = estimate_advantages("tempo", batch)
    torch.testing.assert_close(tempo[2], torch.full((4,), UNSCORED_ADVANTAGES[2], dtype=torch.float64))


def test_tempos_root_value_is_the_mean_reward_of_the_scored_completions():
    """ab (r = 1), ac (r = 0), de (unscored): V(root) = 1/2 over the two scored completions, so the first token a,
    whose value is also 1/2, adds no TD term; counting the unscored one as 0 would put V(root) at 1/3."""
    batch = batch_of([1.0, 0.0, math.nan], [[1, 1]] * 3, advantages=[0.0, 0.0, 0.0], scale_rewards="none",
                     completion_ids=torch.tensor([[1, 2], [1, 3], [4, 5]]))
    torch.testing.assert_close(estimate_advantages("tempo", batch),
                               torch.tensor([[0.0, 0.5], [0.0, -0.5], [0.0, 0.0]], dtype=torch.float64))


# ---- through the trainer ----------------------------------------------------------------------------------

def twice_grpo(batch):
    """A toy estimator: twice GRPO's advantage. On-policy the loss is linear in A, so one plain SGD step with it
    is exactly twice GRPO's."""
    return 2 * adv.grpo_advantages(batch)


def one_sgd_step(model_dir, folder, **variant):
    from grpo_lambda.trainer import GRPOLambdaTrainer
    from grpo_lambda.trainer_config import GRPOLambdaConfig
    from trainer_batch import make_trainer

    trainer = make_trainer(model_dir, GRPOLambdaTrainer, GRPOLambdaConfig, folder, max_steps=1, optim="sgd",
                           learning_rate=0.5, max_grad_norm=0.0, save_strategy="no",
                           **variants.variant_config_kwargs(variant))
    before = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
    trainer.train()
    return {name: p.detach() - before[name] for name, p in trainer.model.named_parameters()}


def test_an_estimator_registered_from_a_test_file_is_configured_and_trains(model_dir, tmp_path, monkeypatch):
    monkeypatch.setitem(variants.ESTIMATORS, "twice", "twice GRPO's advantage")
    monkeypatch.setitem(adv.ADVANTAGE_ESTIMATORS, "twice", adv.Estimator(twice_grpo, grouped=False))
    from grpo_lambda import config as study

    config = copy.deepcopy(yaml.safe_load((ROOT / "config" / "config.yaml").read_text()))
    config["variants"]["twice"] = {"objective": "grpo", "advantage_estimator": "twice"}
    assert study.validate(config)["variants"]["twice"]["advantage_estimator"] == "twice"

    twice = one_sgd_step(model_dir, tmp_path / "twice", objective="grpo", advantage_estimator="twice")
    grpo = one_sgd_step(model_dir, tmp_path / "grpo", objective="grpo")
    assert max(delta.abs().max().item() for delta in grpo.values()) > 1e-6
    for name, delta in grpo.items():  # float32 weights near 1 round their steps to about 1e-7
        torch.testing.assert_close(twice[name], 2 * delta, rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.parametrize("name", ESTIMATORS)
def test_a_weight_zero_reward_counts_in_no_estimators_returns(model_dir, tmp_path, name):
    """A monitored reward of weight 0 (the format monitor, say) counts in nothing the estimator reads: the
    advantages are those of the same batch scored by the trained reward alone, whatever the monitor says, and
    a completion the trained reward did not score stays unscored where only the monitor scored it."""
    from grpo_lambda import scored_batch
    from grpo_lambda.trainer import GRPOLambdaTrainer
    from grpo_lambda.trainer_config import GRPOLambdaConfig
    from trainer_batch import make_inputs, make_trainer

    oar = {"advantage_estimator": "grpo", "oar_method": "gradient"} if name == "oar" else {"advantage_estimator": name}
    trainer = make_trainer(model_dir, GRPOLambdaTrainer, GRPOLambdaConfig, tmp_path, objective="grpo", **oar)
    trainer.model.train()
    output = make_inputs(trainer, off_policy=False, with_ref=False)
    trained = torch.tensor([1.0, 0.0, math.nan, 0.5])

    def advantages(weights, *columns):
        trainer.reward_weights = torch.tensor(weights)
        trainer._rewards_per_func = torch.stack([trained, *map(torch.tensor, columns)], 1)
        return scored_batch.per_token_advantages(trainer, dict(output))

    alone = advantages([1.0])
    assert torch.isfinite(alone).all()
    for monitor in ([0.0, 1.0, math.nan, 1.0], [1.0, 0.0, 0.7, 0.2]):
        torch.testing.assert_close(advantages([1.0, 0.0], monitor), alone, rtol=0, atol=0, msg=str(monitor))


@pytest.mark.parametrize("estimator", ["otb", "delta_v_bound", "tempo"])
def test_the_trainer_hands_the_estimator_the_policys_statistics(model_dir, tmp_path, estimator):
    """The scored batch's advantages are the estimator's on statistics computed here from TRL's own forward pass
    (log-probabilities) and a softmax of the logits (Σπ², π(EOS)), and the trainer's rewards."""
    from grpo_lambda.trainer import GRPOLambdaTrainer
    from grpo_lambda.trainer_config import GRPOLambdaConfig
    from trainer_batch import length_reward, make_trainer

    trainer = make_trainer(model_dir, GRPOLambdaTrainer, GRPOLambdaConfig, tmp_path, objective="grpo",
                           advantage_estimator=estimator, temperature=0.7)
    trainer.model.train()
    inputs = [{"prompt": prompt} for prompt in ["1+2="] * 4]
    output = trainer._generate_and_score_completions(inputs)
    got = output["advantages"]
    ids, mask = output["completion_ids"], output["completion_mask"]
    full_ids = torch.cat([output["prompt_ids"], ids], 1)
    full_mask = torch.cat([output["prompt_mask"], mask], 1)
    with torch.no_grad():
        logps, _, _ = trainer._get_per_token_logps_and_entropies(trainer.model, full_ids, full_mask, ids.size(1))
        logits = trainer.model(input_ids=full_ids, attention_mask=full_mask).logits[:, -ids.size(1) - 1:-1] / 0.7
    probs = logits.softmax(-1)
    texts = trainer.processing_class.batch_decode(ids, skip_special_tokens=True)
    rewards = torch.tensor(length_reward(texts))
    sequence = (rewards - rewards.mean()) / (rewards.std() + 1e-4)
    batch = GroupBatch(rewards=rewards, mask=mask, advantages=sequence, group_size=4, completion_ids=ids,
                       logps=logps, sum_pi_squared=(probs ** 2).sum(-1),
                       eos_probs=probs[..., trainer.eos_token_ids].sum(-1))
    assert got.shape == mask.shape
    torch.testing.assert_close(got, estimate_advantages(estimator, batch), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("variant", [{"objective": "grpo"}, {"objective": "grpo_lambda", "lam": 0.0}])
def test_the_80_20_control_leaves_gradient_on_the_top_20_percent_entropy_tokens_only(model_dir, tmp_path, monkeypatch,
                                                                                  variant):
    """TRL's top_entropy_quantile 0.2 as a variant key: through TRL's loss (objective grpo) and ours (GRPO-λ at
    λ = 0), the loss has gradient on exactly the tokens whose entropy is at least the 0.8-quantile of the batch's.
    (With a trace, λ > 0, the mask still zeroes the low-entropy tokens' own loss terms, but their log-ratios reach
    the later high-entropy tokens' traced ratios and get gradient through them.)"""
    from grpo_lambda.trainer import GRPOLambdaTrainer
    from grpo_lambda.trainer_config import GRPOLambdaConfig
    from trainer_batch import make_inputs, make_trainer

    trainer = make_trainer(model_dir, GRPOLambdaTrainer, GRPOLambdaConfig, tmp_path,
                           **variants.variant_config_kwargs({**variant, "top_entropy_quantile": 0.2}))
    assert trainer.top_entropy_quantile == 0.2
    inputs = make_inputs(trainer, off_policy=False, with_ref=False)
    mask = inputs["completion_mask"].bool()
    generator = torch.Generator().manual_seed(1)
    entropies = torch.rand(mask.shape, generator=generator)
    logps = (-torch.rand(mask.shape, generator=generator)).requires_grad_()
    monkeypatch.setattr(trainer, "_get_per_token_logps_and_entropies",
                        lambda *args, **kwargs: (logps, entropies, None))
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    trainer._compute_loss(trainer.model, inputs).backward()
    top = (entropies >= torch.quantile(entropies[mask], 0.8)) & mask
    assert 0 < top.sum() < mask.sum()
    assert (logps.grad[top] != 0).all()
    assert (logps.grad[~top] == 0).all()
