"""An advantage estimator of the user's own, `advantage_estimator: module:function` from a module outside the
package (a folder on sys.path): docs/rewards.md's example trains a cell and its advantages are what the loss reads,
on NaN (unscored) and weighted rewards; a negated GRPO moves every weight by exactly minus GRPO's step; a bad entry
is refused by the config naming the variant and what is wrong; the fingerprint holds the user's code."""

import copy
import re
import sys
import uuid

import pytest
import torch
import yaml
from datasets import Dataset
from transformers import AutoTokenizer

from conftest import ROOT
from grpo_lambda import advantages as adv
from grpo_lambda import config as study
from grpo_lambda import files, fingerprint, variants
from grpo_lambda.advantages import GroupBatch, estimate_advantages

DOC = (ROOT / "docs" / "rewards.md").read_text(encoding="utf-8")
SECTION = DOC[DOC.index("## An advantage estimator of your own"):]
EXAMPLE = re.search(r"```python\n(.*?)```", SECTION, flags=re.S)[1]
VARIANT = yaml.safe_load(re.search(r"```yaml\n(.*?)```", SECTION, flags=re.S)[1])["variants"]["sign"]

# What the test module adds to the example: the batches the estimator saw and what it returned.
RECORDER = '''
SEEN = []


def recorded_sign_advantage(batch):
    advantages = sign_advantage(batch)
    SEEN.append((batch, advantages))
    return advantages


def negated(batch):
    """GRPO's advantage with its sign turned."""
    from grpo_lambda.advantages import grpo_advantages

    return -grpo_advantages(batch)


def raw_reward(batch):
    """The reward on every token, NaN (unscored) included: what an estimator must not hand the loss."""
    return batch.rewards.unsqueeze(1).expand_as(batch.mask).clone()


def alternate(batch):
    """1 on every token of the even rows, 0 on the odd ones: values to find in the completions log."""
    advantages = torch.zeros(batch.mask.shape)
    advantages[0::2] = 1.0
    return advantages * batch.mask


def two_arguments(batch, scale):
    return batch.advantages


def asks_for_values(batch):
    return batch.advantages


asks_for_values.needs = ("values",)


def reads_oar(batch):
    return batch.advantages.unsqueeze(1) * batch.oar_weights


reads_oar.needs = ("oar_weights",)
'''


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """docs/rewards.md's example module (and the test's additions) in a folder outside the package, on sys.path,
    under a name of its own."""
    name = f"my_advantages_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(EXAMPLE + RECORDER)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def study_with(variant: dict) -> dict:
    config = copy.deepcopy(yaml.safe_load((ROOT / "config" / "config.yaml").read_text()))
    config["variants"]["mine"] = variant
    return config


def make_trainer(model_dir, folder, variant, reward_funcs, reward_weights, **config):
    from grpo_lambda.trainer import GRPOLambdaTrainer
    from grpo_lambda.trainer_config import GRPOLambdaConfig

    args = GRPOLambdaConfig(output_dir=str(folder), use_cpu=True, bf16=False, report_to="none", max_steps=1,
                            per_device_train_batch_size=4, num_generations=4, max_completion_length=8, optim="sgd",
                            learning_rate=0.5, max_grad_norm=0.0, save_strategy="no", seed=0,
                            reward_weights=reward_weights, **config, **variants.variant_config_kwargs(variant))
    dataset = Dataset.from_dict({"prompt": ["1+2=", "3*4=", "5-6=", "7+8="]})
    return GRPOLambdaTrainer(model=model_dir, reward_funcs=reward_funcs, args=args, train_dataset=dataset,
                             processing_class=AutoTokenizer.from_pretrained(model_dir))


def length_reward(completions, **kwargs):
    return [float(len(completion)) for completion in completions]


def test_the_documented_estimator_trains_a_cell_and_its_advantages_reach_the_loss(model_dir, tmp_path, user_module,
                                                                                  monkeypatch):
    """docs/rewards.md's sign_advantage, named module:function by a variant: the config takes it; one training step
    of the tiny model hands it TRL's weighted reward sum with NaN where no function scored a row (row 1 here), it
    gives that row 0, and the advantages the loss reads are exactly the ones it returned."""
    path = f"{user_module}:recorded_sign_advantage"
    assert VARIANT["advantage_estimator"] == "my_advantages:sign_advantage"
    variant = {**VARIANT, "advantage_estimator": path}
    assert study.validate(study_with(variant))["variants"]["mine"]["advantage_estimator"] == path
    scores = []

    def scored_but_row_one(completions, **kwargs):  # None: TRL's "no score" for a row
        scores.append([None if row == 1 else float(len(text)) for row, text in enumerate(completions)])
        return scores[-1]

    def monitor(completions, **kwargs):  # weight 0: logged, never trained on; also silent on row 1
        return [None if row == 1 else 100.0 for row in range(len(completions))]

    trainer = make_trainer(model_dir, tmp_path / "cell", variant, [scored_but_row_one, monitor], [2.0, 0.0])
    generated, read_by_loss = [], []
    generate, compute_loss = trainer._generate_and_score_completions, trainer._compute_loss

    def generate_spy(inputs):
        output = generate(inputs)
        generated.append({key: output[key].clone() for key in ("completion_ids", "advantages")})
        return output

    def loss_spy(model, inputs):
        read_by_loss.append({key: inputs[key].detach().clone() for key in ("completion_ids", "advantages")})
        return compute_loss(model, inputs)

    monkeypatch.setattr(trainer, "_generate_and_score_completions", generate_spy)
    monkeypatch.setattr(trainer, "_compute_loss", loss_spy)
    before = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
    trainer.train()

    seen = sys.modules[user_module].SEEN
    assert len(seen) == len(scores) == len(generated) == 1
    batch, returned = seen[0]
    expected_rewards = torch.tensor([2.0 * s if s is not None else float("nan") for s in scores[0]])
    torch.testing.assert_close(batch.rewards, expected_rewards, equal_nan=True)  # weighted; weight 0 adds nothing
    assert torch.isnan(batch.rewards[1]) and (returned[1] == 0).all()
    assert returned.abs().sum() > 0
    assert torch.equal(generated[0]["advantages"], returned)  # the hook's output is the user's
    # The loss read them, row by row (TRL shuffles the rows of a generation batch before its micro-batches).
    ids, advantages = generated[0]["completion_ids"], generated[0]["advantages"]
    assert sum(len(step["advantages"]) for step in read_by_loss) == len(returned)
    for step in read_by_loss:
        for row_ids, row_advantages in zip(step["completion_ids"], step["advantages"]):
            rows = [row for row in range(len(ids)) if torch.equal(ids[row], row_ids)]
            assert rows and all(torch.equal(advantages[row], row_advantages) for row in rows)
    assert any(not torch.equal(p, before[name]) for name, p in trainer.model.named_parameters())


def test_the_completions_log_shows_the_advantages_the_users_estimator_gave(model_dir, tmp_path, user_module):
    """Where docs/rewards.md sends the user: each logged completion holds the advantages the loss read (the
    estimator's 1 and 0 here: their mean over its tokens and its first token's) beside TRL's group advantage."""
    from grpo_lambda import completions, train

    trainer = make_trainer(model_dir, tmp_path / "cell", {"objective": "grpo", "advantage_estimator":
                                                          f"{user_module}:alternate"}, length_reward, [1.0],
                           logging_steps=1)
    writer = train.WriteCompletions(tmp_path / "completions", every=1, prompts=1)
    writer.trainer = trainer
    trainer.add_callback(writer)
    trainer.train()
    rows = files.read_jsonl(tmp_path / "completions" / completions.file_name(1))
    assert [row["token_advantage_mean"] for row in rows] == [1.0, 0.0, 1.0, 0.0]
    assert [row["token_advantage_first"] for row in rows] == [1.0, 0.0, 1.0, 0.0]
    assert all(row["advantage"] not in (None, 0.0, 1.0) for row in rows)  # TRL's A_i of the lengths, beside them


def test_a_negated_grpo_from_the_users_module_moves_every_weight_by_minus_grpos_step(model_dir, tmp_path,
                                                                                      user_module):
    """On-policy the loss is linear in the advantages: one plain SGD step with −A_i is exactly minus GRPO's."""

    def one_step(folder, variant):
        trainer = make_trainer(model_dir, folder, variant, length_reward, [1.0])
        before = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
        trainer.train()
        return {name: p.detach() - before[name] for name, p in trainer.model.named_parameters()}

    negated = one_step(tmp_path / "negated", {"objective": "grpo", "advantage_estimator": f"{user_module}:negated"})
    grpo = one_step(tmp_path / "grpo", {"objective": "grpo"})
    assert max(delta.abs().max().item() for delta in grpo.values()) > 1e-6
    for name, delta in grpo.items():  # float32 weights near 1 round their steps to about 1e-7
        torch.testing.assert_close(negated[name], -delta, rtol=1e-4, atol=1e-6, msg=name)


def test_advantages_that_carry_an_unscored_rows_nan_are_refused_naming_the_estimator(user_module):
    batch = GroupBatch(rewards=torch.tensor([1.0, float("nan")]), mask=torch.ones(2, 3),
                       advantages=torch.tensor([0.5, -0.5]), group_size=2)
    with pytest.raises(ValueError, match=rf"^advantage estimator '{user_module}:raw_reward' returned 3 NaN or "
                                         r"infinite advantages \(of 6\); an unscored completion's reward is NaN"):
        estimate_advantages(f"{user_module}:raw_reward", batch)
    # the documented example reads them as the built-in estimators do: 0, and out of the mask
    signs = estimate_advantages(f"{user_module}:sign_advantage", batch)
    torch.testing.assert_close(signs, torch.tensor([[1.0] * 3, [0.0] * 3]))
    rewards, mask = adv.scored_rewards(batch)
    assert rewards.tolist() == [1.0, 0.0] and mask[1].sum() == 0


@pytest.mark.parametrize(("entry", "message"), [
    ("no_such_module_xyz:f", r"module 'no_such_module_xyz' cannot be imported"),
    ("{module}:missing", r"module '{module}' \(.*\) has no 'missing'$"),
    ("{module}:sign_advantge", r"has no 'sign_advantge'; did you mean {module}:sign_advantage\?"),
    ("{module}:two_arguments", r"it requires \['scale'\] besides the batch"),
    ("{module}:asks_for_values", r"needs \['values'\], which no batch holds; it may ask for completion_ids"),
    ("{module}:SEEN", r"is a list, not a function or an Estimator"),
    ("{module}:reads_oar", r"needs oar_weights, which OAR computes: set oar_method"),
    ("not written so", r"is not an advantage estimator; known: grpo, otb, tempo, delta_v_bound "
                       r"\(grpo_lambda.variants.ESTIMATORS\), or your own module:function"),
])
def test_a_bad_entry_is_refused_before_any_job_naming_the_variant(user_module, entry, message):
    entry, message = entry.format(module=user_module), message.format(module=user_module)
    with pytest.raises(study.ConfigError, match=r"variants\.mine: advantage_estimator: .*" + message):
        study.validate(study_with({"objective": "grpo", "advantage_estimator": entry}))


def test_the_users_estimator_code_and_choice_are_part_of_the_fingerprint(tmp_path, user_module):
    def settings(estimator):
        config = study.validate(study_with({"objective": "grpo", "advantage_estimator": estimator}))
        return study.stage_settings(config, "train", model="tiny", dataset="arith", variant="mine")

    def digest(settings):
        made = fingerprint.compute(settings, seed=0, base="base", data_path="data",
                                   user_code=fingerprint.user_code_sources(settings))
        return made["settings"]

    mine = settings(f"{user_module}:sign_advantage")
    sources = fingerprint.user_code_sources(mine)
    assert set(sources["user_estimator_sources"]) == {f"{user_module}:sign_advantage"}
    before = digest(mine)
    module = tmp_path / f"{user_module}.py"
    module.write_text(module.read_text() + "\n# edited\n")
    after = digest(mine)
    assert before != after
    other = digest(settings(f"{user_module}:negated"))
    assert other != after
    builtin = settings("tempo")
    assert fingerprint.user_code_sources(builtin) == {}  # no user code: nothing of the user's


def test_the_docs_worked_group_is_what_trl_and_the_example_give(user_module):
    """docs/rewards.md's group of eight with one success: TRL's A_i ((r - mean)/(std + 1e-4), TRL 1.16's group
    scaling) and the documented sign_advantage's per-token mean, as the doc states them."""
    found = re.search(r"logs `advantage` ([\d.]+) and −([\d.]+) \(TRL's:\s+\(r − mean\)/\(std \+ 10⁻⁴\), std ([\d.]+)\) "
                      r"and `token_advantage_mean` (\S+) and −(\S+) \(yours\)", SECTION)
    rewards = torch.tensor([1.0] + [0.0] * 7)
    trl = (rewards - rewards.mean()) / (rewards.std() + 1e-4)
    assert [float(found[1]), -float(found[2]), float(found[3])] == [round(trl[0].item(), 3), round(trl[1].item(), 3),
                                                                     round(rewards.std().item(), 3)]
    batch = GroupBatch(rewards=rewards, mask=torch.ones(8, 4), advantages=trl, group_size=8)
    mine = estimate_advantages(f"{user_module}:sign_advantage", batch).mean(1)
    assert [float(found[4]), -float(found[5])] == [mine[0].item(), mine[1].item()]
