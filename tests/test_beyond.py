"""The critic-free neighbours of GRPO-λ in the trainer: Dr. GRPO, DAPO, GSPO, P-trace, S-trace, OAR.

Each is one line of config/compare.yaml; these tests build the trainer from those lines and pin the
property that defines each method, then train every one for two steps on a tiny random model.
"""

import math
from pathlib import Path

import pytest
import torch
import yaml
from datasets import Dataset
from transformers import PreTrainedTokenizerFast

from grpo_lambda.oar import answer_and_reasoning_masks
from grpo_lambda.objectives import high_entropy_mask
from grpo_lambda.scored_batch import uninformative_groups
from grpo_lambda.trainer import GRPOLambdaTrainer
from grpo_lambda.trainer_config import GRPOLambdaConfig
from grpo_lambda.variants import variant_config_kwargs
from trainer_batch import loss_grads_metrics, make_inputs

ROOT = Path(__file__).resolve().parents[1]
COMPARE = yaml.safe_load((ROOT / "config" / "compare.yaml").read_text())["variants"]
GROUP = 4
PROMPTS = ["1+2=", "3*4=", "5-6=", "7+8="]


def varied_reward(prompts, completions, **kwargs):
    """Constant for the prompt "1+2=" (a group with no signal), varied for the others."""
    return [1.0 if prompt == "1+2=" else float(sum(map(ord, completion)) % 7)
            for prompt, completion in zip(prompts, completions)]


def build(model_dir, tmp_path, variant, **extra):
    """A trainer for one compare.yaml variant (a name, or a variant dict) on the tiny random model."""
    spec = COMPARE[variant] if isinstance(variant, str) else variant
    args = GRPOLambdaConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, report_to="none",
                            per_device_train_batch_size=GROUP, num_generations=GROUP, max_completion_length=8,
                            save_strategy="no", logging_steps=1, learning_rate=1e-3, disable_tqdm=True,
                            **{**variant_config_kwargs(spec), **extra})
    tokenizer = PreTrainedTokenizerFast.from_pretrained(model_dir)
    return GRPOLambdaTrainer(model=model_dir, reward_funcs=varied_reward, args=args, processing_class=tokenizer,
                             train_dataset=Dataset.from_dict({"prompt": PROMPTS}))


def scored_batch(trainer, prompts):
    """TRL's scored generation batch for these prompts (each GROUP times) and their rewards."""
    trainer.model.train()
    torch.manual_seed(0)
    output = trainer._generate_and_score_completions([{"prompt": p} for p in prompts for _ in range(GROUP)])
    return output, trainer._rewards_per_func[:, 0]  # what TRL's _calculate_rewards returned


def with_logps(trainer, logps):
    """Make the trainer's forward pass return these log-probs, so a test can take gradients w.r.t. them."""
    entropies = torch.rand(logps.shape, generator=torch.Generator().manual_seed(0))
    trainer._get_per_token_logps_and_entropies = lambda *args, **kwargs: (logps, entropies, None)


def toy_inputs(batch=4, length=6, seed=0):
    generator = torch.Generator().manual_seed(seed)
    completion_mask = torch.ones(batch, length, dtype=torch.long)
    completion_mask[1, 4:] = 0
    completion_mask[3, 2:] = 0
    return {
        "prompt_ids": torch.randint(3, 20, (batch, 3), generator=generator),
        "prompt_mask": torch.ones(batch, 3, dtype=torch.long),
        "completion_ids": torch.randint(3, 20, (batch, length), generator=generator),
        "completion_mask": completion_mask,
        "advantages": torch.tensor([1.0, -0.7, 0.4, -1.1])[:batch],
        "num_items_in_batch": completion_mask.sum(),
    }


# --- the config lines ------------------------------------------------------------------------------


def test_compare_lines_set_the_methods_options(tmp_path):
    def config(name):
        return GRPOLambdaConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none",
                                per_device_train_batch_size=GROUP, num_generations=GROUP,
                                **variant_config_kwargs(COMPARE[name]))

    dr_grpo, dapo, gspo = config("dr_grpo"), config("dapo"), config("gspo")
    assert (dr_grpo.loss_type, dr_grpo.scale_rewards) == ("dr_grpo", "none")
    assert (dapo.loss_type, dapo.epsilon, dapo.epsilon_high, dapo.dynamic_sampling) == ("dapo", 0.2, 0.28, True)
    assert (gspo.importance_sampling_level, gspo.loss_type, gspo.epsilon, gspo.epsilon_high) == (
        "sequence", "grpo", 3e-4, 4e-4)
    assert (config("strace").objective, config("strace").strace_quantile) == ("strace", 0.8)
    assert config("oar_g").oar_method == "gradient" and config("oar_p").oar_method == "perturbation"
    combined = config("recent-trace-0.99-dapo")
    assert (combined.objective, combined.trace_lambda, combined.epsilon_high, combined.dynamic_sampling) == (
        "grpo_lambda", 0.99, 0.28, True)
    assert config("ptrace").advantage_clamp is None and combined.advantage_clamp == -0.1
    assert config("otb").advantage_estimator == "otb" and config("tempo").advantage_estimator == "tempo"
    assert (config("entropy-80-20").objective, config("entropy-80-20").top_entropy_quantile) == ("grpo", 0.2)
    assert config("grpo").advantage_estimator == "grpo"


@pytest.mark.parametrize("variant, culprit", [
    ({"objective": "grpo", "strace_quantile": 0.5}, "strace_quantile"),
    ({"objective": "ptrace", "style": "both"}, "style"),
    ({"objective": "strace", "strace_quantile": 1.5}, "strace_quantile"),
    ({"objective": "grpo", "oar_quantile": 0.5}, "oar_method"),
    ({"objective": "grpo", "oar_method": "saliency"}, "oar_method"),
    ({"objective": "grpo", "oar_method": "gradient", "oar_sigma": 0.0}, "oar_sigma"),
    ({"objective": "grpo", "oar_method": "gradient", "oar_answer_tokens": 0}, "oar_answer_tokens"),
    ({"objective": "grpo", "dynamic_sampling": "yes"}, "dynamic_sampling"),
    ({"objective": "dapo"}, "objective"),
])
def test_bad_variant_keys_name_the_culprit(variant, culprit):
    with pytest.raises(ValueError, match=culprit):
        variant_config_kwargs(variant)


@pytest.mark.parametrize("objective", ["ptrace", "strace"])
def test_history_objectives_refuse_sequence_level_ratios(model_dir, tmp_path, objective):
    with pytest.raises(ValueError, match="importance_sampling_level"):
        build(model_dir, tmp_path, {"objective": objective}, importance_sampling_level="sequence")


# --- the defining property of each method -----------------------------------------------------------


def test_gspo_ratio_is_one_per_sequence(model_dir, tmp_path):
    """GSPO: ∂loss/∂log π(y_t) is the same for every token of a sequence (one ratio, one clip per sequence);
    token-level GRPO on the same batch is not."""
    inputs = toy_inputs()
    mask = inputs["completion_mask"].double()
    generator = torch.Generator().manual_seed(1)
    logps = -torch.rand(mask.shape, generator=generator, dtype=torch.float64) * 2
    shift = 0.3 * torch.randn(mask.shape, generator=generator, dtype=torch.float64)
    shift = shift - (shift * mask).sum(-1, keepdim=True) / mask.sum(-1, keepdim=True)  # mean 0 per sequence
    shift[2] += 0.01  # sequence 2: mean log-ratio 0.01 > ε_high = 4e-4, advantage > 0: clipped as a whole
    inputs["old_per_token_logps"] = logps - shift

    def token_gradients(trainer):
        leaf = logps.clone().requires_grad_()
        with_logps(trainer, leaf)
        trainer.model.train()
        trainer.current_gradient_accumulation_steps = 1
        (gradient,) = torch.autograd.grad(trainer._compute_loss(trainer.model, inputs), leaf)
        return gradient

    gspo = token_gradients(build(model_dir, tmp_path / "gspo", "gspo"))
    for row in range(4):
        tokens = gspo[row][mask[row].bool()]
        assert (tokens - tokens[0]).abs().max() <= 1e-12 * tokens.abs().max().clamp(min=1e-30), row
    assert (gspo[2] == 0).all() and (gspo[0] != 0).all()
    grpo = token_gradients(build(model_dir, tmp_path / "grpo", {"objective": "grpo", "loss_type": "grpo"}))
    assert (grpo[0] - grpo[0, 0]).abs().max() > 1e-3 * grpo[0].abs().max()


def test_dr_grpo_centres_without_scaling_and_divides_by_group_times_max_length(model_dir, tmp_path):
    trainer = build(model_dir, tmp_path, "dr_grpo")
    output, rewards = scored_batch(trainer, ["3*4=", "5-6="])
    groups = rewards.view(-1, GROUP)
    centred = groups - groups.mean(1, keepdim=True)
    assert any(abs(std - 1) > 0.1 for std in groups.std(1).tolist() if std > 0)  # scaling would change it
    # the scored batch holds per-token advantages (grpo_lambda.advantages): A_i on every token of completion i
    torch.testing.assert_close(output["advantages"], centred.flatten().unsqueeze(1).expand_as(output["advantages"]),
                               rtol=1e-6, atol=1e-6)

    inputs = toy_inputs()
    logps = -torch.rand(inputs["completion_mask"].shape, dtype=torch.float64)
    with_logps(trainer, logps)  # on-policy: every ratio is 1, the per-token loss is −A
    trainer.current_gradient_accumulation_steps = 1
    loss = trainer._compute_loss(trainer.model, inputs)
    mask = inputs["completion_mask"]
    expected = -(inputs["advantages"].unsqueeze(1) * mask).sum() / (mask.size(0) * trainer.args.max_completion_length)
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)


def test_dapo_drops_exactly_the_groups_whose_rewards_are_all_equal(model_dir, tmp_path):
    trainer = build(model_dir, tmp_path, "dapo")
    trainer._metrics["train"].clear()
    output, rewards = scored_batch(trainer, ["1+2=", "3*4=", "1+2=", "7+8="])
    groups = rewards.view(-1, GROUP)
    equal = (groups == groups[:, :1]).all(1)
    assert equal.tolist()[0] and equal.tolist()[2] and equal.sum() >= 2
    dropped_rows = output["completion_mask"].sum(-1) == 0
    assert torch.equal(dropped_rows, equal.repeat_interleave(GROUP))  # dropped ⇔ all rewards equal
    assert trainer._metrics["train"]["dynamic_sampling/dropped_groups"] == [float(equal.sum())]
    assert output["num_items_in_batch"] == output["completion_mask"].sum()  # dapo normalises by kept tokens
    assert output["num_items_in_batch"] > 0


def test_uninformative_groups_reads_the_training_reward_only():
    nan = math.nan
    trained = torch.tensor([1.0, 0.0])  # the training reward and a weight-0 monitor (the pipeline's format reward)
    rewards = torch.tensor([[1.0, 0.0], [1.0, 1.0],     # the monitor varies, the training reward does not: dropped
                            [1.0, 1.0], [0.0, 1.0],     # the training reward varies, the monitor does not: kept
                            [2.0, nan], [nan, 0.5],     # a row the training reward did not score is ignored: dropped
                            [nan, nan], [nan, nan]])    # nothing scored: dropped
    assert uninformative_groups(rewards, trained, 2).tolist() == [True, False, True, True]
    # Both weighted: the weighted sum decides, as TRL's advantage sees it (a group whose columns trade off
    # to the same sum has zero advantage).
    both = torch.tensor([1.0, 1.0])
    traded = torch.tensor([[1.0, 0.0], [1.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    assert uninformative_groups(traded, both, 2).tolist() == [False, True]
    with pytest.raises(ValueError, match="multiple"):
        uninformative_groups(rewards[:3], trained, 2)
    with pytest.raises(ValueError, match="one weight per reward function"):
        uninformative_groups(rewards, torch.tensor([1.0]), 2)


def test_a_penalty_reward_is_part_of_the_training_reward_that_dapos_filter_reads():
    """A negative weight is a trained penalty (rl.rewards weight -0.5), not a weight-0 monitor: a group whose
    accuracy is all equal but whose penalty differs has a nonzero advantage and is kept; a group whose penalty
    and accuracy trade off to one sum is dropped."""
    weights = torch.tensor([1.0, -0.5])
    rewards = torch.tensor([[1.0, 0.0], [1.0, 1.0],     # accuracy equal, penalty differs: 1.0 vs 0.5, kept
                            [0.0, 0.0], [0.0, 0.0],     # nothing differs: dropped
                            [1.0, 0.0], [1.5, 1.0]])    # 1.0 and 1.5 - 0.5 = 1.0: the same sum, dropped
    assert uninformative_groups(rewards, weights, 2).tolist() == [False, True, True]


def test_strace_at_quantile_zero_is_ptrace_and_uses_trls_entropy_rule(model_dir, tmp_path):
    strace = build(model_dir, tmp_path / "s", {"objective": "strace", "lam": 0.9, "strace_quantile": 0.0})
    ptrace = build(model_dir, tmp_path / "p", {"objective": "ptrace", "lam": 0.9})
    inputs = make_inputs(ptrace, off_policy=True, with_ref=False)
    s_loss, s_grads, s_metrics = loss_grads_metrics(strace, inputs, 1)
    p_loss, p_grads, p_metrics = loss_grads_metrics(ptrace, inputs, 1)
    assert s_loss.item() == p_loss.item() and s_metrics["trace_token_fraction"] == 1.0
    assert all(torch.equal(s_grads[name], p_grads[name]) for name in p_grads)
    assert s_metrics["trace_weight"] == p_metrics["trace_weight"] != 1.0
    top = build(model_dir, tmp_path / "t", {"objective": "strace", "lam": 0.9, "strace_quantile": 0.8})
    t_loss, _, t_metrics = loss_grads_metrics(top, inputs, 1)
    assert abs(t_loss.item() - p_loss.item()) > 1e-6 and t_metrics["trace_token_fraction"] < 0.5
    # the pure rule of grpo_lambda.objectives is TRL's on one process
    entropies = torch.rand(4, 8, generator=torch.Generator().manual_seed(2))
    mask = inputs["completion_mask"]
    for quantile in (0.0, 0.5, 0.8):
        assert torch.equal(high_entropy_mask(entropies, mask, quantile),
                           top.get_high_entropy_mask(entropies, mask, quantile))


def test_final_answer_is_the_last_boxed_expression_else_the_last_tokens():
    rows = [["so", " ", "\\box", "ed{", "1", "}", " and ", "\\boxed{", "{2", "}+1", "}", ".", ""],
            ["no", " box", " here", "!"],
            ["\\boxed{", "7"]]  # not closed: no answer for the grader either, so the last 2 tokens
    mask = torch.tensor([[1] * 13, [1] * 4 + [0] * 9, [1] * 2 + [0] * 11])
    answer, reasoning = answer_and_reasoning_masks([row + [""] * (13 - len(row)) for row in rows], mask, 2)
    assert answer[0].nonzero().flatten().tolist() == [7, 8, 9, 10]  # the last box, nested braces included
    assert reasoning[0].nonzero().flatten().tolist() == list(range(7))
    assert answer[1].nonzero().flatten().tolist() == [2, 3] and reasoning[1].nonzero().flatten().tolist() == [0, 1]
    assert answer[2].nonzero().flatten().tolist() == [0, 1] and not reasoning[2].any()


@pytest.mark.parametrize("variant", ["oar_g", "oar_p"])
def test_oar_reshapes_advantages_and_keeps_each_sequences_mass(model_dir, tmp_path, variant):
    """A_{i,t} = A_i · w_t with Σ_t w_t = the completion length: the per-sequence sum is A_i × length."""
    trainer = build(model_dir, tmp_path, variant, oar_answer_tokens=3)
    output, rewards = scored_batch(trainer, ["3*4=", "5-6="])
    advantages, mask = output["advantages"], output["completion_mask"]
    assert advantages.shape == mask.shape
    scalar = advantages[:, -1]  # the last token is an answer token: weight 1
    lengths = mask.sum(-1)
    torch.testing.assert_close((advantages * mask).sum(-1), scalar * lengths, rtol=1e-5, atol=1e-6)
    weights = advantages[scalar != 0] / scalar[scalar != 0].unsqueeze(1)
    reshaped = [(row, length) for row, length in zip(weights, lengths[scalar != 0]) if length > 3]
    assert reshaped and any((row[:length - 3] - 1).abs().max() > 1e-3 for row, length in reshaped)


# --- two training steps per method -----------------------------------------------------------------

TRAINED = {
    # variant: a metric of its own in the logs (None: TRL's own metrics only)
    "dr_grpo": None,
    "dapo": "dynamic_sampling/dropped_groups",
    "gspo": "clip_ratio/region_mean",
    "ptrace": "trace_weight",
    "strace": "trace_token_fraction",
    "oar_g": "oar/max_weight",
    "oar_p": "oar/max_weight",
    "recent-trace-0.99-dapo": "dynamic_sampling/dropped_groups",
    "recent-trace-0.99-oar-g": "oar/max_weight",
    "otb": None,
    "tempo": None,
    "entropy-80-20": None,
}


@pytest.mark.slow  # trains two steps per variant (19-79 s each measured on a shared, loaded 2-core machine)
@pytest.mark.parametrize("variant", list(TRAINED))
def test_two_training_steps(model_dir, tmp_path, variant):
    torch.manual_seed(0)
    # 8-token completions: a 3-token answer leaves reasoning tokens for OAR to weigh
    oar = {"oar_answer_tokens": 3} if "oar_method" in COMPARE[variant] else {}
    trainer = build(model_dir, tmp_path, variant, max_steps=2, steps_per_generation=2, **oar)
    before = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
    trainer.train()
    logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert len(logs) == 2 and all(math.isfinite(entry["loss"]) for entry in logs)
    metric = TRAINED[variant]
    if metric is not None:
        values = [entry[metric] for entry in trainer.state.log_history if metric in entry]
        assert values and all(math.isfinite(value) for value in values)
        if metric == "oar/max_weight":
            assert min(values) >= 1.0 - 1e-6  # weights averaging 1 have a maximum of at least 1
        if metric == "trace_token_fraction":
            assert 0.0 < min(values) and max(values) <= 0.5  # the top 20 % by entropy (ties aside)
        if metric == "dynamic_sampling/dropped_groups":
            assert all(value in (0.0, 1.0, 2.0) for value in values)  # two groups per generation batch
    assert any(not torch.equal(before[name], p) for name, p in trainer.model.named_parameters())
