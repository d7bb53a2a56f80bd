"""GRPO-λ and its critic-free neighbours as a thin TRL subclass: a config that only adds fields, a
trainer that replaces the loss and post-processes TRL's scored batch.

    trainer = GRPOLambdaTrainer(model=..., reward_funcs=..., train_dataset=...,
                                args=GRPOLambdaConfig(..., objective="grpo_lambda", trace_lambda=0.99))

Generation, rewards, advantages, logging and checkpointing are TRL's GRPOTrainer unchanged. The
loss is `grpo_lambda.objectives.policy_loss`; its metrics go to the parent's ``self._metrics``
(so ``trace_weight`` appears in the trainer's logs next to TRL's own ``clip_ratio/...``).

With ``objective="grpo"`` the loss is TRL's own ``_compute_loss`` (every TRL loss type and option
stays available there: GSPO, DAPO, Dr. GRPO, CISPO, ...), on advantages clamped at ``advantage_clamp``
when one is set. With ``objective="grpo_lambda"``, λ = 0, relative form, recent style and no clamp the
loss equals TRL's GRPO loss. ``objective="ptrace"`` / ``"strace"`` are our reading of P-trace and S-trace
(see `grpo_lambda.objectives`: a token's ratio is a credit-weighted geometric mean of the ratios in its
``history_scope``; λ = 0 is GRPO, scope "sequence" with λ = 1 is GSPO; S-trace gives credit only to the
tokens whose entropy is at or above the batch's ``strace_quantile``).

Three options act on the scored batch, before any loss, and combine with every objective (`grpo_lambda.scored_batch`,
called once per generation batch from ``_generate_and_score_completions``):

- ``dynamic_sampling``: DAPO's filter of groups whose training rewards (the weighted sum, weight-0 monitors
  left out) are all equal (zero advantage, no signal). TRL 1.16 has none. Here the groups are masked out (their
  completion mask set to 0, the token count of the ``dapo`` normalisation recomputed,
  ``dynamic_sampling/dropped_groups`` logged); DAPO itself generates more groups until the batch is full, so its
  batches keep their size and ours shrink.
- ``oar_method``: OAR's per-token advantages A_{i,t} = A_i · w_t (the estimator ``oar``; weights from `grpo_lambda.oar`).
- ``advantage_estimator``: the (B, T) advantages every loss reads, from `grpo_lambda.advantages` (``grpo``:
  TRL's A_i, or OAR's A_i · w_t, on every token; ``otb``, ``tempo``, ``delta_v_bound``; one registered there, or a
  user's ``module:function``), with the statistics the estimator asks for (one forward pass of the policy,
  without gradient).

The config is `grpo_lambda.trainer_config.GRPOLambdaConfig`; a pipeline variant becomes its arguments
through `grpo_lambda.variants.variant_config_kwargs`.
"""

from __future__ import annotations

from collections import deque

import torch
from trl import GRPOTrainer
from trl.trainer.utils import nanmax, nanmin

from grpo_lambda import scored_batch
from grpo_lambda.advantages import needs_forward
from grpo_lambda.objectives import LOSS_TYPES, policy_loss
from grpo_lambda.trainer_config import GRPOLambdaConfig, objective_params


class GRPOLambdaTrainer(GRPOTrainer):
    """TRL's GRPOTrainer whose loss is `grpo_lambda.objectives.policy_loss` (see the module docstring)."""

    _tag_names = ["trl", "grpo", "grpo-lambda"]

    def __init__(self, model, reward_funcs, args: GRPOLambdaConfig | None = None, **kwargs):
        if args is None:
            args = GRPOLambdaConfig("GRPO-lambda")
        if not isinstance(args, GRPOLambdaConfig):
            raise ValueError(f"args must be a GRPOLambdaConfig, got {type(args).__name__}")
        if args.objective != "grpo":
            _check_supported(args)
        super().__init__(model, reward_funcs, args=args, **kwargs)
        sharded = self.is_fsdp_enabled or _zero_stage(self.accelerator) == 3
        if args.oar_method is not None and sharded:
            # OAR runs a data-dependent number of forward passes per process: sharded parameters would hang.
            raise ValueError("oar_method needs unsharded parameters: not supported with FSDP or DeepSpeed ZeRO-3")
        if sharded and needs_forward(args.advantage_estimator):
            raise ValueError(f"advantage_estimator {args.advantage_estimator!r} runs the unwrapped policy forward: "
                             "not supported with FSDP or DeepSpeed ZeRO-3")
        # objective "grpo" runs TRL's own loss and needs none.
        self.objective_params = objective_params(args) if args.objective != "grpo" else None
        self._rewards_per_func = None  # the last batch's rewards, all processes (the estimators', dynamic sampling's)
        for name in scored_batch.TOKEN_ADVANTAGE_LOGS:  # beside TRL's, sized as TRL's: the latest generation batch
            self._logs[name] = deque(maxlen=args.generation_batch_size)

    # --- the scored batch: dynamic sampling and the per-token advantages (grpo_lambda.scored_batch) ------------

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._rewards_per_func = rewards_per_func  # gathered over processes, so whole groups
        return rewards_per_func

    def _generate_and_score_completions(self, inputs):
        # OAR's "reference" P_final reads each row's reference answer (the rows TRL scores are these inputs')
        self._oar_references = [row.get("answer") for row in inputs]
        output = super()._generate_and_score_completions(inputs)
        if self.model.training:  # TRL's own test for train vs eval
            scored_batch.shape(self, output)
        return output

    # --- the loss ---------------------------------------------------------------------------------

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
        trace_mask = None
        if self.args.objective == "strace":
            trace_mask = self.get_high_entropy_mask(entropies, mask, self.args.strace_quantile)

        loss, token_metrics = policy_loss(
            per_token_logps,
            inputs.get("old_per_token_logps"),  # None: on-policy, logps.detach() as in TRL
            inputs.get("ref_per_token_logps"),
            advantages,
            mask,
            self.objective_params,
            token_weights=self._token_weights(inputs, per_token_logps, entropies, advantages, mask),
            num_items=self._dapo_normalizer(inputs, mode) if self.loss_type == "dapo" else None,
            trace_mask=trace_mask,
        )
        accumulation = self.current_gradient_accumulation_steps if mode == "train" else 1.0
        if self.loss_type != "dapo":  # dapo's normalizer already spans one accumulation window
            loss = loss / accumulation
        if self.aux_loss_enabled:
            loss = loss + self.router_aux_loss_coef * aux_loss / accumulation
            self._metrics[mode]["aux_loss"].append(self.accelerator.gather_for_metrics(aux_loss).mean().item())

        self._log_token_metrics(mode, token_metrics, entropies, mask)
        if trace_mask is not None:
            self._metrics[mode]["trace_token_fraction"].append(_global_masked_mean(self, trace_mask.float(), mask))
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
            return _global_masked_mean(self, x, mask)

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


def _global_masked_mean(trainer, x, mask):
    """Σ x·mask / Σ mask over all processes."""
    x = x.expand_as(mask)
    totals = trainer.accelerator.reduce(torch.stack([(x * mask).sum(), mask.sum().float()]), reduction="sum")
    return (totals[0] / totals[1].clamp(min=1.0)).item()


def _zero_stage(accelerator) -> int | None:
    plugin = getattr(accelerator.state, "deepspeed_plugin", None)
    return getattr(plugin, "zero_stage", None) if plugin is not None else None


# Inputs that _get_per_token_logps_and_entropies forwards to multimodal models.
_MULTIMODAL_KEYS = (
    "pixel_values", "image_grid_thw", "num_images", "pixel_attention_mask", "spatial_shapes", "num_tiles",
    "image_sizes", "token_type_ids", "mm_token_type_ids", "image_position_ids",
)


def _check_supported(args: GRPOLambdaConfig) -> None:
    """TRL options our objectives do not implement: refuse them rather than ignore them."""
    objective = args.objective
    if args.loss_type not in LOSS_TYPES:
        raise ValueError(f"loss_type must be one of {LOSS_TYPES} with objective {objective!r}, got {args.loss_type!r}")
    if args.importance_sampling_level != "token":
        raise ValueError(f"importance_sampling_level must be 'token' with objective {objective!r}, "
                         f"got {args.importance_sampling_level!r}")
    if args.entropy_coef != 0.0 or args.use_adaptive_entropy:
        raise ValueError(f"entropy_coef / use_adaptive_entropy (entropy bonus) are not supported with objective "
                         f"{objective!r}")
