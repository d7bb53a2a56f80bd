"""Cost of each objective in a training step, relative to TRL's GRPO, on a tiny model.

    python benchmarks/bench_step.py [--config config/compare.yaml] [--completion-length 256]
                                    [--rounds 7] [--iterations 5] [--train-steps 4] [--threads 1]

For every variant (the built-in table below, or the `variants:` of a pipeline config) it builds a
GRPOLambdaTrainer with GRPOLambdaConfig(**base, **variant_config_kwargs(variant)) around the same
randomly initialised Llama (hidden 128, 4 layers) and times `_compute_loss` + backward on one fixed
batch; the baseline is TRL's own GRPOTrainer with the same base config. Variants are timed in
interleaved rounds (so a load change on the machine hits all of them alike) and the table shows
the median time per call and its ratio to the baseline (goal for GRPO-λ: ≤ 1.03). As machine load
makes that ratio noisy by several percent, it also times the loss arithmetic alone
(`objectives.policy_loss` forward + backward on the batch's shape) and shows
1 + (its extra time over GRPO's) / (the baseline's step time): a low-noise estimate of the ratio.
With --train-steps > 0 it also times full trainer steps (generation + loss + optimizer).

Dynamic sampling and OAR work on the scored batch, once per generation batch, not in the loss: their
cost is timed apart (`_shape_scored_batch` on the same batch, median of --post-rounds calls) and shown
as milliseconds and as a fraction of the baseline's loss + backward. OAR-P runs one forward pass per
reasoning token: give it a short --completion-length, or expect seconds per call.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import tempfile
import time

import torch
import yaml
from datasets import Dataset
from transformers import PrinterCallback
from trl import GRPOConfig, GRPOTrainer

from grpo_lambda import tiny
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
}
def build_model_and_tokenizer():
    """The embedded default's tiny model (hidden 128, 4 layers), randomly initialised."""
    tokenizer = tiny.build_tokenizer()
    return tiny.build_model(tokenizer, seed=0, max_position_embeddings=1024), tokenizer


def make_trainer(name, variant, model, tokenizer, base, dataset):
    if name == BASELINE:
        trainer_class, args = GRPOTrainer, GRPOConfig(**base)
    else:
        trainer_class, args = GRPOLambdaTrainer, GRPOLambdaConfig(**{**base, **variant_config_kwargs(variant)})
    trainer = trainer_class(model=copy.deepcopy(model), reward_funcs=length_reward, args=args, train_dataset=dataset,
                            processing_class=tokenizer)
    trainer.remove_callback(PrinterCallback)  # keep the output to the table
    return trainer


def length_reward(completions, **kwargs):
    return [float(len(completion)) for completion in completions]


def make_inputs(batch, prompt_length, completion_length, vocab_size):
    """A batch shaped like GRPOTrainer._generate_and_score_completions' output, ragged completions."""
    generator = torch.Generator().manual_seed(0)
    completion_mask = torch.ones(batch, completion_length, dtype=torch.long)
    lengths = torch.randint(completion_length // 4, completion_length + 1, (batch,), generator=generator)
    completion_mask[torch.arange(completion_length) >= lengths.unsqueeze(1)] = 0
    return {
        "prompt_ids": torch.randint(len(tiny.SPECIAL_TOKENS), vocab_size, (batch, prompt_length), generator=generator),
        "prompt_mask": torch.ones(batch, prompt_length, dtype=torch.long),
        "completion_ids": torch.randint(len(tiny.SPECIAL_TOKENS), vocab_size, (batch, completion_length), generator=generator),
        "completion_mask": completion_mask,
        "advantages": torch.randn(batch, generator=generator),
        "num_items_in_batch": completion_mask.sum(),
    }


def time_loss_and_backward(trainer, inputs, iterations):
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    start = time.perf_counter()
    for _ in range(iterations):
        trainer.model.zero_grad(set_to_none=True)
        trainer._compute_loss(trainer.model, inputs).backward()
    return (time.perf_counter() - start) / iterations


def time_objective(params, inputs, iterations=200, strace_quantile=0.8):
    """policy_loss forward + backward alone on (B, T) log-probs: the part of the step a variant changes."""
    mask = inputs["completion_mask"]
    generator = torch.Generator().manual_seed(1)
    logps = (-torch.rand(mask.shape, generator=generator) * 3).requires_grad_()
    old_logps = logps.detach() + 0.01 * torch.randn(mask.shape, generator=generator)  # off-policy: traces act
    entropies = torch.rand(mask.shape, generator=generator)
    start = time.perf_counter()
    for _ in range(iterations):
        # S-trace's entropy mask is part of its cost
        trace_mask = high_entropy_mask(entropies, mask, strace_quantile) if params.objective == "strace" else None
        loss, _ = policy_loss(logps, old_logps, None, inputs["advantages"], mask, params, trace_mask=trace_mask)
        loss.backward()
    return (time.perf_counter() - start) / iterations


def shapes_scored_batch(trainer):
    return trainer.args.dynamic_sampling or trainer.args.oar_method is not None


def time_scored_batch(trainer, inputs, rounds):
    """Median time of the trainer's work on the scored batch (dynamic sampling, OAR), once per generation."""
    trainer.model.train()
    groups = inputs["completion_ids"].size(0) // trainer.num_generations
    rewards = torch.rand(groups, trainer.num_generations, 1, generator=torch.Generator().manual_seed(2))
    rewards[::2] = 1.0  # every second group without signal, as early in training
    times = []
    for _ in range(rounds):
        trainer._rewards_per_func = rewards.reshape(-1, 1)
        batch = dict(inputs)
        start = time.perf_counter()
        trainer._shape_scored_batch(batch)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def time_train_steps(trainer, steps):
    """Mean wall time of full steps; the first step's generation is the same for all (same weights, seed)."""
    trainer.args.max_steps = steps
    start = time.perf_counter()
    trainer.train()
    return (time.perf_counter() - start) / steps


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", help="a pipeline config whose `variants:` replace the built-in table")
    parser.add_argument("--batch", type=int, default=16, help="sequences per micro-batch")
    parser.add_argument("--prompt-length", type=int, default=64)
    parser.add_argument("--completion-length", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=7, help="interleaved timing rounds")
    parser.add_argument("--iterations", type=int, default=5, help="loss + backward calls per round")
    parser.add_argument("--train-steps", type=int, default=0, help="full trainer steps to time per variant")
    parser.add_argument("--post-rounds", type=int, default=3, help="timed calls of the scored-batch work (OAR, ...)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: stable timings on a shared machine)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    variants = VARIANTS
    if args.config:
        with open(args.config) as handle:
            variants = yaml.safe_load(handle)["variants"]
    model, tokenizer = build_model_and_tokenizer()
    dataset = Dataset.from_dict({"prompt": ["12+34=", "56*7=", "8-9=", "(1+2)*3="] * 8})
    base = dict(output_dir=tempfile.mkdtemp(), use_cpu=True, bf16=False, report_to="none", save_strategy="no",
                per_device_train_batch_size=args.batch, num_generations=8, max_completion_length=args.completion_length,
                logging_steps=1, learning_rate=1e-5, disable_tqdm=True)
    trainers = {BASELINE: make_trainer(BASELINE, None, model, tokenizer, base, dataset)}
    for name, variant in variants.items():
        trainers[name] = make_trainer(name, variant, model, tokenizer, base, dataset)
    inputs = make_inputs(args.batch, args.prompt_length, args.completion_length, len(tokenizer))

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

    print(f"_compute_loss + backward, batch {args.batch} × (prompt {args.prompt_length} + completion "
          f"{args.completion_length}), Llama hidden 128 × 4 layers, {torch.get_num_threads()} threads, "
          f"median of {args.rounds} rounds × {args.iterations} calls")
    baseline = statistics.median(times[BASELINE])
    header = (f"{'variant':30} {'ms/call':>9} {'ratio':>7} {'loss-only ms':>13} {'ratio from loss-only':>21} "
              f"{'scored-batch ms':>16} {'÷ baseline call':>16}")
    print(header + (f" {'train s/step':>13} {'ratio':>7}" if step_times else ""))
    for name in trainers:
        median = statistics.median(times[name])
        row = f"{name:30} {median * 1e3:9.2f} {median / baseline:7.3f}"
        if name in objective_times:
            # the step differs from the baseline's only by the loss arithmetic: a low-noise estimate
            added = objective_times[name] - objective_times[BASELINE]
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


if __name__ == "__main__":
    main()
