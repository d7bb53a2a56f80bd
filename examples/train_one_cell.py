"""Train one GRPO-λ cell with GRPOLambdaTrainer, outside Snakemake: a model, a training set, a variant, a seed.

    snakemake --cores 2 results/tiny/arith/sft/model      # an SFT model to start from (or any causal LM)
    python examples/train_one_cell.py --model results/tiny/arith/sft/model --out runs/recent-trace-0.99

The pieces are the pipeline's own: a variant's keys (as under `variants:` in a config) become
GRPOLambdaConfig's (`variant_config_kwargs`), each problem is put in the model's prompt template
(`prompt_text`), the reward is the evaluation grader (`grading.REWARDS`), and `trainer_hardware_kwargs`
turns bf16 and gradient checkpointing off on a CPU, where TRL's defaults fail ("Your setup doesn't support
bf16/gpu"). Without --data it trains on the default study's `arith` set. The loss_type is TRL 1.16's
default, `dapo`, as in config/config.yaml (config/paper.yaml sets `bnpo`, the paper's); --variant may set
another (`"loss_type": "bnpo"`). Writes the model to OUT/model and the step log to OUT/log.json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from datasets import Dataset

from grpo_lambda import files
from grpo_lambda.data import arith
from grpo_lambda.data.prompts import prompt_text
from grpo_lambda.grading import REWARDS
from grpo_lambda.models import load_tokenizer, trainer_hardware_kwargs
from grpo_lambda.trainer import GRPOLambdaTrainer
from grpo_lambda.trainer_config import GRPOLambdaConfig
from grpo_lambda.variants import variant_config_kwargs

# The default study's GRPO-λ line (config/config.yaml): recent style, ε-trace, λ = 0.99, the paper's relative form.
VARIANT = {"objective": "grpo_lambda", "lam": 0.99, "style": "recent", "update": "trace", "form": "relative"}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="hub id or folder of the model to train (an SFT model)")
    parser.add_argument("--data", help="a training set's JSONL (id, problem, answer); default: the arith task")
    parser.add_argument("--prompt", default="plain", help="the prompt template: plain, qwen_math, r1d, r1")
    parser.add_argument("--variant", type=json.loads, default=VARIANT, help="the variant as JSON (default: %(default)s)")
    parser.add_argument("--steps", type=int, default=25)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--learning-rate", type=float, default=3e-5)
    parser.add_argument("--generations", type=int, default=8, help="completions per prompt (the group)")
    parser.add_argument("--batch", type=int, default=32, help="completions per step")
    parser.add_argument("--max-completion-length", type=int, default=96)
    parser.add_argument("--out", required=True, help="folder for the trained model and log")
    args = parser.parse_args(argv)

    rows = (files.read_jsonl(args.data, fields=files.PROBLEM_FIELDS) if args.data
            else arith.generate(3000, seed=1234, carry_error_rate=0.65))
    tokenizer = load_tokenizer(args.model, padding_side="left")
    dataset = Dataset.from_list([{"prompt": prompt_text(tokenizer, args.prompt, row["problem"]), "answer": row["answer"]}
                                 for row in rows])
    out = Path(args.out)
    config = GRPOLambdaConfig(
        output_dir=str(out / "trainer"), max_steps=args.steps, seed=args.seed, learning_rate=args.learning_rate,
        num_generations=args.generations, per_device_train_batch_size=args.batch,
        max_completion_length=args.max_completion_length, beta=0.0, logging_steps=1, save_strategy="no",
        report_to="none", **variant_config_kwargs(args.variant), **trainer_hardware_kwargs({}))
    trainer = GRPOLambdaTrainer(model=args.model, reward_funcs=REWARDS["evaluation"], args=config,
                                train_dataset=dataset, processing_class=tokenizer)
    trainer.train()
    trainer.save_model(str(out / "model"))
    tokenizer.save_pretrained(str(out / "model"))
    files.write_json(out / "log.json", trainer.state.log_history)
    print(f"trained {args.steps} steps; model in {out / 'model'}")


if __name__ == "__main__":
    main()
