"""generation.generate's context rule, the same on both backends: a completion stops where prompt and
completion reach max_model_len (as vLLM stops it), and a prompt that fills max_model_len alone is not
generated, is listed in too_long, and gets an empty completion."""

import pytest
import torch

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


# The hf backend sorts prompts by length into batches and maps the completions back: each completion
# must land on its own prompt, in sample order, cut at its own token budget. The model is a stand-in whose
# "generation" echoes its prompt (sample j from the prompt's j-th token); the tiny tokenizer is one token per
# character, so the expected texts are plain string slices.

# Not in length order, so that sorting moves them; lengths 29, 3, 15, 5.
PROMPTS = ["zebra crossing 12 + 7 * 3 - 4", "1+1", "quick brown fox", "mango"]


class EchoModel:
    """generate(): for each prompt row, ``num_return_sequences`` rows; sample j is the prompt's own tokens
    from its j-th on, then eos, then padding, ``max_new_tokens`` long."""

    device = torch.device("cpu")

    def __init__(self, eos, pad):
        self.eos, self.pad = eos, pad
        self.batches = []

    def to(self, device):
        return self

    def generate(self, input_ids, attention_mask, max_new_tokens, num_return_sequences, pad_token_id, **kwargs):
        self.batches.append(input_ids.shape[0])
        rows = []
        for ids, mask in zip(input_ids, attention_mask):
            own = ids[mask.bool()].tolist()
            for j in range(num_return_sequences):
                new = (own[j:] + [self.eos] + [self.pad] * max_new_tokens)[:max_new_tokens]
                rows.append(ids.tolist() + new)
        return torch.tensor(rows)


@pytest.fixture
def echo(tiny_model_dir, monkeypatch):
    tokenizer = load_tokenizer(str(tiny_model_dir))
    for text in PROMPTS:  # one token per character, no BOS: the slices below are token slices
        assert tokenizer.decode(prompt_token_ids(tokenizer, text)) == text
        assert len(prompt_token_ids(tokenizer, text)) == len(text)
    model = EchoModel(tokenizer.eos_token_id, tokenizer.pad_token_id)
    monkeypatch.setattr("grpo_lambda.models.load_model", lambda *args, **kwargs: model)
    return model


@pytest.mark.parametrize("n", [1, 3])
def test_hf_completions_go_back_to_their_own_prompts_across_sorted_batches(tiny_model_dir, echo, n):
    # max_model_len 33 leaves the 29-token prompt a budget of 4; the others get max_new_tokens = 6.
    budgets = [4, 6, 6, 6]
    done = generation.generate(str(tiny_model_dir), PROMPTS, backend="hf", n=n, greedy=n == 1,
                               max_new_tokens=6, max_model_len=33, batch_size=2)
    assert echo.batches == [2, 2]  # sorted by length: ["1+1", "mango"], then ["quick brown fox", "zebra..."]
    expected_texts = [[text[j:][:budget] for j in range(n)] for text, budget in zip(PROMPTS, budgets)]
    # Generated tokens up to the first eos: the echo, plus the eos where it fits the budget.
    expected_lengths = [[min(len(text) - j + 1, budget) for j in range(n)] for text, budget in zip(PROMPTS, budgets)]
    assert done.texts == expected_texts
    assert done.lengths == expected_lengths
    assert done.too_long == []
    if n == 3:  # spelled out once
        assert done.texts[0] == ["zebr", "ebra", "bra "] and done.texts[1] == ["1+1", "+1", "1"]
        assert done.lengths[1] == [4, 3, 2] and done.lengths[0] == [4, 4, 4]
