"""Prompt templates, chosen per model in the config, and the one tokenisation every path shares.

The templates are those of the evaluation code the paper used (sail-sg/understand-r1-zero,
``evaluate_model.py``), for training and evaluation alike:

- ``qwen_math`` (Qwen2.5-Math): a fixed ChatML string with the system prompt "Please reason step by
  step, and put your final answer within \\boxed{}.", whatever the tokenizer's own template says;
- ``r1d`` (DeepSeek-R1-Distill models): the tokenizer's own chat template with the user turn only,
  no system prompt, the assistant turn opened;
- ``r1`` (R1-Zero style base models): a fixed plain-text string; that code grades it by ``<answer>``
  tags, while this project grades the last ``\\boxed{}``;
- ``plain``: the bare problem as one user turn of the tokenizer's template (the tiny model);
- ``open_r1``: not the evaluation code's: open-r1's GRPO system prompt (its recipes' ``system_prompt``,
  asking for ``<think>`` ... ``</think>`` ``<answer>`` ... ``</answer>``) and the problem as the user turn, under
  the tokenizer's chat template, for a study whose SFT teaches that format (``sft.format: think_answer``).

One tokenisation: a prompt is rendered to text once (``prompt_text``) and turned into token ids
only by ``prompt_token_ids``, which is the call TRL's trainers make on a text prompt
(``tokenizer(text)``, special tokens added). Where a tokenizer adds a BOS token itself and its chat
template writes one too (R1-Distill), the rendered text drops the template's, so every path — TRL's
GRPO and SFT, the hf backend and vLLM (which is handed these ids, never the text) — sees the BOS
exactly once.
"""

from __future__ import annotations

QWEN_MATH_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."
QWEN_MATH_TEMPLATE = ("<|im_start|>system\n" + QWEN_MATH_SYSTEM + "<|im_end|>\n<|im_start|>user\n{problem}"
                      "<|im_end|>\n<|im_start|>assistant\n")
R1_TEMPLATE = (
    "A conversation between User and Assistant. The User asks a question, and the Assistant solves it. "
    "The Assistant first thinks about the reasoning process in the mind and then provides the User with "
    "the answer. The reasoning process is enclosed within <think> </think> and answer is enclosed within "
    "<answer> </answer> tags, respectively, i.e., <think> reasoning process here </think> "
    "<answer> answer here </answer>.\nUser: {problem}\nAssistant: <think>"
)

# open-r1's recipes (recipes/*/grpo/config_demo.yaml, system_prompt), word for word: the string is a fact.
OPEN_R1_SYSTEM = (
    "You are a helpful AI Assistant that provides well-reasoned and detailed responses. You first think about "
    "the reasoning process as an internal monologue and then provide the user with the answer. Respond in the "
    "following format: <think>\n...\n</think>\n<answer>\n...\n</answer>"
)

TEMPLATES = ("plain", "qwen_math", "r1d", "r1", "open_r1")


def render(tokenizer, template: str, problem: str) -> str:
    """The template applied to ``problem``, before any BOS handling."""
    if template == "qwen_math":
        return QWEN_MATH_TEMPLATE.replace("{problem}", problem)
    if template == "r1":
        return R1_TEMPLATE.replace("{problem}", problem)
    if template not in ("plain", "r1d", "open_r1"):
        raise ValueError(f"prompt template {template!r} is unknown; choose from {TEMPLATES}")
    system = [{"role": "system", "content": OPEN_R1_SYSTEM}] if template == "open_r1" else []
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template([*system, {"role": "user", "content": problem}], tokenize=False,
                                             add_generation_prompt=True)
    if template != "plain":
        raise ValueError(f"prompt template {template!r} needs the tokenizer's chat template, and this tokenizer has none")
    return problem + "\n\n"  # a base model without a chat template: the bare problem


def adds_bos(tokenizer) -> bool:
    """Whether ``tokenizer(text)`` puts a BOS token in front by itself (Llama-style tokenizers)."""
    bos = tokenizer.bos_token_id
    return bos is not None and tokenizer("a")["input_ids"][:1] == [bos]


def prompt_text(tokenizer, template: str, problem: str) -> str:
    """The prompt as text, ready for generation; it tokenises (``prompt_token_ids``) with one BOS."""
    text = render(tokenizer, template, problem)
    bos_text = tokenizer.bos_token
    if bos_text and text.startswith(bos_text) and adds_bos(tokenizer):
        text = text[len(bos_text):]
    return text


def prompt_token_ids(tokenizer, text: str) -> list[int]:
    """The token ids of a rendered prompt: TRL's own call on a text prompt, shared by every backend."""
    ids = tokenizer(text)["input_ids"]
    bos = tokenizer.bos_token_id
    if bos is not None and ids[:2] == [bos, bos]:
        raise ValueError(f"the prompt starts with two BOS tokens; render it with prompt_text: {text[:80]!r}")
    return ids
