"""docs/rewards.md: its example reward module and YAML, run as written, and its table of what a reward
function receives, held to what the pipeline and TRL pass."""

import re
import sys

import yaml

from conftest import E2E_CONFIG, ROOT
from grpo_lambda import config as study
from grpo_lambda import tiny, train
from grpo_lambda.grading import reward

DOC = (ROOT / "docs" / "rewards.md").read_text(encoding="utf-8")


def block(language: str) -> str:
    return re.search(rf"```{language}\n(.*?)```", DOC, flags=re.S)[1]


def test_the_example_module_and_yaml_validate_and_reward_as_described(tmp_path, monkeypatch):
    (tmp_path / "my_rewards.py").write_text(block("python"))
    monkeypatch.syspath_prepend(str(tmp_path))  # "or on PYTHONPATH"
    monkeypatch.delitem(sys.modules, "my_rewards", raising=False)
    config = yaml.safe_load(E2E_CONFIG.read_text())
    study.merge(config, yaml.safe_load(block("yaml")))
    validated = study.validate(config)
    functions, weights = reward.reward_functions(reward.reward_specs(validated["rl"]), max_completion_length=48)
    assert [f.__name__ for f in functions] == ["evaluation_reward", "boxed_reward", "length_penalty"]
    assert weights == [1.0, 0.0, 1.0]
    # called as TRL calls it: every keyword of the table, plain strings
    calls = {"prompts": ["p1", "p2"], "completions": ["x" * 250, "The answer is \\boxed{12}."],
             "completion_ids": [[1] * 60, [2] * 8], "answer": ["7", ["12", "12.0"]], "trainer_state": None,
             "log_extra": lambda *a, **k: None, "log_metric": lambda *a, **k: None}
    assert functions[2](**calls) == [-0.001 * 50, 0.0]
    assert reward.user_reward("my_rewards:mentions_answer")(**calls) == [0.0, 1.0]


def test_the_table_names_every_keyword_trl_passes_and_the_rl_set_holds_only_prompt_and_answer():
    table = re.search(r"## What a reward function receives\n(.*?)\n## ", DOC, flags=re.S)[1]
    documented = set(re.findall(r"^\| `(\w+)`(?:, `(\w+)`)?", table, flags=re.M))
    named = {name for pair in documented for name in pair if name}
    assert named == {*reward.TRL_REWARD_KEYWORDS, *reward.DATASET_COLUMNS}
    tokenizer = tiny.build_tokenizer("chatml")
    dataset = train.rl_dataset([{"id": "a", "problem": "1+1?", "answer": "2", "solution": "2"}], tokenizer, "plain")
    assert dataset.column_names == ["prompt", *reward.DATASET_COLUMNS]
    assert isinstance(dataset[0]["prompt"], str)  # text prompts: TRL hands completions over as plain strings
