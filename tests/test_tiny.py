import string

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from grpo_lambda import tiny
from grpo_lambda.data import arith


def test_tokenizer_round_trips_text_exactly():
    tokenizer = tiny.build_tokenizer()
    texts = [row["solution"] for row in arith.generate(20, seed=3)] + [
        "  two  spaces, a tab\tand\nnewlines\n", string.printable.replace("\r", "").replace("\x0b", "").replace("\x0c", "")]
    for text in texts:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert len(ids) == len(text)  # one token per character
        assert tokenizer.decode(ids) == text


def test_special_tokens_are_single_tokens_and_chat_template_opens_the_assistant_turn():
    tokenizer = tiny.build_tokenizer()
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "12+3=?"}], tokenize=False,
                                           add_generation_prompt=True)
    assert prompt == "<|im_start|>user\n12+3=?<|im_end|>\n<|im_start|>assistant\n"
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    assert ids.count(tokenizer.convert_tokens_to_ids(tiny.IM_START)) == 2
    assert ids.count(tokenizer.eos_token_id) == 1
    assert tokenizer.pad_token_id != tokenizer.eos_token_id


def test_save_and_load_with_auto_classes_gives_the_same_model(tmp_path):
    folder = tmp_path / "tiny"
    tiny.build(str(folder), seed=5, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
    assert not list(tmp_path.glob(".*tmp*")), "the temporary folder must be renamed away"
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    assert model.config.model_type == "llama"
    reference = tiny.build_model(tiny.build_tokenizer(), seed=5, hidden_size=32, num_hidden_layers=2,
                                 num_attention_heads=2, intermediate_size=64)
    ids = tokenizer("47+5=?", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        assert torch.allclose(model(ids).logits, reference(ids).logits, atol=1e-6)
    assert tokenizer.decode(tokenizer("a b\\boxed{1}")["input_ids"]) == "a b\\boxed{1}"
    assert model.generation_config.eos_token_id == tokenizer.eos_token_id


def test_unknown_architecture_key_is_named():
    import pytest

    with pytest.raises(ValueError, match="hidden_sizes"):
        tiny.build_model(tiny.build_tokenizer(), hidden_sizes=3)


def test_r1_family_adds_its_bos_itself_and_renders_the_r1_distill_template(tmp_path):
    folder = tmp_path / "r1"
    tiny.build(str(folder), template="r1", hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
               intermediate_size=64)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "12+3=?"}], tokenize=False,
                                           add_generation_prompt=True)
    assert prompt == "<｜begin▁of▁sentence｜><｜User｜>12+3=?<｜Assistant｜><think>\n"
    tokens = tokenizer.convert_ids_to_tokens(tokenizer("12")["input_ids"])
    assert tokens == [tiny.R1_BOS, "1", "2"]  # the BOS comes from the tokenizer, as R1-Distill's does
    assert tokenizer.convert_ids_to_tokens(tokenizer(prompt, add_special_tokens=False)["input_ids"])[-2:] == [
        "<think>", "\n"]
    assert tokenizer.eos_token == tiny.R1_EOS and tokenizer.pad_token_id != tokenizer.eos_token_id
    text = "a <think>\nb</think> \\boxed{1}"
    assert tokenizer.decode(tokenizer(text)["input_ids"], skip_special_tokens=True) == text
    model = AutoModelForCausalLM.from_pretrained(folder)
    assert model.config.bos_token_id == tokenizer.bos_token_id
    assert model.generation_config.eos_token_id == tokenizer.eos_token_id


def test_chatml_family_adds_nothing_on_encoding():
    tokenizer = tiny.build_tokenizer("chatml")
    assert tokenizer("12")["input_ids"] == tokenizer("12", add_special_tokens=False)["input_ids"]
    assert tokenizer.bos_token is None


def test_unknown_template_is_named():
    import pytest

    with pytest.raises(ValueError, match="'gemma'"):
        tiny.build_tokenizer("gemma")
