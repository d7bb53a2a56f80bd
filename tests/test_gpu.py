"""The trace operator, the objectives and one trainer step of each objective on a CUDA device, in float32 and
bfloat16, against the CPU's float64 results. Marked `gpu`: skipped with the reason where torch sees no CUDA
device; `GRPO_LAMBDA_GPU_TESTS_ON=cpu` runs them on the CPU to check the tests themselves (docs/testing.md)."""

import itertools

import pytest
import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer

from grpo_lambda import traces
from grpo_lambda.objectives import ObjectiveParams, high_entropy_mask, policy_loss
from grpo_lambda.traces import FORMS, STYLES, apply_trace, trace_matrix
from grpo_lambda.trainer import GRPOLambdaTrainer
from grpo_lambda.trainer_config import GRPOLambdaConfig
from grpo_lambda.variants import variant_config_kwargs

pytestmark = pytest.mark.gpu

# (dtype, the largest error allowed, relative to the largest value it is compared with)
DTYPES = {"float32": (torch.float32, 1e-5), "bfloat16": (torch.bfloat16, 2e-2)}


def relative_error(result: torch.Tensor, expected: torch.Tensor) -> float:
    return ((result.detach().double().cpu() - expected).abs().max() / expected.abs().max().clamp(min=1e-300)).item()


def dense_oracle(x64: torch.Tensor, lam: float, **trace) -> torch.Tensor:
    return x64 @ trace_matrix(x64.shape[-1], lam, **trace).T


# --- the trace operator ----------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["auto", "scan", "dense"])
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("style", STYLES)
def test_trace_on_the_device_in_float64_is_exact_with_its_gradient(style, form, method, gpu_device):
    generator = torch.Generator().manual_seed(hash((style, form, method)) % 2**31)
    for lam, eps, (length, trace_length) in itertools.product(
            (0.5, 0.99), (0.0, 1e-7), [(17, None), (300, None), (1000, 1200)]):
        trace = dict(style=style, form=form, eps=eps, length=trace_length)
        x = torch.randn(4, length, dtype=torch.float64, generator=generator)
        upstream = torch.randn(4, length, dtype=torch.float64, generator=generator)
        on_device = x.to(gpu_device).requires_grad_()
        y = apply_trace(on_device, lam, method=method, **trace)
        assert y.device.type == torch.device(gpu_device).type
        (y * upstream.to(gpu_device)).sum().backward()
        matrix = trace_matrix(length, lam, **trace)
        case = f"lam={lam} eps={eps} T={length}"
        assert relative_error(y, x @ matrix.T) <= 1e-10, case
        assert relative_error(on_device.grad, upstream @ matrix) <= 1e-10, case


@pytest.mark.parametrize("dtype_name", DTYPES)
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("style", STYLES)
def test_trace_on_the_device_in_float32_and_bfloat16(style, form, dtype_name, gpu_device):
    """As dispatched (the cached W below the crossover) in both dtypes, and the O(T) operator in float32;
    against float64 on the same rounded inputs. The O(T) operator in bfloat16 is not a contract: its
    prefix sums lose the 8-bit mantissa over hundreds of tokens, and the objectives trace in float32."""
    dtype, tolerance = DTYPES[dtype_name]
    x = torch.randn(8, 1024, generator=torch.Generator().manual_seed(5)).to(dtype)
    trace = dict(style=style, form=form, eps=1e-7)
    expected = dense_oracle(x.double(), 0.99, **trace)
    assert traces.uses_dense(x.to(gpu_device), style, form)  # 1024 tokens: below every crossover
    methods = ["auto", "scan"] if dtype == torch.float32 else ["auto"]
    for method in methods:
        y = apply_trace(x.to(gpu_device), 0.99, method=method, **trace)
        assert y.dtype == dtype
        assert relative_error(y, expected) <= tolerance, method


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_the_device_dispatch_gives_the_cpu_values(dtype, gpu_device):
    """Below the crossover the device multiplies by a cached W and the CPU runs the O(T) operator; above
    it both run the O(T) operator: the same values either way, to the dtype's precision."""
    tolerance = 1e-10 if dtype == torch.float64 else 1e-5
    generator = torch.Generator().manual_seed(8)
    for (style, form), length in itertools.product(itertools.product(STYLES, FORMS), (700, 9000)):
        x = torch.randn(2, length, dtype=dtype, generator=generator)
        on_device = x.to(gpu_device)
        below = length < traces.DENSE_BELOW[form, style] and length * length * x.element_size() <= traces.DENSE_MAX_BYTES
        assert traces.uses_dense(on_device, style, form) == below
        cpu_values = apply_trace(x, 0.99, style=style, form=form, eps=1e-7, method="scan")
        device_values = apply_trace(on_device, 0.99, style=style, form=form, eps=1e-7)
        assert relative_error(device_values, cpu_values.double()) <= tolerance, (style, form, length)


# --- the objectives ----------------------------------------------------------------------------------

B, T = 8, 64
OBJECTIVES = {
    "grpo": ObjectiveParams(),
    "dr_grpo": ObjectiveParams(loss_type="dr_grpo", max_completion_length=T),
    "recent-trace-clamp-kl": ObjectiveParams(objective="grpo_lambda", lam=0.99, eps=1e-7, advantage_clamp=-0.1,
                                             beta=0.04),
    "both-trace-absolute-bnpo": ObjectiveParams(objective="grpo_lambda", lam=0.99, style="both", form="absolute",
                                                eps=1e-7, loss_type="bnpo"),
    "recent-weight": ObjectiveParams(objective="grpo_lambda", lam=0.99, update="weight"),
    "ptrace": ObjectiveParams(objective="ptrace", lam=0.99),
    "strace": ObjectiveParams(objective="strace", lam=0.99),
}


def objective_batch():
    generator = torch.Generator().manual_seed(3)
    logps = -torch.rand(B, T, dtype=torch.float64, generator=generator) * 3
    old_logps = logps + 0.3 * torch.randn(B, T, dtype=torch.float64, generator=generator)
    ref_logps = logps + 0.2 * torch.randn(B, T, dtype=torch.float64, generator=generator)
    mask = (torch.arange(T) < torch.randint(T // 4, T + 1, (B, 1), generator=generator)).double()
    advantages = torch.randn(B, dtype=torch.float64, generator=generator)
    entropies = torch.rand(B, T, dtype=torch.float64, generator=generator)
    return logps, old_logps, ref_logps, mask, advantages, entropies


def loss_and_gradient(params, tensors, device, dtype):
    logps, old_logps, ref_logps, mask, advantages, entropies = (t.to(device=device, dtype=dtype).detach()
                                                                for t in tensors)
    logps.requires_grad_()
    trace_mask = high_entropy_mask(entropies, mask, 0.8) if params.objective == "strace" else None
    loss, _ = policy_loss(logps, old_logps, ref_logps if params.beta else None, advantages, mask, params,
                          trace_mask=trace_mask)
    loss.backward()
    return loss.detach(), logps.grad


@pytest.mark.parametrize("dtype_name", DTYPES)
@pytest.mark.parametrize("name", OBJECTIVES)
def test_objective_on_the_device_matches_the_cpu_in_float64(name, dtype_name, gpu_device):
    dtype, tolerance = DTYPES[dtype_name]
    rounded = tuple(t.to(dtype).double() for t in objective_batch())  # the same inputs, in the tested dtype
    expected_loss, expected_grad = loss_and_gradient(OBJECTIVES[name], rounded, "cpu", torch.float64)
    loss, grad = loss_and_gradient(OBJECTIVES[name], rounded, gpu_device, dtype)
    assert grad.dtype == dtype and expected_grad.abs().max() > 0
    assert relative_error(loss.reshape(1), expected_loss.reshape(1)) <= tolerance
    errors = (grad.double().cpu() - expected_grad).abs() / expected_grad.abs().max()
    if dtype == torch.float32:
        assert errors.max() <= tolerance
    else:  # a ratio that bfloat16 rounds across the clip boundary turns its token's gradient on or off
        assert (errors > tolerance).double().mean() <= 0.01, errors.max()


# --- one trainer step of each objective ------------------------------------------------------------

STEP_ROWS, GROUP, PROMPT, COMPLETION = 8, 4, 5, 10
LEARNING_RATE = 1.0
TRAINER_OBJECTIVES = {
    "grpo": ({"objective": "grpo"}, "dapo"),
    "dr_grpo": ({"objective": "grpo", "loss_type": "dr_grpo", "scale_rewards": "none"}, None),
    "grpo-lambda-recent": ({"objective": "grpo_lambda", "lam": 0.99, "style": "recent", "update": "trace"}, "bnpo"),
    "grpo-lambda-absolute": ({"objective": "grpo_lambda", "lam": 0.99, "style": "both", "form": "absolute",
                              "eps": 1e-7}, "bnpo"),
    "grpo-lambda-weight": ({"objective": "grpo_lambda", "lam": 0.99, "update": "weight"}, "dapo"),
    "ptrace": ({"objective": "ptrace", "lam": 0.99}, "dapo"),
    "strace": ({"objective": "strace", "lam": 0.99, "strace_quantile": 0.8}, "dapo"),
}


def fixed_batch(model_dir) -> dict:
    """Random completions, left-padded prompts, ragged completions; old and reference log-probs a fixed
    perturbation away from the model's own (so ratios clip and the KL has a gradient), on the CPU."""
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    generator = torch.Generator().manual_seed(0)
    prompt_ids = torch.randint(4, model.config.vocab_size, (STEP_ROWS, PROMPT), generator=generator)
    prompt_mask = torch.ones(STEP_ROWS, PROMPT, dtype=torch.long)
    prompt_mask[1::3, :2] = 0
    completion_ids = torch.randint(4, model.config.vocab_size, (STEP_ROWS, COMPLETION), generator=generator)
    lengths = torch.tensor([10, 10, 8, 9, 4, 6, 10, 9]).unsqueeze(1)
    completion_mask = (torch.arange(COMPLETION) < lengths).long()
    with torch.no_grad():
        logits = model(input_ids=torch.cat([prompt_ids, completion_ids], 1),
                       attention_mask=torch.cat([prompt_mask, completion_mask], 1)).logits
    logps = torch.log_softmax(logits[:, PROMPT - 1:-1], -1).gather(-1, completion_ids.unsqueeze(-1)).squeeze(-1)
    return {"prompt_ids": prompt_ids, "prompt_mask": prompt_mask, "completion_ids": completion_ids,
            "completion_mask": completion_mask, "advantages": torch.tensor([1.2, -0.4, -0.4, -0.4, 0.9, 0.9, -0.9, -0.9]),
            "old_per_token_logps": logps + 0.3 * torch.randn(logps.shape, generator=generator),
            "ref_per_token_logps": logps + 0.2 * torch.randn(logps.shape, generator=generator),
            "num_items_in_batch": completion_mask.sum()}


class FixedBatchTrainer(GRPOLambdaTrainer):
    """Generation replaced by a fixed batch, handed over on the trainer's device."""

    batch: dict = {}

    def _generate_and_score_completions(self, inputs):
        return {key: value.to(self.accelerator.device) for key, value in self.batch.items()}


def make_step_trainer(model_dir, out, variant, loss_type, *, device, bf16):
    loss = {"loss_type": loss_type} if loss_type else {}
    args = GRPOLambdaConfig(
        output_dir=str(out), use_cpu=device == "cpu", bf16=bf16, gradient_checkpointing=bf16, report_to="none",
        save_strategy="no", per_device_train_batch_size=STEP_ROWS, num_generations=GROUP,
        max_completion_length=COMPLETION, max_steps=1, learning_rate=LEARNING_RATE, optim="sgd",
        lr_scheduler_type="constant", max_grad_norm=0.0, beta=0.04, logging_steps=1, seed=0, disable_tqdm=True,
        **loss, **variant_config_kwargs(variant))
    return FixedBatchTrainer(model=model_dir, reward_funcs=lambda completions, **kw: [0.0] * len(completions),
                             args=args, train_dataset=Dataset.from_dict({"prompt": ["1+1=?"] * STEP_ROWS}),
                             processing_class=AutoTokenizer.from_pretrained(model_dir))


def weights(trainer) -> dict:
    return {name: p.detach().float().cpu().clone() for name, p in trainer.model.named_parameters() if p.requires_grad}


@pytest.mark.parametrize("precision", ["float32", "bf16 + gradient checkpointing"])
@pytest.mark.parametrize("name", TRAINER_OBJECTIVES)
def test_one_trainer_step_on_the_device_moves_the_weights_by_the_cpu_gradient(name, precision, model_dir, tmp_path,
                                                                             gpu_device):
    """One SGD step (lr 1, no clipping) through the Trainer's own loop on the device: each weight must move
    by −lr × the gradient the CPU computes in float32 on the same batch (float32: to 1e-4 of the step;
    bf16 autocast: the same direction, cosine > 0.99, and size, within 5%)."""
    from trainer_batch import loss_grads_metrics

    variant, loss_type = TRAINER_OBJECTIVES[name]
    FixedBatchTrainer.batch = fixed_batch(model_dir)
    reference = make_step_trainer(model_dir, tmp_path / "cpu", variant, loss_type, device="cpu", bf16=False)
    _, cpu_grads, _ = loss_grads_metrics(reference, FixedBatchTrainer.batch, 1)
    bf16 = precision != "float32"
    trainer = make_step_trainer(model_dir, tmp_path / "device", variant, loss_type, device=gpu_device, bf16=bf16)
    assert next(trainer.model.parameters()).device.type == torch.device(gpu_device).type
    before = weights(trainer)
    trainer.train()
    after = weights(trainer)
    moved = [key for key in before if not torch.equal(before[key], after[key])]
    assert moved == [key for key in before if cpu_grads[key].abs().max() > 0], "the weights with a gradient move"
    for key in moved:
        step, expected = after[key] - before[key], -LEARNING_RATE * cpu_grads[key]
        if bf16:
            cosine = torch.nn.functional.cosine_similarity(step.flatten(), expected.flatten(), dim=0).item()
            assert cosine > 0.99 and abs(step.norm() / expected.norm() - 1) < 0.05, (key, cosine)
        else:  # up to the float32 rounding of the weights themselves (after − before)
            rounding = 2 * torch.finfo(torch.float32).eps * before[key].abs().max()
            assert (step - expected).abs().max() <= 1e-4 * expected.abs().max() + rounding, key
