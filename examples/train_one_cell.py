"""Train one GRPO-λ cell with GRPOLambdaTrainer, outside Snakemake: a model, a training set, a variant, a seed.

    snakemake --cores 2 results/tiny/arith/sft/model      # an SFT model to start from (or any causal LM)
    python examples/train_one_cell.py --model results/tiny/arith/sft/model --out runs/recent-trace-0.99
    python examples/train_one_cell.py --model MODEL --out runs/mine \
        --data mydata/train.jsonl --fields problem=question,answer=final --answer-kind number
    python examples/train_one_cell.py --model MODEL --out runs/gsm8k \
        --data openai/gsm8k --hub-config main --fields problem=question --answer-kind gsm8k

--data is a local file (.jsonl, .json, .csv, .parquet, or a save_to_disk folder) or a hub dataset id, read as
a study's `datasets:` entry reads it (grpo_lambda.data.registry): --fields maps the problem, answer and,
optionally, id and solution to the source's own columns (`id` may be absent: rows are numbered), and
--answer-kind normalises the answer (text, gsm8k, number, list). A bad row is skipped and named; a mapping to
a column the source lacks, or data with no usable row, ends the run with exit status 2 and one line naming the
mapping, before any model loads. Without --data it trains on the default study's `arith` set.

The pieces are the pipeline's own: a variant's keys (as under `variants:` in a config) become
GRPOLambdaConfig's (`variant_config_kwargs`), each problem is put in the model's prompt template
(`prompt_text`, with --system-prompt where the template has a system turn), the rewards are `rl.rewards`'
(--reward, a name of `grading.REWARDS` or your own `module:function`; docs/rewards.md), and
`trainer_hardware_kwargs` turns bf16 and gradient checkpointing off on a CPU, where TRL's defaults fail
("Your setup doesn't support bf16/gpu"). The loss_type is TRL 1.16's default, `dapo`, as in
config/config.yaml (config/paper.yaml sets `bnpo`, the paper's); --variant may set another
(`"loss_type": "bnpo"`). Writes the model to OUT/model, the step log to OUT/log.json and the first rendered
prompt to OUT/prompt.txt.

Steps on which every group's completions got the same reward (every reward 0: the model never reaches a rewarded
answer) learn nothing: the pipeline's `progress.NoLearningSignal` warns after 5 in a row and at the end of a run
that had nothing else; --stop-without-signal N ends the run with exit status 1 at the N-th in a row, writing no
model.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from grpo_lambda import files
from grpo_lambda.data import arith, registry
from grpo_lambda.data.rows import ANSWER_KINDS, FIELDS

# The default study's GRPO-λ line (config/config.yaml): recent style, ε-trace, λ = 0.99, the paper's relative form.
VARIANT = {"objective": "grpo_lambda", "lam": 0.99, "style": "recent", "update": "trace", "form": "relative"}


def parse_fields(text: str) -> dict:
    """``problem=question,answer=final`` as ``{"problem": "question", "answer": "final"}``."""
    fields = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        role, _, column = item.partition("=")
        if role not in FIELDS or not column:
            raise argparse.ArgumentTypeError(f"{item!r}: write ROLE=COLUMN, ROLE one of {', '.join(FIELDS)}")
        fields[role] = column
    return fields


def data_spec(data: str, *, fields: dict, answer_kind: str, split: str, hub_config: str | None,
              revision: str | None) -> dict:
    """The study-config description of --data (a local file or folder, else a hub id), resolved."""
    local = Path(data).expanduser().exists() or Path(data).suffix in registry.FILE_SUFFIXES or data.startswith((".", "/", "~"))
    spec = ({"source": "file", "path": data} if local
            else {"source": "hub", "hub_id": data, "config": hub_config, "revision": revision})
    return registry.resolve({**spec, "split": split, "fields": fields, "answer_kind": answer_kind}, "data")


def refuse(message: str) -> None:
    """End the run with exit status 2 (argparse's, for a bad argument) and one line on stderr."""
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def training_rows(args) -> list[dict]:
    """The normalised rows of --data; SystemExit(2) with one line naming the mapping when none is usable."""
    if not args.data:
        return arith.generate(3000, seed=1234, carry_error_rate=0.65)
    spec = data_spec(args.data, fields=args.fields, answer_kind=args.answer_kind, split=args.split,
                     hub_config=args.hub_config, revision=args.revision)
    mapping = ",".join(f"{role}={column}" for role, column in spec["fields"].items())
    try:
        rows, dropped = registry.load_rows(spec)
    except (OSError, ValueError) as error:
        refuse(f"--data {args.data}: {str(error).splitlines()[0]} (--fields {mapping})")
    if not rows:
        refuse(f"--data {args.data}: no usable row (dropped {dropped}) with --fields {mapping} and "
                 f"--answer-kind {args.answer_kind}: map the problem and answer columns to your data's names")
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="hub id or folder of the model to train (an SFT model)")
    parser.add_argument("--data", help="a training set: a local .jsonl/.json/.csv/.parquet file or save_to_disk "
                                       "folder, or a hub dataset id; default: the arith task")
    parser.add_argument("--fields", type=parse_fields, default={}, metavar="ROLE=COLUMN,...",
                        help="the data's column for problem, answer and optionally id and solution "
                             "(default: problem=problem,answer=answer)")
    parser.add_argument("--answer-kind", default="text", choices=ANSWER_KINDS)
    parser.add_argument("--split", default="train", help="the hub dataset's (or save_to_disk folder's) split")
    parser.add_argument("--hub-config", help="the hub dataset's config (datasets.load_dataset's name)")
    parser.add_argument("--revision", help="the hub dataset's revision (a commit pins it)")
    parser.add_argument("--prompt", default="plain", help="the prompt template: plain, qwen_math, r1d, r1, or a "
                                                          "template string holding {problem}")
    parser.add_argument("--system-prompt", help="the system turn (templates plain and r1d, or {system_prompt})")
    parser.add_argument("--reward", action="append", metavar="NAME[@WEIGHT]",
                        help="a reward of grpo_lambda.grading.REWARDS or module:function, optionally @WEIGHT; "
                             "repeat for several (default: evaluation, and format at weight 0)")
    parser.add_argument("--variant", type=json.loads, default=VARIANT, help="the variant as JSON (default: %(default)s)")
    parser.add_argument("--steps", type=int, default=25)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--learning-rate", type=float, default=3e-5)
    parser.add_argument("--generations", type=int, default=8, help="completions per prompt (the group)")
    parser.add_argument("--batch", type=int, default=32, help="completions per step")
    parser.add_argument("--max-completion-length", type=int, default=96)
    parser.add_argument("--stop-without-signal", type=int, metavar="N",
                        help="stop with exit status 1 after N steps in a row on which every group's rewards were equal "
                             "(default: warn only)")
    parser.add_argument("--out", required=True, help="folder for the trained model and log")
    args = parser.parse_args(argv)
    if args.stop_without_signal is not None and args.stop_without_signal < 1:
        parser.error("--stop-without-signal must be at least 1")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    rows = training_rows(args)  # before any model loads: a bad mapping ends the run in seconds
    rewards = [{"name": name, "weight": float(weight or 1)} for name, _, weight in
               (text.partition("@") for text in args.reward)] if args.reward else None

    from grpo_lambda.grading.reward import reward_functions, reward_specs
    from grpo_lambda.models import load_tokenizer, trainer_hardware_kwargs
    from grpo_lambda.progress import NoLearningSignal, NoLearningSignalError
    from grpo_lambda.train import rl_dataset
    from grpo_lambda.trainer import GRPOLambdaTrainer
    from grpo_lambda.trainer_config import GRPOLambdaConfig
    from grpo_lambda.variants import variant_config_kwargs

    specs = reward_specs({"rewards": rewards} if rewards else {})
    try:
        reward_funcs, weights = reward_functions(specs, max_completion_length=args.max_completion_length)
    except ValueError as error:
        refuse(f"--reward: {error}")
    tokenizer = load_tokenizer(args.model, padding_side="left")
    dataset = rl_dataset(rows, tokenizer, args.prompt, system_prompt=args.system_prompt)
    out = Path(args.out)
    files.write_text(out / "prompt.txt", dataset[0]["prompt"])  # what the model reads, system turn included
    print(f"{len(rows)} rows; the first prompt as the model reads it is in {out / 'prompt.txt'}")
    config = GRPOLambdaConfig(
        output_dir=str(out / "trainer"), max_steps=args.steps, seed=args.seed, learning_rate=args.learning_rate,
        num_generations=args.generations, per_device_train_batch_size=args.batch,
        max_completion_length=args.max_completion_length, beta=0.0, logging_steps=1, save_strategy="no",
        report_to="none", reward_weights=weights, **variant_config_kwargs(args.variant),
        **trainer_hardware_kwargs({}))
    trainer = GRPOLambdaTrainer(model=args.model, reward_funcs=reward_funcs, args=config, train_dataset=dataset,
                                processing_class=tokenizer,
                                callbacks=[NoLearningSignal(stop_after=args.stop_without_signal)])
    try:
        trainer.train()
    except NoLearningSignalError as error:
        files.write_json(out / "log.json", trainer.state.log_history)
        # on a line of its own: the trainer's progress bar, left open, holds the cursor mid-line
        print(f"\nerror: {error} (--stop-without-signal {args.stop_without_signal}); no model written", file=sys.stderr)
        sys.exit(1)
    trainer.save_model(str(out / "model"))
    tokenizer.save_pretrained(str(out / "model"))
    files.write_json(out / "log.json", trainer.state.log_history)
    print(f"trained {args.steps} steps on {len(rows)} rows; model in {out / 'model'}")


if __name__ == "__main__":
    main()
