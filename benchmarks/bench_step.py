"""Cost of each objective in a training step, relative to TRL's GRPO, on a model of a given shape.

    python benchmarks/bench_step.py [--config config/compare.yaml] [--completion-length 256]
                                    [--rounds 7] [--iterations 5] [--train-steps 4] [--threads 1]
    python benchmarks/bench_step.py --device cuda --shape qwen2.5-1.5b [--completion-length 1024]

For every variant (the built-in table below, or the `variants:` of a pipeline config) it builds a
GRPOLambdaTrainer with GRPOLambdaConfig(**base, **variant_config_kwargs(variant)) around the same
randomly initialised model and times `_compute_loss` + backward on one fixed batch; the baseline is
TRL's own GRPOTrainer with the same base config. `--shape` picks the model: `tiny` (the embedded
default's Llama, hidden 128, 4 layers; the default), `qwen2.5-1.5b` or `qwen2.5-7b` (Qwen2.5's
architecture and sizes, random weights in bfloat16; the 7B trains a LoRA adapter, r 8, all-linear,
as the paper's 7B runs). On `--device cuda` the trainers run in bf16 with gradient checkpointing, as
the grid does, each timing is bracketed by CUDA synchronisations, the trainers share one model (the
timing does not depend on the weights; six copies of a 1.5B model do not fit at T = 4096), and the
default variants are those whose loss differs (GPU_VARIANTS). `--device cuda` without a CUDA device
stops with a message; `--dry-run` runs that code on the CPU with the shape shrunk to 2 small layers
(a check of the script, not a measurement). `--json FILE` writes the table. Variants are timed in
interleaved rounds (so a load change on the machine hits all of them alike) and the table shows
the median time per call and its ratio to the baseline (goal for GRPO-λ: ≤ 1.03). As machine load
makes that ratio noisy by several percent, it also times the loss arithmetic alone
(`objectives.policy_loss` forward + backward on the batch's shape) and shows
1 + (its extra time over GRPO's) / (the baseline's step time): a low-noise estimate of the ratio.
With --train-steps > 0 it also times full trainer steps (generation + loss + optimizer).

Dynamic sampling and OAR work on the scored batch, once per generation batch, not in the loss: their
cost is timed apart (`scored_batch.shape` on the same batch, median of --post-rounds calls) and shown
as milliseconds and as a fraction of the baseline's loss + backward. OAR-P runs one forward pass per
reasoning token: give it a short --completion-length, or expect seconds per call.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import tempfile
import time

import torch
import yaml
from datasets import Dataset
from transformers import PrinterCallback
from trl import GRPOConfig, GRPOTrainer

from grpo_lambda import scored_batch, tiny
from grpo_lambda.objectives import ObjectiveParams, high_entropy_mask, policy_loss
from grpo_lambda.trainer import GRPOLambdaTrainer
from grpo_lambda.trainer_config import GRPOLambdaConfig
from grpo_lambda.variants import variant_config_kwargs

BASELINE = "trl-grpo"
VARIANTS = {
    "grpo": {"objective": "grpo"},
    "grpo-lambda-recent": {"objective": "grpo_lambda", "lam": 0.99, "style": "recent", "update": "trace"},
    "grpo-lambda-both": {"objective": "grpo_lambda", "lam": 0.99, "style": "both", "update": "trace"},
    "grpo-lambda-weight": {"objective": "grpo_lambda", "lam": 0.99, "style": "recent", "update": "weight"},
    "grpo-lambda-absolute": {"objective": "grpo_lambda", "lam": 0.99, "style": "both", "form": "absolute",
                             "eps": 1e-7},
    "gspo": {"objective": "grpo", "importance_sampling_level": "sequence", "loss_type": "grpo", "epsilon": 3e-4,
             "epsilon_high": 4e-4},
    "dr_grpo": {"objective": "grpo", "loss_type": "dr_grpo", "scale_rewards": "none"},
    "dapo": {"objective": "grpo", "loss_type": "dapo", "epsilon": 0.2, "epsilon_high": 0.28, "dynamic_sampling": True},
    "ptrace": {"objective": "ptrace", "lam": 0.99},
    "strace": {"objective": "strace", "lam": 0.99, "strace_quantile": 0.8},
    "oar_g": {"objective": "grpo", "oar_method": "gradient"},
    "oar_p": {"objective": "grpo", "oar_method": "perturbation"},
    "grpo-lambda-clip-higher": {"objective": "grpo_lambda", "lam": 0.99, "epsilon_high": 0.28},
    "otb": {"objective": "grpo", "advantage_estimator": "otb"},
    "tempo": {"objective": "grpo", "advantage_estimator": "tempo"},
    "delta_v_bound": {"objective": "grpo", "advantage_estimator": "delta_v_bound"},
}
# On a GPU: the variants whose loss arithmetic differs (sequence-level GSPO, the loss types and the
# scored-batch work are timed on the CPU); OAR-P's forward pass per token would take minutes at 1.5B.
GPU_VARIANTS = ("grpo", "grpo-lambda-recent", "grpo-lambda-both", "grpo-lambda-weight", "grpo-lambda-absolute",
                "strace")
# Qwen2.5's published architectures (config.json of Qwen/Qwen2.5-1.5B and -7B), built with random weights.
SHAPES = {
    "qwen2.5-1.5b": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                         num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True),
    "qwen2.5-7b": dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
                       num_key_value_heads=4, vocab_size=152064, tie_word_embeddings=False),
}
LORA_SHAPES = {"qwen2.5-7b"}  # trained through a LoRA adapter (the paper's 7B runs)
# --dry-run: the shape's architecture at a size a CPU builds in a second
DRY_RUN_SIZE = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, vocab_size=1024)


def build_model_and_tokenizer(shape="tiny", device="cpu", dry_run=False):
    """A randomly initialised model of the shape, on the device, and the tiny character tokenizer (the
    trainer reads only its special ids: the batch's token ids are drawn from the model's vocabulary)."""
    tokenizer = tiny.build_tokenizer()
    if shape == "tiny":
        return tiny.build_model(tokenizer, seed=0, max_position_embeddings=1024).to(device), tokenizer
    from transformers import AutoModelForCausalLM, Qwen2Config

    size = {**SHAPES[shape], **(DRY_RUN_SIZE if dry_run else {})}
    config = Qwen2Config(**size, max_position_embeddings=32768, rope_theta=1e6, rms_norm_eps=1e-6,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16 if device == "cuda" else torch.float32)
    if shape in LORA_SHAPES:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules="all-linear",
                                                 task_type="CAUSAL_LM"))
    return model, tokenizer


def make_trainer(name, variant, model, tokenizer, base, dataset, share_model=False):
    if name == BASELINE:
        trainer_class, args = GRPOTrainer, GRPOConfig(**base)
    else:
        trainer_class, args = GRPOLambdaTrainer, GRPOLambdaConfig(**{**base, **variant_config_kwargs(variant)})
    trainer = trainer_class(model=model if share_model else copy.deepcopy(model), reward_funcs=length_reward,
                            args=args, train_dataset=dataset, processing_class=tokenizer)
    trainer.remove_callback(PrinterCallback)  # keep the output to the table
    return trainer


def length_reward(completions, **kwargs):
    return [float(len(completion)) for completion in completions]


def make_inputs(batch, prompt_length, completion_length, vocab_size, device="cpu"):
    """A batch shaped like GRPOTrainer._generate_and_score_completions' output, ragged completions."""
    generator = torch.Generator().manual_seed(0)
    completion_mask = torch.ones(batch, completion_length, dtype=torch.long)
    lengths = torch.randint(completion_length // 4, completion_length + 1, (batch,), generator=generator)
    completion_mask[torch.arange(completion_length) >= lengths.unsqueeze(1)] = 0
    return {key: value.to(device) for key, value in {
        "prompt_ids": torch.randint(len(tiny.SPECIAL_TOKENS), vocab_size, (batch, prompt_length), generator=generator),
        "prompt_mask": torch.ones(batch, prompt_length, dtype=torch.long),
        "completion_ids": torch.randint(len(tiny.SPECIAL_TOKENS), vocab_size, (batch, completion_length), generator=generator),
        "completion_mask": completion_mask,
        "advantages": torch.randn(batch, generator=generator),
        "num_items_in_batch": completion_mask.sum(),
    }.items()}


def synchronise(device):
    """Wait for the device's queued kernels: CUDA runs them asynchronously, so a clock read without this
    would stop at their launch."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def time_loss_and_backward(trainer, inputs, iterations):
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    device = inputs["completion_ids"].device
    synchronise(device)
    start = time.perf_counter()
    for _ in range(iterations):
        trainer.model.zero_grad(set_to_none=True)
        trainer._compute_loss(trainer.model, inputs).backward()
    synchronise(device)
    return (time.perf_counter() - start) / iterations


def time_objective(params, inputs, iterations=200, strace_quantile=0.8):
    """policy_loss forward + backward alone on (B, T) log-probs: the part of the step a variant changes."""
    mask = inputs["completion_mask"]
    device = mask.device
    generator = torch.Generator().manual_seed(1)
    logps = (-torch.rand(mask.shape, generator=generator) * 3).to(device).requires_grad_()
    old_logps = logps.detach() + 0.01 * torch.randn(mask.shape, generator=generator).to(device)  # off-policy
    entropies = torch.rand(mask.shape, generator=generator).to(device)
    synchronise(device)
    start = time.perf_counter()
    for _ in range(iterations):
        # S-trace's entropy mask is part of its cost
        trace_mask = high_entropy_mask(entropies, mask, strace_quantile) if params.objective == "strace" else None
        loss, _ = policy_loss(logps, old_logps, None, inputs["advantages"], mask, params, trace_mask=trace_mask)
        loss.backward()
    synchronise(device)
    return (time.perf_counter() - start) / iterations


def shapes_scored_batch(trainer):
    return (trainer.args.dynamic_sampling or trainer.args.oar_method is not None
            or trainer.args.advantage_estimator != "grpo")


def time_scored_batch(trainer, inputs, rounds):
    """Median time of the trainer's work on the scored batch (dynamic sampling, OAR), once per generation."""
    trainer.model.train()
    groups = inputs["completion_ids"].size(0) // trainer.num_generations
    rewards = torch.rand(groups, trainer.num_generations, 1, generator=torch.Generator().manual_seed(2))
    rewards = rewards.to(inputs["completion_ids"].device)
    rewards[::2] = 1.0  # every second group without signal, as early in training
    times = []
    for _ in range(rounds):
        trainer._rewards_per_func = rewards.reshape(-1, 1)
        batch = dict(inputs)
        start = time.perf_counter()
        scored_batch.shape(trainer, batch)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def time_train_steps(trainer, steps):
    """Mean wall time of full steps; the first step's generation is the same for all (same weights, seed)."""
    trainer.args.max_steps = steps
    start = time.perf_counter()
    trainer.train()
    return (time.perf_counter() - start) / steps


def require_cuda():
    """Stop with a message, not a traceback, when --device cuda is asked for where there is no GPU."""
    if not torch.cuda.is_available():
        raise SystemExit(f"{sys.argv[0]}: --device cuda: no CUDA device is visible (torch {torch.__version__}, "
                         f"built for CUDA {torch.version.cuda or 'none'}); run it on a GPU machine, or with "
                         f"--device cpu (--dry-run runs the CUDA code path on the CPU at a toy size)")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where to time (default: %(default)s)")
    parser.add_argument("--shape", choices=("tiny", *SHAPES), default="tiny",
                        help="the model's architecture and size, random weights (default: %(default)s)")
    parser.add_argument("--dry-run", action="store_true",
                        help="run the --device cuda code on the CPU with the shape shrunk to 2 small layers")
    parser.add_argument("--config", help="a pipeline config whose `variants:` replace the built-in table")
    parser.add_argument("--variants", nargs="+", metavar="NAME",
                        help=f"time these of the built-in table only (default on cuda: {' '.join(GPU_VARIANTS)})")
    parser.add_argument("--batch", type=int, default=16, help="sequences per micro-batch")
    parser.add_argument("--prompt-length", type=int, default=None, help="default 64, 128 for the Qwen shapes")
    parser.add_argument("--completion-length", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=7, help="interleaved timing rounds")
    parser.add_argument("--iterations", type=int, default=5, help="loss + backward calls per round")
    parser.add_argument("--train-steps", type=int, default=0, help="full trainer steps to time per variant")
    parser.add_argument("--post-rounds", type=int, default=3, help="timed calls of the scored-batch work (OAR, ...)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: stable timings on a shared machine)")
    parser.add_argument("--json", metavar="FILE", help="also write the table as JSON")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    on_gpu = args.device == "cuda"  # the GPU's settings: bf16, gradient checkpointing, one shared model
    if on_gpu and not args.dry_run:
        require_cuda()
    device = "cuda" if on_gpu and not args.dry_run else "cpu"
    prompt_length = args.prompt_length or (64 if args.shape == "tiny" else 128)

    variants = VARIANTS
    if args.config:
        with open(args.config) as handle:
            variants = yaml.safe_load(handle)["variants"]
    chosen = args.variants or (GPU_VARIANTS if on_gpu and not args.config else None)
    if chosen:
        unknown = [name for name in chosen if name not in variants]
        if unknown:
            raise SystemExit(f"--variants: {', '.join(unknown)} not in the table ({', '.join(variants)})")
        variants = {name: variants[name] for name in chosen}
    model, tokenizer = build_model_and_tokenizer(args.shape, device, dry_run=args.dry_run)
    dataset = Dataset.from_dict({"prompt": ["12+34=", "56*7=", "8-9=", "(1+2)*3="] * 8})
    base = dict(output_dir=tempfile.mkdtemp(), use_cpu=device == "cpu", bf16=device == "cuda",
                gradient_checkpointing=on_gpu, report_to="none", save_strategy="no",
                per_device_train_batch_size=args.batch, num_generations=8, max_completion_length=args.completion_length,
                logging_steps=1, learning_rate=1e-5, disable_tqdm=True)
    share = on_gpu  # one model for every trainer: the timing does not depend on the weights
    trainers = {BASELINE: make_trainer(BASELINE, None, model, tokenizer, base, dataset, share)}
    for name, variant in variants.items():
        trainers[name] = make_trainer(name, variant, model, tokenizer, base, dataset, share)
    vocabulary = model.get_output_embeddings().weight.shape[0] if args.shape != "tiny" else len(tokenizer)
    inputs = make_inputs(args.batch, prompt_length, args.completion_length, vocabulary, device)

    for trainer in trainers.values():  # warm-up
        time_loss_and_backward(trainer, inputs, 1)
    times = {name: [] for name in trainers}
    for _ in range(args.rounds):
        for name, trainer in trainers.items():
            times[name].append(time_loss_and_backward(trainer, inputs, args.iterations))
    # The GRPO arithmetic of objectives.py stands for TRL's; TRL-only variants (GSPO, ...) have no entry.
    objective_times = {BASELINE: time_objective(ObjectiveParams(loss_type=base.get("loss_type", "dapo")), inputs)}
    for name, trainer in trainers.items():
        if getattr(trainer, "objective_params", None) is not None:
            objective_times[name] = time_objective(trainer.objective_params, inputs,
                                                   strace_quantile=trainer.args.strace_quantile)
    scored_batch_times = {name: time_scored_batch(trainer, inputs, args.post_rounds)
                          for name, trainer in trainers.items()
                          if name != BASELINE and shapes_scored_batch(trainer)}
    step_times = {}
    if args.train_steps:
        for name, trainer in trainers.items():
            step_times[name] = time_train_steps(trainer, args.train_steps)

    where = (torch.cuda.get_device_name() + ", bf16, gradient checkpointing" if device == "cuda"
             else f"CPU, {torch.get_num_threads()} threads" + (" (dry run of the CUDA path: not a measurement)"
                                                               if args.dry_run else ""))
    model_words = "Llama hidden 128 × 4 layers" if args.shape == "tiny" else (
        f"{args.shape} shape{' shrunk' if args.dry_run else ''}, random weights"
        f"{', LoRA r 8' if args.shape in LORA_SHAPES else ''}")
    print(f"_compute_loss + backward, batch {args.batch} × (prompt {prompt_length} + completion "
          f"{args.completion_length}), {model_words}, {where}, median of {args.rounds} rounds × {args.iterations} calls")
    baseline = statistics.median(times[BASELINE])
    header = (f"{'variant':30} {'ms/call':>9} {'ratio':>7} {'loss-only ms':>13} {'ratio from loss-only':>21} "
              f"{'scored-batch ms':>16} {'÷ baseline call':>16}")
    print(header + (f" {'train s/step':>13} {'ratio':>7}" if step_times else ""))
    rows = []
    for name in trainers:
        median = statistics.median(times[name])
        record = {"variant": name, "ms": median * 1e3, "ratio": median / baseline}
        row = f"{name:30} {median * 1e3:9.2f} {median / baseline:7.3f}"
        if name in objective_times:
            # the step differs from the baseline's only by the loss arithmetic: a low-noise estimate
            added = objective_times[name] - objective_times[BASELINE]
            record.update(loss_only_ms=objective_times[name] * 1e3, ratio_from_loss_only=1 + added / baseline)
            row += f" {objective_times[name] * 1e3:13.3f} {1 + added / baseline:21.4f}"
        else:
            row += f" {'-':>13} {'-':>21}"
        if name in scored_batch_times:  # once per generation batch, besides the loss
            row += f" {scored_batch_times[name] * 1e3:16.1f} {scored_batch_times[name] / baseline:16.3f}"
        else:
            row += f" {'-':>16} {'-':>16}"
        if step_times:
            row += f" {step_times[name]:13.3f} {step_times[name] / step_times[BASELINE]:7.3f}"
        print(row)
        rows.append(record)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"shape": args.shape, "device": device, "dry_run": args.dry_run, "batch": args.batch,
                       "prompt_length": prompt_length, "completion_length": args.completion_length,
                       "variants": {name: variants.get(name) for name in trainers}, "rows": rows}, handle, indent=1)


if __name__ == "__main__":
    main()
