"""A tiny TRL batch and trainer, shared by the tests of the trainer and its objectives: a trainer built on
the `model_dir` fixture (conftest.py), a batch shaped like GRPOTrainer's, and one loss + backward."""

import pytest
import torch
from datasets import Dataset
from transformers import AutoTokenizer

from grpo_lambda import tiny

# Token ids of ordinary characters (the special tokens come first in the tiny vocabulary).
FIRST_CHARACTER, VOCABULARY = len(tiny.SPECIAL_TOKENS), len(tiny.SPECIAL_TOKENS) + len(tiny.CHARACTERS)
BATCH, PROMPT, COMPLETION = 4, 5, 8


def length_reward(completions, **kwargs):
    return [float(len(completion)) for completion in completions]


def make_trainer(model_dir, trainer_class, config_class, tmp_path, **config):
    args = config_class(output_dir=str(tmp_path), use_cpu=True, bf16=False, report_to="none",
                        per_device_train_batch_size=BATCH, num_generations=BATCH, max_completion_length=COMPLETION,
                        **config)
    dataset = Dataset.from_dict({"prompt": ["1+2=", "3*4=", "5-6=", "7+8="]})
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    return trainer_class(model=model_dir, reward_funcs=length_reward, args=args, train_dataset=dataset,
                         processing_class=tokenizer)


def make_inputs(trainer, *, off_policy, with_ref, seed=0):
    """A batch shaped like the output of GRPOTrainer._generate_and_score_completions."""
    generator = torch.Generator().manual_seed(seed)
    prompt_ids = torch.randint(FIRST_CHARACTER, VOCABULARY, (BATCH, PROMPT), generator=generator)
    prompt_mask = torch.ones(BATCH, PROMPT, dtype=torch.long)
    prompt_mask[1, :2] = 0  # left padding
    completion_ids = torch.randint(FIRST_CHARACTER, VOCABULARY, (BATCH, COMPLETION), generator=generator)
    completion_mask = torch.ones(BATCH, COMPLETION, dtype=torch.long)
    completion_mask[1, 5:] = 0
    completion_mask[2, 2:] = 0
    inputs = {
        "prompt_ids": prompt_ids,
        "prompt_mask": prompt_mask,
        "completion_ids": completion_ids,
        "completion_mask": completion_mask,
        "advantages": torch.tensor([1.0, -0.5, 0.3, -1.2]),
        "num_items_in_batch": completion_mask.sum(),
    }
    if off_policy or with_ref:
        with torch.no_grad():
            logps, _, _ = trainer._get_per_token_logps_and_entropies(
                trainer.model, torch.cat([prompt_ids, completion_ids], 1),
                torch.cat([prompt_mask, completion_mask], 1), COMPLETION)
        if off_policy:  # far enough from the current policy that both clip sides occur
            inputs["old_per_token_logps"] = logps + 0.3 * torch.randn(logps.shape, generator=generator)
        if with_ref:
            inputs["ref_per_token_logps"] = logps + 0.2 * torch.randn(logps.shape, generator=generator)
    return inputs


def loss_grads_metrics(trainer, inputs, accumulation):
    """One _compute_loss + backward in train mode, as one micro-batch of an accumulation window."""
    trainer.model.train()
    trainer.model.zero_grad()
    trainer.current_gradient_accumulation_steps = accumulation
    trainer._metrics["train"].clear()
    loss = trainer._compute_loss(trainer.model, inputs)
    loss.backward()
    grads = {name: p.grad.clone() for name, p in trainer.model.named_parameters() if p.grad is not None}
    metrics = {name: values[-1] for name, values in trainer._metrics["train"].items()}
    return loss.detach(), grads, metrics


def assert_same(ours, theirs):
    (loss, grads, metrics), (trl_loss, trl_grads, trl_metrics) = ours, theirs
    torch.testing.assert_close(loss, trl_loss, rtol=1e-6, atol=1e-9)
    assert grads.keys() == trl_grads.keys() and grads
    for name in grads:
        torch.testing.assert_close(grads[name], trl_grads[name], rtol=1e-5, atol=1e-8, msg=name)
    for name, value in trl_metrics.items():
        assert metrics[name] == pytest.approx(value, rel=1e-6, abs=1e-9), name
