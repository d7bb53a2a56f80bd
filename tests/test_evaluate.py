"""The evaluate stage: one generation pass over several benchmarks, graded, written per benchmark."""

import json

import torch

from grpo_lambda import config as study
from grpo_lambda import evaluate, files
from grpo_lambda.data import arith


def test_each_benchmark_gets_its_own_samples_and_a_summary_that_adds_up(tmp_path, tiny_model_dir):
    paths = []
    for level, n in ((1, 3), (2, 4)):
        path = tmp_path / f"suite-{level}.jsonl"
        files.write_jsonl(path, arith.generate(n, seed=level, levels=[level], held_out=True, prefix=f"s{level}"))
        paths.append(str(path))
    settings = {"model": {"name": "tiny", "prompt": "plain"}, "dataset": "arith", "variant": "grpo",
                "evaluation": study.validate({"models": {"m": {"source": "tiny", "prompt": "plain"}},
                                              "datasets": {"d": {"source": "synthetic", "n": 1, "seed": 0}},
                                              "benchmarks": {"b": {"source": "synthetic", "n": 1, "seed": 0, "level": 1}},
                                              "variants": {"grpo": {"objective": "grpo"}}, "seeds": [0],
                                              "evaluation": {"max_new_tokens": 8, "samples": 3}})["evaluation"]}
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
