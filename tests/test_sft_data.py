"""The self-distilled SFT set: selection, counts, the empty-set error, and its place in the config and DAG."""

import json

import pytest
import yaml

from conftest import ROOT, paper_plan, run_main
from grpo_lambda import config as study
from grpo_lambda import files, sft_data
from grpo_lambda.generation import Completions

ROWS = [{"id": "p0", "problem": "1+2=?", "answer": "3"}, {"id": "p1", "problem": "2+2=?", "answer": "4"},
        {"id": "p2", "problem": "5+5=?", "answer": "10"}]


def _settings(**self_distill):
    options = {**study.SELF_DISTILL_DEFAULTS, "samples": 4, **self_distill}
    return {"model": {"name": "m", "prompt": "plain"}, "dataset": "d", "sft": {"self_distill": options}}


def test_select_keeps_distinct_correct_samples_up_to_the_cap():
    texts = [["a", "a", "b", "c"], ["x", "y", "z", "w"], ["q", "r", "s", "t"]]
    correct = [[True, True, True, True], [False, True, False, False], [False] * 4]
    kept, counts = sft_data.select(ROWS, texts, correct, keep_per_problem=2)
    assert [(row["id"], row["solution"]) for row in kept] == [("p0-s0", "a"), ("p0-s2", "b"), ("p1-s1", "y")]
    assert counts == {"problems": 3, "samples": 12, "correct": 5, "too_long": 0, "max_tokens": None, "kept": 3,
                      "problems_kept": 2}
    assert all(row["answer"] == {"p0": "3", "p1": "4"}[row["id"][:2]] for row in kept)


def test_select_leaves_out_correct_samples_longer_than_the_rl_completion_length():
    texts = [["a", "bb", "c", "d"], ["x", "y", "z", "w"], ["q", "r", "s", "t"]]
    correct = [[True, True, True, False], [False, True, False, False], [False] * 4]
    lengths = [[40, 41, 12, 5], [50, 60, 1, 1], [1, 1, 1, 1]]
    kept, counts = sft_data.select(ROWS, texts, correct, keep_per_problem=2, lengths=lengths, max_tokens=40)
    assert [(row["id"], row["solution"]) for row in kept] == [("p0-s0", "a"), ("p0-s2", "c")]
    assert (counts["too_long"], counts["max_tokens"], counts["kept"], counts["problems_kept"]) == (2, 40, 2, 1)


def test_prepare_sft_takes_the_models_rl_completion_length():
    from trl import GRPOConfig

    config = study.load(str(ROOT / "config/paper.yaml"))
    assert study.stage_settings(config, "prepare_sft", model="r1-qwen-7b", dataset="gsm8k")["max_solution_tokens"] == 768
    assert study.stage_settings(config, "prepare_sft", model="qwen-math-1.5b", dataset="gsm8k")[
        "max_solution_tokens"] == 256
    del config["rl"]["max_completion_length"]
    assert study.stage_settings(config, "prepare_sft", model="qwen-math-1.5b", dataset="gsm8k")[
        "max_solution_tokens"] == GRPOConfig.__dataclass_fields__["max_completion_length"].default


def _fake_generate(completions):
    def generate(model_path, prompts, **options):
        generate.calls.append({"prompts": prompts, **options})
        return Completions([completions[i % len(completions)] for i in range(len(prompts))],
                           [[1] * options["n"] for _ in prompts])
    generate.calls = []
    return generate


def test_run_grades_with_the_real_grader_and_writes_set_and_counts(tmp_path, tiny_model_dir, monkeypatch):
    files.write_jsonl(tmp_path / "train.jsonl", ROWS)
    fake = _fake_generate([["so \\boxed{3}", "\\boxed{3.}", "3", "\\boxed{4}"],
                           ["\\boxed{5}", "no", "no", "no"],
                           ["\\boxed{10}", "\\boxed{10}", "x", "y"]])
    monkeypatch.setattr(sft_data, "generate", fake)
    counts = sft_data.run(_settings(), base=str(tiny_model_dir), data_path=str(tmp_path / "train.jsonl"),
                          out=str(tmp_path / "sft" / "data.jsonl"))
    kept = files.read_jsonl(tmp_path / "sft" / "data.jsonl")
    assert [row["solution"] for row in kept] == ["so \\boxed{3}", "\\boxed{3.}", "\\boxed{10}"]
    written = json.loads((tmp_path / "sft" / "data.json").read_text())
    assert written == counts
    assert (counts["problems"], counts["samples"], counts["correct"], counts["kept"], counts["problems_kept"]) \
        == (3, 12, 4, 3, 2)
    call = fake.calls[0]
    assert call["n"] == 4 and call["greedy"] is False and len(call["prompts"]) == 3
    assert "1+2=?" in call["prompts"][0]  # the model's template around the problem


def test_an_empty_set_is_an_error_naming_the_counts(tmp_path, tiny_model_dir, monkeypatch):
    files.write_jsonl(tmp_path / "train.jsonl", ROWS)
    monkeypatch.setattr(sft_data, "generate", _fake_generate([["\\boxed{7}", "7", "no", "no"]]))
    with pytest.raises(ValueError, match=r"3 problems, 12 samples, 0 correct"):
        sft_data.run(_settings(), base=str(tiny_model_dir), data_path=str(tmp_path / "train.jsonl"),
                     out=str(tmp_path / "data.jsonl"))
    assert not (tmp_path / "data.jsonl").exists()
    assert json.loads((tmp_path / "data.json").read_text())["correct"] == 0


def test_the_cli_samples_with_the_tiny_model(tmp_path, tiny_model_dir):
    """The real hf sampling path end to end, from the command's arguments: an untrained model solves nothing,
    and says so."""
    files.write_jsonl(tmp_path / "train.jsonl", ROWS)
    settings = _settings(samples=2, max_new_tokens=8, batch_size=8)
    with pytest.raises(ValueError, match=r"3 problems, 6 samples, 0 correct"):
        run_main("prepare-sft", "--settings", json.dumps(settings), "--base", tiny_model_dir,
                 "--data", tmp_path / "train.jsonl", "--out", tmp_path / "data.jsonl", "--threads", "1")
    counts = json.loads((tmp_path / "data.json").read_text())
    assert counts["samples"] == 6 and counts["sampling"]["max_new_tokens"] == 8


def test_paper_config_self_distils_every_model_with_the_papers_sft_numbers():
    config = study.load(ROOT / "config" / "paper.yaml")
    for model in config["models"]:
        settings = study.sft_settings(config, model)
        assert study.sft_uses_self_distillation(config, model)
        assert (settings["num_train_epochs"], settings["learning_rate"], settings["per_device_train_batch_size"],
                settings["gradient_accumulation_steps"], settings["max_length"]) == (1, 2e-5, 2, 8, 4096)
        assert study.stage_settings(config, "sft", model=model, dataset="gsm8k")["sft"]["data"] == "self_distill"
    prompts = {model: spec["prompt"] for model, spec in config["models"].items()}
    assert prompts["qwen-math-1.5b"] == "qwen_math"
    assert all(prompt == "r1d" for model, prompt in prompts.items() if model.startswith("r1-"))


def test_the_default_config_keeps_its_worked_solutions():
    config = study.load(ROOT / "config" / "config.yaml")
    assert not study.sft_uses_self_distillation(config, "tiny")
    assert "data" not in study.stage_settings(config, "sft", model="tiny", dataset="arith")["sft"]


def test_a_model_overrides_the_sft_data_source(tmp_path):
    raw = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    raw["models"]["tiny"]["sft"] = {"data": "self_distill", "self_distill": {"samples": 3}}
    raw["sft"]["self_distill"] = {"samples": 5, "keep_per_problem": 1}
    config = study.validate(raw)
    options = study.stage_settings(config, "prepare_sft", model="tiny", dataset="arith")["sft"]["self_distill"]
    assert (options["samples"], options["keep_per_problem"]) == (3, 1)
    raw["sft"]["data"] = "distilled"
    with pytest.raises(study.ConfigError, match="sft.data"):
        study.validate(raw)


def test_the_paper_plan_has_sft_data_sft_rl_and_evaluation_for_every_model():
    table = paper_plan().split("Job stats:", 1)[1].split("\n\n", 1)[0]  # the plan's job count per rule
    jobs = {line.split()[0]: int(line.split()[1]) for line in table.splitlines()
            if len(line.split()) == 2 and line.split()[1].isdigit()}
    config = study.load(ROOT / "config" / "paper.yaml")
    pairs = sum(len(study.model_datasets(config, model)) for model in config["models"])
    assert jobs["prepare_sft"] == jobs["sft"] == jobs["evaluate_sft"] == pairs
    assert jobs["train"] == len(study.rl_cells(config))


def test_a_model_may_start_from_another_jobs_output():
    raw = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    raw["models"]["distilled"] = {"source": "results/tiny/arith/sft/model", "prompt": "plain",
                                  "sft": {"data": "self_distill"}}
    config = study.validate(raw)  # not there yet: Snakemake builds it first
    assert study.sft_uses_self_distillation(config, "distilled")
    raw["models"]["distilled"]["source"] = "elsewhere/tiny/arith/sft/model"
    with pytest.raises(study.ConfigError, match="models.distilled.source"):
        study.validate(raw)


# --- sft.format: think_answer (open-r1's tags) ---------------------------------------------------------

# open-r1's format reward (src/open_r1/rewards.py, format_reward): what the tagged targets must match.
OPEN_R1_FORMAT = r"^<think>\n.*?\n</think>\n<answer>\n.*?\n</answer>$"


@pytest.mark.parametrize("solution, reasoning, boxed", [
    ("9+7=16 (6), 2=3 (36). \\boxed{36}", "9+7=16 (6), 2=3 (36).", "\\boxed{36}"),
    ("so \\boxed{\\frac{1}{2}} is it.\nDone", "so is it.\nDone", "\\boxed{\\frac{1}{2}}"),
    ("\\boxed{1} no, \\fbox{2}", "\\boxed{1} no,", "\\fbox{2}"),       # the grader's answer: the last box
])
def test_think_answer_puts_the_reasoning_in_think_and_the_graded_box_in_answer(solution, reasoning, boxed):
    import re

    from grpo_lambda.grading import grade
    from grpo_lambda.grading.extract import extract_boxed

    tagged = sft_data.think_answer(solution)
    assert tagged == f"<think>\n{reasoning}\n</think>\n<answer>\n{boxed}\n</answer>"
    assert re.match(OPEN_R1_FORMAT, tagged, re.DOTALL | re.MULTILINE)
    assert extract_boxed(tagged) == extract_boxed(solution) and grade(tagged, extract_boxed(solution))
    with pytest.raises(ValueError, match="boxed"):
        sft_data.think_answer("no answer here, \\boxed{7")


def test_the_sft_rows_take_the_tags_and_a_solution_without_a_box_is_refused(tiny_model_dir):
    from grpo_lambda import sft
    from grpo_lambda.models import load_tokenizer

    tokenizer = load_tokenizer(str(tiny_model_dir))
    rows = [{"problem": "1+2=?", "solution": "1+2=3. \\boxed{3}"}, {"problem": "2+2=?", "solution": "\\boxed{4}"}]
    plain = sft.sft_dataset(rows, tokenizer, "plain")
    tagged = sft.sft_dataset(rows, tokenizer, "plain", answer_format="think_answer")
    assert plain["prompt"] == tagged["prompt"]
    assert plain["completion"][0] == "1+2=3. \\boxed{3}" + tokenizer.eos_token
    assert tagged["completion"][0] == "<think>\n1+2=3.\n</think>\n<answer>\n\\boxed{3}\n</answer>" + tokenizer.eos_token
    with pytest.raises(ValueError, match=r"1 of 3 solutions have no closed \\boxed\{\}"):
        sft.sft_dataset([*rows, {"problem": "3+3=?", "solution": "six"}], tokenizer, "plain", answer_format="think_answer")


def test_the_length_limit_counts_the_tags_when_sft_teaches_them(tmp_path, tiny_model_dir, monkeypatch):
    """A correct sample of 12 generated tokens fits a 20-token limit as it is, and not in tags (about 40 tokens)."""
    files.write_jsonl(tmp_path / "train.jsonl", ROWS[:1])
    monkeypatch.setattr(sft_data, "generate", _fake_generate([["1+2=3 \\boxed{3}"] * 4]))
    fake_lengths = sft_data.generate

    def generate(model_path, prompts, **options):
        result = fake_lengths(model_path, prompts, **options)
        return Completions(result.texts, [[12] * options["n"] for _ in prompts])

    monkeypatch.setattr(sft_data, "generate", generate)
    settings = {**_settings(), "max_solution_tokens": 20}
    boxed = sft_data.run(settings, base=str(tiny_model_dir), data_path=str(tmp_path / "train.jsonl"),
                         out=str(tmp_path / "a.jsonl"))
    assert (boxed["kept"], boxed["too_long"]) == (1, 0)
    settings["sft"]["format"] = "think_answer"
    with pytest.raises(ValueError, match="kept no solutions"):
        sft_data.run(settings, base=str(tiny_model_dir), data_path=str(tmp_path / "train.jsonl"),
                     out=str(tmp_path / "b.jsonl"))
    assert json.loads((tmp_path / "b.json").read_text())["too_long"] == 4


def test_the_think_answer_overlay_reaches_sampling_sft_and_every_prompt():
    """config/sft/think-answer.yaml: the tag format in the sampling and SFT settings, and open-r1's GRPO system prompt
    (its recipes' system_prompt, word for word) in every model's prompt, in every stage."""
    from snakemake.utils import update_config

    from grpo_lambda.data.prompts import render

    open_r1_system = ("You are a helpful AI Assistant that provides well-reasoned and detailed responses. You first "
                      "think about the reasoning process as an internal monologue and then provide the user with the "
                      "answer. Respond in the following format: <think>\n...\n</think>\n<answer>\n...\n</answer>")
    raw = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    config = study.validate(raw)
    plain = study.stage_settings(config, "sft", model="qwen-math-1.5b", dataset="gsm8k")
    assert "format" not in plain["sft"] and plain["model"].get("system_prompt") is None  # SFT jobs keep their params
    assert "format" not in study.stage_settings(config, "prepare_sft", model="qwen-math-1.5b", dataset="gsm8k")["sft"]
    update_config(raw, yaml.safe_load((ROOT / "config" / "sft" / "think-answer.yaml").read_text()))
    config = study.validate(raw)
    for model in config["models"]:
        assert study.stage_settings(config, "sft", model=model, dataset="gsm8k")["sft"]["format"] == "think_answer"
        assert study.stage_settings(config, "prepare_sft", model=model, dataset="gsm8k")["sft"]["format"] \
            == "think_answer"
        for stage in ("sft", "train", "evaluate"):
            part = study.stage_settings(config, stage, model=model, dataset="gsm8k", variant="grpo")["model"]
            assert (part["prompt"], part["system_prompt"]) == (config["models"][model]["prompt"], open_r1_system)
        # open-r1's format readings are monitored beside the trained grader, never trained on
        from grpo_lambda.grading.reward import reward_specs

        rl = study.stage_settings(config, "train", model=model, dataset="gsm8k", variant="grpo")["rl"]
        weights = {spec["name"]: spec["weight"] for spec in reward_specs(rl)}
        assert weights == {"evaluation": 1.0, "boxed": 0.0, "think_format": 0.0, "tag_count": 0.0}
    prompt = render(None, "qwen_math", "1+1?", open_r1_system)  # qwen_math's system turn, replaced
    assert prompt.startswith("<|im_start|>system\n" + open_r1_system + "<|im_end|>")


def test_a_chat_sft_set_refuses_the_tag_format():
    raw = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    raw["sft"].update(data="open_r1", format="think_answer")
    with pytest.raises(study.ConfigError, match="sft.format 'think_answer'.*open_r1"):
        study.validate(raw)


@pytest.mark.parametrize("config_path, rows", [("tests/data/config-e2e.yaml", 128), ("config/rehearsal.yaml", 256)])
def test_the_chat_sft_fixture_is_the_task_on_problems_the_rl_sets_do_not_hold(config_path, rows):
    """The chat SFT sets of the end-to-end config and the rehearsal (sft.open_r1.path): the first `rows` of seed 11's
    level-1 sums that no training set of the config holds, with the same teacher (half the carries dropped), in
    Bespoke-Stratos-17k's fields. An SFT set of the RL problems themselves is memorised, and the samples of a
    problem then agree within a group (measured: tests/data/config-e2e.yaml, tiny-shared)."""
    from grpo_lambda.data import arith

    config = yaml.safe_load((ROOT / config_path).read_text())
    held = {row["problem"] for spec in config["datasets"].values()
            for row in arith.generate(**{key: value for key, value in spec.items() if key != "source"})}
    drawn = [row for row in arith.generate(600, seed=11, levels=[1], carry_error_rate=0.5) if row["problem"] not in held]
    system = "Solve the sum digit by digit and box the answer."
    expected = [{"system": system,
                 "conversations": [{"from": "user", "value": row["problem"]},
                                   {"from": "assistant", "value": row["solution"]}],
                 "messages": [{"role": "user", "content": row["problem"]},
                              {"role": "assistant", "content": row["solution"]}]}
                for row in drawn[:rows]]
    assert files.read_jsonl(ROOT / config["sft"]["open_r1"]["path"]) == expected
