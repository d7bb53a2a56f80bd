"""Prompt templates: how a problem is put to a model, chosen per model in the config.

Templates produce chat messages; the tokenizer's own chat template turns them into text, so a hub
model is prompted exactly as it was trained. ``qwen_math`` and ``r1`` follow the evaluation code the
paper used (sail-sg/understand-r1-zero); ``plain`` puts the bare problem to a model that was
fine-tuned on it (the tiny model).
"""

from __future__ import annotations

QWEN_MATH_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."
R1_SYSTEM = (
    "A conversation between User and Assistant. The User asks a question, and the Assistant solves it. "
    "The Assistant first thinks about the reasoning process in the mind and then provides the User "
    "with the answer. The reasoning process is enclosed within <think> </think> and answer is enclosed "
    "within <answer> </answer> tags, respectively, i.e., <think> reasoning process here </think> "
    "<answer> answer here </answer>."
)

TEMPLATES = ("plain", "qwen_math", "r1")


def prompt_messages(template: str, problem: str) -> list[dict]:
    """The chat messages that put ``problem`` to the model under ``template``."""
    if template == "plain":
        return [{"role": "user", "content": problem}]
    if template == "qwen_math":
        return [{"role": "system", "content": QWEN_MATH_SYSTEM}, {"role": "user", "content": problem}]
    if template == "r1":
        return [{"role": "system", "content": R1_SYSTEM}, {"role": "user", "content": problem}]
    raise ValueError(f"prompt template {template!r} is unknown; choose from {TEMPLATES}")


def prompt_text(tokenizer, template: str, problem: str) -> str:
    """The prompt as text, ready for generation (the assistant turn opened)."""
    messages = prompt_messages(template, problem)
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    # A base model without a chat template: the messages as plain paragraphs.
    return "\n\n".join(message["content"] for message in messages) + "\n\n"
