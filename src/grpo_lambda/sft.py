"""Supervised fine-tuning with TRL's SFTTrainer.

A training set's worked solutions or the self-distilled set are prompt/completion pairs under the model's
prompt template, with the loss on the completion only; ``sft.format: think_answer`` writes each completion in
open-r1's tags (`grpo_lambda.sft_data.think_answer`). A chat SFT set (``sft.data: open_r1``, rows of
``messages``) is handed to TRL as conversations: TRL applies the model's chat template and, as in open-r1's
recipe, trains on every token. A model with ``lora:`` trains its LoRA adapter and is written merged.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

from grpo_lambda import files, fingerprint, provenance
from grpo_lambda.data.prompts import prompt_text
from grpo_lambda.grading.extract import boxed_span
from grpo_lambda.models import load_tokenizer, lora_config, trainer_hardware_kwargs
from grpo_lambda.saving import log_world_size, save_trained_model
from grpo_lambda.sft_data import think_answer

log = logging.getLogger(__name__)


def sft_dataset(rows: list[dict], tokenizer, template: str, *, system_prompt: str | None = None,
                answer_format: str = "boxed"):
    """Prompt/completion text pairs, the completion (in ``answer_format``: the solution as it is, or
    ``think_answer``) ending with eos so the model learns to stop; or, for rows of ``messages``, the
    conversations as they are (TRL formats them with the chat template)."""
    from datasets import Dataset

    if rows and all("messages" in row for row in rows):
        return Dataset.from_list([{"messages": row["messages"]} for row in rows])

    missing = sum(1 for row in rows if not row.get("solution"))
    if missing:
        raise ValueError(
            f"{missing} of {len(rows)} training rows have no 'solution' to fine-tune on; "
            "set sft.data: self_distill to fine-tune on the base model's own correct samples, "
            "or sft.num_train_epochs: 0 to start RL from the base model")
    if answer_format == "think_answer":
        unboxed = [row for row in rows if boxed_span(row["solution"]) is None]
        if unboxed:
            raise ValueError(f"sft.format think_answer: {len(unboxed)} of {len(rows)} solutions have no closed "
                             f"\\boxed{{}} answer to put in <answer> (the first: {unboxed[0]['solution'][:80]!r})")
    completion = think_answer if answer_format == "think_answer" else str
    return Dataset.from_list([
        {"prompt": prompt_text(tokenizer, template, row["problem"], system_prompt=system_prompt),
         "completion": completion(row["solution"]) + tokenizer.eos_token}
        for row in rows
    ])


def build_config(settings: dict, *, output_dir: str):
    """TRL's SFTConfig of the stage's settings (every default here yields to the sft: keys)."""
    from trl import SFTConfig

    from grpo_lambda import progress
    from grpo_lambda.train import default_report_to

    options = settings["sft"]
    padding_free = options.get("padding_free", False)
    return SFTConfig(
        output_dir=output_dir,
        num_train_epochs=options.get("num_train_epochs", 1),
        learning_rate=options.get("learning_rate", 2e-5),
        per_device_train_batch_size=options.get("per_device_train_batch_size", 8),
        gradient_accumulation_steps=options.get("gradient_accumulation_steps", 1),
        lr_scheduler_type=options.get("lr_scheduler_type", "cosine"),
        warmup_steps=options.get("warmup_steps", 0),
        # TRL does not cut a padding-free batch's examples to max_length: sft_dataset refuses longer ones
        max_length=None if padding_free else options.get("max_length", 4096),
        padding_free=padding_free,
        train_sampling_strategy=options.get("train_sampling_strategy", "random"),
        completion_only_loss=True,  # prompt/completion pairs; conversations have no prompt part
        packing=options.get("packing", False),
        seed=options.get("seed", 0),
        logging_steps=10,
        save_strategy="no",
        report_to=options.get("report_to") or default_report_to(),
        run_name="/".join(part for part in (settings["model"]["name"], settings["dataset"], "sft") if part),
        disable_tqdm=not progress.interactive(),  # a job log gets ProgressLines instead
        **trainer_hardware_kwargs(options),
    )


def _check_lengths(dataset, max_length: int) -> None:
    """A padding-free batch is not cut to max_length (TRL): an example longer than it is an error, not trained on."""
    lengths = [len(ids) for ids in dataset["input_ids"]]
    longer = sum(length > max_length for length in lengths)
    if longer:
        raise ValueError(f"sft.padding_free: {longer} of {len(lengths)} examples are longer than sft.max_length "
                         f"{max_length} tokens (the longest {max(lengths)}), and a padding-free batch is not cut; "
                         "raise sft.max_length or turn sft.padding_free off")


def run(settings: dict, *, base: str, data_path: str, out_dir: str) -> None:
    from transformers import AutoModelForCausalLM

    options = settings["sft"]
    made_by = provenance.record(revisions=fingerprint.source_revisions(base, data_path))  # hub inputs' commits
    tokenizer = load_tokenizer(base, padding_side="right")
    if options.get("num_train_epochs", 1) == 0:
        from accelerate import PartialState

        state = PartialState()
        log_world_size(state, "sft")
        if state.is_main_process:  # nothing to train: one process copies the base model
            log.info("sft.num_train_epochs is 0: the SFT model is the base model %s", base)
            model = AutoModelForCausalLM.from_pretrained(base, dtype="auto")
            with files.atomic_path(out_dir) as tmp:
                model.save_pretrained(tmp)
                tokenizer.save_pretrained(tmp)
            log.info("SFT model written to %s", out_dir)
            files.write_json(Path(out_dir).parent / "provenance.json", made_by)
        state.wait_for_everyone()
    else:
        from trl import SFTTrainer

        from grpo_lambda import progress
        from grpo_lambda.train import use_cell_tensorboard_folder

        rows = files.read_jsonl(data_path)
        dataset = sft_dataset(rows, tokenizer, settings["model"]["prompt"],
                              system_prompt=settings["model"].get("system_prompt"),
                              answer_format=options.get("format", "boxed"))
        with tempfile.TemporaryDirectory(prefix="sft-") as scratch:
            args = build_config(settings, output_dir=scratch)
            # A model with lora: trains an adapter, as in RL, and is saved merged into its base: a full model.
            peft_config = lora_config(settings["model"].get("lora"))
            trainer = SFTTrainer(model=base, args=args, train_dataset=dataset, processing_class=tokenizer,
                                 peft_config=peft_config)
            if args.padding_free and not args.packing:
                _check_lengths(trainer.train_dataset, options.get("max_length", 4096))
            log_world_size(trainer.accelerator, "sft")
            # the scratch output folder is deleted: event files go beside the model instead
            use_cell_tensorboard_folder(trainer, Path(out_dir).parent / "tensorboard")
            progress.quiet_trainer_output(trainer, f"sft {args.run_name}")
            trainer.train()
            save_trained_model(trainer, out_dir, lora_base=base if peft_config else None)
            if trainer.is_world_process_zero():
                files.write_json(Path(out_dir).parent / "provenance.json", made_by)
