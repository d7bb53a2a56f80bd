"""Loading a model and its tokenizer by hub id or local path, the same way at every scale."""

from __future__ import annotations

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def load_tokenizer(source: str, *, padding_side: str = "left"):
    """Left padding by default: batched generation continues every prompt from its last token."""
    tokenizer = AutoTokenizer.from_pretrained(source)
    tokenizer.padding_side = padding_side
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_model(source: str, *, dtype: str | torch.dtype = "auto", device_map: str | None = None):
    """A causal LM in eval mode; bfloat16 on GPU when the checkpoint asks for ``auto``."""
    if dtype == "auto" and not torch.cuda.is_available():
        dtype = torch.float32  # CPU matmuls in bf16 are slow and imprecise
    model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype, device_map=device_map)
    return model.eval()


def trainer_hardware_kwargs(settings: dict) -> dict:
    """TRL config keywords for where the job runs.

    TRL defaults to bf16 and activation checkpointing, which on CPU are slow or fail: on CPU both are
    off whatever the config says; on GPU the config decides (bf16 on unless set otherwise).
    """
    if not torch.cuda.is_available():
        return {"use_cpu": True, "bf16": False, "gradient_checkpointing": False}
    return {"bf16": settings.get("bf16", True),
            "gradient_checkpointing": settings.get("gradient_checkpointing", False)}


def lora_config(lora: dict | None):
    """The PEFT LoRA config of a model's ``lora:`` settings, or None (full fine-tuning) when it has none.

    SFT and RL both build their adapter here, so that a model is trained with the same adapter in both stages.
    """
    if not lora:
        return None
    from peft import LoraConfig

    return LoraConfig(r=lora.get("r", 64), lora_alpha=lora.get("alpha", 128), lora_dropout=lora.get("dropout", 0.05),
                      target_modules=lora.get("target_modules", "all-linear"), task_type="CAUSAL_LM")
