"""The offline ``tiny`` model: a character-level tokenizer and a small Llama-architecture causal LM.

Both are built from a config and saved with ``save_pretrained``, then loaded back with the Auto
classes exactly as a hub model would be, so every later stage runs the same code at both scales.
The tokenizer is declared as a Llama tokenizer: declared as Qwen2, transformers 5 swaps in Qwen's
own tokenizer class on loading and spaces vanish.

Two chat-template families (``tiny: {template: ...}``), so that the code paths of both paper model
families run offline:

- ``chatml`` (Qwen2.5-Math): ``<|im_start|>role\n...<|im_end|>``; nothing added on encoding.
- ``r1`` (DeepSeek-R1-Distill): the tokenizer itself prepends ``<｜begin▁of▁sentence｜>`` on every
  encoding (a post-processor, ``add_bos_token``), and the template renders the BOS, then
  ``<｜User｜>...<｜Assistant｜><think>\n`` with no system turn; the assistant turn ends with
  ``<｜end▁of▁sentence｜>``, the eos token.
"""

from __future__ import annotations

import string

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

PAD, EOS, UNK, IM_START = "<pad>", "<|im_end|>", "<unk>", "<|im_start|>"
SPECIAL_TOKENS = [PAD, EOS, UNK, IM_START]
CHARACTERS = sorted(set(string.printable) - set("\r\x0b\x0c"))

# DeepSeek-R1-Distill's specials, spelled as in its tokenizer (fullwidth bars, U+2581 spaces).
R1_BOS, R1_EOS = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"
R1_USER, R1_ASSISTANT = "<｜User｜>", "<｜Assistant｜>"
R1_SPECIAL_TOKENS = [PAD, R1_EOS, UNK, R1_BOS, R1_USER, R1_ASSISTANT]
R1_THINK_TOKENS = ["<think>", "</think>"]  # added, not special: decoding keeps them

# ChatML, as Qwen models use it: the assistant turn ends with <|im_end|>, the eos token.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# R1-Distill's template, reduced to what a conversation of user and assistant turns uses: the BOS in
# the text, no system turn, the assistant turn opened with "<think>\n".
R1_CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] == 'user' %}{{ '<｜User｜>' + message['content'] }}"
    "{% elif message['role'] == 'assistant' %}{{ '<｜Assistant｜>' + message['content'] + '<｜end▁of▁sentence｜>' }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<｜Assistant｜><think>\n' }}{% endif %}"
)

TEMPLATES = ("chatml", "r1")

DEFAULT_ARCHITECTURE = {
    "hidden_size": 128,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "intermediate_size": 512,
}


def build_tokenizer(template: str = "chatml") -> PreTrainedTokenizerFast:
    """A fast tokenizer with one token per printable ASCII character, plus the specials of the
    ``template`` family (``chatml`` or ``r1``, see the module docstring)."""
    if template not in TEMPLATES:
        raise ValueError(f"tiny template {template!r} is unknown; choose from {TEMPLATES}")
    specials = SPECIAL_TOKENS if template == "chatml" else R1_SPECIAL_TOKENS
    added = [] if template == "chatml" else R1_THINK_TOKENS
    vocab = {token: i for i, token in enumerate(specials + added + CHARACTERS)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    core.decoder = decoders.Fuse()
    core.add_special_tokens(specials)
    core.add_tokens([AddedToken(token, special=False, normalized=False) for token in added])
    if template == "chatml":
        tokenizer = PreTrainedTokenizerFast(
            tokenizer_object=core, pad_token=PAD, eos_token=EOS, unk_token=UNK,
            additional_special_tokens=[IM_START], model_max_length=1024,
        )
        tokenizer.chat_template = CHAT_TEMPLATE
        return tokenizer
    # As R1-Distill's tokenizer does: every encoding with special tokens starts with the BOS.
    core.post_processor = processors.TemplateProcessing(
        single=f"{R1_BOS} $A", pair=f"{R1_BOS} $A {R1_BOS} $B", special_tokens=[(R1_BOS, vocab[R1_BOS])])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token=R1_BOS, pad_token=PAD, eos_token=R1_EOS, unk_token=UNK,
        additional_special_tokens=[R1_USER, R1_ASSISTANT], model_max_length=1024,
    )
    tokenizer.add_bos_token = True
    tokenizer.chat_template = R1_CHAT_TEMPLATE
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
        bos_token_id=tokenizer.bos_token_id,
        **{**DEFAULT_ARCHITECTURE, **architecture},
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


def build(output_dir: str, *, seed: int = 0, template: str = "chatml", **architecture) -> None:
    """Build and save the tiny model and its tokenizer to ``output_dir`` (written atomically)."""
    from grpo_lambda.files import atomic_path

    tokenizer = build_tokenizer(template)
    model = build_model(tokenizer, seed=seed, **architecture)
    with atomic_path(output_dir) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
