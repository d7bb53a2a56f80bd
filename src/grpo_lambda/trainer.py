"""GRPO-λ as a thin TRL subclass: a config that only adds fields, a trainer that only replaces the loss.

    trainer = GRPOLambdaTrainer(model=..., reward_funcs=..., train_dataset=...,
                                args=GRPOLambdaConfig(..., objective="grpo_lambda", trace_lambda=0.99))

Generation, rewards, advantages, logging and checkpointing are TRL's GRPOTrainer unchanged. The
loss is `grpo_lambda.objectives.policy_loss`; its metrics go to the parent's ``self._metrics``
(so ``trace_weight`` appears in the trainer's logs next to TRL's own ``clip_ratio/...``).

With ``objective="grpo"`` the loss is TRL's own ``_compute_loss`` (every TRL loss type and option
stays available there: GSPO, DAPO, CISPO, ...), on advantages clamped at ``advantage_clamp`` when
one is set. With ``objective="grpo_lambda"``, λ = 0, relative form, recent style and no clamp the
loss equals TRL's GRPO loss.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from trl import GRPOConfig, GRPOTrainer
from trl.trainer.utils import nanmax, nanmin

from grpo_lambda.objectives import LOSS_TYPES, OBJECTIVES, UPDATES, ObjectiveParams, policy_loss
from grpo_lambda.traces import FORMS, STYLES

# Paper Table 2: negative advantages clamped at −0.1 for GRPO-λ.
PAPER_ADVANTAGE_CLAMP = -0.1


@dataclass
class GRPOLambdaConfig(GRPOConfig):
    """TRL's GRPOConfig plus the GRPO-λ fields (paper defaults: λ = 0.99, γ = 1, ε-trace)."""

    objective: str = field(
        default="grpo_lambda",
        metadata={"help": "Policy objective: 'grpo' (TRL's own loss) or 'grpo_lambda' (eligibility traces)."},
    )
    trace_lambda: float = field(default=0.99, metadata={"help": "Trace decay λ in [0, 1]."})
    trace_gamma: float = field(default=1.0, metadata={"help": "Discount γ in (0, 1]; the decay is κ = γλ."})
    trace_style: str = field(
        default="recent", metadata={"help": "Which earlier tokens get credit: 'recent', 'both' or 'early'."}
    )
    trace_form: str = field(
        default="relative",
        metadata={"help": "'relative': κ^(t−c) (paper Eq. 1–2); 'absolute': κ^(n−1−c) (paper Eq. 17–18, "
                  "authors' code)."},
    )
    trace_update: str = field(
        default="trace",
        metadata={"help": "'trace': traced ratio inside the clip (ε-trace); 'weight': per-token loss times the "
                  "trace of 1 + σ(log π − 1) (ε-weight)."},
    )
    trace_eps: float = field(default=0.0, metadata={"help": "Floor ε of the off-diagonal trace weights."})
    advantage_clamp: float | str | None = field(
        default="auto",
        metadata={"help": "Advantages below this value are raised to it. 'auto': −0.1 for grpo_lambda (paper "
                  "Table 2), none for grpo; 'none': no clamp."},
    )

    def __post_init__(self):
        super().__post_init__()
        self.advantage_clamp = _resolve_advantage_clamp(self.advantage_clamp, self.objective)
        _check_choice("objective", self.objective, OBJECTIVES)
        _check_choice("trace_style", self.trace_style, STYLES)
        _check_choice("trace_form", self.trace_form, FORMS)
        _check_choice("trace_update", self.trace_update, UPDATES)
        _check_range("trace_lambda", self.trace_lambda, 0.0, 1.0)
        _check_range("trace_gamma", self.trace_gamma, 0.0, 1.0, low_open=True)
        _check_range("trace_eps", self.trace_eps, 0.0, math.inf)
        if self.advantage_clamp is not None:
            _check_range("advantage_clamp", self.advantage_clamp, -math.inf, 0.0)


class GRPOLambdaTrainer(GRPOTrainer):
    """TRL's GRPOTrainer whose loss is `grpo_lambda.objectives.policy_loss` (see the module docstring)."""

    _tag_names = ["trl", "grpo", "grpo-lambda"]

    def __init__(self, model, reward_funcs, args: GRPOLambdaConfig | None = None, **kwargs):
        if args is None:
            args = GRPOLambdaConfig("GRPO-lambda")
        if not isinstance(args, GRPOLambdaConfig):
            raise ValueError(f"args must be a GRPOLambdaConfig, got {type(args).__name__}")
        if args.objective == "grpo_lambda":
            _check_supported(args)
        super().__init__(model, reward_funcs, args=args, **kwargs)
        # objective "grpo" runs TRL's own loss and needs none.
        self.objective_params = objective_params(args) if args.objective == "grpo_lambda" else None

    def _compute_loss(self, model, inputs):
        if self.args.objective == "grpo":
            if self.args.advantage_clamp is not None:
                inputs = {**inputs, "advantages": inputs["advantages"].clamp(min=self.args.advantage_clamp)}
            return super()._compute_loss(model, inputs)

        # The forward pass, as in GRPOTrainer._compute_loss.
        prompt_ids, prompt_mask = inputs["prompt_ids"], inputs["prompt_mask"]
        completion_ids, completion_mask = inputs["completion_ids"], inputs["completion_mask"]
        input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
        attention_mask = torch.cat([prompt_mask, completion_mask], dim=1)
        logits_to_keep = completion_ids.size(1)
        mask = completion_mask if "tool_mask" not in inputs else completion_mask * inputs["tool_mask"]
        per_token_logps, entropies, aux_loss = self._get_per_token_logps_and_entropies(
            model,
            input_ids,
            attention_mask,
            logits_to_keep,
            compute_entropy=True,
            compute_aux_loss=self.aux_loss_enabled,
            **{key: inputs.get(key) for key in _MULTIMODAL_KEYS},
        )
        advantages = inputs["advantages"]
        if advantages.dim() == 1:
            advantages = advantages.unsqueeze(1)
        mode = "train" if self.model.training else "eval"

        loss, token_metrics = policy_loss(
            per_token_logps,
            inputs.get("old_per_token_logps"),  # None: on-policy, logps.detach() as in TRL
            inputs.get("ref_per_token_logps"),
            advantages,
            mask,
            self.objective_params,
            token_weights=self._token_weights(inputs, per_token_logps, entropies, advantages, mask),
            num_items=self._dapo_normalizer(inputs, mode) if self.loss_type == "dapo" else None,
        )
        accumulation = self.current_gradient_accumulation_steps if mode == "train" else 1.0
        if self.loss_type != "dapo":  # dapo's normalizer already spans one accumulation window
            loss = loss / accumulation
        if self.aux_loss_enabled:
            loss = loss + self.router_aux_loss_coef * aux_loss / accumulation
            self._metrics[mode]["aux_loss"].append(self.accelerator.gather_for_metrics(aux_loss).mean().item())

        self._log_token_metrics(mode, token_metrics, entropies, mask)
        return loss

    def _token_weights(self, inputs, per_token_logps, entropies, advantages, mask):
        """TRL's multiplicative factors of the policy term: off-policy mask, entropy mask, vLLM IS ratio."""
        weights = []
        if self.off_policy_mask_threshold is not None:
            old = inputs.get("old_per_token_logps")
            old = per_token_logps.detach() if old is None else old
            weights.append(
                self.get_off_policy_mask(
                    advantages=advantages,
                    per_token_logps=per_token_logps,
                    sampling_per_token_logps=inputs.get("sampling_per_token_logps", old),
                    mask=mask,
                    off_policy_threshold=self.off_policy_mask_threshold,
                )
            )
        if self.top_entropy_quantile < 1.0:
            weights.append(self.get_high_entropy_mask(entropies, mask, 1 - self.top_entropy_quantile))
        if self.use_vllm and self.vllm_importance_sampling_correction:
            weights.append(inputs["importance_sampling_ratio"])
        if not weights:
            return None
        product = weights[0].to(per_token_logps.dtype)
        for weight in weights[1:]:
            product = product * weight
        return product

    def _dapo_normalizer(self, inputs, mode):
        """num_items_in_batch spans the generation batch: rescale it to one accumulation window (as TRL)."""
        normalizer = inputs["num_items_in_batch"].clamp(min=1.0) / self.accelerator.num_processes
        if mode == "train":
            normalizer = normalizer * self.current_gradient_accumulation_steps / self.args.steps_per_generation
        return normalizer

    def _log_token_metrics(self, mode, token_metrics, entropies, mask):
        """TRL's metric names and reductions (token means over all processes), plus trace_weight."""

        def global_masked_mean(x):
            x = x.expand_as(mask)
            totals = self.accelerator.reduce(torch.stack([(x * mask).sum(), mask.sum().float()]), reduction="sum")
            return (totals[0] / totals[1].clamp(min=1.0)).item()

        def masked_seq_mean(x):
            return (x.expand_as(mask) * mask).sum(-1) / mask.sum(-1)

        metrics = self._metrics[mode]
        if "kl" in token_metrics:
            metrics["kl"].append(global_masked_mean(token_metrics["kl"]))
        metrics["entropy"].append(global_masked_mean(entropies))
        for side in ("low", "high", "region"):
            metrics[f"clip_ratio/{side}_mean"].append(global_masked_mean(token_metrics[f"clip_ratio/{side}"]))
        low_per_sequence = self.accelerator.gather(masked_seq_mean(token_metrics["clip_ratio/low"]))
        metrics["clip_ratio/low_min"].append(nanmin(low_per_sequence).item())
        high_per_sequence = self.accelerator.gather(masked_seq_mean(token_metrics["clip_ratio/high"]))
        metrics["clip_ratio/high_max"].append(nanmax(high_per_sequence).item())
        if "trace_weight" in token_metrics:
            metrics["trace_weight"].append(global_masked_mean(token_metrics["trace_weight"]))


# Inputs that _get_per_token_logps_and_entropies forwards to multimodal models.
_MULTIMODAL_KEYS = (
    "pixel_values", "image_grid_thw", "num_images", "pixel_attention_mask", "spatial_shapes", "num_tiles",
    "image_sizes", "token_type_ids", "mm_token_type_ids", "image_position_ids",
)


def objective_params(args: GRPOLambdaConfig) -> ObjectiveParams:
    """The ObjectiveParams a GRPOLambdaConfig describes (TRL's own fields for clip, KL and loss type)."""
    return ObjectiveParams(
        objective=args.objective,
        lam=args.trace_lambda,
        gamma=args.trace_gamma,
        style=args.trace_style,
        form=args.trace_form,
        eps=args.trace_eps,
        update=args.trace_update,
        advantage_clamp=args.advantage_clamp,
        beta=args.beta,
        kl_ratio_correction=args.use_bias_correction_kl,
        epsilon_low=args.epsilon,
        epsilon_high=args.epsilon_high if args.epsilon_high is not None else args.epsilon,
        delta=args.delta,
        loss_type=args.loss_type,
        max_completion_length=args.max_completion_length,
    )


def _check_supported(args: GRPOLambdaConfig) -> None:
    """TRL options the grpo_lambda loss does not implement: refuse them rather than ignore them."""
    if args.loss_type not in LOSS_TYPES:
        raise ValueError(f"loss_type must be one of {LOSS_TYPES} with objective 'grpo_lambda', got {args.loss_type!r}")
    if args.importance_sampling_level != "token":
        raise ValueError("importance_sampling_level must be 'token' with objective 'grpo_lambda', "
                         f"got {args.importance_sampling_level!r}")
    if args.entropy_coef != 0.0 or args.use_adaptive_entropy:
        raise ValueError("entropy_coef / use_adaptive_entropy (entropy bonus) are not supported with objective "
                         "'grpo_lambda'")


# ---------------------------------------------------------------------------------------------------
# Pipeline variants: {objective: grpo_lambda, lam: 0.99, ...} -> GRPOLambdaConfig keyword arguments.

# Variant key -> config field, for the GRPO-λ trace parameters.
_TRACE_KEYS = {
    "lam": "trace_lambda",
    "gamma": "trace_gamma",
    "style": "trace_style",
    "form": "trace_form",
    "update": "trace_update",
    "eps": "trace_eps",
}
# Keys that name or label a variant and configure nothing.
_DISPLAY_KEYS = ("objective", "label")
# TRL GRPOConfig fields a variant may set (they define the algorithm, not the run), with their choices.
_TRL_KEYS = {
    "loss_type": ("grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo", "luspo", "vespo"),
    "scale_rewards": ("group", "batch", "none"),
    "importance_sampling_level": ("token", "sequence"),
    "epsilon": float,
    "epsilon_high": float,
    "delta": float,
    "beta": float,
    "top_entropy_quantile": float,
    "off_policy_mask_threshold": float,
    "num_iterations": int,
    "mask_truncated_completions": bool,
    "use_bias_correction_kl": bool,
}


def variant_config_kwargs(variant: dict) -> dict:
    """GRPOLambdaConfig keyword arguments for one pipeline variant.

    ``{"objective": "grpo"}`` -> ``{"objective": "grpo", "advantage_clamp": None}``;
    ``{"objective": "grpo_lambda", "lam": 0.99, "style": "both", ...}`` -> ``{"objective": "grpo_lambda",
    "trace_lambda": 0.99, "trace_style": "both", ...}``. Keys left out keep the config's defaults (for
    grpo_lambda the paper's: λ 0.99, γ 1, recent, relative, trace, ε 0, clamp −0.1); grpo has no clamp
    unless asked. TRL keys (loss_type, scale_rewards, epsilon_high, beta, ...) pass through; `label`
    (a display name) is ignored. An unknown key or value raises ValueError naming it.
    """
    if not isinstance(variant, dict):
        raise ValueError(f"variant must be a dict, got {type(variant).__name__}")
    objective = variant.get("objective")
    if objective is None:
        raise ValueError(f"variant {variant!r}: key 'objective' is required, one of {OBJECTIVES}")
    _check_choice("objective", objective, OBJECTIVES)

    kwargs = {"objective": objective}
    if objective == "grpo":
        kwargs["advantage_clamp"] = None
    for key, value in variant.items():
        if key in _DISPLAY_KEYS:
            continue
        if key in _TRACE_KEYS:
            if objective != "grpo_lambda":
                raise ValueError(f"variant key {key!r} applies to objective 'grpo_lambda' only, not {objective!r}")
            kwargs[_TRACE_KEYS[key]] = value
        elif key == "advantage_clamp":
            kwargs["advantage_clamp"] = value
        elif key in _TRL_KEYS:
            kwargs[key] = _check_trl_value(key, value, _TRL_KEYS[key])
        else:
            known = [*_DISPLAY_KEYS, *_TRACE_KEYS, "advantage_clamp", *_TRL_KEYS]
            raise ValueError(f"unknown variant key {key!r}; known keys: {known}")

    # Check the GRPO-λ values now, naming the variant key, rather than when the config is built.
    for key, field_name in _TRACE_KEYS.items():
        if field_name in kwargs:
            _check_variant_trace_value(key, kwargs[field_name])
    if kwargs.get("advantage_clamp") is not None:
        _check_range("advantage_clamp", kwargs["advantage_clamp"], -math.inf, 0.0)
    return kwargs


def _check_variant_trace_value(key, value):
    if key == "style":
        _check_choice(key, value, STYLES)
    elif key == "form":
        _check_choice(key, value, FORMS)
    elif key == "update":
        _check_choice(key, value, UPDATES)
    elif key == "lam":
        _check_range(key, value, 0.0, 1.0)
    elif key == "gamma":
        _check_range(key, value, 0.0, 1.0, low_open=True)
    else:  # eps
        _check_range(key, value, 0.0, math.inf)


def _check_trl_value(key, value, allowed):
    if isinstance(allowed, tuple):
        _check_choice(key, value, allowed)
    elif allowed is bool:
        if not isinstance(value, bool):
            raise ValueError(f"{key} must be true or false, got {value!r}")
    elif allowed is int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{key} must be a positive int, got {value!r}")
    elif value is not None:  # a float; None keeps TRL's meaning "off" (epsilon_high, delta, ...)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"{key} must be a number, got {value!r}")
    return value


def _check_choice(name, value, allowed):
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}")


def _check_range(name, value, low, high, *, low_open=False):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise ValueError(f"{name} must be a number, got {value!r}")
    if value > high or value < low or (low_open and value == low):
        interval = f"{'(' if low_open else '['}{low}, {high}]"
        raise ValueError(f"{name} must lie in {interval}, got {value!r}")


def _resolve_advantage_clamp(value, objective):
    """'auto' -> the objective's default; 'none'/'null' (from a command line) -> None; numbers as given."""
    if isinstance(value, str):
        if value == "auto":
            return PAPER_ADVANTAGE_CLAMP if objective == "grpo_lambda" else None
        if value.lower() in ("none", "null"):
            return None
        try:
            return float(value)
        except ValueError:
            raise ValueError(f"advantage_clamp must be a number, 'auto' or 'none', got {value!r}") from None
    return value
