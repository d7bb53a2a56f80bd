"""The baseline's loss_type: the default study keeps TRL 1.16's default, dapo, which on one process without
gradient accumulation (the default study's setting) is the same loss as bnpo, the paper grid's; they part
when a batch is split into micro-batches of unequal token counts (config/config.yaml's comment,
docs/objectives.md)."""

import torch

from grpo_lambda import config as study
from grpo_lambda.trainer import GRPOLambdaTrainer
from grpo_lambda.trainer_config import GRPOLambdaConfig

from conftest import ROOT
from trainer_batch import loss_grads_metrics, make_inputs, make_trainer


def test_the_default_study_leaves_loss_type_to_trl_and_the_paper_grid_sets_bnpo():
    default = study.load(ROOT / "config" / "config.yaml")
    assert "loss_type" not in default["rl"] and all("loss_type" not in v for v in default["variants"].values())
    assert study.trl_config_fields()["loss_type"] == "dapo"
    assert study.load(ROOT / "config" / "paper.yaml")["rl"]["loss_type"] == "bnpo"


def test_dapo_is_bnpo_on_one_process_without_accumulation_and_not_when_the_batch_is_split(model_dir, tmp_path):
    for objective in ({"objective": "grpo"}, {"objective": "grpo_lambda", "trace_lambda": 0.99}):
        results = {}
        for loss_type in ("dapo", "bnpo"):
            trainer = make_trainer(model_dir, GRPOLambdaTrainer, GRPOLambdaConfig, tmp_path / loss_type,
                                   loss_type=loss_type, **objective)
            inputs = make_inputs(trainer, off_policy=True, with_ref=False)
            whole = loss_grads_metrics(trainer, inputs, 1)
            # the same micro-batch as one of two accumulation steps, the other holding 7 tokens more
            split_inputs = {**inputs, "num_items_in_batch": inputs["num_items_in_batch"] * 2 + 7}
            trainer.args.steps_per_generation = 2
            split = loss_grads_metrics(trainer, split_inputs, 2)
            results[loss_type] = whole[0], split[0]
        torch.testing.assert_close(results["dapo"][0], results["bnpo"][0], rtol=1e-6, atol=1e-9)
        assert not torch.allclose(results["dapo"][1], results["bnpo"][1], rtol=1e-3)
