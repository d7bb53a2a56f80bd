"""config/paper.yaml pins what the paper's stack did where TRL 1.16's defaults differ."""

from pathlib import Path

import pytest

from grpo_lambda import config
from grpo_lambda.train import build_config
from grpo_lambda.trainer_config import objective_params

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("path", ["config/paper.yaml", "config/beyond.yaml"])
def test_paper_settings_reach_the_trainer_config(path, tmp_path):
    study = config.load(ROOT / path)
    model = next(iter(study["models"]))
    dataset = config.model_datasets(study, model)[0]
    variant = next(name for name in config.model_variants(study, model)
                   if study["variants"][name]["objective"] == "grpo_lambda")
    settings = config.stage_settings(study, "train", model=model, dataset=dataset, variant=variant)
    args = build_config(settings, output_dir=str(tmp_path), seed=0)
    assert args.use_bias_correction_kl is False and args.vllm_importance_sampling_correction is False
    assert args.loss_type == "bnpo" and args.beta == 0.04
    assert settings["rl"]["max_prompt_length"] == 256
    params = objective_params(args)
    # n = the run's maximum completion length (Appendix A.3), not the batch's longest
    assert params.form == "absolute" and params.trace_length == args.max_completion_length == 256
    # the optimiser of the paper's TRL (docs/paper-vs-code.md, "optimiser, learning rate")
    assert (args.learning_rate, args.lr_scheduler_type, args.weight_decay) == (1e-6, "linear", 0.0)
    assert params.kl_ratio_correction is False
