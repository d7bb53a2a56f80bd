"""One optimizer step of GRPOLambdaTrainer on a fixed global batch, on however many processes it is launched.

Run by tests/test_multiprocess.py, once as a plain process and once under
``accelerate launch --cpu --num_processes 2``: each process trains on its slice of the same global batch
(TRL's slicing: process k takes rows k·B .. (k+1)·B−1), through the Trainer's own loop — DDP wrapping,
gradient all-reduce, optimizer — and the main process saves the trainable weights before and after
the step. Generation is the only part replaced: the batch is fixed, so that 1 and 2 processes see
the same completions, old and reference log-probs and advantages.

    python tests/one_update.py --model DIR --out DIR
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from datasets import Dataset
from transformers import AutoTokenizer

from grpo_lambda.trainer import GRPOLambdaTrainer
from grpo_lambda.trainer_config import GRPOLambdaConfig
from grpo_lambda.variants import variant_config_kwargs

GLOBAL_ROWS, GROUP, PROMPT, COMPLETION = 8, 4, 5, 10
# Completion tokens per row. `equal`: both halves of the batch hold 37 tokens, so a token mean taken
# per process (bnpo, as TRL defines it) equals the global one; `unequal`: 40 and 29, for losses whose
# normaliser is global (dapo).
COMPLETION_LENGTHS = {"equal": [10, 10, 8, 9, 9, 9, 10, 9], "unequal": [10, 10, 10, 10, 4, 6, 10, 9]}
ADVANTAGES = [1.2, -0.4, -0.4, -0.4, 0.9, 0.9, -0.9, -0.9]

# name: (variant, loss_type, lengths, LoRA)
CASES = {
    "grpo-bnpo": ({"objective": "grpo"}, "bnpo", "equal", False),
    "grpo-dapo": ({"objective": "grpo"}, "dapo", "unequal", False),
    "absolute-trace-bnpo": ({"objective": "grpo_lambda", "lam": 0.99, "style": "both", "update": "trace",
                             "form": "absolute", "eps": 1e-7}, "bnpo", "equal", False),
    "absolute-trace-dapo-lora": ({"objective": "grpo_lambda", "lam": 0.99, "style": "recent", "update": "trace",
                                  "form": "absolute", "eps": 1e-7}, "dapo", "unequal", True),
}


def global_batch(model, lengths: list[int]) -> dict:
    """The fixed batch: random tokens, left-padded prompts, right-padded completions, old and reference
    log-probs a fixed perturbation away from the current policy (so the ratios clip and the KL has a
    gradient)."""
    generator = torch.Generator().manual_seed(0)
    low, high = 4, model.config.vocab_size
    prompt_ids = torch.randint(low, high, (GLOBAL_ROWS, PROMPT), generator=generator)
    prompt_mask = torch.ones(GLOBAL_ROWS, PROMPT, dtype=torch.long)
    prompt_mask[1::3, :2] = 0
    completion_ids = torch.randint(low, high, (GLOBAL_ROWS, COMPLETION), generator=generator)
    completion_mask = (torch.arange(COMPLETION) < torch.tensor(lengths).unsqueeze(1)).long()
    with torch.no_grad():
        logits = model(input_ids=torch.cat([prompt_ids, completion_ids], 1),
                       attention_mask=torch.cat([prompt_mask, completion_mask], 1)).logits
    logps = torch.log_softmax(logits[:, PROMPT - 1:-1].float(), -1).gather(-1, completion_ids.unsqueeze(-1)).squeeze(-1)
    return {
        "prompt_ids": prompt_ids, "prompt_mask": prompt_mask,
        "completion_ids": completion_ids, "completion_mask": completion_mask,
        "advantages": torch.tensor(ADVANTAGES),
        "old_per_token_logps": logps + 0.3 * torch.randn(logps.shape, generator=generator),
        "ref_per_token_logps": logps + 0.2 * torch.randn(logps.shape, generator=generator),
        "num_items_in_batch": completion_mask.sum(),
    }


class FixedBatchTrainer(GRPOLambdaTrainer):
    """GRPOLambdaTrainer whose generation step hands each process its slice of a fixed global batch."""

    lengths: list[int] = []

    def _generate_and_score_completions(self, inputs):
        batch = global_batch(self.accelerator.unwrap_model(self.model), self.lengths)
        rows = GLOBAL_ROWS // self.accelerator.num_processes
        start = self.accelerator.process_index * rows
        return {key: value if key == "num_items_in_batch" else value[start:start + rows]
                for key, value in batch.items()}


def trainable(trainer) -> dict[str, torch.Tensor]:
    model = trainer.accelerator.unwrap_model(trainer.model)
    return {name: p.detach().clone() for name, p in model.named_parameters() if p.requires_grad}


def run_case(name: str, model_dir: str, out: Path) -> None:
    variant, loss_type, lengths, lora = CASES[name]
    torch.manual_seed(0)  # the LoRA adapter's initialisation, the same on every process and run
    processes = int(__import__("os").environ.get("WORLD_SIZE", "1"))
    args = GRPOLambdaConfig(
        output_dir=str(out / f"{name}-trainer"), use_cpu=True, bf16=False, report_to="none", save_strategy="no",
        per_device_train_batch_size=GLOBAL_ROWS // processes, num_generations=GROUP,
        max_completion_length=COMPLETION, max_steps=1, learning_rate=0.05, optim="sgd",
        lr_scheduler_type="constant", max_grad_norm=0.0, beta=0.04, loss_type=loss_type, logging_steps=1,
        seed=0, disable_tqdm=True, **variant_config_kwargs(variant))
    peft_config = None
    if lora:
        from peft import LoraConfig

        peft_config = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules="all-linear",
                                 task_type="CAUSAL_LM")
    FixedBatchTrainer.lengths = COMPLETION_LENGTHS[lengths]
    trainer = FixedBatchTrainer(model=model_dir, reward_funcs=lambda completions, **kw: [0.0] * len(completions),
                                args=args, train_dataset=Dataset.from_dict({"prompt": ["1+1=?"] * GLOBAL_ROWS}),
                                processing_class=AutoTokenizer.from_pretrained(model_dir), peft_config=peft_config)
    before = trainable(trainer)
    trainer.train()
    after = trainable(trainer)
    if trainer.accelerator.is_main_process:
        torch.save({"before": before, "after": after, "processes": trainer.accelerator.num_processes},
                   out / f"{name}.pt")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--cases", nargs="*", default=list(CASES))
    options = parser.parse_args()
    torch.set_num_threads(1)
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in options.cases:
        run_case(name, options.model, out)


if __name__ == "__main__":
    main()
