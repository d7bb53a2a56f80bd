"""Writing a trained model from a job of one or several processes.

Every process calls ``save_trained_model`` (under ZeRO-3 each one holds a shard, and gathering them is
collective); the Trainer's own ``save_model`` gathers the weights and writes them once, from the main
process, into a temporary folder that the main process alone renames into place. A LoRA model is
written merged into its base, so that a snapshot loads with ``AutoModelForCausalLM`` as a full model.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from grpo_lambda import files

log = logging.getLogger(__name__)


def merge_lora(adapter_dir: Path, base: str, out_dir: Path, tokenizer) -> None:
    """The base model with the adapter in ``adapter_dir`` merged into its weights, saved to ``out_dir``."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base, dtype="auto")
    merged = PeftModel.from_pretrained(model, str(adapter_dir)).merge_and_unload()
    merged.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)


def save_trained_model(trainer, folder: str | os.PathLike, *, lora_base: str | None = None) -> None:
    """Write ``trainer``'s model (and tokenizer) to ``folder``; call it on every process.

    ``lora_base``: the model the LoRA adapter was trained on; given, the folder holds the merged model.
    """
    accelerator = trainer.accelerator
    folder = Path(folder)
    # One name for every process: the Trainer writes there from the main process only.
    saving = folder.with_name(f".{folder.name}.saving")
    if accelerator.is_main_process:
        folder.parent.mkdir(parents=True, exist_ok=True)
        files.remove_path(saving)
    accelerator.wait_for_everyone()
    trainer.save_model(str(saving))
    if accelerator.is_main_process:
        if lora_base is None:
            files.replace_path(saving, folder)
        else:  # the main process alone merges: its own temporary name will do
            with files.atomic_path(folder) as merged:
                merge_lora(saving, lora_base, merged, trainer.processing_class)
            files.remove_path(saving)
        log.info("model written to %s by process %d of %d%s", folder, accelerator.process_index,
                 accelerator.num_processes, " (LoRA merged into its base)" if lora_base else "")
    accelerator.wait_for_everyone()


def log_world_size(accelerator, stage: str) -> None:
    """One line per job naming how many processes train together (the main process writes it)."""
    if accelerator.is_main_process:
        log.info("%s: world size %d (%s)", stage, accelerator.num_processes, accelerator.distributed_type)
