"""The evaluate stage: one generation pass over several benchmarks, graded, written per benchmark."""

import json

import torch

from grpo_lambda import config as study
from grpo_lambda import evaluate, files
from grpo_lambda.data import arith


def _settings(*, samples: int) -> dict:
    """An evaluate stage's settings: the tiny model's plain prompt, 8 new tokens, ``samples`` per problem."""
    evaluation = study.validate({"models": {"m": {"source": "tiny", "prompt": "plain"}},
                                 "datasets": {"d": {"source": "synthetic", "n": 1, "seed": 0}},
                                 "benchmarks": {"b": {"source": "synthetic", "n": 1, "seed": 0, "level": 1}},
                                 "variants": {"grpo": {"objective": "grpo"}}, "seeds": [0],
                                 "evaluation": {"max_new_tokens": 8, "samples": samples}})["evaluation"]
    return {"model": {"name": "tiny", "prompt": "plain"}, "dataset": "arith", "variant": "grpo",
            "evaluation": evaluation}


def test_each_benchmark_gets_its_own_samples_and_a_summary_that_adds_up(tmp_path, tiny_model_dir):
    paths = []
    for level, n in ((1, 3), (2, 4)):
        path = tmp_path / f"suite-{level}.jsonl"
        files.write_jsonl(path, arith.generate(n, seed=level, levels=[level], held_out=True, prefix=f"s{level}"))
        paths.append(str(path))
    settings = _settings(samples=3)
    summaries = evaluate.run(settings, model_path=str(tiny_model_dir), benchmark_paths=paths,
                             out_dir=str(tmp_path / "eval"), seed=0, step="final")
    assert set(summaries) == {"suite-1", "suite-2"}
    for path, n in zip(paths, (3, 4)):
        name = path.rsplit("/", 1)[1][:-6]
        samples = files.read_jsonl(tmp_path / "eval" / f"{name}.jsonl")
        own_ids = {row["id"] for row in files.read_jsonl(path)}
        assert {s["id"] for s in samples} == own_ids
        greedy = [s for s in samples if s["mode"] == "greedy"]
        drawn = [s for s in samples if s["mode"] == "sampled"]
        assert len(greedy) == n and len(drawn) == 3 * n
        assert all(0 < s["length"] <= 8 for s in samples)
        summary = json.loads((tmp_path / "eval" / f"{name}.json").read_text())
        assert summary == summaries[name]
        assert summary["n"] == n and summary["benchmark"] == name
        assert summary["accuracy"] == sum(s["correct"] for s in greedy) / n
        assert summary["sampled"]["k"] == 3
        assert summary["sampled"]["pass_at_k"] >= summary["sampled"]["mean_accuracy"]
        assert summary["provenance"]["torch"] == torch.__version__ and summary["provenance"]["vllm"] is None


# ---- known completions, some right and some wrong: the summary's numbers worked by hand -----------

# id -> (problem, gold answer, greedy completion, the 4 sampled completions)
PLANNED = {
    "a1": ("alpha one: 2+3", "5", "so \\boxed{5}", ["\\boxed{5}"] * 4),
    "a2": ("alpha two: 3+4", "7", "so \\boxed{8}", ["\\boxed{7}", "\\boxed{8}", "\\boxed{8}", "\\boxed{8}"]),
    "b1": ("beta one: 1+2", "3", "\\boxed{3}", ["\\boxed{3}", "\\boxed{100}", "\\boxed{3}", "\\boxed{101}"]),
    "b2": ("beta two: 3*4", "12", "it is \\boxed{12}", ["no answer"] * 4),
    "b3": ("beta three: 4+5", "9", "nine", ["\\boxed{1}", "\\boxed{9}", "\\boxed{9}", "\\boxed{9}"]),
}
GREEDY_LENGTHS = {"a1": 10, "a2": 20, "b1": 30, "b2": 40, "b3": 50}


def test_summaries_of_known_completions_match_accuracy_pass_and_maj_worked_by_hand(tmp_path, tiny_model_dir,
                                                                                    monkeypatch):
    """generate is replaced by one that returns the planned completions of each prompt (found by its
    problem text), so every figure of each benchmark's summary is known in advance, and a completion
    attached to another problem or benchmark changes them."""
    import pytest

    from grpo_lambda.generation import Completions

    calls = []

    def planned_generate(model_path, prompts, *, greedy, n=1, **kwargs):
        calls.append(("greedy" if greedy else "sampled", n))
        ids = [next(key for key, (problem, *_) in PLANNED.items() if problem in prompt) for prompt in prompts]
        if greedy:
            return Completions([[PLANNED[key][2]] for key in ids], [[GREEDY_LENGTHS[key]] for key in ids])
        assert n == 4
        return Completions([list(PLANNED[key][3]) for key in ids], [[7, 8, 9, 10] for _ in ids])

    monkeypatch.setattr(evaluate, "generate", planned_generate)
    paths = []
    for name, keys in (("alpha", ["a1", "a2"]), ("beta", ["b1", "b2", "b3"])):
        paths.append(str(tmp_path / f"{name}.jsonl"))
        files.write_jsonl(paths[-1], [{"id": key, "problem": PLANNED[key][0], "answer": PLANNED[key][1]}
                                      for key in keys])
    settings = _settings(samples=4)
    summaries = evaluate.run(settings, model_path=str(tiny_model_dir), benchmark_paths=paths,
                             out_dir=str(tmp_path / "eval"), seed=0, step="final")
    assert calls == [("greedy", 1), ("sampled", 4)]  # one pass of each over both benchmarks

    alpha, beta = summaries["alpha"], summaries["beta"]
    # greedy: alpha a1 right, a2 wrong (boxed); beta b1, b2 right, b3 wrong and unboxed
    assert (alpha["n"], alpha["accuracy"], alpha["formatted"], alpha["mean_length"]) == (2, 0.5, 1.0, 15)
    assert (beta["n"], beta["accuracy"], beta["formatted"], beta["mean_length"]) == (
        3, pytest.approx(2 / 3), pytest.approx(2 / 3), 40)
    # sampled, right of 4: alpha 4 and 1; beta 2, 0 and 3. pass@j = 1 - C(4-c, j) / C(4, j).
    assert alpha["sampled"] == {"k": 4, "mean_accuracy": 5 / 8, "pass_at_k": 1.0,
                                "pass_at": {"1": 5 / 8, "2": pytest.approx((1 + (1 - 3 / 6)) / 2), "4": 1.0},
                                "maj_at_k": 0.5}  # a2's majority answer is 8: wrong
    assert beta["sampled"] == {"k": 4, "mean_accuracy": pytest.approx(5 / 12), "pass_at_k": pytest.approx(2 / 3),
                               "pass_at": {"1": pytest.approx((2 / 4 + 0 + 3 / 4) / 3),
                                           "2": pytest.approx(((1 - 1 / 6) + 0 + 1) / 3),
                                           "4": pytest.approx(2 / 3)},
                               "maj_at_k": pytest.approx(2 / 3)}  # b1: 3 twice beats 100 and 101; b2: no votes
    # Each benchmark's file holds its own problems' completions, sample by sample, graded.
    for name, keys in (("alpha", ["a1", "a2"]), ("beta", ["b1", "b2", "b3"])):
        samples = files.read_jsonl(tmp_path / "eval" / f"{name}.jsonl")
        assert {(s["mode"], s["id"], s["sample"]): s["completion"] for s in samples} == {
            **{("greedy", key, 0): PLANNED[key][2] for key in keys},
            **{("sampled", key, j): text for key in keys for j, text in enumerate(PLANNED[key][3])}}
        assert all(s["gold"] == PLANNED[s["id"]][1] for s in samples)
        assert all(s["correct"] == (s["extracted"] == s["gold"]) for s in samples)
        assert [s["length"] for s in samples if s["mode"] == "greedy"] == [GREEDY_LENGTHS[key] for key in keys]
