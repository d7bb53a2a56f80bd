"""generation.generate's context rule, the same on both backends: a completion stops where prompt and
completion reach max_model_len (as vLLM stops it), and a prompt that fills max_model_len alone is not
generated, is listed in too_long, and gets an empty completion."""

import pytest

from grpo_lambda import generation
from grpo_lambda.data.prompts import prompt_text, prompt_token_ids
from grpo_lambda.models import load_tokenizer


def test_token_budgets_cut_at_the_context_and_stop_at_zero():
    assert generation.token_budgets([10, 90, 97, 100, 130], max_new_tokens=8, max_model_len=100) == [8, 8, 3, 0, 0]


@pytest.fixture(scope="module")
def prompts(tiny_model_dir):
    tokenizer = load_tokenizer(str(tiny_model_dir))
    texts = [prompt_text(tokenizer, "plain", problem) for problem in ("1+1", "12 + 7 * 3 - 4 " * 3, "9 " * 40)]
    return texts, [len(prompt_token_ids(tokenizer, text)) for text in texts]


def test_hf_honours_max_model_len_per_prompt_in_one_batch(tiny_model_dir, prompts):
    texts, lengths = prompts
    assert lengths[0] < lengths[1] < lengths[2]
    max_model_len = lengths[1] + 3  # prompt 0 keeps its 12 tokens, prompt 1 gets 3, prompt 2 none
    done = generation.generate(str(tiny_model_dir), texts, backend="hf", max_new_tokens=12,
                               max_model_len=max_model_len, batch_size=8)
    assert done.too_long == [2]
    assert done.texts[2] == [""] and done.lengths[2] == [0]
    assert done.lengths[1][0] <= 3 and done.lengths[0][0] <= 12
    assert lengths[1] + done.lengths[1][0] <= max_model_len
    # Each kept completion is what the prompt gives alone with its own budget (greedy decoding).
    for index, budget in ((0, 12), (1, 3)):
        alone = generation.generate(str(tiny_model_dir), [texts[index]], backend="hf", max_new_tokens=budget,
                                    max_model_len=4096)
        assert alone.texts[0] == done.texts[index] and alone.lengths[0] == done.lengths[index]


def test_no_prompt_fits_gives_empty_completions_without_loading_a_backend(tiny_model_dir, prompts):
    texts, lengths = prompts
    done = generation.generate(str(tiny_model_dir), texts, backend="vllm", n=2, greedy=False,
                               max_new_tokens=4, max_model_len=lengths[0])
    assert done.too_long == [0, 1, 2] and done.texts == [["", ""]] * 3 and done.lengths == [[0, 0]] * 3
