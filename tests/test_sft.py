"""SFT of a model with ``lora:`` trains a LoRA adapter and writes it merged into its base: a full model
whose weights differ from the base's only in LoRA's target matrices, each by a matrix of rank ≤ r."""

import pytest
import yaml

from conftest import E2E_CONFIG, LORA_TARGETS, changed_weights, matrix_rank
from grpo_lambda import config as study
from grpo_lambda import prepare, sft

pytestmark = pytest.mark.slow

RANK = 2


def fine_tune(folder, base, *, lora: dict | None):
    raw = yaml.safe_load(E2E_CONFIG.read_text())
    raw["datasets"]["arith"]["n"] = 32
    raw["sft"].update(num_train_epochs=2, per_device_train_batch_size=8, learning_rate=1.0e-2)
    if lora:
        raw["models"]["tiny"]["lora"] = lora
    config = study.validate(raw)
    data = folder / "arith.jsonl"
    prepare.run(study.stage_settings(config, "prepare", dataset="arith"), str(data))
    out = folder / "sft" / "model"
    sft.run(study.stage_settings(config, "sft", model="tiny", dataset="arith"), base=str(base), data_path=str(data),
            out_dir=str(out))
    return out


def test_a_lora_model_is_fine_tuned_through_its_adapter_and_saved_merged(tmp_path, tiny_model_dir):
    from transformers import AutoModelForCausalLM

    out = fine_tune(tmp_path, tiny_model_dir, lora={"r": RANK, "alpha": 4, "dropout": 0.0,
                                                    "target_modules": "all-linear"})
    assert not list(out.glob("adapter_*"))
    model = AutoModelForCausalLM.from_pretrained(out)
    assert not any("lora" in name for name, _ in model.named_parameters())
    changed = changed_weights(tiny_model_dir, out)
    assert changed, "SFT changed no weight"
    outside = [name for name in changed if not name.endswith(tuple(f"{target}.weight" for target in LORA_TARGETS))]
    assert not outside, f"weights outside LoRA's targets changed: {outside}"
    assert all(matrix_rank(delta) <= RANK for delta in changed.values()), {name: matrix_rank(d) for name, d in changed.items()}


def test_a_model_without_lora_is_fully_fine_tuned(tmp_path, tiny_model_dir):
    tuned = fine_tune(tmp_path, tiny_model_dir, lora=None)
    changed = changed_weights(tiny_model_dir, tuned)
    assert any("embed_tokens" in name or "norm" in name for name in changed)
    assert any(delta.dim() == 2 and matrix_rank(delta) > RANK for delta in changed.values())
