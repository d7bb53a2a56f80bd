"""Evaluate one checkpoint on one benchmark: per-sample JSONL and a summary JSON.

Greedy decoding, one completion per problem, as the paper's evaluation protocol; optionally ``k``
further sampled completions per problem for pass@k. Formats: ``docs/results-format.md``.
"""

from __future__ import annotations

import logging
import statistics

from grpo_lambda import files
from grpo_lambda.data.prompts import prompt_text
from grpo_lambda.generation import generate
from grpo_lambda.models import load_tokenizer
from grpo_lambda.rewards import grade_many_details

log = logging.getLogger(__name__)


def _samples(rows, completions, mode, grader_timeout):
    flat = [(row, j, text, length)
            for row, texts, lengths in zip(rows, completions.texts, completions.lengths)
            for j, (text, length) in enumerate(zip(texts, lengths))]
    details = grade_many_details([text for _, _, text, _ in flat], [row["answer"] for row, *_ in flat],
                                 timeout=grader_timeout)
    return [{"id": row["id"], "mode": mode, "sample": j, "gold": row["answer"], "completion": text,
             "extracted": detail["extracted"], "formatted": detail["formatted"], "correct": detail["correct"],
             "length": length}
            for (row, j, text, length), detail in zip(flat, details)]


def run(settings: dict, *, model_path: str, benchmark_path: str, out_jsonl: str, out_json: str,
        seed: int | None = None, step: str = "final") -> dict:
    """Generate, grade and write; returns the summary."""
    options = settings["evaluation"]
    rows = files.read_jsonl(benchmark_path)
    if not rows:
        raise ValueError(f"{benchmark_path}: the benchmark has no problems")
    tokenizer = load_tokenizer(model_path)
    prompts = [prompt_text(tokenizer, settings["model"]["prompt"], row["problem"]) for row in rows]
    generation = {key: options[key] for key in ("backend", "max_new_tokens", "max_model_len", "batch_size")}
    greedy = generate(model_path, prompts, greedy=True, seed=seed or 0, **generation)
    samples = _samples(rows, greedy, "greedy", options["grader_timeout"])
    summary = {
        "model": settings["model"]["name"], "dataset": settings["dataset"], "variant": settings["variant"],
        "seed": seed, "step": step, "benchmark": settings["benchmark"], "n": len(rows),
        "accuracy": statistics.fmean(s["correct"] for s in samples),
        "formatted": statistics.fmean(s["formatted"] for s in samples),
        "mean_length": statistics.fmean(s["length"] for s in samples),
        "checkpoint": model_path,
        "generation": {**generation, "prompt": settings["model"]["prompt"]},
    }
    k = options["samples"]
    if k:
        sampled = generate(model_path, prompts, greedy=False, n=k, temperature=options["temperature"],
                           top_p=options["top_p"], seed=seed or 0, **generation)
        drawn = _samples(rows, sampled, "sampled", options["grader_timeout"])
        samples += drawn
        solved = {}
        for sample in drawn:
            solved[sample["id"]] = solved.get(sample["id"], False) or sample["correct"]
        summary["sampled"] = {"k": k, "temperature": options["temperature"],
                              "mean_accuracy": statistics.fmean(s["correct"] for s in drawn),
                              "pass_at_k": statistics.fmean(solved.values())}
    files.write_jsonl(out_jsonl, samples)
    files.write_json(out_json, summary)
    log.info("%s on %s: accuracy %.3f (%d problems)", model_path, settings["benchmark"], summary["accuracy"], len(rows))
    return summary
