"""Generation backends behind one function: ``hf`` (batched transformers ``generate``) and ``vllm``.

vLLM is imported only when asked for, so the package works on machines without it; asking for it
where it is missing fails at once with the command that installs it. Both backends are handed the
token ids of ``grpo_lambda.data.prompts.prompt_token_ids`` (what TRL computes for training), never
text of their own tokenising: one tokenisation, one BOS.
"""

from __future__ import annotations

from dataclasses import dataclass

from grpo_lambda.data.prompts import prompt_token_ids

BACKENDS = ("hf", "vllm")


@dataclass
class Completions:
    """``texts[i][j]`` is sample j for prompt i; ``lengths`` counts its generated tokens."""

    texts: list[list[str]]
    lengths: list[list[int]]


def generate(model_path: str, prompts: list[str], *, backend: str = "hf", n: int = 1, greedy: bool = True,
             temperature: float = 1.0, top_p: float = 1.0, max_new_tokens: int = 3000,
             max_model_len: int = 4096, batch_size: int = 64, seed: int = 0,
             description: str = "generate") -> Completions:
    """Complete every prompt ``n`` times: greedily (``n`` must be 1) or by sampling.

    The hf backend shows its progress per batch under ``description`` (grpo_lambda.progress); vLLM
    shows its own.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend {backend!r} is unknown; choose from {BACKENDS}")
    if greedy and n != 1:
        raise ValueError(f"greedy decoding gives one completion per prompt, not n={n}")
    if backend == "vllm":
        return _generate_vllm(model_path, prompts, n=n, greedy=greedy, temperature=temperature, top_p=top_p,
                              max_new_tokens=max_new_tokens, max_model_len=max_model_len, seed=seed)
    return _generate_hf(model_path, prompts, n=n, greedy=greedy, temperature=temperature, top_p=top_p,
                        max_new_tokens=max_new_tokens, batch_size=batch_size, seed=seed, description=description)


def _generate_hf(model_path, prompts, *, n, greedy, temperature, top_p, max_new_tokens, batch_size, seed,
                 description):
    import torch

    from grpo_lambda.models import device, load_model, load_tokenizer
    from grpo_lambda.progress import track

    tokenizer = load_tokenizer(model_path, padding_side="left")
    model = load_model(model_path).to(device())
    prompt_ids = [prompt_token_ids(tokenizer, prompt) for prompt in prompts]
    sampling = {} if greedy else {"temperature": temperature, "top_p": top_p}
    torch.manual_seed(seed)
    # Prompts of similar length batch together with little padding.
    order = sorted(range(len(prompts)), key=lambda i: len(prompt_ids[i]))
    texts: list[list[str]] = [[] for _ in prompts]
    lengths: list[list[int]] = [[] for _ in prompts]
    starts = range(0, len(order), batch_size)
    for start in track(starts, total=len(starts), description=description, unit="batch"):
        batch = order[start:start + batch_size]
        encoded = hf_batch(tokenizer, [prompt_ids[i] for i in batch]).to(model.device)
        with torch.inference_mode():
            output = model.generate(**encoded, max_new_tokens=max_new_tokens, num_return_sequences=n,
                                    do_sample=not greedy, pad_token_id=tokenizer.pad_token_id, **sampling)
        new_tokens = output[:, encoded["input_ids"].shape[1]:]
        for row, tokens in enumerate(new_tokens):
            prompt_index = batch[row // n]
            texts[prompt_index].append(tokenizer.decode(tokens, skip_special_tokens=True))
            lengths[prompt_index].append(_generated_length(tokens.tolist(), tokenizer))
    return Completions(texts, lengths)


def hf_batch(tokenizer, prompt_ids: list[list[int]]):
    """Prompt ids padded on the tokenizer's side (left for generation), with their attention mask."""
    return tokenizer.pad({"input_ids": prompt_ids}, padding=True, return_tensors="pt")


def vllm_prompts(tokenizer, prompts: list[str]) -> list[dict]:
    """vLLM's inputs: token-id prompts, so vLLM adds no special tokens of its own (no second BOS)."""
    return [{"prompt_token_ids": prompt_token_ids(tokenizer, prompt)} for prompt in prompts]


def _generated_length(tokens: list[int], tokenizer) -> int:
    """Tokens up to and including the first eos; padding after it does not count."""
    eos = tokenizer.eos_token_id
    return tokens.index(eos) + 1 if eos in tokens else len(tokens)


def _generate_vllm(model_path, prompts, *, n, greedy, temperature, top_p, max_new_tokens, max_model_len, seed):
    try:
        from vllm import LLM, SamplingParams
    except ImportError as error:
        raise RuntimeError(
            "evaluation.backend 'vllm' needs vLLM, which is not installed here. On a GPU machine: "
            "pip install -r envs/requirements-gpu.txt (see README, 'Paper scale'); "
            "or set evaluation.backend: hf") from error
    from grpo_lambda.models import load_tokenizer

    inputs = vllm_prompts(load_tokenizer(model_path), prompts)
    llm = LLM(model=model_path, max_model_len=max_model_len, seed=seed)
    params = SamplingParams(n=n, temperature=0.0 if greedy else temperature, top_p=1.0 if greedy else top_p,
                            max_tokens=max_new_tokens, seed=seed)
    outputs = llm.generate(inputs, params)
    return Completions([[c.text for c in out.outputs] for out in outputs],
                       [[len(c.token_ids) for c in out.outputs] for out in outputs])
