"""Evaluate one checkpoint on the benchmarks: per-sample JSONL and a summary JSON for each.

Greedy decoding, one completion per problem, as the paper's evaluation protocol; optionally ``k``
sampled completions per problem for avg@k, pass@k and maj@k (``evaluation.greedy: false``: those
alone, config/protocols/avg32.yaml). All benchmarks of a checkpoint go through one
generation call, so the model (or the vLLM engine) is loaded once. Formats: ``docs/results-format.md``.
"""

from __future__ import annotations

import logging
import statistics
from pathlib import Path

from grpo_lambda import files, provenance
from grpo_lambda.data.prompts import prompt_text
from grpo_lambda.generation import generate
from grpo_lambda.models import load_tokenizer
from grpo_lambda.grading import grade_many_details

log = logging.getLogger(__name__)


def _graded_samples(rows, completions, mode, grader_timeout):
    flat = [(row, j, text, length)
            for row, texts, lengths in zip(rows, completions.texts, completions.lengths)
            for j, (text, length) in enumerate(zip(texts, lengths))]
    details = grade_many_details([text for _, _, text, _ in flat], [row["answer"] for row, *_ in flat],
                                 timeout=grader_timeout)
    return [{"id": row["id"], "mode": mode, "sample": j, "gold": row["answer"], "completion": text,
             "extracted": detail["extracted"], "formatted": detail["formatted"], "correct": detail["correct"],
             "length": length}
            for (row, j, text, length), detail in zip(flat, details)]


def _summary(greedy: list[dict], sampled: list[dict], k: int, n: int) -> dict:
    """The greedy figures (absent in a sampled-only evaluation) and, with k samples per problem, avg@k
    (mean_accuracy), the unbiased pass@j for j = 1, 2, 4, ... below k and pass@k, and maj@k."""
    summary: dict = {"n": n}
    if greedy:
        summary.update(accuracy=statistics.fmean(s["correct"] for s in greedy),
                       formatted=statistics.fmean(s["formatted"] for s in greedy),
                       mean_length=statistics.fmean(s["length"] for s in greedy))
    if k:
        from grpo_lambda.sampling import majority_correct, pass_at_k

        by_problem: dict[str, list[dict]] = {}
        for sample in sampled:
            by_problem.setdefault(sample["id"], []).append(sample)
        right = [sum(bool(s["correct"]) for s in samples) for samples in by_problem.values()]
        levels = [2 ** power for power in range(k.bit_length()) if 2 ** power < k] + [k]
        summary["sampled"] = {
            "k": k, "mean_accuracy": statistics.fmean(s["correct"] for s in sampled),
            "pass_at_k": statistics.fmean(pass_at_k(k, c, k) for c in right),
            "pass_at": {str(j): statistics.fmean(pass_at_k(k, c, j) for c in right) for j in levels},
            "maj_at_k": statistics.fmean(majority_correct([s.get("extracted") for s in samples],
                                                          [s["correct"] for s in samples])
                                         for samples in by_problem.values())}
    return summary


def run(settings: dict, *, model_path: str, benchmark_paths: list[str], out_dir: str,
        seed: int | None = None, step: str = "final") -> dict[str, dict]:
    """Generate, grade and write ``<out_dir>/<benchmark>.jsonl|json``; returns the summaries by benchmark."""
    options = settings["evaluation"]
    # A bad line is skipped and named in the log; a repeated id with another answer is an error.
    benchmarks = {Path(path).stem: files.read_jsonl(path, fields=files.PROBLEM_FIELDS, unique_ids=True)
                  for path in benchmark_paths}
    for name, rows in benchmarks.items():
        if not rows:
            raise ValueError(f"benchmark {name}: the file has no problems")
    rows = [row for name in benchmarks for row in benchmarks[name]]
    tokenizer = load_tokenizer(model_path)
    prompts = [prompt_text(tokenizer, settings["model"]["prompt"], row["problem"],
                           system_prompt=settings["model"].get("system_prompt")) for row in rows]
    generation = {key: options[key] for key in ("backend", "max_new_tokens", "max_model_len", "batch_size", "dtype")}
    what = f"evaluate {model_path}: {len(rows)} problems of {', '.join(benchmarks)}"
    k = options["samples"]
    if not options.get("greedy", True) and not k:
        raise ValueError("evaluation.greedy is false and evaluation.samples is 0: nothing to evaluate")
    greedy, sampled, too_long = [], [], set()
    if options.get("greedy", True):
        greedy_completions = generate(model_path, prompts, greedy=True, seed=seed or 0,
                                      description=f"{what}, greedy", **generation)
        greedy = _graded_samples(rows, greedy_completions, "greedy", options["grader_timeout"])
        too_long = set(greedy_completions.too_long)
    if k:
        completions = generate(model_path, prompts, greedy=False, n=k, temperature=options["temperature"],
                               top_p=options["top_p"], seed=seed or 0, description=f"{what}, {k} samples each",
                               **generation)
        sampled = _graded_samples(rows, completions, "sampled", options["grader_timeout"])
        too_long |= set(completions.too_long)
    made_by = provenance.record(vllm=options["backend"] == "vllm")
    summaries, start = {}, 0
    for name, bench_rows in benchmarks.items():
        end = start + len(bench_rows)
        own_greedy, own_sampled = greedy[start:end], sampled[start * k:end * k]  # samples follow row order
        summary = {"model": settings["model"]["name"], "dataset": settings["dataset"],
                   "variant": settings["variant"], "seed": seed, "step": step, "benchmark": name,
                   **_summary(own_greedy, own_sampled, k, len(bench_rows)),
                   # A prompt that fills max_model_len gets no completion on either backend and counts as wrong.
                   "prompts_too_long": sum(index in too_long for index in range(start, end)),
                   "checkpoint": model_path, "provenance": made_by,
                   "generation": {**generation, "prompt": settings["model"]["prompt"],
                                  "temperature": options["temperature"], "top_p": options["top_p"]}}
        files.write_jsonl(Path(out_dir) / f"{name}.jsonl", own_greedy + own_sampled)
        files.write_json(Path(out_dir) / f"{name}.json", summary)
        summaries[name] = summary
        start = end
        shown = summary["accuracy"] if greedy else summary["sampled"]["mean_accuracy"]
        log.info("%s on %s: %s %.3f (%d problems)", model_path, name, "accuracy" if greedy else f"avg@{k}", shown,
                 len(bench_rows))
    return summaries
