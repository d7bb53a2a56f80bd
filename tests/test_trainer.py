"""grpo_lambda.trainer: the TRL subclass against TRL's own GRPOTrainer on a tiny random model."""

from pathlib import Path

import pytest
import torch
import yaml
from trl import GRPOConfig, GRPOTrainer

from grpo_lambda.trainer import GRPOLambdaTrainer
from grpo_lambda.trainer_config import GRPOLambdaConfig
from grpo_lambda.variants import variant_config_kwargs

from trainer_batch import assert_same, loss_grads_metrics, make_inputs, make_trainer


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
    return GRPOLambdaConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, report_to="none",
                            per_device_train_batch_size=4, num_generations=4, **kwargs)


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
