"""grpo_lambda.trainer: the TRL subclass against TRL's own GRPOTrainer on a tiny random model, and the
behaviours a planted bug once broke unseen (every GRPO-λ setting reaching the loss, the clamp's default per
objective, TRL parity where the generation batch spans several steps, the off-policy mask, DAPO's normaliser,
what vLLM sampling adds to a batch)."""

from pathlib import Path

import pytest
import torch
import yaml
from trl import GRPOConfig, GRPOTrainer

from grpo_lambda.objectives import ObjectiveParams, policy_loss
from grpo_lambda.trainer import GRPOLambdaTrainer
from grpo_lambda.trainer_config import GRPOLambdaConfig
from grpo_lambda.variants import variant_config_kwargs

from trainer_batch import COMPLETION, assert_same, loss_grads_metrics, make_inputs, make_trainer

CASES = [
    # loss_type, extra config, off-policy old log-probs
    ("grpo", {}, False),
    ("grpo", {"beta": 0.04, "epsilon_high": 0.28}, True),
    ("bnpo", {"beta": 0.04, "gradient_accumulation_steps": 2}, True),
    ("dr_grpo", {"gradient_accumulation_steps": 2}, True),
    ("dapo", {}, False),
    ("dapo", {"beta": 0.04, "gradient_accumulation_steps": 2, "use_bias_correction_kl": False}, True),
    ("dapo", {"top_entropy_quantile": 0.5, "off_policy_mask_threshold": 0.01, "delta": 1.1}, True),
]


@pytest.mark.parametrize("loss_type, extra, off_policy", CASES)
def test_lambda_zero_equals_trl_grpo(model_dir, tmp_path, loss_type, extra, off_policy):
    """λ = 0, relative form, recent style, no clamp: TRL's loss, gradients and metrics."""
    config = {"loss_type": loss_type, **extra}
    theirs = make_trainer(model_dir, GRPOTrainer, GRPOConfig, tmp_path / "trl", **config)
    ours = make_trainer(model_dir, GRPOLambdaTrainer, GRPOLambdaConfig, tmp_path / "ours", objective="grpo_lambda",
                        trace_lambda=0.0, trace_style="recent", trace_form="relative", advantage_clamp=None, **config)
    inputs = make_inputs(theirs, off_policy=off_policy, with_ref="beta" in extra)
    accumulation = extra.get("gradient_accumulation_steps", 1)
    trl_result = loss_grads_metrics(theirs, inputs, accumulation)
    our_result = loss_grads_metrics(ours, inputs, accumulation)
    assert_same(our_result, trl_result)
    assert our_result[2]["trace_weight"] == 1.0
    if off_policy and "top_entropy_quantile" not in extra:
        assert trl_result[2]["clip_ratio/region_mean"] > 0  # the comparison covers the clipped branch


def test_positive_lambda_changes_the_loss_and_logs_trace_weight(model_dir, tmp_path):
    theirs = make_trainer(model_dir, GRPOTrainer, GRPOConfig, tmp_path / "trl", loss_type="dapo")
    ours = make_trainer(model_dir, GRPOLambdaTrainer, GRPOLambdaConfig, tmp_path / "ours", loss_type="dapo",
                        trace_lambda=0.9, advantage_clamp=None)
    inputs = make_inputs(theirs, off_policy=True, with_ref=False)
    trl_loss, _, _ = loss_grads_metrics(theirs, inputs, 1)
    loss, _, metrics = loss_grads_metrics(ours, inputs, 1)
    assert abs(loss.item() - trl_loss.item()) > 1e-4
    # mean over the 23 completion tokens of Σ_{c≤t} 0.9^(t−c)
    lengths = inputs["completion_mask"].sum(-1).tolist()
    row_sums = [sum(0.9**d for d in range(t + 1)) for n in lengths for t in range(n)]
    assert metrics["trace_weight"] == pytest.approx(sum(row_sums) / len(row_sums), rel=1e-6)


@pytest.mark.parametrize("extra", [{"loss_type": "grpo", "importance_sampling_level": "sequence"},
                                   {"loss_type": "cispo", "epsilon_high": 5.0}])
def test_objective_grpo_is_trl_loss_for_any_trl_option(model_dir, tmp_path, extra):
    theirs = make_trainer(model_dir, GRPOTrainer, GRPOConfig, tmp_path / "trl", **extra)
    ours = make_trainer(model_dir, GRPOLambdaTrainer, GRPOLambdaConfig, tmp_path / "ours", objective="grpo", **extra)
    assert ours.args.advantage_clamp is None  # 'auto' means no clamp for grpo
    inputs = make_inputs(theirs, off_policy=True, with_ref=False)
    assert_same(loss_grads_metrics(ours, inputs, 1), loss_grads_metrics(theirs, inputs, 1))


def test_objective_grpo_with_clamp_is_trl_loss_on_clamped_advantages(model_dir, tmp_path):
    theirs = make_trainer(model_dir, GRPOTrainer, GRPOConfig, tmp_path / "trl", loss_type="bnpo")
    ours = make_trainer(model_dir, GRPOLambdaTrainer, GRPOLambdaConfig, tmp_path / "ours", objective="grpo",
                        loss_type="bnpo", advantage_clamp=-0.1)
    inputs = make_inputs(theirs, off_policy=True, with_ref=False)
    clamped = {**inputs, "advantages": inputs["advantages"].clamp(min=-0.1)}
    ours_result = loss_grads_metrics(ours, inputs, 1)
    assert_same(ours_result, loss_grads_metrics(theirs, clamped, 1))
    assert abs(ours_result[0].item() - loss_grads_metrics(theirs, inputs, 1)[0].item()) > 1e-4


def test_training_steps_log_trace_weight(model_dir, tmp_path):
    trainer = make_trainer(model_dir, GRPOLambdaTrainer, GRPOLambdaConfig, tmp_path, trace_lambda=0.99,
                           trace_style="both", max_steps=2, logging_steps=1, learning_rate=1e-3, save_strategy="no")
    before = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
    trainer.train()
    logs = [entry for entry in trainer.state.log_history if "trace_weight" in entry]
    assert len(logs) == 2
    assert all(entry["trace_weight"] >= 1.0 for entry in logs)
    assert any(not torch.equal(before[name], p) for name, p in trainer.model.named_parameters())


# --- configuration ---------------------------------------------------------------------------------


def base_config(tmp_path, **kwargs):
    """A CPU config of 4 × 4 completions; a variant's own num_generations (e.g. compare.yaml's otb-g4) wins."""
    return GRPOLambdaConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, report_to="none",
                            **{"per_device_train_batch_size": 4, "num_generations": 4, **kwargs})


def test_config_advantage_clamp_defaults(tmp_path):
    assert base_config(tmp_path).advantage_clamp == -0.1  # grpo_lambda: paper Table 2
    assert base_config(tmp_path, objective="grpo").advantage_clamp is None
    assert base_config(tmp_path, advantage_clamp="none").advantage_clamp is None
    assert base_config(tmp_path, advantage_clamp="Null").advantage_clamp is None  # YAML's word, any case
    assert base_config(tmp_path, advantage_clamp="-0.2").advantage_clamp == -0.2


@pytest.mark.parametrize("field, value", [("objective", "ppo"), ("trace_style", "late"), ("trace_form", "abs"),
                                          ("trace_update", "both"), ("trace_lambda", 1.5), ("trace_gamma", 0.0),
                                          ("trace_eps", -1.0), ("advantage_clamp", 0.3),
                                          ("advantage_clamp", "sometimes")])
def test_config_rejects_bad_values_naming_the_field(tmp_path, field, value):
    with pytest.raises(ValueError, match=field):
        base_config(tmp_path, **{field: value})


@pytest.mark.parametrize("extra, culprit", [({"loss_type": "cispo"}, "loss_type"),
                                            ({"importance_sampling_level": "sequence"}, "importance_sampling_level"),
                                            ({"entropy_coef": 0.01}, "entropy_coef")])
def test_trainer_refuses_trl_options_grpo_lambda_does_not_implement(model_dir, tmp_path, extra, culprit):
    with pytest.raises(ValueError, match=culprit):
        make_trainer(model_dir, GRPOLambdaTrainer, GRPOLambdaConfig, tmp_path, **extra)


# --- pipeline variants -----------------------------------------------------------------------------


def test_variant_config_kwargs_maps_keys(tmp_path):
    assert variant_config_kwargs({"objective": "grpo", "label": "GRPO"}) == {"objective": "grpo",
                                                                             "advantage_clamp": None}
    variant = {"objective": "grpo_lambda", "lam": 0.99, "style": "both", "update": "trace", "form": "relative",
               "eps": 0.0, "gamma": 1.0, "advantage_clamp": -0.1, "loss_type": "bnpo", "epsilon_high": 0.28,
               "beta": 0.04, "scale_rewards": "none"}
    kwargs = variant_config_kwargs(variant)
    assert kwargs == {"objective": "grpo_lambda", "trace_lambda": 0.99, "trace_style": "both",
                      "trace_update": "trace", "trace_form": "relative", "trace_eps": 0.0, "trace_gamma": 1.0,
                      "advantage_clamp": -0.1, "loss_type": "bnpo", "epsilon_high": 0.28, "beta": 0.04,
                      "scale_rewards": "none"}
    config = base_config(tmp_path, **kwargs)
    assert (config.trace_style, config.loss_type, config.epsilon_high) == ("both", "bnpo", 0.28)
    gspo = variant_config_kwargs({"objective": "grpo", "importance_sampling_level": "sequence", "loss_type": "grpo"})
    assert base_config(tmp_path, **gspo).importance_sampling_level == "sequence"


@pytest.mark.parametrize("config_file", ["config.yaml", "paper.yaml", "compare.yaml", "beyond.yaml"])
def test_pipeline_config_variants_map_to_configs(tmp_path, config_file):
    path = Path(__file__).resolve().parents[1] / "config" / config_file
    if not path.exists():
        pytest.skip(f"{path} not present")
    variants = yaml.safe_load(path.read_text())["variants"]
    for name, variant in variants.items():
        config = base_config(tmp_path, **variant_config_kwargs(variant))
        assert config.objective == variant["objective"], name
        if variant["objective"] == "grpo_lambda":
            assert config.trace_lambda == variant.get("lam", 0.99), name


@pytest.mark.parametrize(
    "variant, culprit",
    [
        ({"objective": "grpo_lambda", "lamda": 0.9}, "lamda"),
        ({"objective": "grpo_lambda", "style": "late"}, "style"),
        ({"objective": "grpo_lambda", "lam": 2}, "lam"),
        ({"objective": "grpo_lambda", "update": "both"}, "update"),
        ({"objective": "grpo", "lam": 0.9}, "lam"),
        ({"objective": "gspo"}, "objective"),
        ({"lam": 0.9}, "objective"),
        ({"objective": "grpo", "loss_type": "ppo"}, "loss_type"),
        ({"objective": "grpo", "beta": "high"}, "beta"),
        ({"objective": "grpo", "advantage_clamp": 1.0}, "advantage_clamp"),
        ({"objective": "grpo", "output_dir": "x"}, "output_dir"),
    ],
)
def test_variant_config_kwargs_rejects_unknown_keys_and_values(variant, culprit):
    with pytest.raises(ValueError, match=culprit):
        variant_config_kwargs(variant)


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


# --- TRL parity of the off-policy mask and of the per-process DAPO normaliser ----------------------


def test_off_policy_mask_drops_the_sequences_trl_drops(model_dir, tmp_path):
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
