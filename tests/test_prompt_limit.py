"""rl.max_prompt_length (paper Table 2: 256): training prompts longer than the limit, counted in tokens as TRL
tokenises them, are left out of the RL set and counted."""

import pytest
from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

from grpo_lambda.train import drop_long_prompts, prompt_token_count
from trainer_batch import make_trainer


def test_long_prompts_are_left_out_and_counted(model_dir, tmp_path):
    trainer = make_trainer(model_dir, GRPOTrainer, GRPOConfig, tmp_path)
    tokenizer = trainer.processing_class
    prompts = ["1+2=", "12+34=", "1" * 30 + "=", [{"role": "user", "content": "5*6="}]]
    counts = [prompt_token_count(tokenizer, prompt) for prompt in prompts]
    # the same count as TRL's own tokenisation of the prompt it generates from
    assert counts == [len(ids) for prompt in prompts for ids in trainer._tokenize_prompts([prompt])[0]]
    dataset = Dataset.from_list([{"prompt": prompt, "answer": "0"} for prompt in prompts[:3]])
    limit = counts[1]
    kept, summary = drop_long_prompts(dataset, tokenizer, limit)
    assert kept["prompt"] == prompts[:2]
    assert summary == {"max_prompt_length": limit, "prompts": 3, "dropped": 1}
    same, summary = drop_long_prompts(dataset, tokenizer, None)
    assert len(same) == 3 and summary["dropped"] == 0
    with pytest.raises(ValueError, match="max_prompt_length 1: every one of the 3 prompts is longer"):
        drop_long_prompts(dataset, tokenizer, 1)
