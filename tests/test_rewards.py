"""rl.rewards: the reward functions a cell trains on, by name or a user's module:function, with weights.

The default (rl.reward, or nothing) trains exactly what it trained before rl.rewards existed: the same
functions in the same order with weights [1, 0] and the same train_log.csv columns; a weight-0 reward is
logged and changes nothing of training; a user reward and a system prompt reach the trainer.
"""

import copy
import csv
import json
import sys

import pytest
import torch
import yaml

from conftest import E2E_CONFIG
from grpo_lambda import config as study
from grpo_lambda import fingerprint, prepare, train
from grpo_lambda import trainer as trainer_module
from grpo_lambda.grading import reward
from grpo_lambda.scored_batch import uninformative_groups
from grpo_lambda.trainer import GRPOLambdaTrainer

STEPS = 3


# ---- the reward functions ----------------------------------------------------------------------------

THINK = "<think>\nadd 2 and 2\n</think>\n<answer>\n4\n</answer>"


@pytest.mark.parametrize("completion, prompt, expected", [
    (THINK, "q", 1.0),
    (THINK + "\nand a line after it", "q", 1.0),      # open-r1 anchors the end in multi-line mode
    (THINK + " trailing", "q", 0.0),                   # </answer> not at a line's end
    ("<think>\n\n</think>\n<answer>\n\n</answer>", "q", 1.0),  # empty reasoning and answer
    (" " + THINK, "q", 0.0),                           # must start with the tag
    ("<think>add</think><answer>4</answer>", "q", 0.0),  # each tag on its own line
    ("<think>\nx\n</think>\n<answer>\n4\n</answer>\n</answer>", "q", 1.0),
    ("<think>\nno answer\n</think>", "q", 0.0),
    ("\nadd 2 and 2\n</think>\n<answer>\n4\n</answer>", "User: 2+2?\nAssistant: <think>", 1.0),  # r1 opened it
    ("add 2 and 2\n</think>\n<answer>\n4\n</answer>", "<｜Assistant｜><think>\n", 1.0),  # R1-Distill's template
    ("\nadd 2 and 2\n</think>\n<answer>\n4\n</answer>", "no tag here", 0.0),
    ([{"role": "assistant", "content": THINK}], [{"role": "user", "content": "q"}], 1.0),
])
def test_think_format_is_open_r1s_reading(completion, prompt, expected):
    assert reward.think_format_reward([completion], prompts=[prompt]) == [expected]


def test_tag_count_gives_a_quarter_per_tag_written_once():
    texts = [THINK, "<think>\nonly this", "<think>\n<think>\n\n</think>\n", "\n<answer>\n4\n</answer>", "none"]
    assert reward.tag_count_reward(texts, prompts=["q"] * 5) == [1.0, 0.25, 0.25, 0.5, 0.0]
    assert reward.tag_count_reward(["x\n</think>\n"], prompts=["Assistant: <think>\n"]) == [0.5]


def test_overlong_is_dapos_soft_punishment():
    overlong = reward.make_overlong_reward(max_tokens=20, cache_tokens=8)
    lengths = [1, 12, 13, 16, 20, 21, 40]
    assert overlong([[0] * n for n in lengths]) == [0.0, 0.0, -1 / 8, -0.5, -1.0, -1.0, -1.0]
    with pytest.raises(ValueError, match="cache_tokens"):
        reward.make_overlong_reward(max_tokens=8, cache_tokens=9)


def test_the_shorthand_is_the_pair_every_cell_trained_on():
    for rl, first in (({}, reward.accuracy_reward), ({"reward": "evaluation"}, reward.accuracy_reward),
                      ({"reward": "strict"}, reward.strict_accuracy_reward)):
        functions, weights = reward.reward_functions(reward.reward_specs(rl), max_completion_length=96)
        assert functions == [first, reward.boxed_reward] and weights == [1.0, 0.0]
        assert [f.__name__ for f in functions] == [first.__name__, "boxed_reward"]  # the names TRL logs
    explicit = reward.reward_specs({"rewards": [{"name": "evaluation", "weight": 1.0},
                                                {"name": "boxed", "weight": 0}]})
    assert reward.reward_specs({}) == explicit


def test_overlong_defaults_to_the_cells_completion_length():
    [overlong], _ = reward.reward_functions([{"name": "overlong", "cache_tokens": 4, "weight": 0}],
                                            max_completion_length=10)
    assert overlong([[0] * 6, [0] * 8, [0] * 10]) == [0.0, -0.5, -1.0]


# ---- user rewards: checked when the config is read ---------------------------------------------------

USER_MODULE = '''
def digits(completions, answer, **kwargs):
    return [float(sum(ch.isdigit() for ch in text)) for text in completions]

def sevens(completions, **kwargs):
    return [float(text.count("7")) for text in completions]

def wants_solution(completions, solution, **kwargs):
    return [0.0] * len(completions)

def no_kwargs(completions, answer):
    return [0.0] * len(completions)

def positional(completions, /, **kwargs):
    return [0.0] * len(completions)

def loss(completions, **kwargs):
    return [0.0] * len(completions)

NOT_A_FUNCTION = 3

import functools
partial_sevens = functools.partial(sevens)
'''


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    (tmp_path / "grpo_test_user_rewards.py").write_text(USER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    # each test imports its own copy (this tmp_path's), not one an earlier test left in sys.modules
    monkeypatch.delitem(sys.modules, "grpo_test_user_rewards", raising=False)
    return "grpo_test_user_rewards"


def _config(**rl):
    config = yaml.safe_load(E2E_CONFIG.read_text())
    config["rl"].update(rl)
    return config


def test_a_user_reward_is_imported_and_checked_when_the_config_is_read(user_module):
    rewards = [{"name": "evaluation", "weight": 0.0}, {"name": f"{user_module}:digits", "weight": 1.0}]
    config = study.validate(_config(rewards=rewards))
    functions, weights = reward.reward_functions(reward.reward_specs(config["rl"]), max_completion_length=48)
    # logged by the rl.rewards name they stand for (found: `evaluation` logged as accuracy_reward)
    assert [f.__name__ for f in functions] == ["evaluation_reward", "digits"] and weights == [0.0, 1.0]
    columns = train.reward_columns([f.__name__ for f in functions], weights)
    assert columns["evaluation_reward"] == "rewards/evaluation_reward/mean" and "accuracy_reward" not in columns
    assert functions[1](["a1b22", "none"], answer=["3", "4"]) == [3.0, 0.0]


@pytest.mark.parametrize("name, culprit", [
    ("grpo_test_no_such_module:f", r"module 'grpo_test_no_such_module' cannot be imported"),
    ("{module}:missing", r"has no 'missing'"),
    ("{module}:NOT_A_FUNCTION", r"is a int, not a function"),
    ("{module}:wants_solution", r"requires \['solution'\], which TRL does not pass"),
    ("{module}:no_kwargs", r"TRL also passes \['prompts', .*\] by keyword: add \*\*kwargs"),
    ("{module}:positional", r"positional-only"),
    ("{module}:partial_sevens", r"is a partial without a __name__, which TRL logs a reward by"),
    ("not written so", r"neither a reward of grpo_lambda.grading.reward .* nor a user reward written module:function"),
    ("formats", r"'formats' is neither a reward"),
])
def test_a_bad_reward_is_refused_naming_the_entry_and_why(user_module, name, culprit):
    rewards = [{"name": "evaluation"}, {"name": name.format(module=user_module), "weight": 0}]
    with pytest.raises(study.ConfigError, match=r"rl\.rewards\[1\]\.name: .*" + culprit):
        study.validate(_config(rewards=rewards))


@pytest.mark.parametrize("rl, culprit", [
    ({"reward": "strict", "rewards": [{"name": "evaluation"}]}, r"rl\.reward and rl\.rewards: give rl\.rewards or"),
    ({"rewards": [{"name": "evaluation", "weight": 0}, {"name": "boxed", "weight": 0}]}, r"every weight is 0"),
    ({"rewards": [{"name": "evaluation"}, {"name": "format", "weight": 0}]},
     r"rl\.rewards\[1\]\.name: .*'format' is now 'boxed' .*'think_format'"),
    ({"rewards": [{"name": "evaluation"}, {"name": "evaluation", "weight": 0}]},
     r"rl\.rewards\[1\]: 'evaluation' is logged as 'evaluation_reward', like rl\.rewards\[0\]"),
    ({"rewards": [{"name": "evaluation"}, {"name": "overlong", "weight": 1}]},
     r"rl\.rewards\[1\]\.name: .*cache_tokens"),
    ({"rewards": [{"name": "evaluation"}, {"name": "overlong", "cache_tokens": 8, "max_tokens": 4}]},
     r"cache_tokens \(8\) must not exceed max_tokens \(4\)"),
    ({"rewards": [{"name": "evaluation", "cache_tokens": 3}]}, r"reward 'evaluation' takes no parameters"),
    ({"rewards": [{"name": "overlong", "cache_tokens": 3, "cache": 3}]}, r"has no parameter\(s\) \['cache'\]"),
    ({"rewards": [{"name": "evaluation", "weight": "1"}]}, r"rl\.rewards\.0\.weight"),
    ({"rewards": [{"weight": 1}]}, r"'name' is a required property"),
    ({"trl": {"reward_weights": [1.0, 1.0]}},
     r"rl\.trl\.reward_weights is set by the pipeline itself; set the weights"),
])
def test_bad_reward_settings_are_refused_naming_the_key(rl, culprit):
    with pytest.raises(study.ConfigError, match=culprit):
        study.validate(_config(**rl))


def test_a_models_own_rewards_are_checked_where_they_are_written(user_module):
    config = _config()
    config["models"]["tiny"]["rl"] = {"rewards": [{"name": "evaluation"}, {"name": f"{user_module}:missing"}]}
    with pytest.raises(study.ConfigError, match=r"models\.tiny\.rl\.rewards\[1\]\.name"):
        study.validate(config)


# ---- train_log.csv columns and DAPO's filter ---------------------------------------------------------

def test_the_default_logs_exactly_the_log_columns():
    assert train.reward_columns(["accuracy_reward", "boxed_reward"], [1.0, 0.0]) == train.LOG_COLUMNS
    assert train.reward_columns(["strict_accuracy_reward", "boxed_reward"], [1.0, 0.0]) == train.LOG_COLUMNS
    assert train.LOG_COLUMNS["reward"] == "reward"  # the tables read these two
    assert train.LOG_COLUMNS["boxed_reward"] == "rewards/boxed_reward/mean"


def test_every_other_reward_gets_a_column_after_the_boxed_reward():
    columns = train.reward_columns(["accuracy_reward", "boxed_reward", "overlong_reward", "loss"], [1, 0, 0, 0])
    added = [column for column in columns if column not in train.LOG_COLUMNS]
    assert added == ["overlong_reward", "rewards/loss"]  # "loss" is taken: TRL's key name instead
    names = list(columns)
    assert names.index("overlong_reward") == names.index("boxed_reward") + 1
    assert columns["overlong_reward"] == "rewards/overlong_reward/mean"
    # Two trained rewards, or one at another weight: each its own column besides the weighted `reward`.
    assert {"accuracy_reward", "strict_accuracy_reward"} < set(
        train.reward_columns(["accuracy_reward", "strict_accuracy_reward"], [0.5, 0.5]))
    assert "digits" in train.reward_columns(["digits"], [2.0])


def test_weight_zero_rewards_reach_trl_at_weight_zero_and_dapos_filter_ignores_them(tmp_path):
    config = study.validate(_config(rewards=[{"name": "evaluation"}, {"name": "boxed", "weight": 0},
                                             {"name": "tag_count", "weight": 0}]))
    settings = study.stage_settings(config, "train", model="tiny", dataset="arith", variant="grpo")
    settings["variant"] = {"objective": "grpo", "loss_type": "dapo", "dynamic_sampling": True}
    args = train.build_config(settings, output_dir=str(tmp_path), seed=0)
    assert args.reward_weights == [1.0, 0.0, 0.0] and args.dynamic_sampling
    # Accuracy constant in both groups; the monitors vary in the first: both groups are dropped.
    rewards = torch.tensor([[1.0, 0.0, 0.25], [1.0, 1.0, 1.0], [0.0, 1.0, 0.5], [0.0, 1.0, 0.5]])
    assert uninformative_groups(rewards, torch.tensor(args.reward_weights), 2).tolist() == [True, True]


# ---- training: what the trainer receives, and what it does with it ------------------------------------

def length_reward(completions, **kwargs):
    """Stands in for the grader on the untrained tiny model (which boxes nothing): a reward that varies."""
    return [len(completion) / 100 for completion in completions]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("rewards-data")
    path = folder / "arith.jsonl"
    prepare.run(study.stage_settings(study.validate(_config()), "prepare", dataset="arith"), str(path))
    return path


class Received:
    """A GRPOLambdaTrainer that records the reward functions, names and weights it was built with."""

    seen = []

    @classmethod
    def trainer_class(cls):
        class Spy(GRPOLambdaTrainer):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                cls.seen.append((list(self.reward_funcs), list(self.reward_func_names), self.reward_weights.tolist()))

        return Spy


def train_cell(config, cell, base, data, monkeypatch, variant="grpo"):
    monkeypatch.setattr(trainer_module, "GRPOLambdaTrainer", Received.trainer_class())
    Received.seen.clear()
    settings = study.stage_settings(study.validate(config), "train", model="tiny", dataset="arith", variant=variant)
    train.run(settings, base=str(base), data_path=str(data), cell_dir=str(cell), seed=0)
    [received] = Received.seen
    with open(cell / "train_log.csv") as handle:
        log = list(csv.DictReader(handle))
    assert [int(row["step"]) for row in log] == list(range(1, STEPS + 1))
    return received, log, (cell / "model" / "model.safetensors").read_bytes()


def short_run(**rl):
    return _config(max_steps=STEPS, save_steps=100, log_completions={"every": 1, "prompts": 2},
                   max_completion_length=24, **rl)


@pytest.mark.slow
def test_the_default_trains_as_before_and_weight_zero_rewards_change_nothing(tmp_path, tiny_model_dir, data,
                                                                             monkeypatch):
    monkeypatch.setitem(reward.REWARDS, "evaluation", length_reward)
    runs = {
        "shorthand": short_run(),  # rl.reward left out: evaluation
        "explicit": short_run(rewards=[{"name": "evaluation", "weight": 1.0}, {"name": "boxed", "weight": 0.0}]),
        "monitored": short_run(rewards=[{"name": "evaluation", "weight": 1.0}, {"name": "boxed", "weight": 0.0},
                                        {"name": "tag_count", "weight": 0}, {"name": "overlong", "weight": 0,
                                                                             "cache_tokens": 16}]),
    }
    results = {name: train_cell(config, tmp_path / name, tiny_model_dir, data, monkeypatch)
               for name, config in runs.items()}

    # What the trainer receives by default is what the code before rl.rewards handed it:
    # reward_funcs=[REWARDS[rl.reward], boxed_reward] with reward_weights [1.0, 0.0].
    (functions, names, weights), log, _ = results["shorthand"]
    assert functions == [reward.REWARDS["evaluation"], reward.boxed_reward] and weights == [1.0, 0.0]
    assert names == ["length_reward", "boxed_reward"]
    assert list(log[0]) == list(train.LOG_COLUMNS)  # the same columns, in the same order
    assert results["explicit"][0] == results["shorthand"][0]

    # The explicit list trains bit for bit as the shorthand; so do weight-0 monitors added to it.
    def trained(name):
        _, log, model = results[name]
        return [(row["loss"], row["reward"], row["boxed_reward"], row["grad_norm"]) for row in log], model

    assert trained("explicit") == trained("shorthand")
    assert trained("monitored") == trained("shorthand")
    assert len({row["loss"] for row in results["shorthand"][1]}) > 1  # the loss moved: a real comparison
    monitored_log = results["monitored"][1]
    assert results["monitored"][0][2] == [1.0, 0.0, 0.0, 0.0]
    assert all(0 <= float(row["tag_count_reward"]) <= 1 and -1 <= float(row["overlong_reward"]) <= 0
               for row in monitored_log)
    assert any(float(row["overlong_reward"]) < 0 for row in monitored_log)  # logged, and not trained on


@pytest.mark.slow
def test_a_user_reward_and_a_system_prompt_reach_training(tmp_path, tiny_model_dir, data, user_module, monkeypatch):
    config = short_run(rewards=[{"name": "evaluation", "weight": 0}, {"name": f"{user_module}:sevens", "weight": 2}])
    config["models"]["tiny"]["system_prompt"] = "Add the numbers."
    (functions, names, weights), log, _ = train_cell(config, tmp_path / "cell", tiny_model_dir, data, monkeypatch)
    assert names == ["evaluation_reward", "sevens"] and weights == [0.0, 2.0]

    problems = {row["problem"] for row in map(json.loads, data.read_text().splitlines())}
    logged = [json.loads(line) for path in sorted((tmp_path / "cell" / "completions").glob("step-*.jsonl"))
              for line in path.read_text().splitlines()]
    assert {row["step"] for row in logged} == set(range(1, STEPS + 1))
    for row in logged:
        # The prompt the trainer generated from, with the system turn in the tiny model's ChatML template.
        head, tail = "<|im_start|>system\nAdd the numbers.<|im_end|>\n<|im_start|>user\n", \
            "<|im_end|>\n<|im_start|>assistant\n"
        assert row["prompt"].startswith(head) and row["prompt"].endswith(tail)
        assert row["prompt"][len(head):-len(tail)] in problems
        assert row["reward"] == pytest.approx(2.0 * row["completion"].count("7"))  # the user's reward, weighted
    for step in log:
        rows = [row for row in logged if row["step"] == int(step["step"])]
        assert len(rows) == 16  # the whole generation batch: 2 prompts x 8
        sevens = sum(row["completion"].count("7") for row in rows) / len(rows)
        assert float(step["sevens"]) == pytest.approx(sevens)
        assert float(step["reward"]) == pytest.approx(2.0 * sevens)
        assert float(step["evaluation_reward"]) == 0.0  # logged at weight 0 (the untrained model boxes nothing)
    assert any(float(step["sevens"]) > 0 for step in log)

    # The user's reward code is part of the settings the cell's fingerprint hashes: edited, the cell starts afresh.
    settings = study.stage_settings(study.validate(copy.deepcopy(config)), "train", model="tiny", dataset="arith",
                                    variant="grpo")
    before = fingerprint.user_code_sources(settings)
    module = tmp_path / f"{user_module}.py"
    module.write_text(module.read_text() + "\n# edited\n")
    after = fingerprint.user_code_sources(settings)
    assert set(before["user_reward_sources"]) == {f"{user_module}:sevens"}
    made = {sources: fingerprint.compute(settings, seed=0, base="base", data_path="data", user_code=code)
            for sources, code in (("before", before), ("after", after))}
    assert made["before"]["settings"] != made["after"]["settings"]
    assert made["before"]["stage_settings"] == made["after"]["stage_settings"]  # the settings alone did not change
    assert fingerprint.user_code_files(settings) == [str(module)]  # the train rule's input: outside the working folder
    default = study.stage_settings(study.validate(_config()), "train", model="tiny", dataset="arith", variant="grpo")
    assert fingerprint.user_code_sources(default) == {}  # without user rewards: nothing of the user's
    assert fingerprint.user_code_files(default) == []
