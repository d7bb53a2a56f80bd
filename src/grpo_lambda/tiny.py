"""The offline ``tiny`` model: a character-level tokenizer and a small Llama-architecture causal LM.

Both are built from a config and saved with ``save_pretrained``, then loaded back with the Auto
classes exactly as a hub model would be, so every later stage runs the same code at both scales.
The tokenizer is declared as a Llama tokenizer: declared as Qwen2, transformers 5 swaps in Qwen's
own tokenizer class on loading and spaces vanish.
"""

from __future__ import annotations

import string

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

PAD, EOS, UNK, IM_START = "<pad>", "<|im_end|>", "<unk>", "<|im_start|>"
SPECIAL_TOKENS = [PAD, EOS, UNK, IM_START]
CHARACTERS = sorted(set(string.printable) - set("\r\x0b\x0c"))

# ChatML, as Qwen models use it: the assistant turn ends with <|im_end|>, the eos token.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

DEFAULT_ARCHITECTURE = {
    "hidden_size": 128,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "intermediate_size": 512,
}


def build_tokenizer() -> PreTrainedTokenizerFast:
    """A fast tokenizer with one token per printable ASCII character, plus ChatML specials."""
    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS + CHARACTERS)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    core.decoder = decoders.Fuse()
    core.add_special_tokens(SPECIAL_TOKENS)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token=PAD, eos_token=EOS, unk_token=UNK,
        additional_special_tokens=[IM_START], model_max_length=1024,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_model(tokenizer: PreTrainedTokenizerFast, *, seed: int = 0, **architecture) -> LlamaForCausalLM:
    import torch

    unknown = set(architecture) - set(DEFAULT_ARCHITECTURE) - {"max_position_embeddings"}
    if unknown:
        raise ValueError(f"tiny architecture: unknown key(s) {sorted(unknown)}")
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        max_position_embeddings=architecture.pop("max_position_embeddings", 512),
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
        **{**DEFAULT_ARCHITECTURE, **architecture},
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


def build(output_dir: str, *, seed: int = 0, **architecture) -> None:
    """Build and save the tiny model and its tokenizer to ``output_dir`` (written atomically)."""
    from grpo_lambda.files import atomic_path

    tokenizer = build_tokenizer()
    model = build_model(tokenizer, seed=seed, **architecture)
    with atomic_path(output_dir) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
