"""GRPOLambdaConfig: TRL's GRPOConfig plus the fields of GRPO-λ and its critic-free neighbours (as TRL's
``grpo_config.py`` beside its trainer), and the `ObjectiveParams` of the loss that a config describes.

    args = GRPOLambdaConfig(output_dir="out", objective="grpo_lambda", trace_lambda=0.99)

The fields a pipeline variant sets (`grpo_lambda.variants`: ``lam`` -> ``trace_lambda``, ...) are checked
against the config schema's ``$defs/variant``, so a config built here and a YAML variant refuse the same
values. The fields keep TRL's flat namespace: ``trace_*`` for the eligibility trace, ``oar_*`` for OAR.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trl import GRPOConfig

from grpo_lambda.objectives import ObjectiveParams
from grpo_lambda.variants import OAR_PFINAL, check_config_fields, check_trace_length

# Paper Table 2: negative advantages clamped at −0.1 for GRPO-λ.
PAPER_ADVANTAGE_CLAMP = -0.1


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
                  "trace of 1 + σ(log π − 1) (ε-weight, Algorithm 2); 'position': per-token loss times §3.2's "
                  "per-position weight Σ_{l=0}^{t} (γλ)^l, whatever the form, ε and n."},
    )
    trace_eps: float = field(default=0.0, metadata={"help": "Floor ε of the off-diagonal trace weights."})
    trace_length: int | str | None = field(
        default=None,
        metadata={"help": "The absolute form's n. A number: a constant of the run, so that a token's weights do not "
                  "depend on its batch. None: max_completion_length, rounded up to pad_to_multiple_of. "
                  "'batch_max': the longest completion of each batch (the released code's default, "
                  "use_batch_max_for_trace, under TRL's padding). 'per_sequence': each completion's own "
                  "length (use_batch_max_for_trace: false)."},
    )
    advantage_clamp: float | str | None = field(
        default="auto",
        metadata={"help": "Advantages below this value are raised to it. 'auto': −0.1 for grpo_lambda (paper "
                  "Table 2), none for the others; 'none': no clamp."},
    )
    advantage_estimator: str = field(
        default="grpo",
        metadata={"help": "Per-token advantage estimator (grpo_lambda.advantages.ADVANTAGE_ESTIMATORS): 'grpo' "
                  "(TRL's group-normalised advantage), 'otb' (optimal token baseline), 'tempo' (prefix-tree TD at "
                  "branch points) or 'delta_v_bound' (GRPO-λ's Lemma 1 bound added)."},
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
        metadata={"help": "DAPO's dynamic sampling, as a filter: mask out groups whose training rewards "
                  "(the weighted sum of the reward functions) are all equal."},
    )
    oar_method: str | None = field(
        default=None,
        metadata={"help": "OAR per-token advantage weights: 'gradient' (OAR-G), 'perturbation' (OAR-P) or None."},
    )
    oar_quantile: float = field(default=0.25, metadata={"help": "OAR: quantile q splitting suppressed and boosted "
                                                        "tokens (the authors' threshold, 0.25)."})
    oar_boost: float = field(default=1.0, metadata={"help": "OAR: boost β of the tokens above the quantile (the "
                                                    "authors' beta, 1.0)."})
    oar_sigma: float = field(default=1e-3, metadata={"help": "OAR-G: standard deviation of the embedding noise."})
    oar_pfinal: str = field(
        default="own_answer",
        metadata={"help": "OAR: whose answer P_final scores. 'own_answer': the completion's own last \\boxed{} "
                  "(the paper's 'the model's final answer'); 'reference': the authors' code, the row's reference "
                  "answer appended after oar_conclude, the weights on every completion token."},
    )
    oar_conclude: str = field(
        default="\nTherefore, the final answer is \\boxed{",
        metadata={"help": "OAR with oar_pfinal 'reference': the text between the completion and the reference "
                  "answer (the authors' 'conclude' segment, whose text their code does not show: ours)."},
    )
    oar_answer_tokens: int = field(
        default=8,
        metadata={"help": "OAR: the final answer is the grader's (the last \\boxed{...} or \\fbox{...}), else this "
                  "many last tokens."},
    )

    def __post_init__(self):
        super().__post_init__()
        self.advantage_clamp = _resolve_advantage_clamp(self.advantage_clamp, self.objective)
        if isinstance(self.oar_method, str) and self.oar_method.lower() in ("none", "null"):
            self.oar_method = None  # from a command line
        if self.oar_pfinal not in OAR_PFINAL:
            raise ValueError(f"oar_pfinal must be one of {OAR_PFINAL}, got {self.oar_pfinal!r}")
        check_config_fields(self)  # the fields a variant key sets, against the schema
        check_trace_length(self.trace_length)  # set by rl.trl, not by a variant


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
