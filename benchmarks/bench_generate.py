"""How much of an RL step's sampling is the library's generation loop, and how much the model's forward.

    python benchmarks/bench_generate.py [--config config/config.yaml] [--rounds 3] [--threads 1]

On the study's tiny model (its ``build_tiny`` settings, random weights: the time does not depend on them)
one generation batch as an RL step samples it (``rl.per_device_train_batch_size`` completions of
``rl.max_completion_length`` tokens, every completion run to that length, temperature 1) is made two ways,
in alternated rounds:

- ``generate``: transformers' ``generate``, which TRL's trainer calls for its rollouts;
- ``bare``: the baseline, a loop of the model's forward over its KV cache with multinomial sampling and
  nothing else (no logits processors, stopping criteria or input preparation).

It prints each way's median and the ratio generate / bare: what a generation loop of our own could save at
most (the default's RL floor in benchmarks/README.md counts the library's loop in).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

PROMPT_TOKENS = 40  # about a carry-task prompt's length in the default's tokenizer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, DynamicCache

    from grpo_lambda import config as study
    from grpo_lambda import tiny

    torch.set_num_threads(args.threads)
    config = study.load(args.config)
    model_name = next(name for name, spec in config["models"].items() if spec["source"] == "tiny")
    rl = config["rl"]
    batch, new_tokens = rl["per_device_train_batch_size"], rl["max_completion_length"]
    folder = tempfile.mkdtemp(prefix="bench-generate-")
    tiny.build(folder, **study.stage_settings(config, "build_tiny", model=model_name)["tiny"])
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    vocabulary = model.config.vocab_size
    prompts = torch.randint(5, vocabulary, (batch, PROMPT_TOKENS), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(prompts)

    def generate():
        model.generate(input_ids=prompts, attention_mask=mask, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                       do_sample=True, temperature=1.0, top_k=0, top_p=1.0, pad_token_id=0)

    def bare():
        output = model(input_ids=prompts, attention_mask=mask, past_key_values=DynamicCache(), use_cache=True)
        seen = mask
        for _ in range(new_tokens):
            token = torch.multinomial(torch.softmax(output.logits[:, -1].float(), -1), 1)
            seen = torch.cat([seen, torch.ones_like(token)], 1)
            output = model(input_ids=token, attention_mask=seen, past_key_values=output.past_key_values, use_cache=True)

    times = {"generate": [], "bare": []}
    with torch.no_grad():
        generate(), bare()  # warm-up
        for _ in range(args.rounds):
            for name, way in (("generate", generate), ("bare", bare)):
                torch.manual_seed(0)
                start = time.perf_counter()
                way()
                times[name].append(time.perf_counter() - start)
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(f"{batch} completions x {new_tokens} tokens, {args.threads} thread(s), {args.rounds} rounds")
    for name, values in times.items():
        print(f"  {name:9s} median {medians[name]:.3f} s  (min {min(values):.3f}, max {max(values):.3f})")
    print(f"  ratio generate / bare: {medians['generate'] / medians['bare']:.3f}")


if __name__ == "__main__":
    main()
