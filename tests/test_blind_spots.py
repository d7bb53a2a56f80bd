"""Behaviours a planted bug could break without any other test noticing.

Each test here pins one behaviour so that the bug it names makes the fast suite fail: the trainer
honouring every GRPO-λ setting, the advantage clamp's default per objective, grade_many keeping
rows in place, Table 1 averaging over the variants present, a checkpoint at max_steps refused, and
bootstrap intervals of the width their level promises.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
from trl import GRPOConfig, GRPOTrainer

from grpo_lambda import config as study
from grpo_lambda import stats
from grpo_lambda.grading import grade, grade_many
from grpo_lambda.objectives import ObjectiveParams, policy_loss
from grpo_lambda.tables.build import build_tables
from grpo_lambda.tables.cells import Cells
from grpo_lambda.tables.options import REPORT_DEFAULTS
from grpo_lambda.trainer import GRPOLambdaTrainer
from grpo_lambda.trainer_config import GRPOLambdaConfig
from test_aggregate import BENCHMARKS, DATASETS, _mean_over_seeds
from test_aggregate import tree as aggregate_tree  # noqa: F401 (a fixture)
from test_config import DEFAULT
from trainer_batch import COMPLETION, make_inputs, make_trainer

# --- the trainer honours every GRPO-λ setting ------------------------------------------------------

# (config fields, the ObjectiveParams fields they must reach). Each differs from the defaults in one
# setting (λ apart), so a trainer that dropped it would compute the default's loss.
LAMBDA_SETTINGS = {
    "style both": ({"trace_style": "both"}, {"style": "both"}),
    "style early": ({"trace_style": "early"}, {"style": "early"}),
    "absolute form": ({"trace_form": "absolute"}, {"form": "absolute"}),
    "weight update": ({"trace_update": "weight"}, {"update": "weight"}),
    "eps floor": ({"trace_eps": 0.3, "trace_lambda": 0.7}, {"eps": 0.3, "lam": 0.7}),
    "gamma below one": ({"trace_gamma": 0.8}, {"gamma": 0.8}),
    "clip range": ({"epsilon": 0.05}, {"epsilon_low": 0.05, "epsilon_high": 0.05}),
    "P-trace over the sequence": ({"objective": "ptrace", "history_scope": "sequence"},
                                  {"objective": "ptrace", "advantage_clamp": None, "history_scope": "sequence"}),
}
# fields that name the objective rather than a setting under test: the defaults keep them
_IDENTITY = ("objective", "advantage_clamp", "lam")


def forward_logps(trainer, inputs):
    """The trainer's own per-token log-probs of the completions (with gradient)."""
    return trainer._get_per_token_logps_and_entropies(
        trainer.model, torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], 1),
        torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], 1), COMPLETION)[0]


def trainer_loss(trainer, inputs):
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    trainer._metrics["train"].clear()
    with torch.no_grad():
        return trainer._compute_loss(trainer.model, inputs)


@pytest.mark.parametrize("setting", sorted(LAMBDA_SETTINGS))
def test_trainer_loss_is_policy_loss_with_every_grpo_lambda_setting(model_dir, tmp_path, setting):
    config_fields, param_fields = LAMBDA_SETTINGS[setting]
    trainer = make_trainer(model_dir, GRPOLambdaTrainer, GRPOLambdaConfig, tmp_path, loss_type="bnpo",
                           **{"objective": "grpo_lambda", "trace_lambda": 0.9, **config_fields})
    inputs = make_inputs(trainer, off_policy=True, with_ref=False)
    loss = trainer_loss(trainer, inputs)

    trainer.model.train()
    with torch.no_grad():
        logps = forward_logps(trainer, inputs)

    def direct(**fields):
        # hand-built, not objective_params(args): the config's path to the loss is under test
        params = ObjectiveParams(**{"objective": "grpo_lambda", "lam": 0.9, "advantage_clamp": -0.1,
                                    "loss_type": "bnpo", **fields})
        return policy_loss(logps, inputs["old_per_token_logps"], None, inputs["advantages"],
                           inputs["completion_mask"], params)[0]

    torch.testing.assert_close(loss, direct(**param_fields), rtol=1e-6, atol=1e-9)
    defaults = {key: value for key, value in param_fields.items() if key in _IDENTITY}
    assert abs(loss.item() - direct(**defaults).item()) > 1e-5, "the setting must change the loss"


# --- the advantage clamp's default per objective ---------------------------------------------------

CLAMP_DEFAULTS = {"grpo": None, "grpo_lambda": -0.1, "ptrace": None, "strace": None}


@pytest.mark.parametrize("objective", sorted(CLAMP_DEFAULTS))
def test_advantage_clamp_default_per_objective(model_dir, tmp_path, objective):
    """GRPO-λ clamps negative advantages at −0.1 by default (paper Table 2); the others do not.

    Judged by behaviour only: the loss on advantages A against the loss on A clamped at −0.1 by hand
    is the same exactly when the trainer clamps.
    """
    trainer = make_trainer(model_dir, GRPOLambdaTrainer, GRPOLambdaConfig, tmp_path, objective=objective,
                           loss_type="bnpo", trace_lambda=0.9)
    assert trainer.args.advantage_clamp == CLAMP_DEFAULTS[objective]
    inputs = make_inputs(trainer, off_policy=True, with_ref=False)
    assert (inputs["advantages"] < -0.1).any()
    clamped = {**inputs, "advantages": inputs["advantages"].clamp(min=-0.1)}
    same = torch.isclose(trainer_loss(trainer, inputs), trainer_loss(trainer, clamped), rtol=1e-7, atol=0.0)
    assert bool(same) == (CLAMP_DEFAULTS[objective] is not None)


# --- TRL parity where the generation batch spans several optimizer steps ---------------------------

PARITY_CASES = [
    # DAPO's normaliser is rescaled by accumulation / steps_per_generation: they differ here
    ("dapo", {"gradient_accumulation_steps": 2, "steps_per_generation": 4}, 2),
    ("dapo", {"gradient_accumulation_steps": 4, "steps_per_generation": 2, "beta": 0.04}, 4),
    # an uneven entropy quantile tells q from 1 − q
    ("dapo", {"top_entropy_quantile": 0.8}, 1),
    ("bnpo", {"top_entropy_quantile": 0.3, "gradient_accumulation_steps": 2, "steps_per_generation": 4}, 2),
]


@pytest.mark.parametrize("loss_type, extra, accumulation", PARITY_CASES)
def test_lambda_zero_equals_trl_when_steps_per_generation_differs(model_dir, tmp_path, loss_type, extra,
                                                                   accumulation):
    from test_trainer import assert_same, loss_grads_metrics

    config = {"loss_type": loss_type, **extra}
    theirs = make_trainer(model_dir, GRPOTrainer, GRPOConfig, tmp_path / "trl", **config)
    ours = make_trainer(model_dir, GRPOLambdaTrainer, GRPOLambdaConfig, tmp_path / "ours", objective="grpo_lambda",
                        trace_lambda=0.0, advantage_clamp=None, **config)
    assert theirs.args.steps_per_generation == extra.get("steps_per_generation", accumulation)
    inputs = make_inputs(theirs, off_policy=True, with_ref="beta" in extra)
    # the batch's token count spans the whole generation batch, as TRL hands it over
    inputs["num_items_in_batch"] = inputs["completion_mask"].sum() * theirs.args.steps_per_generation
    trl_result = loss_grads_metrics(theirs, inputs, accumulation)
    assert_same(loss_grads_metrics(ours, inputs, accumulation), trl_result)


# --- grade_many keeps each verdict in its row ------------------------------------------------------

# (answer, gold, correct): symbolic (sympy / math-verify) right and wrong answers, interleaved with
# answers the string comparison decides.
GRADED = [
    (r"3\sqrt{2}", r"\sqrt{18}", True),
    (r"\frac{\pi}{4}", "45^\\circ", False),
    ("12", "12", True),
    (r"\frac{7}{3}", r"2\frac{1}{3}", True),
    (r"e^{2}", r"e^{3}", False),
    ("13", "12", False),
    (r"\sqrt{2}+1", r"1+\sqrt{2}", True),
    (r"2\sqrt{3}", r"\sqrt{11}", False),
    (r"\frac{1}{4}", "0.25", True),
    (r"x^{2}+2x+1", r"(x+1)^{3}", False),
]


def test_grade_many_in_parallel_keeps_each_verdict_in_its_row():
    completions = [f"so the answer is \\boxed{{{answer}}}" for answer, _, _ in GRADED]
    golds = [gold for _, gold, _ in GRADED]
    truth = [correct for _, _, correct in GRADED]
    parallel = grade_many(completions, golds, processes=2, timeout=30)  # first: no cached verdicts
    assert parallel == truth
    assert parallel == [grade(text, gold, timeout=30) for text, gold in zip(completions, golds)]
    reordered = grade_many(completions[::-1], golds[::-1], processes=2, timeout=30)
    assert reordered == truth[::-1]


# --- Table 1 on a partial results tree -------------------------------------------------------------


def test_table1_averages_over_the_variants_present(aggregate_tree, tmp_path):
    """A variant missing on one training set leaves that set's GRPO-λ mean to the variants present."""
    import shutil

    root, config = aggregate_tree
    partial = tmp_path / "partial"
    shutil.copytree(root, partial)
    shutil.rmtree(partial / "qwen15" / "gsm8k" / "rt98")  # rt99 alone on gsm8k
    shutil.rmtree(partial / "qwen15" / "gsm8k" / "grpo")  # GRPO on math12k only
    config = {**config, "report": {"bootstrap": 0}}
    t1 = build_tables(config, partial)["table1"].set_index(["model", "method"])
    lam, grpo = t1.loc[("qwen15", "grpo_lambda")], t1.loc[("qwen15", "grpo")]
    assert lam["variants"] == "rt98 rt99" and lam["datasets"] == "math12k gsm8k"
    for benchmark in BENCHMARKS:
        math12k = np.mean([_mean_over_seeds("qwen15", "math12k", v, benchmark) for v in ("rt98", "rt99")])
        gsm8k = _mean_over_seeds("qwen15", "gsm8k", "rt99", benchmark)
        assert lam[benchmark] == pytest.approx((math12k + gsm8k) / 2)
        assert grpo[benchmark] == pytest.approx(_mean_over_seeds("qwen15", "math12k", "grpo", benchmark))
    assert grpo["datasets"] == "math12k"
    assert lam["average"] == pytest.approx(np.mean([lam[b] for b in BENCHMARKS]))
    assert set(DATASETS) == {"math12k", "gsm8k"}


# --- a checkpoint at max_steps is refused ----------------------------------------------------------


def test_checkpoint_at_max_steps_is_refused_and_one_before_is_kept():
    steps = DEFAULT["rl"]["max_steps"]
    config = copy.deepcopy(DEFAULT)
    config["evaluation"]["checkpoints"] = [steps]
    with pytest.raises(study.ConfigError, match=rf"evaluation\.checkpoints \[{steps}\]"):
        study.validate(config)
    config["evaluation"]["checkpoints"] = [steps - 1]
    assert study.validate(config)["evaluation"]["checkpoints"] == [steps - 1]


# --- interval width against the binomial width -----------------------------------------------------


@pytest.mark.parametrize("level, z", [(0.90, 1.6448536), (0.95, 1.9599640)])
def test_bootstrap_width_is_the_binomial_width_of_its_level(level, z):
    """One seed, n problems, accuracy p: the percentile interval is about 2 z √(p(1−p)/n) wide. The
    90% width is 16% below the 95% one, twice the tolerance, so one level cannot pass for the other."""
    n, p = 2000, 0.3
    correct = np.zeros(n)
    correct[: int(p * n)] = 1.0
    analytic = 2 * z * math.sqrt(p * (1 - p) / n)
    interval = stats.bootstrap_mean(correct, n_boot=4000, level=level, seed=1)
    assert (interval.high - interval.low) == pytest.approx(analytic, rel=0.06)
    # the tables ask for the report's level through Cells
    options = {"bootstrap": 4000, "level": level, "seed": 1}
    cells = Cells(_empty_samples(), [], options)
    table_interval = cells.interval([stats.Term(1.0, correct, "s", "p")])
    assert (table_interval.high - table_interval.low) == pytest.approx(analytic, rel=0.06)
    assert REPORT_DEFAULTS["level"] == 0.95


def _empty_samples():
    import pandas as pd

    return pd.DataFrame({column: [] for column in ("mode", "benchmark", "id", "model", "dataset", "variant",
                                                   "step", "seed", "correct")})


# --- TRL parity of the off-policy mask and of the per-process DAPO normaliser ----------------------


def test_off_policy_mask_drops_the_sequences_trl_drops(model_dir, tmp_path):
    from test_trainer import assert_same, loss_grads_metrics

    config = {"loss_type": "dapo", "off_policy_mask_threshold": 0.1}
    theirs = make_trainer(model_dir, GRPOTrainer, GRPOConfig, tmp_path / "trl", **config)
    ours = make_trainer(model_dir, GRPOLambdaTrainer, GRPOLambdaConfig, tmp_path / "ours", objective="grpo_lambda",
                        trace_lambda=0.0, advantage_clamp=None, **config)
    inputs = make_inputs(theirs, off_policy=True, with_ref=False)
    inputs["old_per_token_logps"][1] += 0.5  # a negative advantage far off-policy: the mask drops it
    trl_result = loss_grads_metrics(theirs, inputs, 1)
    assert_same(loss_grads_metrics(ours, inputs, 1), trl_result)
    unmasked = make_trainer(model_dir, GRPOTrainer, GRPOConfig, tmp_path / "plain", loss_type="dapo")
    assert abs(loss_grads_metrics(unmasked, inputs, 1)[0].item() - trl_result[0].item()) > 1e-5


def test_dapo_normaliser_per_process_equals_trl(model_dir, tmp_path, monkeypatch):
    """The token count spans every process: each divides it by their number, as TRL does."""
    from test_trainer import assert_same, loss_grads_metrics

    config = {"loss_type": "dapo", "gradient_accumulation_steps": 2}
    theirs = make_trainer(model_dir, GRPOTrainer, GRPOConfig, tmp_path / "trl", **config)
    ours = make_trainer(model_dir, GRPOLambdaTrainer, GRPOLambdaConfig, tmp_path / "ours", objective="grpo_lambda",
                        trace_lambda=0.0, advantage_clamp=None, **config)
    inputs = make_inputs(theirs, off_policy=True, with_ref=False)
    inputs["num_items_in_batch"] = inputs["completion_mask"].sum() * 4  # four processes' worth of tokens
    single = loss_grads_metrics(theirs, inputs, 2)[0]
    monkeypatch.setattr(type(theirs.accelerator), "num_processes", property(lambda self: 4))
    trl_result = loss_grads_metrics(theirs, inputs, 2)
    assert_same(loss_grads_metrics(ours, inputs, 2), trl_result)
    torch.testing.assert_close(trl_result[0], single * 4)


@pytest.mark.parametrize("case", ["on-policy batch", "sampling log-probs", "vLLM ratio", "tool mask"])
def test_what_vllm_sampling_adds_to_a_batch_reaches_the_loss_as_in_trl(model_dir, tmp_path, case):
    """A vLLM run's batch carries the sampler's own log-probs (the off-policy mask prefers them to the
    old ones) and a truncated importance-sampling ratio; an on-policy batch has no old log-probs; a
    tool-calling batch masks the tools' tokens out of the loss. Each gives TRL's loss, gradients and
    metrics, and each input changes the loss (so none can be ignored)."""
    from test_trainer import assert_same, loss_grads_metrics

    config = {"loss_type": "dapo"} if case == "vLLM ratio" else {"loss_type": "dapo", "off_policy_mask_threshold": 0.1}
    theirs = make_trainer(model_dir, GRPOTrainer, GRPOConfig, tmp_path / "trl", **config)
    ours = make_trainer(model_dir, GRPOLambdaTrainer, GRPOLambdaConfig, tmp_path / "ours", objective="grpo_lambda",
                        trace_lambda=0.0, advantage_clamp=None, **config)
    inputs = make_inputs(theirs, off_policy=case != "on-policy batch", with_ref=False)
    added = None
    if case == "sampling log-probs":  # the sampler saw sequence 1 far off-policy; the old log-probs do not
        added = "sampling_per_token_logps"
        inputs[added] = inputs["old_per_token_logps"].clone()
        inputs[added][1] += 0.5
    elif case == "tool mask":
        added = "tool_mask"
        inputs[added] = torch.ones_like(inputs["completion_mask"])
        inputs[added][0, 3:7] = 0
    elif case == "vLLM ratio":
        added = "importance_sampling_ratio"
        inputs[added] = torch.rand(inputs["completion_mask"].shape, generator=torch.Generator().manual_seed(1)) + 0.5
        for trainer in (theirs, ours):  # the correction TRL applies after vLLM generation (no vLLM on CPU)
            trainer.use_vllm, trainer.vllm_importance_sampling_correction = True, True
    trl_result = loss_grads_metrics(theirs, inputs, 1)
    assert_same(loss_grads_metrics(ours, inputs, 1), trl_result)
    if added is not None:
        ours.use_vllm = False
        without = {key: value for key, value in inputs.items() if key != added}
        assert abs(loss_grads_metrics(ours, without, 1)[0].item() - trl_result[0].item()) > 1e-5


# --- the pure maths: what the module's own tests left open -----------------------------------------


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


def test_ptrace_decays_with_gamma_times_lambda():
    """P-trace's history uses κ = γλ: γ = 0.5, λ = 0.9 is λ = 0.45 alone, and γ < 1 changes the loss."""
    generator = torch.Generator().manual_seed(3)
    logps = -1.0 + 0.3 * torch.randn(3, 12, generator=generator)
    old = logps.detach() + 0.3 * torch.randn(3, 12, generator=generator)
    mask = torch.ones(3, 12)
    mask[1, 7:] = 0
    advantages = torch.tensor([1.0, -0.5, 0.7])

    def loss(**fields):
        return policy_loss(logps, old, None, advantages, mask, ObjectiveParams(objective="ptrace", **fields))[0]

    torch.testing.assert_close(loss(lam=0.9, gamma=0.5), loss(lam=0.45))
    assert abs(loss(lam=0.9, gamma=0.5).item() - loss(lam=0.9).item()) > 1e-6


@pytest.mark.parametrize("fields", [{"style": "both"}, {"form": "absolute"}, {"eps": 0.3, "lam": 0.7},
                                    {"gamma": 0.8}, {"update": "weight", "style": "early"}])
def test_half_precision_loss_keeps_every_trace_setting(fields):
    """bfloat16 log-probs are traced in float32: the loss is the float32 one, setting included."""
    generator = torch.Generator().manual_seed(5)
    # values bfloat16 holds exactly, so the two precisions start from the same numbers
    logps = (-1.0 - torch.rand(3, 16, generator=generator)).bfloat16().float()
    old = (logps + 0.2 * torch.randn(3, 16, generator=generator)).bfloat16().float()
    mask = torch.ones(3, 16)
    mask[2, 9:] = 0
    advantages = torch.tensor([1.0, -0.5, 0.7])

    def loss(dtype, **overrides):
        params = ObjectiveParams(**{"objective": "grpo_lambda", "lam": 0.9, "loss_type": "bnpo", **overrides})
        return policy_loss(logps.to(dtype), old.to(dtype), None, advantages, mask, params)[0].float()

    half, full = loss(torch.bfloat16, **fields), loss(torch.float32, **fields)
    default = loss(torch.float32, lam=fields.get("lam", 0.9))
    assert abs(half.item() - full.item()) < 0.25 * abs(full.item() - default.item())


@pytest.mark.parametrize("length", [65, 100, 128, 129])
def test_apply_trace_across_two_scan_blocks(length):
    """Lengths of two 64-token blocks (and just past them): the first block's state carries into the second."""
    from grpo_lambda.traces import apply_trace, trace_matrix

    x = torch.randn(2, length, generator=torch.Generator().manual_seed(length), dtype=torch.float64)
    for style, eps in (("recent", 0.0), ("recent", 1e-3), ("both", 0.0)):
        dense = x @ trace_matrix(length, 0.97, style=style, eps=eps).T
        torch.testing.assert_close(apply_trace(x, 0.97, style=style, eps=eps), dense, rtol=1e-10, atol=1e-10)
