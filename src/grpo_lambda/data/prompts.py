"""Prompt templates, chosen per model in the config, and the one tokenisation every path shares.

A model's ``prompt`` is one of four named templates or a template string of the config's own, and its
optional ``system_prompt`` fills the system turn. The named templates are those of the evaluation code the
paper used (sail-sg/understand-r1-zero, ``evaluate_model.py``), for training and evaluation alike:

- ``qwen_math`` (Qwen2.5-Math): a fixed ChatML string with the system prompt "Please reason step by
  step, and put your final answer within \\boxed{}.", whatever the tokenizer's own template says;
- ``r1d`` (DeepSeek-R1-Distill models): the tokenizer's own chat template with the user turn only,
  no system prompt, the assistant turn opened;
- ``r1`` (R1-Zero style base models): a fixed plain-text string; that code grades it by ``<answer>``
  tags, while this project grades the last ``\\boxed{}``;
- ``plain``: the bare problem as one user turn of the tokenizer's template (the tiny model).

A template string holds ``{problem}`` and, where the model has a system prompt, ``{system_prompt}``; the two
placeholders are filled once, and every other brace stays as written (``\\boxed{}``). A system prompt with
``plain`` or ``r1d`` is a system turn before the user's in the tokenizer's chat template (refused when that
template drops it); with ``qwen_math`` it replaces the fixed one; ``r1`` has none (write a template string).

One tokenisation: a prompt is rendered to text once (``prompt_text``) and turned into token ids
only by ``prompt_token_ids``, which is the call TRL's trainers make on a text prompt
(``tokenizer(text)``, special tokens added). Where a tokenizer adds a BOS token itself and its chat
template writes one too (R1-Distill), the rendered text drops the template's, so every path — TRL's
GRPO and SFT, the hf backend and vLLM (which is handed these ids, never the text) — sees the BOS
exactly once.
"""

from __future__ import annotations

import re

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

TEMPLATES = ("plain", "qwen_math", "r1d", "r1")
# The named templates a system prompt can go into (the others are fixed texts without a system turn).
TAKES_SYSTEM_PROMPT = ("plain", "qwen_math", "r1d")
_PLACEHOLDER = re.compile(r"\{(problem|system_prompt)\}")


def template_problem(template: str, system_prompt: str | None = None) -> str | None:
    """Why ``template`` (a model's ``prompt``) cannot render with ``system_prompt``, or None."""
    if template in TEMPLATES:
        if system_prompt is not None and template not in TAKES_SYSTEM_PROMPT:
            return (f"the named template {template!r} has no system turn for a system_prompt; write a template "
                    "string holding {system_prompt} instead")
        return None
    if "{problem}" not in template:
        return (f"{template!r} is neither a named template ({', '.join(TEMPLATES)}) nor a template string "
                "holding {problem}")
    if system_prompt is not None and "{system_prompt}" not in template:
        return "the template string has no {system_prompt} for the model's system_prompt"
    if system_prompt is None and "{system_prompt}" in template:
        return "the template string holds {system_prompt}, and the model has no system_prompt"
    return None


def fill(template: str, problem: str, system_prompt: str | None = None) -> str:
    """A template string with its placeholders filled in one pass (a problem that itself holds
    ``{system_prompt}`` stays as written)."""
    values = {"problem": problem, "system_prompt": system_prompt or ""}
    return _PLACEHOLDER.sub(lambda match: values[match.group(1)], template)


def render(tokenizer, template: str, problem: str, system_prompt: str | None = None) -> str:
    """The template (a named one or a template string) applied to ``problem``, before any BOS handling."""
    problem_found = template_problem(template, system_prompt)
    if problem_found:
        raise ValueError(f"prompt template: {problem_found}")
    if template == "qwen_math":
        return fill(QWEN_MATH_TEMPLATE.replace(QWEN_MATH_SYSTEM, "{system_prompt}"), problem,
                    QWEN_MATH_SYSTEM if system_prompt is None else system_prompt)
    if template == "r1":
        return fill(R1_TEMPLATE, problem)
    if template not in TEMPLATES:
        return fill(template, problem, system_prompt)
    if getattr(tokenizer, "chat_template", None):
        turns = [{"role": "user", "content": problem}]
        if system_prompt is not None:
            turns.insert(0, {"role": "system", "content": system_prompt})
        text = tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=True)
        if system_prompt is not None and system_prompt not in text:
            raise ValueError(f"the tokenizer's chat template drops the system turn, so system_prompt would be lost "
                             f"(prompt {template!r}); write a template string holding {{system_prompt}} instead")
        return text
    if template == "r1d":
        raise ValueError("prompt template 'r1d' needs the tokenizer's chat template, and this tokenizer has none")
    if system_prompt is not None:
        raise ValueError("prompt template 'plain' puts system_prompt in the tokenizer's chat template, and this "
                         "tokenizer has none; write a template string holding {system_prompt} instead")
    return problem + "\n\n"  # a base model without a chat template: the bare problem


def adds_bos(tokenizer) -> bool:
    """Whether ``tokenizer(text)`` puts a BOS token in front by itself (Llama-style tokenizers)."""
    bos = tokenizer.bos_token_id
    return bos is not None and tokenizer("a")["input_ids"][:1] == [bos]


def prompt_text(tokenizer, template: str, problem: str, *, system_prompt: str | None = None) -> str:
    """The prompt as text, ready for generation; it tokenises (``prompt_token_ids``) with one BOS."""
    text = render(tokenizer, template, problem, system_prompt)
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
