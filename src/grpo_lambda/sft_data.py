"""The SFT set by rejection-sampled self-distillation: this project's reading of the paper's SFT stage.

The paper fine-tunes every model "to reason within a specific format" before RL but names no SFT
data, and the training sets carry final answers only. So the base model samples ``samples``
solutions per training problem under the model's prompt template (the format RL and evaluation
use), the grader (``grpo_lambda.grading``) keeps the ones whose last ``\\boxed{}`` is correct, at most
``keep_per_problem`` per problem, and those become the SFT set: rows ``id``, ``problem``, ``answer``,
``solution`` (the sampled completion), ``sample``. A solution longer than the RL completion length
(``max_solution_tokens``, in generated tokens, end-of-sequence included) is left out and counted.
Counts go to a JSON file beside the set. An empty set stops the stage with the counts in the
message: SFT on nothing would silently be no SFT.

``sft.format: think_answer`` fine-tunes on each solution written in open-r1's tags
(`think_answer`); the length limit then counts the tagged solution, which is what RL must generate.
"""

from __future__ import annotations

import logging
from pathlib import Path

from grpo_lambda import files, provenance
from grpo_lambda.data.prompts import prompt_text
from grpo_lambda.generation import generate
from grpo_lambda.models import load_tokenizer
from grpo_lambda.grading import grade_many_details
from grpo_lambda.grading.extract import boxed_span

log = logging.getLogger(__name__)


def think_answer(solution: str) -> str:
    """A solution in open-r1's tags (sft.format think_answer): its reasoning (the text without its last
    \\boxed{...}) in <think>, the \\boxed{...} alone in <answer>, so that open-r1's format reward
    (^<think>\\n.*?\\n</think>\\n<answer>\\n.*?\\n</answer>$) and this project's grader both accept it.
    ValueError when the solution has no closed \\boxed{}."""
    span = boxed_span(solution)
    if span is None:
        raise ValueError(f"a solution without a closed \\boxed{{}} answer cannot be put in <answer>: {solution[:80]!r}")
    begin, end = span
    reasoning = (solution[:begin].rstrip() + " " + solution[end:].lstrip()).strip()
    return f"<think>\n{reasoning}\n</think>\n<answer>\n{solution[begin:end]}\n</answer>"


def select(rows: list[dict], texts: list[list[str]], correct: list[list[bool]], *, keep_per_problem: int,
           lengths: list[list[int]] | None = None, max_tokens: int | None = None) -> tuple[list[dict], dict]:
    """The kept SFT rows (correct samples, distinct per problem, at most ``keep_per_problem``, none longer
    than ``max_tokens`` generated tokens) and counts; ``too_long`` counts correct samples the limit dropped."""
    kept, solved, too_long = [], 0, 0
    lengths = lengths or [[0] * len(samples) for samples in texts]
    for row, samples, verdicts, sizes in zip(rows, texts, correct, lengths, strict=True):
        seen: set[str] = set()
        for index, (text, ok, size) in enumerate(zip(samples, verdicts, sizes, strict=True)):
            if ok and max_tokens is not None and size > max_tokens:
                too_long += 1
            elif ok and text not in seen and len(seen) < keep_per_problem:
                seen.add(text)
                kept.append({"id": f"{row['id']}-s{index}", "problem": row["problem"], "answer": row["answer"],
                             "solution": text, "sample": index})
        solved += bool(seen)
    counts = {"problems": len(rows), "samples": sum(len(samples) for samples in texts),
              "correct": sum(sum(verdicts) for verdicts in correct), "too_long": too_long,
              "max_tokens": max_tokens, "kept": len(kept), "problems_kept": solved}
    return kept, counts


def run(settings: dict, *, base: str, data_path: str, out: str, counts_path: str | None = None) -> dict:
    """Sample, grade and write the SFT set to ``out`` and its counts to ``counts_path`` (default: .json beside)."""
    options = settings["sft"]["self_distill"]
    rows = files.read_jsonl(data_path)
    if options.get("max_problems"):
        rows = rows[:options["max_problems"]]
    if not rows:
        raise ValueError(f"{data_path}: the training set has no problems to sample solutions for")
    tokenizer = load_tokenizer(base)
    prompts = [prompt_text(tokenizer, settings["model"]["prompt"], row["problem"],
                           system_prompt=settings["model"].get("system_prompt")) for row in rows]
    completions = generate(base, prompts, backend=options["backend"], n=options["samples"], greedy=False,
                           temperature=options["temperature"], top_p=options["top_p"],
                           max_new_tokens=options["max_new_tokens"], max_model_len=options["max_model_len"],
                           batch_size=options["batch_size"], seed=options["seed"], dtype=options["dtype"])
    flat = [(text, row["answer"]) for row, texts in zip(rows, completions.texts) for text in texts]
    details = grade_many_details([text for text, _ in flat], [gold for _, gold in flat],
                                 timeout=options["grader_timeout"])
    verdicts, start = [], 0
    for texts in completions.texts:
        verdicts.append([detail["correct"] for detail in details[start:start + len(texts)]])
        start += len(texts)
    # RL truncates a completion at its max_completion_length, where a longer solution earns reward 0:
    # SFT must not teach lengths RL cannot use, in the format SFT teaches.
    lengths = completions.lengths
    if settings["sft"].get("format", "boxed") == "think_answer":
        lengths = [[_tokens(tokenizer, think_answer(text)) if ok else size for text, ok, size in zip(*sample)]
                   for sample in zip(completions.texts, verdicts, lengths)]
    kept, counts = select(rows, completions.texts, verdicts, keep_per_problem=options["keep_per_problem"],
                          lengths=lengths, max_tokens=settings.get("max_solution_tokens"))
    counts = {"model": settings["model"]["name"], "dataset": settings["dataset"], "base": base, **counts,
              "prompts_too_long": len(completions.too_long),
              "sampling": {key: options[key] for key in sorted(options)},
              "provenance": provenance.record(vllm=options["backend"] == "vllm")}
    counts_path = counts_path or str(Path(out).with_suffix(".json"))
    files.write_json(counts_path, counts)
    if not kept:
        raise ValueError(
            f"self-distillation kept no solutions for {settings['model']['name']} on {settings['dataset']}: "
            f"{counts['problems']} problems, {counts['samples']} samples, {counts['correct']} correct; "
            "the base model never answered right in the graded \\boxed{} format. Raise sft.self_distill.samples "
            "or max_new_tokens, or set sft.data: solutions with a dataset of worked solutions")
    files.write_jsonl(out, kept)
    log.info("SFT set %s: %d solutions kept for %d of %d problems (%d of %d samples correct)", out,
             counts["kept"], counts["problems_kept"], counts["problems"], counts["correct"], counts["samples"])
    return counts


def _tokens(tokenizer, text: str) -> int:
    """Generated tokens of a completion: its text and the end-of-sequence token."""
    return len(tokenizer(text, add_special_tokens=False)["input_ids"]) + 1
