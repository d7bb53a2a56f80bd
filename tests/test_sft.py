"""SFT of a model with ``lora:`` trains a LoRA adapter and writes it merged into its base: a full model
whose weights differ from the base's only in LoRA's target matrices, each by a matrix of rank ≤ r."""

import pytest
import torch
import yaml

from conftest import E2E_CONFIG, model_weights
from grpo_lambda import config as study
from grpo_lambda import prepare, sft

pytestmark = pytest.mark.slow

RANK = 2
# PEFT's "all-linear": every linear layer of the decoder blocks, not the output layer
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def fine_tune(folder, base, *, lora: dict | None):
    raw = yaml.safe_load(E2E_CONFIG.read_text())
    raw["datasets"]["arith"]["n"] = 32
    raw["sft"].update(epochs=2, batch_size=8, learning_rate=1.0e-2)
    if lora:
        raw["models"]["tiny"]["lora"] = lora
    config = study.validate(raw)
    data = folder / "arith.jsonl"
    prepare.run(study.stage_settings(config, "prepare", dataset="arith"), str(data))
    out = folder / "sft" / "model"
    sft.run(study.stage_settings(config, "sft", model="tiny", dataset="arith"), base=str(base), data_path=str(data),
            out_dir=str(out))
    return out


def deltas(base, tuned) -> dict[str, torch.Tensor]:
    before, after = model_weights(base), model_weights(tuned)
    assert before.keys() == after.keys()
    return {name: after[name].double() - before[name].double() for name in before}


def rank(delta: torch.Tensor) -> int:
    # Relative to the largest singular value, above the float32 rounding of the saved weights.
    return int(torch.linalg.matrix_rank(delta, rtol=1e-4))


def test_a_lora_model_is_fine_tuned_through_its_adapter_and_saved_merged(tmp_path, tiny_model_dir):
    from transformers import AutoModelForCausalLM

    out = fine_tune(tmp_path, tiny_model_dir, lora={"r": RANK, "alpha": 4, "dropout": 0.0,
                                                    "target_modules": "all-linear"})
    assert not list(out.glob("adapter_*"))
    model = AutoModelForCausalLM.from_pretrained(out)
    assert not any("lora" in name for name, _ in model.named_parameters())
    changed = {name: delta for name, delta in deltas(tiny_model_dir, out).items() if delta.abs().max() > 0}
    assert changed, "SFT changed no weight"
    outside = [name for name in changed if not name.endswith(tuple(f"{target}.weight" for target in LORA_TARGETS))]
    assert not outside, f"weights outside LoRA's targets changed: {outside}"
    assert all(rank(delta) <= RANK for delta in changed.values()), {name: rank(d) for name, d in changed.items()}


def test_a_model_without_lora_is_fully_fine_tuned(tmp_path, tiny_model_dir):
    tuned = fine_tune(tmp_path, tiny_model_dir, lora=None)
    changed = {name: delta for name, delta in deltas(tiny_model_dir, tuned).items() if delta.abs().max() > 0}
    assert any("embed_tokens" in name or "norm" in name for name in changed)
    assert any(delta.dim() == 2 and rank(delta) > RANK for delta in changed.values())
