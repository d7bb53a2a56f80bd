"""The absolute form's n is the trace length, a constant of the run: a completion's trace weights and its
loss do not depend on how wide the batch it came in was padded."""

import dataclasses

import pytest
import torch
from datasets import Dataset
from transformers import PreTrainedTokenizerFast

from grpo_lambda.objectives import ObjectiveParams, policy_loss
from grpo_lambda.traces import apply_trace, trace_matrix
from grpo_lambda.trainer import GRPOLambdaTrainer
from grpo_lambda.trainer_config import GRPOLambdaConfig, objective_params
from trainer_batch import loss_grads_metrics

ABSOLUTE = [("recent", "absolute"), ("both", "absolute")]
EVERY_FORM = [*ABSOLUTE, ("recent", "relative"), ("both", "relative"), ("early", "relative")]


@pytest.mark.parametrize("style, form", EVERY_FORM)
@pytest.mark.parametrize("width, length", [(5, 5), (5, 9), (7, 64), (1, 3)])
def test_dense_oracle_with_a_trace_length(style, form, width, length):
    """trace_matrix(n, length=L) is the top-left n×n block of trace_matrix(L), for every form."""
    kwargs = dict(style=style, form=form, eps=1e-3)
    block = trace_matrix(length, 0.8, **kwargs)[:width, :width]
    assert torch.equal(trace_matrix(width, 0.8, length=length, **kwargs), block)
    x = torch.randn(3, width, dtype=torch.float64, generator=torch.Generator().manual_seed(width))
    torch.testing.assert_close(apply_trace(x, 0.8, length=length, **kwargs), x @ block.T, rtol=1e-12, atol=1e-12)


def test_absolute_weights_by_hand_at_a_trace_length():
    """recent: κ^(n−1−c); both: max(κ^(n−c), κ^c), with n the trace length, not the width."""
    recent = trace_matrix(3, 0.5, form="absolute", length=5)
    assert recent[2, :2].tolist() == [0.5**4, 0.5**3]
    both = trace_matrix(3, 0.5, form="absolute", style="both", length=5)
    assert both[2, :2].tolist() == [1.0, 0.5**1]  # max(κ^5, κ^0), max(κ^4, κ^1)
    assert trace_matrix(3, 0.5, form="absolute")[2, :2].tolist() == [0.5**2, 0.5]  # default n = 3


@pytest.mark.parametrize("length, culprit", [(3, r"length \(3\) must be >= the number of tokens \(4\)"),
                                             (4.0, "length must be an int"), (True, "length must be an int")])
def test_a_trace_length_shorter_than_the_batch_is_refused(length, culprit):
    with pytest.raises(ValueError, match=culprit):
        apply_trace(torch.zeros(2, 4), 0.9, form="absolute", length=length)
    with pytest.raises(ValueError, match=culprit.replace("tokens", "tokens")):
        trace_matrix(4, 0.9, form="absolute", length=length)


def padded(rows, width):
    """(B, width) tensors from lists of per-token values, zero-padded on the right, and the mask."""
    values = torch.zeros(len(rows), width, dtype=torch.float64)
    mask = torch.zeros(len(rows), width, dtype=torch.float64)
    for i, row in enumerate(rows):
        values[i, :len(row)] = torch.tensor(row, dtype=torch.float64)
        mask[i, :len(row)] = 1
    return values, mask


@pytest.mark.parametrize("style", ["recent", "both"])
@pytest.mark.parametrize("update", ["trace", "weight"])
def test_same_completion_same_weights_and_loss_at_any_padded_width(style, update):
    """One completion of 6 tokens, in a batch of width 6 or beside a completion of 40 tokens (width 40):
    with the trace length fixed at 64 its per-token trace weights, its loss and its gradient agree."""
    generator = torch.Generator().manual_seed(3)
    completion = {k: (-torch.rand(6, generator=generator, dtype=torch.float64)).tolist() for k in ("new", "old")}
    other = {w: {k: (-torch.rand(w, generator=generator, dtype=torch.float64)).tolist() for k in ("new", "old")}
             for w in (6, 40)}

    def run(width, trace_length):
        logps, mask = padded([completion["new"], other[width]["new"]], width)
        old_logps, _ = padded([completion["old"], other[width]["old"]], width)
        leaf = logps.clone().requires_grad_()
        # one completion per batch for the loss (the other row only sets the padded width)
        params = ObjectiveParams(objective="grpo_lambda", lam=0.9, style=style, form="absolute", eps=1e-7,
                                 update=update, loss_type="bnpo", trace_length=trace_length)
        row_mask = mask.clone()
        row_mask[1] = 0
        loss, metrics = policy_loss(leaf, old_logps, None, torch.tensor([1.0, -0.5], dtype=torch.float64),
                                    row_mask, params)
        (gradient,) = torch.autograd.grad(loss, leaf)
        _, full_metrics = policy_loss(logps, old_logps, None, torch.tensor([1.0, -0.5], dtype=torch.float64), mask,
                                      params)
        weights = full_metrics["trace_weight"][0, :6]
        return loss.detach(), gradient[0, :6], weights

    narrow, wide = run(6, 64), run(40, 64)
    for a, b in zip(narrow, wide):
        torch.testing.assert_close(a, b, rtol=1e-13, atol=1e-15)
    # without a fixed length n is the width, and the same completion is weighted differently
    assert (run(6, None)[2] - run(40, None)[2]).abs().max() > 1e-3


# --- through the trainer's loss -----------------------------------------------------------------------


def one_completion_batch(trainer, width):
    """The same prompt and 5-token completion, right-padded to `width` completion positions, off-policy."""
    generator = torch.Generator().manual_seed(7)
    prompt_ids = torch.randint(10, 20, (1, 4), generator=generator)
    completion_ids = torch.randint(10, 20, (1, 5), generator=generator)
    old_shift = 0.3 * torch.randn(1, 5, generator=generator)
    pad = width - 5
    completion_mask = torch.nn.functional.pad(torch.ones(1, 5, dtype=torch.long), (0, pad))
    completion_ids = torch.nn.functional.pad(completion_ids, (0, pad), value=trainer.processing_class.pad_token_id)
    inputs = {"prompt_ids": prompt_ids, "prompt_mask": torch.ones(1, 4, dtype=torch.long),
              "completion_ids": completion_ids, "completion_mask": completion_mask,
              "advantages": torch.tensor([0.8]), "num_items_in_batch": completion_mask.sum()}
    with torch.no_grad():
        logps, _, _ = trainer._get_per_token_logps_and_entropies(
            trainer.model, torch.cat([prompt_ids, completion_ids], 1),
            torch.cat([inputs["prompt_mask"], completion_mask], 1), width)
    inputs["old_per_token_logps"] = logps + torch.nn.functional.pad(old_shift, (0, pad))
    return inputs


@pytest.mark.parametrize("style", ["recent", "both"])
def test_trainer_loss_of_a_completion_does_not_depend_on_the_padded_width(model_dir, tmp_path, style):
    args = GRPOLambdaConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, report_to="none",
                            per_device_train_batch_size=4, num_generations=4, max_completion_length=16,
                            loss_type="bnpo", trace_lambda=0.7, trace_style=style, trace_form="absolute",
                            trace_eps=1e-7)
    trainer = GRPOLambdaTrainer(model=model_dir, reward_funcs=lambda completions, **kw: [0.0] * len(completions),
                                args=args, processing_class=PreTrainedTokenizerFast.from_pretrained(model_dir),
                                train_dataset=Dataset.from_dict({"prompt": ["1+1="]}))
    assert trainer.objective_params.trace_length == 16  # the default: max_completion_length
    narrow = loss_grads_metrics(trainer, one_completion_batch(trainer, 5), 1)
    wide = loss_grads_metrics(trainer, one_completion_batch(trainer, 12), 1)
    torch.testing.assert_close(narrow[0], wide[0], rtol=1e-5, atol=1e-7)
    for name in narrow[1]:
        torch.testing.assert_close(narrow[1][name], wide[1][name], rtol=1e-4, atol=1e-7, msg=name)
    assert narrow[2]["trace_weight"] == pytest.approx(wide[2]["trace_weight"], rel=1e-6)
    # n = the batch width instead (the behaviour this replaces): the same completion is weighted differently
    trainer.objective_params = dataclasses.replace(trainer.objective_params, trace_length=None)
    narrow_width = loss_grads_metrics(trainer, one_completion_batch(trainer, 5), 1)
    wide_width = loss_grads_metrics(trainer, one_completion_batch(trainer, 12), 1)
    assert abs(narrow_width[2]["trace_weight"] - wide_width[2]["trace_weight"]) > 1e-3


def test_default_trace_length_covers_trls_padding(tmp_path):
    def length(**extra):
        args = GRPOLambdaConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, report_to="none",
                                per_device_train_batch_size=4, num_generations=4, max_completion_length=250,
                                trace_form="absolute", **extra)
        return objective_params(args).trace_length

    assert length() == 250
    assert length(pad_to_multiple_of=128) == 256  # TRL may pad a batch of 250-token completions to 256
    assert length(trace_length=300) == 300
    with pytest.raises(ValueError, match="trace_length"):
        length(trace_length=0)


# --- n = the batch's longest completion (trace_length: batch_max) --------------------------------------


@pytest.mark.parametrize("style", ["recent", "both"])
@pytest.mark.parametrize("update", ["trace", "weight"])
def test_batch_max_is_the_longest_completion_whatever_the_padding(style, update):
    """Completions of 6 and 9 tokens: with batch_max, n = 9 at a padded width of 9, 12 or 40, and the loss,
    gradient and weights equal those of the fixed length 9; a batch whose longest is 6 takes n = 6."""
    generator = torch.Generator().manual_seed(5)
    rows = {k: [(-torch.rand(n, generator=generator, dtype=torch.float64)).tolist() for n in (6, 9)]
            for k in ("new", "old")}

    def run(width, trace_length, keep=(0, 1)):
        logps, mask = padded([rows["new"][i] for i in keep], width)
        old_logps, _ = padded([rows["old"][i] for i in keep], width)
        leaf = logps.clone().requires_grad_()
        params = ObjectiveParams(objective="grpo_lambda", lam=0.9, style=style, form="absolute", eps=1e-7,
                                 update=update, loss_type="bnpo", trace_length=trace_length)
        advantages = torch.tensor([1.0, -0.5][:len(keep)], dtype=torch.float64)
        loss, metrics = policy_loss(leaf, old_logps, None, advantages, mask, params)
        (gradient,) = torch.autograd.grad(loss, leaf)
        return loss.detach(), gradient[:, :9], metrics["trace_weight"][:, :9] * mask[:, :9]

    fixed = run(9, 9)
    for width in (9, 12, 40):
        for a, b in zip(run(width, "batch_max"), fixed):
            torch.testing.assert_close(a, b, rtol=1e-13, atol=1e-15)
    alone = run(12, "batch_max", keep=(0,))
    torch.testing.assert_close(alone[2][:, :6], run(6, 6, keep=(0,))[2][:, :6], rtol=1e-13, atol=1e-15)
    assert (alone[2][0, :6] - fixed[2][0, :6]).abs().max() > 1e-3  # n depends on the batch's longest


def test_the_trainer_takes_the_batch_max_n_whatever_the_padded_width(model_dir, tmp_path):
    """Through GRPOLambdaTrainer's loss: trace_length batch_max gives one 5-token completion n = 5 at a padded width
    of 5 or 12, so its loss, gradients and trace weight agree, and they equal those of a fixed n = 5 (width 5)."""
    def trainer_with(trace_length):
        args = GRPOLambdaConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, report_to="none",
                                per_device_train_batch_size=4, num_generations=4, max_completion_length=16,
                                loss_type="bnpo", trace_lambda=0.7, trace_style="recent", trace_form="absolute",
                                trace_eps=1e-7, trace_length=trace_length)
        return GRPOLambdaTrainer(model=model_dir, reward_funcs=lambda completions, **kw: [0.0] * len(completions),
                                 args=args, processing_class=PreTrainedTokenizerFast.from_pretrained(model_dir),
                                 train_dataset=Dataset.from_dict({"prompt": ["1+1="]}))

    trainer = trainer_with("batch_max")
    assert trainer.objective_params.trace_length == "batch_max"
    narrow = loss_grads_metrics(trainer, one_completion_batch(trainer, 5), 1)
    wide = loss_grads_metrics(trainer, one_completion_batch(trainer, 12), 1)
    fixed = trainer_with(5)
    at_five = loss_grads_metrics(fixed, one_completion_batch(fixed, 5), 1)
    for other in (wide, at_five):
        torch.testing.assert_close(narrow[0], other[0], rtol=1e-5, atol=1e-7)
        for name in narrow[1]:
            torch.testing.assert_close(narrow[1][name], other[1][name], rtol=1e-4, atol=1e-7, msg=name)
        assert narrow[2]["trace_weight"] == pytest.approx(other[2]["trace_weight"], rel=1e-6)
    default = trainer_with(None)  # n = max_completion_length = 16: the same completion weighted differently
    assert abs(loss_grads_metrics(default, one_completion_batch(default, 12), 1)[2]["trace_weight"]
               - narrow[2]["trace_weight"]) > 1e-3


def test_trace_length_values_are_checked_in_the_trainer_config_and_before_any_job(tmp_path):
    from grpo_lambda import config as study

    def length(value):
        args = GRPOLambdaConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, report_to="none",
                                per_device_train_batch_size=4, num_generations=4, max_completion_length=16,
                                trace_form="absolute", trace_length=value)
        return objective_params(args).trace_length

    assert length("batch_max") == "batch_max" and length(3072) == 3072
    for bad in ("longest", 0, 2.5, True):
        with pytest.raises(ValueError, match="trace_length"):
            length(bad)
    from conftest import E2E_CONFIG
    import yaml

    config = yaml.safe_load(E2E_CONFIG.read_text())
    config["rl"]["trl"] = {"trace_length": "longest"}
    with pytest.raises(study.ConfigError, match=r"rl\.trl\.trace_length.*'batch_max'"):
        study.validate(config)
    config["rl"]["trl"] = {"trace_length": "batch_max"}
    study.validate(config)


# --- the grid's trace readings (config/trace/*.yaml after config/paper.yaml), through the pipeline ---------


def paper_grid(*overlays):
    """config/paper.yaml with overlays merged in order, as Snakemake merges several --configfile files."""
    import yaml
    from snakemake.utils import update_config

    from conftest import ROOT
    from grpo_lambda import config as study

    merged = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    for overlay in overlays:
        update_config(merged, yaml.safe_load((ROOT / "config" / overlay).read_text()))
    return study.validate(merged)


def formula(form, style, kappa, n, length, eps):
    """W of the completion of `length` tokens, entry by entry: paper Eq. 1–2 (relative) or Eq. 17–18 (absolute)."""
    weights = torch.zeros(length, length, dtype=torch.float64)
    for t in range(length):
        weights[t, t] = 1.0
        for c in range(t):
            if form == "relative":
                value = kappa ** (t - c) if style == "recent" else max(kappa ** (t - c), kappa ** c)
            else:
                value = kappa ** (n - 1 - c) if style == "recent" else max(kappa ** (n - c), kappa ** c)
            weights[t, c] = max(eps, value)
    return weights


def applied(params, lengths, width):
    """The trace matrix the loss applies to each completion of a batch of these lengths padded to `width`:
    column c of row b is the trace of a unit log-ratio at token c."""
    from grpo_lambda.objectives import trace

    mask = torch.zeros(len(lengths), width, dtype=torch.float64)
    for row, length in enumerate(lengths):
        mask[row, :length] = 1
    matrices = []
    for row, length in enumerate(lengths):
        columns = []
        for c in range(length):
            unit = torch.zeros(len(lengths), width, dtype=torch.float64)
            unit[row, c] = 1.0
            columns.append(trace(unit, mask, params)[row, :length])
        matrices.append(torch.stack(columns, 1))
    return matrices


# reading -> (overlays after paper.yaml, form, eps, n of a completion of `length` in a batch whose longest is
# `longest`, under the model's rl settings)
READINGS = {
    "paper.yaml (max completion length, A.3)": ((), "absolute", 1e-7, lambda length, longest, rl:
                                                 rl["max_completion_length"]),
    "relative": (("trace/relative.yaml",), "relative", 0.0, lambda length, longest, rl: None),
    "released": (("trace/released.yaml",), "absolute", 1e-7, lambda length, longest, rl: 3072),
    "released-batch-max": (("trace/relative.yaml", "trace/released-batch-max.yaml"), "absolute", 1e-7,
                           lambda length, longest, rl: longest),
    "per-sequence": (("trace/per-sequence.yaml",), "absolute", 1e-7, lambda length, longest, rl: length),
    "completion-length": (("trace/released-batch-max.yaml", "trace/completion-length.yaml"), "absolute", 1e-7,
                          lambda length, longest, rl: rl["max_completion_length"]),
}


@pytest.mark.parametrize("reading", READINGS)
def test_each_trace_overlay_trains_the_formula_it_names(reading, tmp_path):
    from grpo_lambda import config as study
    from grpo_lambda.train import build_config

    overlays, form, eps, n_of = READINGS[reading]
    config = paper_grid(*overlays)
    lengths, width = (5, 9), 12
    checked = 0
    for model in ("qwen-math-1.5b", "r1-qwen-7b"):
        for variant in study.model_variants(config, model):
            spec = config["variants"][variant]
            if spec["objective"] != "grpo_lambda":
                continue
            settings = study.stage_settings(config, "train", model=model, dataset="math12k", variant=variant)
            params = objective_params(build_config(settings, output_dir=str(tmp_path), seed=0))
            for length, matrix in zip(lengths, applied(params, lengths, width)):
                n = n_of(length, max(lengths), settings["rl"])
                expected = formula(form, spec["style"], spec["lam"], n, length, eps)
                torch.testing.assert_close(matrix, expected, rtol=1e-12, atol=0, msg=f"{model} {variant} {length}")
            checked += 1
    assert checked == 8 + 1  # every GRPO-λ variant of the 1.5B model and the 7B model's one


@pytest.mark.parametrize("form", ["relative", "absolute"])
def test_both_at_lambda_zero_is_not_grpo(form):
    """0^0 = 1: at λ = 0 the "both" weight max(κ^(·), κ^c) of the first token is 1 in every row, so every token's
    ratio carries the first token's log-ratio; "recent" at λ = 0 (relative form) is the identity, GRPO."""
    both = trace_matrix(6, 0.0, style="both", form=form)
    assert both[:, 0].tolist() == [1.0] * 6 and torch.equal(both[:, 1:], torch.eye(6, dtype=both.dtype)[:, 1:])
    assert torch.equal(trace_matrix(6, 0.0, style="recent", form="relative"), torch.eye(6, dtype=both.dtype))


@pytest.mark.parametrize("style", ["recent", "both"])
@pytest.mark.parametrize("update", ["trace", "weight"])
def test_per_sequence_n_is_each_completions_own_length(style, update):
    """trace_length per_sequence (the released code's use_batch_max_for_trace: false): in a batch of 6- and
    9-token completions padded to 12, each row's loss term, gradient and weights equal those of that completion
    alone at n = its own length, and the 6-token row differs from its batch-max weights (n = 9)."""
    generator = torch.Generator().manual_seed(7)
    new = [(-torch.rand(n, generator=generator, dtype=torch.float64)).tolist() for n in (6, 9)]
    old = [(-torch.rand(n, generator=generator, dtype=torch.float64)).tolist() for n in (6, 9)]

    def weights(rows, old_rows, width, trace_length, advantages):
        logps, mask = padded(rows, width)
        old_logps, _ = padded(old_rows, width)
        leaf = logps.clone().requires_grad_()
        params = ObjectiveParams(objective="grpo_lambda", lam=0.9, style=style, form="absolute", eps=1e-7,
                                 update=update, loss_type="grpo", trace_length=trace_length)
        loss, metrics = policy_loss(leaf, old_logps, None, torch.tensor(advantages, dtype=torch.float64), mask,
                                    params)
        (gradient,) = torch.autograd.grad(loss, leaf)
        return loss.detach(), gradient, metrics["trace_weight"] * mask

    both = weights(new, old, 12, "per_sequence", [1.0, -0.5])
    for row, n in enumerate((6, 9)):
        alone = weights([new[row]], [old[row]], n, n, [[1.0, -0.5][row]])
        # loss_type grpo: a per-sequence mean over 2 rows, so each row's share is half its own loss
        torch.testing.assert_close(both[1][row, :n], alone[1][0] / 2, rtol=1e-12, atol=1e-15)
        torch.testing.assert_close(both[2][row, :n], alone[2][0], rtol=1e-12, atol=1e-15)
        assert both[1][row, n:].abs().max() == 0
    batch_max = weights(new, old, 12, "batch_max", [1.0, -0.5])
    assert (both[2][0, :6] - batch_max[2][0, :6]).abs().max() > 1e-3
    torch.testing.assert_close(both[2][1], batch_max[2][1], rtol=1e-12, atol=1e-15)  # the longest: n = 9 both ways


def test_a_fixed_trace_length_must_hold_the_completion_length_rounded_up_to_the_padding_multiple():
    """max_completion_length 96 padded to a multiple of 64 is a 128-token batch: a fixed n of 100 (above 96,
    below 128) is refused before any job, naming 128; n = 128 is accepted. With a multiple of 32 (96 exactly)
    n = 96 is accepted."""
    import copy

    import yaml

    from conftest import ROOT
    from grpo_lambda import config as study

    default = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    assert default["rl"]["max_completion_length"] == 96

    def validate(**trl):
        config = copy.deepcopy(default)
        config["rl"]["trl"] = {"trace_form": "absolute", **trl}
        return study.validate(config)

    with pytest.raises(study.ConfigError, match=r"rl\.trl\.trace_length \(100\) is shorter than the completions "
                                                r"variant 'grpo' can write \(128 tokens"):
        validate(trace_length=100, pad_to_multiple_of=64)
    validate(trace_length=128, pad_to_multiple_of=64)
    validate(trace_length=96, pad_to_multiple_of=32)
    with pytest.raises(study.ConfigError, match=r"\(95\) is shorter .*\(96 tokens"):
        validate(trace_length=95, pad_to_multiple_of=32)


def test_a_fixed_trace_length_is_checked_against_trls_default_completion_length_where_no_setting_names_one():
    """Neither the variant, rl.trl nor rl sets max_completion_length: the cells train with TRL's default (512),
    so n = 300 is refused naming 512, and a variant's own max_completion_length (256) is the one checked."""
    import copy

    import yaml

    from conftest import ROOT
    from grpo_lambda import config as study

    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    del config["rl"]["max_completion_length"]
    config["rl"]["trl"] = {"trace_form": "absolute", "trace_length": 300}
    assert study.trl_config_fields()["max_completion_length"] == 512
    with pytest.raises(study.ConfigError, match=r"trace_length \(300\) is shorter than the completions variant "
                                                r"'grpo' can write \(512 tokens"):
        study.validate(copy.deepcopy(config))
    for variant in config["variants"].values():
        variant["max_completion_length"] = 256
    study.validate(config)
