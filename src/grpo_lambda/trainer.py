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

Two options act on the scored batch, before any loss, and combine with every objective:

- ``dynamic_sampling``: DAPO's filter of groups whose rewards are all equal (zero advantage, no
  signal). TRL 1.16 has none. Here the groups are masked out (their completion mask set to 0, the
  token count of the ``dapo`` normalisation recomputed, ``dynamic_sampling/dropped_groups`` logged);
  DAPO itself generates more groups until the batch is full, so its batches keep their size and ours
  shrink.
- ``oar_method``: OAR's per-token advantages A_{i,t} = A_i · w_t ("gradient": OAR-G, "perturbation":
  OAR-P), computed once per generation batch with the policy that generated it. The final answer of a
  completion is the tokens of its last ``\\boxed{...}``, else its last ``oar_answer_tokens`` tokens; the
  reasoning tokens are those before it; the other tokens keep weight 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from trl import GRPOConfig, GRPOTrainer
from trl.trainer.utils import nanmax, nanmin

from grpo_lambda.objectives import (
    HISTORY_OBJECTIVES,
    HISTORY_SCOPES,
    LOSS_TYPES,
    OBJECTIVES,
    STRACE_MODES,
    UPDATES,
    ObjectiveParams,
    oar_gradient_importance,
    oar_perturbation_importance,
    oar_weights,
    policy_loss,
)
from grpo_lambda.traces import FORMS, STYLES

# Paper Table 2: negative advantages clamped at −0.1 for GRPO-λ.
PAPER_ADVANTAGE_CLAMP = -0.1
OAR_METHODS = ("gradient", "perturbation")
BOXED = "\\boxed{"


@dataclass
class GRPOLambdaConfig(GRPOConfig):
    """TRL's GRPOConfig plus the GRPO-λ fields (paper defaults: λ = 0.99, γ = 1, ε-trace)."""

    objective: str = field(
        default="grpo_lambda",
        metadata={"help": "Policy objective: 'grpo' (TRL's own loss), 'grpo_lambda' (eligibility traces), "
                  "'ptrace' or 'strace' (historical importance weights)."},
    )
    trace_lambda: float = field(default=0.99, metadata={"help": "Trace decay λ in [0, 1] (grpo_lambda, ptrace, "
                                                        "strace)."})
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
    trace_length: int | None = field(
        default=None,
        metadata={"help": "The absolute form's n: a constant, so that a token's weights do not depend on how wide "
                  "its batch was padded. None: max_completion_length, rounded up to pad_to_multiple_of (the "
                  "authors' code: its padded response length)."},
    )
    advantage_clamp: float | str | None = field(
        default="auto",
        metadata={"help": "Advantages below this value are raised to it. 'auto': −0.1 for grpo_lambda (paper "
                  "Table 2), none for the others; 'none': no clamp."},
    )
    strace_quantile: float = field(
        default=0.8,
        metadata={"help": "S-trace: the trace keeps the tokens whose entropy is at least this batch quantile "
                  "(0.8: the top 20 %; 0: every token, i.e. P-trace)."},
    )
    strace_mode: str = field(
        default="lend",
        metadata={"help": "S-trace's reading of masking low-entropy tokens: 'lend' (they lend no credit but "
                  "still receive a traced ratio) or 'exclude' (they carry no trace: their own ratio)."},
    )
    history_scope: str = field(
        default="past",
        metadata={"help": "P-trace / S-trace: the tokens whose ratios enter a token's ratio, 'past' (the earlier "
                  "ones) or 'sequence' (all; with λ = 1 this is GSPO's sequence ratio)."},
    )
    dynamic_sampling: bool = field(
        default=False,
        metadata={"help": "DAPO's dynamic sampling, as a filter: mask out groups whose rewards are all equal."},
    )
    oar_method: str | None = field(
        default=None,
        metadata={"help": "OAR per-token advantage weights: 'gradient' (OAR-G), 'perturbation' (OAR-P) or None."},
    )
    oar_quantile: float = field(default=0.5, metadata={"help": "OAR: quantile q splitting suppressed and boosted "
                                                       "tokens (not published; our choice)."})
    oar_boost: float = field(default=1.0, metadata={"help": "OAR: boost β of the tokens above the quantile (not "
                                                    "published; our choice)."})
    oar_sigma: float = field(default=1e-3, metadata={"help": "OAR-G: standard deviation of the embedding noise."})
    oar_answer_tokens: int = field(
        default=8,
        metadata={"help": "OAR: the final answer is the last \\boxed{...}, else this many last tokens."},
    )

    def __post_init__(self):
        super().__post_init__()
        self.advantage_clamp = _resolve_advantage_clamp(self.advantage_clamp, self.objective)
        if isinstance(self.oar_method, str) and self.oar_method.lower() in ("none", "null"):
            self.oar_method = None  # from a command line
        for name, check in _FIELD_CHECKS.items():
            check(name, getattr(self, name))
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
        if args.objective != "grpo":
            _check_supported(args)
        super().__init__(model, reward_funcs, args=args, **kwargs)
        if args.oar_method is not None and (self.is_fsdp_enabled or _zero_stage(self.accelerator) == 3):
            # OAR runs a data-dependent number of forward passes per process: sharded parameters would hang.
            raise ValueError("oar_method needs unsharded parameters: not supported with FSDP or DeepSpeed ZeRO-3")
        # objective "grpo" runs TRL's own loss and needs none.
        self.objective_params = objective_params(args) if args.objective != "grpo" else None
        self._rewards_per_func = None  # the last batch's rewards, all processes (for dynamic sampling)

    # --- the scored batch: dynamic sampling and OAR ---------------------------------------------------

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._rewards_per_func = rewards_per_func  # gathered over processes, so whole groups
        return rewards_per_func

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        if self.model.training:  # TRL's own test for train vs eval
            self._shape_scored_batch(output)
        return output

    def _shape_scored_batch(self, output):
        """Dynamic sampling, then OAR, on TRL's scored training batch (in place)."""
        if self.args.dynamic_sampling:
            self._drop_uninformative_groups(output)
        if self.args.oar_method is not None:
            output["advantages"] = self._oar_advantages(output)

    def _drop_uninformative_groups(self, output):
        """Mask out this process's rows of the groups whose rewards are all equal; log how many groups."""
        dropped = uninformative_groups(self._rewards_per_func, self.num_generations)
        local_rows = output["completion_ids"].size(0)
        start = self.accelerator.process_index * local_rows  # TRL's process slice of the gathered rows
        keep = ~dropped.repeat_interleave(self.num_generations)[start:start + local_rows]
        completion_mask = output["completion_mask"] * keep.unsqueeze(1).to(output["completion_mask"].dtype)
        output["completion_mask"] = completion_mask
        loss_mask = completion_mask if "tool_mask" not in output else completion_mask * output["tool_mask"]
        output["num_items_in_batch"] = self.accelerator.gather(loss_mask.sum()).sum()
        self._metrics["train"]["dynamic_sampling/dropped_groups"].append(float(dropped.sum().item()))

    def _oar_advantages(self, output):
        """(B, T) advantages A_i · w_t, w from OAR on the rows whose advantage and reasoning are not empty."""
        advantages, completion_mask = output["advantages"], output["completion_mask"]
        answer, reasoning = answer_and_reasoning_masks(self._token_texts(output["completion_ids"]), completion_mask,
                                                       self.args.oar_answer_tokens)
        weights = torch.ones(completion_mask.shape, dtype=torch.float32, device=completion_mask.device)
        rows = ((advantages != 0) & reasoning.any(-1)).nonzero().squeeze(1)
        if len(rows) == 0:  # (split would still hand back one empty chunk)
            return advantages.unsqueeze(1) * weights.to(advantages.dtype)
        for chunk in rows.split(self.args.per_device_train_batch_size):
            importance = self._oar_importance(output, chunk, answer[chunk], reasoning[chunk])
            weights[chunk] = oar_weights(importance, reasoning[chunk], quantile=self.args.oar_quantile,
                                         boost=self.args.oar_boost).to(weights.dtype)
        self._metrics["train"]["oar/max_weight"].append(weights[rows].amax(-1).mean().item())
        return advantages.unsqueeze(1) * weights.to(advantages.dtype)

    def _oar_importance(self, output, rows, answer, reasoning):
        """OAR scores of the completion tokens of some rows, (n, T), with the policy as it is now."""
        prompt_length = output["prompt_ids"].size(1)
        completion_length = output["completion_ids"].size(1)
        input_ids = torch.cat([output["prompt_ids"], output["completion_ids"]], 1)[rows]
        attention_mask = torch.cat([output["prompt_mask"], output["completion_mask"]], 1)[rows]
        # Scores are defined over the whole sequence; only completion tokens are reasoning tokens.
        reasoning_full = torch.cat([reasoning.new_zeros(len(rows), prompt_length), reasoning], 1)
        model = self.accelerator.unwrap_model(self.model)

        def completion_logits(mask, **model_inputs):
            # logits[:, i] predicts completion token i (TRL keeps logits_to_keep + 1 and drops the last)
            logits = model(attention_mask=mask, use_cache=False, logits_to_keep=completion_length + 1,
                           **model_inputs).logits[:, :-1]
            return logits / self.temperature

        if self.args.oar_method == "gradient":
            embeds = model.get_input_embeddings()(input_ids)
            importance = oar_gradient_importance(
                lambda e: completion_logits(attention_mask, inputs_embeds=e), embeds, reasoning_full, answer,
                sigma=self.args.oar_sigma)
        else:
            importance = oar_perturbation_importance(
                lambda ids, mask: completion_logits(mask, input_ids=ids), input_ids, attention_mask,
                reasoning_full, answer, pad_id=self._tokenizer.pad_token_id,
                batch_size=self.args.per_device_train_batch_size)
        return importance[:, prompt_length:]

    def _token_texts(self, completion_ids):
        """Each completion token decoded on its own (special tokens as ''), one list per row."""
        flat = self._tokenizer.batch_decode(completion_ids.reshape(-1, 1).tolist(), skip_special_tokens=True)
        width = completion_ids.size(1)
        return [flat[row * width:(row + 1) * width] for row in range(completion_ids.size(0))]

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


def uninformative_groups(rewards_per_func: torch.Tensor, group_size: int) -> torch.Tensor:
    """True for each group of `group_size` consecutive rows whose rewards are all equal, for every reward
    function (NaN, an unscored completion, is ignored; a group without any score counts as equal).

    rewards_per_func: (N, F) as TRL's _calculate_rewards returns it. Returns (N / group_size,) bool.
    """
    if rewards_per_func.dim() != 2 or rewards_per_func.size(0) % group_size:
        raise ValueError(f"rewards_per_func must be (N, F) with N a multiple of {group_size}, "
                         f"got {tuple(rewards_per_func.shape)}")
    grouped = rewards_per_func.view(-1, group_size, rewards_per_func.size(1))
    unscored = torch.isnan(grouped)
    highest = grouped.masked_fill(unscored, -math.inf).amax(1)
    lowest = grouped.masked_fill(unscored, math.inf).amin(1)
    return (highest <= lowest).all(-1)


def answer_and_reasoning_masks(token_texts: list[list[str]], completion_mask: torch.Tensor, last_tokens: int):
    """(answer, reasoning) bool masks (B, T) of completions, from each token's decoded text.

    The answer is the tokens that overlap the last ``\\boxed{...}`` (to its matching brace, or to the end
    when it is not closed); without one, the last `last_tokens` tokens. The reasoning is the tokens
    before the answer. The completion is the first completion_mask.sum() tokens of its row.
    """
    answer = torch.zeros(completion_mask.shape, dtype=torch.bool)
    reasoning = torch.zeros(completion_mask.shape, dtype=torch.bool)
    for row, length in enumerate(completion_mask.sum(-1).tolist()):
        texts = token_texts[row][:int(length)]
        if not texts:
            continue
        starts = [0]
        for text in texts:
            starts.append(starts[-1] + len(text))
        span = _last_boxed_span("".join(texts))
        if span is None:
            first = max(0, len(texts) - last_tokens)
            answer[row, first:len(texts)] = True
        else:
            begin, end = span  # character range [begin, end)
            hits = [i for i in range(len(texts)) if starts[i] < end and starts[i + 1] > begin]
            first = hits[0]
            answer[row, first:hits[-1] + 1] = True
        reasoning[row, :first] = True
    return answer.to(completion_mask.device), reasoning.to(completion_mask.device)


def _last_boxed_span(text: str) -> tuple[int, int] | None:
    """Character range of the last \\boxed{...} in text, through its matching brace (or the end)."""
    begin = text.rfind(BOXED)
    if begin < 0:
        return None
    depth = 0
    for position in range(begin + len(BOXED) - 1, len(text)):
        depth += {"{": 1, "}": -1}.get(text[position], 0)
        if depth == 0:
            return begin, position + 1
    return begin, len(text)


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
        trace_length=args.trace_length if args.trace_length is not None else _widest_completion(args),
        history_scope=args.history_scope,
        strace_mode=args.strace_mode,
    )


def _widest_completion(args: GRPOLambdaConfig) -> int | None:
    """max_completion_length, rounded up to TRL's pad_to_multiple_of: no batch is padded wider than this."""
    length, multiple = args.max_completion_length, args.pad_to_multiple_of
    if length is not None and isinstance(multiple, int) and not isinstance(multiple, bool) and multiple > 0:
        return -(-length // multiple) * multiple
    return length


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


# ---------------------------------------------------------------------------------------------------
# Pipeline variants: {objective: grpo_lambda, lam: 0.99, ...} -> GRPOLambdaConfig keyword arguments.
# Dr. GRPO, DAPO and GSPO are objective "grpo" plus TRL keys (and dynamic_sampling), one line each:
#   dr_grpo: {objective: grpo, loss_type: dr_grpo, scale_rewards: none}
#   dapo:    {objective: grpo, loss_type: dapo, epsilon: 0.2, epsilon_high: 0.28, dynamic_sampling: true}
#   gspo:    {objective: grpo, importance_sampling_level: sequence, loss_type: grpo, epsilon: 3.0e-4,
#             epsilon_high: 4.0e-4}

# Variant key -> (config field, the objectives it applies to; None: every objective).
_OBJECTIVE_KEYS = {
    "lam": ("trace_lambda", ("grpo_lambda", *HISTORY_OBJECTIVES)),
    "gamma": ("trace_gamma", ("grpo_lambda", *HISTORY_OBJECTIVES)),
    "style": ("trace_style", ("grpo_lambda",)),
    "form": ("trace_form", ("grpo_lambda",)),
    "update": ("trace_update", ("grpo_lambda",)),
    "eps": ("trace_eps", ("grpo_lambda",)),
    "strace_quantile": ("strace_quantile", ("strace",)),
    "strace_mode": ("strace_mode", ("strace",)),
    "scope": ("history_scope", HISTORY_OBJECTIVES),
    "advantage_clamp": ("advantage_clamp", None),
    "dynamic_sampling": ("dynamic_sampling", None),
    "oar_method": ("oar_method", None),
    "oar_quantile": ("oar_quantile", None),
    "oar_boost": ("oar_boost", None),
    "oar_sigma": ("oar_sigma", None),
    "oar_answer_tokens": ("oar_answer_tokens", None),
}
_OAR_PARAMETER_KEYS = ("oar_quantile", "oar_boost", "oar_sigma", "oar_answer_tokens")
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
    grpo_lambda the paper's: λ 0.99, γ 1, recent, relative, trace, ε 0, clamp −0.1); the other
    objectives have no clamp unless asked. ``lam``/``gamma`` also set P-trace's and S-trace's decay,
    ``scope`` their history scope, ``strace_quantile`` S-trace's entropy quantile; ``dynamic_sampling`` and
    ``oar_*`` apply to every objective (``oar_quantile``, ... only with ``oar_method``). TRL keys
    (loss_type, scale_rewards, epsilon_high, importance_sampling_level, ...) pass through; `label` (a display
    name) is ignored. An unknown key, a key of another objective, or a bad value raises ValueError naming it.
    """
    if not isinstance(variant, dict):
        raise ValueError(f"variant must be a dict, got {type(variant).__name__}")
    objective = variant.get("objective")
    if objective is None:
        raise ValueError(f"variant {variant!r}: key 'objective' is required, one of {OBJECTIVES}")
    _check_choice("objective", objective, OBJECTIVES)

    kwargs = {"objective": objective}
    if objective != "grpo_lambda":
        kwargs["advantage_clamp"] = None
    for key, value in variant.items():
        if key in _DISPLAY_KEYS:
            continue
        if key in _OBJECTIVE_KEYS:
            field_name, objectives = _OBJECTIVE_KEYS[key]
            if objectives is not None and objective not in objectives:
                only = "objective " + " / ".join(repr(o) for o in objectives)
                raise ValueError(f"variant key {key!r} applies to {only} only, not {objective!r}")
            if field_name in _FIELD_CHECKS:  # named by the variant key, before the config is built
                _FIELD_CHECKS[field_name](key, value)
            kwargs[field_name] = value
        elif key in _TRL_KEYS:
            kwargs[key] = _check_trl_value(key, value, _TRL_KEYS[key])
        else:
            known = [*_DISPLAY_KEYS, *_OBJECTIVE_KEYS, *_TRL_KEYS]
            raise ValueError(f"unknown variant key {key!r}; known keys: {known}")

    if kwargs.get("oar_method") is None:
        stray = [key for key in _OAR_PARAMETER_KEYS if key in variant]
        if stray:
            raise ValueError(f"variant keys {stray} need oar_method ('gradient' or 'perturbation')")
    if kwargs.get("advantage_clamp") is not None:
        _check_range("advantage_clamp", kwargs["advantage_clamp"], -math.inf, 0.0)
    return kwargs


def _check_positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


def _check_bool(name, value):
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false, got {value!r}")


# Config field -> check(name shown in the error, value); used by the config and by variants.
_FIELD_CHECKS = {
    "objective": lambda name, value: _check_choice(name, value, OBJECTIVES),
    "trace_lambda": lambda name, value: _check_range(name, value, 0.0, 1.0),
    "trace_gamma": lambda name, value: _check_range(name, value, 0.0, 1.0, low_open=True),
    "trace_style": lambda name, value: _check_choice(name, value, STYLES),
    "trace_form": lambda name, value: _check_choice(name, value, FORMS),
    "trace_update": lambda name, value: _check_choice(name, value, UPDATES),
    "trace_eps": lambda name, value: _check_range(name, value, 0.0, math.inf),
    "trace_length": lambda name, value: value is None or _check_positive_int(name, value),
    "strace_quantile": lambda name, value: _check_range(name, value, 0.0, 1.0),
    "history_scope": lambda name, value: _check_choice(name, value, HISTORY_SCOPES),
    "strace_mode": lambda name, value: _check_choice(name, value, STRACE_MODES),
    "dynamic_sampling": _check_bool,
    "oar_method": lambda name, value: _check_choice(name, value, (*OAR_METHODS, None)),
    "oar_quantile": lambda name, value: _check_range(name, value, 0.0, 1.0),
    "oar_boost": lambda name, value: _check_range(name, value, 0.0, math.inf),
    "oar_sigma": lambda name, value: _check_range(name, value, 0.0, math.inf, low_open=True),
    "oar_answer_tokens": _check_positive_int,
}


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
